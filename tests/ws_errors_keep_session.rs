//! Bad input gives an `error` event with type, code, message, param and the client's
//! event_id, and the session keeps working.

use crate::common;
use common::*;
use serde_json::json;

async fn expect_error(c: &mut Client, code: &str) -> serde_json::Value {
    let e = c.until("error").await;
    assert_eq!(e["error"]["code"], code, "{e}");
    assert_eq!(e["error"]["type"], "invalid_request_error");
    assert!(e["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
    assert!(e["error"].as_object().unwrap().contains_key("param"));
    assert!(e["error"].as_object().unwrap().contains_key("event_id"));
    e
}

#[tokio::test]
async fn errors_keep_the_session_alive() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;

    c.send_raw("{this is not json").await;
    expect_error(&mut c, "invalid_json").await;

    c.send(json!({"type":"no.such.event","event_id":"evt_unknown"}))
        .await;
    let e = expect_error(&mut c, "unknown_event_type").await;
    assert_eq!(e["error"]["event_id"], "evt_unknown");
    assert_eq!(e["error"]["param"], "type");

    c.send(json!({"type":"conversation.item.truncate","event_id":"evt_types","item_id":"x","content_index":0,"audio_end_ms":"soon"})).await;
    let e = expect_error(&mut c, "invalid_value").await;
    assert_eq!(e["error"]["param"], "audio_end_ms");
    assert_eq!(e["error"]["event_id"], "evt_types");

    c.send(json!({"type":"session.update","session":{"modalities":["text"]}}))
        .await;
    let e = expect_error(&mut c, "unknown_parameter").await;
    assert_eq!(e["error"]["param"], "session.modalities");

    c.send(json!({"type":"input_audio_buffer.commit","event_id":"evt_commit"}))
        .await;
    let e = expect_error(&mut c, "input_audio_buffer_commit_empty").await;
    assert_eq!(e["error"]["event_id"], "evt_commit");

    c.send(json!({"type":"response.cancel"})).await;
    expect_error(&mut c, "response_cancel_not_active").await;

    c.send(json!({"type":"input_audio_buffer.append","audio":"***"}))
        .await;
    expect_error(&mut c, "invalid_audio").await;

    c.send(json!({"type":"output_audio_buffer.clear"})).await;
    expect_error(&mut c, "invalid_event_for_transport").await;

    c.send(json!({"type":"conversation.item.retrieve","item_id":"item_nope"}))
        .await;
    expect_error(&mut c, "item_retrieve_invalid_item_id").await;

    // 15 MiB + 1 KiB: over the event limit but under the socket limit.
    let big = format!(
        r#"{{"type":"input_audio_buffer.append","event_id":"evt_big","audio":"{}"}}"#,
        "A".repeat(15 * 1024 * 1024 + 1024)
    );
    c.send_raw(&big).await;
    let e = expect_error(&mut c, "event_too_large").await;
    assert!(
        e["error"]["event_id"].is_null(),
        "the id of an unparsed event is unknown"
    );

    // Still alive: an update is answered.
    c.send(json!({"type":"session.update","session":{"instructions":"still here"}}))
        .await;
    let up = c.until("session.updated").await;
    assert_eq!(up["session"]["instructions"], "still here");
}

#[tokio::test]
async fn second_response_is_refused_while_one_is_active() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    c.manual_turns().await;
    c.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"one two three four five six seven eight nine ten eleven twelve"}]}})).await;
    c.until("conversation.item.done").await;
    c.send(json!({"type":"response.create"})).await;
    let created = c.until("response.created").await;
    c.send(json!({"type":"response.create","event_id":"evt_second"}))
        .await;
    let e = expect_error(&mut c, "conversation_already_has_active_response").await;
    assert_eq!(e["error"]["event_id"], "evt_second");
    let id = created["response"]["id"].as_str().unwrap();
    assert!(e["error"]["message"].as_str().unwrap().contains(id));
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "completed");
}
