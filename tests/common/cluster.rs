//! A cluster on this machine: a real `redis-server` and `duet serve` nodes (child
//! processes, so that one can be killed or drained), all on loopback.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::process::ServerProcess;

/// The API key every node of a test cluster shares.
pub const KEY: &str = "cluster-key";
/// The `Authorization` header with [`KEY`].
pub const AUTH: (&str, &str) = ("Authorization", "Bearer cluster-key");
/// How long a cluster test waits for an event.
pub const T: Duration = Duration::from_secs(20);

/// Call options with the cluster's key.
pub fn keyed() -> duet_client::rtc::ClientOptions {
    duet_client::rtc::ClientOptions {
        api_key: Some(KEY.into()),
        ..Default::default()
    }
}

/// `n` calls placed through `addr`, each with its `session.created` read.
pub async fn calls_through(addr: SocketAddr, n: usize) -> Vec<duet_client::rtc::RtcClient> {
    let mut calls = Vec::new();
    for _ in 0..n {
        let mut call = duet_client::rtc::RtcClient::connect(addr, keyed())
            .await
            .expect("call");
        call.until("session.created", T).await.expect("created");
        calls.push(call);
    }
    calls
}

/// A `redis-server` on a loopback port, with no persistence; killed on drop.
pub struct Redis {
    child: Option<Child>,
    /// Its port.
    pub port: u16,
    dir: std::path::PathBuf,
}

impl Redis {
    /// Starts one on a free port and waits until it answers (another port when the one
    /// picked was taken meanwhile).
    pub async fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("duet-redis-{}", super::unique()));
        std::fs::create_dir_all(&dir).expect("redis dir");
        let mut r = Self {
            child: None,
            port: 0,
            dir,
        };
        for _ in 0..5 {
            r.port = free_tcp_port();
            if r.try_start().await {
                return r;
            }
        }
        panic!("redis-server never listened (5 ports tried)");
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// SIGKILL: gone at once, everything it held lost.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port (empty) and waits until it answers.
    pub async fn restart(&mut self) {
        assert!(
            self.try_start().await,
            "redis-server did not listen again on {}",
            self.port
        );
    }

    /// Starts it on `self.port`; false when it exits (the port was taken) or never listens.
    async fn try_start(&mut self) -> bool {
        self.kill();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            // `DEBUG SLEEP` stalls it on purpose (tests of a slow Redis).
            .args(["--enable-debug-command", "local"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("redis-server starts (Debian package redis-server)");
        self.child = Some(child);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return true;
            }
            if let Some(c) = self.child.as_mut() {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    self.child = None;
                    return false;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }
}

/// A TCP port free now on loopback.
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free TCP port")
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts node `id` of the cluster on `redis` (`--model-slots 10`, the shared key).
pub fn node(id: &str, redis: &Redis, extra: &[&str]) -> ServerProcess {
    node_with_slots(id, redis, "10", extra)
}

/// [`node`] with `slots` model slots.
pub fn node_with_slots(id: &str, redis: &Redis, slots: &str, extra: &[&str]) -> ServerProcess {
    let url = redis.url();
    let mut args = vec![
        "--cluster-redis",
        url.as_str(),
        "--node-id",
        id,
        "--api-key",
        KEY,
        "--model-slots",
        slots,
        "--max-calls",
        "10",
    ];
    args.extend_from_slice(extra);
    ServerProcess::spawn(&args)
}

/// `GET path` with the key: (status, JSON body).
pub async fn get_json(addr: SocketAddr, path: &str) -> (u16, Value) {
    let r = duet_client::http::request(addr, "GET", path, &[AUTH], "")
        .await
        .expect("GET");
    (
        r.status,
        serde_json::from_str(&r.body).unwrap_or(Value::Null),
    )
}

/// The node ids in `addr`'s cluster view that take new calls (not draining).
pub async fn live_nodes(addr: SocketAddr) -> Vec<String> {
    let (_, v) = get_json(addr, "/v1/pool?scope=cluster").await;
    let mut ids: Vec<String> = v["nodes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|n| n["draining"] == false)
                .filter_map(|n| n["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// Waits until `addr` sees exactly `ids` as live nodes.
pub async fn wait_nodes(addr: SocketAddr, ids: &[&str], limit: Duration) {
    let start = Instant::now();
    loop {
        let now = live_nodes(addr).await;
        if now == ids {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "{addr} sees {now:?}, not {ids:?}, after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The node a call id (`rtc_<node>_<hex>`) names.
pub fn owner(call_id: &str) -> String {
    duet_signaling::call_node(call_id)
        .unwrap_or_else(|| panic!("{call_id} names no node"))
        .to_string()
}

/// Waits until `addr`'s cluster view shows node `id` with at least `free` model slots.
pub async fn wait_free(addr: SocketAddr, id: &str, free: u64, limit: Duration) {
    let start = Instant::now();
    loop {
        let (_, v) = get_json(addr, "/v1/pool?scope=cluster").await;
        let slots = v["nodes"].as_array().and_then(|a| {
            a.iter()
                .find(|n| n["id"] == id)
                .and_then(|n| n["free_slots"].as_u64())
        });
        if slots.is_some_and(|s| s >= free) {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "{id} never had {free} free slots: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts node `id` of the cluster on `redis` with `extra` only (no API key unless `extra`
/// gives one: the SDK scripts expect none; no caps set).
pub fn keyless_node(id: &str, redis: &Redis, extra: &[&str]) -> ServerProcess {
    let url = redis.url();
    let mut args = vec!["--cluster-redis", url.as_str(), "--node-id", id];
    args.extend_from_slice(extra);
    ServerProcess::spawn(&args)
}

/// Nodes `a`, `b` and `c` on `redis` (see [`node`]), once `a` sees all three live.
pub async fn three_nodes(redis: &Redis) -> (ServerProcess, ServerProcess, ServerProcess) {
    let (a, b, c) = (
        node("a", redis, &[]),
        node("b", redis, &[]),
        node("c", redis, &[]),
    );
    wait_nodes(a.addr, &["a", "b", "c"], Duration::from_secs(10)).await;
    (a, b, c)
}

/// Asserts that `call`'s media still flows: at least 10 frames in the next 300 ms.
pub async fn assert_media_flows(call: &duet_client::rtc::RtcClient) {
    let from = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let frames = call
        .stats()
        .frames_between(from, from + Duration::from_millis(300));
    assert!(frames >= 10, "{}: {frames} frames", call.call_id);
}
