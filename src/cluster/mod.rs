//! Cluster mode (`--cluster-redis`): many nodes behind one address, sharing a registry,
//! client secrets and usage through Redis.
//!
//! Each node writes its record (`duet:node:<id>`, expiring after 6 s) every 2 s and reads
//! everyone's in the same round trip; placement and routing use that cached view, so no
//! request and no media packet waits on Redis (secrets and usage aside, which are shared
//! state). Ids name their owning node (`rtc_<node>_…`, `sess_<node>_…`), so a request for
//! a call or session reaches its owner through any node with no lookup. Redis down: live
//! calls go on, each node admits locally, routing by id uses the last view, and what needs
//! the shared state (minting secrets) answers 503 until Redis is back.

mod keys;
pub mod placement;
mod secrets;
mod usage;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

pub use keys::ClusterKeys;
pub use placement::{NodeRecord, Want};
pub use secrets::RedisSecrets;
pub use usage::ClusterUsage;

/// Every heartbeat (record written, view read).
pub const HEARTBEAT: Duration = Duration::from_secs(2);
/// A record's expiry: a node that stopped beating leaves placement by then.
pub const NODE_TTL: Duration = Duration::from_secs(6);
/// Longest a Redis command may take before the node treats Redis as down.
pub(crate) const REDIS_TIMEOUT: Duration = Duration::from_millis(1_000);
/// The set of node ids (records expire on their own; ids whose record is gone are pruned).
const NODES: &str = "duet:nodes";
/// The token nodes prove a forwarded request with (made once per cluster, kept in Redis).
const TOKEN: &str = "duet:cluster:token";

fn node_key(id: &str) -> String {
    format!("duet:node:{id}")
}

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Cluster flags, checked.
#[derive(Clone, Debug)]
pub struct ClusterSettings {
    /// `--cluster-redis` (`redis://` or `rediss://`, optionally with a password).
    pub redis_url: String,
    /// `--node-id`.
    pub node_id: String,
    /// `--node-url`.
    pub node_url: String,
    /// `--public-url`.
    pub public_url: String,
    /// `--public-ip`: the address callers reach the media sockets on.
    pub public_ip: Option<std::net::IpAddr>,
}

impl ClusterSettings {
    /// The cluster flags `args` (`None`: single-node mode, no `--cluster-redis`); `bound`
    /// is the HTTP address the node listens on (the URLs' default), `public_ip` the
    /// address callers reach the media sockets on (`--public-ip`).
    pub fn from_args(
        args: &crate::config::ClusterArgs,
        bound: std::net::SocketAddr,
        public_ip: Option<std::net::IpAddr>,
    ) -> anyhow::Result<Option<Self>> {
        let Some(redis_url) = args.cluster_redis.clone() else {
            return Ok(None);
        };
        redis::Client::open(redis_url.as_str())
            .context("--cluster-redis: not a redis:// or rediss:// URL")?;
        let node_id = match &args.node_id {
            Some(id) => id.clone(),
            None => default_node_id()?,
        };
        if !duet_signaling::is_node_id(&node_id) {
            bail!("--node-id {node_id:?}: use 1 to 32 of a-z, 0-9 and '-' (it is part of every call and session id)");
        }
        let local = || {
            if bound.ip().is_unspecified() {
                bail!("--host {} is a wildcard: give --node-url (the address other nodes reach this one on) and --public-url", bound.ip());
            }
            Ok(format!("http://{bound}"))
        };
        let node_url = match &args.node_url {
            Some(u) => u.trim_end_matches('/').to_string(),
            None => local()?,
        };
        let public_url = match &args.public_url {
            Some(u) => u.trim_end_matches('/').to_string(),
            None => local()?,
        };
        for (flag, url) in [("--node-url", &node_url), ("--public-url", &public_url)] {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                bail!("{flag} {url:?}: give an http:// or https:// base URL");
            }
        }
        if !node_url.starts_with("http://") {
            bail!("--node-url {node_url:?}: nodes forward to each other over plain http:// (an internal address)");
        }
        Ok(Some(Self {
            redis_url,
            node_id,
            node_url,
            public_url,
            public_ip,
        }))
    }
}

/// The host name, lower-cased, as a node id.
fn default_node_id() -> anyhow::Result<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_default();
    let id: String = name
        .trim()
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(32)
        .collect();
    if !duet_signaling::is_node_id(&id) {
        bail!("--node-id is not set and the host name {name:?} does not make one: give --node-id");
    }
    Ok(id)
}

/// What this node knows of the cluster.
#[derive(Default)]
struct View {
    /// Live nodes (the last heartbeat's read), with this node's own placements since.
    nodes: HashMap<String, NodeRecord>,
    /// Every node ever seen, by id: its `--node-url` (routing by id while Redis is down).
    known: HashMap<String, String>,
}

