//! `--max-sessions-per-key` across a cluster: a client secret's sessions are counted on
//! every node together, so the third of a quota of two is refused (`429
//! too_many_sessions_for_key`) on whichever node it arrives, and a session that ends gives
//! its place back cluster-wide.

use crate::common;

use std::time::{Duration, Instant};

use common::cluster::{node, wait_nodes, Redis, AUTH};
use common::Client;

/// A session with `secret` served by `addr` itself (a request marked as forwarded is never
/// placed again).
async fn pinned(addr: std::net::SocketAddr, secret: &str) -> Result<Client, u16> {
    let bearer = format!("Bearer {secret}");
    let url = format!("ws://{addr}/v1/realtime?model=echo");
    Client::open(
        &url,
        &[("Authorization", &bearer), ("x-duet-forwarded", "pin")],
    )
    .await
    .map_err(|e| common::handshake_status(&e))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credentials_sessions_count_on_every_node_together() {
    let redis = Redis::start().await;
    let cap = ["--max-sessions-per-key", "2"];
    let (a, b) = (node("a", &redis, &cap), node("b", &redis, &cap));
    wait_nodes(a.addr, &["a", "b"], Duration::from_secs(10)).await;
    let r = duet_client::http::request(a.addr, "POST", "/v1/realtime/client_secrets", &[AUTH], "")
        .await
        .expect("mint");
    let minted: serde_json::Value = serde_json::from_str(&r.body).expect("json");
    let secret = minted["value"].as_str().expect("value").to_string();

    let on_a = pinned(a.addr, &secret).await.expect("first, on A");
    let _on_b = pinned(b.addr, &secret).await.expect("second, on B");
    for addr in [a.addr, b.addr] {
        assert_eq!(
            pinned(addr, &secret).await.err(),
            Some(429),
            "a third on {addr}"
        );
    }
    // The server key is another credential: not counted with the secret's.
    let url = format!("ws://{}/v1/realtime?model=echo", b.addr);
    let _keyed = Client::open(&url, &[AUTH])
        .await
        .expect("the server key's session");

    drop(on_a);
    let start = Instant::now();
    loop {
        match pinned(b.addr, &secret).await {
            Ok(_) => break,
            Err(s) => assert!(
                s == 429 && start.elapsed() < Duration::from_secs(5),
                "the ended session's place never came back ({s})"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
