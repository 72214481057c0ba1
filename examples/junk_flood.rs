//! Junk flood benchmark: one live WebRTC call on a one-media-thread `duet serve` (release
//! build), measured for a quiet baseline window and then for a window in which the
//! server's UDP media port is flooded with junk from many source sockets: random bytes,
//! RTP-looking packets (first byte 0x80) and well-formed STUN binding requests naming an
//! unknown ufrag. The engine drops all of it without touching the call (see
//! `src/engine/thread.rs`, `route`), so the call's pacing should not notice. One spoken
//! turn per window checks that the echo answer still arrives.
//!
//! ```sh
//! cargo build --release --bin duet --example junk_flood
//! target/release/examples/junk_flood --secs 10 --pps 100000
//! ```
//!
//! Flags: `--binary PATH` (default target/release/duet), `--secs` (each window),
//! `--pps` (flood rate), `--sources` (source sockets, round-robin), `--flood-threads`,
//! `--batch` (datagrams per `sendmmsg` call), `--settle` (seconds before the baseline),
//! `--nice N` (every server thread and the client's media thread) and `--fifo PRIO`
//! (SCHED_FIFO for the server's media engine thread and the client's media thread; needs
//! CAP_SYS_NICE). Those two keep other load on a shared machine out of the figures; the
//! flood threads always run at the default priority.
//!
//! Figures per window: the flood rate achieved; the inter-arrival deviation from 20 ms of
//! the server's RTP at the client (exact, from every frame); frames/s; the largest gap and
//! the gaps over 40 ms (a missing frame); the server's own grid lateness
//! (`duet_pacing_deviation_seconds`, this window's bucket counts, so a bucket bound); the
//! server's CPU (all threads, and the media engine thread alone); datagrams the kernel
//! dropped on the server's socket (`/proc/net/udp`), which are the call's packets as much
//! as junk; the CPU of this process (client and flood) and of every other process, as
//! the sender and the server share the machine; the echo turn. Loopback only.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use duet_client::load::{metric, metrics_text, proc_sample};
use duet_client::rtc::{ClientOptions, RtcClient};
use rand::{Rng, RngCore};

/// The grid the server sends on.
const FRAME: Duration = Duration::from_millis(20);
/// The flood's pacing tick.
const TICK: Duration = Duration::from_millis(1);
/// An RMS above this is the echo answer (silence frames decode to ~0).
const LOUD: f32 = 0.02;
/// When, into a window, the turn is spoken, and how long it is.
const SPEAK_AT: Duration = Duration::from_secs(2);
const SPEECH_SECS: f32 = 1.5;
const PACING: &str = "duet_pacing_deviation_seconds";

struct Args {
    binary: String,
    secs: u64,
    pps: u64,
    sources: usize,
    flood_threads: usize,
    batch: usize,
    settle: f64,
    /// Nice value for every server thread and the client's media thread.
    nice: Option<i32>,
    /// SCHED_FIFO priority for the server's media engine thread and the client's.
    fifo: Option<i32>,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        binary: "target/release/duet".into(),
        secs: 10,
        pps: 100_000,
        sources: 64,
        flood_threads: 1,
        batch: 4,
        settle: 1.0,
        nice: None,
        fifo: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--binary" => a.binary = v,
            "--secs" => a.secs = v.parse()?,
            "--pps" => a.pps = v.parse()?,
            "--sources" => a.sources = v.parse()?,
            "--flood-threads" => a.flood_threads = v.parse()?,
            "--batch" => a.batch = v.parse()?,
            "--settle" => a.settle = v.parse()?,
            "--nice" => a.nice = Some(v.parse()?),
            "--fifo" => a.fifo = Some(v.parse()?),
            other => bail!("unknown flag {other}; use --secs 10 --pps 100000 --binary PATH [--sources 64] [--flood-threads 1] [--batch 4] [--settle 1] [--nice N] [--fifo PRIO]"),
        }
    }
    if a.sources == 0 || a.flood_threads == 0 || a.batch == 0 {
        bail!("--sources, --flood-threads and --batch must be at least 1");
    }
    if a.secs < 7 {
        eprintln!("note: windows under 7 s may end before the echo answer is done");
    }
    Ok(a)
}

