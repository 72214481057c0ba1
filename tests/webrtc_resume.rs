//! Durable sessions over WebRTC (`?duplex=1`): an ICE restart (`PATCH`) after the network
//! went silent keeps the call and its session; a new peer connection resumes the session
//! with a multipart `resume` and takes the old call over; and one session moves WebRTC →
//! WebSocket → WebRTC with its items intact.

use crate::common;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use duet_client::rtc::{ClientOptions, RtcClient};
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(10);

/// The highest `server_event_seq` among `events`.
fn last_seq(events: &[Value]) -> u64 {
    events
        .iter()
        .filter_map(|v| v["server_event_seq"].as_u64())
        .max()
        .unwrap_or(0)
}

/// Events until `kind`, with it.
async fn until(c: &mut RtcClient, kind: &str) -> Vec<Value> {
    let (ev, mut skipped) = c.until(kind, T).await.expect(kind);
    skipped.push(ev);
    skipped
}

/// A spoken turn answered: the user item's id and every event up to `response.done`.
async fn turn(c: &mut RtcClient) -> (String, Vec<Value>) {
    let mut audio = voiced48(1.0);
    audio.extend(vec![0.0; 48_000 * 7 / 10]);
    c.speak(&audio);
    let mut seen = until(c, "input_audio_buffer.committed").await;
    let item = seen.last().expect("committed")["item_id"]
        .as_str()
        .expect("item_id")
        .to_string();
    seen.extend(until(c, "response.done").await);
    (item, seen)
}

fn resume_part(created: &Value, token: &str, last: u64) -> Value {
    json!({
        "session_id": created["session"]["id"],
        "resume_token": token,
        "last_received_server_event_seq": last,
    })
}

async fn duplex_call(addr: SocketAddr) -> (RtcClient, Value) {
    let opts = ClientOptions {
        duplex: true,
        ..ClientOptions::default()
    };
    let mut c = RtcClient::connect(addr, opts).await.expect("call");
    let (created, _) = c.until("session.created", T).await.expect("created");
    assert_eq!(created["attachment_generation"], 1);
    (c, created)
}

async fn resume_call(addr: SocketAddr, resume: Value) -> RtcClient {
    let opts = ClientOptions {
        resume: Some(resume),
        ..ClientOptions::default()
    };
    RtcClient::connect(addr, opts).await.expect("resumed call")
}

async fn retrieve(c: &mut RtcClient, item: &str) -> Value {
    c.send(json!({"type":"conversation.item.retrieve","item_id": item}));
    c.until("conversation.item.retrieved", T)
        .await
        .expect("retrieved")
        .0
}

#[tokio::test]
async fn an_ice_restart_after_a_silent_network_keeps_the_call_and_its_session() {
    let addr = server(&[]).await;
    let (mut c, created) = duplex_call(addr).await;
    let (item, _) = turn(&mut c).await;
    c.go_offline(Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(5_200)).await;
    let call_id = c.call_id.clone();
    c.restart_ice().await.expect("PATCH answered");
    // Media flows again on the new path.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let from = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let frames = c
        .stats()
        .frames_between(from, from + Duration::from_secs(1));
    assert!(
        frames >= 45,
        "{frames} frames in the second after the restart"
    );
    // The same call, the same session and conversation; events flow both ways.
    assert_eq!(c.call_id, call_id);
    let got = retrieve(&mut c, &item).await;
    assert_eq!(got["item"]["id"], item.as_str());
    let (_, events) = turn(&mut c).await;
    assert!(events.iter().all(|e| e["type"] != "session.created"));
    assert_eq!(
        events.last().expect("done")["response"]["status"],
        "completed"
    );
    let (_, ready) = common::ready(addr).await;
    assert_eq!(ready["calls"], 1);
    let _ = created;
}

#[tokio::test]
async fn a_new_peer_connection_resumes_the_session_and_takes_the_old_call_over() {
    let addr = server(&[]).await;
    let (mut a, created) = duplex_call(addr).await;
    let token = created["resume_token"].as_str().expect("token").to_string();
    let (item, events) = turn(&mut a).await;
    let last = last_seq(&events);
    let mut b = resume_call(addr, resume_part(&created, &token, last)).await;
    let (first, _) = b.until("session.resumed", T).await.expect("resumed");
    assert_eq!(first["attachment_generation"], 2);
    assert_eq!(first["session_id"], created["session"]["id"]);
    let replaced = a.until("session.replaced", T).await.expect("replaced").0;
    assert_eq!(replaced["attachment_generation"], 1);
    wait_released(addr, 1, 1, Duration::from_secs(5)).await;
    // The conversation carried over; the new call carries audio both ways.
    let got = retrieve(&mut b, &item).await;
    assert_eq!(got["item"]["id"], item.as_str());
    let (_, events) = turn(&mut b).await;
    assert_eq!(
        events.last().expect("done")["response"]["status"],
        "completed"
    );
    let loud = b
        .stats()
        .frames
        .iter()
        .filter(|(_, rms)| *rms > 0.05)
        .count();
    assert!(
        loud > 10,
        "the answer played on the new call ({loud} loud frames)"
    );
    // A resume with the old token is refused over HTTP.
    let opts = ClientOptions {
        resume: Some(resume_part(&created, &token, 0)),
        ..ClientOptions::default()
    };
    let e = RtcClient::connect(addr, opts).await.err().expect("refused");
    assert!(e.to_string().contains("401"), "{e}");
    assert!(e.to_string().contains("invalid_resume_token"), "{e}");
}

