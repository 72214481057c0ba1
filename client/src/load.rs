//! Load generator: N concurrent WebRTC callers in one process, all driven by one thread with
//! one `ppoll` over their sockets. Opus is encoded once and replayed. Each caller speaks in
//! turns, then talks over the answer, and measures on the receiving side: frames and
//! inter-arrival jitter, end of speech → first answer frame, barge-in onset → last answer
//! frame, POST → connected, and errors. Voiced vs silent frames are told apart by Opus
//! packet size (silence encodes to ~20 bytes, speech to ~80–120), so nothing is decoded.
//! With `loss` or `jitter` set, every call goes through one shared impairment relay thread
//! (see [`crate::impair`]).

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use duet_media::OpusEncoder;
use str0m::change::SdpAnswer;
use str0m::media::{Direction, Frequency, MediaKind, MediaTime, Mid};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};

use crate::http::{multipart, post_call_blocking, post_offer_blocking, request_blocking};
use crate::impair::{self, Impairment, Relay, RelayStats};
use crate::poll::readable;

/// Opus packets at least this large carry speech.
pub const VOICED_BYTES: usize = 40;
/// Silent frames in a row that end an answer.
const ANSWER_GAP_FRAMES: u32 = 10;

/// Load settings.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Server HTTP address.
    pub server: SocketAddr,
    /// Concurrent calls.
    pub calls: usize,
    /// How long every call runs after connecting.
    pub duration: Duration,
    /// Calls started per second during ramp-up.
    pub ramp_per_sec: f64,
    /// Spoken turn length.
    pub turn: Duration,
    /// Packet loss probability (0..=1), each way.
    pub loss: f64,
    /// Random extra delay per packet, 0..=jitter, each way.
    pub jitter: Duration,
    /// Each call's session configuration (the offer's multipart `session` part), if any.
    pub session: Option<serde_json::Value>,
}

impl LoadConfig {
    /// The relay's impairment, when any was asked for.
    fn impairment(&self) -> Option<Impairment> {
        (self.loss > 0.0 || !self.jitter.is_zero())
            .then(|| Impairment::new(self.loss, self.jitter, 1))
    }
}

/// What one run measured (durations in milliseconds).
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    /// Calls that connected.
    pub connected: usize,
    /// Failures (setup, connect).
    pub errors: Vec<String>,
    /// POST → connected per call.
    pub setup_ms: Vec<f64>,
    /// Received frames per second per call.
    pub fps: Vec<f64>,
    /// |inter-arrival − 20 ms| per received frame.
    pub jitter_ms: Vec<f64>,
    /// End of speech → first answer frame.
    pub latency_ms: Vec<f64>,
    /// Barge-in onset → last frame of the cancelled answer.
    pub barge_ms: Vec<f64>,
    /// The impairment relay's counters, when there was one.
    pub relay: Option<RelayStats>,
}

/// The `p`th percentile (0..=100) of `v`, or NaN when empty.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((p / 100.0) * (s.len() - 1) as f64).round() as usize;
    s[i.min(s.len() - 1)]
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Silence until `at`.
    Idle { until: Instant },
    /// Sending the turn's frames.
    Speaking { frame: usize },
    /// Waiting for the answer's first voiced frame.
    Waiting { since: Instant },
    /// The answer plays; at `barge_at` we talk over it.
    Answer { barge_at: Instant },
    /// Talking over the answer; waiting for it to stop.
    BargeIn {
        onset: Instant,
        frame: usize,
        measured: bool,
    },
}

struct Caller {
    rtc: Rtc,
    socket: UdpSocket,
    local: SocketAddr,
    mid: Mid,
    posted: Instant,
    connected: Option<Instant>,
    next_timeout: Instant,
    send_slot: u64,
    ts: u64,
    phase: Phase,
    last_rx: Option<Instant>,
    last_voiced_rx: Option<Instant>,
    silent_run: u32,
    frames: u64,
    first_frame: Option<Instant>,
    dead: bool,
}

