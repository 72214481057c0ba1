//! Ephemeral client secrets (`POST /v1/realtime/client_secrets`) and the credential every
//! API request carries: the server key, or a secret a backend minted for one user. A secret
//! opens realtime sessions and calls (several, until it expires; a session outlives it) with
//! the session configuration it was minted with, and reaches only what it opened.
//!
//! Secrets are 192 random bits (`ek_` + URL-safe base64); the store keeps their SHA-256
//! only, behind a small trait so that a shared store can replace the in-process map.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AppState;
use crate::error::{ApiError, Code};
use crate::protocol::secrets::{MintRequest, DEFAULT_SECS};
use crate::protocol::{ids, SessionConfig, SessionPatch};
use crate::stores::secrets::{SecretCaps, SecretRecord, SecretStore, StoreFull};
use crate::stores::{StoreDown, StoreFuture};

/// Largest `client_secrets` request body.
const MAX_BODY: usize = 32 * 1024;

/// The secrets of one process, in two pools so that anonymous demo mints never take the
/// server key's places (expired ones are dropped as new ones come).
pub struct LocalSecrets {
    api: Mutex<HashMap<[u8; 32], Kept>>,
    demo: Mutex<HashMap<[u8; 32], Kept>>,
    caps: SecretCaps,
    /// The memory budget every kept record is charged to (none: unmetered).
    memory: Option<Arc<crate::memory::MemoryAccount>>,
}

/// A kept record, and its bytes on the memory budget.
struct Kept {
    record: SecretRecord,
    _charge: Option<crate::memory::Charge>,
}

impl LocalSecrets {
    /// A store for at most `max` live secrets, and as many demo secrets (4 per address).
    pub fn new(max: usize) -> Self {
        Self::with_caps(SecretCaps {
            secrets: max,
            demo: max,
            demo_per_ip: 4,
        })
    }

    /// A store with every cap.
    pub fn with_caps(caps: SecretCaps) -> Self {
        Self {
            api: Mutex::new(HashMap::new()),
            demo: Mutex::new(HashMap::new()),
            caps,
            memory: None,
        }
    }

    /// Charges every kept record to `memory`.
    pub fn with_memory(mut self, memory: Arc<crate::memory::MemoryAccount>) -> Self {
        self.memory = Some(memory);
        self
    }
}

/// Keeps `record` in `m` unless `max` live ones are there already (or, for a demo secret,
/// `per_ip` from its address).
fn insert_capped(
    m: &mut HashMap<[u8; 32], Kept>,
    record: SecretRecord,
    now: u64,
    (max, per_ip): (usize, usize),
    memory: Option<&Arc<crate::memory::MemoryAccount>>,
) -> Result<(), StoreFull> {
    let full = if record.demo.is_some() {
        StoreFull::Demo
    } else {
        StoreFull::Secrets
    };
    if m.len() >= max || record.demo.is_some() {
        m.retain(|_, k| k.record.expires_at > now);
    }
    if m.len() >= max {
        return Err(full);
    }
    if let Some(ip) = record.demo {
        if m.values().filter(|k| k.record.demo == Some(ip)).count() >= per_ip {
            return Err(StoreFull::DemoPerIp);
        }
    }
    // Each record is charged as the largest one (its session object at the most a mint
    // takes); expired records give theirs back before a mint is refused for it.
    let charge = match memory {
        Some(account) => {
            let charged = account.charge(crate::memory::SECRET).or_else(|_| {
                m.retain(|_, k| k.record.expires_at > now);
                account.charge(crate::memory::SECRET)
            });
            Some(charged.map_err(StoreFull::Memory)?)
        }
        None => None,
    };
    m.insert(
        record.digest,
        Kept {
            record,
            _charge: charge,
        },
    );
    Ok(())
}

impl SecretStore for LocalSecrets {
    fn put(&self, record: SecretRecord, now: u64) -> StoreFuture<'_, Result<(), StoreFull>> {
        let r = self.insert(record, now);
        Box::pin(std::future::ready(r))
    }

    fn find(
        &self,
        digest: [u8; 32],
        now: u64,
    ) -> StoreFuture<'_, Result<Option<SecretRecord>, StoreDown>> {
        let r = self.get(&digest, now);
        Box::pin(std::future::ready(Ok(r)))
    }
}

