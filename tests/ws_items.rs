//! Conversation items: create (ordering with previous_item_id), retrieve, truncate, delete.

use crate::common;
use common::*;
use serde_json::{json, Value};

fn text_item(text: &str) -> Value {
    json!({"type":"message","role":"user","content":[{"type":"input_text","text":text}]})
}

#[tokio::test]
async fn create_orders_items_by_previous_item_id() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    c.send(json!({"type":"conversation.item.create","item": text_item("first")}))
        .await;
    let a = c.until("conversation.item.added").await;
    assert!(a["previous_item_id"].is_null());
    let a_id = a["item"]["id"].as_str().unwrap().to_string();
    assert_eq!(a["item"]["status"], "completed");
    assert_eq!(a["item"]["object"], "realtime.item");

    c.send(json!({"type":"conversation.item.create","previous_item_id":"root","item": {"id":"item_custom","type":"message","role":"system","content":[{"type":"input_text","text":"be brief"}]}})).await;
    let b = c.until("conversation.item.added").await;
    assert_eq!(b["item"]["id"], "item_custom");
    assert!(b["previous_item_id"].is_null(), "root puts it first");

    c.send(json!({"type":"conversation.item.create","previous_item_id": a_id, "item": text_item("third")})).await;
    let third = c.until("conversation.item.added").await;
    assert_eq!(third["previous_item_id"], a_id.as_str());

    c.send(json!({"type":"conversation.item.create","previous_item_id":"item_missing","item": text_item("x")})).await;
    let e = c.until("error").await;
    assert_eq!(e["error"]["code"], "previous_item_not_found");

    c.send(json!({"type":"conversation.item.create","item": {"type":"message","role":"assistant","content":[{"type":"output_audio","transcript":"hi"}]}})).await;
    let e = c.until("error").await;
    assert_eq!(e["error"]["param"], "item.content");

    c.send(json!({"type":"conversation.item.delete","item_id":"item_custom"}))
        .await;
    assert_eq!(
        c.until("conversation.item.deleted").await["item_id"],
        "item_custom"
    );
    c.send(json!({"type":"conversation.item.delete","item_id":"item_custom"}))
        .await;
    assert_eq!(
        c.until("error").await["error"]["code"],
        "item_delete_invalid_item_id"
    );
}

#[tokio::test]
async fn truncate_cuts_audio_and_transcript() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    c.manual_turns().await;
    c.append(&voiced(1.0)).await;
    c.send(json!({"type":"input_audio_buffer.commit"})).await;
    c.until("conversation.item.done").await;
    c.send(json!({"type":"response.create"})).await;
    let done = c.until("response.done").await;
    let item_id = done["response"]["output"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    c.send(json!({"type":"conversation.item.truncate","item_id": item_id,"content_index":0,"audio_end_ms":5000})).await;
    let e = c.until("error").await;
    assert_eq!(e["error"]["param"], "audio_end_ms");

    // The transcript "echo of 1.0 s" is spread over 1000 ms: words at 0, 250, 500, 750 ms.
    c.send(json!({"type":"conversation.item.truncate","item_id": item_id,"content_index":0,"audio_end_ms":400})).await;
    let t = c.until("conversation.item.truncated").await;
    assert_eq!(
        (
            t["item_id"].as_str().unwrap(),
            t["audio_end_ms"].as_u64().unwrap()
        ),
        (item_id.as_str(), 400)
    );

    c.send(json!({"type":"conversation.item.retrieve","item_id": item_id}))
        .await;
    let r = c.until("conversation.item.retrieved").await;
    let part = &r["item"]["content"][0];
    assert_eq!(part["type"], "output_audio");
    assert_eq!(part["transcript"], "echo of");
    assert_eq!(
        b64_len(part["audio"].as_str().unwrap()),
        400 * 48,
        "400 ms of 24 kHz PCM16"
    );
}
