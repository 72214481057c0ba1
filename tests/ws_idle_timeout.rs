//! Server VAD `idle_timeout_ms`: silence after a response triggers
//! `input_audio_buffer.timeout_triggered`, a commit and a new response.

use crate::common;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn idle_timeout_nudges_the_model() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    c.send(json!({"type":"session.update","session":{"audio":{"input":{"turn_detection":{"type":"server_vad","idle_timeout_ms":5000}}}}})).await;
    let up = c.until("session.updated").await;
    assert_eq!(
        up["session"]["audio"]["input"]["turn_detection"]["idle_timeout_ms"],
        5000
    );
    c.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}})).await;
    c.send(json!({"type":"response.create","response":{"output_modalities":["text"]}}))
        .await;
    c.until("response.done").await;
    let t0 = Instant::now();
    let t = c.until("input_audio_buffer.timeout_triggered").await;
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(4_900) && waited < Duration::from_millis(7_000),
        "{waited:?}"
    );
    assert!(t["audio_end_ms"].as_u64() >= t["audio_start_ms"].as_u64());
    let committed = c.until("input_audio_buffer.committed").await;
    assert_eq!(committed["item_id"], t["item_id"]);
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "completed");

    c.send(json!({"type":"session.update","session":{"audio":{"input":{"turn_detection":{"type":"server_vad","idle_timeout_ms":100}}}}})).await;
    assert_eq!(
        c.until("error").await["error"]["param"],
        "session.audio.input.turn_detection.idle_timeout_ms"
    );
}
