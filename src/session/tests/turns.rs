//! `semantic_vad` with a turn model: the judge of pauses asks once at the candidate pause,
//! ends the turn after a pause that shrinks with the score, waits for the maximum pause
//! when the model says "unfinished", falls back to fixed silence when the model fails or
//! is late, and drops the answer for a pause the voice ended.

use super::*;

const SEMANTIC: &str = "semantic_vad";

fn judged(eagerness: &str) -> (Harness, TurnAsked) {
    let asked = TurnAsked::default();
    let h = harness(Setup {
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":{"type":SEMANTIC,"eagerness":eagerness}}}}),
        turn: Some(asked.clone()),
        ..Setup::default()
    });
    (h, asked)
}

/// Appends `secs` of audio (voice or silence) in 20 ms chunks, as a paced client would,
/// the virtual clock moving with it.
pub(super) fn append(h: &mut Harness, secs: f32, voice: bool) {
    let audio = if voice {
        voiced(secs)
    } else {
        vec![0.0; (secs * 24_000.0) as usize]
    };
    for chunk in audio.chunks(480) {
        h.send(json!({"type":"input_audio_buffer.append","audio":pcm16_b64(chunk)}));
        h.advance(STEP);
    }
}

fn score(h: &mut Harness, pause: u64, complete: Result<f32, String>) {
    h.input(SessionInput::TurnScore(super::super::TurnScore {
        pause,
        complete,
    }));
}

/// `audio_end_ms` of the turn's `speech_stopped`, once it came.
fn stopped_at(h: &mut Harness) -> Option<u64> {
    h.seen
        .iter()
        .find(|e| e["type"] == "input_audio_buffer.speech_stopped")
        .map(|e| e["audio_end_ms"].as_u64().unwrap())
}

#[test]
fn asked_for_turn_events_a_session_reports_each_score_before_the_end_it_causes() {
    let asked = TurnAsked::default();
    let mut h = harness(Setup {
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":{"type":SEMANTIC,"eagerness":"medium"}}}}),
        turn: Some(asked.clone()),
        turn_events: true,
        ..Setup::default()
    });
    append(&mut h, 1.0, true);
    append(&mut h, 0.3, false);
    let pause = asked.lock().unwrap()[0].0;
    score(&mut h, pause, Ok(0.85));
    append(&mut h, 0.4, false);
    let kinds: Vec<String> = h
        .seen
        .iter()
        .filter_map(|e| e["type"].as_str().map(String::from))
        .collect();
    let scored = kinds
        .iter()
        .position(|k| k == "turn.scored")
        .expect("turn.scored");
    let stopped = kinds
        .iter()
        .position(|k| k == "input_audio_buffer.speech_stopped")
        .expect("speech_stopped");
    assert!(scored < stopped, "{kinds:?}");
    let ev = h.seen[scored].clone();
    let started = h
        .seen
        .iter()
        .find(|e| e["type"] == "input_audio_buffer.speech_started")
        .unwrap()
        .clone();
    assert_eq!(ev["item_id"], started["item_id"], "{ev}");
    assert_eq!(ev["decision"], "end", "{ev}");
    assert_eq!(ev["end_after_ms"], 500, "medium's confident pause: {ev}");
    assert!(
        (ev["probability"].as_f64().unwrap() - 0.85).abs() < 1e-6,
        "{ev}"
    );
    assert_eq!(ev["unfinished_words"], false);
    // The pause began where the voice stopped, which is where speech_stopped counts from.
    let paused = ev["audio_end_ms"].as_u64().unwrap();
    let end = stopped_at(&mut h).unwrap();
    assert!(
        (end - 520..=end - 480).contains(&paused),
        "paused {paused}, ended {end}"
    );
    assert_eq!(kinds.iter().filter(|k| *k == "turn.scored").count(), 1);
}

#[test]
fn without_turn_events_no_extension_event_is_sent() {
    let (mut h, asked) = judged("medium");
    append(&mut h, 1.0, true);
    append(&mut h, 0.3, false);
    let pause = asked.lock().unwrap()[0].0;
    score(&mut h, pause, Ok(0.99));
    h.until("input_audio_buffer.committed");
    assert!(
        h.seen
            .iter()
            .all(|e| !e["type"].as_str().unwrap_or("").starts_with("turn.")),
        "{:?}",
        h.seen
    );
}

#[test]
fn a_confident_score_ends_the_turn_at_the_short_pause() {
    let (mut h, asked) = judged("medium");
    append(&mut h, 1.0, true);
    append(&mut h, 0.3, false);
    let asks = asked.lock().unwrap().clone();
    assert_eq!(
        asks.len(),
        1,
        "scored once at the candidate pause: {asks:?}"
    );
    // The turn so far (the padding, the voice and the candidate pause), at most 8 s.
    assert!((20_000..=8 * 24_000).contains(&asks[0].1), "{asks:?}");
    assert_eq!(
        stopped_at(&mut h),
        None,
        "nothing ends before the model answers"
    );
    score(&mut h, asks[0].0, Ok(0.99));
    let end = stopped_at(&mut h).expect("speech_stopped");
    let started = h
        .seen
        .iter()
        .find(|e| e["type"] == "input_audio_buffer.speech_started")
        .unwrap()["audio_start_ms"]
        .as_u64()
        .unwrap();
    // The voice ended about 1 s in; the immediate pause is 200 ms.
    assert!(
        (1_150..=1_300).contains(&end),
        "ended at {end} ms (started {started})"
    );
    h.until("input_audio_buffer.committed");
    assert_eq!(
        asked.lock().unwrap().len(),
        1,
        "the pause was not scored again"
    );
}

