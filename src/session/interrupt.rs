//! Adaptive interruption (`turn_detection.interruption.mode: "adaptive"`, the default under
//! `semantic_vad`): speech over an answer is judged before it cancels anything. While it is
//! judged the answer's playout is paused (WebRTC and SIP, where Duet paces it) and
//! `input_audio_buffer.speech_started` is held back (every transport: clients that stop
//! their playback on it then stop for real interruptions only). It interrupts when it lasts
//! `min_duration_ms`, or when it ends sooner with words that are not a backchannel (as the
//! transcriber heard them); then `speech_started` goes out with the onset's
//! `audio_start_ms` and the answer is cancelled and truncated where its playout paused, as
//! a barge-in does. Once it has lasted [`EARLY_WORDS_MS`] while it goes on, what was said so
//! far is transcribed too: words that no backchannel starts with ("Stop", "Wait", "No")
//! interrupt at once, without waiting for `min_duration_ms`. When the voice comes back
//! before the verdict ("Wait, what did you say?"), it is the same speech going on, judged
//! from its first onset. A backchannel ("mhm", "yeah", "okay", "I see"), a noise, or a short
//! utterance when no transcriber is loaded, lets the answer go on where it paused: it
//! creates no item, no response and no event (`duet_interruptions_total{outcome}` counts
//! it).
//!
//! Sans IO: the session feeds it the input clock, the detector's state and the words; it
//! says what the speech was.

use super::ledger::SAMPLES_PER_MS;
use super::{Session, TranscriptEvent};
use crate::protocol::ServerEventBody;
use duet_models::TranscribeOutput;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the words of a short utterance are waited for; past it, it was no interruption.
pub(super) const WORDS_TIMEOUT: Duration = Duration::from_millis(2_000);
/// Voice over the answer after which, while it goes on, its words so far are transcribed
/// (when a transcriber is loaded): decisive words interrupt before `min_duration_ms`.
pub(super) const EARLY_WORDS_MS: u64 = 300;

/// Speech over an answer, being judged.
pub(super) struct Overlap {
    /// Where `speech_started` will say it began (with the prefix padding).
    pub(super) onset: u64,
    /// Where the voice began (the duration counts from here).
    voice: u64,
    /// Voice heard before the last pause inside this speech (samples): with the voice since,
    /// what counts towards [`EARLY_WORDS_MS`].
    before: u64,
    /// Samples of speech that interrupt whatever the words.
    min: u64,
    /// Where the speech ended before it was judged.
    pub(super) stopped_at: Option<u64>,
    /// The transcription of the ended utterance: its id and when it is given up.
    pub(super) words: Option<(Arc<str>, Instant)>,
    /// What the transcriber heard.
    pub(super) heard: Option<String>,
    /// The transcription of the first [`EARLY_WORDS_MS`] or more, asked while it goes on.
    pub(super) early: Option<Arc<str>>,
    /// What the transcriber heard of them.
    pub(super) early_heard: Option<String>,
    /// The words of the speech up to a pause inside it, asked when the pause ended it and
    /// not heard when the voice came back: they still decide when they are decisive.
    before_pause: Option<Arc<str>>,
    /// What the transcriber heard of them.
    before_pause_heard: Option<String>,
}

/// What the speech over the answer was.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The user takes the turn: `speech_started` at `onset`, the answer cancelled; when the
    /// speech already ended, its `speech_stopped` at `stopped_at` follows.
    Interrupt { onset: u64, stopped_at: Option<u64> },
    /// A backchannel or a noise: the answer goes on; the audio up to `until` is dropped.
    Backchannel { until: u64 },
}

impl Overlap {
    pub(super) fn new(onset: u64, voice: u64, min: u64) -> Self {
        Self {
            onset,
            voice,
            before: 0,
            min,
            stopped_at: None,
            words: None,
            heard: None,
            early: None,
            early_heard: None,
            before_pause: None,
            before_pause_heard: None,
        }
    }

