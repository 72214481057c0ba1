//! Routes, the auth and origin layers, health, readiness, models, metrics and the demo
//! page's files.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde_json::json;
use std::time::Duration;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use super::auth::{authorized, presented};
use super::secrets::{lookup, Credential};
use super::{audio, calls, chat, cluster_routes, pool, secrets, sip_calls, ws, AppState};
use crate::error::{ApiError, Code};

/// The demo page: plain files, embedded in the binary (no build step).
const INDEX_HTML: &str = include_str!("../../web/index.html");
const JS: &str = "text/javascript; charset=utf-8";
/// The demo page's other files: (name, content type, body).
const WEB_FILES: &[(&str, &str, &str)] = &[
    ("agent.js", JS, include_str!("../../web/agent.js")),
    ("app.js", JS, include_str!("../../web/app.js")),
    ("audio.js", JS, include_str!("../../web/audio.js")),
    ("events.js", JS, include_str!("../../web/events.js")),
    ("log.js", JS, include_str!("../../web/log.js")),
    ("pcm.js", JS, include_str!("../../web/pcm.js")),
    ("playback.js", JS, include_str!("../../web/playback.js")),
    ("rtc.js", JS, include_str!("../../web/rtc.js")),
    ("session.js", JS, include_str!("../../web/session.js")),
    ("state.js", JS, include_str!("../../web/state.js")),
    ("turn.js", JS, include_str!("../../web/turn.js")),
    ("ui.js", JS, include_str!("../../web/ui.js")),
    ("ws.js", JS, include_str!("../../web/ws.js")),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../web/style.css"),
    ),
];

/// Builds the router.
pub fn router(state: Arc<AppState>) -> Router {
    let protected = Router::new()
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics))
        .route("/v1/realtime", get(ws::upgrade))
        .route("/v1/realtime/calls", post(calls::create))
        .route("/v1/realtime/client_secrets", post(secrets::create))
        .route("/v1/usage", get(pool::usage))
        .route("/v1/chat/completions", post(chat::completions))
        .route("/v1/audio/transcriptions", post(audio::transcriptions))
        .route("/v1/audio/speech", post(audio::speech))
        .route("/v1/responses", post(chat::responses))
        .route("/v1/pool", get(pool::pool))
        .route("/v1/realtime/calls/{id}/hangup", post(calls::hangup))
        .route("/v1/realtime/calls/{id}/accept", post(sip_calls::accept))
        .route("/v1/realtime/calls/{id}/reject", post(sip_calls::reject))
        .route("/v1/realtime/calls/{id}/refer", post(sip_calls::refer))
        .route(
            "/v1/realtime/calls/{id}",
            delete(calls::hangup).patch(calls::renegotiate),
        )
        .fallback(not_found)
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            cluster_routes::route,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key))
        .route_layer(middleware::from_fn_with_state(state.clone(), check_origin));
    let cors = cors(&state);
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/demo/client_secret", post(secrets::demo_mint))
        .route("/", get(index))
        .route("/{file}", get(web_file))
        .merge(protected)
        .layer(cors)
        .with_state(state)
}

/// CORS for browsers: `--cors-origins` (any origin without it), the methods the API
/// answers, `Location` readable (a call's id).
fn cors(state: &AppState) -> CorsLayer {
    let allow_origin = if state.credentials.origins.is_empty() {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            state
                .credentials
                .origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(o).ok()),
        )
    };
    CorsLayer::new()
        .allow_origin(allow_origin)
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PATCH,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers([header::LOCATION])
        .max_age(Duration::from_secs(600))
}

