//! Churn benchmark: opens and closes many WebRTC calls against a fresh `duet serve` (release
//! build) and reads the server's file descriptors, threads and RSS from `/proc` when fresh,
//! after a 20-call warm-up (baseline), at the peak, and after every call was reaped (`/ready`
//! back to 0 calls and sessions). Of the calls, a tenth never start ICE (the offer is POSTed,
//! no packet follows), a quarter are killed mid-call (the caller stops sending and drops its
//! socket: no hangup, no DTLS close), and the rest hang up (`POST
//! /v1/realtime/calls/{id}/hangup`). Connected calls send Opus silence
//! for `--hold-ms` first. All callers run on one thread with one `ppoll`; a dialer thread
//! POSTs offers and a hangup thread POSTs hangups, so no HTTP round trip stalls the media.
//! `--rounds N` repeats the pass on the same server: RSS that settles after the first round
//! is the allocator keeping its high-water mark, RSS that grows every round is a leak.
//!
//! ```sh
//! cargo build --release --bin duet --example churn
//! target/release/examples/churn --calls 10000 --concurrency 32
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use duet_client::http::{hangup_blocking, request_blocking};
use duet_client::load::{dial_call, proc_sample, receive, spawn_server, Clips, Dialed, ProcSample};
use duet_client::poll::readable;
use str0m::media::{Frequency, MediaTime};
use str0m::{Event, Input, Output};

struct Args {
    calls: usize,
    concurrency: usize,
    hold: Duration,
    binary: String,
    reap_timeout: Duration,
    rounds: usize,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        calls: 10_000,
        concurrency: 32,
        hold: Duration::from_millis(1000),
        binary: "target/release/duet".into(),
        reap_timeout: Duration::from_secs(180),
        rounds: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--calls" => a.calls = v.parse()?,
            "--concurrency" => a.concurrency = v.parse::<usize>()?.max(1),
            "--hold-ms" => a.hold = Duration::from_millis(v.parse()?),
            "--binary" => a.binary = v,
            "--reap-timeout-secs" => a.reap_timeout = Duration::from_secs(v.parse()?),
            "--rounds" => a.rounds = v.parse::<usize>()?.max(1),
            other => anyhow::bail!("unknown flag {other}; use --calls N --concurrency N --hold-ms MS --rounds N --binary PATH --reap-timeout-secs S"),
        }
    }
    Ok(a)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Connects, holds, hangs up.
    HangUp,
    /// Connects, holds, vanishes.
    Killed,
    /// POSTs the offer and never sends a packet.
    NoIce,
}

/// 2 in 20 never start ICE, 5 in 20 are killed, 13 in 20 hang up; interleaved.
fn kind(i: usize) -> Kind {
    match i % 20 {
        0 | 10 => Kind::NoIce,
        3 | 7 | 11 | 15 | 19 => Kind::Killed,
        _ => Kind::HangUp,
    }
}

#[derive(Default)]
struct Tally {
    connected: usize,
    hung_up: usize,
    killed: usize,
    no_ice: usize,
    errors: Vec<String>,
}

struct Peer {
    d: Dialed,
    kind: Kind,
    next: Instant,
    connected: Option<Instant>,
    ts: u64,
    done: bool,
}

impl Peer {
    /// Drains str0m's outputs; an error ends the call.
    fn drain(&mut self, now: Instant, tally: &mut Tally) {
        loop {
            match self.d.rtc.poll_output() {
                Ok(Output::Timeout(t)) => {
                    self.next = t;
                    return;
                }
                Ok(Output::Transmit(t)) => {
                    let _ = self.d.socket.send_to(&t.contents, t.destination);
                }
                Ok(Output::Event(Event::Connected)) => {
                    self.connected = Some(now);
                    tally.connected += 1;
                }
                Ok(Output::Event(_)) => {}
                Err(e) => {
                    tally.errors.push(format!("rtc: {e}"));
                    self.done = true;
                    return;
                }
            }
        }
    }

    fn send_silence(&mut self, now: Instant, silence: &[u8]) {
        let Some(w) = self.d.rtc.writer(self.d.mid) else {
            return;
        };
        let Some(pt) = w.payload_params().next().map(|p| p.pt()) else {
            return;
        };
        let time = MediaTime::new(self.ts, Frequency::FORTY_EIGHT_KHZ);
        let _ = w.write(pt, now, time, silence.to_vec());
        self.ts += 960;
    }

    /// Ends a held call as its kind says. A hangup is the HTTP request alone: a DTLS close
    /// as well would race it (the server ends the call on whichever comes first).
    fn finish(&mut self, hangups: &mpsc::Sender<String>, tally: &mut Tally) {
        self.done = true;
        if self.kind == Kind::Killed {
            tally.killed += 1;
            return;
        }
        let _ = hangups.send(self.d.call_id.clone());
        tally.hung_up += 1;
    }
}

/// What the dialer thread hands over.
enum Dialled {
    Call(Box<Dialed>, Kind),
    NoIce,
    Failed(String),
}

