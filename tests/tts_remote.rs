//! `--tts-url`: the cascade's voice from an OpenAI-compatible speech server (a scripted
//! upstream in the shapes of OpenAI's `POST /v1/audio/speech` with `response_format: "pcm"`:
//! JSON in, a chunked 24 kHz PCM16 body out). Each clause is one request carrying the
//! session's voice and speed and `--tts-model`; the audio the client gets is the PCM the
//! upstream streamed, clause after clause; a barge-in closes a clause's stream mid-way; an
//! upstream error fails the response with `tts_error` and the reason.

use crate::common;
use common::*;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// `secs` of a 24 kHz PCM16 tone, in pieces of `piece` bytes (odd, so samples are cut
/// between pieces as a real stream may cut them).
fn pcm_reply(secs: f32, piece: usize, gap: Duration) -> (Reply, usize) {
    let n = (secs * 24_000.0) as usize;
    let bytes: Vec<u8> = (0..n)
        .map(|i| ((i as f32 * 0.05).sin() * 8_000.0) as i16)
        .flat_map(i16::to_le_bytes)
        .collect();
    let parts = bytes.chunks(piece).map(<[u8]>::to_vec).collect();
    let reply = Reply::Bytes {
        content_type: "audio/pcm".into(),
        parts,
        gap,
    };
    (reply, n)
}

async fn cascade(llm: &ScriptedLlm, tts: &ScriptedLlm, vad: bool) -> Client {
    let addr = server(&[
        "--model",
        "cascade",
        "--llm-url",
        &llm.url,
        "--tts-url",
        &tts.url,
        "--tts-model",
        "kokoro",
        "--tts-api-key",
        "sk-tts-secret",
    ])
    .await;
    let mut c = Client::connect_url(&format!("ws://{addr}/v1/realtime?model=cascade"), &[])
        .await
        .expect("connects");
    let turns = if vad {
        json!({"type":"server_vad","silence_duration_ms":300})
    } else {
        Value::Null
    };
    c.send(json!({"type":"session.update","session":{"type":"realtime",
        "audio":{"input":{"turn_detection":turns},"output":{"voice":"af_bella","speed":1.25}}}}))
        .await;
    c.until("session.updated").await;
    c.send(
        json!({"type":"conversation.item.create","item":{"type":"message","role":"user",
        "content":[{"type":"input_text","text":"Say hello."}]}}),
    )
    .await;
    c.until("conversation.item.done").await;
    c
}

fn audio_samples(events: &[Value]) -> usize {
    events
        .iter()
        .filter(|e| e["type"] == "response.output_audio.delta")
        .map(|e| {
            let b64 = e["delta"].as_str().unwrap_or_default();
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64)
                .expect("base64")
                .len()
                / 2
        })
        .sum()
}

#[tokio::test]
async fn each_clause_is_fetched_in_the_sessions_voice_and_played_as_it_streams() {
    let llm = ScriptedLlm::start(vec![Reply::text(&["Hello there. ", "How are you today?"])]).await;
    let (first, n1) = pcm_reply(0.5, 4_801, Duration::from_millis(20));
    let (second, n2) = pcm_reply(0.3, 999, Duration::from_millis(5));
    let tts = ScriptedLlm::start(vec![first, second]).await;
    let mut c = cascade(&llm, &tts, false).await;
    c.send(json!({"type":"response.create"})).await;
    let events = c.collect_until("response.done").await;
    let done = events.last().expect("done");
    assert_eq!(done["response"]["status"], "completed", "{done}");
    assert_eq!(
        audio_samples(&events),
        n1 + n2,
        "every sample the upstream streamed"
    );
    let transcript = done["response"]["output"][0]["content"][0]["transcript"].clone();
    assert_eq!(transcript, "Hello there. How are you today?");
    // One request a clause, as OpenAI's API takes it (the clauses are fetched side by side,
    // so they may reach the upstream in either order).
    let mut asked = tts.requests();
    assert_eq!(asked.len(), 2, "{asked:?}");
    asked.sort_by_key(|r| r["input"] != "Hello there.");
    for (req, text) in asked.iter().zip(["Hello there.", "How are you today?"]) {
        assert_eq!(
            *req,
            json!({"model":"kokoro","input":text,"voice":"af_bella","response_format":"pcm","speed":1.25})
        );
    }
    let (head, _) = tts.raw.lock().unwrap()[0].clone();
    assert!(head.starts_with("POST /v1/audio/speech "), "{head}");
    assert!(head
        .to_ascii_lowercase()
        .contains("authorization: bearer sk-tts-secret"));
}

#[tokio::test]
async fn a_barge_in_closes_the_clause_stream_and_an_upstream_error_fails_the_response() {
    let llm = ScriptedLlm::start(vec![
        Reply::text(&["This is a long story that takes a while to tell."]),
        Reply::text(&["Short."]),
    ])
    .await;
    // Ten seconds of audio in 200 pieces, 50 ms apart: streams for ten seconds.
    let (slow, _) = pcm_reply(10.0, 2_400, Duration::from_millis(50));
    let tts = ScriptedLlm::start(vec![
        slow,
        Reply::Status(429, r#"{"error":{"message":"quota exceeded"}}"#.into()),
    ])
    .await;
    let mut c = cascade(&llm, &tts, true).await;
    c.send(json!({"type":"response.create"})).await;
    c.until("response.output_audio.delta").await;
    // The caller speaks over the answer: server VAD's barge-in cancels it.
    let mut speech = voiced(0.8);
    speech.extend(silence(0.5));
    c.append(&speech).await;
    let barged = Instant::now();
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    let start = Instant::now();
    while tts.closed.lock().unwrap().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "the stream stayed open"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let closed = tts.closed.lock().unwrap()[0];
    println!(
        "TTS stream closed {} ms after the barge-in audio was sent",
        closed.duration_since(barged).as_millis()
    );
    // The turn the barge-in made is answered; its clause gets a 429.
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "failed", "{done}");
    let err = &done["response"]["status_details"]["error"];
    assert_eq!(err["code"], "tts_error", "{done}");
    let e = c.until("error").await;
    let message = e["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("HTTP 429") && message.contains("quota exceeded"),
        "{message}"
    );
}