/// The server, its HTTP address and its UDP media address.
struct Server {
    child: Child,
    http: SocketAddr,
    udp: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `duet serve` with one media thread; the UDP address comes from its log line
/// "media engine listening (UDP)" (stderr, `DUET_LOG=info`). Both pipes keep being drained.
fn spawn_server(binary: &str) -> anyhow::Result<Server> {
    let mut child = Command::new(binary)
        .args([
            "serve",
            "--port",
            "0",
            "--udp-port",
            "0",
            "--media-threads",
            "1",
        ])
        .env("DUET_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {binary} (build it with cargo build --release)"))?;
    let out = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let err = child.stderr.take().ok_or_else(|| anyhow!("no stderr"))?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains("media engine listening (UDP)") {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(line);
                }
            } else if line.contains("WARN") || line.contains("ERROR") {
                eprintln!("  server: {line}");
            }
        }
    });
    let mut lines = BufReader::new(out).lines();
    let line = lines.next().ok_or_else(|| anyhow!("server exited"))??;
    std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
    let http = line
        .trim()
        .rsplit("http://")
        .next()
        .ok_or_else(|| anyhow!("no address in {line:?}"))?
        .parse()?;
    let log = rx
        .recv_timeout(Duration::from_secs(10))
        .context("no \"media engine listening (UDP)\" log line")?;
    let udp = field(&log, "local=")
        .ok_or_else(|| anyhow!("no local= in {log:?}"))?
        .parse()?;
    Ok(Server { child, http, udp })
}

/// The value of `key` (e.g. `local=`) in a text log line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(key)? + key.len();
    line[at..].split_whitespace().next()
}

/// A STUN binding request (RFC 8489): 20-byte header (type 0x0001, length, magic cookie
/// 0x2112A442, 12-byte transaction id) and one USERNAME attribute padded to 4 bytes.
fn stun_binding_request(username: &str, transaction: [u8; 12]) -> Vec<u8> {
    let value = username.as_bytes();
    let padded = value.len().next_multiple_of(4);
    let mut p = Vec::with_capacity(20 + 4 + padded);
    p.extend_from_slice(&0x0001u16.to_be_bytes());
    p.extend_from_slice(&((4 + padded) as u16).to_be_bytes());
    p.extend_from_slice(&0x2112_A442u32.to_be_bytes());
    p.extend_from_slice(&transaction);
    p.extend_from_slice(&0x0006u16.to_be_bytes());
    p.extend_from_slice(&(value.len() as u16).to_be_bytes());
    p.extend_from_slice(value);
    p.resize(20 + 4 + padded, 0);
    p
}

fn alnum(rng: &mut impl Rng, n: usize) -> String {
    const SET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..n)
        .map(|_| SET[rng.random_range(0..SET.len())] as char)
        .collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Random,
    Rtp,
    Stun,
}

