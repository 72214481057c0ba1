//! A node drained (SIGTERM) in a cluster: it marks itself draining in the registry first,
//! so no new call is placed on it (through any node); its live calls are told at once and
//! end by its drain deadline; a socket it proxies to another node is closed (1001) at that
//! deadline; the other nodes take the new calls.

use crate::common;

use std::time::{Duration, Instant};

use common::cluster::{
    assert_media_flows, calls_through, keyed, live_nodes, node, owner, wait_nodes, Redis, T,
};
use duet_client::rtc::RtcClient;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_node_takes_nothing_new_and_ends_its_calls_by_the_deadline() {
    let _one = common::exclusive().await;
    let redis = Redis::start().await;
    let (a, b) = (node("a", &redis, &[]), node("b", &redis, &[]));
    let mut c = node("c", &redis, &["--drain-secs", "3"]);
    wait_nodes(a.addr, &["a", "b", "c"], Duration::from_secs(10)).await;
    let mut calls = calls_through(a.addr, 3).await;
    let on_c = calls
        .iter()
        .position(|x| owner(&x.call_id) == "c")
        .expect("one call on each node");
    // A sideband that C proxies to a call on A: C's drain closes it (1001) at C's deadline,
    // and the call on A goes on.
    let on_a = calls
        .iter()
        .find(|x| owner(&x.call_id) == "a")
        .expect("a call on a");
    let url = format!("ws://{}/v1/realtime?call_id={}", c.addr, on_a.call_id);
    let mut proxied = common::Client::open(&url, &[common::cluster::AUTH])
        .await
        .expect("sideband through C");

    c.signal(libc::SIGTERM);
    let signalled = Instant::now();
    // Through A and B alike, nothing new lands on C.
    for via in [a.addr, b.addr, a.addr, b.addr] {
        let call = RtcClient::connect(via, keyed()).await.expect("placed");
        assert_ne!(owner(&call.call_id), "c", "placed on a draining node");
        calls.push(call);
    }
    // The registry says so within a heartbeat.
    while live_nodes(a.addr).await.contains(&"c".to_string()) {
        assert!(
            signalled.elapsed() < Duration::from_secs(3),
            "A still sees C live"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // C's call: the warning at once, its media ends by the deadline.
    let call = &mut calls[on_c];
    let (ev, _) = call.until("error", T).await.expect("told");
    assert_eq!(ev["error"]["code"], "server_draining");
    assert!(signalled.elapsed() < Duration::from_secs(2), "told late");
    let (code, _) = proxied.close_frame().await.expect("a close frame from C");
    assert_eq!(code, 1001, "C's proxy closes as it goes away");
    let closed = signalled.elapsed();
    assert!(
        closed >= Duration::from_millis(2_500) && closed < Duration::from_millis(4_500),
        "the proxied socket closed {closed:?} after SIGTERM (drain: 3 s)"
    );
    c.wait_exit(Duration::from_secs(8))
        .expect("C exits after its drain");
    let last = call.stats().frames.last().map(|(t, _)| *t).expect("frames");
    assert!(
        last < signalled + Duration::from_millis(3_500),
        "media went on after C's deadline"
    );
    // The others' calls go on.
    let others = calls.iter().enumerate().filter(|(i, _)| *i != on_c);
    for (_, call) in others {
        assert_media_flows(call).await;
    }
}
