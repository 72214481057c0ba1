//! The cascade's voice: the answer's words cut into clauses as they arrive ([`Clauses`]),
//! each clause synthesized off the model loop ([`SpeechWorker`] queues it, [`Synthesis`]
//! speaks it on a thread the driver runs) while the LLM goes on, so the model loop's 20 ms
//! steps never wait for synthesis.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use crate::{ModelError, SlotId};

/// Something that speaks text: 24 kHz samples for `text` at `speed`.
pub trait Speaker: Send {
    /// Speaks `text` (one clause or more).
    fn speak(&mut self, text: &str, speed: f32) -> Result<Vec<f32>, ModelError>;

    /// Speaks `text` in `voice` (a voice of the speaker's own, or ignored by a speaker with
    /// one), handing audio to `out` as it comes; returns the rest. `out` answers `false` when
    /// nobody wants more (the answer was dropped): the speaker then stops. By default the
    /// whole clause is the rest.
    fn speak_streaming(
        &mut self,
        text: &str,
        speed: f32,
        _voice: &str,
        _out: &mut dyn FnMut(Vec<f32>) -> bool,
    ) -> Result<Vec<f32>, ModelError> {
        self.speak(text, speed)
    }
}

impl Speaker for crate::piper::PiperVoice {
    fn speak(&mut self, text: &str, speed: f32) -> Result<Vec<f32>, ModelError> {
        crate::piper::PiperVoice::speak(self, text, speed)
    }
}

/// The shortest first clause cut at a comma (characters): the first audio comes early.
const FIRST_CLAUSE: usize = 12;
/// The shortest later clause cut at a comma: fewer, longer pieces sound more natural.
const CLAUSE: usize = 40;
/// The longest clause held without any punctuation (bytes): cut at the last space before it.
const LONGEST: usize = 160;

/// Cuts streamed text into clauses: at a sentence's end always, at `,` `;` `:` once a clause
/// is long enough, at a space once one is very long.
#[derive(Debug, Default)]
pub struct Clauses {
    buf: String,
    cut_any: bool,
}

impl Clauses {
    /// Adds text; returns the clauses it completed.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        while let Some(at) = self.cut_point() {
            let clause: String = self.buf.drain(..at).collect();
            self.cut_any = true;
            if clause.chars().any(char::is_alphanumeric) {
                out.push(clause.trim().to_string());
            }
        }
        out
    }

    /// The rest, at the end of the answer.
    pub fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.buf);
        rest.chars()
            .any(char::is_alphanumeric)
            .then(|| rest.trim().to_string())
    }

    /// Where the next clause ends (a byte index past its punctuation and the space after).
    fn cut_point(&self) -> Option<usize> {
        let min = if self.cut_any { CLAUSE } else { FIRST_CLAUSE };
        let chars: Vec<(usize, char)> = self.buf.char_indices().collect();
        let mut last_space = None;
        for (n, w) in chars.windows(2).enumerate() {
            let ((_, c), (next_at, next)) = (w[0], w[1]);
            if !next.is_whitespace() {
                continue;
            }
            if next_at <= LONGEST {
                last_space = Some(next_at + next.len_utf8());
            }
            let sentence = matches!(c, '.' | '!' | '?');
            let pause = matches!(c, ',' | ';' | ':') && n + 1 >= min;
            if sentence || pause {
                return Some(next_at + next.len_utf8());
            }
        }
        if self.buf.len() > LONGEST {
            return last_space;
        }
        None
    }
}

/// A clause to synthesize for one answer.
struct Job {
    slot: SlotId,
    answer: u64,
    index: u32,
    text: String,
    speed: f32,
    voice: Arc<str>,
}

/// A synthesized clause.
pub struct Spoken {
    /// The slot it is for.
    pub slot: SlotId,
    /// The answer it is for (a newer answer on the slot makes it stale).
    pub answer: u64,
    /// Its place in the answer.
    pub index: u32,
    /// Its samples (more of the clause, or its rest when `last`), or why synthesis failed.
    pub audio: Result<Vec<f32>, String>,
    /// The clause is complete with these samples.
    pub last: bool,
}

/// The cascade's side of synthesis: queues clauses and takes what was spoken. The clauses
/// are spoken in order by [`Synthesis`], which skips those of answers that were dropped.
pub struct SpeechWorker {
    jobs: mpsc::Sender<Job>,
    done: mpsc::Receiver<Spoken>,
    /// The live answer of each slot: a job for any other is skipped.
    live: Arc<Mutex<HashMap<SlotId, u64>>>,
}

/// The speaking side: the driver runs `while synthesis.speak_next() {}` on a thread of its
/// own; it ends once the [`SpeechWorker`] is dropped.
pub struct Synthesis {
    speaker: Box<dyn Speaker>,
    /// Shared by every speaking thread of a pool: the one that takes a job speaks it.
    jobs: Arc<Mutex<mpsc::Receiver<Job>>>,
    done: mpsc::Sender<Spoken>,
    live: Arc<Mutex<HashMap<SlotId, u64>>>,
}

