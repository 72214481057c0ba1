//! Load benchmark: for each call count, starts a fresh `duet serve` (release build), runs N
//! concurrent WebRTC callers against it (see `duet_client::load`), and prints one table row:
//! server CPU, RSS per call, pacing (exact quantiles from the server), per-tick deadline
//! work, latency, barge-in and setup figures; then where the latency goes, stage by stage.
//! `--ws 100,500,1000` does the same for WebSocket sessions with audio in and out at real
//! time (see `duet_client::ws_load`).
//!
//! ```sh
//! cargo build --release --bin duet --example loadgen
//! target/release/examples/loadgen --calls 1,32,64,100,200 --secs 20
//! target/release/examples/loadgen --ws 100,500,1000 --secs 20
//! ```
//!
//! `--noise-reduction near_field` opens every call with that `audio.input.noise_reduction`
//! (the offer's `session` part), to measure what denoising costs per call.
//!
//! `--adaptive` opens every call with adaptive interruption (`server_vad` 500 ms with
//! `interruption.mode: "adaptive"`): the 400 ms barge-in clip is then a backchannel that
//! pauses the answer's playout and lets it go on, so the barge-in column measures the voice's
//! onset → the playout paused.
//!
//! `--loss PCT --jitter-ms MS` send every call through one impairment relay thread (random
//! loss and 0..=MS of extra delay per packet, each way; see `duet_client::impair`).

use std::net::SocketAddr;
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use duet_client::load::{
    exact_quantile, metrics_text, percentile, proc_sample, run, spawn_server, LoadConfig,
    LoadReport,
};
use duet_client::ws_load::{run_ws, WsLoadConfig, WsLoadReport};

/// The server's default `silence_duration_ms`: what the caller must stay silent before a
/// turn ends, subtracted from the measured latency to give the server-added part.
const VAD_SILENCE_MS: f64 = 500.0;

struct Args {
    /// An already running server (then `pid` is what CPU/RSS are read from).
    server: Option<(SocketAddr, u32)>,
    calls: Vec<usize>,
    ws: Vec<usize>,
    secs: u64,
    binary: String,
    ramp: f64,
    loss_pct: f64,
    jitter_ms: u64,
    /// `audio.input.noise_reduction` type for every call (`near_field`, `far_field`).
    noise_reduction: Option<String>,
    /// Adaptive interruption on every call (the barge-in clip becomes a backchannel).
    adaptive: bool,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        server: None,
        calls: Vec::new(),
        ws: Vec::new(),
        secs: 20,
        binary: "target/release/duet".into(),
        ramp: 20.0,
        loss_pct: 0.0,
        jitter_ms: 0,
        noise_reduction: None,
        adaptive: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--adaptive" {
            a.adaptive = true;
            continue;
        }
        let v = it.next().ok_or_else(|| anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--calls" => a.calls = v.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--ws" => a.ws = v.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--secs" => a.secs = v.parse()?,
            "--binary" => a.binary = v,
            "--ramp" => a.ramp = v.parse()?,
            "--loss" => a.loss_pct = v.parse()?,
            "--jitter-ms" => a.jitter_ms = v.parse()?,
            "--noise-reduction" => a.noise_reduction = Some(v),
            "--server" => {
                let (addr, pid) = v.split_once(',').ok_or_else(|| anyhow!("--server HOST:PORT,PID"))?;
                a.server = Some((addr.parse()?, pid.parse()?));
            }
            other => anyhow::bail!("unknown flag {other}; use --calls 1,16,64 | --ws 100,500 --secs 20 --binary PATH --ramp PER_SEC [--loss PCT] [--jitter-ms MS] [--noise-reduction near_field|far_field] [--adaptive] [--server HOST:PORT,PID]"),
        }
    }
    if a.calls.is_empty() && a.ws.is_empty() {
        a.calls = vec![1, 32, 64, 100, 200];
    }
    Ok(a)
}

/// The server a row measures: started for it (`child`), or the one `--server` names.
struct Target {
    child: Option<Child>,
    addr: SocketAddr,
    pid: u32,
}

/// A fresh server sized for `n` calls (or sessions), unless `--server` names one running.
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
struct Measured<R> {
    rss0: u64,
    /// Once every call is up (after the ramp and 2 s).
    rss_up: u64,
    rss1: u64,
    cpu: f64,
    report: R,
    metrics: String,
}

impl<R> Measured<R> {
    /// Server memory added per call or session, MiB: at the end, and once all were up.
    fn per_session_mib(&self, n: usize) -> f64 {
        self.rss1.saturating_sub(self.rss0) as f64 / 1024.0 / n.max(1) as f64
    }

    fn per_session_up_mib(&self, n: usize) -> f64 {
        self.rss_up.saturating_sub(self.rss0) as f64 / 1024.0 / n.max(1) as f64
    }
}

