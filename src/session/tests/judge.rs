//! The judge of pauses (`semantic_vad` with a turn model) on its own: each pause scored
//! once at the candidate pause, a stale answer dropped, a score that never comes falling
//! back to fixed silence, and each known score reported once with its decision.

use std::sync::Arc;
use std::time::Instant;

use super::super::ledger::SAMPLES_PER_MS;
use super::super::port::TurnPort;
use super::super::turn::{Judge, Words, SCORE_TIMEOUT, WORDS_WAIT_MS};

const MEDIUM: &str = "medium";

/// A port that records what it was asked.
#[derive(Default)]
struct Asked(std::sync::Mutex<Vec<(u64, usize)>>);

impl TurnPort for Asked {
    fn score(&self, pause: u64, pcm: Arc<[f32]>) {
        self.0.lock().unwrap().push((pause, pcm.len()));
    }
}

#[test]
fn each_pause_is_scored_once_and_a_stale_answer_is_dropped() {
    let asked = Arc::new(Asked::default());
    let mut judge = Judge::new(asked.clone(), MEDIUM);
    let t0 = Instant::now();
    let ms = |n: u64| Some(n * SAMPLES_PER_MS);
    let audio = || Arc::<[f32]>::from(vec![0.0; 10]);
    assert_eq!(judge.look(ms(100), t0, Words::Absent, audio), None);
    assert!(
        asked.0.lock().unwrap().is_empty(),
        "before the candidate pause"
    );
    assert_eq!(judge.look(ms(160), t0, Words::Absent, audio), None);
    assert_eq!(judge.look(ms(180), t0, Words::Absent, audio), None);
    assert_eq!(*asked.0.lock().unwrap(), vec![(1, 10)], "scored once");
    // The voice comes back before the answer: the answer is stale.
    assert_eq!(judge.look(ms(20), t0, Words::Absent, audio), None);
    judge.scored(1, Ok(0.99));
    assert_eq!(judge.look(ms(300), t0, Words::Absent, audio), None);
    // The new pause is pause 2; its answer ends the turn at the immediate pause.
    assert_eq!(asked.0.lock().unwrap().last(), Some(&(2, 10)));
    judge.scored(2, Ok(0.99));
    assert_eq!(judge.look(ms(320), t0, Words::Absent, audio), ms(200));
    assert_eq!(judge.deadline(), None);
}

#[test]
fn a_score_that_never_comes_falls_back_to_fixed_silence() {
    let mut judge = Judge::new(Arc::new(Asked::default()), MEDIUM);
    let t0 = Instant::now();
    let audio = || Arc::<[f32]>::from(vec![]);
    let silence = Some(800 * SAMPLES_PER_MS);
    assert_eq!(judge.look(silence, t0, Words::Absent, audio), None);
    assert_eq!(judge.deadline(), Some(t0 + SCORE_TIMEOUT));
    assert_eq!(
        judge.look(silence, t0 + SCORE_TIMEOUT, Words::Absent, audio),
        Some(700 * SAMPLES_PER_MS)
    );
    // A failure answers the same way.
    let mut judge = Judge::new(Arc::new(Asked::default()), MEDIUM);
    assert_eq!(judge.look(silence, t0, Words::Absent, audio), None);
    judge.scored(1, Err("broken".into()));
    assert_eq!(
        judge.look(silence, t0, Words::Absent, audio),
        Some(700 * SAMPLES_PER_MS)
    );
}

#[test]
fn each_known_score_is_reported_once_with_its_decision() {
    let t0 = Instant::now();
    let audio = || Arc::<[f32]>::from(vec![0.0; 4]);
    let ms = |n: u64| Some(n * SAMPLES_PER_MS);
    let mut judge = Judge::new(Arc::new(Asked::default()), MEDIUM);
    assert_eq!(judge.look(ms(160), t0, Words::Absent, audio), None);
    assert_eq!(judge.take_report(), None, "not scored yet");
    judge.scored(1, Ok(0.85));
    assert_eq!(judge.look(ms(180), t0, Words::Absent, audio), None);
    let r = judge.take_report().expect("reported once known");
    assert_eq!(
        (
            r.probability,
            r.decision,
            r.end_after_ms,
            r.unfinished_words
        ),
        (Some(0.85), "end", 500, false)
    );
    assert_eq!(r.silence, 180 * SAMPLES_PER_MS);
    assert_eq!(judge.look(ms(200), t0, Words::Absent, audio), None);
    assert_eq!(judge.take_report(), None, "once a pause");
    // A confident score after words that leave the sentence open: wait for the maximum.
    let mut judge = Judge::new(Arc::new(Asked::default()), MEDIUM);
    judge.look(ms(160), t0, Words::of("a table for"), audio);
    judge.scored(1, Ok(0.99));
    judge.look(ms(170), t0, Words::of("a table for"), audio);
    let r = judge.take_report().unwrap();
    assert_eq!(
        (r.decision, r.end_after_ms, r.unfinished_words),
        ("wait", 3_000, true)
    );
    // No score in time: the fixed silence.
    let mut judge = Judge::new(Arc::new(Asked::default()), MEDIUM);
    judge.look(ms(800), t0, Words::Absent, audio);
    judge.look(ms(800), t0 + SCORE_TIMEOUT, Words::Absent, audio);
    let r = judge.take_report().unwrap();
    assert_eq!(
        (r.probability, r.decision, r.end_after_ms),
        (None, "fallback", 700)
    );
}

#[test]
fn a_score_is_reported_once_the_words_on_their_way_are_in() {
    let t0 = Instant::now();
    let audio = || Arc::<[f32]>::from(vec![0.0; 4]);
    let ms = |n: u64| Some(n * SAMPLES_PER_MS);
    let mut judge = Judge::new(Arc::new(Asked::default()), MEDIUM);
    judge.look(ms(160), t0, Words::Pending, audio);
    judge.scored(1, Ok(0.99));
    assert_eq!(judge.look(ms(220), t0, Words::Pending, audio), None);
    assert_eq!(judge.take_report(), None, "the words may still veto");
    // They come, and end a sentence: the end that was due.
    assert_eq!(
        judge.look(ms(260), t0, Words::of("Tell me a story."), audio),
        ms(200)
    );
    let r = judge.take_report().unwrap();
    assert_eq!((r.decision, r.end_after_ms), ("end", 200));
    // Words that never come: the end once WORDS_WAIT_MS has passed.
    let mut judge = Judge::new(Arc::new(Asked::default()), MEDIUM);
    judge.look(ms(160), t0, Words::Pending, audio);
    judge.scored(1, Ok(0.99));
    let late = u64::from(200 + WORDS_WAIT_MS);
    assert_eq!(judge.look(ms(late - 20), t0, Words::Pending, audio), None);
    assert_eq!(judge.look(ms(late), t0, Words::Pending, audio), ms(200));
    assert!(judge.take_report().is_some());
}