/// Finds the request's credential (the server key, or a live client secret) and records it
/// for the handlers; anything else is `401` before a handler allocates anything.
async fn require_key(State(state): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let found = match credential(&state, &req) {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(check)) => secret_credential(&state, check).await,
        Err(e) => Err(e),
    };
    match found {
        Ok(c) => {
            req.extensions_mut().insert(c);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

/// A presented client secret, and what its checks need from the request.
struct SecretToCheck {
    secret: String,
    resume_route: bool,
    allowed: bool,
}

fn credential(
    state: &AppState,
    req: &Request,
) -> Result<Result<Credential, SecretToCheck>, ApiError> {
    let unauthorized = |m: &str| ApiError::new(Code::InvalidApiKey, m);
    if let Some(key) = &state.credentials.api_key {
        if authorized(req.headers(), key) {
            return Ok(Ok(Credential::Server));
        }
    }
    let keys = presented(req.headers());
    let Some(secret) = keys.into_iter().find(|k| k.starts_with("ek_")) else {
        return match state.credentials.api_key {
            Some(_) => Err(unauthorized(
                "missing or invalid API key: send Authorization: Bearer <key>",
            )),
            None => Ok(Ok(Credential::Server)),
        };
    };
    // What the checks need, read before the store is asked (a request body is not Sync).
    let resume_route = is_resume_route(req);
    let path = req.uri().path();
    // A secret opens realtime sessions and calls (and reaches them), and may read /ready
    // and /v1/models as a browser app does; nothing else.
    let realtime =
        path.starts_with("/v1/realtime") && !path.starts_with("/v1/realtime/client_secrets");
    let allowed = realtime || path == "/ready" || path == "/v1/models";
    Ok(Err(SecretToCheck {
        secret: secret.to_string(),
        resume_route,
        allowed,
    }))
}

/// The credential of a presented client secret (see [`credential`]).
async fn secret_credential(state: &AppState, check: SecretToCheck) -> Result<Credential, ApiError> {
    let SecretToCheck {
        secret,
        resume_route,
        allowed,
    } = check;
    let unauthorized = |m: &str| ApiError::new(Code::InvalidApiKey, m);
    let found = lookup(state.credentials.secrets.as_ref(), &secret)
        .await
        .map_err(|_| super::secrets::store_down())?;
    let Some(record) = found else {
        // A session outlives its secret: on a resume route the resume token proves it.
        if resume_route {
            return Ok(Credential::ResumeOnly);
        }
        return Err(unauthorized(
            "the client secret is expired, unknown or malformed",
        ));
    };
    if !allowed {
        return Err(unauthorized(
            "a client secret opens realtime sessions and calls only; this route needs the server's API key",
        ));
    }
    Ok(Credential::Secret(Arc::new(record)))
}

/// A request that can resume a durable session: a resume socket
/// (`GET /v1/realtime?duplex=1&resume=1`) or a call offer with the extension
/// (`POST /v1/realtime/calls?duplex=1`, which must then carry a `resume` part).
fn is_resume_route(req: &Request) -> bool {
    let query = req.uri().query().unwrap_or("");
    let on = |name: &str| {
        query.split('&').any(|kv| {
            kv.split_once('=')
                .is_some_and(|(k, v)| k == name && ws::flag_on(Some(v)))
        })
    };
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/v1/realtime") => on("duplex") && on("resume"),
        (&Method::POST, "/v1/realtime/calls") => on("duplex"),
        _ => false,
    }
}

/// With `--cors-origins`, a browser request from another origin is refused (a WebSocket
/// upgrade or a form POST needs no preflight, so CORS headers alone would not stop it).
async fn check_origin(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok());
    match origin {
        Some(o)
            if !state.credentials.origins.is_empty()
                && !state.credentials.origins.iter().any(|a| a == o) =>
        {
            ApiError::new(
                Code::OriginNotAllowed,
                format!("origin {o:?} is not allowed to use this server"),
            )
            .into_response()
        }
        _ => next.run(req).await,
    }
}

async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// `/ready` needs no key (orchestrators' probes send none); the live counts are for the
/// server key only.
async fn ready(State(state): State<Arc<AppState>>, headers: axum::http::HeaderMap) -> Response {
    let keyed = state
        .credentials
        .api_key
        .as_ref()
        .is_none_or(|k| authorized(&headers, k));
    match state.ready() {
        Ok(()) if keyed => Json(json!({
            "status": "ready",
            "model": state.backends.model.info().name,
            "sessions": state.backends.model.active_sessions(),
            "calls": live_calls(&state),
        }))
        .into_response(),
        Ok(()) => Json(json!({"status": "ready"})).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Live calls: WebRTC ones and accepted SIP ones.
fn live_calls(state: &AppState) -> usize {
    state.calls.engines.active_calls() + state.calls.sip.as_ref().map_or(0, |sip| sip.live())
}

/// `GET /v1/models`: the realtime model, then each other model served, with what it serves
/// and where it runs (`duet`, an extension of OpenAI's model object).
async fn models(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    let model = |id: &str, serves: &str, runs: &str| {
        json!({"id": id, "object": "model", "created": 0, "owned_by": "duet",
            "duet": {"serves": serves, "runs": runs}})
    };
    let info = state.backends.model.info();
    let mut data = vec![model(&info.name, "realtime", "embedded")];
    let speech = &state.backends.speech;
    if let Some(stt) = &speech.transcriber {
        let runs = match stt {
            crate::stt::Stt::Embedded(_) => "embedded",
            crate::stt::Stt::Remote(_) => "remote",
        };
        data.push(model(stt.name(), "audio.transcriptions", runs));
    }
    match &state.backends.llm {
        Some(crate::llm::LlmBackend::Remote(u)) => {
            data.push(model(&u.config().model, "chat.completions", "remote"));
        }
        Some(crate::llm::LlmBackend::Embedded(e)) => {
            data.push(model(&e.name, "chat.completions", "embedded"));
        }
        None => {}
    }
    if let Some(voice) = &speech.voice {
        let runs = match voice {
            crate::tts::Voice::Embedded(..) => "embedded",
            crate::tts::Voice::Remote(_) => "remote",
        };
        data.push(model(voice.name(), "audio.speech", runs));
    }
    Json(json!({ "object": "list", "data": data }))
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let mut body = crate::metrics::METRICS.render(
        live_calls(&state),
        state.backends.model.active_sessions(),
        state
            .sessions
            .websockets
            .load(std::sync::atomic::Ordering::Acquire),
    );
    crate::metrics::render_memory(
        &mut body,
        state.sessions.memory.limit(),
        state.sessions.memory.used(),
    );
    if let Some(c) = &state.cluster {
        crate::metrics::render_cluster(&mut body, c.redis_up(), c.nodes().len());
    }
    if let Some(crate::llm::LlmBackend::Embedded(e)) = &state.backends.llm {
        crate::metrics::render_llm(&mut body, e.llm.stats());
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

async fn index() -> Html<&'static str> {
    Html(INDEX_HTML)
}

async fn web_file(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    match WEB_FILES.iter().find(|(name, _, _)| *name == file) {
        Some((_, ctype, body)) => ([(header::CONTENT_TYPE, *ctype)], *body).into_response(),
        None => not_found().await,
    }
}

async fn not_found() -> Response {
    ApiError::new(Code::NotFound, "no such route").into_response()
}
