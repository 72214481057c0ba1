//! Text turns: a text-only response, per-response overrides and an out-of-band response.

use crate::common;
use common::*;
use serde_json::json;

#[tokio::test]
async fn text_only_response_and_out_of_band() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    c.send(json!({"type":"session.update","session":{"output_modalities":["text"]}}))
        .await;
    assert_eq!(
        c.until("session.updated").await["session"]["output_modalities"],
        json!(["text"])
    );
    c.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello duet"}]}})).await;
    c.until("conversation.item.done").await;
    c.send(json!({"type":"response.create","response":{"metadata":{"topic":"greeting"}}}))
        .await;
    let events = c.collect_until("response.done").await;
    let types = duet_client::rtc::types(&events);
    assert_in_order(
        &types,
        &[
            "response.created",
            "response.output_item.added",
            "conversation.item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
        ],
    );
    assert!(!types.iter().any(|t| t.contains("audio")), "{types:?}");
    let part = events
        .iter()
        .find(|e| e["type"] == "response.content_part.added")
        .unwrap();
    assert_eq!(part["part"], json!({"type":"text","text":""}));
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "You said: hello duet");
    let done = events.last().unwrap();
    assert_eq!(
        done["response"]["output"][0]["content"][0],
        json!({"type":"output_text","text":"You said: hello duet"})
    );
    assert_eq!(done["response"]["metadata"], json!({"topic":"greeting"}));

    // Out of band: not added to the conversation, conversation_id null, explicit input.
    c.send(json!({"type":"response.create","response":{"conversation":"none","output_modalities":["text"],"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"side question"}]}]}})).await;
    let events = c.collect_until("response.done").await;
    assert!(
        !events
            .iter()
            .any(|e| e["type"] == "conversation.item.added"),
        "out-of-band output stays out of the conversation"
    );
    let done = events.last().unwrap();
    assert!(done["response"]["conversation_id"].is_null());
    assert_eq!(
        done["response"]["output"][0]["content"][0]["text"],
        "You said: side question"
    );
    let oob_item = done["response"]["output"][0]["id"].as_str().unwrap();
    c.send(json!({"type":"conversation.item.retrieve","item_id": oob_item}))
        .await;
    assert_eq!(
        c.until("error").await["error"]["code"],
        "item_retrieve_invalid_item_id"
    );
}

#[tokio::test]
async fn text_turn_in_audio_mode_is_spoken() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    c.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}})).await;
    c.until("conversation.item.done").await;
    c.send(json!({"type":"response.create","response":{"max_output_tokens":4096}}))
        .await;
    let events = c.collect_until("response.done").await;
    let audio: usize = events
        .iter()
        .filter(|e| e["type"] == "response.output_audio.delta")
        .map(|e| b64_len(e["delta"].as_str().unwrap()))
        .sum();
    assert_eq!(
        audio,
        3 * 5280 * 2,
        "three tone bursts for \"You said: hi\""
    );
    assert_eq!(
        events.last().unwrap()["response"]["output"][0]["content"][0]["transcript"],
        "You said: hi"
    );
}

#[tokio::test]
async fn max_output_tokens_cuts_the_response() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    c.manual_turns().await;
    c.append(&voiced(1.0)).await;
    c.send(json!({"type":"input_audio_buffer.commit"})).await;
    c.until("conversation.item.done").await;
    c.send(json!({"type":"response.create","response":{"max_output_tokens":10}}))
        .await;
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "incomplete");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "max_output_tokens"
    );
    assert!(done["response"]["usage"]["output_tokens"].as_u64().unwrap() <= 11);
}