impl LocalSecrets {
    /// Keeps `record`, or says which cap of live secrets it would pass.
    pub fn insert(&self, record: SecretRecord, now: u64) -> Result<(), StoreFull> {
        let (pool, max, per_ip) = match record.demo {
            Some(_) => (&self.demo, self.caps.demo, self.caps.demo_per_ip),
            None => (&self.api, self.caps.secrets, usize::MAX),
        };
        let Ok(mut m) = pool.lock() else {
            return Err(StoreFull::Secrets);
        };
        insert_capped(&mut m, record, now, (max, per_ip), self.memory.as_ref())
    }

    /// The live secret with this digest.
    pub fn get(&self, digest: &[u8; 32], now: u64) -> Option<SecretRecord> {
        let found = self.api.lock().ok()?.get(digest).map(|k| k.record.clone());
        let found = found.or_else(|| self.demo.lock().ok()?.get(digest).map(|k| k.record.clone()));
        found.filter(|r| {
            let same: bool = r.digest.ct_eq(digest).into();
            same && r.expires_at > now
        })
    }
}

/// Who a request is.
#[derive(Clone, Debug)]
pub enum Credential {
    /// The server key (or a server without one): everything.
    Server,
    /// A client secret: realtime sessions and calls, and only its own.
    Secret(Arc<SecretRecord>),
    /// A client secret that is no longer live (expired since it opened a session), on a
    /// resume route: it may only resume, and the session's resume token alone proves the
    /// session.
    ResumeOnly,
}

impl Credential {
    /// The id sessions and calls opened with this credential are owned by.
    pub fn owner(&self) -> Option<String> {
        match self {
            Credential::Server | Credential::ResumeOnly => None,
            Credential::Secret(r) => Some(r.id.clone()),
        }
    }

    /// Whether this credential may only resume a session (its token proves the session).
    pub fn resume_only(&self) -> bool {
        matches!(self, Credential::ResumeOnly)
    }

    /// Its name in usage and the pool view: `server`, or the secret's `cred_…` id.
    pub fn usage_id(&self) -> String {
        self.owner().unwrap_or_else(|| "server".into())
    }

    /// Whether this credential may reach what `owner` opened (the server key reaches all).
    pub fn reaches(&self, owner: Option<&str>) -> bool {
        match self {
            Credential::Server => true,
            Credential::Secret(r) => owner == Some(r.id.as_str()),
            Credential::ResumeOnly => false,
        }
    }

    /// The session configuration a secret was minted with.
    pub fn session(&self) -> Option<SessionPatch> {
        match self {
            Credential::Server | Credential::ResumeOnly => None,
            Credential::Secret(r) => r.session.clone(),
        }
    }
}

/// The answer to an expired client secret that tries more than a resume.
pub fn resume_only_refused() -> ApiError {
    ApiError::new(
        Code::InvalidApiKey,
        "the client secret is expired, unknown or malformed (an expired secret may only resume the sessions it opened, with their resume token)",
    )
}

/// The request's credential, as the auth layer found it (every protected route has one).
pub type Cred = Option<Extension<Credential>>;

/// The credential, the server's when the auth layer set none.
pub fn credential(c: &Cred) -> Credential {
    c.as_ref()
        .map_or(Credential::Server, |Extension(c)| c.clone())
}

/// SHA-256 of a secret.
pub fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Unix seconds now.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The live secret `presented` names, if it is one.
pub async fn lookup(
    store: &dyn SecretStore,
    presented: &str,
) -> Result<Option<SecretRecord>, StoreDown> {
    if !presented.starts_with("ek_") {
        return Ok(None);
    }
    store.find(digest(presented), unix_now()).await
}