#[tokio::test]
async fn one_session_moves_from_webrtc_to_websocket_and_back() {
    let addr = server(&[]).await;
    let (mut a, created) = duplex_call(addr).await;
    let (first_item, events) = turn(&mut a).await;
    let token = created["resume_token"].as_str().expect("token").to_string();

    // WebRTC → WebSocket: audio now travels in events.
    let mut ws = Client::open(&format!("ws://{addr}/v1/realtime?duplex=1&resume=1"), &[])
        .await
        .expect("ws");
    ws.send(
        json!({"type":"session.resume", "session_id": created["session"]["id"],
        "resume_token": token, "last_received_server_event_seq": last_seq(&events)}),
    )
    .await;
    let resumed = ws.until("session.resumed").await;
    a.until("session.replaced", T).await.expect("call replaced");
    ws.send(json!({"type":"conversation.item.retrieve","item_id": first_item}))
        .await;
    assert_eq!(
        ws.until("conversation.item.retrieved").await["item"]["id"],
        first_item.as_str()
    );
    // Server VAD carried over: speech then silence is a turn, answered.
    let mut speech = voiced(1.0);
    speech.extend(silence(0.8));
    ws.append(&speech).await;
    let second_item = ws.until("input_audio_buffer.committed").await["item_id"]
        .as_str()
        .expect("item")
        .to_string();
    let answer = ws.collect_until("response.done").await;
    assert!(answer
        .iter()
        .any(|e| e["type"] == "response.output_audio.delta"));
    let last = ws
        .log
        .iter()
        .filter_map(|v| v["server_event_seq"].as_u64())
        .max()
        .unwrap_or(0);

    // WebSocket → WebRTC: the socket is taken over, both items are there.
    let token = resumed["resume_token"].as_str().expect("token");
    let mut b = resume_call(addr, resume_part(&created, token, last)).await;
    b.until("session.resumed", T).await.expect("resumed");
    assert_eq!(
        ws.until("session.replaced").await["attachment_generation"],
        2
    );
    for item in [&first_item, &second_item] {
        assert_eq!(retrieve(&mut b, item).await["item"]["id"], item.as_str());
    }
    let (_, events) = turn(&mut b).await;
    assert_eq!(
        events.last().expect("done")["response"]["status"],
        "completed"
    );
}

#[tokio::test]
async fn a_call_gone_silent_past_the_inactivity_limit_detaches_and_resumes_over_websocket() {
    let addr = server(&["--call-inactivity-secs", "2"]).await;
    let (mut a, created) = duplex_call(addr).await;
    let (item, events) = turn(&mut a).await;
    a.go_offline(Duration::from_secs(30));
    // The call ends; the session waits for a resume with its slot.
    wait_released(addr, 0, 1, Duration::from_secs(6)).await;
    let (_, ready) = common::ready(addr).await;
    assert_eq!(ready["sessions"], 1, "{ready}");
    let mut ws = Client::open(&format!("ws://{addr}/v1/realtime?duplex=1&resume=1"), &[])
        .await
        .expect("ws");
    ws.send(json!({"type":"session.resume", "session_id": created["session"]["id"],
        "resume_token": created["resume_token"], "last_received_server_event_seq": last_seq(&events)}))
        .await;
    assert_eq!(ws.next().await["type"], "session.resumed");
    ws.send(json!({"type":"conversation.item.retrieve","item_id": item}))
        .await;
    assert_eq!(
        ws.until("conversation.item.retrieved").await["item"]["id"],
        item.as_str()
    );
}

#[tokio::test]
async fn a_hangup_ends_an_opted_in_session_instead_of_detaching_it() {
    let addr = server(&[]).await;
    let (c, _) = duplex_call(addr).await;
    let status = duet_client::http::hangup(addr, &c.call_id, None)
        .await
        .expect("hangup");
    assert_eq!(status, 200);
    // Released at once, not after the 30 s grace.
    wait_released(addr, 0, 0, Duration::from_secs(3)).await;
}
