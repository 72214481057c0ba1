//! Model-initiated responses: their lifecycle, client responses, cancel, barge-in, limits.

use super::*;

#[test]
fn model_initiated_response_runs_the_full_lifecycle() {
    let mut h = harness(Setup {
        speech: vec![3..13, 30..35],
        ..Setup::default()
    });

    let events = h.until("response.listen");
    assert_eq!(types(&events), expected_ws(3..13));
    let created = &events[0];
    let id = created["response"]["id"].as_str().unwrap().to_string();
    assert_eq!(created["response"]["status"], "in_progress");
    let item_id = events[1]["item"]["id"].as_str().unwrap().to_string();

    let speak = last(&events, "response.speak");
    assert_eq!(speak["response_id"], id.as_str());
    assert_eq!(speak["item_id"], item_id.as_str());
    assert_eq!(speak["output_index"], 0);
    assert_eq!(speak["content_index"], 0);
    assert_eq!(
        speak["metadata"],
        json!({"session_id": created_session(&h), "epoch": 0, "model_speak": true})
    );

    let audio_bytes: usize = events
        .iter()
        .filter(|v| v["type"] == "response.output_audio.delta")
        .map(|v| {
            base64::engine::general_purpose::STANDARD
                .decode(v["delta"].as_str().unwrap())
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(
        audio_bytes,
        10 * FRAME * 2,
        "every speaking frame, as pcm16"
    );

    let done = last(&events, "response.done");
    let transcript = Scripted::transcript(3..13);
    assert_eq!(done["response"]["id"], id.as_str());
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(
        done["response"]["output"][0]["content"][0]["transcript"],
        transcript.as_str()
    );
    assert_eq!(
        done["response"]["usage"]["output_token_details"]["audio_tokens"],
        10
    );
    assert_eq!(
        last(&events, "response.output_audio_transcript.done")["transcript"],
        transcript.as_str()
    );

    let listen = last(&events, "response.listen");
    assert_eq!(listen["response_id"], id.as_str());
    assert_eq!(listen["session_id"], created_session(&h).as_str());
    assert_eq!(listen["epoch"], 0);
    assert_eq!(
        listen["response"],
        json!({"object": "realtime.response", "status": "listening", "id": id, "metadata": {"reason": "model_listen"}})
    );

    // The model speaks again later: a second response of its own.
    let second = h.until("response.listen");
    assert_eq!(types(&second), expected_ws(30..35));
    assert_ne!(second[0]["response"]["id"], id.as_str());
    assert_eq!(
        last(&second, "response.done")["response"]["status"],
        "completed"
    );
    // The conversation holds both assistant items in order.
    assert_eq!(
        last(&second, "conversation.item.added")["previous_item_id"],
        item_id.as_str()
    );
    // Nothing was asked of the model.
    assert_eq!(h.requests(), vec![]);
}

fn created_session(h: &Harness) -> String {
    h.seen[0]["session"]["id"].as_str().unwrap().to_string()
}

#[test]
fn echo_never_sees_speak_or_listen() {
    let mut h = harness(Setup {
        echo: true,
        ..Setup::default()
    });
    h.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello there"}]}}));
    h.send(json!({"type":"response.create"}));
    let events = h.until("response.done");
    assert_eq!(
        last(&events, "response.done")["response"]["status"],
        "completed"
    );
    h.drain(Duration::from_millis(300));
    let all = h.types();
    assert!(
        !all.iter()
            .any(|t| t == "response.speak" || t == "response.listen"),
        "{all:#?}"
    );
    let expected = [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
    ];
    let start = all.iter().position(|t| t == "response.created").unwrap();
    assert_eq!(all[start..start + 4], expected.map(String::from));
}

#[test]
fn cancel_mid_speech_waits_for_the_model_to_fall_silent() {
    let mut h = harness(Setup {
        speech: vec![3..40, 60..66],
        ..Setup::default()
    });
    let opening = h.until("response.output_audio.delta");
    let id = opening[0]["response"]["id"].as_str().unwrap().to_string();
    h.send(json!({"type":"response.cancel"}));
    let events = h.until("response.done");
    let done = last(&events, "response.done");
    assert_eq!(done["response"]["id"], id.as_str());
    assert_eq!(done["response"]["status"], "cancelled");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "client_cancelled"
    );

    // The model keeps talking until step 40: no response opens on that speech, nothing of
    // the cancelled one arrives; when it falls silent, a bare `response.listen`.
    let gap = h.until("response.listen");
    assert_eq!(types(&gap), ["response.listen"], "{gap:#?}");
    let listen = &gap[0];
    assert!(listen.get("response_id").is_none(), "{listen}");
    assert!(listen["response"].get("id").is_none(), "{listen}");
    assert_eq!(listen["epoch"], 1);

    // Its next speech opens a new response, under the new epoch.
    let second = h.until("response.listen");
    assert_eq!(types(&second), expected_ws(60..66));
    assert_eq!(last(&second, "response.speak")["metadata"]["epoch"], 1);
    assert_eq!(
        last(&second, "response.listen")["response_id"],
        second[0]["response"]["id"]
    );
    assert_eq!(h.requests(), vec![Request::Cancel]);
}

#[test]
fn client_response_is_filled_by_the_models_speech() {
    let mut h = harness(Setup {
        speech: once(5..12),
        gate_open: false,
        ..Setup::default()
    });
    h.send(json!({"type":"response.create","response":{"metadata":{"k":"v"}}}));
    let opening = h.until("response.content_part.added");
    assert_eq!(
        types(&opening),
        [
            "response.created",
            "response.output_item.added",
            "conversation.item.added",
            "response.content_part.added"
        ]
    );
    let id = opening[0]["response"]["id"].as_str().unwrap().to_string();
    assert!(h.drain(Duration::from_millis(200)).is_empty());
    h.go();
    let events = h.until("response.listen");
    let mut want = expected_ws(5..12);
    want.drain(..5);
    want.insert(0, "response.speak".into());
    assert_eq!(types(&events), want);
    assert_eq!(events[0]["response_id"], id.as_str());
    let done = last(&events, "response.done");
    assert_eq!(done["response"]["id"], id.as_str());
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(done["response"]["metadata"], json!({"k": "v"}));
    assert_eq!(
        done["response"]["output"][0]["content"][0]["transcript"],
        Scripted::transcript(5..12).as_str()
    );
    assert_eq!(last(&events, "response.listen")["response_id"], id.as_str());
    // One response only, and no request the model cannot meet.
    assert!(h.drain(Duration::from_millis(200)).is_empty());
    assert_eq!(count(&h.seen, "response.created"), 1);
    assert_eq!(h.requests(), vec![]);
}

#[test]
fn text_response_streams_the_models_text_and_drops_its_audio() {
    let mut h = harness(Setup {
        speech: once(5..12),
        gate_open: false,
        ..Setup::default()
    });
    h.send(json!({"type":"response.create","response":{"output_modalities":["text"]}}));
    h.until("response.content_part.added");
    h.go();
    let events = h.until("response.listen");
    let text = Scripted::transcript(5..12);
    assert_eq!(count(&events, "response.output_audio.delta"), 0);
    assert_eq!(count(&events, "response.speak"), 1);
    let deltas: String = events
        .iter()
        .filter(|v| v["type"] == "response.output_text.delta")
        .map(|v| v["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, text);
    assert_eq!(
        last(&events, "response.output_text.done")["text"],
        text.as_str()
    );
    let done = last(&events, "response.done");
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(
        done["response"]["output"][0]["content"][0]["text"],
        text.as_str()
    );
}

#[test]
fn client_response_without_speech_completes_empty_after_the_timeout() {
    let mut h = harness(Setup {
        speak_timeout: Some(Duration::from_millis(300)),
        ..Setup::default()
    });
    let sent = h.now;
    h.send(json!({"type":"response.create"}));
    let events = h.until("response.listen");
    assert!(h.now - sent >= Duration::from_millis(300));
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.output_item.added",
            "conversation.item.added",
            "response.content_part.added",
            "response.output_audio.done",
            "response.output_audio_transcript.done",
            "response.content_part.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
            "response.listen"
        ]
    );
    let id = events[0]["response"]["id"].as_str().unwrap();
    let done = last(&events, "response.done");
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(
        done["response"]["output"][0]["content"][0]["transcript"],
        ""
    );
    let listen = last(&events, "response.listen");
    assert_eq!(listen["response_id"], id);
    assert_eq!(listen["response"]["id"], id);
    assert_eq!(listen["response"]["metadata"]["reason"], "model_listen");
}

#[test]
fn the_default_speak_timeout_is_four_seconds() {
    assert_eq!(Limits::default().speak_timeout, Duration::from_secs(4));
}

#[test]
fn server_vad_commits_but_leaves_the_answer_to_the_model() {
    let mut h = harness(Setup::default());
    let mut audio = vec![0.0; 12_000];
    audio.extend(voiced(1.0));
    audio.extend(vec![0.0; 24_000]);
    for chunk in audio.chunks(2_400) {
        h.send(json!({"type":"input_audio_buffer.append","audio": pcm16_b64(chunk)}));
    }
    let events = h.until("input_audio_buffer.committed");
    assert_eq!(count(&events, "input_audio_buffer.speech_started"), 1);
    assert_eq!(count(&events, "input_audio_buffer.speech_stopped"), 1);
    let rest = h.drain(Duration::from_millis(400));
    assert_eq!(
        types(&rest),
        ["conversation.item.added", "conversation.item.done"]
    );
    assert_eq!(count(&h.seen, "response.created"), 0);
    assert_eq!(h.requests(), vec![]);
}

#[test]
fn manual_commit_makes_the_user_item_and_the_model_answers_itself() {
    let mut h = harness(Setup {
        speech: once(10..15),
        gate_open: false,
        session: json!({"audio":{"input":{"turn_detection": null}}}),
        ..Setup::default()
    });
    h.send(json!({"type":"input_audio_buffer.append","audio": pcm16_b64(&voiced(0.3))}));
    h.send(json!({"type":"input_audio_buffer.commit"}));
    let events = h.until("conversation.item.done");
    assert_eq!(
        types(&events),
        [
            "input_audio_buffer.committed",
            "conversation.item.added",
            "conversation.item.done"
        ]
    );
    let user_item = events[0]["item_id"].as_str().unwrap().to_string();
    assert!(h.drain(Duration::from_millis(200)).is_empty());
    h.go();
    let answer = h.until("response.listen");
    assert_eq!(types(&answer), expected_ws(10..15));
    assert_eq!(answer[2]["previous_item_id"], user_item.as_str());
    // The answer counts the user's audio as its input.
    assert_eq!(
        last(&answer, "response.done")["response"]["usage"]["input_token_details"]["audio_tokens"],
        15
    );
}

#[test]
fn barge_in_cancels_and_suppresses_until_silence() {
    let mut h = harness(Setup {
        speech: once(3..60),
        ..Setup::default()
    });
    let opening = h.until("response.output_audio.delta");
    let id = opening[0]["response"]["id"].as_str().unwrap().to_string();
    let mut audio = voiced(0.6);
    audio.extend(vec![0.0; 2_400]);
    h.send(json!({"type":"input_audio_buffer.append","audio": pcm16_b64(&audio)}));
    let events = h.until("response.done");
    assert!(types(&events).contains(&"input_audio_buffer.speech_started".to_string()));
    let done = last(&events, "response.done");
    assert_eq!(done["response"]["id"], id.as_str());
    assert_eq!(done["response"]["status"], "cancelled");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );
    // The model talks on until step 60 and then listens: no new response meanwhile.
    h.until("response.listen");
    h.drain(Duration::from_millis(300));
    assert_eq!(count(&h.seen, "response.created"), 1, "{:#?}", h.types());
    assert_eq!(count(&h.seen, "response.listen"), 1);
    assert!(last(&h.seen, "response.listen")
        .get("response_id")
        .is_none());
}

