//! The media engine: up to one thread per core (at most 4), each owning one UDP socket
//! (consecutive ports from `--udp-port`, or free ports) shared by all of its calls; no task or
//! socket per call. Each paces outbound audio on an absolute 20 ms grid (skipping slots after
//! a stall, never bursting), sends silence when nothing plays, feeds str0m its datagrams and
//! time, and reaps calls that died (DTLS close, ICE consent, never connected, our own
//! inactivity timeout, hangup). A panic in one call's work ends that call; a dead engine
//! thread is never picked again, its calls' slots are released, and `/ready` reports it.

mod live;
mod net;
mod thread;

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use duet_signaling::{AnswerConfig, Call};
use tokio::sync::mpsc;

use crate::engine::net::Waker;
use crate::session::{EventReceiver, Inbound, MediaSignals, MediaSink, Pcm, PcmPool, PlaybackTag};

/// Receive buffer asked for each media socket (the kernel grants up to `net.core.rmem_max`).
const RECV_BUFFER_BYTES: usize = 4 << 20;

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Address to advertise in candidates (NAT 1:1); defaults to the bound one.
    pub public_ip: Option<IpAddr>,
    /// A call that receives nothing for this long is ended.
    pub inactivity: Duration,
    /// A call not connected (ICE + DTLS) this long after it was added is ended.
    pub connect_timeout: Duration,
}

/// A call handed to the engine.
pub struct NewCall {
    /// Engine-local key.
    pub key: CallKey,
    /// `rtc_…`, for logs.
    pub id: String,
    /// The answered call.
    pub call: Call,
    /// The session's inbox (client events, caller audio).
    pub session: mpsc::Sender<Inbound>,
    /// The call as the session's attachment (its input is tagged with it).
    pub attachment: crate::session::AttachmentId,
    /// The session's events, written to `oai-events`.
    pub events: EventReceiver,
    /// Playback reports back to the session (never lost).
    pub signals: Arc<MediaSignals>,
    /// Bytes of client events the call may have waiting for its session.
    pub inbound: crate::session::InboundBudget,
    /// Whether the offer negotiated a data channel (else events are discarded).
    pub has_data_channel: bool,
    /// Released when the engine drops the call, however it ends (slots, registry, the
    /// session's "call ended").
    pub guard: Box<dyn Send>,
}

/// A call's key in its engine (the engine's own id; the HTTP layer maps `rtc_…` ids to it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CallKey(pub u64);

/// A fault to inject (tests of panic containment only).
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// The engine thread itself panics (outside any call's guard).
    PanicThread,
    /// The call with this key panics in its media work at the next tick.
    PanicCall(CallKey),
}

enum Command {
    Add(Box<NewCall>),
    Hangup(CallKey),
    Play {
        key: CallKey,
        tag: u64,
        pcm: Pcm,
        /// When the session handed it over.
        at: std::time::Instant,
    },
    Finish {
        key: CallKey,
        tag: u64,
    },
    Clear(CallKey),
    Pause {
        key: CallKey,
        paused: bool,
    },
    Renegotiate {
        key: CallKey,
        offer: String,
        summary: duet_signaling::OfferSummary,
        reply: tokio::sync::oneshot::Sender<Result<String, duet_signaling::SignalError>>,
    },
    Fault(Fault),
}

/// Handle to the engine thread.
#[derive(Clone)]
pub struct Engine {
    tx: std_mpsc::Sender<Command>,
    waker: Arc<Waker>,
    local: SocketAddr,
    answer: AnswerConfig,
    calls: Arc<AtomicUsize>,
    alive: Arc<AtomicBool>,
}

