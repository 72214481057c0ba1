//! `--max-sessions-per-key` counts heal after a slow Redis (review D7): three sessions, each
//! admitted while Redis stalls for 1.6 s (so the node's increment times out, yet lands when
//! Redis wakes) and then closed, left a count of 3 in Redis for ever, and the credential
//! was refused (429) with no session open. Each heartbeat now rewrites the node's count from
//! its own sessions: once they closed, new sessions are admitted again.

use crate::common;

use std::time::{Duration, Instant};

use common::cluster::{node, wait_nodes, Redis, AUTH};
use common::Client;

/// Blocks the Redis server for `secs` (a command on its own connection).
fn stall(redis: &Redis, secs: &str) -> std::process::Child {
    std::process::Command::new("redis-cli")
        .args(["-p", &redis.port.to_string(), "DEBUG", "SLEEP", secs])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-cli")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_key_counts_heal_after_redis_stalls() {
    let redis = Redis::start().await;
    let a = node("a", &redis, &["--max-sessions-per-key", "2"]);
    wait_nodes(a.addr, &["a"], Duration::from_secs(10)).await;
    let url = format!("ws://{}/v1/realtime?model=echo", a.addr);
    for _ in 0..3 {
        let mut sleeper = stall(&redis, "1.6");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let session = Client::open(&url, &[AUTH])
            .await
            .expect("admitted while Redis stalls (the node's own cap applies)");
        drop(session);
        let _ = sleeper.wait();
    }
    // After the stalls and a heartbeat, both of the credential's places are free again.
    let start = Instant::now();
    let held = loop {
        let first = Client::open(&url, &[AUTH]).await;
        let second = Client::open(&url, &[AUTH]).await;
        match (first, second) {
            (Ok(x), Ok(y)) => break (x, y),
            (x, y) => {
                let statuses: Vec<u16> = [x.err(), y.err()]
                    .into_iter()
                    .flatten()
                    .map(|e| common::handshake_status(&e))
                    .collect();
                assert!(
                    start.elapsed() < Duration::from_secs(8),
                    "the credential stays locked out with no session open: {statuses:?}"
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    };
    // And the cap still holds: a third is refused.
    let third = Client::open(&url, &[AUTH])
        .await
        .err()
        .map(|e| common::handshake_status(&e));
    assert_eq!(third, Some(429));
    drop(held);
}
