//! Adaptive interruption (the default under `semantic_vad`): speech over an answer pauses
//! its WebRTC playout and is judged before anything is cancelled or sent; long speech or
//! real words interrupt as a barge-in does (with `speech_started` naming the onset), a
//! backchannel or short speech without words lets the answer go on.

use super::*;

/// Appends `secs` of voice or silence in 20 ms chunks as the caller's media (WebRTC) or
/// as client appends, the virtual clock moving with it.
fn append(h: &mut Harness, secs: f32, voice: bool) {
    if !h.media_input {
        return super::turns::append(h, secs, voice);
    }
    let audio = if voice {
        voiced(secs)
    } else {
        vec![0.0; (secs * 24_000.0) as usize]
    };
    for chunk in audio.chunks(480) {
        h.input(SessionInput::Media(chunk.to_vec().into()));
        h.advance(STEP);
    }
}

fn semantic(h: Setup) -> Harness {
    harness(Setup {
        echo: true,
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":{"type":"semantic_vad","eagerness":"high"}}}}),
        ..h
    })
}

/// A spoken turn of `secs` that the echo model starts answering.
fn answered_turn(h: &mut Harness, secs: f32) -> String {
    append(h, secs, true);
    append(h, 0.4, false);
    let created = h.until("response.created");
    last(&created, "response.created")["response"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A session with a transcriber and `?turn_events=1` answering a 3 s turn: the harness,
/// what the transcriber was sent, and where the events of what follows start.
fn answering_with_turn_events() -> (Harness, Sent, usize) {
    let sent = Sent::default();
    let mut h = semantic(Setup {
        transcriber: Some(sent.clone()),
        turn_events: true,
        ..Setup::default()
    });
    answered_turn(&mut h, 3.0);
    let seen = h.seen.len();
    (h, sent, seen)
}

/// The transcriber hears `words` in the speech over the answer (whose words were asked for).
fn hear(h: &mut Harness, sent: &Sent, words: &str) {
    let asked = sent
        .lock()
        .unwrap()
        .iter()
        .find(|(id, _, _)| id.starts_with("bc_"))
        .map(|(id, _, _)| id.clone())
        .expect("its words were asked for");
    h.transcript(
        &asked,
        Ok(duet_models::TranscribeOutput::Completed {
            text: words.into(),
            logprobs: Vec::new(),
            audio_seconds: 0.3,
            language: None,
        }),
    );
}

fn log(sink: &SinkLog) -> Vec<String> {
    sink.0
        .lock()
        .unwrap()
        .iter()
        .filter(|l| !l.starts_with("play") && !l.starts_with("finish"))
        .cloned()
        .collect()
}

#[test]
fn on_webrtc_a_short_sound_pauses_the_answer_and_it_goes_on() {
    let sink = SinkLog::default();
    let mut h = semantic(Setup {
        webrtc: Some(sink.clone()),
        ..Setup::default()
    });
    answered_turn(&mut h, 2.0);
    append(&mut h, 0.2, false);
    let seen = h.seen.len();
    append(&mut h, 0.3, true);
    assert_eq!(
        log(&sink).last().map(String::as_str),
        Some("pause"),
        "paused at once"
    );
    append(&mut h, 0.5, false);
    assert_eq!(log(&sink), ["pause", "resume"], "resumed, never cleared");
    let later: Vec<String> = types(&h.seen[seen..]);
    assert!(
        !later.iter().any(|t| t.starts_with("input_audio_buffer")),
        "no event for a backchannel: {later:?}"
    );
    let done = h.until("response.done");
    assert_eq!(
        last(&done, "response.done")["response"]["status"],
        "completed"
    );
}

#[test]
fn on_webrtc_long_speech_interrupts_where_the_answer_paused() {
    let sink = SinkLog::default();
    let mut h = semantic(Setup {
        webrtc: Some(sink.clone()),
        ..Setup::default()
    });
    let answer = answered_turn(&mut h, 2.0);
    append(&mut h, 0.2, false);
    let onset_ms = (h.session.input.clock() / 24) as i64;
    append(&mut h, 0.4, true);
    assert_eq!(log(&sink), ["pause"]);
    assert_eq!(
        count(&h.seen, "input_audio_buffer.speech_started"),
        1,
        "only the first turn's"
    );
    append(&mut h, 0.4, true);
    // 600 ms of voice: the user's turn.
    assert_eq!(log(&sink), ["pause", "clear"]);
    let started = h
        .seen
        .iter()
        .rfind(|e| e["type"] == "input_audio_buffer.speech_started")
        .unwrap();
    let at = started["audio_start_ms"].as_i64().unwrap();
    assert!(
        (at - onset_ms).abs() <= 350,
        "names the onset: {at} vs {onset_ms}"
    );
    let done = h.until("response.done");
    let done = last(&done, "response.done");
    assert_eq!(done["response"]["id"], answer.as_str());
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );
}

#[test]
fn on_a_websocket_the_words_decide_and_a_backchannel_sends_nothing() {
    for (words, interrupts) in [("Mm-hmm.", false), ("Stop.", true)] {
        let sent = Sent::default();
        let mut h = semantic(Setup {
            transcriber: Some(sent.clone()),
            ..Setup::default()
        });
        answered_turn(&mut h, 3.0);
        let seen = h.seen.len();
        append(&mut h, 0.3, true);
        append(&mut h, 0.4, false);
        assert_eq!(
            count(&h.seen[seen..], "input_audio_buffer.speech_started"),
            0,
            "{words}: held back"
        );
        hear(&mut h, &sent, words);
        let after = types(&h.seen[seen..]);
        if interrupts {
            assert_in_order(
                &after,
                &[
                    "input_audio_buffer.speech_started",
                    "response.done",
                    "input_audio_buffer.speech_stopped",
                    "input_audio_buffer.committed",
                ],
            );
        } else {
            assert!(
                after.iter().all(|t| !t.starts_with("input_audio_buffer")),
                "{after:?}"
            );
            let done = h.until("response.done");
            assert_eq!(
                last(&done, "response.done")["response"]["status"],
                "completed"
            );
        }
    }
}

#[test]
fn asked_for_turn_events_each_verdict_is_reported_with_its_words() {
    for (words, outcome) in [("Mm-hmm.", "backchannel"), ("Stop.", "interruption")] {
        let (mut h, sent, seen) = answering_with_turn_events();
        append(&mut h, 0.3, true);
        append(&mut h, 0.4, false);
        assert_eq!(count(&h.seen[seen..], "turn.overlap"), 0, "not judged yet");
        hear(&mut h, &sent, words);
        let reports: Vec<&Value> = h.seen[seen..]
            .iter()
            .filter(|e| e["type"] == "turn.overlap")
            .collect();
        assert_eq!(reports.len(), 1, "{words}: {reports:?}");
        let r = reports[0];
        assert_eq!(r["outcome"], outcome, "{r}");
        assert_eq!(r["transcript"], words, "{r}");
        let ms = r["duration_ms"].as_u64().unwrap();
        // 300 ms of voice and the detector's silence window that ended it.
        assert!((300..=800).contains(&ms), "{r}");
        let after = types(&h.seen[seen..]);
        if outcome == "interruption" {
            assert_in_order(
                &after,
                &["turn.overlap", "input_audio_buffer.speech_started"],
            );
        }
    }
}

#[test]
fn with_a_turn_model_speech_over_the_answer_is_judged_after_the_fixed_silence() {
    let sink = SinkLog::default();
    let asked = TurnAsked::default();
    let mut h = semantic(Setup {
        webrtc: Some(sink.clone()),
        turn: Some(asked.clone()),
        ..Setup::default()
    });
    let score = |h: &mut Harness, pause: u64, p: f32| {
        h.input(SessionInput::TurnScore(super::super::TurnScore {
            pause,
            complete: Ok(p),
        }))
    };
    append(&mut h, 2.0, true);
    append(&mut h, 0.3, false);
    let first = asked.lock().unwrap()[0].0;
    score(&mut h, first, 0.99);
    h.until("response.created");
    append(&mut h, 0.2, false);
    append(&mut h, 0.3, true);
    assert_eq!(log(&sink), ["pause"]);
    // The turn model calls the short sound unfinished, which for a turn means waiting up to
    // the maximum pause (2 s under `high`); over an answer it ends at the fixed 300 ms and,
    // with no words to wait for, lets the answer go on.
    append(&mut h, 0.2, false);
    let second = asked.lock().unwrap().last().unwrap().0;
    assert_ne!(second, first, "the sound's pause was scored");
    score(&mut h, second, 0.05);
    append(&mut h, 0.25, false);
    assert_eq!(
        log(&sink),
        ["pause", "resume"],
        "resumed within 450 ms of silence"
    );
}

#[test]
fn server_vad_still_interrupts_at_once() {
    let sink = SinkLog::default();
    let mut h = harness(Setup {
        echo: true,
        webrtc: Some(sink.clone()),
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":{"type":"server_vad","silence_duration_ms":300}}}}),
        ..Setup::default()
    });
    answered_turn(&mut h, 2.0);
    append(&mut h, 0.2, false);
    append(&mut h, 0.3, true);
    assert_eq!(log(&sink), ["clear"]);
    assert_eq!(count(&h.seen, "input_audio_buffer.speech_started"), 2);
}

/// `want` appears in `types` in this order (other events between them).
fn assert_in_order(types: &[String], want: &[&str]) {
    let mut at = 0;
    for w in want {
        match types[at..].iter().position(|t| t == w) {
            Some(i) => at += i + 1,
            None => panic!("{w} missing or out of order in {types:?}"),
        }
    }
}

#[test]
fn a_pause_inside_speech_over_the_answer_keeps_it_one_speech() {
    let (mut h, sent, seen) = answering_with_turn_events();
    // "Wait," then a pause that ends it, then "what did you say": its words are asked for
    // at the pause, and the voice comes back before they are heard.
    append(&mut h, 0.25, true);
    append(&mut h, 0.8, false);
    let asked = |sent: &Sent| {
        let sent = sent.lock().unwrap();
        let words: Vec<(String, usize)> = sent
            .iter()
            .filter(|(id, _, _)| id.starts_with("bc_"))
            .map(|(id, n, _)| (id.clone(), *n))
            .collect();
        words
    };
    let first = asked(&sent);
    assert_eq!(first.len(), 1, "the words up to the pause are asked for");
    append(&mut h, 0.25, true);
    append(&mut h, 0.8, false);
    let words = asked(&sent);
    // The words so far once 300 ms of voice were heard in all (the part before the pause
    // counted), then the whole speech's at its end.
    assert_eq!(words.len(), 3, "{words:?}");
    let (id, samples) = words[2].clone();
    assert!(
        samples > first[0].1 + 24_000 * 5 / 10,
        "asked again from the first onset: {samples} samples after {}",
        first[0].1
    );
    assert_eq!(
        count(&h.seen[seen..], "turn.overlap"),
        0,
        "one speech, not judged yet"
    );
    // The words of the part before the pause come late, a backchannel's: they decide nothing
    // (decisive ones would interrupt: `overlap::decisive_words_before_a_pause_…`).
    let late = |text: &str| {
        Ok(duet_models::TranscribeOutput::Completed {
            text: text.into(),
            logprobs: Vec::new(),
            audio_seconds: 0.3,
            language: None,
        })
    };
    h.transcript(&words[0].0, late("Mm-hmm."));
    assert_eq!(
        count(&h.seen[seen..], "turn.overlap"),
        0,
        "the first words are not waited for"
    );
    h.transcript(&id, late("Wait, what did you say?"));
    let reports: Vec<&Value> = h.seen[seen..]
        .iter()
        .filter(|e| e["type"] == "turn.overlap")
        .collect();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0]["outcome"], "interruption", "{}", reports[0]);
    let started = h.seen[seen..]
        .iter()
        .filter(|e| e["type"] == "input_audio_buffer.speech_started")
        .collect::<Vec<_>>();
    assert_eq!(started.len(), 1, "one speech_started");
}
