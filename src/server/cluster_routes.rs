//! Cluster routing (`--cluster-redis`), a layer in front of the realtime routes:
//!
//! - a new call (`POST /v1/realtime/calls`) or WebSocket session (`GET /v1/realtime`) is
//!   placed on the node with the most free model slots; elsewhere, the offer is forwarded
//!   (the answer comes back unchanged, its candidates the owner's) or the socket proxied;
//! - a request for a call or session (hangup, `PATCH`, sideband, accept/reject/refer, a
//!   multipart resume) goes to the node its id names, with no lookup; an id whose node is
//!   gone is `404`;
//! - a request another node forwarded (it carries the cluster's token) is served here, as
//!   coming from the client's address.
//!
//! WebSocket resumes are routed after their first message (see `ws::resume_socket`).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Full};

use super::heartbeat::own_record;
use super::AppState;
use crate::cluster::{Cluster, Want};
use crate::error::{ApiError, Code};

/// The header a forwarded request proves itself with (the cluster's token).
pub const FORWARDED: &str = "x-duet-forwarded";
/// The client's address on a forwarded request.
pub const CLIENT_IP: &str = "x-duet-client-ip";
/// Largest request body forwarded (a multipart offer is at most 64 KiB).
const MAX_FORWARD_BODY: usize = 128 * 1024;
/// Largest response body relayed back.
const MAX_RESPONSE_BODY: usize = 1 << 20;
/// How long a forwarded request may take.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(15);
/// How often a request waiting for room anywhere looks again (`--admission-wait-ms`).
const PLACE_POLL: Duration = Duration::from_millis(50);
/// Request headers not forwarded (hop-by-hop, or set here).
const HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "host",
    FORWARDED,
    CLIENT_IP,
];

/// Where a request goes.
enum Route {
    /// Served here.
    Local,
    /// The node that owns the call or session it names.
    Owner(String),
    /// A new call or session: placed.
    Place(Want),
}

/// The layer: see the module doc.
pub async fn route(State(state): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let Some(cluster) = state.cluster.clone() else {
        return next.run(req).await;
    };
    if forwarded_here(&cluster, &mut req) {
        return next.run(req).await;
    }
    match classify(&cluster, &req) {
        Route::Local => next.run(req).await,
        Route::Owner(node) => to_owner(&state, &cluster, req, &node).await,
        Route::Place(want) => place(&state, &cluster, req, next, want).await,
    }
}

/// A request another node placed or routed here: served here, never forwarded again (no
/// loop, even while the nodes disagree on the token after Redis lost it), and as coming
/// from the client's address when the token proves the sender is a node.
fn forwarded_here(cluster: &Cluster, req: &mut Request) -> bool {
    let Some(token) = req.headers().get(FORWARDED) else {
        return false;
    };
    let proven = token.to_str().is_ok_and(|t| cluster.is_token(t));
    if !proven {
        return true;
    }
    let ip = req
        .headers()
        .get(CLIENT_IP)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<IpAddr>().ok());
    if let Some(ip) = ip {
        req.extensions_mut()
            .insert(ConnectInfo(SocketAddr::new(ip, 0)));
    }
    req.extensions_mut().insert(Placed);
    true
}

/// Marks a request another node placed here: it already waited there
/// (`--admission-wait-ms`), so it does not wait again.
#[derive(Clone, Copy, Debug)]
pub struct Placed;

/// How long a new call or session may wait for a slot here: `--admission-wait-ms`, or
/// nothing for a request another node placed here (it waited there).
pub fn admission_wait(state: &AppState, placed: bool) -> Duration {
    if placed {
        Duration::ZERO
    } else {
        state.sessions.admission_wait
    }
}