/// Pre-encoded Opus audio shared by every caller.
pub struct Clips {
    /// The encoder's settled silent packet.
    pub silence: Vec<u8>,
    /// A spoken turn, one packet per 20 ms.
    pub turn: Vec<Vec<u8>>,
    /// 400 ms of speech to talk over an answer.
    pub barge: Vec<Vec<u8>>,
}

/// A synthetic voice (a 140 Hz buzz with vibrato and 8 harmonics, 4 Hz syllable envelope)
/// of `frames` 20 ms frames at `rate` Hz.
pub fn voiced_at(frames: usize, rate: u32) -> Vec<f32> {
    let r = rate as f32;
    let mut phase = 0.0f32;
    (0..frames * rate as usize / 50)
        .map(|i| {
            let t = i as f32 / r;
            phase += 2.0
                * std::f32::consts::PI
                * (140.0 + 8.0 * (2.0 * std::f32::consts::PI * 5.0 * t).sin())
                / r;
            0.12 * (0.75 + 0.25 * (2.0 * std::f32::consts::PI * 4.0 * t).sin())
                * (1..=8)
                    .map(|h| (phase * h as f32).sin() / h as f32)
                    .sum::<f32>()
        })
        .collect()
}

fn voiced(frames: usize) -> Vec<f32> {
    voiced_at(frames, 48_000)
}

fn encode_clip(enc: &mut OpusEncoder, pcm: &[f32]) -> anyhow::Result<Vec<Vec<u8>>> {
    pcm.chunks(960)
        .map(|f| enc.encode(f).map_err(|e| anyhow!("{e}")))
        .collect()
}

impl Clips {
    /// Encodes a turn of `turn` (synthetic voice), the barge-in clip and silence.
    pub fn new(turn: Duration) -> anyhow::Result<Self> {
        let mut enc = OpusEncoder::new().map_err(|e| anyhow!("{e}"))?;
        let frames = (turn.as_millis() / 20) as usize;
        let turn = encode_clip(&mut enc, &voiced(frames))?;
        let barge = encode_clip(&mut enc, &voiced(20))?;
        let mut silence = Vec::new();
        for _ in 0..10 {
            silence = enc.encode_silence().map_err(|e| anyhow!("{e}"))?;
        }
        Ok(Self {
            silence,
            turn,
            barge,
        })
    }
}

/// One offered call with the answer applied: its str0m side, socket and server call id.
pub struct Dialed {
    /// The offerer.
    pub rtc: Rtc,
    /// Its UDP socket (non-blocking).
    pub socket: UdpSocket,
    /// The socket's address.
    pub local: SocketAddr,
    /// The audio m-line.
    pub mid: Mid,
    /// `rtc_…` from the `Location` header.
    pub call_id: String,
    /// When the offer was POSTed.
    pub posted: Instant,
}

/// Offers a call (blocking HTTP) through `relay` when there is one.
pub fn dial_call(server: SocketAddr, relay: Option<&Relay>) -> anyhow::Result<Dialed> {
    dial_call_with(server, relay, None)
}

