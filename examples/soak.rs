//! Soak benchmark: one WebRTC call against a fresh `duet serve` (release build) for
//! `--minutes` (default 60). At the client it measures the pacing drift of the server's RTP
//! stream: the arrival of packet n minus (arrival of packet 0 + n × 20 ms), n from the RTP
//! timestamp, so a server clock running fast or slow, or a queue that grows, shows as a
//! drift that keeps growing; and frames received against expected. The caller speaks a 1 s
//! turn every minute (at 30 s past) and checks that the echo answers. Every minute it
//! samples the server's RSS and `/metrics` (frames sent, grid slots skipped, worst pacing).
//!
//! ```sh
//! cargo build --release --bin duet --example soak
//! target/release/examples/soak --minutes 60
//! ```

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use duet_client::http::hangup_blocking;
use duet_client::load::{
    dial_call, metric, metrics_text, proc_sample, receive, spawn_server, Clips, Dialed,
    VOICED_BYTES,
};
use duet_client::poll::wait_readable;
use str0m::{Event, Input, Output};

const FRAME: Duration = Duration::from_millis(20);
const MINUTE: Duration = Duration::from_secs(60);

struct Args {
    minutes: f64,
    binary: String,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        minutes: 60.0,
        binary: "target/release/duet".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--minutes" => a.minutes = v.parse()?,
            "--binary" => a.binary = v,
            other => anyhow::bail!("unknown flag {other}; use --minutes M --binary PATH"),
        }
    }
    Ok(a)
}

/// Min and max of a series.
#[derive(Clone, Copy, Debug)]
struct Range {
    min: f64,
    max: f64,
}

