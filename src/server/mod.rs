//! The HTTP surface (axum on our own hyper accept loop): WebSocket sessions, WebRTC
//! signalling, health, readiness, models, metrics, the demo page, auth, admission and the
//! graceful drain.

mod admission;
mod audio;
mod auth;
mod backends;
mod calls;

mod chat;
mod chat_local;
mod cluster_routes;
mod directory;
mod heartbeat;
mod http;
mod listen;
mod offer;
mod open;
mod pool;
pub(crate) mod secrets;
mod sip_calls;
mod tls;
mod ws;
mod ws_proxy;

use std::future::Future;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::ServeArgs;
use crate::engine::{EngineConfig, EnginePool};
use crate::model_loop::ModelLoop;
use crate::session::{Lifecycle, Limits};

pub use crate::calls::{CallEntry, CallMedia, CallRegistry};
pub use crate::error::ApiError;
use crate::error::Code;
pub use crate::stores::secrets::SecretStore;
pub use crate::stores::usage::{LocalUsage, UsageLedger};
pub use crate::stores::{SharedHold, SharedKeys};
pub use admission::{Admissions, Admitted, Kind, MAX_SIDEBANDS};
pub use directory::{LocalDirectory, SessionDirectory};
pub use http::router;
pub use listen::{BodyTimeout, HttpLimits};
pub use pool::{LiveSession, LiveSessions};
pub use secrets::{Credential, LocalSecrets};

/// WebSocket keep-alive and timeouts.
#[derive(Clone, Copy, Debug)]
pub struct WsLimits {
    /// Ping period.
    pub ping: Duration,
    /// Longest time without an inbound frame.
    pub idle: Duration,
    /// Longest time one write may block.
    pub write: Duration,
}

/// Shared server state, in four groups (what each subsystem needs is one of them) and the
/// two things every route reads: whether the server drains, and the cluster.
pub struct AppState {
    /// Live calls, WebRTC and phone, and the media engines that carry them.
    pub calls: Calls,
    /// Who may use the server, and what each credential used.
    pub credentials: Credentials,
    /// The models behind sessions and `/v1/chat/completions`.
    pub backends: Backends,
    /// What sessions may hold and where they are found.
    pub sessions: Sessions,
    /// Running or draining; sessions watch it.
    pub lifecycle: watch::Sender<Lifecycle>,
    /// Cluster mode (`--cluster-redis`): the registry, placement and routing by id.
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
}

/// Live calls: WebRTC calls and accepted phone calls by id (the sideband connections,
/// `PATCH` and hangups find them here; each call's guard removes it when it ends), the media
/// engines that run WebRTC calls and the keys they know them by, and SIP's own view of
/// phone calls from ringing on. Reach the registry through [`Calls::insert`],
/// [`Calls::get`] and [`Calls::remove`]; its lock is never held outside them.
pub struct Calls {
    /// Live calls by id (shared with the calls' guards and with SIP).
    pub registry: CallRegistry,
    /// The WebRTC media engines (one per media thread).
    pub engines: EnginePool,
    /// The next engine key.
    pub next_key: AtomicU64,
    /// Phone calls (`--sip-listen`), pending and live: made here and handed to SIP when it
    /// starts (`None`: no SIP).
    pub sip: Option<Arc<crate::sip::SipCalls>>,
}

impl Calls {
    /// Registers call `id`.
    pub fn insert(&self, id: &str, entry: CallEntry) {
        self.registry.insert(id, entry);
    }

    /// Call `id`, if it is live.
    pub fn get(&self, id: &str) -> Option<CallEntry> {
        self.registry.get(id)
    }

    /// Forgets call `id`.
    pub fn remove(&self, id: &str) {
        self.registry.remove(id);
    }

    /// Whether no call is registered.
    pub fn is_empty(&self) -> bool {
        self.registry.is_empty()
    }
}

/// Who may use the server and what they used: the server's API key, the minted client
/// secrets (in this process, or shared through the cluster's Redis), the usage ledger per
/// credential, whether the demo page may mint secrets, and the browser origins allowed.
pub struct Credentials {
    /// Required bearer token, if any.
    pub api_key: Option<String>,
    /// Minted client secrets.
    pub secrets: Arc<dyn SecretStore>,
    /// Usage per credential since start.
    pub usage: Arc<dyn UsageLedger>,
    /// `POST /demo/client_secret` mints secrets for the demo page (`--demo-mint-secrets`).
    pub demo_mint_secrets: bool,
    /// Browser origins allowed (empty: any).
    pub origins: Vec<String>,
}

