//! `semantic_vad` with a turn model: the judge of the user's pauses. Silero VAD (or the
//! energy detector) finds the voice; inside a turn, once the voice has been silent for the
//! candidate pause, the judge asks the turn model (Smart Turn, through a [`TurnPort`])
//! whether the turn is complete, once per pause: the model drifts towards "complete" as a
//! pause grows, so a growing pause is not scored again. The answer ends the turn after a
//! pause that shrinks with the model's confidence; the words heard so far (the speculative
//! transcript, when there is one) veto an end after a word that cannot end a sentence; and
//! the VAD's own silence window, set to the preset's maximum pause, ends every turn in the
//! end. A model that fails or does not answer in time falls back to the fixed silence that
//! `semantic_vad` uses without a model.
//!
//! Sans IO: the session feeds it the detector's silence, the time and the words; it says
//! where the turn ends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ledger::SAMPLES_PER_MS;
use super::port::TurnPort;

/// How long a score may take before the pause falls back to fixed silence.
pub(super) const SCORE_TIMEOUT: Duration = Duration::from_millis(1500);
/// The audio a score reads: the last 8 s of the turn, at 24 kHz.
pub(super) const SCORED_SAMPLES: u64 = 8_000 * SAMPLES_PER_MS;

/// Silence after which the words so far are asked under every preset (a speculative start
/// transcribes the turn): the detector's first silent window (Silero scores 32 ms chunks),
/// so that the words are in by the time the score is (the transcriber takes longer than the
/// turn model).
pub(super) const WORDS_MS: u32 = 32;

/// One `eagerness`'s thresholds and pauses (milliseconds of silence after the voice).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Preset {
    /// Silence after which the pause is scored.
    pub candidate_ms: u32,
    /// At or above this probability, the turn ends after [`Self::immediate_ms`].
    pub immediate: f32,
    /// The pause after a very confident score.
    pub immediate_ms: u32,
    /// At or above this probability, the turn ends after [`Self::confident_ms`].
    pub confident: f32,
    /// The pause after a confident score.
    pub confident_ms: u32,
    /// Every turn ends after this much silence, whatever the model says.
    pub max_pause_ms: u32,
    /// The pause when the model failed or did not answer in time (the fixed silence that
    /// `semantic_vad` uses without a turn model).
    pub fallback_ms: u32,
}

impl Preset {
    /// The preset of `eagerness` (`low`, `medium`, `high`; `auto` and anything else:
    /// `medium`).
    pub fn of(eagerness: &str) -> Self {
        let fallback_ms = crate::protocol::session::semantic_silence_ms(eagerness);
        match eagerness {
            "high" => Self {
                candidate_ms: 120,
                immediate: 0.90,
                immediate_ms: 120,
                confident: 0.70,
                confident_ms: 300,
                max_pause_ms: 2_000,
                fallback_ms,
            },
            "low" => Self {
                candidate_ms: 200,
                immediate: 0.97,
                immediate_ms: 500,
                confident: 0.90,
                confident_ms: 1_000,
                max_pause_ms: 5_000,
                fallback_ms,
            },
            _ => Self {
                candidate_ms: 160,
                immediate: 0.95,
                immediate_ms: 200,
                confident: 0.80,
                confident_ms: 500,
                max_pause_ms: 3_000,
                fallback_ms,
            },
        }
    }
}

/// What is known of the pause's score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Score {
    /// Asked, not answered yet.
    Pending,
    /// The model failed, was busy, or did not answer in time.
    Failed,
    /// The probability that the turn is complete.
    Complete(f32),
}

/// Why a turn ended where the judge said (a metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// A very confident score.
    Immediate,
    /// A confident score.
    Confident,
    /// The model could not judge: the fixed silence.
    Fallback,
}

impl Ending {
    fn label(self) -> &'static str {
        match self {
            Ending::Immediate => "immediate",
            Ending::Confident => "confident",
            Ending::Fallback => "fallback",
        }
    }
}

/// How long past its end a turn waits for words that are on their way (the speculative
/// transcript of the pause; the transcriber may be busy): they may veto the end.
pub const WORDS_WAIT_MS: u32 = 300;

/// What the words heard so far (the speculative transcript) say of the pause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Words {
    /// None are coming (no speculative start).
    Absent,
    /// A transcript of the turn so far is on its way.
    Pending,
    /// They end where no sentence ends ([`unfinished`]): they veto an end.
    Open,
    /// They end a sentence (".", "?", "!"): a confident score ends the turn as soon as a
    /// very confident one does.
    Closed,
    /// Neither.
    Plain,
}