/// `POST /v1/realtime/client_secrets` (server key only): mints a secret.
pub async fn create(State(state): State<Arc<AppState>>, cred: Cred, req: Request) -> Response {
    match mint(&state, &credential(&cred), req).await {
        Ok(body) => (StatusCode::OK, Json(body)).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn mint(state: &AppState, cred: &Credential, req: Request) -> Result<Value, ApiError> {
    if !matches!(cred, Credential::Server) {
        return Err(ApiError::new(
            Code::InvalidApiKey,
            "minting a client secret needs the server's API key",
        ));
    }
    let bytes = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|e| ApiError::body(&e, MAX_BODY, "body"))?;
    let request = MintRequest::parse(&bytes).map_err(ApiError::from_payload)?;
    let patch = request.session.map(|p| (p, request.session_json));
    issue(state, request.seconds, patch, None).await
}

/// `POST /demo/client_secret`, only with `--demo-mint-secrets`: mints a default secret (600
/// s, the default session) for the demo page, which must never hold the server key. Anyone
/// who can reach the server can then open sessions: for demos only.
pub async fn demo_mint(
    State(state): State<Arc<AppState>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
) -> Response {
    if !state.credentials.demo_mint_secrets {
        return ApiError::new(
            Code::NotFound,
            "start the server with --demo-mint-secrets to mint secrets for the demo page",
        )
        .into_response();
    }
    // Anonymous mints have a pool of their own, and each address a share of it.
    let ip = peer.map_or(IpAddr::from([0, 0, 0, 0]), |Extension(ConnectInfo(a))| {
        a.ip()
    });
    match issue(&state, DEFAULT_SECS, None, Some(ip)).await {
        Ok(body) => (StatusCode::OK, Json(body)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Mints a secret living `secs` with the session configuration `patch` (`demo`: for the
/// demo page, anonymously, by this address).
async fn issue(
    state: &AppState,
    secs: u64,
    patch: Option<(SessionPatch, Option<Value>)>,
    demo: Option<IpAddr>,
) -> Result<Value, ApiError> {
    let (patch, session_json) = patch.map_or((None, None), |(p, j)| (Some(p), j));
    let now = unix_now();
    let expires_at = now + secs;
    // The effective session a connection opened with the secret starts from.
    let mut session = SessionConfig::new(
        ids::session_id(),
        state.backends.model.info().name.clone(),
        now + state.sessions.limits.max_session.as_secs(),
    );
    if let Some(p) = patch.clone() {
        session.apply(p).map_err(|e| {
            let param = e.param.clone().map(|p| format!("session.{p}"));
            let mut err = ApiError::from_payload(e);
            if let Some(p) = param {
                err = err.with_param(p);
            }
            err
        })?;
    }
    let (value, d) = new_secret();
    let record = SecretRecord {
        id: credential_id(&d),
        digest: d,
        expires_at,
        session: patch,
        session_json,
        demo,
    };
    let id = record.id.clone();
    state
        .credentials
        .secrets
        .put(record, now)
        .await
        .map_err(store_full)?;
    tracing::info!(credential = %id, expires_at, demo = demo.is_some(), "client secret minted");
    Ok(serde_json::json!({
        "value": value,
        "expires_at": expires_at,
        "session": session,
    }))
}

/// A full store as an HTTP error.
fn store_full(full: StoreFull) -> ApiError {
    match full {
        StoreFull::Secrets => ApiError::new(
            Code::ServerBusy,
            "too many live client secrets (--max-client-secrets); mint fewer or shorter-lived ones",
        ),
        StoreFull::Demo => ApiError::new(
            Code::ServerBusy,
            "too many live demo secrets (--max-demo-secrets); retry when some expire",
        ),
        StoreFull::DemoPerIp => ApiError::new(
            Code::TooManyDemoSecretsFromIp,
            "this address holds the most live demo secrets one may (--max-demo-secrets-per-ip); retry when one expires",
        )
        .retry(crate::error::RETRY_AFTER_SECS),
        StoreFull::Memory(e) => ApiError::new(Code::ServerMemoryExhausted, e.to_string()),
        StoreFull::Unavailable => store_down(),
    }
}

/// The shared store is down, as an HTTP error.
pub fn store_down() -> ApiError {
    ApiError::new(
        Code::ClusterStoreUnavailable,
        "the cluster's shared store (Redis) is unreachable: client secrets can be neither minted nor checked now; retry shortly (the server key still works)",
    )
}

/// A fresh secret and its digest.
fn new_secret() -> (String, [u8; 32]) {
    let mut bytes = [0u8; 24];
    rand::Rng::fill(&mut rand::rng(), &mut bytes);
    let value = format!(
        "ek_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let d = digest(&value);
    (value, d)
}

/// `cred_` + 16 hex digits of a hash of the digest: names a secret without revealing it.
fn credential_id(digest: &[u8; 32]) -> String {
    let h: [u8; 32] = Sha256::digest(digest).into();
    let hex: String = h[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("cred_{hex}")
}

#[cfg(test)]
#[path = "secrets_tests.rs"]
mod tests;