/// The models: the duplex model's loop (every session takes a slot of it), speech
/// understanding (transcriber, VAD) and the LLM of the cascade and `/v1/chat/completions`.
pub struct Backends {
    /// The model loop.
    pub model: ModelLoop,
    /// Speech understanding: the transcriber and the VAD model, when configured.
    pub speech: Speech,
    /// The LLM of `--llm-url` or `--llm-model-dir`.
    pub llm: Option<crate::llm::LlmBackend>,
}

/// What sessions may hold and where they are found: admission (slots, per key, per address,
/// and how long a new one may wait at capacity), the running sessions and the directory of
/// resumable ones, the memory budget, each session's limits, and its connection's
/// (WebSocket timeouts, inbound bytes, the sockets open now).
pub struct Sessions {
    /// What clients hold (sessions, calls, per IP) and the caps.
    pub admissions: Arc<Admissions>,
    /// How long a new call or session may wait for a slot at capacity.
    pub admission_wait: Duration,
    /// Every running session, for the pool view.
    pub live: Arc<LiveSessions>,
    /// Opted-in sessions by id, for resumes.
    pub directory: Arc<dyn SessionDirectory>,
    /// The server-wide memory account (`--memory-budget-mib`).
    pub memory: Arc<crate::memory::MemoryAccount>,
    /// Session limits.
    pub limits: Limits,
    /// WebSocket keep-alive and timeouts.
    pub ws: WsLimits,
    /// Bytes of client events one connection may have waiting for its session.
    pub max_inbound_bytes: usize,
    /// WebSocket connections carrying a session or a sideband now (the drain lets their
    /// close frames leave).
    pub websockets: Arc<AtomicUsize>,
}

/// The speech-understanding models beside the duplex model.
#[derive(Clone, Default)]
pub struct Speech {
    /// Speech to text: the transcription loop (`--transcription-model-dir`) or a remote
    /// server (`--stt-url`).
    pub transcriber: Option<crate::stt::Stt>,
    /// Silero VAD weights (`--vad-model-dir`).
    pub vad: Option<duet_models::silero::SileroVad>,
    /// The turn loop (`--turn-model-dir`), which judges pauses under `semantic_vad`.
    pub turn: Option<crate::turn_loop::TurnLoop>,
    /// The voice (`--tts-model-dir` or `--tts-url`): the cascade's, and `/v1/audio/speech`'s.
    pub voice: Option<crate::tts::Voice>,
}

/// The per-session limits the flags set.
fn session_limits(args: &ServeArgs) -> Limits {
    Limits {
        max_session: Duration::from_secs(args.limits.max_session_secs),
        max_outbound_bytes: args.limits.max_outbound_mib << 20,
        max_item_samples: args.limits.max_item_audio_secs * u64::from(duet_media::SESSION_RATE),
        max_conversation_text: args.limits.max_conversation_text_mib << 20,
        max_instructions: args.limits.max_instructions_kib << 10,
        max_tools: args.limits.max_tools_kib << 10,
        idle: Duration::from_secs(args.limits.session_idle_secs),
        disconnect_grace: Duration::from_secs(args.limits.disconnect_grace_secs),
        journal_bytes: args.limits.resume_journal_bytes,
        journal_age: Duration::from_secs(args.limits.resume_journal_secs),
        expiry_warning: Duration::from_secs(args.limits.expiry_warning_secs),
        vad_min_speech_ms: args.speech.vad_min_speech_ms,
        speculative_ms: args.speech.speculative_start_ms,
        ..Limits::default()
    }
}

