//! Barge-in: speech during a response cancels it (`turn_detected`), and nothing of the
//! cancelled response arrives after its `response.done`.

use crate::common;
use common::*;
use std::time::Duration;

#[tokio::test]
async fn speech_during_response_cancels_it() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    let mut turn = voiced(3.0);
    turn.extend(silence(0.6));
    c.append(&turn).await;
    let created = c.until("response.created").await;
    let resp_id = created["response"]["id"].as_str().unwrap().to_string();
    c.until("response.output_audio.delta").await;

    // The user talks over the answer.
    c.append(&voiced(0.3)).await;
    c.until("input_audio_buffer.speech_started").await;
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["id"], resp_id.as_str());
    assert_eq!(done["response"]["status"], "cancelled");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );
    assert_eq!(done["response"]["output"][0]["status"], "incomplete");
    let done_at = c.log.len();

    c.append(&silence(0.7)).await;
    let after = c.drain(Duration::from_millis(1_500)).await;
    let late: Vec<_> = c.log[done_at..]
        .iter()
        .filter(|e| e["response_id"] == resp_id.as_str())
        .map(|e| e["type"].clone())
        .collect();
    assert!(
        late.is_empty(),
        "events of the cancelled response after its response.done: {late:?}"
    );
    // The interruption itself became the next turn.
    let types: Vec<String> = after
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect();
    assert_in_order(
        &types,
        &[
            "input_audio_buffer.speech_stopped",
            "input_audio_buffer.committed",
            "response.created",
        ],
    );
}

#[tokio::test]
async fn interrupt_response_false_keeps_answering() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    c.send(serde_json::json!({"type":"session.update","session":{"audio":{"input":{"turn_detection":{"type":"server_vad","interrupt_response":false}}}}})).await;
    let up = c.until("session.updated").await;
    assert_eq!(
        up["session"]["audio"]["input"]["turn_detection"]["interrupt_response"],
        false
    );
    let mut turn = voiced(1.5);
    turn.extend(silence(0.6));
    c.append(&turn).await;
    c.until("response.output_audio.delta").await;
    c.append(&voiced(0.3)).await;
    c.until("input_audio_buffer.speech_started").await;
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "completed");
}
