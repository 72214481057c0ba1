//! The media engine: one thread that owns one UDP socket shared by every WebRTC call and a
//! map of calls; no task or socket per call. It paces outbound audio on an absolute 20 ms
//! grid (skipping slots after a stall, never bursting), sends silence when nothing plays,
//! feeds str0m its datagrams and time, and reaps calls that died (DTLS close, ICE consent,
//! our own inactivity timeout, hangup).

mod pipeline;
mod thread;

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use duet_signaling::{AnswerConfig, Call};
use tokio::sync::mpsc;

use crate::net::Waker;
use crate::session::{MediaSink, Outbound, SessionInput};

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Socket address to bind.
    pub bind: SocketAddr,
    /// Address to advertise in candidates (NAT 1:1); defaults to the bound one.
    pub public_ip: Option<IpAddr>,
    /// A call that receives nothing for this long is ended.
    pub inactivity: Duration,
}

/// A call handed to the engine.
pub struct NewCall {
    /// Engine-local key.
    pub key: u64,
    /// `rtc_…`, for logs.
    pub id: String,
    /// The answered call.
    pub call: Call,
    /// The session's inbox.
    pub session: mpsc::Sender<SessionInput>,
    /// The session's events, written to `oai-events`.
    pub events: mpsc::Receiver<Outbound>,
    /// Whether the offer negotiated a data channel (else events are discarded).
    pub has_data_channel: bool,
    /// Runs once when the call ends, for any reason.
    pub on_end: Box<dyn FnOnce() + Send>,
}

enum Command {
    Add(Box<NewCall>),
    Hangup(u64),
    Play { key: u64, tag: u64, pcm: Vec<f32> },
    Finish { key: u64, tag: u64 },
    Clear(u64),
}

/// Handle to the engine thread.
#[derive(Clone)]
pub struct Engine {
    tx: std_mpsc::Sender<Command>,
    waker: Arc<Waker>,
    local: SocketAddr,
    answer: AnswerConfig,
    calls: Arc<AtomicUsize>,
}

impl Engine {
    /// Binds the socket and starts the engine thread; answers use `base`'s certificate.
    pub fn start(cfg: EngineConfig, base: &AnswerConfig, index: usize) -> anyhow::Result<Self> {
        let socket = UdpSocket::bind(cfg.bind)?;
        socket.set_nonblocking(true)?;
        let local = socket.local_addr()?;
        let advertised = match (cfg.public_ip, local.ip()) {
            (Some(ip), _) => SocketAddr::new(ip, local.port()),
            (None, ip) if ip.is_unspecified() => {
                anyhow::bail!("--udp-host {ip} is a wildcard: set --public-ip to the address callers should reach")
            }
            (None, _) => local,
        };
        let answer = base.for_candidates(vec![advertised]);
        let (tx, rx) = std_mpsc::channel();
        let waker = Arc::new(Waker::new()?);
        let calls = Arc::new(AtomicUsize::new(0));

        let t = thread::EngineThread::new(
            socket,
            local,
            rx,
            waker.clone(),
            cfg.inactivity,
            calls.clone(),
        );
        std::thread::Builder::new()
            .name(format!("media-engine-{index}"))
            .spawn(move || t.run())?;
        tracing::info!(%local, %advertised, "media engine listening (UDP)");
        Ok(Self {
            tx,
            waker,
            local,
            answer,
            calls,
        })
    }

    /// The bound UDP address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Certificate and candidates for answers.
    pub fn answer_config(&self) -> &AnswerConfig {
        &self.answer
    }

    /// Calls the engine is running.
    pub fn active_calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }

    /// Hands a call to the engine.
    pub fn add(&self, call: NewCall) {
        let _ = self.tx.send(Command::Add(Box::new(call)));
        self.waker.wake();
    }

    /// Ends a call.
    pub fn hangup(&self, key: u64) {
        let _ = self.tx.send(Command::Hangup(key));
        self.waker.wake();
    }

    /// The media sink a session uses for call `key`.
    pub fn sink(&self, key: u64) -> Box<dyn MediaSink> {
        Box::new(Sink {
            tx: self.tx.clone(),
            waker: self.waker.clone(),
            key,
        })
    }
}

struct Sink {
    tx: std_mpsc::Sender<Command>,
    waker: Arc<Waker>,
    key: u64,
}

impl MediaSink for Sink {
    fn play(&self, tag: u64, pcm: Vec<f32>) {
        let _ = self.tx.send(Command::Play {
            key: self.key,
            tag,
            pcm,
        });
    }

    fn finish(&self, tag: u64) {
        let _ = self.tx.send(Command::Finish { key: self.key, tag });
    }

    fn clear(&self) {
        let _ = self.tx.send(Command::Clear(self.key));
        // Barge-in latency: purge now, not at the next datagram or tick.
        self.waker.wake();
    }
}

/// One engine per core: each owns a socket (ports `--udp-port`, `+1`, … or free ports) and
/// a share of the calls, so a tick's per-call work is split across cores.
#[derive(Clone)]
pub struct EnginePool {
    engines: Vec<Engine>,
}

impl EnginePool {
    /// Starts `threads` engines sharing one DTLS certificate.
    pub fn start(cfg: EngineConfig, threads: usize) -> anyhow::Result<Self> {
        let base = AnswerConfig::new(Vec::new())?;
        let mut engines = Vec::with_capacity(threads.max(1));
        for i in 0..threads.max(1) {
            let port = if cfg.bind.port() == 0 {
                0
            } else {
                cfg.bind.port().saturating_add(i as u16)
            };
            let c = EngineConfig {
                bind: SocketAddr::new(cfg.bind.ip(), port),
                ..cfg.clone()
            };
            engines.push(Engine::start(c, &base, i)?);
        }
        Ok(Self { engines })
    }

    /// The engine with the fewest calls, and its index.
    pub fn pick(&self) -> (usize, &Engine) {
        let (i, e) = self
            .engines
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.active_calls())
            .unwrap_or((0, &self.engines[0]));
        (i, e)
    }

    /// Engine `i`.
    pub fn get(&self, i: usize) -> Option<&Engine> {
        self.engines.get(i)
    }

    /// Calls across all engines.
    pub fn active_calls(&self) -> usize {
        self.engines.iter().map(Engine::active_calls).sum()
    }

    /// The bound UDP addresses.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.engines.iter().map(Engine::local_addr).collect()
    }
}
