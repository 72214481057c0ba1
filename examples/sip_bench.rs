//! Phone calls against a release `duet serve --model echo --sip-listen …`: how fast the
//! signalling goes, and what a call's RTP leg costs. This program is both the SIP trunk
//! (the `duet_client::sip` caller: PCMU, 20 ms) and the app (a webhook receiver that
//! accepts each call the moment it is announced).
//!
//! ```sh
//! cargo build --release --bin duet --example sip_bench
//! target/release/examples/sip_bench --calls 50 --load 25,50,100 --secs 10
//! ```
//!
//! Signalling, one call at a time (`--calls`): INVITE sent → `180`; INVITE sent → webhook
//! received; `/accept` sent → `200 OK` received (the session opened); ACK → the first RTP
//! packet (silence: the echo model speaks only when spoken to). Load, for each count in
//! `--load`: that many calls at once, each talking (a voice, in a loop) and listening for
//! `--secs`: the server's CPU per call, packets received against the 50/s expected, and each
//! call's inter-arrival gaps (their deviation from 20 ms, which includes this program's own
//! scheduling on the same cores). Loopback only.
//!
//! `--webrtc N` runs N WebRTC calls beside each SIP load, from the `loadgen` example (build
//! it too; `--loadgen PATH`) against the same server: its table row (pacing, latency of the
//! WebRTC calls) is printed after the SIP figures, and the server CPU is then both loads'.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use duet_client::load::{percentile, proc_sample, spawn_server};
use duet_client::sip::Caller;
use tokio::sync::{mpsc, Mutex};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The app: announced calls with their arrival time.
type Announced = Arc<Mutex<mpsc::UnboundedReceiver<(String, Instant)>>>;

