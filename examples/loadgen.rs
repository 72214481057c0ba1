//! Load benchmark: for each call count, starts a fresh `duet serve` (release build), runs N
//! concurrent WebRTC callers against it (see `duet::loadgen`), and prints one table row:
//! server CPU, RSS per call, pacing, latency, barge-in and setup figures.
//!
//! ```sh
//! cargo build --release && cargo run --release --example loadgen -- --calls 1,16,32,64,100 --secs 20
//! ```

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use duet::loadgen::{percentile, run, LoadConfig, LoadReport};

struct Args {
    /// An already running server (then `pid` is what CPU/RSS are read from).
    server: Option<(SocketAddr, u32)>,
    calls: Vec<usize>,
    secs: u64,
    binary: String,
    ramp: f64,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        server: None,
        calls: vec![1, 16, 32, 64, 100],
        secs: 20,
        binary: "target/release/duet".into(),
        ramp: 20.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--calls" => a.calls = v.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--secs" => a.secs = v.parse()?,
            "--binary" => a.binary = v,
                        "--ramp" => a.ramp = v.parse()?,
            "--server" => {
                let (addr, pid) = v.split_once(',').ok_or_else(|| anyhow!("--server HOST:PORT,PID"))?;
                a.server = Some((addr.parse()?, pid.parse()?));
            }
            other => anyhow::bail!("unknown flag {other}; use --calls 1,16,64 --secs 20 --binary PATH --ramp CALLS_PER_SEC [--server HOST:PORT,PID]"),
        }
    }
    Ok(a)
}

fn spawn(binary: &str, max_calls: usize) -> anyhow::Result<(Child, SocketAddr)> {
    let mut child = Command::new(binary)
        .args([
            "serve",
            "--port",
            "0",
            "--udp-port",
            "0",
            "--max-calls",
            &max_calls.to_string(),
            "--max-sessions",
            &max_calls.to_string(),
        ])
        .env("DUET_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {binary} (build it with cargo build --release)"))?;
    let out = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line)?;
    let addr = line
        .trim()
        .rsplit("http://")
        .next()
        .ok_or_else(|| anyhow!("no address in {line:?}"))?
        .parse()?;
    Ok((child, addr))
}

/// (utime + stime) ticks and RSS KiB of a process.
fn proc_sample(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let ticks = fields
        .get(11)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        + fields
            .get(12)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (ticks, rss)
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(f64::NAN)
}

/// Bucket upper bound (ms) holding quantile `q` of a Prometheus histogram.
fn hist_quantile(text: &str, name: &str, q: f64) -> f64 {
    let count = metric(text, &format!("{name}_count "));
    let mut best = f64::NAN;
    for line in text
        .lines()
        .filter(|l| l.starts_with(&format!("{name}_bucket{{le=\"")))
    {
        let le = line.split('"').nth(1).unwrap_or("+Inf");
        let n: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        if n >= q * count {
            best = le
                .parse::<f64>()
                .map(|s| s * 1000.0)
                .unwrap_or(f64::INFINITY);
            break;
        }
    }
    best
}

fn metrics_text(addr: SocketAddr) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut t = String::new();
    let _ = s.read_to_string(&mut t);
    t
}

fn row(
    n: usize,
    secs: u64,
    binary: &str,
    ramp: f64,
    server: Option<(SocketAddr, u32)>,
) -> anyhow::Result<()> {
    let (mut child, addr, pid) = match server {
        Some((addr, pid)) => (None, addr, pid),
        None => {
            let (child, addr) = spawn(binary, n + 8)?;
            std::thread::sleep(Duration::from_millis(300));
            let pid = child.id();
            (Some(child), addr, pid)
        }
    };
    let (_, rss0) = proc_sample(pid);
    let cfg = LoadConfig {
        server: addr,
        calls: n,
        duration: Duration::from_secs(secs),
        ramp_per_sec: ramp,
        turn: Duration::from_millis(1000),
    };
    let ramp_time = Duration::from_secs_f64(n as f64 / ramp) + Duration::from_secs(2);
    let load = std::thread::spawn(move || run(&cfg));
    std::thread::sleep(ramp_time);
    let (t0, _) = proc_sample(pid);
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs.saturating_sub(3).max(1)));
    let (t1, rss1) = proc_sample(pid);
    let cpu = (t1 - t0) as f64 / 100.0 / w0.elapsed().as_secs_f64() * 100.0;
    let report: LoadReport = load.join().map_err(|_| anyhow!("load thread panicked"))??;
    let m = metrics_text(addr);
    if let Some(c) = child.as_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
    let per_call = rss1.saturating_sub(rss0) as f64 / 1024.0 / n.max(1) as f64;
    let pace = "duet_pacing_deviation_seconds";
    println!(
        "| {n} | {}/{n} | {cpu:.0} % | {:.0} MiB → {:.0} MiB ({per_call:.2} MiB/call) | {:.2} / {:.2} / {:.1} | {:.2} / {:.2} | {:.1} | {:.0} / {:.0} | {:.0} / {:.0} | {:.0} / {:.0} | {} |",
        report.connected,
        rss0 as f64 / 1024.0,
        rss1 as f64 / 1024.0,
        hist_quantile(&m, pace, 0.5),
        hist_quantile(&m, pace, 0.99),
        metric(&m, &format!("{pace}_max ")) * 1000.0,
        percentile(&report.jitter_ms, 50.0),
        percentile(&report.jitter_ms, 99.0),
        percentile(&report.fps, 1.0),
        percentile(&report.latency_ms, 50.0),
        percentile(&report.latency_ms, 99.0),
        percentile(&report.barge_ms, 50.0),
        percentile(&report.barge_ms, 99.0),
        percentile(&report.setup_ms, 50.0),
        percentile(&report.setup_ms, 99.0),
        report.errors.len(),
    );
    eprintln!(
        "  server: speech end → first audio p50/p99 {:.0}/{:.0} ms, barge-in purge p50/p99 {:.0}/{:.0} ms, setup POST p99 {:.0} ms, model step p99 {:.1} ms",
        hist_quantile(&m, "duet_speech_end_to_first_audio_seconds", 0.5),
        hist_quantile(&m, "duet_speech_end_to_first_audio_seconds", 0.99),
        hist_quantile(&m, "duet_barge_in_seconds", 0.5),
        hist_quantile(&m, "duet_barge_in_seconds", 0.99),
        hist_quantile(&m, "duet_call_setup_seconds", 0.99),
        hist_quantile(&m, "duet_model_step_seconds", 0.99),
    );
    for e in report.errors.iter().take(3) {
        eprintln!("  error: {e}");
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let a = args()?;
    println!("| calls | connected | server CPU | server RSS (per call) | pacing p50 / p99 / max ms (server grid) | arrival jitter p50 / p99 ms (client) | fps p1 | latency p50 / p99 ms | barge-in p50 / p99 ms | setup p50 / p99 ms | errors |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for n in &a.calls {
        row(*n, a.secs, &a.binary, a.ramp, a.server)?;
    }
    Ok(())
}
