//! `POST /v1/realtime/calls` (WebRTC signalling), hangup, and the call registry glue.
//! Bad offers are refused before anything is allocated; an admitted call gives its slots back
//! through a guard, whichever way (and on whichever thread) it ends.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Instant;

use axum::body::to_bytes;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use duet_signaling::{call_id, check_offer, multipart, Call, SignalError, MAX_OFFER_BYTES};
use tokio::sync::{mpsc, Semaphore};

use super::admission::{Admitted, Kind};
use super::error::ApiError;
use super::open::open_session;
use super::{AppState, CallEntry, CallRegistry};
use crate::engine::{CallKey, NewCall};
use crate::protocol::SessionPatch;
use crate::session::{EventReceiver, Inbound, MediaSignals, Transport};

/// Largest multipart body (SDP plus a session object).
const MAX_MULTIPART_BYTES: usize = 64 * 1024;
/// Client events queued for a call's session.
const INBOX: usize = 1024;

/// An offer as received: SDP and an optional session object.
struct Offer {
    sdp: String,
    session: Option<String>,
}

fn bad_offer(e: &SignalError) -> ApiError {
    let status = match e {
        SignalError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        _ => StatusCode::BAD_REQUEST,
    };
    ApiError::new(status, e.code(), e.to_string())
}

fn too_large(limit: usize, what: &str) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "request_too_large",
        format!("{what} over {limit} bytes"),
    )
}

/// Reads at most `limit` bytes of body; refuses at once when `Content-Length` says more.
async fn read_body(req: Request, limit: usize, what: &str) -> Result<Vec<u8>, ApiError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large(limit, what));
    }
    let bytes = to_bytes(req.into_body(), limit)
        .await
        .map_err(|_| too_large(limit, what))?;
    Ok(bytes.to_vec())
}

async fn read_offer(req: Request) -> Result<Offer, ApiError> {
    let ctype = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let lower = ctype.to_ascii_lowercase();
    if lower.starts_with("application/sdp") {
        let bytes = read_body(req, MAX_OFFER_BYTES, "SDP offer")
            .await
            .map_err(|_| bad_offer(&SignalError::TooLarge(MAX_OFFER_BYTES + 1)))?;
        let sdp = String::from_utf8(bytes)
            .map_err(|_| bad_offer(&SignalError::Malformed("the offer is not UTF-8".into())))?;
        return Ok(Offer { sdp, session: None });
    }
    if lower.starts_with("multipart/form-data") {
        let body = read_body(req, MAX_MULTIPART_BYTES, "multipart body").await?;
        return parse_multipart(&ctype, &body);
    }
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        "send the offer as application/sdp, or multipart/form-data with parts sdp and session",
    ))
}

fn parse_multipart(ctype: &str, body: &[u8]) -> Result<Offer, ApiError> {
    let parts = multipart::parse(ctype, body, multipart::Limits::default())
        .map_err(|e| ApiError::bad_request("invalid_multipart", e.to_string()))?;
    let (mut sdp, mut session) = (None, None);
    for part in parts {
        let text = String::from_utf8(part.data).map_err(|_| {
            ApiError::bad_request(
                "invalid_multipart",
                format!("part {:?} is not UTF-8", part.name),
            )
        })?;
        match part.name.as_str() {
            "sdp" => sdp = Some(text),
            "session" => session = Some(text),
            _ => {}
        }
    }
    let sdp = sdp.ok_or_else(|| {
        ApiError::bad_request(
            "missing_required_parameter",
            "multipart offer without an sdp part",
        )
    })?;
    Ok(Offer { sdp, session })
}

fn session_patch(json: Option<&str>) -> Result<Option<SessionPatch>, ApiError> {
    let Some(json) = json else { return Ok(None) };
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize::<_, SessionPatch>(de)
        .map(Some)
        .map_err(|e| {
            ApiError::bad_request("invalid_value", format!("invalid session: {}", e.inner()))
                .with_param(format!("session.{}", e.path()))
        })
}

/// Everything a call holds on the server side, released when the engine drops the call
/// (ended, reaped, or lost with a dead engine thread): its registry entry and admission,
/// and the session learns the call ended.
pub struct CallGuard {
    id: String,
    calls: CallRegistry,
    signals: Arc<MediaSignals>,
    _admitted: Admitted,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Ok(mut m) = self.calls.lock() {
            m.remove(&self.id);
        }
        self.signals.ended();
    }
}

