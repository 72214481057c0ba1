//! Input transcription and transcription sessions on the sans-IO core, with a recording
//! transcriber port answered by the test.

use duet_models::{TokenLogprob, TranscribeOutput};

use super::*;

/// Speaks `secs` of voice then 0.8 s of silence through appends (server VAD commits it).
fn speak_turn(h: &mut Harness, secs: f32) {
    let mut audio = voiced(secs);
    audio.extend(std::iter::repeat_n(0.0, 19_200));
    for chunk in audio.chunks(480) {
        h.send(json!({"type":"input_audio_buffer.append","audio":pcm16_b64(chunk)}));
        h.advance(Duration::from_millis(20));
    }
}

/// The echo model with a recording transcriber (none if `sent` is `None`) and `session`.
fn echo(sent: Option<&Sent>, session: Value) -> Harness {
    harness(Setup {
        echo: true,
        transcriber: sent.cloned(),
        session,
        ..Setup::default()
    })
}

/// The echo model with a recording streaming transcriber, transcription asked for.
fn streaming(sent: &Sent) -> Harness {
    harness(Setup {
        echo: true,
        transcriber: Some(sent.clone()),
        streaming: true,
        session: transcribed(),
        ..Setup::default()
    })
}

/// A realtime session asking for input transcription.
fn transcribed() -> Value {
    json!({"type":"realtime","audio":{"input":{"transcription":{"model":"whisper-1"}}}})
}

fn committed_id(events: &[Value]) -> String {
    last(events, "input_audio_buffer.committed")["item_id"]
        .as_str()
        .expect("item id")
        .to_string()
}

fn completed(text: &str) -> Result<TranscribeOutput, String> {
    Ok(TranscribeOutput::Completed {
        text: text.into(),
        logprobs: vec![TokenLogprob {
            token: text.into(),
            logprob: -0.5,
            bytes: text.as_bytes().to_vec(),
        }],
        audio_seconds: 1.2,
        language: None,
    })
}

#[test]
fn a_committed_turn_is_transcribed_and_echo_answers_the_words() {
    let sent = Sent::default();
    let mut h = harness(Setup {
        echo: true,
        transcriber: Some(sent.clone()),
        session: json!({"type":"realtime","audio":{"input":{"transcription":{"model":"whisper-1"}}},
                        "include":["item.input_audio_transcription.logprobs"]}),
        ..Setup::default()
    });
    speak_turn(&mut h, 1.0);
    let events = h.until("response.created");
    let item = committed_id(&events);
    let sends = sent.lock().unwrap().clone();
    assert_eq!(sends.len(), 1, "{sends:?}");
    assert_eq!(sends[0].0, item);
    assert!(sends[0].2, "sent whole, with its end");
    assert!(
        sends[0].1 >= 24_000,
        "the whole utterance: {} samples",
        sends[0].1
    );
    // The model waits for the words: no audio before the transcript.
    let quiet = h.drain(Duration::from_millis(500));
    assert_eq!(
        count(&quiet, "response.output_audio.delta"),
        0,
        "{:?}",
        types(&quiet)
    );
    h.transcript(&item, completed("hello there"));
    let done = h.until("response.done");
    let delta = last(&done, "conversation.item.input_audio_transcription.delta");
    assert_eq!(delta["delta"], "hello there");
    assert_eq!(delta["item_id"], item.as_str());
    let c = last(
        &done,
        "conversation.item.input_audio_transcription.completed",
    );
    assert_eq!(c["transcript"], "hello there");
    assert_eq!(c["usage"], json!({"type":"duration","seconds":1.2}));
    assert_eq!(c["logprobs"][0]["logprob"], -0.5);
    let answer = last(&done, "response.done");
    assert_eq!(
        answer["response"]["output"][0]["content"][0]["transcript"],
        "You said: hello there"
    );
    // The item keeps its transcript.
    h.send(json!({"type":"conversation.item.retrieve","item_id":item}));
    let got = h.until("conversation.item.retrieved");
    assert_eq!(
        last(&got, "conversation.item.retrieved")["item"]["content"][0]["transcript"],
        "hello there"
    );
}

