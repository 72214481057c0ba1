//! A manual turn over WebSocket: append, commit, response.create, and the full GA lifecycle.

use crate::common;
use common::*;
use serde_json::json;

#[tokio::test]
async fn manual_audio_turn_follows_ga_lifecycle() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    c.manual_turns().await;

    let mut audio = silence(0.2);
    audio.extend(voiced(1.0));
    audio.extend(silence(0.2));
    c.append(&audio).await;
    c.send(json!({"type":"input_audio_buffer.commit","event_id":"c1"}))
        .await;
    let committed = c.until("input_audio_buffer.committed").await;
    let user_id = committed["item_id"].as_str().unwrap().to_string();
    assert!(user_id.starts_with("item_"));
    assert!(committed["previous_item_id"].is_null());
    let added = c.next().await;
    assert_eq!(added["type"], "conversation.item.added");
    assert_eq!(added["item"]["role"], "user");
    assert_eq!(added["item"]["content"][0]["type"], "input_audio");
    assert!(added["item"]["content"][0]["transcript"].is_null());
    assert_eq!(c.next().await["type"], "conversation.item.done");

    c.send(json!({"type":"response.create"})).await;
    let events = c.collect_until("response.done").await;
    let types = duet_client::rtc::types(&events);
    assert_in_order(
        &types,
        &[
            "response.created",
            "response.output_item.added",
            "conversation.item.added",
            "response.content_part.added",
            "response.output_audio_transcript.delta",
            "response.output_audio.delta",
            "response.output_audio.done",
            "response.output_audio_transcript.done",
            "response.content_part.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
        ],
    );
    let audio_bytes: usize = events
        .iter()
        .filter(|e| e["type"] == "response.output_audio.delta")
        .map(|e| b64_len(e["delta"].as_str().unwrap()))
        .sum();
    // 1.0 s of voiced audio (trimmed to 10 ms windows) echoed as 16-bit PCM at 24 kHz.
    assert!(
        (46_000..=49_000).contains(&audio_bytes),
        "{audio_bytes} bytes of audio"
    );
    let asst_added = events
        .iter()
        .find(|e| e["type"] == "conversation.item.added")
        .unwrap();
    assert_eq!(asst_added["previous_item_id"], user_id.as_str());
    let done = events.last().unwrap();
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(
        done["response"]["output"][0]["content"][0]["transcript"],
        "echo of 1.0 s"
    );
    assert_eq!(done["response"]["output"][0]["status"], "completed");
    assert!(
        done["response"]["usage"]["output_token_details"]["audio_tokens"]
            .as_u64()
            .unwrap()
            >= 49
    );
    assert!(done["response"]["conversation_id"]
        .as_str()
        .unwrap()
        .starts_with("conv_"));
    let transcript_done = events
        .iter()
        .find(|e| e["type"] == "response.output_audio_transcript.done")
        .unwrap();
    assert_eq!(transcript_done["transcript"], "echo of 1.0 s");
}