/// Runs `load` against `t`, sampling the server's CPU from `ramp_time` on until shortly
/// before the load ends (`secs` after its ramp).
fn measure<R: Send + 'static>(
    t: &Target,
    secs: u64,
    ramp_time: Duration,
    load: impl FnOnce() -> anyhow::Result<R> + Send + 'static,
) -> anyhow::Result<Measured<R>> {
    let rss0 = proc_sample(t.pid).rss_kib;
    let load = std::thread::spawn(load);
    std::thread::sleep(ramp_time + Duration::from_secs(2));
    let up = proc_sample(t.pid);
    let (t0, rss_up) = (up.cpu_ticks, up.rss_kib);
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs.saturating_sub(3).max(1)));
    let end = proc_sample(t.pid);
    let (t1, rss1) = (end.cpu_ticks, end.rss_kib);
    let cpu = (t1 - t0) as f64 / 100.0 / w0.elapsed().as_secs_f64() * 100.0;
    let report = load.join().map_err(|_| anyhow!("load thread panicked"))??;
    let metrics = metrics_text(t.addr);
    Ok(Measured {
        rss0,
        rss_up,
        rss1,
        cpu,
        report,
        metrics,
    })
}

/// `n` WebRTC calls.
fn measure_calls(n: usize, a: &Args, t: &Target) -> anyhow::Result<Measured<LoadReport>> {
    let cfg = LoadConfig {
        server: t.addr,
        calls: n,
        duration: Duration::from_secs(a.secs),
        ramp_per_sec: a.ramp,
        turn: Duration::from_millis(1000),
        loss: a.loss_pct / 100.0,
        jitter: Duration::from_millis(a.jitter_ms),
        session: session(a),
    };
    let ramp_time = Duration::from_secs_f64(n as f64 / a.ramp);
    measure(t, a.secs, ramp_time, move || run(&cfg))
}

/// Every call's session part: noise reduction and adaptive interruption when asked.
fn session(a: &Args) -> Option<serde_json::Value> {
    let mut input = serde_json::Map::new();
    if let Some(kind) = &a.noise_reduction {
        input.insert("noise_reduction".into(), serde_json::json!({"type": kind}));
    }
    if a.adaptive {
        let td = serde_json::json!({"type": "server_vad", "silence_duration_ms": VAD_SILENCE_MS as u64,
            "interruption": {"mode": "adaptive"}});
        input.insert("turn_detection".into(), td);
    }
    (!input.is_empty()).then(|| serde_json::json!({"type": "realtime", "audio": {"input": input}}))
}

/// `n` WebSocket sessions (opened at 5× the call ramp: a WebSocket is cheap to open).
fn measure_ws(n: usize, a: &Args, t: &Target) -> anyhow::Result<Measured<WsLoadReport>> {
    let ramp = a.ramp * 5.0;
    let cfg = WsLoadConfig {
        server: t.addr,
        sessions: n,
        duration: Duration::from_secs(a.secs),
        ramp_per_sec: ramp,
        turn: Duration::from_millis(1000),
        pause: Duration::from_millis(1000),
    };
    let ramp_time = Duration::from_secs_f64(n as f64 / ramp);
    measure(t, a.secs, ramp_time, move || run_ws(&cfg))
}

/// Latencies minus the VAD silence: what the server added.
fn server_added(latency_ms: &[f64]) -> Vec<f64> {
    latency_ms.iter().map(|l| l - VAD_SILENCE_MS).collect()
}

/// `p50 / p99` of an exact server histogram, in ms.
fn server_pair(m: &str, name: &str) -> String {
    format!(
        "{:.1} / {:.1}",
        exact_quantile(m, name, 0.5),
        exact_quantile(m, name, 0.99)
    )
}

/// The main table's row.
fn print_row(n: usize, r: &Measured<LoadReport>) {
    let (report, m, cpu) = (&r.report, &r.metrics, r.cpu);
    let (per_call, per_call_up) = (r.per_session_mib(n), r.per_session_up_mib(n));
    let pace = "duet_pacing_deviation_seconds";
    let added = server_added(&report.latency_ms);
    println!(
        "| {n} | {}/{n} | {cpu:.0} % | {:.0} → {:.0} MiB ({per_call_up:.2} → {per_call:.2} MiB/call) | {:.3} / {:.3} / {:.3} / {:.3} | {:.3} / {:.3} | {:.2} / {:.2} | {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {} |",
        report.connected,
        r.rss0 as f64 / 1024.0,
        r.rss1 as f64 / 1024.0,
        exact_quantile(m, pace, 0.5),
        exact_quantile(m, pace, 0.99),
        exact_quantile(m, pace, 0.999),
        exact_quantile(m, pace, 1.0),
        exact_quantile(m, "duet_tick_wake_seconds", 0.99),
        exact_quantile(m, "duet_tick_work_seconds", 0.99),
        percentile(&report.jitter_ms, 50.0),
        percentile(&report.jitter_ms, 99.0),
        percentile(&report.fps, 1.0),
        percentile(&added, 50.0),
        percentile(&added, 99.0),
        percentile(&report.barge_ms, 50.0),
        percentile(&report.barge_ms, 99.0),
        percentile(&report.setup_ms, 50.0),
        percentile(&report.setup_ms, 99.0),
        report.errors.len(),
    );
}