/// A pool of junk datagrams, a third of each kind; `refresh` varies one before each send.
fn junk_pool(n: usize) -> Vec<(Kind, Vec<u8>)> {
    let mut rng = rand::rng();
    (0..n)
        .map(|i| match i % 3 {
            0 => {
                let mut p = vec![0u8; rng.random_range(16..=200)];
                rng.fill_bytes(&mut p);
                (Kind::Random, p)
            }
            1 => {
                let mut p = vec![0u8; 12 + rng.random_range(20..=160)];
                rng.fill_bytes(&mut p);
                p[0] = 0x80;
                p[1] = if rng.random_bool(0.5) { 111 } else { 0 };
                (Kind::Rtp, p)
            }
            _ => {
                let mut t = [0u8; 12];
                rng.fill_bytes(&mut t);
                let len = rng.random_range(4..=16);
                let user = format!("{}:{}", alnum(&mut rng, len), alnum(&mut rng, 4));
                (Kind::Stun, stun_binding_request(&user, t))
            }
        })
        .collect()
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// New random bytes where a real sender's would change: a STUN transaction id, an RTP
/// sequence number, timestamp and first payload bytes, a random datagram's head.
fn refresh(kind: Kind, p: &mut [u8], s: &mut u64) {
    let r = xorshift(s).to_ne_bytes();
    let r2 = xorshift(s).to_ne_bytes();
    match kind {
        Kind::Stun => {
            p[8..16].copy_from_slice(&r);
            p[16..20].copy_from_slice(&r2[..4]);
        }
        Kind::Rtp => {
            p[2..10].copy_from_slice(&r);
            p[12..16].copy_from_slice(&r2[..4]);
        }
        Kind::Random => p[..8].copy_from_slice(&r),
    }
}

#[derive(Default, Clone, Copy)]
struct FloodReport {
    sent: u64,
    errors: u64,
    /// Datagrams not sent because the sender fell more than 4 ticks behind.
    shed: u64,
    elapsed: Duration,
    /// The flood thread's own CPU time.
    cpu: Duration,
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec into a valid local.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Sends `pps` datagrams a second to `target` (round-robin over `sockets`, `batch` per
/// `sendmmsg`) until `stop`, paced per 1 ms tick against an absolute schedule.
fn flood(sockets: Vec<UdpSocket>, pps: u64, batch: usize, stop: Arc<AtomicBool>) -> FloodReport {
    let mut pool = junk_pool(3 * 1024);
    let mut seed = rand::rng().next_u64() | 1;
    let per_tick = pps as f64 * TICK.as_secs_f64();
    let cap = (per_tick * 4.0).ceil() as u64;
    let mut r = FloodReport::default();
    let (mut next_pkt, mut next_sock) = (0usize, 0usize);
    let start = Instant::now();
    let mut tick = 0u64;
    // SAFETY (all below): zeroed mmsghdr/iovec are valid empty values; their pointers are
    // set to live buffers in `pool` before each sendmmsg and not used after it returns.
    let mut iov: Vec<libc::iovec> = vec![unsafe { std::mem::zeroed() }; batch];
    let mut msgs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; batch];
    while !stop.load(Ordering::Relaxed) {
        let due = (per_tick * (start.elapsed().as_secs_f64() / TICK.as_secs_f64())) as u64;
        let mut want = due.saturating_sub(r.sent + r.errors + r.shed);
        if want > cap {
            r.shed += want - cap;
            want = cap;
        }
        while want > 0 {
            let n = (want as usize).min(batch);
            for i in 0..n {
                let len = pool.len();
                let (kind, p) = &mut pool[next_pkt];
                next_pkt = (next_pkt + 1) % len;
                refresh(*kind, p, &mut seed);
                iov[i] = libc::iovec {
                    iov_base: p.as_mut_ptr().cast(),
                    iov_len: p.len(),
                };
                msgs[i].msg_hdr.msg_iov = &mut iov[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
            }
            let fd = sockets[next_sock].as_raw_fd();
            next_sock = (next_sock + 1) % sockets.len();
            // SAFETY: `msgs[..n]` point at `iov[..n]`, which point at live pool buffers;
            // the sockets are connected, so no address is needed.
            let done = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), n as u32, 0) };
            if done < 0 {
                r.errors += n as u64;
            } else {
                r.sent += done as u64;
                r.errors += (n - done as usize) as u64;
            }
            want -= n as u64;
        }
        tick += 1;
        let next = start + TICK * tick as u32;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            tick = (now - start).as_micros() as u64 / TICK.as_micros() as u64 + 1;
        }
    }
    r.elapsed = start.elapsed();
    r.cpu = thread_cpu();
    r
}

