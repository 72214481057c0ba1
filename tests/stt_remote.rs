//! `--stt-url`: speech to text from an OpenAI-compatible server (a scripted upstream that
//! answers in the shapes of OpenAI's `POST /v1/audio/transcriptions`: multipart in,
//! `{"text": …}` out). A committed utterance is sent as a WAV with `--stt-model` (not the
//! session's model name), the session's `language` and `prompt`, `response_format=json` and
//! the server's key; its text is the item's transcript; an upstream error fails that
//! transcription with the reason (never the key) and the session goes on; and the cascade
//! answers what the remote transcriber heard (remote STT + remote LLM; its speculative start
//! on the same transcriber); a transcription session is served by it too.

use crate::common;
use common::*;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use duet_signaling::multipart;
use serde_json::{json, Value};

/// The fields of the `n`th upload the upstream received: (path, authorization, parts).
fn upload(stt: &ScriptedLlm, n: usize) -> (String, String, Vec<multipart::Part>) {
    let (head, body) = stt.raw.lock().unwrap()[n].clone();
    let line = head.lines().next().unwrap_or_default().to_string();
    let header = |name: &str| {
        head.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
            .unwrap_or_default()
    };
    let parts = multipart::parse(&header("content-type"), &body, multipart::Limits::default())
        .expect("a multipart upload");
    (line, header("authorization"), parts)
}

fn field<'a>(parts: &'a [multipart::Part], name: &str) -> Option<&'a [u8]> {
    parts
        .iter()
        .find(|p| p.name == name)
        .map(|p| p.data.as_slice())
}

fn ok(text: &str) -> Reply {
    Reply::Status(200, json!({ "text": text }).to_string())
}

#[tokio::test]
async fn committed_speech_is_transcribed_by_the_remote_server() {
    let stt = ScriptedLlm::start(vec![
        ok("Ouvrez la porte, s'il vous plaît."),
        Reply::Status(
            500,
            r#"{"error":{"message":"model overloaded (key sk-stt-secret)"}}"#.into(),
        ),
        ok("Still here."),
    ])
    .await;
    let addr = server(&[
        "--stt-url",
        &stt.url,
        "--stt-model",
        "whisper-large-v3",
        "--stt-api-key",
        "sk-stt-secret",
    ])
    .await;
    let mut c = Client::connect(addr).await;
    c.send(
        json!({"type":"session.update","session":{"type":"realtime","audio":{"input":{
        "turn_detection":null,
        "transcription":{"model":"gpt-4o-transcribe","language":"fr","prompt":"Portes."}}}}}),
    )
    .await;
    c.until("session.updated").await;
    let speech = voiced(1.2);
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        c.append(&speech).await;
        c.send(json!({"type":"input_audio_buffer.commit"})).await;
        let added = c.until("conversation.item.added").await;
        let item = added["item"]["id"].clone();
        let done = loop {
            let ev = c.next().await;
            let kind = ev["type"].as_str().unwrap_or_default();
            if kind.starts_with("conversation.item.input_audio_transcription.")
                && !kind.ends_with(".delta")
            {
                break ev;
            }
        };
        assert_eq!(done["item_id"], item);
        outcomes.push(done);
    }
    assert_eq!(
        outcomes[0]["type"],
        "conversation.item.input_audio_transcription.completed"
    );
    assert_eq!(
        outcomes[0]["transcript"],
        "Ouvrez la porte, s'il vous plaît."
    );
    assert_eq!(
        outcomes[1]["type"],
        "conversation.item.input_audio_transcription.failed"
    );
    let message = outcomes[1]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("HTTP 500") && message.contains("model overloaded"),
        "{message}"
    );
    assert!(
        !message.contains("sk-stt-secret"),
        "the key is redacted: {message}"
    );
    assert_eq!(outcomes[2]["transcript"], "Still here.");

    // What the upstream received, as OpenAI's API takes it.
    let (line, auth, parts) = upload(&stt, 0);
    assert!(line.starts_with("POST /v1/audio/transcriptions "), "{line}");
    assert_eq!(auth, "Bearer sk-stt-secret");
    assert_eq!(field(&parts, "model"), Some(&b"whisper-large-v3"[..]));
    assert_eq!(field(&parts, "language"), Some(&b"fr"[..]));
    assert_eq!(field(&parts, "prompt"), Some(&b"Portes."[..]));
    assert_eq!(field(&parts, "response_format"), Some(&b"json"[..]));
    let file = parts.iter().find(|p| p.name == "file").expect("file");
    assert_eq!(file.filename.as_deref(), Some("audio.wav"));
    let wav = &file.data;
    assert_eq!(&wav[..4], b"RIFF");
    assert_eq!(u32::from_le_bytes(wav[24..28].try_into().unwrap()), 24_000);
    assert_eq!(
        wav.len(),
        44 + 2 * speech.len(),
        "the whole utterance, 16-bit"
    );
}

