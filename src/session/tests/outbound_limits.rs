//! The outbound byte budget: an event larger than the whole budget is replaced by an error
//! naming the client event; a transport that leaves the budget unread gets the session
//! aborted at once (1008, `event_queue_full`).

use super::*;

fn pcm_item(id: &str, secs: f32) -> Value {
    let audio = pcm16_b64(&vec![0.0; (secs * 24_000.0) as usize]);
    json!({"type":"conversation.item.create","item":{"id":id,"type":"message","role":"user",
        "content":[{"type":"input_audio","audio":audio}]}})
}

#[test]
fn an_event_larger_than_the_budget_becomes_an_error() {
    let mut h = harness(Setup {
        echo: true,
        max_outbound_bytes: Some(64 * 1024),
        ..Setup::default()
    });
    // 2 s of PCM16 is 128 KB of base64: its retrieval cannot fit a 64 KiB queue.
    h.send(pcm_item("item_2s", 2.0));
    h.until("conversation.item.added");
    h.send(json!({"type":"conversation.item.retrieve","item_id":"item_2s","event_id":"evt_r"}));
    let got = h.until("error");
    let err = last(&got, "error");
    assert_eq!(
        err["error"]["code"], "event_too_large_for_transport",
        "{err}"
    );
    assert_eq!(err["error"]["event_id"], "evt_r");
    assert_eq!(count(&got, "conversation.item.retrieved"), 0);
    // The session goes on.
    h.send(json!({"type":"input_audio_buffer.clear"}));
    h.until("input_audio_buffer.cleared");
}

#[test]
fn an_unread_transport_gets_the_session_aborted_at_once() {
    let mut h = harness(Setup {
        echo: true,
        max_outbound_bytes: Some(200 * 1024),
        ..Setup::default()
    });
    h.send(pcm_item("item_1s", 1.0));
    h.until("conversation.item.added");
    // Nobody reads: three ~64 KB events fit, the fourth does not.
    h.reading = false;
    for _ in 0..4 {
        h.send(json!({"type":"conversation.item.retrieve","item_id":"item_1s"}));
    }
    // At once, with no time passing: the session closed and the queue was aborted.
    assert!(h.session.is_closed(), "the session lives on");
    let Received::Abort(abort) = h.out.try_recv() else {
        panic!("no abort");
    };
    assert_eq!(abort.code, 1008);
    let error: Value = serde_json::from_str(&abort.error.expect("an error event").json).unwrap();
    assert_eq!(error["error"]["code"], "event_queue_full", "{error}");
}
