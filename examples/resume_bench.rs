//! Resume latency: how long a client waits, from opening a new connection, for the first
//! replayed event of its session (duplex extension, `?duplex=1&resume=1`). One opted-in
//! WebSocket session on a release `duet serve`; each round sends a `session.heartbeat`,
//! reads its (sequenced) ack, drops the TCP connection without a close frame, and resumes
//! with the seq before the ack, so the ack is the first event replayed after
//! `session.resumed`.
//!
//! ```sh
//! cargo build --release --bin duet --example resume_bench
//! target/release/examples/resume_bench --rounds 100
//! ```
//!
//! Flags: `--binary PATH` (default target/release/duet), `--rounds N` (default 100).
//! Prints p50/p99/max of: reconnect (TCP + WebSocket handshake) to `session.resumed`, and
//! to the first replayed event. Loopback only.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use duet_client::load::{percentile, spawn_server};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

async fn next(ws: &mut Ws) -> anyhow::Result<Value> {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .context("no event within 10 s")?
            .context("closed")??;
        if let Message::Text(t) = msg {
            return Ok(serde_json::from_str(t.as_str())?);
        }
    }
}

async fn until(ws: &mut Ws, kind: &str) -> anyhow::Result<Value> {
    loop {
        let v = next(ws).await?;
        if v["type"] == kind {
            return Ok(v);
        }
    }
}

async fn send(ws: &mut Ws, v: Value) -> anyhow::Result<()> {
    ws.send(Message::Text(v.to_string().into())).await?;
    Ok(())
}

/// One round: heartbeat, its ack's seq, a hard drop, a resume; the two latencies (ms) and
/// the rotated token.
async fn round(
    addr: SocketAddr,
    ws: Ws,
    id: &str,
    token: &str,
) -> anyhow::Result<(f64, f64, String, Ws)> {
    let mut ws = ws;
    send(&mut ws, json!({"type":"session.heartbeat"})).await?;
    let ack = until(&mut ws, "session.heartbeat_ack").await?;
    let seq = ack["server_event_seq"]
        .as_u64()
        .context("ack without a seq")?;
    drop(ws);
    let start = Instant::now();
    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("ws://{addr}/v1/realtime?duplex=1&resume=1"))
            .await?;
    let resume = json!({"type":"session.resume","session_id":id,"resume_token":token,
        "last_received_server_event_seq": seq - 1});
    send(&mut ws, resume).await?;
    let resumed = next(&mut ws).await?;
    if resumed["type"] != "session.resumed" {
        bail!("not resumed: {resumed}");
    }
    let to_resumed = start.elapsed().as_secs_f64() * 1e3;
    let first = next(&mut ws).await?;
    let to_first = start.elapsed().as_secs_f64() * 1e3;
    if first["server_event_seq"].as_u64() != Some(seq) {
        bail!("the first replayed event is not seq {seq}: {first}");
    }
    let token = resumed["resume_token"]
        .as_str()
        .context("token")?
        .to_string();
    Ok((to_resumed, to_first, token, ws))
}

fn row(name: &str, v: &[f64]) {
    let max = v.iter().copied().fold(0.0, f64::max);
    println!(
        "{name:<34} p50 {:>6.2} ms   p99 {:>6.2} ms   max {:>6.2} ms",
        percentile(v, 50.0),
        percentile(v, 99.0),
        max
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let binary = arg("--binary").unwrap_or_else(|| "target/release/duet".into());
    let rounds: usize = arg("--rounds").map_or(Ok(100), |r| r.parse())?;
    let (mut child, addr) = spawn_server(&binary, &[])?;
    let result = async {
        let (mut ws, _) =
            tokio_tungstenite::connect_async(format!("ws://{addr}/v1/realtime?duplex=1")).await?;
        let created = next(&mut ws).await?;
        let id = created["session"]["id"].as_str().context("id")?.to_string();
        let mut token = created["resume_token"]
            .as_str()
            .context("token")?
            .to_string();
        let (mut resumed, mut first) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let (a, b, t, next_ws) = round(addr, ws, &id, &token).await?;
            resumed.push(a);
            first.push(b);
            token = t;
            ws = next_ws;
        }
        println!("{rounds} resumes of one WebSocket session ({binary})");
        row("reconnect -> session.resumed", &resumed);
        row("reconnect -> first replayed event", &first);
        anyhow::Ok(())
    }
    .await;
    let _ = child.kill();
    result
}