#[test]
fn an_unfinished_turn_waits_for_the_voice_or_the_maximum_pause() {
    let (mut h, asked) = judged("high");
    append(&mut h, 1.0, true);
    append(&mut h, 0.3, false);
    let pause = asked.lock().unwrap()[0].0;
    score(&mut h, pause, Ok(0.05));
    append(&mut h, 1.0, false);
    assert_eq!(stopped_at(&mut h), None, "an unfinished turn goes on");
    // The voice comes back: the same turn; its next pause is asked again.
    append(&mut h, 0.6, true);
    append(&mut h, 0.3, false);
    let asks = asked.lock().unwrap().clone();
    assert_eq!(asks.len(), 2, "{asks:?}");
    score(&mut h, asks[1].0, Ok(0.1));
    // Unfinished again, and the user says nothing more: `high` ends it at 2 s.
    append(&mut h, 1.6, false);
    assert_eq!(stopped_at(&mut h), None);
    append(&mut h, 0.2, false);
    let end = stopped_at(&mut h).expect("the maximum pause ended the turn");
    // The voice ended at about 2.9 s.
    assert!((4_850..=4_960).contains(&end), "ended at {end} ms");
    assert_eq!(
        h.seen
            .iter()
            .filter(|e| e["type"] == "input_audio_buffer.committed")
            .count(),
        1,
        "one turn, not two"
    );
}

#[test]
fn a_late_or_failed_model_falls_back_to_fixed_silence() {
    let (mut h, asked) = judged("medium");
    append(&mut h, 1.0, true);
    append(&mut h, 0.5, false);
    assert_eq!(asked.lock().unwrap().len(), 1);
    // Nobody answers. Past the score's timeout the pause falls back to the fixed silence
    // (700 ms for medium), which the audio has not reached yet.
    h.advance(Duration::from_millis(1_600));
    assert_eq!(stopped_at(&mut h), None);
    append(&mut h, 0.3, false);
    let end = stopped_at(&mut h).expect("fallback");
    assert!((1_650..=1_760).contains(&end), "ended at {end} ms");

    let (mut h, asked) = judged("medium");
    append(&mut h, 1.0, true);
    append(&mut h, 0.3, false);
    let pause = asked.lock().unwrap()[0].0;
    score(&mut h, pause, Err("the model broke".into()));
    assert_eq!(stopped_at(&mut h), None, "300 ms of the 700 so far");
    append(&mut h, 0.5, false);
    let end = stopped_at(&mut h).expect("fallback");
    assert!((1_650..=1_760).contains(&end), "ended at {end} ms");
}

#[test]
fn an_answer_for_a_pause_the_voice_ended_is_dropped() {
    let (mut h, asked) = judged("medium");
    append(&mut h, 1.0, true);
    append(&mut h, 0.2, false);
    let first = asked.lock().unwrap()[0].0;
    append(&mut h, 0.5, true);
    score(&mut h, first, Ok(0.99));
    append(&mut h, 0.1, false);
    assert_eq!(stopped_at(&mut h), None, "the stale answer ended nothing");
}

#[test]
fn server_vad_and_semantic_vad_without_a_model_keep_fixed_silence() {
    // With a turn model loaded, server_vad does not ask it.
    let asked = TurnAsked::default();
    let mut h = harness(Setup {
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":{"type":"server_vad","silence_duration_ms":500}}}}),
        turn: Some(asked.clone()),
        ..Setup::default()
    });
    append(&mut h, 1.0, true);
    append(&mut h, 0.7, false);
    assert!(asked.lock().unwrap().is_empty());
    assert!(stopped_at(&mut h).is_some());
    // Without one, semantic_vad (medium) ends a turn after 700 ms of silence.
    let mut h = harness(Setup {
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":{"type":SEMANTIC}}}}),
        ..Setup::default()
    });
    append(&mut h, 1.0, true);
    append(&mut h, 0.6, false);
    assert_eq!(stopped_at(&mut h), None);
    append(&mut h, 0.3, false);
    assert!(stopped_at(&mut h).is_some());
}

#[test]
fn the_words_are_asked_at_the_first_silent_window_and_given_up_when_the_voice_returns() {
    let (asked, sent) = (TurnAsked::default(), Sent::default());
    let mut h = harness(Setup {
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":{"type":SEMANTIC,"eagerness":"high"}}}}),
        turn: Some(asked.clone()),
        transcriber: Some(sent.clone()),
        tool_model: true,
        reads_text: true,
        limits: Some(Limits {
            speculative_ms: 200,
            ..Limits::default()
        }),
        ..Setup::default()
    });
    let words_ms = super::super::turn::WORDS_MS;
    let candidate_ms = super::super::turn::Preset::of("high").candidate_ms;
    assert!(words_ms < candidate_ms);
    append(&mut h, 1.0, true);
    // A pause longer than the first silent window, shorter than the candidate pause.
    append(&mut h, (words_ms + 40) as f32 / 1000.0, false);
    let spec = {
        let sent = sent.lock().unwrap();
        let spec: Vec<_> = sent.iter().filter(|s| s.0.starts_with("spec_")).collect();
        assert_eq!(
            spec.len(),
            1,
            "the words asked once, before the score: {sent:?}"
        );
        assert!(spec[0].2, "the turn so far, whole");
        spec[0].0.clone()
    };
    assert!(asked.lock().unwrap().is_empty(), "not scored yet");
    // The voice comes back before the transcript: the words are not wanted any more.
    append(&mut h, 0.3, true);
    assert!(
        sent.lock()
            .unwrap()
            .iter()
            .any(|s| s.0 == format!("forget {spec}")),
        "{:?}",
        sent.lock().unwrap()
    );
    assert!(
        asked.lock().unwrap().is_empty(),
        "that pause was never scored"
    );
}