    /// The verdict once there is one: the voice heard up to input clock `clock`, the
    /// detector `in_speech`, `answering` (an answer is still being made or played).
    pub(super) fn verdict(
        &self,
        clock: u64,
        in_speech: bool,
        now: Instant,
        answering: bool,
    ) -> Option<Verdict> {
        let interrupt = Verdict::Interrupt {
            onset: self.onset,
            stopped_at: self.stopped_at,
        };
        let Some(until) = self.stopped_at else {
            let long = in_speech && clock.saturating_sub(self.voice) >= self.min;
            let decisive = [&self.early_heard, &self.before_pause_heard]
                .iter()
                .any(|w| w.as_deref().is_some_and(decisive));
            // Nothing left to interrupt: it is simply the user's turn.
            return (long || decisive || !answering).then_some(interrupt);
        };
        match (&self.heard, &self.words) {
            (Some(words), _) if !is_backchannel(words) => Some(interrupt),
            (Some(_), _) => Some(Verdict::Backchannel { until }),
            (None, Some((_, deadline))) if now < *deadline => None,
            (None, _) => Some(Verdict::Backchannel { until }),
        }
    }

    /// The voice came back before the verdict, at `voice`: the speech goes on. Its length
    /// (for `min_duration_ms`) counts from there, a pause being no speech; its words will be
    /// asked from its first onset when it ends. Those asked at the pause are not waited
    /// for, but they are its first words: decisive ones ("Wait, … what did you say?")
    /// interrupt when they come, as early words do.
    pub(super) fn resume(&mut self, voice: u64) {
        if let Some(stopped) = self.stopped_at {
            self.before += stopped.saturating_sub(self.voice);
        }
        self.voice = voice;
        self.stopped_at = None;
        if let Some((id, _)) = self.words.take() {
            match self.heard.take() {
                Some(text) => self.before_pause_heard = Some(text),
                None => self.before_pause = Some(id),
            }
        }
    }

    /// How long the voice lasted, in milliseconds, when it was heard up to `voiced_until`.
    pub(super) fn voiced_ms(&self, voiced_until: u64) -> u64 {
        self.stopped_at
            .unwrap_or(voiced_until)
            .saturating_sub(self.voice)
            / SAMPLES_PER_MS
    }

    /// Whether transcription `id` is this speech's words.
    pub(super) fn asked(&self, id: &str) -> bool {
        self.words.as_ref().is_some_and(|(w, _)| &**w == id)
    }

    /// Whether its words so far should be asked now: it goes on, [`EARLY_WORDS_MS`] of
    /// voice were heard (up to `voiced_until`, the parts before a pause inside it counted:
    /// "Wait, … what did you say?" said its first word before the pause), and they were not
    /// asked yet.
    pub(super) fn wants_early_words(&self, voiced_until: u64) -> bool {
        self.early.is_none()
            && self.stopped_at.is_none()
            && self.before / SAMPLES_PER_MS + self.voiced_ms(voiced_until) >= EARLY_WORDS_MS
    }

    /// Whether transcription `id` is one of its own: the words so far, those up to a pause,
    /// or the whole speech's.
    pub(super) fn owns(&self, id: &str) -> bool {
        self.early.as_deref() == Some(id)
            || self.before_pause.as_deref() == Some(id)
            || self.asked(id)
    }

    /// Takes transcript `text` of its own transcription `id` ([`Self::owns`]).
    pub(super) fn heard(&mut self, id: &str, text: String) {
        if self.early.as_deref() == Some(id) {
            self.early_heard = Some(text);
        } else if self.before_pause.as_deref() == Some(id) {
            self.before_pause_heard = Some(text);
        } else if self.asked(id) {
            self.heard = Some(text);
        }
    }

    /// Takes a transcriber answer when it is for one of its own transcriptions
    /// ([`Self::owns`]: a failure is heard as no words, a delta as nothing yet); returns
    /// whether it was.
    pub(super) fn hear(&mut self, ev: &TranscriptEvent) -> bool {
        if !self.owns(&ev.item_id) {
            return false;
        }
        match &ev.output {
            Ok(TranscribeOutput::Completed { text, logprobs, .. }) => {
                // Words the transcriber is unsure of, or a sound it could only spell in
                // pieces, do not decide: the length does.
                let (unsure, pieces) = (unsure(logprobs), spelled_in_pieces(logprobs));
                if unsure || pieces {
                    tracing::debug!(
                        %text,
                        unsure,
                        pieces,
                        "words over the answer that cannot judge it"
                    );
                }
                let sure = !unsure && !pieces;
                self.heard(&ev.item_id, if sure { text.clone() } else { String::new() })
            }
            Ok(_) => {}
            Err(_) => self.heard(&ev.item_id, String::new()),
        }
        true
    }