/// `POST /v1/realtime/calls`.
pub async fn create(State(state): State<Arc<AppState>>, req: Request) -> Response {
    let started = Instant::now();
    let ip = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.ip());
    let response = match create_call(state, req, ip).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    crate::metrics::METRICS
        .call_setup
        .observe(started.elapsed());
    response
}

/// The stages of a call: read and check the offer, admit, answer on a live engine, open
/// the session, hand the call to the engine.
async fn create_call(
    state: Arc<AppState>,
    req: Request,
    ip: Option<IpAddr>,
) -> Result<Response, ApiError> {
    let offer = read_offer(req).await?;
    let summary = check_offer(&offer.sdp).map_err(|e| bad_offer(&e))?;
    let patch = session_patch(offer.session.as_deref())?;
    state.accepting()?;
    let admitted = state.admissions.admit(Kind::Call, ip)?;
    let (engine_index, engine) = state
        .engines
        .pick()
        .ok_or_else(|| ApiError::not_ready("no media engine thread is running"))?;
    let engine = engine.clone();
    let (call, answer) = Call::accept(&offer.sdp, summary, engine.answer_config(), Instant::now())
        .map_err(|e| bad_offer(&e))?;
    let key = CallKey(
        state
            .next_call_key
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    );
    let signals = Arc::new(MediaSignals::default());
    let (opened, in_tx) = start_session(&state, &engine, key, signals.clone(), patch).await?;
    let id = call_id();
    register(&state, &id, key, engine_index, &in_tx);
    let guard = CallGuard {
        id: id.clone(),
        calls: state.calls.clone(),
        signals: signals.clone(),
        _admitted: admitted,
    };
    tracing::info!(call = %id, codec = ?summary.codec, "call created");
    engine.add(NewCall {
        key,
        id: id.clone(),
        call,
        session: in_tx,
        events: opened,
        signals,
        inbound: Arc::new(Semaphore::new(state.max_inbound_bytes)),
        has_data_channel: summary.has_data_channel,
        guard: Box::new(guard),
    });
    Ok(answered(&id, answer))
}

/// Opens the call's session (seeded with the offer's `session` object) and runs it; returns
/// the queue its events go out on and its inbox.
async fn start_session(
    state: &Arc<AppState>,
    engine: &crate::engine::Engine,
    key: CallKey,
    signals: Arc<MediaSignals>,
    patch: Option<SessionPatch>,
) -> Result<(EventReceiver, mpsc::Sender<Inbound>), ApiError> {
    let transport = Transport::WebRtc {
        sink: engine.sink(key),
        signals,
    };
    let mut opened = open_session(state, transport, None)
        .await
        .map_err(|e| ApiError::unavailable(e.code(), e.to_string()))?;
    if let Some(p) = patch {
        opened
            .session
            .configure(p)
            .map_err(ApiError::from_payload)?;
    }
    let (in_tx, in_rx) = mpsc::channel(INBOX);
    tracing::debug!(session = %opened.session.id(), "call session opened");
    tokio::spawn(crate::session::run(
        opened.session,
        in_rx,
        opened.model_rx,
        state.lifecycle.subscribe(),
    ));
    Ok((opened.events, in_tx))
}

fn register(
    state: &AppState,
    id: &str,
    key: CallKey,
    engine: usize,
    inbox: &mpsc::Sender<Inbound>,
) {
    if let Ok(mut m) = state.calls.lock() {
        m.insert(
            id.to_string(),
            CallEntry {
                key,
                engine,
                session: inbox.clone(),
                sidebands: Arc::new(AtomicUsize::new(0)),
            },
        );
    }
}

/// `201 Created` with the answer SDP and the call's `Location`.
fn answered(id: &str, answer: String) -> Response {
    let mut r = (StatusCode::CREATED, answer).into_response();
    let h: &mut HeaderMap = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/sdp"),
    );
    if let Ok(loc) = HeaderValue::from_str(&format!("/v1/realtime/calls/{id}")) {
        h.insert(header::LOCATION, loc);
    }
    r
}

/// `POST /v1/realtime/calls/{id}/hangup` and `DELETE /v1/realtime/calls/{id}`.
pub async fn hangup(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    let entry = state.calls.lock().ok().and_then(|m| m.get(&id).cloned());
    match entry {
        Some(e) => {
            if let Some(engine) = state.engines.get(e.engine) {
                engine.hangup(e.key);
            }
            StatusCode::OK.into_response()
        }
        None => {
            ApiError::not_found("call_not_found", format!("no active call {id:?}")).into_response()
        }
    }
}
