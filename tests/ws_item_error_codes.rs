//! An unknown `item_id` in `conversation.item.retrieve`, `.truncate` and `.delete` is answered
//! with OpenAI's code and message for each, naming the client's `event_id` (Pipecat's
//! `OpenAIRealtimeLLMService` routes only `item_retrieve_invalid_item_id` back to the caller
//! and treats any other code as fatal), and the session goes on.

use crate::common;
use common::*;
use serde_json::json;

#[tokio::test]
async fn unknown_item_ids_get_openais_codes_and_the_session_goes_on() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    let cases = [
        (
            json!({"type":"conversation.item.retrieve","event_id":"rci_item_gone","item_id":"item_gone"}),
            "item_retrieve_invalid_item_id",
            "Error retrieving item: the item with id 'item_gone' does not exist.",
        ),
        (
            json!({"type":"conversation.item.truncate","event_id":"evt_t","item_id":"item_gone",
                "content_index":0,"audio_end_ms":100}),
            "item_truncate_invalid_item_id",
            "Error truncating item: the item with id 'item_gone' does not exist.",
        ),
        (
            json!({"type":"conversation.item.delete","event_id":"evt_d","item_id":"item_gone"}),
            "item_delete_invalid_item_id",
            "Error deleting item: the item with id 'item_gone' does not exist.",
        ),
    ];
    for (event, code, message) in cases {
        let event_id = event["event_id"].clone();
        c.send(event).await;
        let e = c.until("error").await;
        assert_eq!(e["error"]["type"], "invalid_request_error", "{e}");
        assert_eq!(e["error"]["code"], code, "{e}");
        assert_eq!(e["error"]["message"], message, "{e}");
        assert_eq!(e["error"]["param"], "item_id", "{e}");
        assert_eq!(e["error"]["event_id"], event_id, "{e}");
    }
    // The session goes on: an item is created and retrieved.
    c.send(
        json!({"type":"conversation.item.create","item":{"id":"item_here","type":"message",
        "role":"user","content":[{"type":"input_text","text":"still here"}]}}),
    )
    .await;
    c.until("conversation.item.added").await;
    c.send(json!({"type":"conversation.item.retrieve","item_id":"item_here"}))
        .await;
    let r = c.until("conversation.item.retrieved").await;
    assert_eq!(r["item"]["content"][0]["text"], "still here");
}
