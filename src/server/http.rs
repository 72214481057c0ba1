//! Routes, JSON errors and the auth layer.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde_json::json;
use std::time::Duration;
use tower_http::cors::{AllowHeaders, Any, CorsLayer};

use super::auth::authorized;
use super::{calls, ws, AppState};

/// The demo page: plain files, embedded in the binary (no build step).
const INDEX_HTML: &str = include_str!("../../web/index.html");
const JS: &str = "text/javascript; charset=utf-8";
/// The demo page's other files: (name, content type, body).
const WEB_FILES: &[(&str, &str, &str)] = &[
    ("app.js", JS, include_str!("../../web/app.js")),
    ("audio.js", JS, include_str!("../../web/audio.js")),
    ("events.js", JS, include_str!("../../web/events.js")),
    ("log.js", JS, include_str!("../../web/log.js")),
    ("rtc.js", JS, include_str!("../../web/rtc.js")),
    ("session.js", JS, include_str!("../../web/session.js")),
    ("state.js", JS, include_str!("../../web/state.js")),
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
        .route("/ready", get(ready))
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics))
        .route("/v1/realtime", get(ws::upgrade))
        .route("/v1/realtime/calls", post(calls::create))
        .route("/v1/realtime/calls/{id}/hangup", post(calls::hangup))
        .route("/v1/realtime/calls/{id}", delete(calls::hangup))
        .fallback(not_found)
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key));
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers([header::LOCATION])
        .max_age(Duration::from_secs(600));
    Router::new()
        .route("/health", get(health))
        .route("/", get(index))
        .route("/{file}", get(web_file))
        .merge(protected)
        .layer(cors)
        .with_state(state)
}

/// A JSON error body `{"error":{message,type,code,param}}`.
pub fn error_response(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let kind = if status.is_server_error() {
        "server_error"
    } else {
        "invalid_request_error"
    };
    let body =
        json!({"error": {"message": message.into(), "type": kind, "code": code, "param": null}});
    (status, Json(body)).into_response()
}

async fn require_key(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    match &state.api_key {
        Some(key) if !authorized(req.headers(), key) => {
            let mut r = error_response(
                StatusCode::UNAUTHORIZED,
                "invalid_api_key",
                "missing or invalid API key: send Authorization: Bearer <key>",
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            r
        }
        _ => next.run(req).await,
    }
}

async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

async fn ready(State(state): State<Arc<AppState>>) -> Response {
    if state.model.is_ready() {
        Json(json!({
            "status": "ready",
            "model": state.model.info().name,
            "sessions": state.model.active_sessions(),
                        "calls": state.engines.active_calls(),
        }))
        .into_response()
    } else {
        error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            "the model is still warming up",
        )
    }
}

async fn models(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    let info = state.model.info();
    Json(json!({
        "object": "list",
        "data": [{"id": info.name, "object": "model", "created": 0, "owned_by": "duet"}]
    }))
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let body = crate::metrics::METRICS.render(
        state.engines.active_calls(),
        state.model.active_sessions(),
        state.sessions.load(std::sync::atomic::Ordering::Relaxed),
    );
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
    error_response(StatusCode::NOT_FOUND, "not_found", "no such route")
}
