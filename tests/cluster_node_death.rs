//! A node SIGKILLed: placement stops using it at once (the forward fails and the next node
//! takes the call), every node's view drops it within the registry's 6 s expiry, and its
//! ids answer 404 through the nodes that are left (a resume of its session:
//! `session_resume_expired`).

use crate::common;

use std::time::{Duration, Instant};

use common::cluster::{
    assert_media_flows, calls_through, keyed, live_nodes, owner, three_nodes, wait_nodes, Redis,
    AUTH, KEY,
};
use duet_client::rtc::RtcClient;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_leaves_placement_and_its_ids_answer_404() {
    let _one = common::exclusive().await;
    let redis = Redis::start().await;
    let (a, b, c) = three_nodes(&redis).await;
    wait_nodes(c.addr, &["a", "b", "c"], Duration::from_secs(10)).await;
    let mut calls = calls_through(a.addr, 3).await;
    let on_b = calls
        .iter()
        .find(|x| owner(&x.call_id) == "b")
        .map(|x| x.call_id.clone())
        .expect("one call on each node");

    // A durable WebSocket session on B (pinned there: a request marked as forwarded is
    // never placed again).
    let url = format!("ws://{}/v1/realtime?model=echo&duplex=1", b.addr);
    let mut durable = common::Client::open(&url, &[AUTH, ("x-duet-forwarded", "pin")])
        .await
        .expect("a session on B");
    let created = durable.next().await;
    let session = created["session"]["id"].as_str().expect("id").to_string();
    assert_eq!(duet_protocol::ids::session_node(&session), Some("b"));

    b.signal(libc::SIGKILL);
    let killed = Instant::now();
    // New calls through A at once: none on B.
    for _ in 0..4 {
        let call = RtcClient::connect(a.addr, keyed())
            .await
            .expect("placed elsewhere");
        assert_ne!(owner(&call.call_id), "b", "placed on a dead node");
        calls.push(call);
    }
    // C never forwarded anything to B: its view drops B when B's record expires.
    while live_nodes(c.addr).await.contains(&"b".to_string()) {
        assert!(
            killed.elapsed() < Duration::from_millis(6_500),
            "C still places on B {:?} after the kill",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("C's view dropped B {:?} after SIGKILL", killed.elapsed());

    // B's ids: 404 through A and C, for hangup and sideband alike.
    for via in [a.addr, c.addr] {
        let status = duet_client::http::hangup(via, &on_b, Some(KEY))
            .await
            .expect("hangup");
        assert_eq!(status, 404, "hangup of B's call through {via}");
        let url = format!("ws://{via}/v1/realtime?call_id={on_b}");
        let refused = common::refused(common::Client::open(&url, &[AUTH]).await);
        assert_eq!(common::handshake_status(&refused), 404);
    }
    // Its resume through A: the session is gone with its node.
    let url = format!("ws://{}/v1/realtime?duplex=1&resume=1", a.addr);
    let mut resume = common::Client::open(&url, &[AUTH])
        .await
        .expect("resume socket");
    resume
        .send(serde_json::json!({
            "type": "session.resume",
            "session_id": session,
            "resume_token": created["resume_token"],
            "last_received_server_event_seq": 0,
        }))
        .await;
    let refused = resume.next().await;
    assert_eq!(
        refused["error"]["code"], "session_resume_expired",
        "{refused}"
    );
    drop(durable);
    // The calls on A and C go on.
    for call in calls.iter().filter(|x| owner(&x.call_id) != "b") {
        assert_media_flows(call).await;
    }
}
