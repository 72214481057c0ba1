//! Load benchmark: for each call count, starts a fresh `duet serve` (release build), runs N
//! concurrent WebRTC callers against it (see `duet_client::load`), and prints one table row:
//! server CPU, RSS per call, pacing, latency, barge-in and setup figures.
//!
//! ```sh
//! cargo build --release && cargo run --release --example loadgen -- --calls 1,16,32,64,100 --secs 20
//! ```
//!
//! `--loss PCT --jitter-ms MS` send every call through one impairment relay thread (random
//! loss and 0..=MS of extra delay per packet, each way; see `duet_client::impair`).

use std::net::SocketAddr;
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use duet_client::load::{
    hist_quantile, metric, metrics_text, percentile, proc_sample, run, spawn_server, LoadConfig,
    LoadReport,
};

struct Args {
    /// An already running server (then `pid` is what CPU/RSS are read from).
    server: Option<(SocketAddr, u32)>,
    calls: Vec<usize>,
    secs: u64,
    binary: String,
    ramp: f64,
    loss_pct: f64,
    jitter_ms: u64,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        server: None,
        calls: vec![1, 16, 32, 64, 100],
        secs: 20,
        binary: "target/release/duet".into(),
        ramp: 20.0,
        loss_pct: 0.0,
        jitter_ms: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--calls" => a.calls = v.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--secs" => a.secs = v.parse()?,
            "--binary" => a.binary = v,
            "--ramp" => a.ramp = v.parse()?,
            "--loss" => a.loss_pct = v.parse()?,
            "--jitter-ms" => a.jitter_ms = v.parse()?,
            "--server" => {
                let (addr, pid) = v.split_once(',').ok_or_else(|| anyhow!("--server HOST:PORT,PID"))?;
                a.server = Some((addr.parse()?, pid.parse()?));
            }
            other => anyhow::bail!("unknown flag {other}; use --calls 1,16,64 --secs 20 --binary PATH --ramp CALLS_PER_SEC [--loss PCT] [--jitter-ms MS] [--server HOST:PORT,PID]"),
        }
    }
    Ok(a)
}

/// The server a row measures: started for it (`child`), or the one `--server` names.
struct Target {
    child: Option<Child>,
    addr: SocketAddr,
    pid: u32,
}

/// A fresh server sized for `n` calls, unless `--server` names one already running.
fn target(n: usize, a: &Args) -> anyhow::Result<Target> {
    Ok(match a.server {
        Some((addr, pid)) => Target {
            child: None,
            addr,
            pid,
        },
        None => {
            let max = (n + 8).to_string();
            let (child, addr) =
                spawn_server(&a.binary, &["--max-calls", &max, "--max-sessions", &max])?;
            std::thread::sleep(Duration::from_millis(300));
            let pid = child.id();
            Target {
                child: Some(child),
                addr,
                pid,
            }
        }
    })
}

/// What one row shows: the server's RSS before and after (KiB), its CPU (% of one core)
/// once every call is up, the load's report and the server's `/metrics` at the end.
struct Measured {
    rss0: u64,
    rss1: u64,
    cpu: f64,
    report: LoadReport,
    metrics: String,
}