/// [`dial_call`] with the call's session configuration (the offer's multipart `session`
/// part) when `session` is given.
pub fn dial_call_with(
    server: SocketAddr,
    relay: Option<&Relay>,
    session: Option<&serde_json::Value>,
) -> anyhow::Result<Dialed> {
    let socket = UdpSocket::bind(SocketAddr::new(server.ip(), 0))?;
    socket.set_nonblocking(true)?;
    let local = socket.local_addr()?;
    let now = Instant::now();
    // DTLS configured once per process, as the server does (not validated per call).
    duet_signaling::dtls::install();
    let mut config = Rtc::builder().clear_codecs().enable_opus(true, false);
    if let Some(r) = relay {
        let window = crate::rtc::reorder_window(&r.impairment());
        config = config.set_reordering_size_audio(window);
    }
    let mut rtc = config.build(now);
    rtc.add_local_candidate(Candidate::host(local, "udp")?);
    let mut api = rtc.sdp_api();
    let mid = api.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None);
    api.add_channel("oai-events".into());
    let (offer, pending) = api.apply().ok_or_else(|| anyhow!("no offer"))?;
    let sdp = offer.to_sdp_string();
    let (call_id, mut answer) = match session {
        None => post_offer_blocking(server, &sdp, None)?,
        Some(session) => {
            let json = session.to_string();
            let (ctype, body) = multipart(&[
                ("sdp", "application/sdp", &sdp),
                ("session", "application/json", &json),
            ]);
            post_call_blocking(server, &ctype, &body)?
        }
    };
    if let Some(r) = relay {
        let media = impair::candidate_addr(&answer).context("no UDP candidate in answer")?;
        answer = impair::redirect(&answer, r.front(media)?);
    }
    rtc.sdp_api()
        .accept_answer(pending, SdpAnswer::from_sdp_string(&answer)?)?;
    Ok(Dialed {
        rtc,
        socket,
        local,
        mid,
        call_id,
        posted: now,
    })
}

/// Offers one call; returns the caller ready to run.
fn dial(
    server: SocketAddr,
    index: usize,
    relay: Option<&Relay>,
    session: Option<&serde_json::Value>,
) -> anyhow::Result<Caller> {
    let d = dial_call_with(server, relay, session)?;
    Ok(Caller {
        rtc: d.rtc,
        socket: d.socket,
        local: d.local,
        mid: d.mid,
        posted: d.posted,
        connected: None,
        next_timeout: d.posted,
        send_slot: index as u64 % 20,
        ts: 0,
        phase: Phase::Idle {
            until: d.posted + Duration::from_millis(1500),
        },
        last_rx: None,
        last_voiced_rx: None,
        silent_run: 0,
        frames: 0,
        first_frame: None,
        dead: false,
    })
}

/// Starts `binary serve` on free ports with `extra` flags and warn-level logs; returns the
/// child and its HTTP address (from the first line it prints).
pub fn spawn_server(binary: &str, extra: &[&str]) -> anyhow::Result<(Child, SocketAddr)> {
    let mut child = Command::new(binary)
        .args(["serve", "--port", "0", "--udp-port", "0"])
        .args(extra)
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

/// What `/proc` tells about a process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcSample {
    /// utime + stime, in clock ticks (1/100 s).
    pub cpu_ticks: u64,
    /// Resident memory, KiB.
    pub rss_kib: u64,
    /// Threads.
    pub threads: u64,
    /// Open file descriptors.
    pub fds: u64,
}

/// utime + stime, in clock ticks, from a `/proc/…/stat` file (a process's or a thread's);
/// 0 when it cannot be read.
pub fn cpu_ticks(stat_path: &str) -> u64 {
    let stat = std::fs::read_to_string(stat_path).unwrap_or_default();
    let fields: Vec<u64> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    fields.get(11).unwrap_or(&0) + fields.get(12).unwrap_or(&0)
}

/// Samples `/proc/PID` (zeros for what cannot be read).
pub fn proc_sample(pid: u32) -> ProcSample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    ProcSample {
        cpu_ticks: cpu_ticks(&format!("/proc/{pid}/stat")),
        rss_kib: field("VmRSS:"),
        threads: field("Threads:"),
        fds,
    }
}

