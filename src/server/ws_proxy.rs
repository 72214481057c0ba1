//! The WebSocket proxy of cluster mode: a client's socket carried to the node that owns
//! (or takes) its session. Text and binary messages and close frames pass unchanged; each
//! side answers its own pings.
//!
//! The client's side is held to this node's own WebSocket limits, as a socket served here
//! is: a ping every `--ws-ping-secs`, closed after `--ws-idle-secs` without a frame from
//! the client (pongs count) or when one write to it blocks for `--ws-write-timeout-secs`.
//! Writes to the owning node are bounded by the same write timeout, and when the owner's
//! side ends the client is closed (with a close frame, sent within the write timeout).

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame as UpClose;
use tokio_tungstenite::tungstenite::{Error as WsError, Message as Up};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long the owning node may take to answer the upgrade.
const CONNECT: Duration = Duration::from_secs(5);
/// How long closing a side may take.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// A socket to the owning node.
pub type UpSocket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The owning node's answer to the upgrade.
pub enum Upstream {
    /// It took the socket (with the subprotocol it chose).
    Open {
        /// The socket.
        socket: Box<UpSocket>,
        /// `Sec-WebSocket-Protocol` it answered.
        protocol: Option<String>,
    },
    /// It refused with this response (status and body as the node sent them).
    Refused(Response),
}

/// Opens the socket at `url` (`ws://node/v1/realtime?…`) with the client's headers. `Err`:
/// the node cannot be reached.
pub async fn connect(
    url: &str,
    headers: HeaderMap,
    protocols: Option<HeaderValue>,
) -> Result<Upstream, ()> {
    let mut request = url.into_client_request().map_err(|_| ())?;
    for (name, value) in &headers {
        request.headers_mut().append(name.clone(), value.clone());
    }
    if let Some(p) = protocols {
        request
            .headers_mut()
            .insert(header::SEC_WEBSOCKET_PROTOCOL, p);
    }
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(super::ws::MAX_WS_MESSAGE))
        .max_frame_size(Some(super::ws::MAX_WS_MESSAGE));
    let connecting = tokio_tungstenite::connect_async_with_config(request, Some(config), true);
    match tokio::time::timeout(CONNECT, connecting).await {
        Ok(Ok((socket, response))) => {
            crate::metrics::METRICS.cluster_routed("proxied");
            let protocol = response
                .headers()
                .get(header::SEC_WEBSOCKET_PROTOCOL)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            Ok(Upstream::Open {
                socket: Box::new(socket),
                protocol,
            })
        }
        Ok(Err(WsError::Http(response))) => {
            let (parts, body) = response.into_parts();
            let mut r = Response::new(axum::body::Body::from(body.unwrap_or_default()));
            *r.status_mut() = parts.status;
            for name in [header::CONTENT_TYPE, header::RETRY_AFTER] {
                if let Some(v) = parts.headers.get(&name) {
                    r.headers_mut().insert(name, v.clone());
                }
            }
            Ok(Upstream::Refused(r))
        }
        Ok(Err(e)) => {
            tracing::debug!(error = %e, url, "cluster: WebSocket to the owning node failed");
            Err(())
        }
        Err(_) => Err(()),
    }
}

/// What ends a proxied socket besides its two sides: this node's drain (the client gets
/// close 1001 at the drain's deadline, so that it reconnects through another node; a durable
/// session on the owner waits for its resume), and this node's WebSocket limits on the
/// client's side. Counted among the node's sockets meanwhile.
pub struct Ends {
    lifecycle: tokio::sync::watch::Receiver<crate::session::Lifecycle>,
    limits: super::WsLimits,
    _counted: super::ws::Counted,
}

impl Ends {
    /// For a socket proxied by `state`'s node.
    pub fn of(state: &super::AppState) -> Self {
        Self {
            lifecycle: state.lifecycle.subscribe(),
            limits: state.sessions.ws,
            _counted: super::ws::Counted::new(state),
        }
    }

    /// Resolves at this node's drain deadline.
    async fn drained(&mut self) {
        let deadline = loop {
            if let crate::session::Lifecycle::Draining { deadline } = *self.lifecycle.borrow() {
                break deadline;
            }
            if self.lifecycle.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::time::sleep_until(deadline.into()).await;
    }
}

/// Answers the client's upgrade request with what the owning node said: the upgrade and
/// then the proxy, or the node's refusal.
pub async fn answer(req: Request, upstream: Upstream, ends: Ends) -> Response {
    let (socket, protocol) = match upstream {
        Upstream::Refused(r) => return r,
        Upstream::Open { socket, protocol } => (socket, protocol),
    };
    let (mut parts, _) = req.into_parts();
    let ws = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(ws) => ws,
        Err(e) => return e.into_response(),
    };
    let ws = match protocol {
        Some(p) => ws.protocols([p]),
        None => ws,
    };
    ws.max_message_size(super::ws::MAX_WS_MESSAGE)
        .max_frame_size(super::ws::MAX_WS_MESSAGE)
        .on_upgrade(move |client| pump(client, *socket, ends))
}