fn dialer(
    server: SocketAddr,
    calls: usize,
    limit: usize,
    in_flight: Arc<AtomicUsize>,
    tx: mpsc::Sender<Dialled>,
) {
    for i in 0..calls {
        while in_flight.load(Ordering::Acquire) >= limit {
            std::thread::sleep(Duration::from_millis(1));
        }
        let k = kind(i);
        let msg = match dial_call(server, None) {
            Ok(_) if k == Kind::NoIce => Dialled::NoIce,
            Ok(d) => {
                in_flight.fetch_add(1, Ordering::AcqRel);
                Dialled::Call(Box::new(d), k)
            }
            Err(e) => Dialled::Failed(format!("setup: {e}")),
        };
        if tx.send(msg).is_err() {
            return;
        }
    }
}

/// POSTs every hangup it receives; returns the non-200 answers.
fn hanger(server: SocketAddr, rx: mpsc::Receiver<String>) -> Vec<String> {
    let mut errors = Vec::new();
    for id in rx {
        match hangup_blocking(server, &id, None) {
            Ok(200) => {}
            Ok(s) => errors.push(format!("hangup: {s}")),
            Err(e) => errors.push(format!("hangup: {e}")),
        }
    }
    errors
}

/// Runs every call to its end; returns the tally.
fn churn(server: SocketAddr, calls: usize, concurrency: usize, hold: Duration) -> Tally {
    let silence = Clips::new(Duration::from_millis(20))
        .map_or_else(|_| vec![0xf8, 0xff, 0xfe], |c| c.silence);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let flight = in_flight.clone();
    let dial = std::thread::spawn(move || dialer(server, calls, concurrency, flight, tx));
    let (hang_tx, hang_rx) = mpsc::channel();
    let hang = std::thread::spawn(move || hanger(server, hang_rx));
    let mut tally = Tally::default();
    let mut peers: Vec<Peer> = Vec::new();
    let (mut handed, mut buf, mut next_frame) = (0, vec![0u8; 2048], Instant::now());
    while handed < calls || !peers.is_empty() {
        while let Ok(m) = rx.try_recv() {
            handed += 1;
            match m {
                Dialled::Call(d, kind) => peers.push(Peer {
                    next: d.posted,
                    d: *d,
                    kind,
                    connected: None,
                    ts: 0,
                    done: false,
                }),
                Dialled::NoIce => tally.no_ice += 1,
                Dialled::Failed(e) => tally.errors.push(e),
            }
        }
        let now = Instant::now();
        let frame = now >= next_frame;
        if frame {
            next_frame = (next_frame + Duration::from_millis(20)).max(now);
        }
        for p in peers.iter_mut() {
            step(p, now, frame, hold, &silence, &hang_tx, &mut tally);
        }
        let sockets: Vec<_> = peers.iter().map(|p| &p.d.socket).collect();
        let ready = readable(&sockets, Duration::from_millis(1));
        for (p, _) in peers.iter_mut().zip(ready).filter(|(_, r)| *r) {
            while let Ok((n, src)) = p.d.socket.recv_from(&mut buf) {
                let now = Instant::now();
                if receive(&mut p.d.rtc, p.d.local, src, &buf[..n], now) {
                    p.drain(now, &mut tally);
                }
            }
        }
        let before = peers.len();
        peers.retain(|p| !p.done);
        in_flight.fetch_sub(before - peers.len(), Ordering::AcqRel);
    }
    let _ = dial.join();
    drop(hang_tx);
    tally.errors.extend(
        hang.join()
            .unwrap_or_else(|_| vec!["hangup thread panicked".into()]),
    );
    tally
}

/// Advances one call: timers, its 20 ms frame, and its end.
fn step(
    p: &mut Peer,
    now: Instant,
    frame: bool,
    hold: Duration,
    silence: &[u8],
    hangups: &mpsc::Sender<String>,
    tally: &mut Tally,
) {
    if p.next <= now {
        let _ = p.d.rtc.handle_input(Input::Timeout(now));
        p.drain(now, tally);
    }
    match p.connected {
        Some(at) if now >= at + hold => p.finish(hangups, tally),
        Some(_) if frame => {
            p.send_silence(now, silence);
            p.drain(now, tally);
        }
        None if now >= p.d.posted + Duration::from_secs(10) => {
            tally.errors.push("never connected".into());
            p.done = true;
        }
        _ => {}
    }
}

/// `/ready`'s (calls, sessions).
fn ready(server: SocketAddr) -> Option<(u64, u64)> {
    let body = request_blocking(server, "GET", "/ready", &[], "")
        .ok()?
        .body;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    Some((v["calls"].as_u64()?, v["sessions"].as_u64()?))
}

