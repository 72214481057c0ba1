//! `GET /v1/pool` (server key): the model's slots (free, active, reserved by detached
//! sessions), each media engine thread with its UDP port and calls, and every live session
//! with its transport, state, age, credential and model slot: enough to see a stuck slot at
//! a glance.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{Query, State};

use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::secrets::{credential, Cred, Credential};
use super::AppState;
use crate::error::{ApiError, Code};
use crate::session::SessionStatus;

/// A running session, as the pool view lists it.
pub struct LiveSession {
    /// When it opened.
    pub created: Instant,
    /// The credential it was opened with (`server` or `cred_…`).
    pub credential: String,
    /// Its transport and state, kept current by the session.
    pub status: Arc<SessionStatus>,
}

/// Every running session, by id.
#[derive(Default)]
pub struct LiveSessions(Mutex<HashMap<String, LiveSession>>);

impl LiveSessions {
    /// Lists session `id` until [`LiveSessions::remove`].
    pub fn insert(&self, id: &str, s: LiveSession) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(id.to_string(), s);
        }
    }

    /// The session ended.
    pub fn remove(&self, id: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(id);
        }
    }

    fn view(&self) -> (Vec<Value>, usize) {
        let Ok(m) = self.0.lock() else {
            return (Vec::new(), 0);
        };
        let mut detached = 0;
        let mut rows: Vec<(Instant, Value)> = m
            .iter()
            .map(|(id, s)| {
                detached += usize::from(s.status.is_detached());
                let row = json!({
                    "id": id,
                    "transport": s.status.transport(),
                    "state": s.status.state(),
                    "age_seconds": (s.created.elapsed().as_secs_f64() * 10.0).round() / 10.0,
                    "credential": s.credential,
                    "model_slot": s.status.slot(),
                });
                (s.created, row)
            })
            .collect();
        rows.sort_by_key(|(t, _)| *t);
        (rows.into_iter().map(|(_, v)| v).collect(), detached)
    }
}

/// `?scope=cluster` of `/v1/pool` and `/v1/usage`.
#[derive(Debug, serde::Deserialize)]
pub struct ScopeQuery {
    /// `cluster`: every node's (cluster mode); anything else, this node's.
    pub scope: Option<String>,
}

impl ScopeQuery {
    fn cluster(&self) -> bool {
        self.scope.as_deref() == Some("cluster")
    }
}

/// Refuses every credential but the server key (`what` needs it).
fn server_key_only(cred: &Cred, what: &str) -> Result<(), ApiError> {
    match credential(cred) {
        Credential::Server => Ok(()),
        _ => Err(ApiError::new(
            Code::InvalidApiKey,
            format!("{what} needs the server's API key"),
        )),
    }
}

/// `?scope=cluster` on a single node.
fn not_clustered() -> ApiError {
    ApiError::new(
        Code::InvalidValue,
        "scope=cluster needs cluster mode (--cluster-redis)",
    )
    .with_param("scope")
}

/// `GET /v1/pool?scope=cluster`: every live node's record, as this node last read them.
fn cluster_pool(state: &AppState) -> Response {
    let Some(cluster) = &state.cluster else {
        return not_clustered().into_response();
    };
    let nodes = cluster.nodes();
    let free: usize = nodes
        .iter()
        .filter(|n| !n.draining)
        .map(|n| n.free_slots)
        .sum();
    Json(json!({
        "object": "duet.cluster",
        "node": cluster.node_id(),
        "redis": if cluster.redis_up() { "up" } else { "down" },
        "free_slots": free,
        "nodes": nodes,
    }))
    .into_response()
}

/// `GET /v1/pool`.
pub async fn pool(
    State(state): State<Arc<AppState>>,
    cred: Cred,
    Query(q): Query<ScopeQuery>,
) -> Response {
    if let Err(e) = server_key_only(&cred, "the pool view") {
        return e.into_response();
    }
    if q.cluster() {
        return cluster_pool(&state);
    }
    let info = state.backends.model.info();
    let used = state.backends.model.active_sessions();
    let (sessions, reserved) = state.sessions.live.view();
    let engines: Vec<Value> = state
        .calls
        .engines
        .engines()
        .iter()
        .enumerate()
        .map(|(i, e)| {
            json!({
                "index": i,
                "udp_port": e.local_addr().port(),
                "calls": e.active_calls(),
                "alive": e.is_alive(),
            })
        })
        .collect();
    Json(json!({
        "object": "duet.pool",
        "model": {
            "name": info.name,
            "slots": {
                "total": info.max_slots,
                "active": used.saturating_sub(reserved),
                "reserved": reserved,
                "free": info.max_slots.saturating_sub(used),
            },
        },
        "engines": engines,
        "sessions": sessions,
    }))
    .into_response()
}

/// `GET /v1/usage` (`?scope=cluster`: every node's, from Redis).
pub async fn usage(
    State(state): State<Arc<AppState>>,
    cred: Cred,
    Query(q): Query<ScopeQuery>,
) -> Response {
    if let Err(e) = server_key_only(&cred, "usage") {
        return e.into_response();
    }
    if !q.cluster() {
        return Json(state.credentials.usage.report()).into_response();
    }
    if state.cluster.is_none() {
        return not_clustered().into_response();
    }
    match state.credentials.usage.cluster_report().await {
        Ok(report) => Json(report).into_response(),
        Err(_) => super::secrets::store_down().into_response(),
    }
}