impl Synthesis {
    /// Waits for the next clause and speaks it (a clause of an answer no longer live is
    /// skipped; a voice that panics fails its clause, not every answer after it); `false`
    /// once the [`SpeechWorker`] is gone.
    pub fn speak_next(&mut self) -> bool {
        let job = match self.jobs.lock() {
            Ok(jobs) => jobs.recv(),
            Err(_) => return false,
        };
        let Ok(job) = job else {
            return false;
        };
        let current = self
            .live
            .lock()
            .map(|m| m.get(&job.slot) == Some(&job.answer));
        if !current.unwrap_or(false) {
            return true;
        }
        let (speaker, done, live) = (&mut self.speaker, &self.done, &self.live);
        let part = |audio, last| Spoken {
            slot: job.slot,
            answer: job.answer,
            index: job.index,
            audio,
            last,
        };
        // Audio that streams in goes on at once, while the answer is live.
        let mut out = |chunk: Vec<f32>| {
            let current = live.lock().map(|m| m.get(&job.slot) == Some(&job.answer));
            current.unwrap_or(false) && done.send(part(Ok(chunk), false)).is_ok()
        };
        let spoken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            speaker.speak_streaming(&job.text, job.speed, &job.voice, &mut out)
        }));
        let audio = match spoken {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(_) => Err("the voice panicked".to_string()),
        };
        self.done.send(part(audio, true)).is_ok()
    }
}

impl SpeechWorker {
    /// The queue and the speaking side, speaking with `speaker`.
    pub fn new(speaker: Box<dyn Speaker>) -> (Self, Synthesis) {
        let (worker, mut sides) = Self::pool(vec![speaker]);
        let synthesis = sides.pop().expect("one speaker, one side");
        (worker, synthesis)
    }

    /// The queue and one speaking side per speaker, each taking the next clause when it is
    /// free (a remote voice fetches several clauses at once; each answer's clauses still
    /// play in order).
    pub fn pool(speakers: Vec<Box<dyn Speaker>>) -> (Self, Vec<Synthesis>) {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (tx, done) = mpsc::channel();
        let live: Arc<Mutex<HashMap<SlotId, u64>>> = Arc::default();
        let rx = Arc::new(Mutex::new(rx));
        let sides = speakers
            .into_iter()
            .map(|speaker| Synthesis {
                speaker,
                jobs: rx.clone(),
                done: tx.clone(),
                live: live.clone(),
            })
            .collect();
        (Self { jobs, done, live }, sides)
    }

    /// Marks `answer` as the slot's live one (`None`: none), so older jobs are skipped.
    pub fn set_live(&self, slot: SlotId, answer: Option<u64>) {
        if let Ok(mut m) = self.live.lock() {
            match answer {
                Some(a) => m.insert(slot, a),
                None => m.remove(&slot),
            };
        }
    }

    /// Queues a clause, to be spoken at `speed` in `voice`; `false` when the speaking side
    /// is gone.
    pub fn speak(
        &self,
        slot: SlotId,
        answer: u64,
        index: u32,
        text: String,
        (speed, voice): (f32, Arc<str>),
    ) -> bool {
        self.jobs
            .send(Job {
                slot,
                answer,
                index,
                text,
                speed,
                voice,
            })
            .is_ok()
    }

    /// What was synthesized since the last call.
    pub fn take(&self) -> impl Iterator<Item = Spoken> + '_ {
        self.done.try_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(pieces: &[&str]) -> Vec<String> {
        let mut c = Clauses::default();
        let mut out: Vec<String> = pieces.iter().flat_map(|p| c.push(p)).collect();
        out.extend(c.finish());
        out
    }

    #[test]
    fn clauses_end_at_sentences_and_long_enough_pauses() {
        assert_eq!(
            all(&[
                "Sure",
                ", here",
                " it is. It's ten",
                " o'clock, give or take a minute, in London",
                " now"
            ]),
            [
                "Sure, here it is.",
                "It's ten o'clock, give or take a minute,",
                "in London now"
            ]
        );
        // The first clause may be short; a pause comes out once the clause is long enough.
        assert_eq!(
            all(&["Well, hello there, friend. A much longer sentence follows here, with a pause, and more words after it."]),
            [
                "Well, hello there,",
                "friend.",
                "A much longer sentence follows here, with a pause,",
                "and more words after it."
            ]
        );
        assert!(all(&[" ... "]).is_empty());
        let long = "word ".repeat(60);
        let cut = all(&[&long]);
        assert!(
            cut.len() >= 2 && cut.iter().all(|c| c.len() <= LONGEST + 5),
            "{cut:?}"
        );
    }

    struct Echo;
    impl Speaker for Echo {
        fn speak(&mut self, text: &str, _speed: f32) -> Result<Vec<f32>, ModelError> {
            assert!(text != "panic", "a voice bug");
            Ok(vec![0.1; text.len()])
        }
    }

    #[test]
    fn the_worker_speaks_live_answers_and_skips_dropped_ones() {
        // The driver's loop (`while synthesis.speak_next() {}`), run here one job at a time
        // on the test's own thread: `models/` starts no thread.
        let (w, mut synthesis) = SpeechWorker::new(Box::new(Echo));
        w.set_live(0, Some(1));
        w.speak(0, 7, 0, "stale".into(), (1.0, "alloy".into()));
        w.speak(0, 1, 0, "abc".into(), (1.0, "alloy".into()));
        w.speak(0, 1, 1, "de".into(), (1.0, "alloy".into()));
        for _ in 0..3 {
            assert!(synthesis.speak_next());
        }
        let got: Vec<_> = w
            .take()
            .map(|s| (s.answer, s.index, s.audio.unwrap().len()))
            .collect();
        assert_eq!(got, [(1, 0, 3), (1, 1, 2)]);
        // A panicking voice fails its clause; the loop goes on.
        assert!(w.speak(0, 1, 2, "panic".into(), (1.0, "alloy".into())));
        assert!(w.speak(0, 1, 3, "ok".into(), (1.0, "alloy".into())));
        for _ in 0..2 {
            assert!(synthesis.speak_next());
        }
        let got: Vec<_> = w.take().map(|s| (s.index, s.audio.is_ok())).collect();
        assert_eq!(got, [(2, false), (3, true)]);
    }
}
