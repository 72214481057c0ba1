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
    assert_eq!(
        last(&events, "error")["error"]["code"],
        "item_retrieve_invalid_item_id"
    );
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

fn text_item(id: &str, bytes: usize) -> Value {
    json!({"type":"conversation.item.create","event_id": format!("evt_{id}"),
        "item":{"id": id,"type":"message","role":"user",
        "content":[{"type":"input_text","text": "a".repeat(bytes)}]}})
}

#[test]
fn conversation_text_is_charged_and_refused_past_the_budget() {
    // Forty 100 KB text items against a 1 MB budget (the review's forty 12 MiB items,
    // scaled): the first fit, then they are refused, naming their event; nothing of a
    // refused one is stored, and the session goes on.
    let mut h = metered(1_000_000);
    let mut refused = Vec::new();
    for n in 0..40 {
        h.send(text_item(&format!("item_{n}"), 100_000));
        let events = h.drain(Duration::from_millis(5));
        if let Some(err) = memory_error(&events) {
            refused.push(err["error"]["event_id"].as_str().unwrap().to_string());
        }
    }
    assert!(
        refused.len() >= 30,
        "{} refused: {refused:?}",
        refused.len()
    );
    assert_eq!(refused.last().unwrap(), "evt_item_39");
    let gone = refused
        .last()
        .unwrap()
        .trim_start_matches("evt_")
        .to_string();
    h.send(json!({"type":"conversation.item.retrieve","item_id": gone}));
    let events = h.until("error");
    assert_eq!(
        last(&events, "error")["error"]["code"],
        "item_retrieve_invalid_item_id"
    );
    // Deleting a stored one gives its bytes back: another fits.
    h.send(json!({"type":"conversation.item.delete","item_id":"item_0"}));
    h.until("conversation.item.deleted");
    h.send(text_item("item_again", 100_000));
    let events = h.until("conversation.item.added");
    assert!(memory_error(&events).is_none());
}

#[test]
fn longer_instructions_are_charged_and_refused_past_the_budget() {
    let mut h = metered(230_000);
    h.send(json!({"type":"session.update","event_id":"evt_long",
        "session":{"type":"realtime","instructions": "b".repeat(200_000)}}));
    h.until("session.updated");
    // Longer ones (under their cap) do not fit what is left; the session keeps its own.
    h.send(json!({"type":"session.update","event_id":"evt_longer",
        "session":{"type":"realtime","instructions": "c".repeat(256_000)}}));
    let events = h.until("error");
    let err = memory_error(&events).expect("refused");
    assert_eq!(err["error"]["event_id"], "evt_longer", "{err}");
    // Shorter ones give bytes back.
    h.send(json!({"type":"session.update",
        "session":{"type":"realtime","instructions": "short"}}));
    let events = h.until("session.updated");
    assert_eq!(
        last(&events, "session.updated")["session"]["instructions"],
        "short"
    );
}

#[test]
fn text_instructions_and_tools_have_caps_in_bytes() {
    let mut h = harness(Setup {
        echo: true,
        tool_model: true,
        limits: Some(Limits {
            max_conversation_text: 300_000,
            max_instructions: 10_000,
            max_tools: 20_000,
            ..Limits::default()
        }),
        ..Setup::default()
    });
    h.drain(Duration::from_millis(50));
    // One item with more text than the conversation keeps is refused…
    h.send(text_item("item_huge", 400_000));
    let events = h.until("error");
    let err = last(&events, "error");
    assert_eq!(err["error"]["code"], "item_text_too_long", "{err}");
    assert_eq!(err["error"]["event_id"], "evt_item_huge", "{err}");
    // … smaller ones evict the oldest to stay under it.
    let mut deleted = Vec::new();
    for n in 0..4 {
        h.send(text_item(&format!("item_{n}"), 100_000));
        let events = h.until("conversation.item.added");
        deleted.extend(
            events
                .iter()
                .filter(|e| e["type"] == "conversation.item.deleted")
                .map(|e| e["item_id"].clone()),
        );
    }
    deleted.extend(
        h.drain(Duration::from_millis(20))
            .iter()
            .filter(|e| e["type"] == "conversation.item.deleted")
            .map(|e| e["item_id"].clone()),
    );
    assert_eq!(deleted, [json!("item_0"), json!("item_1")]);
    // Instructions and tools over their caps, in the session and in a response.
    h.send(json!({"type":"session.update","session":{"type":"realtime",
        "instructions": "x".repeat(10_001)}}));
    let err = last(&h.until("error"), "error").clone();
    assert_eq!(err["error"]["code"], "invalid_value", "{err}");
    assert_eq!(err["error"]["param"], "session.instructions", "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-instructions-kib"),
        "{err}"
    );
    let tool = json!({"type":"function","name":"t","description":"d".repeat(25_000),
        "parameters":{"type":"object","properties":{}}});
    h.send(json!({"type":"session.update","session":{"type":"realtime","tools":[tool]}}));
    let err = last(&h.until("error"), "error").clone();
    assert_eq!(err["error"]["param"], "session.tools", "{err}");
    h.send(json!({"type":"response.create","response":{"instructions": "y".repeat(10_001)}}));
    let err = last(&h.until("error"), "error").clone();
    assert_eq!(err["error"]["param"], "response.instructions", "{err}");
    // At the caps they are taken.
    h.send(json!({"type":"session.update","session":{"type":"realtime",
        "instructions": "x".repeat(10_000)}}));
    h.until("session.updated");
}
