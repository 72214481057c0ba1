//! Ephemeral client secrets (`POST /v1/realtime/client_secrets`) and the credential every
//! API request carries: the server key, or a secret a backend minted for one user. A secret
//! opens realtime sessions and calls (several, until it expires; a session outlives it) with
//! the session configuration it was minted with, and reaches only what it opened.
//!
//! Secrets are 192 random bits (`ek_` + URL-safe base64); the store keeps their SHA-256
//! only, behind a small trait so that a shared store can replace the in-process map.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::AppState;
use crate::protocol::{ids, SessionConfig, SessionPatch};

/// What a secret may live, in seconds (OpenAI's range and default).
const MIN_SECS: u64 = 10;
const MAX_SECS: u64 = 7_200;
const DEFAULT_SECS: u64 = 600;
/// Largest `client_secrets` request body.
const MAX_BODY: usize = 32 * 1024;

/// A minted secret, as the store keeps it.
#[derive(Clone, Debug)]
pub struct SecretRecord {
    /// A non-reversible id for logs, usage and scoping (`cred_…`, from the digest).
    pub id: String,
    /// SHA-256 of the secret.
    digest: [u8; 32],
    /// Unix seconds when it stops opening sessions.
    pub expires_at: u64,
    /// The starting configuration of every session it opens.
    pub session: Option<SessionPatch>,
}

/// Where secrets are kept (by digest).
pub trait SecretStore: Send + Sync {
    /// Keeps `record`; `false` when the store is full of live secrets.
    fn insert(&self, record: SecretRecord, now: u64) -> bool;
    /// The live secret with this digest.
    fn get(&self, digest: &[u8; 32], now: u64) -> Option<SecretRecord>;
}

/// The secrets of one process, at most `max` live at once (expired ones are dropped as new
/// ones come).
pub struct LocalSecrets {
    map: Mutex<HashMap<[u8; 32], SecretRecord>>,
    max: usize,
}

impl LocalSecrets {
    /// A store for at most `max` live secrets.
    pub fn new(max: usize) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            max,
        }
    }
}

impl SecretStore for LocalSecrets {
    fn insert(&self, record: SecretRecord, now: u64) -> bool {
        let Ok(mut m) = self.map.lock() else {
            return false;
        };
        if m.len() >= self.max {
            m.retain(|_, r| r.expires_at > now);
        }
        if m.len() >= self.max {
            return false;
        }
        m.insert(record.digest, record);
        true
    }

    fn get(&self, digest: &[u8; 32], now: u64) -> Option<SecretRecord> {
        let m = self.map.lock().ok()?;
        let r = m.get(digest)?;
        let same: bool = r.digest.ct_eq(digest).into();
        (same && r.expires_at > now).then(|| r.clone())
    }
}

/// Who a request is.
#[derive(Clone, Debug)]
pub enum Credential {
    /// The server key (or a server without one): everything.
    Server,
    /// A client secret: realtime sessions and calls, and only its own.
    Secret(Arc<SecretRecord>),
}

impl Credential {
    /// The id sessions and calls opened with this credential are owned by.
    pub fn owner(&self) -> Option<String> {
        match self {
            Credential::Server => None,
            Credential::Secret(r) => Some(r.id.clone()),
        }
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
        }
    }

    /// The session configuration a secret was minted with.
    pub fn session(&self) -> Option<SessionPatch> {
        match self {
            Credential::Server => None,
            Credential::Secret(r) => r.session.clone(),
        }
    }
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
pub fn lookup(store: &dyn SecretStore, presented: &str) -> Option<SecretRecord> {
    presented
        .starts_with("ek_")
        .then(|| store.get(&digest(presented), unix_now()))
        .flatten()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    expires_after: Option<ExpiresAfter>,
    session: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpiresAfter {
    anchor: Anchor,
    seconds: Option<u64>,
}

#[derive(Deserialize)]
enum Anchor {
    #[serde(rename = "created_at")]
    CreatedAt,
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
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
            "minting a client secret needs the server's API key",
        ));
    }
    let bytes = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                format!("body over {MAX_BODY} bytes"),
            )
        })?;
    let body: CreateBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        CreateBody {
            expires_after: None,
            session: None,
        }
    } else {
        let de = &mut serde_json::Deserializer::from_slice(&bytes);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let message = e.inner().to_string();
            let mut err =
                ApiError::bad_request("invalid_value", format!("invalid body: {message}"));
            if path != "." {
                err = err.with_param(path);
            }
            err
        })?
    };
    let secs = body
        .expires_after
        .map(|e| {
            let Anchor::CreatedAt = e.anchor;
            e.seconds.unwrap_or(DEFAULT_SECS)
        })
        .unwrap_or(DEFAULT_SECS);
    if !(MIN_SECS..=MAX_SECS).contains(&secs) {
        return Err(ApiError::bad_request(
            "invalid_value",
            format!("expires_after.seconds must be between {MIN_SECS} and {MAX_SECS}, got {secs}"),
        )
        .with_param("expires_after.seconds"));
    }
    let patch = body.session.map(session_patch).transpose()?;
    issue(state, secs, patch)
}

/// `POST /demo/client_secret`, only with `--demo-mint-secrets`: mints a default secret (600
/// s, the default session) for the demo page, which must never hold the server key. Anyone
/// who can reach the server can then open sessions: for demos only.
pub async fn demo_mint(State(state): State<Arc<AppState>>) -> Response {
    if !state.demo_mint_secrets {
        return ApiError::not_found(
            "not_found",
            "start the server with --demo-mint-secrets to mint secrets for the demo page",
        )
        .into_response();
    }
    match issue(&state, DEFAULT_SECS, None) {
        Ok(body) => (StatusCode::OK, Json(body)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Mints a secret living `secs` with the session configuration `patch`.
fn issue(state: &AppState, secs: u64, patch: Option<SessionPatch>) -> Result<Value, ApiError> {
    let now = unix_now();
    let expires_at = now + secs;
    // The effective session a connection opened with the secret starts from.
    let mut session = SessionConfig::new(
        ids::session_id(),
        state.model.info().name.clone(),
        now + state.limits.max_session.as_secs(),
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
    };
    tracing::info!(credential = %record.id, expires_at, "client secret minted");
    if !state.secrets.insert(record, now) {
        return Err(ApiError::unavailable(
            "server_busy",
            "too many live client secrets; mint fewer or shorter-lived ones",
        ));
    }
    Ok(serde_json::json!({
        "value": value,
        "expires_at": expires_at,
        "session": session,
    }))
}

/// The `session` of a mint request: a realtime or a transcription session object.
fn session_patch(v: Value) -> Result<SessionPatch, ApiError> {
    match v.get("type").and_then(Value::as_str) {
        Some("realtime" | "transcription") | None => {}
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_value",
                "session.type must be \"realtime\" or \"transcription\"",
            )
            .with_param("session.type"))
        }
    }
    serde_path_to_error::deserialize::<_, SessionPatch>(v).map_err(|e| {
        ApiError::bad_request("invalid_value", format!("invalid session: {}", e.inner()))
            .with_param(format!("session.{}", e.path()))
    })
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