/// Why a proxied socket ended.
#[derive(Debug)]
enum End {
    /// The client closed or went away: the owner is closed.
    Client,
    /// The owner closed or went away: the client is closed.
    Owner(Option<Message>),
    /// The client sent no frame for `--ws-idle-secs`.
    Idle,
    /// A write to the client blocked past the write timeout: nothing more is sent to it.
    Stuck,
    /// This node's drain deadline.
    Drained,
}

/// Carries messages both ways until one side closes, the client breaks this node's
/// WebSocket limits, or this node's drain deadline passes; then closes the other side with
/// a bounded send.
pub async fn pump(client: WebSocket, upstream: UpSocket, mut ends: Ends) {
    let limits = ends.limits;
    let (mut c_tx, mut c_rx) = client.split();
    let (mut u_tx, mut u_rx) = upstream.split();
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + limits.ping, limits.ping);
    let idle = tokio::time::sleep(limits.idle);
    tokio::pin!(idle);
    let end = loop {
        tokio::select! {
            m = c_rx.next() => {
                idle.as_mut().reset(tokio::time::Instant::now() + limits.idle);
                let Some(Ok(m)) = m else { break End::Client };
                let Some(m) = to_upstream(m) else { continue };
                let close = matches!(m, Up::Close(_));
                let sent = tokio::time::timeout(limits.write, u_tx.send(m)).await;
                if close || !matches!(sent, Ok(Ok(()))) {
                    break End::Client;
                }
            }
            m = u_rx.next() => {
                let Some(Ok(m)) = m else { break End::Owner(None) };
                let Some(m) = to_client(m) else { continue };
                if matches!(m, Message::Close(_)) {
                    break End::Owner(Some(m));
                }
                if !sent_within(&mut c_tx, m, limits.write).await {
                    break End::Stuck;
                }
            }
            _ = ping.tick() => {
                if !sent_within(&mut c_tx, Message::Ping(bytes::Bytes::new()), limits.write).await {
                    break End::Stuck;
                }
            }
            () = &mut idle => break End::Idle,
            () = ends.drained() => break End::Drained,
        }
    };
    tracing::debug!(?end, "cluster: proxied WebSocket ended");
    let bye = match end {
        End::Client | End::Stuck => None,
        End::Owner(frame) => {
            Some(frame.unwrap_or_else(|| close(1011, "the session's node went away")))
        }
        End::Idle => Some(close(1001, "idle: no frame from the client")),
        End::Drained => Some(close(1001, "server draining: reconnect")),
    };
    if let Some(bye) = bye {
        let _ = sent_within(&mut c_tx, bye, limits.write).await;
    }
    let _ = tokio::time::timeout(CLOSE_GRACE, c_tx.close()).await;
    let _ = tokio::time::timeout(CLOSE_GRACE, u_tx.close()).await;
}

/// Sends `m` to the client within `limit`; `false` when it failed or blocked past it.
async fn sent_within(
    tx: &mut futures_util::stream::SplitSink<WebSocket, Message>,
    m: Message,
    limit: Duration,
) -> bool {
    matches!(tokio::time::timeout(limit, tx.send(m)).await, Ok(Ok(())))
}

fn close(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.to_owned().into(),
    }))
}

/// Sends `first` (a message the client already sent here) and then proxies.
pub async fn pump_after(client: WebSocket, mut upstream: UpSocket, first: String, ends: Ends) {
    if upstream.send(Up::Text(first.into())).await.is_ok() {
        pump(client, upstream, ends).await;
    }
}

fn to_upstream(m: Message) -> Option<Up> {
    Some(match m {
        Message::Text(t) => Up::Text(t.as_str().to_owned().into()),
        Message::Binary(b) => Up::Binary(b),
        Message::Close(f) => Up::Close(f.map(|f| UpClose {
            code: CloseCode::from(f.code),
            reason: f.reason.as_str().to_owned().into(),
        })),
        Message::Ping(_) | Message::Pong(_) => return None,
    })
}

fn to_client(m: Up) -> Option<Message> {
    Some(match m {
        Up::Text(t) => Message::Text(t.as_str().to_owned().into()),
        Up::Binary(b) => Message::Binary(b),
        Up::Close(f) => Message::Close(f.map(|f| CloseFrame {
            code: u16::from(f.code),
            reason: f.reason.as_str().to_owned().into(),
        })),
        Up::Ping(_) | Up::Pong(_) | Up::Frame(_) => return None,
    })
}