fn classify(cluster: &Cluster, req: &Request) -> Route {
    let path = req.uri().path();
    let own = |node: &str| node == cluster.node_id();
    let owner = |node: Option<&str>| match node {
        Some(n) if !own(n) => Route::Owner(n.to_string()),
        _ => Route::Local,
    };
    if let Some(rest) = path.strip_prefix("/v1/realtime/calls/") {
        let id = rest.split('/').next().unwrap_or("");
        return owner(duet_signaling::call_node(id));
    }
    let query = req.uri().query().unwrap_or("");
    let param = |name: &str| {
        query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    };
    match (req.method(), path) {
        (&Method::POST, "/v1/realtime/calls") => Route::Place(Want::Call),
        (&Method::GET, "/v1/realtime") => match param("call_id") {
            Some(call) => owner(duet_signaling::call_node(call)),
            // A resume socket is routed by its first message.
            None if super::ws::flag_on(param("resume")) => Route::Local,
            // A transcription session takes no model slot.
            None if param("intent") == Some("transcription") => Route::Place(Want::Transcription),
            None => Route::Place(Want::Session),
        },
        _ => Route::Local,
    }
}

/// Forwards (or proxies) a request to the node that owns what it names: `404` when that
/// node is gone.
async fn to_owner(state: &AppState, cluster: &Cluster, req: Request, node: &str) -> Response {
    let gone = || {
        ApiError::new(
            Code::NotFound,
            "no such call or session: the node that owned it is gone",
        )
        .into_response()
    };
    let Some(url) = cluster.node_url(node) else {
        crate::metrics::METRICS.cluster_routed("gone");
        return gone();
    };
    let result = if is_upgrade(&req) {
        proxy_socket(state, cluster, req, &url).await
    } else {
        match buffer(req).await {
            Ok(buffered) => forward(cluster, &buffered, &url).await,
            Err(response) => return response,
        }
    };
    result.unwrap_or_else(|()| {
        crate::metrics::METRICS.cluster_routed("unreachable");
        cluster.unreachable(node);
        gone()
    })
}

/// Places a new call or session: on the best node that takes it, trying the next when one
/// refuses (`503`) or cannot be reached; here when this node is best, or when no node has
/// room after `--admission-wait-ms` (this node then answers, `503 server_busy` at capacity).
async fn place(
    state: &Arc<AppState>,
    cluster: &Cluster,
    req: Request,
    next: Next,
    want: Want,
) -> Response {
    match want {
        Want::Session | Want::Transcription => place_session(state, cluster, req, next, want).await,
        Want::Call => match buffer(req).await {
            Ok(b) => match b.resume_owner.clone() {
                Some(owner) => owner_or_gone(cluster, &b, &owner).await,
                None => place_call(state, cluster, b, next).await,
            },
            Err(r) => r,
        },
    }
}