    /// The words its verdict reports: the whole speech's, else the first words that decided
    /// it, else any first words heard.
    pub(super) fn reported(&self) -> Option<&str> {
        let first = [&self.early_heard, &self.before_pause_heard];
        self.heard.as_deref().or_else(|| {
            let mut heard = first.iter().filter_map(|w| w.as_deref());
            heard.clone().find(|w| decisive(w)).or_else(|| heard.next())
        })
    }

    /// When the words are given up (the session's timer wakes then).
    pub(super) fn deadline(&self) -> Option<Instant> {
        match (&self.heard, &self.words) {
            (None, Some((_, at))) => Some(*at),
            _ => None,
        }
    }
}

/// The mean log probability of a transcript's word tokens below which the words are too
/// unsure to judge speech over an answer (a token's probability about 0.22 on average).
/// On espeak-ng speech Whisper tiny.en writes misheard backchannels at -1.7 to -2.1 ("Uh-uh",
/// "Uh-fuh" for "uh-huh", "A-c" for "I see") and the first words of real interruptions at
/// -0.1 to -1.4 ("Can you say", "Wait, wait"). OpenAI's Whisper treats a decoding whose
/// average is below -1.0 as failed; this is laxer, as words heard over an answer are short.
const UNSURE_LOGPROB: f32 = -1.5;

/// Whether the transcriber was unsure of its words: the mean log probability of the tokens
/// that hold letters or digits (not punctuation) is below [`UNSURE_LOGPROB`]. A transcriber
/// that reports none is taken at its word.
fn unsure(logprobs: &[duet_models::TokenLogprob]) -> bool {
    let words: Vec<f32> = logprobs
        .iter()
        .filter(|t| t.token.chars().any(char::is_alphanumeric))
        .map(|t| t.logprob)
        .collect();
    !words.is_empty() && words.iter().sum::<f32>() / (words.len() as f32) < UNSURE_LOGPROB
}

/// The longest piece (in letters) of a word the transcriber spelled out sound by sound.
const PIECE_LETTERS: usize = 3;

/// Whether the transcriber spelled every word it heard in pieces: each is two or more
/// tokens of its vocabulary, every one of at most [`PIECE_LETTERS`] letters, joined by
/// hyphens or nothing ("Bum-bum" for a hummed "mm-hmm", "I-c" and "I-b-i" for "I see",
/// "Buh-uh-uh" for "uh-huh"): this is how Whisper writes a sound that is no word it knows,
/// however sure it is of the spelling. The first words of an interruption are words
/// ("Stop", "Wait", "No", "Hold on", "Pardon"): one token each, or pieces longer than a
/// syllable's spelling. An apostrophe's suffix ("'s" of "that's") is no piece. A
/// transcriber that reports no tokens is taken at its word.
fn spelled_in_pieces(logprobs: &[duet_models::TokenLogprob]) -> bool {
    // Per word: (tokens holding letters, all of them short).
    let mut words: Vec<(usize, bool)> = Vec::new();
    let mut open = false;
    for t in logprobs {
        let piece = t.token.trim_start();
        let starts_word = t.token.starts_with(char::is_whitespace) || !open;
        if piece.starts_with('\'') {
            continue;
        }
        let letters = piece.chars().filter(|c| c.is_alphanumeric()).count();
        if letters == 0 {
            // A hyphen joins pieces of one word; other punctuation ends it.
            open = open && piece == "-";
            continue;
        }
        if starts_word || words.is_empty() {
            words.push((0, true));
        }
        let word = words.last_mut().expect("pushed above");
        word.0 += 1;
        word.1 &= letters <= PIECE_LETTERS && !piece.chars().any(char::is_numeric);
        open = true;
    }
    !words.is_empty() && words.iter().all(|&(tokens, short)| tokens >= 2 && short)
}