/// The sessions' admission, registries, memory and limits.
fn sessions(args: &ServeArgs, memory: Arc<crate::memory::MemoryAccount>) -> Sessions {
    Sessions {
        admissions: Admissions::with_caps(admission::Caps {
            sessions: args.limits.max_sessions,
            calls: args.media.max_calls,
            per_ip: args.limits.max_per_ip,
            per_key: args.limits.max_sessions_per_key,
        }),
        admission_wait: Duration::from_millis(args.limits.admission_wait_ms),
        live: Arc::default(),
        directory: Arc::new(LocalDirectory::default()),
        memory,
        limits: session_limits(args),
        ws: WsLimits {
            ping: Duration::from_secs(args.http.ws_ping_secs),
            idle: Duration::from_secs(args.http.ws_idle_secs),
            write: Duration::from_secs(args.http.ws_write_timeout_secs),
        },
        max_inbound_bytes: args.limits.max_inbound_mib.max(16) << 20,
        websockets: Arc::default(),
    }
}

/// Where usage is counted: in Redis in cluster mode, else in this process.
fn usage_ledger(cluster: Option<&Arc<crate::cluster::Cluster>>) -> Arc<dyn UsageLedger> {
    match cluster {
        Some(c) => Arc::new(crate::cluster::ClusterUsage::new(
            c.clone(),
            secrets::unix_now(),
        )),
        None => Arc::new(LocalUsage::new(secrets::unix_now())),
    }
}

impl AppState {
    /// A new connection's budget for client events waiting for its session: its own cap
    /// (`--max-inbound-mib`) and a meter on the memory budget (reserved when there is room).
    pub fn inbound_budget(&self) -> crate::session::InboundBudget {
        let meter = crate::memory::Meter::open_or_unreserved(
            &self.sessions.memory,
            crate::memory::CONNECTION_RESERVE,
        );
        crate::session::InboundBudget::new(self.sessions.max_inbound_bytes, meter)
    }

    /// The event queue of a connection that joins a running session (a resume, a sideband):
    /// `--max-outbound-mib`, charged to a meter of its own.
    pub fn event_queue(&self) -> (crate::session::EventSender, crate::session::EventReceiver) {
        let meter = crate::memory::Meter::open_or_unreserved(
            &self.sessions.memory,
            crate::memory::CONNECTION_RESERVE,
        );
        crate::session::metered_queue(self.sessions.limits.max_outbound_bytes, Some(meter))
    }

    /// The cluster node id that call and session ids name (`None`: single-node mode).
    pub fn node_id(&self) -> Option<&str> {
        self.cluster.as_ref().map(|c| c.node_id())
    }

    /// State for `args` around a running model loop and media engines (and, in cluster
    /// mode, the cluster handle: secrets and usage are then shared through it).
    pub fn new(
        args: &ServeArgs,
        (model, engines): (ModelLoop, EnginePool),
        speech: Speech,
        llm: Option<crate::llm::LlmBackend>,
        cluster: Option<Arc<crate::cluster::Cluster>>,
    ) -> Arc<Self> {
        let memory = crate::memory::MemoryAccount::new(budget_bytes(args));
        Arc::new(Self {
            calls: Calls {
                registry: CallRegistry::default(),
                engines,
                next_key: AtomicU64::new(1),
                sip: args.sip.sip_listen.map(|_| Arc::default()),
            },
            credentials: Credentials {
                api_key: args.auth.api_key.clone(),
                secrets: secret_store(args, &memory, cluster.as_ref()),
                usage: usage_ledger(cluster.as_ref()),
                demo_mint_secrets: args.auth.demo_mint_secrets,
                origins: args.http.cors_origins.clone(),
            },
            backends: Backends { model, speech, llm },
            sessions: sessions(args, memory.clone()),
            lifecycle: watch::channel(Lifecycle::Running).0,
            cluster,
        })
    }

    /// Whether the server is shutting down.
    pub fn draining(&self) -> bool {
        *self.lifecycle.borrow() != Lifecycle::Running
    }

    /// Whether new sessions are taken: the model is warm and its thread runs, and the server
    /// is not draining. (Calls also need a live media engine: the pool picks only those.)
    pub fn accepting(&self) -> Result<(), ApiError> {
        if self.draining() {
            return Err(ApiError::draining());
        }
        if !self.backends.model.is_alive() {
            return Err(ApiError::new(Code::NotReady, "the model thread stopped"));
        }
        if !self.backends.model.is_ready() {
            return Err(ApiError::new(
                Code::NotReady,
                "the model is still warming up",
            ));
        }
        Ok(())
    }