impl Caller {
    fn drain(&mut self, report: &mut LoadReport, now: Instant) {
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => {
                    self.next_timeout = t;
                    return;
                }
                Ok(Output::Transmit(t)) => {
                    let _ = self.socket.send_to(&t.contents, t.destination);
                }
                Ok(Output::Event(Event::Connected)) => {
                    self.connected = Some(now);
                    report.setup_ms.push(ms(now - self.posted));
                }
                Ok(Output::Event(Event::MediaData(d))) => self.frame(d.data.len(), now, report),
                Ok(Output::Event(_)) => {}
                Err(e) => {
                    report.errors.push(format!("rtc: {e}"));
                    self.dead = true;
                    return;
                }
            }
        }
    }

    fn frame(&mut self, bytes: usize, now: Instant, report: &mut LoadReport) {
        if let Some(prev) = self.last_rx {
            report.jitter_ms.push((ms(now - prev) - 20.0).abs());
        }
        self.last_rx = Some(now);
        self.first_frame.get_or_insert(now);
        self.frames += 1;
        let voiced = bytes >= VOICED_BYTES;
        if std::env::var_os("DUET_LOADGEN_TRACE").is_some() {
            let phase = format!("{:?}", self.phase);
            eprintln!(
                "rx {} {bytes} {}",
                (now - self.posted).as_millis(),
                phase.split([' ', '{']).next().unwrap_or("")
            );
        }
        if voiced {
            self.last_voiced_rx = Some(now);
            self.silent_run = 0;
        } else {
            self.silent_run += 1;
        }
        match self.phase {
            Phase::Waiting { since } if voiced => {
                report.latency_ms.push(ms(now - since));
                self.phase = Phase::Answer {
                    barge_at: now + Duration::from_millis(300),
                };
            }
            Phase::BargeIn {
                onset,
                frame,
                measured: false,
            } if self.silent_run == ANSWER_GAP_FRAMES => {
                if let Some(last) = self.last_voiced_rx.filter(|t| *t > onset) {
                    report.barge_ms.push(ms(last - onset));
                }
                self.phase = Phase::BargeIn {
                    onset,
                    frame,
                    measured: true,
                };
            }
            _ => {}
        }
    }

    /// This caller's 20 ms send slot: one frame per call, staggered by `send_slot` ms.
    fn send(&mut self, now: Instant, clips: &Clips, turn_frames: usize) {
        if self.connected.is_none() || self.dead {
            return;
        }
        let payload = self.advance(now, clips, turn_frames);
        self.write(now, payload);
    }

    /// Steps the turn-taking phase by one frame and returns the packet to send with it.
    fn advance<'c>(&mut self, now: Instant, clips: &'c Clips, turn_frames: usize) -> &'c [u8] {
        match self.phase {
            Phase::Idle { until } => {
                if now >= until {
                    self.phase = Phase::Speaking { frame: 0 };
                }
                &clips.silence
            }
            Phase::Speaking { frame } => {
                self.phase = if frame + 1 >= turn_frames {
                    Phase::Waiting {
                        since: now + Duration::from_millis(20),
                    }
                } else {
                    Phase::Speaking { frame: frame + 1 }
                };
                &clips.turn[frame]
            }
            Phase::Waiting { .. } => &clips.silence,
            Phase::Answer { barge_at } => {
                if now >= barge_at {
                    self.phase = Phase::BargeIn {
                        onset: now,
                        frame: 0,
                        measured: false,
                    };
                }
                &clips.silence
            }
            Phase::BargeIn {
                onset,
                frame,
                measured,
            } => self.barge_in(now, clips, onset, frame, measured),
        }
    }

    /// The barge-in clip's next frame, then silence until 3 s after `onset`, when the
    /// caller goes idle for a second before its next turn.
    fn barge_in<'c>(
        &mut self,
        now: Instant,
        clips: &'c Clips,
        onset: Instant,
        frame: usize,
        measured: bool,
    ) -> &'c [u8] {
        if frame < clips.barge.len() {
            self.phase = Phase::BargeIn {
                onset,
                frame: frame + 1,
                measured,
            };
            &clips.barge[frame]
        } else {
            if now - onset > Duration::from_secs(3) {
                self.phase = Phase::Idle {
                    until: now + Duration::from_millis(1000),
                };
            }
            &clips.silence
        }
    }

    /// Writes one Opus packet on the audio m-line, 960 samples after the last.
    fn write(&mut self, now: Instant, payload: &[u8]) {
        write_opus(&mut self.rtc, self.mid, &mut self.ts, now, payload);
    }
}

