//! Durable sessions over WebSocket (`?duplex=1`): a turn cut by a dropped connection and
//! resumed with the journal's replay, takeover, refused resumes, the grace running out,
//! journal overflow, acks, heartbeat and close.

use crate::common;
use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

async fn durable(addr: SocketAddr) -> (Client, Value) {
    let mut c = Client::open(&format!("ws://{addr}/v1/realtime?model=echo&duplex=1"), &[])
        .await
        .expect("connects");
    let created = c.next().await;
    assert_eq!(created["type"], "session.created", "{created}");
    (c, created)
}

async fn resume(addr: SocketAddr, created: &Value, token: &str, last: u64) -> Client {
    let mut c = Client::open(&format!("ws://{addr}/v1/realtime?duplex=1&resume=1"), &[])
        .await
        .expect("connects");
    c.send(json!({
        "type": "session.resume",
        "session_id": created["session"]["id"],
        "resume_token": token,
        "last_received_server_event_seq": last,
    }))
    .await;
    c
}

fn seqs(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|v| v["server_event_seq"].as_u64())
        .collect()
}

/// A metric's value (the metrics are the process's, shared by the tests running at once:
/// the checks are lower bounds).
async fn metric(addr: SocketAddr, line: &str) -> f64 {
    let m = get(addr, "/metrics", &[]).await.1;
    m.lines()
        .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {line} in {m}"))
}

fn token(v: &Value) -> String {
    v["resume_token"]
        .as_str()
        .expect("resume_token")
        .to_string()
}

#[tokio::test]
async fn a_turn_cut_by_a_dropped_connection_resumes_with_a_contiguous_replay() {
    let addr = server(&[]).await;
    let (mut c, created) = durable(addr).await;
    assert_eq!(created["attachment_generation"], 1);
    assert_eq!(
        created["session"]["capabilities"]["implementation_level"],
        "turn_based_duplex"
    );
    c.manual_turns().await;
    c.append(&voiced(2.0)).await;
    c.send(json!({"type":"input_audio_buffer.commit"})).await;
    let committed = c.until("input_audio_buffer.committed").await;
    let user_item = committed["item_id"].as_str().expect("item").to_string();
    c.send(json!({"type":"response.create"})).await;
    c.until("response.output_audio.delta").await;
    let before = c.log.clone();
    let last = *seqs(&before).last().expect("sequenced");
    assert_eq!(
        seqs(&before),
        (1..=last).collect::<Vec<_>>(),
        "seqs from 1, no gaps"
    );
    // The connection dies mid-answer (no close frame).
    drop(c);

    let mut r = resume(addr, &created, &token(&created), last).await;
    let resumed = r.next().await;
    assert_eq!(resumed["type"], "session.resumed", "{resumed}");
    assert!(resumed.get("server_event_seq").is_none());
    assert_eq!(resumed["attachment_generation"], 2);
    assert_eq!(resumed["session_id"], created["session"]["id"]);
    let after = r.collect_until("response.done").await;
    let s = seqs(&after);
    assert_eq!(
        s.len(),
        after.len(),
        "every replayed and live event has a seq"
    );
    assert_eq!(
        s[0],
        last + 1,
        "the replay starts after the last seq received"
    );
    assert_eq!(
        s,
        (last + 1..last + 1 + s.len() as u64).collect::<Vec<_>>(),
        "contiguous, no duplicates"
    );
    assert_eq!(
        after.last().expect("done")["response"]["status"],
        "completed"
    );
    r.send(json!({"type":"conversation.item.retrieve","item_id": user_item}))
        .await;
    let got = r.until("conversation.item.retrieved").await;
    assert_eq!(got["item"]["id"], user_item.as_str());
    assert!(metric(addr, "duet_resumes_total{outcome=\"ok\"}").await >= 1.0);
}

#[tokio::test]
async fn a_resume_takes_over_a_live_connection() {
    let addr = server(&[]).await;
    let (mut old, created) = durable(addr).await;
    let mut new = resume(addr, &created, &token(&created), 0).await;
    assert_eq!(new.next().await["type"], "session.resumed");
    let replaced = old.until("session.replaced").await;
    assert_eq!(replaced["attachment_generation"], 1);
    assert_eq!(replaced["session_id"], created["session"]["id"]);
    assert_eq!(
        old.close_frame().await,
        Some((1000, "session_replaced".to_string()))
    );
    new.send(json!({"type":"session.heartbeat"})).await;
    let ack = new.until("session.heartbeat_ack").await;
    assert!(ack["server_event_seq"].as_u64().is_some());
    assert!(metric(addr, "duet_takeovers_total").await >= 1.0);
    assert!(metric(addr, "duet_durable_sessions{state=\"attached\"}").await >= 1.0);
}

