//! `--model moshi` end to end over WebSocket, with a tiny random Moshi written by
//! `duet moshi-tiny`: the model listens all the time and speaks on its own; its speech
//! arrives as a model-initiated response (`response.speak`), its text as transcript
//! deltas, and `response.cancel` fences it.

use crate::common;
use clap::Parser;
use common::moshi::tiny_moshi_server;
use common::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn tiny_moshi_speaks_on_its_own_and_can_be_cancelled() {
    let moshi = tiny_moshi_server("ws").await;
    let addr = moshi.addr;
    let (status, body) = get(addr, "/v1/models", &[]).await;
    assert_eq!(status, 200);
    assert!(body.contains("\"moshi\""), "{body}");

    let mut c = Client::connect(addr).await;
    assert_eq!(c.log[0]["session"]["model"], "moshi");
    c.append(&voiced(1.0)).await;

    // The random model talks: a response it opened itself, in GA order with speak.
    let created = c.until("response.created").await;
    let resp = created["response"]["id"].as_str().unwrap().to_string();
    let events = c.collect_until("response.output_audio.delta").await;
    let types: Vec<String> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect();
    assert_in_order(
        &types,
        &[
            "response.output_item.added",
            "conversation.item.added",
            "response.speak",
            "response.content_part.added",
            "response.output_audio.delta",
        ],
    );
    let speak = events
        .iter()
        .find(|e| e["type"] == "response.speak")
        .unwrap();
    assert_eq!(speak["response_id"], resp.as_str());
    assert_eq!(speak["metadata"]["model_speak"], true);

    // 80 ms model frames, 24 kHz PCM, and the inner monologue as transcript.
    let mut samples = 0;
    let mut transcript = String::new();
    while samples < 24_000 {
        let e = c.next().await;
        match e["type"].as_str().unwrap() {
            "response.output_audio.delta" => {
                assert_eq!(e["response_id"], resp.as_str());
                samples += b64_len(e["delta"].as_str().unwrap());
            }
            "response.output_audio_transcript.delta" => {
                transcript.push_str(e["delta"].as_str().unwrap())
            }
            _ => {}
        }
    }
    assert!(
        !transcript.trim().is_empty(),
        "no transcript in 1 s of speech"
    );

    // Cancel: response.done cancelled, then nothing more of it.
    c.send(json!({"type":"response.cancel"})).await;
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["id"], resp.as_str());
    assert_eq!(done["response"]["status"], "cancelled");
    let done_at = c.log.len();
    c.drain(Duration::from_millis(800)).await;
    let late: Vec<_> = c.log[done_at..]
        .iter()
        .filter(|e| e["response_id"] == resp.as_str())
        .map(|e| e["type"].clone())
        .collect();
    assert!(
        late.is_empty(),
        "events of the cancelled response: {late:?}"
    );

    // The session goes on: a text event is still answered.
    c.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}))
        .await;
    c.until("conversation.item.added").await;
    drop(c);

    // Both slots can be used again after the first session left.
    let mut a = Client::connect(addr).await;
    let mut b = Client::connect(addr).await;
    a.append(&voiced(0.5)).await;
    b.append(&voiced(0.5)).await;
    a.until("response.output_audio.delta").await;
    b.until("response.output_audio.delta").await;
}

#[tokio::test]
async fn moshi_without_a_model_dir_is_a_clear_startup_error() {
    let args = duet::config::ServeArgs::parse_from(["serve", "--port", "0", "--model", "moshi"]);
    let e = duet::server::start(&args).await.err().unwrap().to_string();
    assert!(e.contains("--model-dir"), "{e}");
    let empty = std::env::temp_dir().join(format!("duet-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let args = duet::config::ServeArgs::parse_from([
        "serve",
        "--port",
        "0",
        "--model",
        "moshi",
        "--model-dir",
        empty.to_str().unwrap(),
    ]);
    let e = duet::server::start(&args).await.err().unwrap().to_string();
    assert!(
        e.contains("tokenizer-e351c8d8-checkpoint125.safetensors"),
        "{e}"
    );
    assert!(e.contains("never downloads"), "{e}");
    let _ = std::fs::remove_dir_all(&empty);
}
