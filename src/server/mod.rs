//! The HTTP surface (axum): WebSocket sessions, health, readiness, models, the demo page,
//! and bearer-token auth.

mod auth;
mod calls;
mod http;
mod ws;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;

use tokio::sync::mpsc;

use crate::config::ServeArgs;
use crate::engine::{EngineConfig, EnginePool};
use crate::model_loop::ModelLoop;
use crate::session::{Limits, SessionInput};

pub use http::router;

/// Shared server state.
pub struct AppState {
    /// The model loop.
    pub model: ModelLoop,
    /// Required bearer token, if any.
    pub api_key: Option<String>,
    /// Session limits.
    pub limits: Limits,
    /// Open sessions.
    pub sessions: AtomicUsize,
    /// Session cap.
    pub max_sessions: usize,
    /// The WebRTC media engines (one per media thread).
    pub engines: EnginePool,
    /// Live WebRTC calls by id.
    pub calls: Mutex<HashMap<String, CallEntry>>,
    /// Calls admitted (counted from the offer until the call ends).
    pub open_calls: AtomicUsize,
    /// Call cap.
    pub max_calls: usize,
    /// Engine keys.
    pub next_call_key: AtomicU64,
}

/// A live call, as the HTTP layer sees it.
#[derive(Clone)]
pub struct CallEntry {
    /// Engine key.
    pub key: u64,
    /// Which engine of the pool runs it.
    pub engine: usize,
    /// The call's session inbox (sideband connections and hangups).
    pub session: mpsc::Sender<SessionInput>,
}

impl AppState {
    /// State for `args` around a running model loop.
    pub fn new(args: &ServeArgs, model: ModelLoop, engines: EnginePool) -> Arc<Self> {
        let limits = Limits {
            max_session: Duration::from_secs(args.max_session_secs.max(1)),
            ..Limits::default()
        };
        Arc::new(Self {
            model,
            api_key: args.api_key.clone().filter(|k| !k.is_empty()),
            limits,
            sessions: AtomicUsize::new(0),
            max_sessions: args.max_sessions,
            engines,
            calls: Mutex::new(HashMap::new()),
            open_calls: AtomicUsize::new(0),
            max_calls: args.max_calls,
            next_call_key: AtomicU64::new(1),
        })
    }
}

/// A running server (for tests and embedding).
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The WebRTC media sockets (one per media thread).
    pub udp_addrs: Vec<SocketAddr>,
    /// The serving task.
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Loads the model, starts its loop thread, binds, and serves in a background task.
pub async fn start(args: &ServeArgs) -> anyhow::Result<Server> {
    let device = duet_models::moshi::DeviceSpec::parse(&args.device).map_err(anyhow::Error::msg)?;
    let opts = duet_models::LoadOptions {
        model_dir: args.model_dir.clone(),
        moshi: duet_models::moshi::MoshiOptions {
            preset: args.moshi_preset.clone(),
            device,
            max_slots: args.model_slots,
            seed: args.model_seed,
            per_session_depformer: false,
            batched_decode: args.mimi_batched_decode.choice(),
        },
    };
    let name = args.model.clone();
    // Loading may map gigabytes of weights: keep it off the async workers.
    let model = tokio::task::spawn_blocking(move || duet_models::load(&name, &opts)).await??;
    let model = ModelLoop::spawn(model, &args.device)?;
    let threads = args
        .media_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)));
    let engines = EnginePool::start(
        EngineConfig {
            bind: SocketAddr::new(args.udp_host, args.udp_port),
            public_ip: args.public_ip,
            inactivity: Duration::from_secs(args.call_inactivity_secs.max(1)),
        },
        threads,
    )?;
    let udp_addrs = engines.local_addrs();
    let listener = TcpListener::bind((args.host, args.port)).await?;
    let addr = listener.local_addr()?;
    // Realtime events are small and latency-bound: no Nagle delay (it cost ~40 ms per event).
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let app = router(AppState::new(args, model, engines));
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown_signal())
            .await
    });
    Ok(Server {
        addr,
        udp_addrs,
        task,
    })
}

async fn shutdown_signal() {
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
    tracing::info!("shutting down");
}