#[tokio::test]
async fn resumes_with_a_bad_token_an_unknown_session_or_a_bad_first_message_are_refused() {
    let addr = server(&[]).await;
    let (mut c, created) = durable(addr).await;
    let mut bad = resume(addr, &created, "wrong", 0).await;
    assert_eq!(bad.next().await["error"]["code"], "invalid_resume_token");
    assert_eq!(
        bad.close_frame().await,
        Some((1008, "invalid_resume_token".into()))
    );
    let mut ahead = resume(addr, &created, &token(&created), 1_000).await;
    assert_eq!(
        ahead.next().await["error"]["code"],
        "session_resume_conflict"
    );
    let unknown = json!({"session": {"id": "sess_nope"}});
    let mut gone = resume(addr, &unknown, "x", 0).await;
    assert_eq!(gone.next().await["error"]["code"], "session_resume_expired");
    let mut wrong = Client::open(&format!("ws://{addr}/v1/realtime?duplex=1&resume=1"), &[])
        .await
        .expect("connects");
    wrong
        .send(json!({"type":"session.update","session":{}}))
        .await;
    assert_eq!(
        wrong.next().await["error"]["code"],
        "invalid_session_resume"
    );
    // The session itself was untouched.
    c.send(json!({"type":"session.heartbeat"})).await;
    c.until("session.heartbeat_ack").await;
    c.send(json!({"type":"session.resume","session_id":"x","resume_token":"y"}))
        .await;
    assert_eq!(
        c.until("error").await["error"]["code"],
        "unsupported_session_resume"
    );
}

#[tokio::test]
async fn a_detached_session_expires_when_the_grace_runs_out() {
    let addr = server(&["--disconnect-grace-secs", "1"]).await;
    let (c, created) = durable(addr).await;
    drop(c);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(metric(addr, "duet_durable_sessions{state=\"detached\"}").await >= 1.0);
    let (_, ready) = common::ready(addr).await;
    assert_eq!(ready["sessions"], 1, "a detached session keeps its slot");
    wait_released(addr, 0, 0, Duration::from_secs(3)).await;
    let expiries = "duet_session_expiries_total{reason=\"disconnect_grace_expired\"}";
    assert!(metric(addr, expiries).await >= 1.0);
    let mut late = resume(addr, &created, &token(&created), 0).await;
    assert_eq!(late.next().await["error"]["code"], "session_resume_expired");
}

#[tokio::test]
async fn an_overflowing_journal_asks_for_a_resync_and_a_later_resume_finds_a_gap() {
    let addr = server(&["--resume-journal-bytes", "4000"]).await;
    let (mut c, created) = durable(addr).await;
    for _ in 0..40 {
        c.send(json!({"type":"session.heartbeat"})).await;
    }
    let resync = c.until("session.resync_required").await;
    assert_eq!(resync["reason"], "journal_overflow");
    let next = c.until("session.heartbeat_ack").await;
    assert!(next.get("server_event_seq").is_none(), "live without a seq");
    drop(c);
    let mut r = resume(addr, &created, &token(&created), 1).await;
    let gap = r.next().await;
    assert_eq!(gap["type"], "session.resync_required");
    assert_eq!(gap["reason"], "journal_gap");
}

#[tokio::test]
async fn acks_trim_the_journal_and_close_ends_the_session() {
    let addr = server(&[]).await;
    let (mut c, _) = durable(addr).await;
    c.send(json!({"type":"session.heartbeat"})).await;
    let ack = c.until("session.heartbeat_ack").await;
    let seq = ack["server_event_seq"].as_u64().expect("seq");
    c.send(json!({"type":"session.event_ack","server_event_seq": seq + 10}))
        .await;
    assert_eq!(c.until("error").await["error"]["code"], "invalid_event_ack");
    c.send(json!({"type":"session.event_ack","server_event_seq": seq}))
        .await;
    c.send(json!({"type":"session.close","reason":"done"}))
        .await;
    let closed = c.until("session.closed").await;
    assert_eq!(closed["reason"], "done");
    assert_eq!(c.close_frame().await, Some((1000, "session closed".into())));
    wait_released(addr, 0, 0, Duration::from_secs(3)).await;
}

#[tokio::test]
async fn without_the_opt_in_the_wire_is_ga() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    assert!(c.log[0].get("resume_token").is_none());
    assert!(c.log[0]["session"].get("capabilities").is_none());
    c.send(json!({"type":"session.heartbeat"})).await;
    let e = c.until("error").await;
    assert_eq!(e["error"]["code"], "unknown_event_type");
    assert!(e.get("server_event_seq").is_none());
}
