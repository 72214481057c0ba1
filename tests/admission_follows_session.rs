//! Admission follows the session, not its transport: a durable session holds its slot, IP
//! and credential share for its whole life (attached to a call, to a WebSocket, or
//! detached), a call adds only its call slot, a resume takes nothing more, and the drain
//! waits for sessions rather than transports.

use crate::common;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use duet_client::http::{request, Response};
use duet_client::rtc::{ClientOptions, RtcClient};
use serde_json::{json, Value};

const KEY: &str = "server-key";
const T: Duration = Duration::from_secs(10);
/// Every cap at one: one session, one call, one per address, one per credential.
const CAPS: &[&str] = &[
    "--api-key",
    KEY,
    "--max-sessions-per-key",
    "1",
    "--max-per-ip",
    "1",
    "--max-calls",
    "1",
    "--max-sessions",
    "1",
];

async fn mint(addr: SocketAddr) -> String {
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer server-key"),
    ];
    let r = request(addr, "POST", "/v1/realtime/client_secrets", &headers, "{}")
        .await
        .expect("mint");
    assert_eq!(r.status, 200, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).expect("json");
    v["value"].as_str().expect("value").to_string()
}

async fn post_call(addr: SocketAddr, key: &str, path: &str) -> Response {
    let offer = include_str!("fixtures/chrome_offer.sdp");
    let bearer = format!("Bearer {key}");
    let headers = [
        ("Content-Type", "application/sdp"),
        ("Authorization", bearer.as_str()),
    ];
    request(addr, "POST", path, &headers, offer)
        .await
        .expect("request")
}

async fn pool_sessions(addr: SocketAddr) -> Vec<Value> {
    let (status, text) = get(addr, "/v1/pool", &[("Authorization", "Bearer server-key")]).await;
    assert_eq!(status, 200, "{text}");
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("{}");
    let v: Value = serde_json::from_str(body).expect("json");
    v["sessions"].as_array().cloned().unwrap_or_default()
}

async fn ws_with(addr: SocketAddr, key: &str, query: &str) -> Result<Client, u16> {
    let bearer = format!("Bearer {key}");
    let url = format!("ws://{addr}/v1/realtime{query}");
    Client::connect_url(&url, &[("Authorization", bearer.as_str())])
        .await
        .map_err(|e| handshake_status(&e))
}