/// Runs `n` calls against `t`, sampling the server's CPU after the ramp until shortly
/// before the calls end.
fn measure(n: usize, a: &Args, t: &Target) -> anyhow::Result<Measured> {
    let (secs, ramp) = (a.secs, a.ramp);
    let rss0 = proc_sample(t.pid).rss_kib;
    let cfg = LoadConfig {
        server: t.addr,
        calls: n,
        duration: Duration::from_secs(secs),
        ramp_per_sec: ramp,
        turn: Duration::from_millis(1000),
        loss: a.loss_pct / 100.0,
        jitter: Duration::from_millis(a.jitter_ms),
    };
    let ramp_time = Duration::from_secs_f64(n as f64 / ramp) + Duration::from_secs(2);
    let load = std::thread::spawn(move || run(&cfg));
    std::thread::sleep(ramp_time);
    let t0 = proc_sample(t.pid).cpu_ticks;
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs.saturating_sub(3).max(1)));
    let end = proc_sample(t.pid);
    let (t1, rss1) = (end.cpu_ticks, end.rss_kib);
    let cpu = (t1 - t0) as f64 / 100.0 / w0.elapsed().as_secs_f64() * 100.0;
    let report: LoadReport = load.join().map_err(|_| anyhow!("load thread panicked"))??;
    let metrics = metrics_text(t.addr);
    Ok(Measured {
        rss0,
        rss1,
        cpu,
        report,
        metrics,
    })
}

/// The table row (stdout).
fn print_row(n: usize, r: &Measured) {
    let (report, m, cpu) = (&r.report, &r.metrics, r.cpu);
    let per_call = r.rss1.saturating_sub(r.rss0) as f64 / 1024.0 / n.max(1) as f64;
    let pace = "duet_pacing_deviation_seconds";
    println!(
        "| {n} | {}/{n} | {cpu:.0} % | {:.0} MiB → {:.0} MiB ({per_call:.2} MiB/call) | {:.2} / {:.2} / {:.1} | {:.2} / {:.2} | {:.1} | {:.0} / {:.0} | {:.0} / {:.0} | {:.0} / {:.0} | {} |",
        report.connected,
        r.rss0 as f64 / 1024.0,
        r.rss1 as f64 / 1024.0,
        hist_quantile(m, pace, 0.5),
        hist_quantile(m, pace, 0.99),
        metric(m, &format!("{pace}_max ")) * 1000.0,
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
}

/// The server's own latency figures, the relay's counters and the first errors (stderr).
fn print_details(r: &Measured) {
    let m = &r.metrics;
    eprintln!(
        "  server: speech end → first audio p50/p99 {:.0}/{:.0} ms, barge-in purge p50/p99 {:.0}/{:.0} ms, setup POST p99 {:.0} ms, model step p99 {:.1} ms",
        hist_quantile(m, "duet_speech_end_to_first_audio_seconds", 0.5),
        hist_quantile(m, "duet_speech_end_to_first_audio_seconds", 0.99),
        hist_quantile(m, "duet_barge_in_seconds", 0.5),
        hist_quantile(m, "duet_barge_in_seconds", 0.99),
        hist_quantile(m, "duet_call_setup_seconds", 0.99),
        hist_quantile(m, "duet_model_step_seconds", 0.99),
    );
    if let Some(relay) = &r.report.relay {
        eprintln!(
            "  relay: to server {} forwarded / {} lost / {} overflow, to callers {} / {} / {}; late (> 2 ms) {} + {}, max late {:?} / {:?}",
            relay.to_server.forwarded,
            relay.to_server.dropped,
            relay.to_server.overflow,
            relay.to_client.forwarded,
            relay.to_client.dropped,
            relay.to_client.overflow,
            relay.to_server.late,
            relay.to_client.late,
            relay.to_server.max_late,
            relay.to_client.max_late,
        );
    }
    for e in r.report.errors.iter().take(3) {
        eprintln!("  error: {e}");
    }
}

fn row(n: usize, a: &Args) -> anyhow::Result<()> {
    let mut t = target(n, a)?;
    let r = measure(n, a, &t)?;
    if let Some(c) = t.child.as_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
    print_row(n, &r);
    print_details(&r);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let a = args()?;
    println!("| calls | connected | server CPU | server RSS (per call) | pacing p50 / p99 / max ms (server grid) | arrival jitter p50 / p99 ms (client) | fps p1 | latency p50 / p99 ms | barge-in p50 / p99 ms | setup p50 / p99 ms | errors |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for n in &a.calls {
        row(*n, &a)?;
    }
    Ok(())
}