/// Writes one 20 ms Opus packet on `mid` at RTP time `*ts` (48 kHz), then moves `*ts` on.
pub fn write_opus(rtc: &mut Rtc, mid: Mid, ts: &mut u64, now: Instant, payload: &[u8]) {
    let Some(w) = rtc.writer(mid) else {
        return;
    };
    let Some(pt) = w.payload_params().next().map(|p| p.pt()) else {
        return;
    };
    let _ = w.write(
        pt,
        now,
        MediaTime::new(*ts, Frequency::FORTY_EIGHT_KHZ),
        payload,
    );
    *ts += 960;
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Runs a load and returns what it measured.
pub fn run(cfg: &LoadConfig) -> anyhow::Result<LoadReport> {
    let clips = Clips::new(cfg.turn)?;
    let ramp = cfg.ramp_per_sec.max(0.1);
    let relay = match cfg.impairment() {
        Some(imp) => Some(Arc::new(Relay::shared(imp)?)),
        None => None,
    };
    let (dialed, dialer) = spawn_dialer(cfg, ramp, relay.clone());
    let mut fleet = Fleet::new(&clips);
    let ramp_time = Duration::from_secs_f64(cfg.calls as f64 / ramp);
    let end = fleet.start + ramp_time + cfg.duration;
    while Instant::now() < end {
        fleet.admit(&dialed);
        fleet.step();
    }
    let _ = dialer.join();
    fleet.hang_up();
    Ok(fleet.into_report(relay.as_deref()))
}

/// Dials `calls` calls at `ramp` a second on a thread of its own, sending each caller (or
/// its setup error) down the channel; stops early when the receiver is gone.
fn spawn_dialer(
    cfg: &LoadConfig,
    ramp: f64,
    relay: Option<Arc<Relay>>,
) -> (
    std_mpsc::Receiver<Result<Caller, String>>,
    std::thread::JoinHandle<()>,
) {
    let (tx, rx) = std_mpsc::channel();
    let (server, calls, session) = (cfg.server, cfg.calls, cfg.session.clone());
    let dialer = std::thread::spawn(move || {
        let start = Instant::now();
        for i in 0..calls {
            let due = start + Duration::from_secs_f64(i as f64 / ramp);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            if tx
                .send(
                    dial(server, i, relay.as_deref(), session.as_ref())
                        .map_err(|e| format!("setup: {e}")),
                )
                .is_err()
            {
                return;
            }
        }
    });
    (rx, dialer)
}

/// Every caller of a run, driven from one thread, and what they measured so far.
struct Fleet<'c> {
    clips: &'c Clips,
    callers: Vec<Caller>,
    report: LoadReport,
    start: Instant,
    /// The next millisecond (since `start`) whose send slot is still to serve.
    ms_slot: u64,
    buf: Vec<u8>,
}

impl<'c> Fleet<'c> {
    fn new(clips: &'c Clips) -> Self {
        Self {
            clips,
            callers: Vec::new(),
            report: LoadReport::default(),
            start: Instant::now(),
            ms_slot: 0,
            buf: vec![0u8; 2048],
        }
    }

    /// Takes in the callers dialed (and the setup errors) since the last call.
    fn admit(&mut self, dialed: &std_mpsc::Receiver<Result<Caller, String>>) {
        while let Ok(c) = dialed.try_recv() {
            match c {
                Ok(c) => self.callers.push(c),
                Err(e) => self.report.errors.push(e),
            }
        }
    }

    /// One turn of the loop: the send slots due, str0m's timeouts, then up to 1 ms of
    /// waiting for datagrams.
    fn step(&mut self) {
        let now = Instant::now();
        let slot = (now - self.start).as_millis() as u64;
        let turn_frames = self.clips.turn.len();
        while self.ms_slot <= slot {
            let ms_slot = self.ms_slot;
            for c in self
                .callers
                .iter_mut()
                .filter(|c| (ms_slot % 20) == c.send_slot)
            {
                c.send(now, self.clips, turn_frames);
                c.drain(&mut self.report, now);
            }
            self.ms_slot += 1;
        }
        for c in self.callers.iter_mut().filter(|c| c.next_timeout <= now) {
            let _ = c.rtc.handle_input(Input::Timeout(now));
            c.drain(&mut self.report, now);
        }
        poll_all(&mut self.callers, &mut self.buf, &mut self.report);
    }

