//! The outbound byte budget: an event larger than the whole budget is replaced by an error
//! naming the client event; a transport that leaves the budget unread gets the session
//! aborted at once (1008, `event_queue_full`).

use super::*;
use crate::session::Received;

fn pcm_item(id: &str, secs: f32) -> Value {
    let audio = pcm16_b64(&vec![0.0; (secs * 24_000.0) as usize]);
    json!({"type":"conversation.item.create","item":{"id":id,"type":"message","role":"user",
        "content":[{"type":"input_audio","audio":audio}]}})
}

#[tokio::test]
async fn an_event_larger_than_the_budget_becomes_an_error() {
    let mut h = harness(Setup {
        echo: true,
        max_outbound_bytes: Some(64 * 1024),
        ..Setup::default()
    })
    .await;
    // 2 s of PCM16 is 128 KB of base64: its retrieval cannot fit a 64 KiB queue.
    h.send(pcm_item("item_2s", 2.0)).await;
    h.until("conversation.item.added").await;
    h.send(json!({"type":"conversation.item.retrieve","item_id":"item_2s","event_id":"evt_r"}))
        .await;
    let got = h.until("error").await;
    let err = last(&got, "error");
    assert_eq!(
        err["error"]["code"], "event_too_large_for_transport",
        "{err}"
    );
    assert_eq!(err["error"]["event_id"], "evt_r");
    assert_eq!(count(&got, "conversation.item.retrieved"), 0);
    // The session goes on.
    h.send(json!({"type":"input_audio_buffer.clear"})).await;
    h.until("input_audio_buffer.cleared").await;
}

#[tokio::test]
async fn an_unread_transport_gets_the_session_aborted_at_once() {
    let mut h = harness(Setup {
        echo: true,
        max_outbound_bytes: Some(200 * 1024),
        ..Setup::default()
    })
    .await;
    h.send(pcm_item("item_1s", 1.0)).await;
    h.until("conversation.item.added").await;
    // Nobody reads: three ~64 KB events fit, the fourth does not.
    for _ in 0..4 {
        h.send(json!({"type":"conversation.item.retrieve","item_id":"item_1s"}))
            .await;
    }
    let start = Instant::now();
    let abort = loop {
        match h.out.try_recv() {
            Received::Abort(a) => break a,
            Received::Closed => panic!("closed without an abort"),
            _ if start.elapsed() > Duration::from_secs(2) => panic!("no abort"),
            _ => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    };
    assert_eq!(abort.code, 1008);
    let error: Value = serde_json::from_str(&abort.error.expect("an error event").json).unwrap();
    assert_eq!(error["error"]["code"], "event_queue_full", "{error}");
    // The session ended: its inbox closes (the actor is gone).
    let start = Instant::now();
    while !h.inbox.is_closed() {
        assert!(
            start.elapsed() < Duration::from_millis(100),
            "the session lives on"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