#[test]
fn max_output_tokens_ends_a_model_response_incomplete() {
    let mut h = harness(Setup {
        speech: vec![3..30, 45..48],
        session: json!({"max_output_tokens": 5}),
        ..Setup::default()
    });
    let events = h.until("response.done");
    let done = last(&events, "response.done");
    assert_eq!(done["response"]["status"], "incomplete");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "max_output_tokens"
    );
    // The rest of that speech is dropped; the model's next speech is a new response.
    let gap = h.until("response.listen");
    assert_eq!(types(&gap), ["response.listen"]);
    let next = h.until("response.created");
    assert_eq!(types(&next), ["response.created"]);
    assert_eq!(h.requests(), vec![Request::Cancel]);
}

#[test]
fn webrtc_playback_clear_truncates_and_suppresses() {
    let sink = SinkLog::default();
    let mut h = harness(Setup {
        speech: once(3..40),
        webrtc: Some(sink.clone()),
        ..Setup::default()
    });
    let opening = h.until("response.speak");
    let id = opening[0]["response"]["id"].as_str().unwrap().to_string();
    let item_id = opening[1]["item"]["id"].as_str().unwrap().to_string();
    // Audio goes to the media engine, not into events.
    h.until("response.content_part.added");
    h.advance(Duration::from_millis(100));
    assert!(sink.0.lock().unwrap().iter().any(|c| c == "play 1 480"));
    h.signals.played(&[(1, 960)], &[]);
    h.media();
    let started = h.until("output_audio_buffer.started");
    assert_eq!(
        last(&started, "output_audio_buffer.started")["response_id"],
        id.as_str()
    );
    assert_eq!(count(&started, "response.output_audio.delta"), 0);

    h.send(json!({"type":"output_audio_buffer.clear"}));
    let events = h.until("response.done");
    assert_eq!(
        last(&events, "response.done")["response"]["status"],
        "cancelled"
    );
    assert!(sink.0.lock().unwrap().iter().any(|c| c == "clear"));
    h.signals.cleared();
    h.media();
    let cleared = h.until("conversation.item.truncated");
    assert_eq!(
        last(&cleared, "output_audio_buffer.cleared")["response_id"],
        id.as_str()
    );
    let truncated = last(&cleared, "conversation.item.truncated");
    assert_eq!(truncated["item_id"], item_id.as_str());
    assert_eq!(truncated["audio_end_ms"], 40);

    h.until("response.listen");
    h.drain(Duration::from_millis(200));
    assert_eq!(count(&h.seen, "response.created"), 1, "{:#?}", h.types());
}

#[test]
fn a_client_response_after_a_cancel_waits_for_new_speech() {
    let mut h = harness(Setup {
        speech: vec![3..40, 60..66],
        ..Setup::default()
    });
    h.until("response.output_audio.delta");
    h.send(json!({"type":"response.cancel"}));
    h.until("response.done");
    // The model goes on with the cancelled speech until step 40; a response the client
    // creates now is not filled with that, but with the speech after the silence.
    h.send(json!({"type":"response.create"}));
    let created = h.until("response.created");
    let id = last(&created, "response.created")["response"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let filled = h.until("response.done");
    let done = last(&filled, "response.done");
    assert_eq!(done["response"]["id"], id.as_str());
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(
        last(&filled, "response.output_audio_transcript.done")["transcript"],
        Scripted::transcript(60..66),
        "{filled:#?}"
    );
    let first_words = filled
        .iter()
        .find(|v| v["type"] == "response.output_audio_transcript.delta")
        .expect("words");
    assert_eq!(first_words["delta"], " w60");
}