impl Words {
    /// What `words` say.
    pub fn of(words: &str) -> Self {
        if unfinished(words) {
            Words::Open
        } else if words.trim_end().ends_with(['.', '?', '!']) {
            Words::Closed
        } else {
            Words::Plain
        }
    }
}

/// Where the turn ends (milliseconds into the pause) given what is known, or `None`: wait
/// (for more silence, the score, the words, or the maximum pause, which the VAD enforces
/// itself).
pub fn decide(
    preset: &Preset,
    score: Score,
    words: Words,
    silence_ms: u32,
) -> Option<(u32, Ending)> {
    let (need, ending) = match score {
        Score::Pending => return None,
        Score::Failed => (preset.fallback_ms, Ending::Fallback),
        Score::Complete(_) if words == Words::Open => return None,
        Score::Complete(p) if p >= preset.immediate => (preset.immediate_ms, Ending::Immediate),
        Score::Complete(p) if p >= preset.confident && words == Words::Closed => {
            (preset.immediate_ms, Ending::Confident)
        }
        Score::Complete(p) if p >= preset.confident => (preset.confident_ms, Ending::Confident),
        Score::Complete(_) => return None,
    };
    let waited = match (words, ending) {
        (Words::Pending, Ending::Immediate | Ending::Confident) => need + WORDS_WAIT_MS,
        _ => need,
    };
    (silence_ms >= waited).then_some((need, ending))
}

/// What a known score means for the pause: the decision and when the turn ends.
fn report(preset: &Preset, score: Score, words: Words, silence: u64) -> Report {
    let probability = match score {
        Score::Complete(p) => Some(p),
        Score::Pending | Score::Failed => None,
    };
    let (decision, end_after_ms) = match decide(preset, score, words, u32::MAX) {
        Some((need, Ending::Fallback)) => ("fallback", need),
        Some((need, _)) => ("end", need),
        None => ("wait", preset.max_pause_ms),
    };
    Report {
        probability,
        decision,
        end_after_ms,
        unfinished_words: words == Words::Open,
        silence,
    }
}

/// Words after which an English sentence does not end, however it is punctuated: articles,
/// conjunctions, possessives and hesitations.
const OPEN_WORDS: &[&str] = &[
    "a", "an", "the", "and", "or", "but", "because", "my", "your", "our", "their", "um", "uh",
    "uhm", "umm", "er", "erm", "hmm",
];

/// Words after which a sentence rarely ends unless it is a question or an exclamation
/// ("What is it for?"): prepositions and subordinators.
const OPEN_UNLESS_ASKED: &[&str] = &[
    "to", "for", "of", "in", "on", "at", "with", "from", "by", "about", "into", "that", "which",
    "if", "than", "when", "while",
];

/// Whether a transcript ends where a sentence cannot: after an open word, a comma, or a
/// trailing ellipsis (how Whisper writes a voice that trails off). A false "unfinished"
/// costs a longer wait (the maximum pause); a false "finished" cuts the user off, so only
/// the model's score ends a turn, and the words can only veto it.
pub fn unfinished(words: &str) -> bool {
    let t = words.trim_end();
    if t.ends_with("...") || t.ends_with('…') || t.ends_with(',') || t.ends_with('-') {
        return true;
    }
    let last = t
        .rsplit(char::is_whitespace)
        .next()
        .unwrap_or_default()
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
        .to_lowercase();
    let asked = t.ends_with(['?', '!']);
    OPEN_WORDS.contains(&last.as_str()) || (!asked && OPEN_UNLESS_ASKED.contains(&last.as_str()))
}

/// The pause being judged.
struct Pause {
    /// Its tag on the port.
    id: u64,
    /// The silence seen at the last look (a smaller one is a new pause).
    silence: u64,
    /// When the score was asked (for [`SCORE_TIMEOUT`]).
    asked: Instant,
    score: Score,
    /// Its verdict was reported (at most once a pause).
    reported: bool,
}