    /// `/ready`: accepting, and no media engine thread died (a dead one means the process
    /// should be replaced, though calls go on on the others).
    pub fn ready(&self) -> Result<(), ApiError> {
        self.accepting()?;
        if let Some(i) = self.calls.engines.dead() {
            return Err(ApiError::new(
                Code::NotReady,
                format!("media engine thread {i} stopped"),
            ));
        }
        if let Some(crate::llm::LlmBackend::Embedded(e)) = &self.backends.llm {
            if !e.threads.is_alive() {
                return Err(ApiError::new(
                    Code::NotReady,
                    "the embedded LLM's thread stopped",
                ));
            }
        }
        if let Some(t) = &self.backends.speech.transcriber {
            // Sessions still open without it (their transcriptions fail), but the process
            // should be replaced: it no longer does what it was configured to.
            if !t.is_alive() {
                return Err(ApiError::new(
                    Code::NotReady,
                    "the transcription thread stopped",
                ));
            }
            if !t.is_ready() {
                return Err(ApiError::new(
                    Code::NotReady,
                    "the transcriber is still warming up",
                ));
            }
        }
        Ok(())
    }
}

/// Client secrets: in this process, or in the cluster's Redis.
fn secret_store(
    args: &ServeArgs,
    memory: &Arc<crate::memory::MemoryAccount>,
    cluster: Option<&Arc<crate::cluster::Cluster>>,
) -> Arc<dyn SecretStore> {
    let caps = crate::stores::secrets::SecretCaps {
        secrets: args.auth.max_client_secrets,
        demo: args.auth.max_demo_secrets,
        demo_per_ip: args.auth.max_demo_secrets_per_ip,
    };
    match cluster {
        Some(c) => Arc::new(crate::cluster::RedisSecrets::new(c.clone(), caps)),
        None => Arc::new(LocalSecrets::with_caps(caps).with_memory(memory.clone())),
    }
}

/// A running server (for tests and embedding).
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The WebRTC media sockets (one per media thread).
    pub udp_addrs: Vec<SocketAddr>,
    /// The shared state.
    pub state: Arc<AppState>,
    /// The serving task (ends when the drain is over).
    pub task: tokio::task::JoinHandle<()>,
    stop: watch::Sender<bool>,
    /// Phone calls (`--sip-listen`): stops answering SIP when dropped.
    pub sip: Option<crate::sip::Sip>,
    /// Cluster mode: the registry heartbeat (stopped when the server is dropped).
    heartbeat: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(h) = &self.heartbeat {
            h.abort();
        }
    }
}