/// Starts the flood threads; `stop` ends them.
fn start_flood(
    a: &Args,
    target: SocketAddr,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Vec<std::thread::JoinHandle<FloodReport>>> {
    let mut threads = Vec::new();
    for t in 0..a.flood_threads {
        let n = (a.sources / a.flood_threads).max(1);
        let sockets = (0..n)
            .map(|_| {
                let s = UdpSocket::bind("127.0.0.1:0")?;
                s.connect(target)?;
                Ok(s)
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        let pps =
            a.pps / a.flood_threads as u64 + u64::from((t as u64) < a.pps % a.flood_threads as u64);
        let (batch, stop) = (a.batch, stop.clone());
        threads.push(
            std::thread::Builder::new()
                .name(format!("junk-flood-{t}"))
                .spawn(move || flood(sockets, pps, batch, stop))?,
        );
    }
    Ok(threads)
}

/// A process's threads: (id, name).
fn threads(pid: u32) -> Vec<(u32, String)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| {
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            Some((
                e.file_name().to_str()?.parse().ok()?,
                comm.trim().to_string(),
            ))
        })
        .collect()
}

/// The media engine thread's id, by name.
fn engine_tid(pid: u32) -> Option<u32> {
    threads(pid)
        .into_iter()
        .find(|(_, name)| name == "media-engine-0")
        .map(|(tid, _)| tid)
}

/// `--nice` and `--fifo`: keeps other load on a shared machine from being what is measured.
/// The flood threads keep the default priority.
fn prioritize(a: &Args, server: u32) -> anyhow::Result<()> {
    let client = threads(std::process::id())
        .into_iter()
        .filter(|(_, name)| name == "rtc-client");
    let mut all: Vec<(u32, String)> = threads(server);
    all.extend(client);
    for (tid, name) in all {
        if let Some(n) = a.nice {
            // SAFETY: plain syscall on a thread id; PRIO_PROCESS with a tid sets that thread.
            if unsafe { libc::setpriority(libc::PRIO_PROCESS as _, tid, n) } != 0 {
                bail!("setpriority {name}: {}", std::io::Error::last_os_error());
            }
        }
        if let (Some(p), true) = (a.fifo, name == "media-engine-0" || name == "rtc-client") {
            let param = libc::sched_param { sched_priority: p };
            // SAFETY: plain syscall with a valid sched_param.
            if unsafe { libc::sched_setscheduler(tid as i32, libc::SCHED_FIFO, &param) } != 0 {
                bail!("SCHED_FIFO {name}: {}", std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// utime + stime of one thread, in clock ticks.
fn thread_ticks(pid: u32, tid: u32) -> u64 {
    duet_client::load::cpu_ticks(&format!("/proc/{pid}/task/{tid}/stat"))
}

/// Datagrams the kernel dropped on the IPv4 UDP socket bound to `port` (`/proc/net/udp`).
fn udp_drops(port: u16) -> u64 {
    let text = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    let want = format!(":{port:04X}");
    text.lines()
        .skip(1)
        .find(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| a.ends_with(&want))
        })
        .and_then(|l| l.split_whitespace().last()?.parse().ok())
        .unwrap_or(0)
}

/// Busy clock ticks of the whole machine, all cores (`/proc/stat`).
fn machine_ticks() -> u64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and iowait.
    let all: u64 = f.iter().take(8).sum();
    all.saturating_sub(f.get(3).unwrap_or(&0) + f.get(4).unwrap_or(&0))
}

/// Cumulative bucket counts of a histogram, by upper bound.
fn buckets(text: &str, name: &str) -> Vec<(String, f64)> {
    let prefix = format!("{name}_bucket{{le=\"");
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(&prefix)?;
            let (le, n) = rest.split_once("\"} ")?;
            Some((le.to_string(), n.trim().parse().ok()?))
        })
        .collect()
}

/// The bucket bound (ms) holding quantile `q` of what was observed between two scrapes.
fn window_quantile(before: &[(String, f64)], after: &[(String, f64)], q: f64) -> String {
    let base = |le: &str| {
        before
            .iter()
            .find(|(l, _)| l == le)
            .map_or(0.0, |(_, n)| *n)
    };
    let total = after.last().map_or(0.0, |(le, n)| n - base(le));
    if total <= 0.0 {
        return "n/a".into();
    }
    for (le, n) in after {
        if n - base(le) >= (q * total).ceil() {
            return match le.parse::<f64>() {
                Ok(s) => format!("≤ {}", s * 1000.0),
                Err(_) => "> 5000".into(),
            };
        }
    }
    "n/a".into()
}

/// Exact nearest-rank percentile of sorted values.
fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

struct Window {
    label: &'static str,
    pps: Option<f64>,
    flood: FloodReport,
    dev: Vec<f64>,
    frames: usize,
    secs: f64,
    max_gap_ms: f64,
    gaps: usize,
    grid_p50: String,
    grid_p99: String,
    grid_p999: String,
    skipped: f64,
    cpu: f64,
    engine_cpu: f64,
    drops: u64,
    /// CPU of this process (the client and the flood), % of one core.
    own_cpu: f64,
    /// CPU of everything else on the machine, % of one core.
    others_cpu: f64,
    turn: String,
}

/// Cumulative counters read at a window's start and end: CPU clock ticks of the server
/// (all threads), its media engine thread, this process and the whole machine (busy), and
/// the kernel's drops on the server's UDP socket.
#[derive(Clone, Copy)]
struct Counters {
    server: u64,
    engine: u64,
    drops: u64,
    own: u64,
    machine: u64,
}

impl Counters {
    fn read(s: &Server, engine: Option<u32>) -> Self {
        let pid = s.child.id();
        Self {
            server: proc_sample(pid).cpu_ticks,
            engine: engine.map_or(0, |t| thread_ticks(pid, t)),
            drops: udp_drops(s.udp.port()),
            own: proc_sample(std::process::id()).cpu_ticks,
            machine: machine_ticks(),
        }
    }
}

/// One spoken turn at `SPEAK_AT` into the window (speech, then silence; the echo model
/// answers with the same audio), described for the table: the answer's status and timing,
/// or why none came before `end`.
async fn echo_turn(c: &mut RtcClient, t0: Instant, end: Instant) -> String {
    tokio::time::sleep_until((t0 + SPEAK_AT).into()).await;
    let mut speech: Vec<f32> = duet_media::pcm::synthetic_voice(SPEECH_SECS)
        .iter()
        .flat_map(|s| [*s, *s])
        .collect();
    speech.extend(vec![0.0; 48_000 * 7 / 10]);
    let spoke = Instant::now();
    let speech_end = spoke + Duration::from_secs_f32(SPEECH_SECS);
    c.speak(&speech);
    let left = end.saturating_duration_since(Instant::now());
    match c.until("response.done", left).await {
        Ok((done, _)) => {
            let status = done["response"]["status"]
                .as_str()
                .unwrap_or("?")
                .to_string();
            let st = c.stats();
            let first = st.first_loud_after(speech_end, LOUD);
            let loud = st
                .frames
                .iter()
                .filter(|(t, r)| *t >= speech_end && *r > LOUD)
                .count();
            format!(
                "{status}, {:.0} ms after speech end, {loud} loud frames{}",
                (Instant::now() - speech_end).as_secs_f64() * 1000.0,
                first.map_or(String::new(), |f| format!(
                    ", first audio +{:.0} ms",
                    (f - speech_end).as_secs_f64() * 1000.0
                )),
            )
        }
        Err(e) => format!("no response.done: {e}"),
    }
}

/// Waits for the flood threads and adds up their reports (the longest elapsed time).
fn join_flood(threads: Vec<std::thread::JoinHandle<FloodReport>>) -> anyhow::Result<FloodReport> {
    let mut fr = FloodReport::default();
    for t in threads {
        let r = t.join().map_err(|_| anyhow!("flood thread panicked"))?;
        fr.sent += r.sent;
        fr.errors += r.errors;
        fr.shed += r.shed;
        fr.elapsed = fr.elapsed.max(r.elapsed);
        fr.cpu += r.cpu;
    }
    Ok(fr)
}

/// The server's RTP as the client saw it in `[t0, t1)`.
struct Arrivals {
    frames: usize,
    max_gap_ms: f64,
    /// Inter-arrival gaps over two frames.
    gaps: usize,
    /// |inter-arrival − 20 ms| per frame, sorted.
    dev: Vec<f64>,
}

fn arrivals(c: &RtcClient, t0: Instant, t1: Instant) -> Arrivals {
    let arrivals: Vec<Instant> = c
        .stats()
        .frames
        .iter()
        .map(|(t, _)| *t)
        .filter(|t| *t >= t0 && *t < t1)
        .collect();
    let deltas: Vec<f64> = arrivals
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64() * 1000.0)
        .collect();
    let frame_ms = FRAME.as_secs_f64() * 1000.0;
    let mut dev: Vec<f64> = deltas.iter().map(|d| (d - frame_ms).abs()).collect();
    dev.sort_by(f64::total_cmp);
    Arrivals {
        frames: arrivals.len(),
        max_gap_ms: deltas.iter().copied().fold(0.0, f64::max),
        gaps: deltas.iter().filter(|d| **d > 2.0 * frame_ms).count(),
        dev,
    }
}