/// Where the milliseconds go, from the server's exact histograms (p50 / p99 each).
fn breakdown_row<R>(n: usize, r: &Measured<R>) -> String {
    let m = &r.metrics;
    format!(
        "| {n} | {} | {} | {} | {} | {} | {} | {} | {} |",
        server_pair(m, "duet_inbound_wait_seconds"),
        server_pair(m, "duet_vad_release_seconds"),
        server_pair(m, "duet_answer_start_seconds"),
        server_pair(m, "duet_playout_wait_seconds"),
        server_pair(m, "duet_vad_onset_seconds"),
        server_pair(m, "duet_barge_in_seconds"),
        server_pair(m, "duet_model_step_seconds"),
        server_pair(m, "duet_call_setup_seconds"),
    )
}

/// The relay's counters and the first errors (stderr).
fn print_details(r: &Measured<LoadReport>) {
    if std::env::var_os("DUET_LOADGEN_DIST").is_some() {
        let q = |v: &[f64]| {
            [10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0].map(|p| percentile(v, p).round())
        };
        eprintln!(
            "  barge-in p10..p99 {:?} (n={})",
            q(&r.report.barge_ms),
            r.report.barge_ms.len()
        );
        eprintln!(
            "  latency p10..p99 {:?} (n={})",
            q(&r.report.latency_ms),
            r.report.latency_ms.len()
        );
    }
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

/// Starts the row's server, runs `f` against it, stops it.
fn with_server<R>(
    n: usize,
    a: &Args,
    f: impl FnOnce(&Target) -> anyhow::Result<R>,
) -> anyhow::Result<R> {
    let mut t = target(n, a)?;
    let r = f(&t);
    if let Some(c) = t.child.as_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
    r
}

fn row(n: usize, a: &Args) -> anyhow::Result<String> {
    let r = with_server(n, a, |t| measure_calls(n, a, t))?;
    print_row(n, &r);
    print_details(&r);
    Ok(breakdown_row(n, &r))
}

/// A WebSocket row: CPU, RSS per session, audio delta inter-arrival, turn latency, setup.
fn ws_row(n: usize, a: &Args) -> anyhow::Result<()> {
    let r = with_server(n, a, |t| measure_ws(n, a, t))?;
    let (report, m) = (&r.report, &r.metrics);
    let added = server_added(&report.latency_ms);
    println!(
        "| {n} | {}/{n} | {:.0} % | {:.0} → {:.0} MiB ({:.3} → {:.3} MiB/session) | {:.2} / {:.2} / {:.2} | {:.2} | {:.1} / {:.1} | {} | {:.1} / {:.1} | {} |",
        report.connected,
        r.cpu,
        r.rss0 as f64 / 1024.0,
        r.rss1 as f64 / 1024.0,
        r.per_session_up_mib(n),
        r.per_session_mib(n),
        percentile(&report.delta_jitter_ms, 50.0),
        percentile(&report.delta_jitter_ms, 99.0),
        percentile(&report.delta_jitter_ms, 99.9),
        percentile(&report.audio_rate, 1.0),
        percentile(&added, 50.0),
        percentile(&added, 99.0),
        server_pair(m, "duet_answer_start_seconds"),
        percentile(&report.setup_ms, 50.0),
        percentile(&report.setup_ms, 99.0),
        report.errors.len(),
    );
    for e in report.errors.iter().take(3) {
        eprintln!("  error: {e}");
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let a = args()?;
    if !a.calls.is_empty() {
        println!("| calls | connected | server CPU | server RSS (per call: all up → at the end) | pacing p50 / p99 / p99.9 / max ms | tick wake / work p99 ms | arrival jitter p50 / p99 ms | fps p1 | server-added latency p50 / p99 ms | barge-in p50 / p99 ms | setup p50 / p99 ms | errors |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
        let mut breakdown = Vec::new();
        for n in &a.calls {
            breakdown.push(row(*n, &a)?);
        }
        println!();
        println!("Where the time goes (server, exact, p50 / p99 ms). Latency = inbound wait + VAD release + answer start + playout wait (+ the silence); barge-in = inbound wait + VAD onset + purge.");
        println!();
        println!("| calls | inbound wait | VAD release past silence | answer start | playout wait | VAD onset | barge-in purge | model step | setup (POST) |");
        println!("|---|---|---|---|---|---|---|---|---|");
        for b in breakdown {
            println!("{b}");
        }
    }
    if !a.ws.is_empty() {
        if !a.calls.is_empty() {
            println!();
        }
        println!("| sessions | connected | server CPU | server RSS (per session: all up → at the end) | audio delta inter-arrival p50 / p99 / p99.9 ms | answer audio rate p1 (s/s) | server-added latency p50 / p99 ms | answer start p50 / p99 ms (server) | setup p50 / p99 ms | errors |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for n in &a.ws {
            ws_row(*n, &a)?;
        }
    }
    Ok(())
}
