//! `POST /v1/realtime/calls` (WebRTC signalling), hangup, and the call registry glue.
//! Bad offers are refused before anything is allocated.

// The request helpers return ready-made error responses; they are built once per request.
#![allow(clippy::result_large_err)]

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::body::{to_bytes, Body};
use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use duet_signaling::{call_id, check_offer, Call, SignalError, MAX_OFFER_BYTES};
use tokio::sync::mpsc;

use super::http::error_response;
use super::{AppState, CallEntry};
use crate::engine::NewCall;
use crate::protocol::{ErrorPayload, SessionPatch};
use crate::session::{Session, SessionParams, Transport};

/// Largest multipart body (SDP plus a session object).
const MAX_MULTIPART_BYTES: usize = 64 * 1024;
/// Client events queued for a call's session.
const INBOX: usize = 1024;
/// Seconds a refused caller should wait before retrying.
const RETRY_AFTER_SECS: &str = "5";

/// An offer as received: SDP and an optional session object.
struct Offer {
    sdp: String,
    session: Option<String>,
}

fn bad_offer(e: &SignalError) -> Response {
    error_response(StatusCode::BAD_REQUEST, e.code(), e.to_string())
}

async fn read_offer(req: Request) -> Result<Offer, Response> {
    let ctype = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if ctype.starts_with("application/sdp") {
        let bytes = to_bytes(req.into_body(), MAX_OFFER_BYTES + 1)
            .await
            .map_err(|_| bad_offer(&SignalError::TooLarge(MAX_OFFER_BYTES + 1)))?;
        let sdp = String::from_utf8(bytes.to_vec())
            .map_err(|_| bad_offer(&SignalError::Malformed("the offer is not UTF-8".into())))?;
        return Ok(Offer { sdp, session: None });
    }
    if ctype.starts_with("multipart/form-data") {
        return read_multipart(req).await;
    }
    Err(error_response(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        "send the offer as application/sdp, or multipart/form-data with parts sdp and session",
    ))
}

async fn read_multipart(req: Request) -> Result<Offer, Response> {
    let (parts, body) = req.into_parts();
    let limited = Body::from(to_bytes(body, MAX_MULTIPART_BYTES).await.map_err(|_| {
        error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            format!("multipart body over {MAX_MULTIPART_BYTES} bytes"),
        )
    })?);
    let mut form = Multipart::from_request(Request::from_parts(parts, limited), &())
        .await
        .map_err(|e| error_response(StatusCode::BAD_REQUEST, "invalid_multipart", e.body_text()))?;
    let (mut sdp, mut session) = (None, None);
    loop {
        let field = form.next_field().await.map_err(|e| {
            error_response(StatusCode::BAD_REQUEST, "invalid_multipart", e.body_text())
        })?;
        let Some(field) = field else { break };
        let name = field.name().unwrap_or_default().to_string();
        let text = field.text().await.map_err(|e| {
            error_response(StatusCode::BAD_REQUEST, "invalid_multipart", e.body_text())
        })?;
        match name.as_str() {
            "sdp" => sdp = Some(text),
            "session" => session = Some(text),
            _ => {}
        }
    }
    let sdp = sdp.ok_or_else(|| {
        error_response(
            StatusCode::BAD_REQUEST,
            "missing_required_parameter",
            "multipart offer without an sdp part",
        )
    })?;
    Ok(Offer { sdp, session })
}

fn session_patch(json: Option<&str>) -> Result<Option<SessionPatch>, Response> {
    let Some(json) = json else { return Ok(None) };
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize::<_, SessionPatch>(de).map(Some).map_err(|e| {
        let body = serde_json::json!({"error": {"message": format!("invalid session: {}", e.inner()), "type": "invalid_request_error", "code": "invalid_value", "param": format!("session.{}", e.path())}});
        (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
    })
}

fn payload_response(e: ErrorPayload) -> Response {
    let body = serde_json::json!({"error": {"message": e.message, "type": "invalid_request_error", "code": e.code, "param": e.param}});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// Releases an admitted call slot if the call never reaches the engine.
struct Admission(Arc<AppState>, bool);

impl Drop for Admission {
    fn drop(&mut self) {
        if !self.1 {
            self.0.open_calls.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// `POST /v1/realtime/calls`.
pub async fn create(State(state): State<Arc<AppState>>, req: Request) -> Response {
    let started = Instant::now();
    let response = create_call(state, req).await;
    crate::metrics::METRICS
        .call_setup
        .observe(started.elapsed());
    response
}

async fn create_call(state: Arc<AppState>, req: Request) -> Response {
    let offer = match read_offer(req).await {
        Ok(o) => o,
        Err(r) => return r,
    };
    let summary = match check_offer(&offer.sdp) {
        Ok(s) => s,
        Err(e) => return bad_offer(&e),
    };
    let patch = match session_patch(offer.session.as_deref()) {
        Ok(p) => p,
        Err(r) => return r,
    };
    if state.open_calls.fetch_add(1, Ordering::AcqRel) >= state.max_calls {
        state.open_calls.fetch_sub(1, Ordering::AcqRel);
        let mut r = error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_busy",
            format!("the server is at its limit of {} calls", state.max_calls),
        );
        r.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from_static(RETRY_AFTER_SECS),
        );
        return r;
    }
    let mut admission = Admission(state.clone(), false);
    let (engine_index, engine) = state.engines.pick();
    let engine = engine.clone();
    if !state.model.is_ready() {
        return error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            "the model is still warming up",
        );
    }
    let (call, answer) =
        match Call::accept(&offer.sdp, summary, engine.answer_config(), Instant::now()) {
            Ok(x) => x,
            Err(e) => return bad_offer(&e),
        };
    let (model, model_rx) = match state.model.open().await {
        Ok(m) => m,
        Err(e) => return error_response(StatusCode::SERVICE_UNAVAILABLE, e.code(), e.to_string()),
    };
    let id = call_id();
    let key = state.next_call_key.fetch_add(1, Ordering::Relaxed);
    let (out_tx, out_rx) = mpsc::channel(state.limits.max_outbound_events);
    let (in_tx, in_rx) = mpsc::channel(INBOX);
    let mut session = Session::new(SessionParams {
        transport: Transport::WebRtc(engine.sink(key)),
        model_name: state.model.info().name.clone(),
        model,
        model_frame: state.model.info().frame_samples,
        limits: state.limits.clone(),
        out: out_tx,
    });
    if let Some(p) = patch {
        if let Err(e) = session.configure(p) {
            return payload_response(e);
        }
    }
    state
        .calls
        .lock()
        .map(|mut m| {
            m.insert(
                id.clone(),
                CallEntry {
                    key,
                    engine: engine_index,
                    session: in_tx.clone(),
                },
            )
        })
        .ok();
    let on_end = {
        let (state, id) = (state.clone(), id.clone());
        Box::new(move || {
            if let Ok(mut m) = state.calls.lock() {
                m.remove(&id);
            }
            state.open_calls.fetch_sub(1, Ordering::AcqRel);
        })
    };
    admission.1 = true;
    tracing::info!(call = %id, session = %session.id(), codec = ?summary.codec, "call created");
    tokio::spawn(session.run(in_rx, model_rx));
    engine.add(NewCall {
        key,
        id: id.clone(),
        call,
        session: in_tx,
        events: out_rx,
        has_data_channel: summary.has_data_channel,
        on_end,
    });
    let mut r = (StatusCode::CREATED, answer).into_response();
    let h = r.headers_mut();
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
        None => error_response(
            StatusCode::NOT_FOUND,
            "call_not_found",
            format!("no active call {id:?}"),
        ),
    }
}