#[tokio::test]
async fn the_cascade_answers_what_the_remote_transcriber_heard() {
    let stt = ScriptedLlm::start(vec![ok("What time is it?")]).await;
    let llm = ScriptedLlm::start(vec![Reply::text(&["It is ", "noon."])]).await;
    let addr = server(&[
        "--model",
        "cascade",
        "--llm-url",
        &llm.url,
        "--stt-url",
        &stt.url,
    ])
    .await;
    let mut c = Client::connect_url(&format!("ws://{addr}/v1/realtime?model=cascade"), &[])
        .await
        .expect("connects");
    c.send(json!({"type":"session.update","session":{"type":"realtime",
        "output_modalities":["text"],
        "audio":{"input":{"turn_detection":{"type":"server_vad","silence_duration_ms":300}}}}}))
        .await;
    c.until("session.updated").await;
    let mut audio = silence(0.3);
    audio.extend(voiced(1.0));
    audio.extend(silence(0.8));
    c.append(&audio).await;
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "completed", "{done}");
    let text = done["response"]["output"][0]["content"][0]["text"].clone();
    assert_eq!(text, "It is noon.");
    let asked: Value = llm.requests()[0].clone();
    let messages = asked["messages"].as_array().expect("messages");
    let user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .expect("user");
    assert!(
        user["content"].to_string().contains("What time is it?"),
        "the LLM heard the remote transcript: {asked}"
    );
    // /v1/models lists each stage and where it runs.
    let r = duet_client::http::request(addr, "GET", "/v1/models", &[], "")
        .await
        .expect("models");
    let models: Value = serde_json::from_str(&r.body).expect("json");
    let served: Vec<(String, String, String)> = models["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|m| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (s(&m["id"]), s(&m["duet"]["serves"]), s(&m["duet"]["runs"]))
        })
        .collect();
    let want = |id: &str, serves: &str, runs: &str| (id.into(), serves.into(), runs.into());
    assert_eq!(
        served,
        [
            want("cascade", "realtime", "embedded"),
            want("whisper-1", "audio.transcriptions", "remote"),
            want("default", "chat.completions", "remote"),
        ]
    );
}

/// A transcription session (`?intent=transcription`) is served by the remote transcriber
/// too: each turn the detector finds comes back as the upstream's text.
#[tokio::test]
async fn a_transcription_session_is_served_by_the_remote_server() {
    let stt = ScriptedLlm::start(vec![ok("Turn one."), ok("Turn two.")]).await;
    let addr = server(&["--stt-url", &stt.url, "--stt-model", "whisper-large-v3"]).await;
    let url = format!("ws://{addr}/v1/realtime?intent=transcription");
    let mut c = Client::open(&url, &[]).await.expect("connects");
    let created = c.until("session.created").await;
    assert_eq!(created["session"]["type"], "transcription");
    c.send(
        json!({"type":"session.update","session":{"type":"transcription",
        "audio":{"input":{"transcription":{"model":"gpt-4o-transcribe"},
            "turn_detection":{"type":"server_vad","silence_duration_ms":300}}}}}),
    )
    .await;
    c.until("session.updated").await;
    for want in ["Turn one.", "Turn two."] {
        let mut audio = silence(0.3);
        audio.extend(voiced(0.8));
        audio.extend(silence(0.8));
        c.append(&audio).await;
        let done = c
            .until("conversation.item.input_audio_transcription.completed")
            .await;
        assert_eq!(done["transcript"], want, "{done}");
    }
    assert_eq!(stt.raw.lock().unwrap().len(), 2, "one upload a turn");
    let (_, _, parts) = upload(&stt, 0);
    assert_eq!(field(&parts, "model"), Some(&b"whisper-large-v3"[..]));
}
