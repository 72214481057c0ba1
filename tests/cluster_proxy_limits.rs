//! A WebSocket that one node proxies to the node owning its session is held to the proxying
//! node's own WebSocket limits (review D6): a client that stops answering is closed after
//! `--ws-idle-secs` (it was held until the owner's session idled out), and when the owner
//! goes away the client gets a close frame at once instead of a socket that hangs.

use crate::common;

use std::time::{Duration, Instant};

use common::cluster::{node_with_slots as node, wait_nodes, Redis, AUTH};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_socket_follows_the_proxying_nodes_limits() {
    let _one = common::exclusive().await;
    let redis = Redis::start().await;
    let limits = [
        "--ws-ping-secs",
        "1",
        "--ws-idle-secs",
        "2",
        "--ws-write-timeout-secs",
        "2",
    ];
    // A has one model slot, B a hundred: sessions opened through A are placed on B.
    let a = node("a", &redis, "1", &limits);
    let b = node("b", &redis, "100", &[]);
    wait_nodes(a.addr, &["a", "b"], Duration::from_secs(10)).await;
    let url = format!("ws://{}/v1/realtime", a.addr);

    // A client that goes silent (reads nothing, so answers no ping) is closed by A.
    let mut silent = common::Client::open(&url, &[AUTH])
        .await
        .expect("through A");
    let created = silent.until("session.created").await;
    let id = created["session"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(id.starts_with("sess_b_"), "placed on B: {id}");
    tokio::time::sleep(Duration::from_secs(6)).await;
    let closed = tokio::time::timeout(Duration::from_secs(3), silent.close_frame())
        .await
        .expect("A closed the silent client within 3 × --ws-idle-secs");
    // A sends close 1001 and drops the connection; the client, reading late, may first
    // answer a buffered ping into the closed socket and see a reset instead of the frame.
    assert!(
        matches!(closed, None | Some((1001, _))),
        "idle close: {closed:?}"
    );

    // A client that stays live is closed at once when B goes away.
    let mut live = common::Client::open(&url, &[AUTH])
        .await
        .expect("through A");
    live.until("session.created").await;
    b.signal(libc::SIGKILL);
    let killed = Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(3), live.close_frame())
        .await
        .expect("A closed the client when B went away");
    assert_eq!(closed.map(|(code, _)| code), Some(1011), "owner gone");
    assert!(killed.elapsed() < Duration::from_secs(3));
}