impl Default for Range {
    fn default() -> Self {
        Self {
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl Range {
    fn add(&mut self, v: f64) {
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }
}

/// One minute's figures.
struct Minute {
    frames: u64,
    drift: Range,
    rss_kib: u64,
    sent_total: f64,
    skipped_total: f64,
    pacing_max_ms: f64,
}

/// What the caller measures on the server's stream.
#[derive(Default)]
struct Stream {
    /// Arrival and media time of packet 0.
    origin: Option<(Instant, u64)>,
    frames: u64,
    drift: Range,
    minute: Range,
    minute_frames: u64,
    last_voiced: Option<Instant>,
}

impl Stream {
    fn packet(&mut self, now: Instant, media_us: u64, bytes: usize) {
        let (t0, m0) = *self.origin.get_or_insert((now, media_us));
        let drift = (now - t0).as_secs_f64() * 1000.0 - media_us.saturating_sub(m0) as f64 / 1000.0;
        self.drift.add(drift);
        self.minute.add(drift);
        self.frames += 1;
        self.minute_frames += 1;
        if bytes >= VOICED_BYTES {
            self.last_voiced = Some(now);
        }
    }
}

struct Soak {
    d: Dialed,
    clips: Clips,
    next: Instant,
    ts: u64,
    stream: Stream,
    connected: Option<Instant>,
}

impl Soak {
    fn drain(&mut self) -> anyhow::Result<()> {
        loop {
            match self.d.rtc.poll_output()? {
                Output::Timeout(t) => {
                    self.next = t;
                    return Ok(());
                }
                Output::Transmit(t) => {
                    let _ = self.d.socket.send_to(&t.contents, t.destination);
                }
                Output::Event(Event::Connected) => self.connected = Some(Instant::now()),
                Output::Event(Event::MediaData(m)) => {
                    self.stream
                        .packet(Instant::now(), m.time.as_micros(), m.data.len())
                }
                Output::Event(_) => {}
            }
        }
    }

    /// Sends frame `k` of the call: the turn's frames from 30 s past each minute, else silence.
    fn send(&mut self, now: Instant, k: u64) {
        let in_minute = (k % 3000) as usize;
        let payload = in_minute
            .checked_sub(1500)
            .and_then(|i| self.clips.turn.get(i))
            .unwrap_or(&self.clips.silence);
        duet_client::load::write_opus(&mut self.d.rtc, self.d.mid, &mut self.ts, now, payload);
    }

    /// Runs until `now` passes `until`: media timers, the send grid, and arrivals.
    fn run_until(&mut self, until: Instant, grid: &mut (Instant, u64)) -> anyhow::Result<()> {
        let mut buf = vec![0u8; 2048];
        while Instant::now() < until {
            let now = Instant::now();
            if self.next <= now {
                self.d.rtc.handle_input(Input::Timeout(now))?;
                self.drain()?;
            }
            if self.connected.is_some() && now >= grid.0 + FRAME * grid.1 as u32 {
                self.send(now, grid.1);
                self.drain()?;
                grid.1 += 1;
            }
            if wait_readable(&self.d.socket, Duration::from_millis(1)) {
                while let Ok((n, src)) = self.d.socket.recv_from(&mut buf) {
                    if receive(
                        &mut self.d.rtc,
                        self.d.local,
                        src,
                        &buf[..n],
                        Instant::now(),
                    ) {
                        self.drain()?;
                    }
                }
            }
        }
        Ok(())
    }
}

fn sample(server: SocketAddr, pid: u32, stream: &mut Stream) -> Minute {
    let m = metrics_text(server);
    let drift = std::mem::take(&mut stream.minute);
    Minute {
        frames: std::mem::take(&mut stream.minute_frames),
        drift,
        rss_kib: proc_sample(pid).rss_kib,
        sent_total: metric(&m, "duet_frames_sent_total "),
        skipped_total: metric(&m, "duet_pacing_skipped_total "),
        pacing_max_ms: metric(&m, "duet_pacing_deviation_seconds_max ") * 1000.0,
    }
}

fn main() -> anyhow::Result<()> {
    let a = args()?;
    // The server ends sessions after --max-session-secs (default 3600): allow the whole soak.
    let limit = ((a.minutes * 60.0) as u64 + 600).to_string();
    let (mut child, server) = spawn_server(&a.binary, &["--max-session-secs", &limit])?;
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(300));
    let mut soak = Soak {
        d: dial_call(server, None)?,
        clips: Clips::new(Duration::from_secs(1))?,
        next: Instant::now(),
        ts: 0,
        stream: Stream::default(),
        connected: None,
    };
    let mut grid = (Instant::now(), 0u64);
    soak.run_until(Instant::now() + Duration::from_secs(5), &mut grid)?;
    let start = soak
        .connected
        .context("the call did not connect within 5 s")?;
    grid.0 = Instant::now();
    grid.1 = 0;
    let total = Duration::from_secs_f64(a.minutes * 60.0);
    let (mut minutes, mut answered, mut spoken) = (Vec::new(), 0, 0);
    let mut at = Duration::ZERO;
    while at < total {
        let step = MINUTE.min(total - at);
        let turn_end = grid.0 + at + Duration::from_secs(31);
        soak.run_until(grid.0 + at + step, &mut grid)?;
        if step >= Duration::from_secs(31) {
            spoken += 1;
            answered += usize::from(soak.stream.last_voiced.is_some_and(|t| t > turn_end));
        }
        let m = sample(server, pid, &mut soak.stream);
        eprintln!(
            "minute {:>2}: {} frames, drift {:.1} .. {:.1} ms, RSS {:.1} MiB, server sent {} skipped {} pacing max {:.1} ms",
            minutes.len() + 1, m.frames, m.drift.min, m.drift.max, m.rss_kib as f64 / 1024.0, m.sent_total, m.skipped_total, m.pacing_max_ms
        );
        minutes.push(m);
        at += step;
    }
    let secs = grid.0.elapsed().as_secs_f64();
    let expected = (start.elapsed().as_secs_f64() * 50.0).round();
    let _ = hangup_blocking(server, &soak.d.call_id, None);
    let _ = child.kill();
    let _ = child.wait();
    report(
        &a,
        &soak.stream,
        &minutes,
        (secs, expected),
        (answered, spoken),
    );
    Ok(())
}

/// Prints the figure table; `time` is (seconds measured, frames expected).
fn report(a: &Args, s: &Stream, minutes: &[Minute], time: (f64, f64), turns: (usize, usize)) {
    let (first, last) = (&minutes[0], &minutes[minutes.len() - 1]);
    let (secs, expected) = time;
    let mib = |k: u64| k as f64 / 1024.0;
    println!("`soak --minutes {}`\n", a.minutes);
    println!("| figure | value |");
    println!("|---|---|");
    println!("| duration | {:.1} min |", secs / 60.0);
    println!(
        "| pacing drift min / max (client, packet n vs packet 0 + n × 20 ms) | {:.1} / {:.1} ms |",
        s.drift.min, s.drift.max
    );
    println!(
        "| drift min / max, first minute → last minute | {:.1} / {:.1} → {:.1} / {:.1} ms |",
        first.drift.min, first.drift.max, last.drift.min, last.drift.max
    );
    println!(
        "| frames received / expected (50/s since connected) | {} / {expected:.0} |",
        s.frames
    );
    println!(
        "| server RSS first → last minute | {:.1} → {:.1} MiB |",
        mib(first.rss_kib),
        mib(last.rss_kib)
    );
    println!(
        "| server pacing max, first → last minute | {:.1} → {:.1} ms |",
        first.pacing_max_ms, last.pacing_max_ms
    );
    println!(
        "| server grid slots skipped (total) | {} |",
        last.skipped_total
    );
    println!("| turns answered | {} / {} |", turns.0, turns.1);
}