/// Polls `/ready` until no call and no session is left; returns how long that took.
fn wait_reaped(server: SocketAddr, timeout: Duration) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < timeout {
        if ready(server) == Some((0, 0)) {
            return Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// Samples the server every 250 ms until `stop`; returns the peak of each figure.
fn sampler(pid: u32, server: SocketAddr, stop: Arc<AtomicBool>) -> (ProcSample, u64) {
    let (mut peak, mut calls) = (ProcSample::default(), 0);
    while !stop.load(Ordering::Relaxed) {
        let s = proc_sample(pid);
        peak.fds = peak.fds.max(s.fds);
        peak.threads = peak.threads.max(s.threads);
        peak.rss_kib = peak.rss_kib.max(s.rss_kib);
        calls = calls.max(ready(server).map_or(0, |r| r.0));
        std::thread::sleep(Duration::from_millis(250));
    }
    (peak, calls)
}

/// One pass over `--calls` calls, then the wait until the server reaped them all.
struct Round {
    tally: Tally,
    elapsed: Duration,
    reaped: Option<Duration>,
    after: ProcSample,
}

fn round(a: &Args, server: SocketAddr, pid: u32) -> Round {
    let t0 = Instant::now();
    let tally = churn(server, a.calls, a.concurrency, a.hold);
    let elapsed = t0.elapsed();
    let reaped = wait_reaped(server, a.reap_timeout);
    std::thread::sleep(Duration::from_millis(1000));
    Round {
        tally,
        elapsed,
        reaped,
        after: proc_sample(pid),
    }
}

fn main() -> anyhow::Result<()> {
    let a = args()?;
    let max = (a.calls.min(4096) + a.concurrency + 64).to_string();
    let (mut child, server) =
        spawn_server(&a.binary, &["--max-calls", &max, "--max-sessions", &max])?;
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(300));
    let fresh = proc_sample(pid);
    let warm = churn(server, 20, 10, Duration::from_millis(300));
    let warm_ok = wait_reaped(server, a.reap_timeout).is_some() && warm.errors.is_empty();
    std::thread::sleep(Duration::from_millis(500));
    let base = proc_sample(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let peaks = std::thread::spawn(move || sampler(pid, server, flag));
    let rounds: Vec<Round> = (0..a.rounds).map(|_| round(&a, server, pid)).collect();
    stop.store(true, Ordering::Relaxed);
    let (peak, peak_calls) = peaks.join().map_err(|_| anyhow!("sampler panicked"))?;
    let _ = child.kill();
    let _ = child.wait();
    print_table(&a, [fresh, base, peak], &rounds);
    for (i, r) in rounds.iter().enumerate() {
        print_round(&a, i, r, peak_calls);
    }
    if !warm_ok {
        println!("(the warm-up had errors or was not reaped)");
    }
    Ok(())
}

/// The fds / threads / RSS table: fresh, baseline, peak, then after each round.
fn print_table(a: &Args, [fresh, base, peak]: [ProcSample; 3], rounds: &[Round]) {
    let rounds_flag = if a.rounds > 1 {
        format!(" --rounds {}", a.rounds)
    } else {
        String::new()
    };
    println!(
        "`churn --calls {} --concurrency {} --hold-ms {}{rounds_flag}`\n",
        a.calls,
        a.concurrency,
        a.hold.as_millis()
    );
    let afters: String = (1..=rounds.len())
        .map(|i| {
            if rounds.len() > 1 {
                format!(" after round {i} |")
            } else {
                " after reaping |".into()
            }
        })
        .collect();
    println!("| server | fresh | baseline (after warm-up) | peak |{afters}");
    println!("|---|---|---|---|{}", "---|".repeat(rounds.len()));
    let row = |name: &str, f: &dyn Fn(&ProcSample) -> String| {
        let tail: String = rounds
            .iter()
            .map(|r| format!(" {} |", f(&r.after)))
            .collect();
        println!(
            "| {name} | {} | {} | {} |{tail}",
            f(&fresh),
            f(&base),
            f(&peak)
        );
    };
    row("fds", &|s| s.fds.to_string());
    row("threads", &|s| s.threads.to_string());
    row("RSS MiB", &|s| format!("{:.1}", s.rss_kib as f64 / 1024.0));
}

fn print_round(a: &Args, i: usize, r: &Round, peak_calls: u64) {
    let t = &r.tally;
    let reaped = r.reaped.map_or_else(
        || format!("NOT within {:?}", a.reap_timeout),
        |d| format!("{:.1} s", d.as_secs_f64()),
    );
    println!(
        "\nround {}: {} calls in {:.1} s ({:.1} calls/s): {} connected, {} hung up, {} killed, {} never started ICE; peak {peak_calls} live calls; reaped {reaped} after the last call; {} errors",
        i + 1,
        a.calls,
        r.elapsed.as_secs_f64(),
        a.calls as f64 / r.elapsed.as_secs_f64(),
        t.connected,
        t.hung_up,
        t.killed,
        t.no_ice,
        t.errors.len(),
    );
    let mut kinds = std::collections::BTreeMap::new();
    for e in &t.errors {
        *kinds.entry(e.as_str()).or_insert(0) += 1;
    }
    for (e, n) in kinds {
        eprintln!("  {n} × {e}");
    }
}