async fn webhook_app() -> anyhow::Result<(String, Announced)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: String| {
            let tx = tx.clone();
            async move {
                let at = Instant::now();
                let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                if let Some(id) = v["data"]["call_id"].as_str() {
                    let _ = tx.send((id.to_string(), at));
                }
                axum::http::StatusCode::OK
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((url, Arc::new(Mutex::new(rx))))
}

async fn accept(http: SocketAddr, id: &str) -> anyhow::Result<()> {
    let r = duet_client::http::request(
        http,
        "POST",
        &format!("/v1/realtime/calls/{id}/accept"),
        &[("content-type", "application/json")],
        r#"{"type":"realtime"}"#,
    )
    .await?;
    anyhow::ensure!(r.status == 200, "accept: {} {}", r.status, r.body);
    Ok(())
}

/// One call's signalling times, in ms.
struct Times {
    ringing: f64,
    webhook: f64,
    accept_to_ok: f64,
    first_rtp: f64,
}

async fn one_call(
    sip: SocketAddr,
    http: SocketAddr,
    announced: &Announced,
) -> anyhow::Result<Times> {
    let t0 = Instant::now();
    let mut caller = Caller::invite(sip, "+15551230000").await?;
    let ringing = loop {
        let r = caller.next_response(Duration::from_secs(5)).await?;
        if r.status == 180 {
            break t0.elapsed();
        }
    };
    let (id, hooked) = announced
        .lock()
        .await
        .recv()
        .await
        .ok_or_else(|| anyhow!("the app stopped"))?;
    let accepting = Instant::now();
    accept(http, &id).await?;
    let ok = caller.answer(Duration::from_secs(5), |_| {}).await?;
    let answered = Instant::now();
    anyhow::ensure!(ok.status == 200, "final answer {}", ok.status);
    let mut buf = vec![0u8; 2048];
    tokio::time::timeout(Duration::from_secs(2), caller.rtp.recv_from(&mut buf))
        .await
        .context("no RTP within 2 s")??;
    let first_rtp = answered.elapsed();
    anyhow::ensure!(caller.bye().await? == 200, "BYE refused");
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Ok(Times {
        ringing: ms(ringing),
        webhook: ms(hooked.saturating_duration_since(t0)),
        accept_to_ok: ms(answered.saturating_duration_since(accepting)),
        first_rtp: ms(first_rtp),
    })
}

fn report(name: &str, v: &[f64]) {
    println!(
        "{name:<34} p50 {:7.2} ms   p99 {:7.2} ms   max {:7.2} ms",
        percentile(v, 50.0),
        percentile(v, 99.0),
        percentile(v, 100.0)
    );
}

async fn signalling(
    sip: SocketAddr,
    http: SocketAddr,
    announced: &Announced,
    calls: usize,
) -> anyhow::Result<()> {
    let mut t = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..calls {
        let times = one_call(sip, http, announced).await?;
        t.0.push(times.ringing);
        t.1.push(times.webhook);
        t.2.push(times.accept_to_ok);
        t.3.push(times.first_rtp);
    }
    println!("signalling, {calls} calls one at a time:");
    report("  INVITE -> 180 Ringing", &t.0);
    report("  INVITE -> webhook received", &t.1);
    report("  /accept sent -> 200 OK received", &t.2);
    report("  200 OK -> first RTP packet", &t.3);
    Ok(())
}

/// `n` calls at once for `secs`: what the server spent and how the packets came.
async fn load(
    sip: SocketAddr,
    http: SocketAddr,
    announced: &Announced,
    pid: u32,
    n: usize,
    secs: u64,
) -> anyhow::Result<()> {
    let mut callers = Vec::new();
    for _ in 0..n {
        let mut caller = Caller::invite(sip, "+15551230000").await?;
        let (id, _) = announced
            .lock()
            .await
            .recv()
            .await
            .ok_or_else(|| anyhow!("app"))?;
        accept(http, &id).await?;
        let ok = caller.answer(Duration::from_secs(10), |_| {}).await?;
        anyhow::ensure!(ok.status == 200, "call refused: {}", ok.status);
        callers.push(caller);
    }
    let voice: Vec<f32> = duet_media::pcm::synthetic_voice(2.0)
        .iter()
        .step_by(3)
        .copied()
        .collect();
    let mut speech = Vec::new();
    while speech.len() < 8_000 * secs as usize {
        speech.extend_from_slice(&voice);
        speech.extend(std::iter::repeat_n(0.0, 8_000));
    }
    let before = proc_sample(pid).cpu_ticks;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for mut c in callers {
        let speech = speech.clone();
        tasks.push(tokio::spawn(async move {
            let heard = c.talk_and_listen(&speech, Duration::from_secs(secs)).await;
            let _ = c.bye().await;
            heard
        }));
    }
    let (mut got, mut dev) = (0usize, Vec::new());
    for t in tasks {
        let heard = t.await??;
        got += heard.len();
        dev.extend(
            heard
                .windows(2)
                .map(|w| ((w[1].0.as_secs_f64() - w[0].0.as_secs_f64()) * 1e3 - 20.0).abs()),
        );
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = (proc_sample(pid).cpu_ticks - before) as f64 / 100.0;
    let expected = n as f64 * wall * 50.0;
    println!(
        "{n:>4} calls: server CPU {:5.1} % of one core ({:.2} % per call), packets {:.1} % of expected",
        100.0 * cpu / wall,
        100.0 * cpu / wall / n as f64,
        100.0 * got as f64 / expected
    );
    report("       gap deviation from 20 ms", &dev);
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let binary = arg("--binary").unwrap_or_else(|| "target/release/duet".into());
    let calls: usize = arg("--calls").map_or(Ok(50), |v| v.parse())?;
    let counts: Vec<usize> = arg("--load")
        .unwrap_or_else(|| "25,50,100".into())
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let secs: u64 = arg("--secs").map_or(Ok(10), |v| v.parse())?;
    let webrtc: usize = arg("--webrtc").map_or(Ok(0), |v| v.parse())?;
    let loadgen = arg("--loadgen").unwrap_or_else(|| "target/release/examples/loadgen".into());
    let (url, announced) = webhook_app().await?;
    let sip_port = std::net::UdpSocket::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let listen = format!("127.0.0.1:{sip_port}");
    let max = (counts.iter().max().copied().unwrap_or(1).max(1) + webrtc).to_string();
    let (mut child, http) = spawn_server(
        &binary,
        &[
            "--model",
            "echo",
            "--sip-listen",
            &listen,
            "--sip-webhook-url",
            &url,
            "--sip-webhook-secret",
            SECRET,
            "--max-calls",
            &max,
            "--max-sessions",
            &max,
            // One caller address places every call, faster than a trunk's default rate.
            "--sip-invite-rate",
            "1000",
        ],
    )?;
    let sip: SocketAddr = listen.parse()?;
    let result = async {
        signalling(sip, http, &announced, calls).await?;
        println!("load, each call talking and listening for {secs} s:");
        for n in counts {
            let beside = (webrtc > 0).then(|| {
                println!("     … with {webrtc} WebRTC calls beside them (loadgen):");
                tokio::process::Command::new(&loadgen)
                    .arg("--server")
                    .arg(format!("{http},{}", child.id()))
                    .args(["--calls", &webrtc.to_string(), "--secs", &secs.to_string()])
                    .stdout(std::process::Stdio::piped())
                    .spawn()
            });
            let beside = beside
                .transpose()
                .context("loadgen (cargo build --release --example loadgen)")?;
            load(sip, http, &announced, child.id(), n, secs).await?;
            if let Some(b) = beside {
                let out = b.wait_with_output().await?;
                print!("{}", String::from_utf8_lossy(&out.stdout));
            }
        }
        Ok::<_, anyhow::Error>(())
    }
    .await;
    let _ = child.kill();
    result
}
