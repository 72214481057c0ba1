//! Cluster overheads: a `redis-server` and two release `duet serve` nodes on loopback. Node
//! B has the most free model slots, so everything sent to A is placed on B: comparing a
//! request sent to B itself with the same request sent through A measures what the cluster
//! adds.
//!
//! - call setup (`POST /v1/realtime/calls` → `201`), local vs forwarded, p50 and p99;
//! - a WebSocket round trip (`session.update` → `session.updated`), direct vs proxied;
//! - Redis commands per call, from Redis's own count (`INFO stats`), the heartbeats' share
//!   taken out: with the server key, and with a client secret.
//!
//! ```sh
//! cargo build --release --bin duet --example cluster_bench
//! target/release/examples/cluster_bench --calls 300
//! ```

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use duet_client::http::{hangup_blocking, post_offer_blocking, request_blocking};
use duet_client::load::spawn_server;
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

const KEY: &str = "bench-key";

struct Args {
    calls: usize,
    round_trips: usize,
    binary: String,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        calls: 300,
        round_trips: 500,
        binary: "target/release/duet".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--calls" => a.calls = v.parse()?,
            "--round-trips" => a.round_trips = v.parse()?,
            "--binary" => a.binary = v,
            other => {
                anyhow::bail!("unknown flag {other}; use --calls N --round-trips N --binary PATH")
            }
        }
    }
    Ok(a)
}

/// A `redis-server` on a free port; killed on drop.
struct Redis(Child, u16);

impl Redis {
    fn start() -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .stdout(Stdio::null())
            .spawn()
            .context("redis-server (Debian package redis-server)")?;
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            anyhow::ensure!(
                start.elapsed() < Duration::from_secs(5),
                "redis never listened"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Self(child, port))
    }

    /// `total_commands_processed`, through its own protocol.
    fn commands(&self) -> anyhow::Result<u64> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.1))?;
        s.write_all(b"*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n")?;
        std::thread::sleep(Duration::from_millis(50));
        let mut buf = vec![0u8; 16 * 1024];
        let n = s.read(&mut buf)?;
        let text = String::from_utf8_lossy(&buf[..n]);
        text.lines()
            .find_map(|l| l.strip_prefix("total_commands_processed:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| anyhow!("no total_commands_processed in {text}"))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn percentiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

/// Call setups through `via`, each hung up at once; the owners' ids returned.
fn setups(
    via: SocketAddr,
    sdp: &str,
    n: usize,
    key: &str,
) -> anyhow::Result<(Vec<Duration>, Vec<String>)> {
    let mut times = Vec::with_capacity(n);
    let mut owners = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let (id, _) = post_offer_blocking(via, sdp, Some(key))?;
        times.push(t.elapsed());
        owners.push(duet_signaling::call_node(&id).unwrap_or("?").to_string());
        hangup_blocking(via, &id, Some(KEY))?;
    }
    Ok((times, owners))
}

/// WebSocket round trips (`session.update` → `session.updated`) on a session opened via `via`.
async fn round_trips(via: SocketAddr, n: usize) -> anyhow::Result<Vec<Duration>> {
    let url = format!("ws://{via}/v1/realtime?model=echo");
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
        url.as_str(),
    )?;
    req.headers_mut()
        .insert("authorization", format!("Bearer {KEY}").parse()?);
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
    let mut times = Vec::with_capacity(n);
    let update = r#"{"type":"session.update","session":{"type":"realtime","instructions":"x"}}"#;
    for _ in 0..n {
        let t = Instant::now();
        ws.send(Message::Text(update.into())).await?;
        loop {
            let m = ws.next().await.ok_or_else(|| anyhow!("closed"))??;
            if let Message::Text(text) = m {
                if text.as_str().contains("\"session.updated\"") {
                    break;
                }
            }
        }
        times.push(t.elapsed());
    }
    Ok(times)
}

fn mint(addr: SocketAddr) -> anyhow::Result<String> {
    let auth = format!("Bearer {KEY}");
    let r = request_blocking(
        addr,
        "POST",
        "/v1/realtime/client_secrets",
        &[("Authorization", &auth)],
        "",
    )?;
    let v: serde_json::Value = serde_json::from_str(&r.body)?;
    v["value"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow!("no secret: {}", r.body))
}

/// Redis commands per call through `via` with `key`, heartbeats taken out.
fn redis_per_call(
    redis: &Redis,
    via: SocketAddr,
    sdp: &str,
    n: usize,
    key: &str,
) -> anyhow::Result<f64> {
    let (c0, t0) = (redis.commands()?, Instant::now());
    setups(via, sdp, n, key)?;
    let (c1, busy) = (redis.commands()?, t0.elapsed());
    std::thread::sleep(busy);
    let c2 = redis.commands()?;
    let idle = c2 - c1;
    Ok((c1 - c0).saturating_sub(idle) as f64 / n as f64)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let redis = Redis::start()?;
    let url = format!("redis://127.0.0.1:{}", redis.1);
    let common = [
        "--cluster-redis",
        url.as_str(),
        "--api-key",
        KEY,
        "--max-calls",
        "1000",
    ];
    let node = |id: &str, slots: &str| {
        let mut extra = common.to_vec();
        extra.extend([
            "--node-id",
            id,
            "--model-slots",
            slots,
            "--max-sessions",
            "1000",
        ]);
        spawn_server(&a.binary, &extra)
    };
    let (mut node_a, a_addr) = node("a", "100")?;
    let (mut node_b, b_addr) = node("b", "1000")?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    // One offer, reused: no call it creates ever starts ICE.
    let sdp = duet_client::rtc::offer_only("127.0.0.1:9".parse()?)?;
    setups(b_addr, &sdp, 20, KEY)?; // warm-up (connections, caches)
    setups(a_addr, &sdp, 20, KEY)?;
    let (local, owners_local) = setups(b_addr, &sdp, a.calls, KEY)?;
    let (forwarded, owners_fwd) = setups(a_addr, &sdp, a.calls, KEY)?;
    anyhow::ensure!(
        owners_local.iter().chain(&owners_fwd).all(|o| o == "b"),
        "a call was not placed on b"
    );
    let (l50, l99) = percentiles(local);
    let (f50, f99) = percentiles(forwarded);
    println!(
        "call setup, local (sent to b):        p50 {l50:.2} ms  p99 {l99:.2} ms  ({} calls)",
        a.calls
    );
    println!(
        "call setup, forwarded (a -> b):       p50 {f50:.2} ms  p99 {f99:.2} ms  (+{:.2} ms p50)",
        f50 - l50
    );
    let direct = round_trips(b_addr, a.round_trips).await?;
    let proxied = round_trips(a_addr, a.round_trips).await?;
    let (d50, d99) = percentiles(direct);
    let (p50, p99) = percentiles(proxied);
    println!(
        "WebSocket round trip, direct (b):     p50 {d50:.3} ms  p99 {d99:.3} ms  ({} round trips)",
        a.round_trips
    );
    println!(
        "WebSocket round trip, proxied (a->b): p50 {p50:.3} ms  p99 {p99:.3} ms  (+{:.3} ms p50)",
        p50 - d50
    );
    let n = a.calls.min(100);
    let per_key = redis_per_call(&redis, a_addr, &sdp, n, KEY)?;
    let secret = mint(a_addr)?;
    let per_secret = redis_per_call(&redis, a_addr, &sdp, n, &secret)?;
    println!("Redis commands per forwarded call: server key {per_key:.2}, client secret {per_secret:.2} (none per media packet)");
    let _ = node_a.kill();
    let _ = node_b.kill();
    Ok(())
}