/// What speech over an answer is transcribed after (Whisper's `prompt`): how the
/// backchannels it may be are spelled, so that a short hum or "yeah" is read as one rather
/// than as the nearest words ("You know" for "Yeah", "I say" for "I see").
pub(super) const OVERLAP_PROMPT: &str = "Mm-hmm. Uh-huh. Yeah. Okay. Right. I see.";

/// Words that keep the listener listening.
const BACKCHANNEL_WORDS: &[&str] = &[
    "mhm",
    "mm-hmm",
    "mmhmm",
    "mm",
    "mmm",
    "hmm",
    "hm",
    "uh-huh",
    "uhhuh",
    "huh",
    "yeah",
    "yes",
    "yep",
    "yup",
    "ya",
    "right",
    "okay",
    "ok",
    "sure",
    "alright",
    "oh",
    "ah",
    "aha",
    "wow",
    "cool",
    "great",
    "nice",
    "true",
    "exactly",
    "indeed",
    "totally",
    "absolutely",
    "gotcha",
    "uh",
    "um",
    "so",
];
/// Two-word backchannels.
const BACKCHANNEL_PAIRS: &[(&str, &str)] = &[
    ("i", "see"),
    ("got", "it"),
    ("all", "right"),
    ("uh", "huh"),
    ("mm", "hmm"),
    ("of", "course"),
    ("makes", "sense"),
    ("that's", "right"),
    ("oh", "okay"),
];

/// Words that may begin a two-word backchannel ("I see", "got it", "that's right"): heard
/// alone at the start of speech, they decide nothing yet.
fn opens_a_backchannel(word: &str) -> bool {
    BACKCHANNEL_PAIRS.iter().any(|(first, _)| *first == word)
}

/// Whether the first words of speech that goes on are an interruption whatever follows: a
/// word that is neither a backchannel nor the start of one ("Stop", "Wait", "No, …", "Can
/// you …"). Nothing heard decides nothing.
pub fn decisive(text: &str) -> bool {
    if is_backchannel(text) {
        return false;
    }
    let words = words_of(text);
    // A backchannel and the first word of another ("Yeah, I") may still be one.
    match words.split_last() {
        Some((last, head)) => !(opens_a_backchannel(last) && is_backchannel(&head.join(" "))),
        None => false,
    }
}

fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, ',' | '.' | '!' | '?' | ';' | ':' | '…'))
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether a transcript is only backchannel ("Mm-hmm.", "Yeah, yeah.", "Okay, I see."): an
/// empty one (a noise) is one too.
pub fn is_backchannel(text: &str) -> bool {
    let words = words_of(text);
    let mut i = 0;
    while i < words.len() {
        let pair = words
            .get(i + 1)
            .is_some_and(|next| BACKCHANNEL_PAIRS.contains(&(words[i].as_str(), next.as_str())));
        if pair {
            i += 2;
        } else if BACKCHANNEL_WORDS.contains(&words[i].as_str())
            // "A-ha", "Uh-hm": the transcriber's hyphens are its own spelling.
            || BACKCHANNEL_WORDS.contains(&words[i].replace('-', "").as_str())
        {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

impl Session {
    /// Judges the speech over the answer, when there is a verdict: the user takes the turn
    /// (`speech_started`, the barge-in, and its `speech_stopped` when it already ended), or
    /// the answer goes on where its playout paused.
    pub(super) fn on_overlap(&mut self) {
        let Some(o) = &self.input.overlap else { return };
        let answering = self
            .reply
            .active
            .as_ref()
            .is_some_and(|a| a.in_conversation)
            || self.reply.view.is_playing();
        // Inside speech, the voice was last heard `silence` ago: that is how long it lasted.
        let (in_speech, silence) = self.input.silence().unwrap_or((false, 0));
        let voiced_until = self.input.clock().saturating_sub(silence);
        if in_speech && o.wants_early_words(voiced_until) && self.transcripts.can_send_whole() {
            let id: Arc<str> = Arc::from(format!("bc_{}", crate::protocol::ids::item_id()));
            let audio = self.input.buffer_from(o.onset);
            self.transcripts.send_overlap(id.clone(), audio);
            if let Some(o) = &mut self.input.overlap {
                o.early = Some(id);
            }
        }
        let Some(o) = &self.input.overlap else { return };
        let Some(verdict) = o.verdict(voiced_until, in_speech, self.out.now, answering) else {
            return;
        };
        if self.input.reports_turns() {
            self.out.emit(ServerEventBody::TurnOverlap {
                outcome: match verdict {
                    Verdict::Interrupt { .. } => "interruption",
                    Verdict::Backchannel { .. } => "backchannel",
                },
                duration_ms: o.voiced_ms(voiced_until),
                // The whole speech's words, else the first ones that decided it.
                transcript: o.reported().map(str::to_string),
            });
        }
        self.input.overlap = None;
        match verdict {
            Verdict::Interrupt { onset, stopped_at } => {
                crate::metrics::METRICS.interruption("interrupted");
                self.speech_started(onset, true);
                if let Some(at) = stopped_at {
                    self.speech_stopped(at);
                }
            }
            Verdict::Backchannel { until } => {
                crate::metrics::METRICS.interruption("backchannel");
                self.input.end_backchannel(until);
                if let Some(sink) = self.transport.sink() {
                    sink.pause(false);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backchannels_and_real_words() {
        for bc in [
            "Mm-hmm.",
            "Yeah.",
            "Yeah, yeah.",
            "Okay, I see.",
            "Uh-huh",
            "Right.",
            "",
            " . ",
            "Mhm, got it.",
            "Oh, okay.",
            "A-ha!",
        ] {
            assert!(is_backchannel(bc), "{bc:?}");
        }
        for words in [
            "Stop.",
            "Stop please.",
            "Wait, what?",
            "No.",
            "Yeah, but what about Tuesday?",
            "I see a problem.",
            "Okay stop",
        ] {
            assert!(!is_backchannel(words), "{words:?}");
        }
    }

    fn tokens(pieces: &[&str]) -> Vec<duet_models::TokenLogprob> {
        pieces
            .iter()
            .map(|t| duet_models::TokenLogprob {
                token: t.to_string(),
                logprob: -0.3,
                bytes: t.as_bytes().to_vec(),
            })
            .collect()
    }

    #[test]
    fn sounds_spelled_in_pieces_are_no_words() {
        // Whisper tiny.en on espeak-ng backchannels, sure of each spelling.
        for pieces in [
            &[" B", "um", "-", "b", "um", "."][..],
            &[" I", "-", "c", "."],
            &[" i", "-", "b", "-", "i"],
            &[" B", "uh", "-", "uh", "-", "uh", "."],
            &[" Mm", "-", "h", "mm", "."],
        ] {
            assert!(spelled_in_pieces(&tokens(pieces)), "{pieces:?}");
        }
        for pieces in [
            &[" Stop", "."][..],
            &[" Wait", ",", " what", " did", " you", " say", "?"],
            &[" No", ",", " that", "'s", " wrong", "."],
            &[" That", "'s"],
            &[" Pard", "on", "?"],
            &[" B", "um", "-", "b", "um", " stop"],
            &[" I", " see", "."],
            &[" 5", "0"],
            &[],
            &["."],
        ] {
            assert!(!spelled_in_pieces(&tokens(pieces)), "{pieces:?}");
        }
    }

    #[test]
    fn first_words_decide_only_when_no_backchannel_starts_with_them() {
        for words in [
            "Stop.",
            "Wait,",
            "No,",
            "Can you",
            "Hold on",
            "Thank you.",
            "Yeah, but",
        ] {
            assert!(decisive(words), "{words:?}");
        }
        for words in [
            "", "Yeah.", "I", "I see", "Okay,", "Oh", "Mm", "That's", "Got", "Yeah, I",
        ] {
            assert!(!decisive(words), "{words:?}");
        }
    }
}