/// A node's handle on the cluster.
pub struct Cluster {
    /// Its flags.
    pub settings: ClusterSettings,
    redis: ConnectionManager,
    view: Mutex<View>,
    /// The forwarding token, once read from Redis.
    token: Mutex<Option<String>>,
    /// Whether the last Redis round trip worked.
    redis_up: AtomicBool,
    /// The HTTP client requests are forwarded with: pooled, a 2 s connect timeout (a node
    /// that does not answer is dropped from the view at once).
    pub(crate) http: crate::http_client::HttpClient,
    /// This process's life of the node (a restarted node is a new one for shared counts).
    pub(crate) boot: String,
    /// The CPU load (bits of an `f64`), read from the system once per heartbeat: placing a
    /// call reads no file.
    load: std::sync::atomic::AtomicU64,
}

impl Cluster {
    /// A handle for `settings`; connects lazily (a node starts with Redis down, too).
    pub fn new(settings: ClusterSettings) -> anyhow::Result<Arc<Self>> {
        // `rediss://`: rustls needs a process-wide provider (one installed already is kept).
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let client = redis::Client::open(settings.redis_url.as_str())?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(REDIS_TIMEOUT))
            .set_response_timeout(Some(REDIS_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let redis = client.get_connection_manager_lazy(config)?;
        Ok(Arc::new(Self {
            settings,
            redis,
            view: Mutex::default(),
            token: Mutex::default(),
            redis_up: AtomicBool::new(false),
            http: crate::http_client::HttpClient::new(crate::http_client::Pool {
                connect_timeout: Duration::from_secs(2),
                idle_timeout: Duration::from_secs(30),
                max_idle_per_host: 64,
                upstream: "node",
            }),
            boot: format!("{:016x}", rand::random::<u64>()),
            load: std::sync::atomic::AtomicU64::new(0),
        }))
    }

    /// This node's id.
    pub fn node_id(&self) -> &str {
        &self.settings.node_id
    }

    /// `<node>:<boot>`: this node's life, as shared counts name it.
    pub fn incarnation(&self) -> String {
        format!("{}:{}", self.node_id(), self.boot)
    }

    /// The incarnations of the live nodes (this one's included).
    pub fn incarnations(&self) -> std::collections::HashSet<String> {
        let mut live: std::collections::HashSet<String> = self
            .nodes()
            .into_iter()
            .map(|n| format!("{}:{}", n.id, n.boot))
            .collect();
        live.insert(self.incarnation());
        live
    }

    /// A connection to Redis (cheap; reconnects by itself).
    pub(crate) fn redis(&self) -> ConnectionManager {
        self.redis.clone()
    }

    /// The CPU load as the last heartbeat read it.
    pub(crate) fn load(&self) -> f64 {
        f64::from_bits(self.load.load(Ordering::Relaxed))
    }

    /// Reads the CPU load again (each heartbeat).
    pub(crate) fn refresh_load(&self) {
        self.load.store(cpu_load().to_bits(), Ordering::Relaxed);
    }

    /// Whether Redis answered the last heartbeat.
    pub fn redis_up(&self) -> bool {
        self.redis_up.load(Ordering::Acquire)
    }

    /// Records a Redis outcome (`false`: down until a command works again).
    pub(crate) fn note_redis(&self, up: bool) {
        let was = self.redis_up.swap(up, Ordering::AcqRel);
        if was != up {
            if up {
                tracing::info!("cluster: Redis reachable");
            } else {
                tracing::warn!("cluster: Redis unreachable; admitting locally, routing by id from the last view");
            }
        }
    }

    /// The token a forwarded request proves itself with (none until Redis was reached).
    pub fn token(&self) -> Option<String> {
        self.token.lock().ok()?.clone()
    }

    /// Whether `presented` is the cluster's forwarding token.
    pub fn is_token(&self, presented: &str) -> bool {
        use subtle::ConstantTimeEq;
        self.token()
            .is_some_and(|t| bool::from(t.as_bytes().ct_eq(presented.as_bytes())))
    }

    /// Where node `id` is reached (`None`: not a live node; while Redis is down, any node
    /// ever seen).
    pub fn node_url(&self, id: &str) -> Option<String> {
        let view = self.view.lock().ok()?;
        if let Some(n) = view.nodes.get(id) {
            return Some(n.node_url.clone());
        }
        if self.redis_up() {
            return None;
        }
        view.known.get(id).cloned()
    }

    /// The nodes that take `want`, best first, this node's live record among them.
    pub fn candidates(&self, own: NodeRecord, want: Want) -> Vec<NodeRecord> {
        let Ok(mut view) = self.view.lock() else {
            return vec![own];
        };
        let nodes: Vec<NodeRecord> = if self.redis_up() {
            view.nodes.insert(own.id.clone(), own);
            view.nodes.values().cloned().collect()
        } else {
            // No shared view: admit locally.
            vec![own]
        };
        let age = (now_ms(), NODE_TTL.as_millis() as u64);
        placement::candidates(&nodes, want, self.node_id(), age)
            .into_iter()
            .cloned()
            .collect()
    }

    /// Counts a `want` placed on node `id` until its next heartbeat.
    pub fn placed(&self, id: &str, want: Want) {
        if let Ok(mut view) = self.view.lock() {
            if let Some(n) = view.nodes.get_mut(id) {
                n.place(want);
            }
        }
    }

    /// Node `id` refused (full, draining) or could not be reached: it takes nothing more
    /// until its next heartbeat says otherwise.
    pub fn refused(&self, id: &str) {
        if let Ok(mut view) = self.view.lock() {
            if let Some(n) = view.nodes.get_mut(id) {
                n.free_slots = 0;
            }
        }
    }

    /// Node `id` could not be reached: gone from the view until it beats again.
    pub fn unreachable(&self, id: &str) {
        if let Ok(mut view) = self.view.lock() {
            view.nodes.remove(id);
        }
    }

    /// The live nodes, as last read (this node's own record as it last wrote it); a record
    /// older than the registry's expiry is gone.
    pub fn nodes(&self) -> Vec<NodeRecord> {
        let Ok(view) = self.view.lock() else {
            return Vec::new();
        };
        let now = now_ms();
        let mut nodes: Vec<NodeRecord> = view
            .nodes
            .values()
            .filter(|n| now.saturating_sub(n.seen_ms) <= NODE_TTL.as_millis() as u64)
            .cloned()
            .collect();
        nodes.sort_by(|a, b| a.id.cmp(&b.id));
        nodes
    }

    /// One heartbeat: writes `own`, reads every node's record. Errors leave the view as
    /// it was (Redis down).
    pub async fn beat(&self, own: &NodeRecord) -> redis::RedisResult<()> {
        let mut con = self.redis();
        let json = serde_json::to_string(own).unwrap_or_default();
        let fresh_token = format!("{:032x}", rand::random::<u128>());
        let (token, ids): (String, Vec<String>) = redis::pipe()
            .cmd("SET")
            .arg(node_key(&own.id))
            .arg(json)
            .arg("PX")
            .arg(NODE_TTL.as_millis() as u64)
            .ignore()
            .cmd("SADD")
            .arg(NODES)
            .arg(&own.id)
            .ignore()
            .cmd("SET")
            .arg(TOKEN)
            .arg(fresh_token)
            .arg("NX")
            .ignore()
            .cmd("GET")
            .arg(TOKEN)
            .cmd("SMEMBERS")
            .arg(NODES)
            .query_async(&mut con)
            .await?;
        let keys: Vec<String> = ids.iter().map(|id| node_key(id)).collect();
        let records: Vec<Option<String>> = if keys.is_empty() {
            Vec::new()
        } else {
            redis::cmd("MGET").arg(&keys).query_async(&mut con).await?
        };
        let mut nodes = HashMap::new();
        let mut gone = Vec::new();
        for (id, record) in ids.iter().zip(records) {
            match record.and_then(|r| serde_json::from_str::<NodeRecord>(&r).ok()) {
                Some(n) if n.id == *id => {
                    nodes.insert(n.id.clone(), n);
                }
                _ => gone.push(id.clone()),
            }
        }
        if !gone.is_empty() {
            let _: redis::RedisResult<()> = redis::cmd("SREM")
                .arg(NODES)
                .arg(&gone)
                .query_async(&mut con)
                .await;
        }
        if let Ok(mut t) = self.token.lock() {
            *t = Some(token);
        }
        if let Ok(mut view) = self.view.lock() {
            for n in nodes.values() {
                view.known.insert(n.id.clone(), n.node_url.clone());
            }
            view.nodes = nodes;
        }
        Ok(())
    }

    /// Takes this node out of the registry (the end of a drain).
    pub async fn leave(&self) {
        let mut con = self.redis();
        let _: redis::RedisResult<()> = redis::pipe()
            .cmd("DEL")
            .arg(node_key(self.node_id()))
            .ignore()
            .cmd("SREM")
            .arg(NODES)
            .arg(self.node_id())
            .ignore()
            .query_async(&mut con)
            .await;
    }
}

/// The 1-minute load average per core (0 where the system does not say).
fn cpu_load() -> f64 {
    let avg = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    avg / cores as f64
}