impl Server {
    /// Drains: `/ready` and every new session or call answer 503 `server_draining` at
    /// once, live sessions get a `server_draining` error and are closed after `grace`
    /// (WebSocket 1001; calls with DTLS close and RTCP BYE). Returns when every session
    /// (attached or detached: each holds its admission) and call ended, or at the deadline,
    /// plus a moment for the WebSocket close frames and BYEs to leave.
    pub async fn drain(&self, grace: Duration) {
        // In a cluster, the registry hears first: other nodes stop placing here.
        if let Some(cluster) = &self.state.cluster {
            let mut own = heartbeat::own_record(&self.state, &cluster.settings);
            own.draining = true;
            let beat = tokio::time::timeout(Duration::from_secs(1), cluster.beat(&own)).await;
            if !matches!(beat, Ok(Ok(()))) {
                tracing::warn!("draining: the cluster registry could not be told (Redis down); other nodes see it when this node's record expires");
            }
        }
        let deadline = tokio::time::Instant::now() + grace;
        self.state.lifecycle.send_replace(Lifecycle::Draining {
            deadline: deadline.into_std(),
        });
        tracing::info!(grace_secs = grace.as_secs(), "draining");
        let a = &self.state.sessions.admissions;
        while (a.sessions() > 0 || a.calls() > 0) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Closes (WebSocket close frames, BYE and close_notify) leave within a few ticks.
        let flush = tokio::time::Instant::now() + Duration::from_millis(500);
        let sockets = &self.state.sessions.websockets;
        let open = || {
            a.sessions() > 0
                || a.calls() > 0
                || sockets.load(std::sync::atomic::Ordering::Acquire) > 0
        };
        while open() && tokio::time::Instant::now() < flush {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if let Some(cluster) = &self.state.cluster {
            // What was counted since the last heartbeat, then out of the registry.
            let last = async {
                self.state.credentials.usage.flush().await;
                cluster.leave().await;
            };
            let _ = tokio::time::timeout(Duration::from_secs(1), last).await;
        }
        let _ = self.stop.send(true);
    }
}

/// Whether `--tls-cert` and `--tls-key` can be served (for `check-config`).
pub fn check_tls(cert: &std::path::Path, key: &std::path::Path) -> anyhow::Result<()> {
    tls::TlsConfig::load(cert, key).map(drop)
}

/// Refuses configurations that would serve without meaning to: an empty key, or no key on
/// an address other machines can reach (unless `--insecure-no-auth`).
pub fn check_auth(args: &ServeArgs) -> anyhow::Result<()> {
    match args.auth.api_key.as_deref() {
        Some(k) if k.trim().is_empty() => {
            bail!("--api-key / DUET_API_KEY is set but empty: set a key, or unset it to serve without one on loopback")
        }
        Some(_) => Ok(()),
        None if args.http.host.is_loopback() => Ok(()),
        None if args.auth.insecure_no_auth => {
            tracing::warn!(host = %args.http.host, "serving WITHOUT an API key on a non-loopback address (--insecure-no-auth): anyone who reaches it can open sessions");
            Ok(())
        }
        None => bail!(
            "--host {} is reachable from other machines but no --api-key is set; set DUET_API_KEY, or pass --insecure-no-auth to serve without auth",
            args.http.host
        ),
    }
}

/// The sockets a server serves on: HTTP/WebSocket, and one UDP socket per media thread.
/// Tests and embedders may bind their own; [`bind`] binds what the flags say.
pub struct Sockets {
    /// HTTP and WebSocket.
    pub http: TcpListener,
    /// WebRTC media, one per media engine thread.
    pub udp: Vec<UdpSocket>,
}

/// Binds `--host`/`--port` and `--udp-host`/`--udp-port` (one media socket per media thread:
/// consecutive ports, or free ports for port 0).
pub async fn bind(args: &ServeArgs) -> anyhow::Result<Sockets> {
    let threads = args
        .media
        .media_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)));
    let udp = crate::engine::bind_sockets(
        SocketAddr::new(args.media.udp_host, args.media.udp_port),
        threads,
    )?;
    let http = TcpListener::bind((args.http.host, args.http.port)).await?;
    Ok(Sockets { http, udp })
}

/// Binds what the flags say and starts serving in a background task (see [`start_on`]).
pub async fn start(args: &ServeArgs) -> anyhow::Result<Server> {
    check_auth(args)?;
    let sockets = bind(args).await?;
    start_on(args, sockets).await
}

/// Loads the model, starts its loop thread and the media engines on `sockets`, and serves in
/// a background task until [`Server::drain`].
pub async fn start_on(args: &ServeArgs, sockets: Sockets) -> anyhow::Result<Server> {
    check_auth(args)?;
    crate::cpu_share::configure(args.backend.bulk_nice, backends::math_pool_share(args));
    let llm = backends::llm_backend(args).await?;
    let voice = backends::start_voice(args).await?;
    let model = backends::start_model(args, llm.clone(), voice.clone()).await?;
    let mut speech = backends::start_speech(args).await?;
    speech.voice = voice;
    let engine_cfg = EngineConfig {
        public_ip: args.media.public_ip,
        inactivity: Duration::from_secs(args.media.call_inactivity_secs),
        connect_timeout: Duration::from_secs(args.media.call_connect_secs),
    };
    let engines = EnginePool::start(&engine_cfg, sockets.udp)?;
    let udp_addrs = engines.local_addrs();
    let listener = sockets.http;
    let addr = listener.local_addr()?;
    let cluster =
        crate::cluster::ClusterSettings::from_args(&args.cluster, addr, args.media.public_ip)?
            .map(crate::cluster::Cluster::new)
            .transpose()?;
    let state = AppState::new(args, (model, engines), speech, llm, cluster);
    if let Some(c) = &state.cluster {
        tracing::info!(node = c.node_id(), node_url = %c.settings.node_url, "cluster mode: registering in Redis");
        let keys = crate::cluster::ClusterKeys::new(c.clone());
        state.sessions.admissions.share_keys(Arc::new(keys));
    }
    let heartbeat = heartbeat::spawn_heartbeat(&state);
    let sip = match crate::sip::SipSettings::from_args(&args.sip)? {
        Some(settings) => {
            let calls = state.calls.sip.clone().unwrap_or_default();
            Some(crate::sip::Sip::start(settings, Arc::new(state.clone()), calls).await?)
        }
        None => None,
    };
    let (stop, task) = serve_http(args, listener, &state)?;
    log_memory_budget(args);
    Ok(Server {
        addr,
        udp_addrs,
        state,
        task,
        stop,
        sip,
        heartbeat,
    })
}

