//! The memory budget on the sans-IO core: a client request that would pass it is refused
//! with `server_memory_exhausted` (its `event_id` named) and the session goes on; what the
//! session gave up is charged no longer.

use super::*;

fn metered(budget: u64) -> Harness {
    let mut h = harness(Setup {
        echo: true,
        memory: Some(budget),
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":null}}}),
        ..Setup::default()
    });
    h.drain(Duration::from_millis(50));
    h
}

fn append(h: &mut Harness, secs: f32, id: &str) {
    h.send(json!({"type":"input_audio_buffer.append","event_id": id,
        "audio": pcm16_b64(&voiced(secs))}));
}

fn memory_error(events: &[Value]) -> Option<&Value> {
    events
        .iter()
        .find(|e| e["type"] == "error" && e["error"]["code"] == "server_memory_exhausted")
}

#[test]
fn an_append_past_the_budget_is_refused_and_the_session_goes_on() {
    let mut h = metered(4_000_000);
    append(&mut h, 10.0, "evt_small");
    assert!(memory_error(&h.drain(Duration::from_millis(20))).is_none());
    // 20 s more: its decoding and the buffer's growth do not fit what is left.
    append(&mut h, 20.0, "evt_big");
    let events = h.drain(Duration::from_millis(20));
    let err = memory_error(&events).expect("refused");
    assert_eq!(err["error"]["event_id"], "evt_big", "{err}");
    assert_eq!(err["error"]["type"], "server_error");
    // The session goes on: the 10 s it holds commit as an item.
    h.send(json!({"type":"input_audio_buffer.commit"}));
    let committed = h.until("input_audio_buffer.committed");
    let item = last(&committed, "input_audio_buffer.committed")["item_id"].clone();
    h.send(json!({"type":"conversation.item.delete","item_id": item}));
    h.until("conversation.item.deleted");
    // What it gave up is free again: the same 20 s now fit.
    append(&mut h, 20.0, "evt_again");
    assert!(memory_error(&h.drain(Duration::from_millis(20))).is_none());
}

#[test]
fn an_item_past_the_budget_is_refused_and_stores_nothing() {
    let mut h = metered(2_000_000);
    h.send(
        json!({"type":"conversation.item.create","event_id":"evt_item",
        "item":{"id":"item_big","type":"message","role":"user",
        "content":[{"type":"input_audio","audio": pcm16_b64(&voiced(30.0))}]}}),
    );
    let events = h.drain(Duration::from_millis(20));
    let err = memory_error(&events).expect("refused");
    assert_eq!(err["error"]["event_id"], "evt_item", "{err}");
    h.send(json!({"type":"conversation.item.retrieve","item_id":"item_big"}));
    let events = h.until("error");
    assert_eq!(last(&events, "error")["error"]["code"], "item_not_found");
    // A small one is stored.
    h.send(json!({"type":"conversation.item.create",
        "item":{"id":"item_small","type":"message","role":"user",
        "content":[{"type":"input_audio","audio": pcm16_b64(&voiced(2.0))}]}}));
    h.until("conversation.item.added");
}

#[test]
fn an_answer_that_cannot_grow_ends_failed() {
    let mut h = metered(1_100_000);
    for secs in [4.0, 6.0, 6.0] {
        h.send(json!({"type":"conversation.item.create",
            "item":{"type":"message","role":"user",
            "content":[{"type":"input_audio","audio": pcm16_b64(&voiced(secs))}]}}));
        h.until("conversation.item.added");
    }
    // Filled up with short items before the others (the echo answers the newest), until
    // the next does not fit: what is left is less than one short item's creation (about
    // 27 KB), not the 72 KB of the last one's 6 s echo.
    let filler = pcm16_b64(&voiced(0.25));
    let mut filled = 0;
    loop {
        h.send(
            json!({"type":"conversation.item.create","previous_item_id":"root",
            "item":{"type":"message","role":"user",
            "content":[{"type":"input_audio","audio": filler}]}}),
        );
        let events = h.drain(Duration::from_millis(5));
        if memory_error(&events).is_some() {
            break;
        }
        filled += 1;
        assert!(filled < 1_000, "the budget never filled");
    }
    h.send(json!({"type":"response.create"}));
    let events = h.until("response.done");
    let done = last(&events, "response.done");
    assert_eq!(done["response"]["status"], "failed", "{done}");
    assert_eq!(
        done["response"]["status_details"]["error"]["code"], "server_memory_exhausted",
        "{done}"
    );
    // The error follows the response it ended (as a model error's does).
    let events = h.until("error");
    assert!(memory_error(&events).is_some(), "{:?}", types(&events));
    // The session goes on.
    h.send(json!({"type":"session.update","session":{"type":"realtime","instructions":"x"}}));
    h.until("session.updated");
}