/// What the judge made of a pause, once its score is known (the turn-events extension's
/// `turn.scored`).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Report {
    /// The model's probability that the turn is complete (`None`: it failed or was late).
    pub probability: Option<f32>,
    /// `end`, `wait` or `fallback`.
    pub decision: &'static str,
    /// The silence after which the turn ends unless the voice comes back.
    pub end_after_ms: u32,
    /// The words so far end mid-sentence.
    pub unfinished_words: bool,
    /// The silence at the pause when it was judged (its start is that far back).
    pub silence: u64,
}

/// The judge of one session's pauses under `semantic_vad`.
pub(super) struct Judge {
    port: Arc<dyn TurnPort + Sync>,
    preset: Preset,
    pause: Option<Pause>,
    next_id: u64,
    /// The last pause's verdict, until taken.
    report: Option<Report>,
}

impl Judge {
    pub(super) fn new(port: Arc<dyn TurnPort + Sync>, eagerness: &str) -> Self {
        Self {
            port,
            preset: Preset::of(eagerness),
            pause: None,
            next_id: 1,
            report: None,
        }
    }

    pub(super) fn preset(&self) -> &Preset {
        &self.preset
    }

    /// Takes the turn model's answer for pause `id` (a stale one is dropped).
    pub(super) fn scored(&mut self, id: u64, complete: Result<f32, String>) {
        let Some(p) = self.pause.as_mut().filter(|p| p.id == id) else {
            return;
        };
        if p.score != Score::Pending {
            return;
        }
        p.score = match complete {
            Ok(c) if c.is_finite() => {
                crate::metrics::METRICS.turn_score("ok");
                Score::Complete(c)
            }
            Ok(_) | Err(_) => {
                if let Err(e) = complete {
                    tracing::warn!("turn model failed; fixed silence for this pause: {e}");
                }
                crate::metrics::METRICS.turn_score("failed");
                Score::Failed
            }
        };
    }

    /// After the detector heard more (or the time passed): inside an utterance with
    /// `silence` samples of trailing silence (`None`: outside one), asks for a score at the
    /// candidate pause (`turn_audio` gives the audio to score) and returns the samples of
    /// silence after which the turn ends, once the judge knows.
    pub(super) fn look(
        &mut self,
        silence: Option<u64>,
        now: Instant,
        words: Words,
        turn_audio: impl FnOnce() -> Arc<[f32]>,
    ) -> Option<u64> {
        let Some(silence) = silence.filter(|&s| s > 0) else {
            self.pause = None; // the voice is back, or the turn is over
            return None;
        };
        if self.pause.as_ref().is_some_and(|p| silence < p.silence) {
            self.pause = None; // the voice came back in between: a new pause
        }
        let silence_ms = (silence / SAMPLES_PER_MS) as u32;
        let pause = match &mut self.pause {
            Some(p) => p,
            None if silence_ms >= self.preset.candidate_ms => {
                let id = self.next_id;
                self.next_id += 1;
                self.port.score(id, turn_audio());
                self.pause.insert(Pause {
                    id,
                    silence,
                    asked: now,
                    score: Score::Pending,
                    reported: false,
                })
            }
            None => return None,
        };
        pause.silence = silence;
        if pause.score == Score::Pending && now >= pause.asked + SCORE_TIMEOUT {
            tracing::warn!("turn model did not answer in time; fixed silence for this pause");
            crate::metrics::METRICS.turn_score("timeout");
            pause.score = Score::Failed;
        }
        let decided = decide(&self.preset, pause.score, words, silence_ms);
        // Reported once the words are in too (or the end comes without them).
        let words_in = words != Words::Pending
            || decided.is_some()
            || silence_ms >= self.preset.candidate_ms + WORDS_WAIT_MS;
        if !pause.reported && pause.score != Score::Pending && words_in {
            pause.reported = true;
            self.report = Some(report(&self.preset, pause.score, words, silence));
        }
        let (need, ending) = decided?;
        crate::metrics::METRICS.turn_end(ending.label());
        self.pause = None;
        Some(u64::from(need) * SAMPLES_PER_MS)
    }

    /// The verdict of the last pause whose score became known, once.
    pub(super) fn take_report(&mut self) -> Option<Report> {
        self.report.take()
    }