/// One measured window: counters and metrics before, the flood (when `flood`) and the echo
/// turn during, counters, metrics and the client's arrivals after.
async fn window(
    label: &'static str,
    a: &Args,
    s: &Server,
    c: &mut RtcClient,
    flood: bool,
) -> anyhow::Result<Window> {
    let tid = engine_tid(s.child.id());
    let m0 = metrics_text(s.http);
    let before = Counters::read(s, tid);
    let stop = Arc::new(AtomicBool::new(false));
    let threads = if flood {
        start_flood(a, s.udp, stop.clone())?
    } else {
        Vec::new()
    };
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs(a.secs);
    let turn = echo_turn(c, t0, end).await;
    tokio::time::sleep_until(end.into()).await;
    let t1 = Instant::now();
    stop.store(true, Ordering::Relaxed);
    let after = Counters::read(s, tid);
    let fr = join_flood(threads)?;
    let m1 = metrics_text(s.http);
    Ok(Measured {
        flood: flood.then_some(fr),
        secs: (t1 - t0).as_secs_f64(),
        arrivals: arrivals(c, t0, t1),
        metrics: (m0, m1),
        counters: (before, after),
        turn,
    }
    .summary(label))
}

/// What a window measured, before it is summed up.
struct Measured {
    /// The flood threads' totals; `None` in the baseline, which has none.
    flood: Option<FloodReport>,
    secs: f64,
    arrivals: Arrivals,
    /// The server's `/metrics` at the start and end.
    metrics: (String, String),
    counters: (Counters, Counters),
    turn: String,
}