async fn place_call(state: &AppState, cluster: &Cluster, b: Buffered, next: Next) -> Response {
    let deadline = tokio::time::Instant::now() + state.sessions.admission_wait;
    loop {
        for node in cluster.candidates(own_record(state, &cluster.settings), Want::Call) {
            if node.id == cluster.node_id() {
                return next.run(rebuild(b)).await;
            }
            match forward(cluster, &b, &node.node_url).await {
                Ok(r) if r.status() == StatusCode::SERVICE_UNAVAILABLE => {
                    crate::metrics::METRICS.cluster_routed("refused");
                    cluster.refused(&node.id);
                }
                Ok(r) => {
                    cluster.placed(&node.id, Want::Call);
                    return r;
                }
                Err(()) => {
                    crate::metrics::METRICS.cluster_routed("unreachable");
                    cluster.unreachable(&node.id);
                }
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return next.run(rebuild(b)).await;
        }
        tokio::time::sleep(PLACE_POLL).await;
    }
}

async fn place_session(
    state: &AppState,
    cluster: &Cluster,
    req: Request,
    next: Next,
    want: Want,
) -> Response {
    let deadline = tokio::time::Instant::now() + state.sessions.admission_wait;
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.ip());
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let protocols = req.headers().get(header::SEC_WEBSOCKET_PROTOCOL).cloned();
    let headers = forward_headers(cluster, req.headers(), client);
    loop {
        for node in cluster.candidates(own_record(state, &cluster.settings), want) {
            if node.id == cluster.node_id() {
                return next.run(req).await;
            }
            let url = format!("{}{path}", node.node_url.replacen("http", "ws", 1));
            match super::ws_proxy::connect(&url, headers.clone(), protocols.clone()).await {
                Ok(super::ws_proxy::Upstream::Refused(r))
                    if r.status() == StatusCode::SERVICE_UNAVAILABLE =>
                {
                    crate::metrics::METRICS.cluster_routed("refused");
                    cluster.refused(&node.id);
                }
                Ok(upstream) => {
                    cluster.placed(&node.id, want);
                    let ends = super::ws_proxy::Ends::of(state);
                    return super::ws_proxy::answer(req, upstream, ends).await;
                }
                Err(()) => {
                    crate::metrics::METRICS.cluster_routed("unreachable");
                    cluster.unreachable(&node.id);
                }
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return next.run(req).await;
        }
        tokio::time::sleep(PLACE_POLL).await;
    }
}

/// A multipart resume of a session another node owns.
async fn owner_or_gone(cluster: &Cluster, b: &Buffered, owner: &str) -> Response {
    match cluster.node_url(owner) {
        Some(url) => match forward(cluster, b, &url).await {
            Ok(r) => r,
            Err(()) => super::calls::resume_expired().into_response(),
        },
        None => super::calls::resume_expired().into_response(),
    }
}

/// A request with its body read.
struct Buffered {
    method: Method,
    path_and_query: String,
    headers: HeaderMap,
    body: Bytes,
    client: Option<IpAddr>,
    /// What the layers before this one found (the credential, the peer's address).
    extensions: axum::http::Extensions,
    /// A multipart call offer that resumes a session owned by another node.
    resume_owner: Option<String>,
}

async fn buffer(req: Request) -> Result<Buffered, Response> {
    let (parts, body) = req.into_parts();
    let client = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.ip());
    let body = axum::body::to_bytes(body, MAX_FORWARD_BODY)
        .await
        .map_err(|e| ApiError::body(&e, MAX_FORWARD_BODY, "body").into_response())?;
    let resume_owner = resume_owner(&parts.headers, &body);
    Ok(Buffered {
        method: parts.method,
        path_and_query: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_string(), |p| p.as_str().to_string()),
        headers: parts.headers,
        body,
        client,
        extensions: parts.extensions,
        resume_owner,
    })
}

/// The node owning the session a multipart offer's `resume` part names, if it is another's.
fn resume_owner(headers: &HeaderMap, body: &[u8]) -> Option<String> {
    let ctype = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    if !ctype
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        return None;
    }
    let parts =
        duet_signaling::multipart::parse(ctype, body, duet_signaling::multipart::Limits::default())
            .ok()?;
    let resume = parts.into_iter().find(|p| p.name == "resume")?;
    let v: serde_json::Value = serde_json::from_slice(&resume.data).ok()?;
    let node = crate::protocol::ids::session_node(v.get("session_id")?.as_str()?)?;
    Some(node.to_string())
}

/// The request again, to serve here.
fn rebuild(b: Buffered) -> Request {
    let mut req = Request::new(Body::from(b.body));
    *req.method_mut() = b.method;
    *req.uri_mut() = b.path_and_query.parse().unwrap_or_default();
    *req.headers_mut() = b.headers;
    *req.extensions_mut() = b.extensions;
    req
}