#[test]
fn a_late_transcript_does_not_hold_the_answer_past_its_wait() {
    let sent = Sent::default();
    let mut h = echo(Some(&sent), transcribed());
    speak_turn(&mut h, 1.0);
    let events = h.until("response.done");
    let answer = last(&events, "response.done");
    assert_eq!(
        answer["response"]["output"][0]["content"][0]["transcript"],
        "echo of 1.0 s"
    );
    let item = committed_id(&events);
    // The transcript comes after all; it is still reported.
    h.transcript(&item, completed("late words"));
    let late = h.until("conversation.item.input_audio_transcription.completed");
    assert_eq!(late.last().unwrap()["transcript"], "late words");
}

#[test]
fn a_failed_transcription_says_why_and_the_answer_goes_on() {
    let sent = Sent::default();
    let mut h = echo(Some(&sent), transcribed());
    speak_turn(&mut h, 1.0);
    let events = h.until("response.created");
    let item = committed_id(&events);
    h.transcript(&item, Err("the decoder produced no tokens".into()));
    let done = h.until("response.done");
    let failed = last(&done, "conversation.item.input_audio_transcription.failed");
    assert_eq!(failed["error"]["code"], "transcription_failed");
    assert_eq!(failed["error"]["message"], "the decoder produced no tokens");
    assert!(count(&done, "response.output_audio.delta") > 0);
}

#[test]
fn without_a_transcriber_a_transcription_request_fails_clearly() {
    let mut h = echo(None, transcribed());
    speak_turn(&mut h, 1.0);
    let events = h.until("conversation.item.input_audio_transcription.failed");
    let failed = events.last().unwrap();
    assert_eq!(failed["error"]["code"], "transcription_unavailable");
    assert!(failed["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--transcription-model-dir"));
}

#[test]
fn without_transcription_asked_for_nothing_is_sent() {
    let sent = Sent::default();
    let mut h = echo(Some(&sent), json!({}));
    speak_turn(&mut h, 1.0);
    let events = h.until("response.done");
    assert!(sent.lock().unwrap().is_empty());
    assert_eq!(
        count(&events, "conversation.item.input_audio_transcription.delta"),
        0
    );
}

#[test]
fn a_transcription_session_transcribes_and_never_responds() {
    let sent = Sent::default();
    let mut h = harness(Setup {
        echo: true,
        transcriber: Some(sent.clone()),
        transcription_session: true,
        ..Setup::default()
    });
    let created = h.seen[0].clone();
    assert_eq!(created["session"]["type"], "transcription");
    assert_eq!(
        created["session"]["object"],
        "realtime.transcription_session"
    );
    speak_turn(&mut h, 1.0);
    let events = h.until("input_audio_buffer.committed");
    let item = committed_id(&events);
    assert_eq!(sent.lock().unwrap().len(), 1);
    h.transcript(&item, completed("just words"));
    let after = h.drain(Duration::from_secs(2));
    assert_eq!(
        last(
            &after,
            "conversation.item.input_audio_transcription.completed"
        )["transcript"],
        "just words"
    );
    let all = h.types();
    assert!(!all.iter().any(|t| t.starts_with("response.")), "{all:?}");
    h.send(json!({"type":"response.create"}));
    let refused = h.until("error");
    assert_eq!(
        refused.last().unwrap()["error"]["code"],
        "invalid_event_for_session"
    );
}

#[test]
fn session_update_turns_a_session_into_a_transcription_session() {
    let sent = Sent::default();
    let mut h = echo(Some(&sent), json!({}));
    h.send(
        json!({"type":"session.update","session":{"type":"transcription",
        "audio":{"input":{"transcription":{"model":"gpt-4o-transcribe"}}}}}),
    );
    let updated = h.until("session.updated");
    let s = &updated.last().unwrap()["session"];
    assert_eq!(s["type"], "transcription");
    assert!(s.get("output_modalities").is_none(), "{s}");
    speak_turn(&mut h, 0.8);
    let events = h.drain(Duration::from_secs(1));
    assert_eq!(count(&events, "input_audio_buffer.committed"), 1);
    assert_eq!(count(&events, "response.created"), 0);
}