impl Measured {
    /// The window's row.
    fn summary(self, label: &'static str) -> Window {
        let ((m0, m1), (before, after), secs) = (&self.metrics, self.counters, self.secs);
        let (b0, b1) = (buckets(m0, PACING), buckets(m1, PACING));
        let skipped_series = "duet_pacing_skipped_total ";
        let cpu = after.server.saturating_sub(before.server) as f64 / secs;
        let own_cpu = after.own.saturating_sub(before.own) as f64 / secs;
        let fr = self.flood.unwrap_or_default();
        Window {
            label,
            pps: self
                .flood
                .map(|f| f.sent as f64 / f.elapsed.as_secs_f64().max(1e-9)),
            flood: fr,
            frames: self.arrivals.frames,
            secs,
            max_gap_ms: self.arrivals.max_gap_ms,
            gaps: self.arrivals.gaps,
            dev: self.arrivals.dev,
            grid_p50: window_quantile(&b0, &b1, 0.5),
            grid_p99: window_quantile(&b0, &b1, 0.99),
            grid_p999: window_quantile(&b0, &b1, 0.999),
            skipped: metric(m1, skipped_series) - metric(m0, skipped_series),
            cpu,
            engine_cpu: after.engine.saturating_sub(before.engine) as f64 / secs,
            drops: after.drops.saturating_sub(before.drops),
            own_cpu,
            // Busy ticks of all cores (100 a second each), less the server's and ours.
            others_cpu: (after.machine.saturating_sub(before.machine) as f64 / secs
                - cpu
                - own_cpu)
                .max(0.0),
            turn: self.turn,
        }
    }
}

fn print_row(w: &Window) {
    let pps = w.pps.map_or("0".to_string(), |p| format!("{p:.0}"));
    println!(
        "| {} | {pps} | {:.3} / {:.3} / {:.3} / {:.3} | {:.1} | {:.1} | {} | {} / {} / {} | {:.0} | {:.0} % | {:.0} % | {} | {:.0} % | {:.0} % | {} |",
        w.label,
        pct(&w.dev, 50.0),
        pct(&w.dev, 99.0),
        pct(&w.dev, 99.9),
        w.dev.last().copied().unwrap_or(f64::NAN),
        w.frames as f64 / w.secs,
        w.max_gap_ms,
        w.gaps,
        w.grid_p50,
        w.grid_p99,
        w.grid_p999,
        w.skipped,
        w.cpu,
        w.engine_cpu,
        w.drops,
        w.own_cpu,
        w.others_cpu,
        w.turn,
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let command: Vec<String> = std::env::args().collect();
    let server = spawn_server(&a.binary)?;
    eprintln!(
        "server pid {} on http://{}, media UDP {}",
        server.child.id(),
        server.http,
        server.udp
    );
    let mut c = RtcClient::connect(server.http, ClientOptions::default()).await?;
    c.until("session.created", Duration::from_secs(10)).await?;
    tokio::time::sleep(Duration::from_secs_f64(a.settle)).await;
    prioritize(&a, server.child.id())?;

    let base = window("baseline", &a, &server, &mut c, false).await?;
    let flood = window("flood", &a, &server, &mut c, true).await?;

    println!("`{}`", command.join(" "));
    println!();
    println!("| window | junk pps (achieved) | RTP inter-arrival deviation from 20 ms p50 / p99 / p99.9 / max ms (client) | frames/s | max gap ms | gaps > 40 ms | server grid lateness p50 / p99 / p99.9 ms (bucket) | grid slots skipped | server CPU | engine thread CPU | kernel drops (server socket) | client + flood CPU | other processes CPU | echo turn |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    print_row(&base);
    print_row(&flood);
    let f = flood.flood;
    println!();
    println!(
        "flood: {} sent ({} pps target, {} source sockets, {} thread(s), {} per sendmmsg), {} send errors, {} shed (sender > 4 ticks behind), sender CPU {:.0} % of {:.1} s",
        f.sent,
        a.pps,
        (a.sources / a.flood_threads).max(1) * a.flood_threads,
        a.flood_threads,
        a.batch,
        f.errors,
        f.shed,
        f.cpu.as_secs_f64() / f.elapsed.as_secs_f64().max(1e-9) * 100.0,
        f.elapsed.as_secs_f64(),
    );
    c.close();
    Ok(())
}