    /// When a pending score times out (the session's timer wakes then).
    pub(super) fn deadline(&self) -> Option<Instant> {
        let p = self.pause.as_ref()?;
        (p.score == Score::Pending).then_some(p.asked + SCORE_TIMEOUT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEDIUM: &str = "medium";

    #[test]
    fn a_confident_score_ends_the_turn_after_a_pause_that_shrinks_with_it() {
        let p = Preset::of(MEDIUM);
        let sure = Score::Complete(0.99);
        let fairly = Score::Complete(0.85);
        let unsure = Score::Complete(0.3);
        assert_eq!(decide(&p, sure, Words::Absent, 199), None);
        assert_eq!(
            decide(&p, sure, Words::Absent, 200),
            Some((200, Ending::Immediate))
        );
        assert_eq!(decide(&p, fairly, Words::Absent, 200), None);
        assert_eq!(
            decide(&p, fairly, Words::Absent, 900),
            Some((500, Ending::Confident))
        );
        assert_eq!(
            decide(&p, unsure, Words::Absent, 2_999),
            None,
            "the VAD's maximum decides"
        );
        assert_eq!(decide(&p, Score::Pending, Words::Absent, 2_999), None);
        assert_eq!(decide(&p, Score::Failed, Words::Absent, 699), None);
        assert_eq!(
            decide(&p, Score::Failed, Words::Absent, 700),
            Some((700, Ending::Fallback))
        );
    }

    #[test]
    fn words_on_their_way_hold_an_end_and_closed_words_bring_a_confident_one_forward() {
        let p = Preset::of(MEDIUM);
        let (sure, fairly) = (Score::Complete(0.99), Score::Complete(0.85));
        // A transcript on its way: the end waits for it, at most WORDS_WAIT_MS past it.
        assert_eq!(decide(&p, sure, Words::Pending, 200), None);
        assert_eq!(
            decide(&p, sure, Words::Pending, 200 + WORDS_WAIT_MS - 1),
            None
        );
        assert_eq!(
            decide(&p, sure, Words::Pending, 200 + WORDS_WAIT_MS),
            Some((200, Ending::Immediate))
        );
        // Once in, the words decide with the score: a veto, or an end where it was due.
        assert_eq!(decide(&p, sure, Words::Open, 400), None);
        assert_eq!(
            decide(&p, sure, Words::Plain, 250),
            Some((200, Ending::Immediate))
        );
        // A confident (not very confident) score and a finished sentence: the short pause.
        assert_eq!(
            decide(&p, fairly, Words::Closed, 200),
            Some((200, Ending::Confident))
        );
        assert_eq!(decide(&p, fairly, Words::Plain, 499), None);
        assert_eq!(decide(&p, Score::Complete(0.5), Words::Closed, 2_999), None);
        // The fixed silence of a failed score does not wait for words.
        assert_eq!(
            decide(&p, Score::Failed, Words::Pending, 700),
            Some((700, Ending::Fallback))
        );
        assert_eq!(Words::of("Tell me a story."), Words::Closed);
        assert_eq!(Words::of("What time is it?"), Words::Closed);
        assert_eq!(Words::of("a table for"), Words::Open);
        assert_eq!(Words::of("Thank you"), Words::Plain);
    }

    #[test]
    fn words_that_leave_a_sentence_open_veto_the_model() {
        let p = Preset::of(MEDIUM);
        assert_eq!(decide(&p, Score::Complete(0.99), Words::Open, 1_000), None);
        for open in [
            "I would like to book a table for",
            "I'd like to book a table for, um...",
            "So the problem with my order is that",
            "Could you please remind me to",
            "I need a room with,",
            "Well, uh",
        ] {
            assert!(unfinished(open), "{open}");
        }
        for done in [
            "Tell me a story.",
            "What time is it?",
            "Book a table for four people.",
            "Yes.",
            "Thank you",
            "That's what I want.",
            "What is it for?",
            "I think so.",
            "How are you?",
        ] {
            assert!(!unfinished(done), "{done}");
        }
    }

    #[test]
    fn eagerness_orders_the_pauses() {
        let (high, medium, low) = (Preset::of("high"), Preset::of("auto"), Preset::of("low"));
        assert_eq!(medium, Preset::of("medium"));
        for (a, b) in [(high, medium), (medium, low)] {
            assert!(a.max_pause_ms < b.max_pause_ms);
            assert!(a.confident_ms <= b.confident_ms);
            assert!(a.immediate <= b.immediate && a.confident <= b.confident);
            assert!(a.fallback_ms < b.fallback_ms);
        }
        assert_eq!(
            [high.fallback_ms, medium.fallback_ms, low.fallback_ms],
            [300, 700, 1_200],
            "the fallback is semantic_vad's fixed silence without a model"
        );
    }
}