#[test]
fn the_speech_probability_meter_is_sent_when_included() {
    let mut h = harness(Setup {
        echo: true,
        session: json!({"type":"realtime","include":["input_audio_buffer.speech_probability"]}),
        ..Setup::default()
    });
    speak_turn(&mut h, 1.0);
    let events = h.until("input_audio_buffer.committed");
    let meters: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "input_audio_buffer.speech_probability")
        .collect();
    assert!(meters.len() >= 8, "about one per 96 ms: {}", meters.len());
    assert!(meters.iter().all(|m| m["detector"] == "energy"));
    let peak = meters
        .iter()
        .map(|m| m["probability"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(peak > 0.5, "speech peaks: {peak}");
    let first = meters[0];
    assert!(first["audio_end_ms"].as_u64() > first["audio_start_ms"].as_u64());
}

#[test]
fn a_streaming_transcriber_hears_the_speech_as_it_comes_and_the_commit_ends_it() {
    let sent = Sent::default();
    let mut h = streaming(&sent);
    speak_turn(&mut h, 1.0);
    let events = h.until("response.created");
    let item = committed_id(&events);
    let sends = sent.lock().unwrap().clone();
    assert!(
        sends.len() > 10,
        "the speech went out in pieces: {}",
        sends.len()
    );
    assert!(sends.iter().all(|(id, _, _)| *id == item));
    let (first, last_send) = (&sends[0], sends.last().unwrap());
    assert!(
        !first.2 && first.1 > 0,
        "from speech_started on, with the onset's audio: {first:?}"
    );
    assert_eq!(
        (last_send.1, last_send.2),
        (0, true),
        "the commit only ends it"
    );
    let streamed: usize = sends.iter().map(|s| s.1).sum();
    assert!(
        streamed >= 24_000,
        "the whole utterance: {streamed} samples"
    );
    // Words come as they are heard, then the completion.
    h.transcript(
        &item,
        Ok(TranscribeOutput::Delta {
            text: "hello".into(),
            logprobs: Vec::new(),
        }),
    );
    h.transcript(&item, completed("hello world"));
    let done = h.until("response.done");
    let deltas: Vec<&Value> = done
        .iter()
        .filter(|e| e["type"] == "conversation.item.input_audio_transcription.delta")
        .collect();
    assert_eq!(deltas.len(), 1, "no second delta once words were streamed");
    assert_eq!(deltas[0]["delta"], "hello");
    assert!(deltas[0].get("logprobs").is_none(), "not included");
    assert_eq!(
        last(&done, "response.done")["response"]["output"][0]["content"][0]["transcript"],
        "You said: hello world"
    );
}

#[test]
fn clearing_the_input_ends_a_streamed_utterance_and_its_late_answer_is_dropped() {
    let sent = Sent::default();
    let mut h = streaming(&sent);
    for chunk in voiced(0.5).chunks(480) {
        h.send(json!({"type":"input_audio_buffer.append","audio":pcm16_b64(chunk)}));
        h.advance(Duration::from_millis(20));
    }
    let started = h.until("input_audio_buffer.speech_started");
    let item = last(&started, "input_audio_buffer.speech_started")["item_id"]
        .as_str()
        .unwrap()
        .to_string();
    h.send(json!({"type":"input_audio_buffer.clear"}));
    h.until("input_audio_buffer.cleared");
    let ended = sent.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        ended,
        (item.clone(), 0, true),
        "the transcriber was told it ended"
    );
    h.transcript(&item, completed("never committed"));
    let after = h.drain(Duration::from_millis(500));
    assert_eq!(
        count(
            &after,
            "conversation.item.input_audio_transcription.completed"
        ),
        0,
        "{:?}",
        types(&after)
    );
}