/// Serves the HTTP API on `listener` (TLS when configured) until the returned sender says
/// stop (only a drain does; dropping the task's handle does not).
#[allow(clippy::type_complexity)]
fn serve_http(
    args: &ServeArgs,
    listener: tokio::net::TcpListener,
    state: &Arc<AppState>,
) -> anyhow::Result<(watch::Sender<bool>, tokio::task::JoinHandle<()>)> {
    let limits = HttpLimits {
        max_connections: args.http.max_connections,
        head_timeout: Duration::from_secs(args.http.http_head_timeout_secs),
        idle_timeout: Duration::from_secs(args.http.http_idle_secs),
        body_timeout: Duration::from_secs(args.http.http_body_timeout_secs),
    };
    let tls = tls_config(args)?;
    let (stop, mut stopped) = watch::channel(false);
    let app = router(state.clone());
    let task = tokio::spawn(async move {
        let stop = async move {
            if stopped.wait_for(|s| *s).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        listen::serve(listener, app, limits, tls, stop).await;
    });
    Ok((stop, task))
}

/// Serves on `sockets` until `shutdown` resolves, then drains (`--drain-secs`) and returns,
/// at the latest 2 s after the drain deadline whatever is still open.
pub async fn run(
    args: &ServeArgs,
    sockets: Sockets,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let mut server = start_on(args, sockets).await?;
    let scheme = if args.http.tls_cert.is_some() {
        "https"
    } else {
        "http"
    };
    tracing::info!(model = %args.backend.model, "duet listening on {scheme}://{}", server.addr);
    println!("duet listening on {scheme}://{}", server.addr);
    tokio::select! {
        () = shutdown => {}
        r = &mut server.task => return Ok(r?),
    }
    let grace = Duration::from_secs(args.drain_secs);
    if tokio::time::timeout(grace + Duration::from_secs(2), server.drain(grace))
        .await
        .is_err()
    {
        tracing::warn!("drain did not finish in time; exiting");
    }
    tracing::info!("drained; exiting");
    Ok(())
}

/// `--memory-budget-mib` in bytes (its default: [`crate::memory::default_budget`]).
fn budget_bytes(args: &ServeArgs) -> u64 {
    args.limits
        .memory_budget_mib
        .map_or_else(crate::memory::default_budget, |m| m << 20)
}

/// Logs the enforced budget and the worst case of the configured caps, and warns when the
/// worst case exceeds the machine.
fn log_memory_budget(args: &ServeArgs) {
    let limit = budget_bytes(args);
    tracing::info!(
        budget_mib = limit >> 20,
        "memory budget enforced: {} MiB (--memory-budget-mib{})",
        limit >> 20,
        if args.limits.memory_budget_mib.is_some() {
            ""
        } else {
            " default: 3/4 of this machine's memory"
        }
    );
    let budget = crate::memory::Budget::of(args);
    match crate::memory::Budget::machine() {
        Some(machine) if budget.total > machine => tracing::warn!(
            machine_mib = machine >> 20,
            "memory budget: {budget}, more than this machine has: lower --max-sessions/--max-calls or the per-session limits (docs/configuration.md: Memory budget)"
        ),
        _ => tracing::info!("memory budget: {budget}"),
    }
}

/// The HTTPS settings of `--tls-cert`/`--tls-key` (reloaded on SIGHUP), if given.
fn tls_config(args: &ServeArgs) -> anyhow::Result<Option<tls::TlsConfig>> {
    let (Some(cert), Some(key)) = (&args.http.tls_cert, &args.http.tls_key) else {
        return Ok(None);
    };
    let tls = tls::TlsConfig::load(cert, key)?;
    tls.reload_on_sighup();
    tracing::info!(cert = %cert.display(), "serving HTTPS; SIGHUP reloads the certificate");
    Ok(Some(tls))
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutdown requested");
}