/// Waits until the pool lists the (only) session as detached.
async fn until_detached(addr: SocketAddr) {
    let start = Instant::now();
    loop {
        let state = pool_sessions(addr)
            .await
            .first()
            .map(|s| s["state"].clone());
        if state == Some(json!("detached")) {
            return;
        }
        assert!(start.elapsed() < T, "the session never detached: {state:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `/ready` counts no call (the engine ended them).
async fn no_calls(addr: SocketAddr) {
    let start = Instant::now();
    loop {
        let (_, text) = get(addr, "/ready", &[("Authorization", "Bearer server-key")]).await;
        let body = text.split("\r\n\r\n").nth(1).unwrap_or("{}");
        let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        if v["calls"] == 0 {
            return;
        }
        assert!(start.elapsed() < T, "calls never ended: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn durable_calls_left_to_time_out_hold_their_sessions_against_every_cap() {
    let mut args = CAPS.to_vec();
    args.extend(["--call-connect-secs", "1"]);
    let addr = server(&args).await;
    let ek = mint(addr).await;
    let first = post_call(addr, &ek, "/v1/realtime/calls?duplex=1").await;
    assert_eq!(first.status, 201, "{}", first.body);
    // The call never connects: after --call-connect-secs it ends and its session detaches.
    until_detached(addr).await;
    no_calls(addr).await;
    assert_eq!(pool_sessions(addr).await.len(), 1);
    // The call is gone, its session is not: every further session is refused.
    for _ in 0..5 {
        let r = post_call(addr, &ek, "/v1/realtime/calls?duplex=1").await;
        assert!(matches!(r.status, 429 | 503), "{} {}", r.status, r.body);
    }
    let status = ws_with(addr, &ek, "").await.err();
    assert!(matches!(status, Some(429 | 503)), "{status:?}");
    assert_eq!(pool_sessions(addr).await.len(), 1);
}

fn resume_event(created: &Value) -> Value {
    json!({"type": "session.resume", "session_id": created["session"]["id"],
        "resume_token": created["resume_token"], "last_received_server_event_seq": 0})
}

/// A durable call made with `key`, connected, and its `session.created`.
async fn durable_call(addr: SocketAddr, key: &str) -> (RtcClient, Value) {
    let opts = ClientOptions {
        duplex: true,
        api_key: Some(key.to_string()),
        ..ClientOptions::default()
    };
    let mut call = RtcClient::connect(addr, opts).await.expect("call");
    let (created, _) = call.until("session.created", T).await.expect("created");
    (call, created)
}

/// Takes the session of `created` over on a resume socket authenticated with `key`.
async fn take_over(addr: SocketAddr, key: &str, created: &Value) -> Client {
    let bearer = format!("Bearer {key}");
    let url = format!("ws://{addr}/v1/realtime?duplex=1&resume=1");
    let mut ws = Client::open(&url, &[("Authorization", bearer.as_str())])
        .await
        .expect("resume socket");
    ws.send(resume_event(created)).await;
    let resumed = ws.next().await;
    assert_eq!(resumed["type"], "session.resumed", "{resumed}");
    ws
}

#[tokio::test]
async fn a_websocket_that_takes_a_calls_session_over_keeps_it_counted() {
    let addr = server(CAPS).await;
    let ek = mint(addr).await;
    let (mut call, created) = durable_call(addr, &ek).await;
    let _ws = take_over(addr, &ek, &created).await;
    // The call was taken over and ended; its session lives on the WebSocket, counted.
    no_calls(addr).await;
    let sessions = pool_sessions(addr).await;
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["transport"], "websocket", "{sessions:?}");
    let status = ws_with(addr, &ek, "").await.err();
    assert!(matches!(status, Some(429 | 503)), "{status:?}");
    let r = post_call(addr, &ek, "/v1/realtime/calls").await;
    assert!(matches!(r.status, 429 | 503), "{} {}", r.status, r.body);
    assert_eq!(pool_sessions(addr).await.len(), 1);
    call.close();
}

#[tokio::test]
async fn resuming_a_detached_websocket_session_over_webrtc_takes_no_second_slot() {
    let addr = server(CAPS).await;
    let ek = mint(addr).await;
    let ws = ws_with(addr, &ek, "?duplex=1")
        .await
        .expect("durable session");
    let created = ws.log[0].clone();
    drop(ws);
    until_detached(addr).await;
    let part = json!({"session_id": created["session"]["id"],
        "resume_token": created["resume_token"], "last_received_server_event_seq": 0});
    let opts = ClientOptions {
        resume: Some(part),
        api_key: Some(ek.clone()),
        ..ClientOptions::default()
    };
    let mut call = RtcClient::connect(addr, opts)
        .await
        .expect("the resume is admitted: the session keeps its own slot");
    call.until("session.resumed", T).await.expect("resumed");
    assert_eq!(pool_sessions(addr).await.len(), 1);
    call.close();
}

#[tokio::test]
async fn the_drain_waits_for_a_session_whose_call_was_taken_over() {
    let server = start(CAPS).await;
    let addr = server.addr;
    let ek = mint(addr).await;
    let (mut call, created) = durable_call(addr, &ek).await;
    let mut ws = take_over(addr, &ek, &created).await;
    no_calls(addr).await;
    let grace = Duration::from_secs(2);
    let started = Instant::now();
    let drain = tokio::spawn(async move { server.drain(grace).await });
    let draining = ws.until("error").await;
    assert_eq!(draining["error"]["code"], "server_draining");
    let close = ws.close_frame().await;
    assert!(close.is_some(), "a close frame, not a dropped socket");
    drain.await.expect("drained");
    let took = started.elapsed();
    assert!(
        took >= grace,
        "the drain waited for the session: {took:?} for a {grace:?} grace"
    );
    call.close();
}