impl Engine {
    /// Starts the engine thread on `socket`; answers use `base`'s certificate.
    pub fn start(
        socket: UdpSocket,
        cfg: &EngineConfig,
        base: &AnswerConfig,
        index: usize,
    ) -> anyhow::Result<Self> {
        socket.set_nonblocking(true)?;
        let rcvbuf = net::set_recv_buffer(&socket, RECV_BUFFER_BYTES).unwrap_or(0);
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
        let alive = Arc::new(AtomicBool::new(true));
        let t = thread::EngineThread::new(socket, local, rx, waker.clone(), cfg, calls.clone());
        let flag = thread::AliveFlag(alive.clone());
        std::thread::Builder::new()
            .name(format!("media-engine-{index}"))
            .spawn(move || t.run(flag))?;
        tracing::info!(%local, %advertised, rcvbuf, "media engine listening (UDP)");
        Ok(Self {
            tx,
            waker,
            local,
            answer,
            calls,
            alive,
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

    /// Whether the engine thread runs.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    fn send(&self, cmd: Command) {
        // A dead engine drops the command: a call in it is released by its guard.
        let _ = self.tx.send(cmd);
        self.waker.wake();
    }

    /// Hands a call to the engine (a dead engine drops it, releasing its guard).
    pub fn add(&self, call: NewCall) {
        self.send(Command::Add(Box::new(call)));
    }

    /// Ends a call.
    pub fn hangup(&self, key: CallKey) {
        self.send(Command::Hangup(key));
    }

    /// Answers a new offer (an ICE restart) on call `key`; the answer SDP, or why not (a
    /// call that failed half-way is hung up).
    pub async fn renegotiate(
        &self,
        key: CallKey,
        offer: String,
        summary: duet_signaling::OfferSummary,
    ) -> Result<String, duet_signaling::SignalError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.send(Command::Renegotiate {
            key,
            offer,
            summary,
            reply,
        });
        answer.await.unwrap_or_else(|_| {
            Err(duet_signaling::SignalError::Rejected(
                "the call's media engine is gone".into(),
            ))
        })
    }

    /// Injects a fault (panic-containment tests).
    #[doc(hidden)]
    pub fn inject_fault(&self, fault: Fault) {
        self.send(Command::Fault(fault));
    }

    /// The media sink a session uses for call `key`.
    pub fn sink(&self, key: CallKey) -> Box<dyn MediaSink> {
        Box::new(EngineSink {
            tx: self.tx.clone(),
            waker: self.waker.clone(),
            key,
            pool: PcmPool::new(),
        })
    }
}

struct EngineSink {
    tx: std_mpsc::Sender<Command>,
    waker: Arc<Waker>,
    key: CallKey,
    /// Buffers for the answer audio, back here once the engine queued their samples.
    pool: Arc<PcmPool>,
}

impl MediaSink for EngineSink {
    fn play(&self, tag: PlaybackTag, pcm: &[f32]) {
        let mut buf = self.pool.take(pcm.len());
        buf.samples_mut().extend_from_slice(pcm);
        let _ = self.tx.send(Command::Play {
            key: self.key,
            tag: tag.0,
            pcm: buf,
            at: std::time::Instant::now(),
        });
        // Encoded as it arrives (ahead of its slot), not at the tick.
        self.waker.wake();
    }

    fn finish(&self, tag: PlaybackTag) {
        let _ = self.tx.send(Command::Finish {
            key: self.key,
            tag: tag.0,
        });
    }

    fn clear(&self) {
        let _ = self.tx.send(Command::Clear(self.key));
        // Barge-in latency: purge now, not at the next datagram or tick.
        self.waker.wake();
    }

    fn pause(&self, paused: bool) {
        let _ = self.tx.send(Command::Pause {
            key: self.key,
            paused,
        });
        self.waker.wake();
    }
}

/// Binds `threads` media sockets on `bind`'s address: ports `bind.port()`, `+1`, … (or free
/// ports when it is 0).
pub fn bind_sockets(bind: SocketAddr, threads: usize) -> std::io::Result<Vec<UdpSocket>> {
    (0..threads.max(1))
        .map(|i| {
            let port = match bind.port() {
                0 => 0,
                p => p.saturating_add(i as u16),
            };
            UdpSocket::bind(SocketAddr::new(bind.ip(), port))
        })
        .collect()
}

/// One engine per core: each owns a socket and a share of the calls, so a tick's per-call
/// work is split across cores.
#[derive(Clone)]
pub struct EnginePool {
    engines: Vec<Engine>,
}

impl EnginePool {
    /// Starts one engine per socket, sharing one DTLS certificate.
    pub fn start(cfg: &EngineConfig, sockets: Vec<UdpSocket>) -> anyhow::Result<Self> {
        let base = AnswerConfig::new(Vec::new())?;
        let engines = sockets
            .into_iter()
            .enumerate()
            .map(|(i, socket)| Engine::start(socket, cfg, &base, i))
            .collect::<anyhow::Result<Vec<_>>>()?;
        anyhow::ensure!(!engines.is_empty(), "no media socket to serve on");
        Ok(Self { engines })
    }

    /// The live engine with the fewest calls, and its index; `None` when every engine died.
    pub fn pick(&self) -> Option<(usize, &Engine)> {
        self.engines
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_alive())
            .min_by_key(|(_, e)| e.active_calls())
    }

    /// Engine `i`.
    /// Every engine, in order.
    pub fn engines(&self) -> &[Engine] {
        &self.engines
    }

    /// Engine `i`.
    pub fn get(&self, i: usize) -> Option<&Engine> {
        self.engines.get(i)
    }

    /// The index of an engine whose thread stopped, if any.
    pub fn dead(&self) -> Option<usize> {
        self.engines.iter().position(|e| !e.is_alive())
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