    /// Hangs up like a real caller: DTLS close_notify lets the server free the call at once.
    fn hang_up(&mut self) {
        for c in self.callers.iter_mut() {
            if c.rtc.close().is_ok() {
                c.drain(&mut self.report, Instant::now());
            }
        }
    }

    /// The report, with each caller's frame rate, the calls that never connected and the
    /// relay's counters added.
    fn into_report(mut self, relay: Option<&Relay>) -> LoadReport {
        for c in &self.callers {
            if let (Some(first), Some(last)) = (c.first_frame, c.last_rx) {
                let secs = (last - first).as_secs_f64();
                if secs > 1.0 {
                    self.report.fps.push((c.frames - 1) as f64 / secs);
                }
            }
            if c.connected.is_none() {
                self.report.errors.push("never connected".into());
            }
        }
        self.report.connected = self
            .callers
            .iter()
            .filter(|c| c.connected.is_some())
            .count();
        self.report.relay = relay.map(Relay::stats);
        self.report
    }
}

/// Waits up to 1 ms for any socket, then reads every datagram that arrived.
fn poll_all(callers: &mut [Caller], buf: &mut [u8], report: &mut LoadReport) {
    let sockets: Vec<&UdpSocket> = callers.iter().map(|c| &c.socket).collect();
    let ready = readable(&sockets, Duration::from_millis(1));
    for (c, _) in callers.iter_mut().zip(ready).filter(|(_, r)| *r) {
        while let Ok((n, source)) = c.socket.recv_from(buf) {
            let now = Instant::now();
            if receive(&mut c.rtc, c.local, source, &buf[..n], now) {
                c.drain(report, now);
            }
        }
    }
}

/// Feeds one datagram to `rtc`; false when str0m refused it.
pub fn receive(
    rtc: &mut Rtc,
    local: SocketAddr,
    source: SocketAddr,
    bytes: &[u8],
    now: Instant,
) -> bool {
    let Ok(contents) = bytes.try_into() else {
        return false;
    };
    let input = Input::Receive(
        now,
        Receive {
            proto: Protocol::Udp,
            source,
            destination: local,
            contents,
        },
    );
    rtc.handle_input(input).is_ok()
}

/// The server's `/metrics` text (empty on failure).
pub fn metrics_text(server: SocketAddr) -> String {
    request_blocking(server, "GET", "/metrics", &[], "").map_or_else(|_| String::new(), |r| r.body)
}

/// The value of a series line starting with `series` (name plus labels and a space).
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(f64::NAN)
}

/// Quantile `q` (one the server reports: 0.5, 0.9, 0.99, 0.999, 1) of a histogram's exact
/// record `NAME_exact_seconds`, in ms (NaN when absent). `name` is the histogram's name.
pub fn exact_quantile(text: &str, name: &str, q: f64) -> f64 {
    let stem = name.strip_suffix("_seconds").unwrap_or(name);
    metric(text, &format!("{stem}_exact_seconds{{quantile=\"{q}\"}} ")) * 1000.0
}

/// Bucket upper bound (ms) holding quantile `q` of a Prometheus histogram.
pub fn hist_quantile(text: &str, name: &str, q: f64) -> f64 {
    let count = metric(text, &format!("{name}_count "));
    let prefix = format!("{name}_bucket{{le=\"");
    for line in text.lines().filter(|l| l.starts_with(&prefix)) {
        let le = line.split('"').nth(1).unwrap_or("+Inf");
        let n: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        if n >= q * count {
            return le
                .parse::<f64>()
                .map(|s| s * 1000.0)
                .unwrap_or(f64::INFINITY);
        }
    }
    f64::NAN
}
