//! A request another node placed (it carries the cluster's token from Redis) waited on that
//! node already: at a full node it is refused at once instead of waiting
//! `--admission-wait-ms` again, and it counts as coming from the address it names. The
//! same request without the token, or with a wrong one, waits as any other.

use crate::common;

use std::time::{Duration, Instant};

use common::cluster::{keyless_node, wait_nodes, Redis, AUTH};
use duet_client::rtc::{ClientOptions, RtcClient};

/// The cluster's forwarding token, read from Redis as a node reads it.
fn token(redis: &Redis) -> String {
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &redis.port.to_string(), "GET", "duet:cluster:token"])
        .output()
        .expect("redis-cli (Debian package redis-tools, with redis-server)");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

async fn offer(addr: std::net::SocketAddr, extra: &[(&str, &str)]) -> (u16, Duration) {
    let sdp = duet_client::rtc::offer_only("127.0.0.1:9".parse().expect("addr")).expect("offer");
    let mut headers = vec![AUTH, ("Content-Type", "application/sdp")];
    headers.extend_from_slice(extra);
    let started = Instant::now();
    let r = duet_client::http::request(addr, "POST", "/v1/realtime/calls", &headers, &sdp)
        .await
        .expect("POST");
    (r.status, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placed_request_does_not_wait_twice() {
    let redis = Redis::start().await;
    let flags = ["--api-key", common::cluster::KEY, "--max-calls", "1"];
    let b = keyless_node(
        "b",
        &redis,
        &[&flags[..], &["--admission-wait-ms", "1500"]].concat(),
    );
    wait_nodes(b.addr, &["b"], Duration::from_secs(10)).await;
    let key = ClientOptions {
        api_key: Some(common::cluster::KEY.into()),
        ..Default::default()
    };
    let _held = RtcClient::connect(b.addr, key).await.expect("B's one call");
    let token = token(&redis);
    assert_eq!(token.len(), 32, "{token:?}");

    let (status, took) = offer(b.addr, &[("x-duet-forwarded", &token)]).await;
    assert_eq!(status, 503);
    assert!(
        took < Duration::from_millis(700),
        "a placed request waited {took:?}"
    );
    for extra in [&[][..], &[("x-duet-forwarded", "not-the-token")][..]] {
        let (status, took) = offer(b.addr, extra).await;
        assert_eq!(status, 503);
        assert!(
            took >= Duration::from_millis(1_400),
            "{extra:?}: refused after {took:?}"
        );
    }
}
