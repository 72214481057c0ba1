use std::time::{Duration, Instant};

use super::*;
use crate::protocol::{ServerEvent, ServerEventBody};

fn event() -> Rendered {
    Rendered::new(
        &ServerEvent::new(ServerEventBody::InputAudioBufferCleared {}),
        None,
    )
}

fn seq_of(e: &Rendered) -> u64 {
    let v: serde_json::Value = serde_json::from_str(&e.json).expect("json");
    v["server_event_seq"].as_u64().expect("seq")
}

fn sequenced(p: Pushed) -> Rendered {
    match p {
        Pushed::Sequenced(e) => e,
        other => panic!("not sequenced: {other:?}"),
    }
}

#[test]
fn seqs_start_at_one_without_gaps_and_keep_the_event() {
    let t = Instant::now();
    let mut j = Journal::new(1 << 20, Duration::from_secs(60));
    let e = event();
    let a = sequenced(j.push(&e, t));
    let b = sequenced(j.push(&e, t));
    assert_eq!((seq_of(&a), seq_of(&b)), (1, 2));
    let v: serde_json::Value = serde_json::from_str(&a.json).expect("json");
    assert_eq!(v["type"], "input_audio_buffer.cleared");
    assert_eq!(j.head(), 2);
    assert_eq!(j.bytes(), a.len() + b.len());
}

#[test]
fn replay_returns_what_follows_the_last_seq_and_refuses_a_seq_ahead() {
    let t = Instant::now();
    let mut j = Journal::new(1 << 20, Duration::from_secs(60));
    for _ in 0..5 {
        j.push(&event(), t);
    }
    let r = j.replay(2, t).expect("replay");
    assert_eq!(r.iter().map(seq_of).collect::<Vec<_>>(), vec![3, 4, 5]);
    assert!(j.replay(5, t).expect("nothing missed").is_empty());
    assert_eq!(j.replay(6, t).unwrap_err(), ReplayError::Ahead { head: 5 });
}

#[test]
fn acks_drop_entries_and_a_resume_from_before_them_is_a_gap() {
    let t = Instant::now();
    let mut j = Journal::new(1 << 20, Duration::from_secs(60));
    for _ in 0..4 {
        j.push(&event(), t);
    }
    j.ack(2).expect("ack");
    assert_eq!(j.replay(2, t).expect("replay").len(), 2);
    assert_eq!(j.replay(1, t).unwrap_err(), ReplayError::Gap);
    assert_eq!(j.ack(5), Err(4), "past the head");
    assert_eq!(j.ack(-1), Err(4), "negative");
    j.ack(4).expect("ack all");
    assert_eq!(j.bytes(), 0);
    assert!(j.replay(4, t).expect("up to date").is_empty());
}

#[test]
fn entries_age_out() {
    let t = Instant::now();
    let mut j = Journal::new(1 << 20, Duration::from_secs(60));
    j.push(&event(), t);
    j.push(&event(), t + Duration::from_secs(30));
    let later = t + Duration::from_secs(61);
    assert_eq!(j.replay(0, later).unwrap_err(), ReplayError::Gap);
    assert_eq!(j.replay(1, later).expect("the newer one").len(), 1);
}

#[test]
fn overflow_is_reported_once_then_events_go_unsequenced_and_resumes_find_a_gap() {
    let t = Instant::now();
    let one = sequenced(Journal::new(1 << 20, Duration::from_secs(60)).push(&event(), t)).len();
    let mut j = Journal::new(one * 2, Duration::from_secs(60));
    sequenced(j.push(&event(), t));
    sequenced(j.push(&event(), t));
    assert!(matches!(j.push(&event(), t), Pushed::Overflowed));
    assert!(matches!(j.push(&event(), t), Pushed::Unsequenced));
    assert!(j.overflowed());
    assert_eq!(j.bytes(), 0);
    assert_eq!(j.replay(2, t).unwrap_err(), ReplayError::Gap);
}
