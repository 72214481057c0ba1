//! A transcription session holds no model slot: with the only slot taken, a
//! `?intent=transcription` session still opens; turning it realtime is refused with
//! `model_slots_exhausted` (it stays a transcription session and never responds); once the
//! slot is free the same update applies and `response.create` completes. Its slot goes
//! back when it turns transcription again.

use crate::common;
use common::*;
use serde_json::{json, Value};

fn realtime() -> Value {
    json!({"type":"session.update","event_id":"evt_rt","session":{"type":"realtime",
        "audio":{"input":{"turn_detection":null}}}})
}

async fn pool_slots(addr: std::net::SocketAddr) -> Vec<Value> {
    let (status, body) = get(addr, "/v1/pool", &[]).await;
    assert_eq!(status, 200, "{body}");
    let body = body.split("\r\n\r\n").nth(1).unwrap_or("{}");
    let pool: Value = serde_json::from_str(body).expect("json");
    let rows = pool["sessions"].as_array().expect("sessions").clone();
    rows.iter().map(|r| r["model_slot"].clone()).collect()
}

#[tokio::test]
async fn a_transcription_session_takes_a_slot_only_when_it_turns_realtime() {
    let addr = server(&["--model-slots", "1", "--admission-wait-ms", "0"]).await;
    let holder = Client::connect(addr).await;
    let url = format!("ws://{addr}/v1/realtime?intent=transcription");
    let mut t = Client::connect_url(&url, &[])
        .await
        .expect("a transcription session opens while the only slot is taken");
    assert_eq!(t.log[0]["session"]["type"], "transcription", "{}", t.log[0]);
    let mut slots = pool_slots(addr).await;
    slots.sort_by_key(|v| v.is_null());
    assert_eq!(
        slots,
        vec![json!(0), Value::Null],
        "the holder's slot, and none"
    );

    // No slot free: refused, and the session is still a transcription session.
    t.send(realtime()).await;
    let err = t.until("error").await;
    assert_eq!(err["error"]["code"], "model_slots_exhausted", "{err}");
    assert_eq!(err["error"]["event_id"], "evt_rt", "{err}");
    assert!(
        !t.types().iter().any(|k| k == "session.updated"),
        "{:?}",
        t.types()
    );
    t.send(json!({"type":"response.create"})).await;
    let err = t.until("error").await;
    assert_eq!(err["error"]["code"], "invalid_event_for_session", "{err}");

    // The slot frees: the same update applies, and a response completes.
    drop(holder);
    let up = loop {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        t.send(realtime()).await;
        let ev = t.next().await;
        if ev["type"] == "session.updated" {
            break ev;
        }
        assert_eq!(ev["error"]["code"], "model_slots_exhausted", "{ev}");
    };
    assert_eq!(up["session"]["type"], "realtime", "{up}");
    assert_eq!(pool_slots(addr).await, vec![json!(0)]);
    t.append(&voiced(0.4)).await;
    t.send(json!({"type":"input_audio_buffer.commit"})).await;
    t.send(json!({"type":"response.create"})).await;
    let done = t.until("response.done").await;
    assert_eq!(done["response"]["status"], "completed", "{done}");

    // Back to transcription: the slot is given back, and another session takes it.
    t.send(json!({"type":"session.update","session":{"type":"transcription"}}))
        .await;
    let up = t.until("session.updated").await;
    assert_eq!(up["session"]["type"], "transcription", "{up}");
    assert_eq!(pool_slots(addr).await, vec![Value::Null]);
    // The model loop frees the slot on its own thread: a new session gets it shortly.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let url = format!("ws://{addr}/v1/realtime");
        let mut c = Client::open(&url, &[]).await.expect("upgrade");
        let first = c.next().await;
        if first["type"] == "session.created" {
            break;
        }
        assert_eq!(first["error"]["code"], "model_slots_exhausted", "{first}");
        assert!(
            std::time::Instant::now() < deadline,
            "the slot never came back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