/// The headers a forwarded request carries: the client's, less hop-by-hop ones, plus the
/// cluster's token and the client's address.
fn forward_headers(cluster: &Cluster, from: &HeaderMap, client: Option<IpAddr>) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in from {
        if !HOP.contains(&name.as_str()) && !name.as_str().starts_with("sec-websocket-") {
            h.append(name.clone(), value.clone());
        }
    }
    if let Some(token) = cluster.token().and_then(|t| HeaderValue::from_str(&t).ok()) {
        h.insert(HeaderName::from_static(FORWARDED), token);
    }
    if let Some(ip) = client.and_then(|ip| HeaderValue::from_str(&ip.to_string()).ok()) {
        h.insert(HeaderName::from_static(CLIENT_IP), ip);
    }
    h
}

/// Sends `b` to the node at `base` and relays its answer unchanged; `Err` when the node
/// cannot be reached.
async fn forward(cluster: &Cluster, b: &Buffered, base: &str) -> Result<Response, ()> {
    let uri = format!("{base}{}", b.path_and_query);
    let mut out = hyper::Request::builder()
        .method(b.method.clone())
        .uri(uri)
        .body(Full::new(b.body.clone()))
        .map_err(|_| ())?;
    *out.headers_mut() = forward_headers(cluster, &b.headers, b.client);
    let response = tokio::time::timeout(FORWARD_TIMEOUT, cluster.http.request(out))
        .await
        .map_err(|_| ())?
        .map_err(|e| tracing::debug!(error = %e, "cluster forward failed"))?;
    crate::metrics::METRICS.cluster_routed("forwarded");
    let (parts, body) = response.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_RESPONSE_BODY);
    let bytes = limited.collect().await.map_err(|_| ())?.to_bytes();
    let mut r = Response::new(Body::from(bytes));
    *r.status_mut() = parts.status;
    for (name, value) in &parts.headers {
        if !HOP.contains(&name.as_str()) && name != header::CONTENT_LENGTH {
            r.headers_mut().append(name.clone(), value.clone());
        }
    }
    Ok(r)
}

fn is_upgrade(req: &Request) -> bool {
    req.headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Proxies a WebSocket to the node at `base`: the upstream socket is opened first, so the
/// client gets the node's own refusal (its status and body) when there is one. `Err`: the
/// node cannot be reached.
async fn proxy_socket(
    state: &AppState,
    cluster: &Cluster,
    req: Request,
    base: &str,
) -> Result<Response, ()> {
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.ip());
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}{path}", base.replacen("http", "ws", 1));
    let protocols = req.headers().get(header::SEC_WEBSOCKET_PROTOCOL).cloned();
    let headers = forward_headers(cluster, req.headers(), client);
    let upstream = super::ws_proxy::connect(&url, headers, protocols).await?;
    let ends = super::ws_proxy::Ends::of(state);
    Ok(super::ws_proxy::answer(req, upstream, ends).await)
}

/// The node that owns session `id`, when it is another node of this cluster.
pub fn remote_owner(state: &AppState, id: &str) -> Option<String> {
    let cluster = state.cluster.as_ref()?;
    let node = crate::protocol::ids::session_node(id)?;
    (node != cluster.node_id()).then(|| node.to_string())
}

/// A resume socket to the node that owns its session (`None`: that node is gone or
/// refused it; the client is told `session_resume_expired`).
pub async fn resume_upstream(
    state: &AppState,
    owner: &str,
    headers: HeaderMap,
    client: Option<IpAddr>,
) -> Option<super::ws_proxy::UpSocket> {
    let cluster = state.cluster.as_ref()?;
    let base = cluster.node_url(owner)?;
    let url = format!(
        "{}/v1/realtime?duplex=1&resume=1",
        base.replacen("http", "ws", 1)
    );
    let protocols = headers.get(header::SEC_WEBSOCKET_PROTOCOL).cloned();
    let headers = forward_headers(cluster, &headers, client);
    match super::ws_proxy::connect(&url, headers, protocols).await {
        Ok(super::ws_proxy::Upstream::Open { socket, .. }) => Some(*socket),
        Ok(super::ws_proxy::Upstream::Refused(_)) => None,
        Err(()) => {
            cluster.unreachable(owner);
            None
        }
    }
}
