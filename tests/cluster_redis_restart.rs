//! Redis SIGKILLed mid-test and restarted (empty): live calls go on untouched, each node
//! admits locally while it is down, minting a secret answers a clear 503, routing by id
//! still works from the ids, and placement across nodes recovers once Redis is back, with
//! no restart of any node.

use crate::common;

use std::time::{Duration, Instant};

use common::cluster::{
    calls_through, get_json, keyed, live_nodes, node, owner, wait_nodes, Redis, AUTH,
};
use duet_client::rtc::RtcClient;

async fn mint(addr: std::net::SocketAddr) -> (u16, String) {
    let r = duet_client::http::request(addr, "POST", "/v1/realtime/client_secrets", &[AUTH], "")
        .await
        .expect("mint");
    (r.status, r.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_calls_survive_redis_and_placement_recovers_when_it_is_back() {
    let _one = common::exclusive().await;
    let mut redis = Redis::start().await;
    let (a, b) = (node("a", &redis, &[]), node("b", &redis, &[]));
    wait_nodes(a.addr, &["a", "b"], Duration::from_secs(10)).await;
    let calls = calls_through(a.addr, 2).await;
    let on_b = calls
        .iter()
        .position(|x| owner(&x.call_id) == "b")
        .expect("one on b");

    redis.kill();
    let killed = Instant::now();
    // Each node notices within a heartbeat and admits locally.
    loop {
        let (_, v) = get_json(a.addr, "/v1/pool?scope=cluster").await;
        if v["redis"] == "down" {
            break;
        }
        assert!(killed.elapsed() < Duration::from_secs(5), "{v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let local = RtcClient::connect(a.addr, keyed())
        .await
        .expect("admitted locally");
    assert_eq!(owner(&local.call_id), "a");
    let (status, body) = mint(a.addr).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("cluster_store_unavailable"), "{body}");
    // Routing by id needs no Redis: a sideband through A joins B's call.
    let url = format!(
        "ws://{}/v1/realtime?call_id={}",
        a.addr, calls[on_b].call_id
    );
    let side = common::Client::open(&url, &[AUTH])
        .await
        .expect("sideband via A");
    drop(side);
    // Live calls go on.
    tokio::time::sleep(Duration::from_secs(1)).await;
    for call in &calls {
        let from = Instant::now() - Duration::from_millis(900);
        let frames = call
            .stats()
            .frames_between(from, from + Duration::from_millis(800));
        assert!(
            frames >= 35,
            "{}: {frames} frames with Redis down",
            call.call_id
        );
    }

    redis.restart().await;
    let back = Instant::now();
    for via in [a.addr, b.addr] {
        while get_json(via, "/v1/pool?scope=cluster").await.1["redis"] != "up" {
            assert!(
                back.elapsed() < Duration::from_secs(8),
                "Redis never seen again"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    eprintln!(
        "both nodes back on Redis {:?} after its restart",
        back.elapsed()
    );
    wait_nodes(a.addr, &["a", "b"], Duration::from_secs(8)).await;
    let (status, body) = mint(a.addr).await;
    assert_eq!(status, 200, "minting works again: {body}");
    // Placement spreads again: A holds 2 calls, B 1, so the next goes to B.
    let placed = RtcClient::connect(a.addr, keyed()).await.expect("call");
    assert_eq!(owner(&placed.call_id), "b");
    assert_eq!(live_nodes(b.addr).await, ["a", "b"]);
}
