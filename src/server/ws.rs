//! `GET /v1/realtime`: the WebSocket transport. A reader turns text frames into session
//! inputs, a writer sends the session's events; the session actor sits between them.
//!
//! Nothing here waits forever on a client: the writer pings every `--ws-ping-secs`, a socket
//! with no inbound frame (pongs count) for `--ws-idle-secs` or a write blocked for
//! `--ws-write-timeout-secs` is dropped and its session released, and client events waiting
//! for the session are bounded in bytes (the reader stops reading beyond that).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Query, State};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::sync::{mpsc, Semaphore};

use super::admission::{Kind, SidebandSlot};
use super::error::ApiError;
use super::open::open_session;
use super::{AppState, WsLimits};
use crate::protocol::{self, codes, ErrorPayload, ServerEvent, ServerEventBody, MAX_EVENT_BYTES};
use crate::session::{
    queue, Abort, Delivery, EventReceiver, Inbound, Rendered, SessionInput, Transport,
};

/// Largest WebSocket message read; events over [`MAX_EVENT_BYTES`] but under this get an
/// `event_too_large` error and the session continues, larger ones close the socket (1009).
const MAX_WS_MESSAGE: usize = MAX_EVENT_BYTES + 1024 * 1024;
/// Client events queued for the session before the reader waits (backpressure).
const INBOX: usize = 256;
/// How long a closing connection may take to send the session's last events.
const FLUSH: Duration = Duration::from_secs(2);
/// How long an aborted connection may take to send its `error` and close frame.
const ABORT_GRACE: Duration = Duration::from_millis(100);

/// Query of `GET /v1/realtime`.
#[derive(Debug, Deserialize)]
pub struct RealtimeQuery {
    /// Accepted and ignored: the server runs one model, reported in `session.created`.
    pub model: Option<String>,
    /// Join a live WebRTC call's events (sideband control).
    pub call_id: Option<String>,
}

/// The client's address, when the server's accept loop recorded it.
type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

fn peer_ip(peer: &Peer) -> Option<std::net::IpAddr> {
    peer.as_ref().map(|Extension(ConnectInfo(a))| a.ip())
}

/// Upgrades to a session (or a sideband of a call).
pub async fn upgrade(
    State(state): State<Arc<AppState>>,
    peer: Peer,
    Query(q): Query<RealtimeQuery>,
    ws: WebSocketUpgrade,
) -> Response {
    tracing::debug!(requested_model = ?q.model, "websocket session requested");
    let ws = ws
        .protocols(["realtime"])
        .max_message_size(MAX_WS_MESSAGE)
        .max_frame_size(MAX_WS_MESSAGE);
    let ip = peer_ip(&peer);
    let result = match q.call_id {
        Some(call) => upgrade_sideband(state, &call, ip, ws),
        None => upgrade_session(state, ip, ws),
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

fn upgrade_session(
    state: Arc<AppState>,
    ip: Option<std::net::IpAddr>,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    state.accepting()?;
    let admitted = state.admissions.admit(Kind::Session, ip)?;
    Ok(ws.on_upgrade(move |socket| async move {
        run(state, socket).await;
        drop(admitted);
    }))
}

fn upgrade_sideband(
    state: Arc<AppState>,
    call: &str,
    ip: Option<std::net::IpAddr>,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let entry = state.calls.lock().ok().and_then(|m| m.get(call).cloned());
    let entry = entry
        .ok_or_else(|| ApiError::not_found("call_not_found", format!("no active call {call:?}")))?;
    if state.draining() {
        return Err(ApiError::draining());
    }
    let slot = SidebandSlot::take(&entry.sidebands)?;
    let admitted = state.admissions.admit(Kind::Session, ip)?;
    Ok(ws.on_upgrade(move |socket| async move {
        sideband(state, socket, entry.session).await;
        drop((slot, admitted));
    }))
}

async fn run(state: Arc<AppState>, socket: WebSocket) {
    let (mut sink, mut stream) = socket.split();
    let opened = match open_session(&state, Transport::WebSocket).await {
        Ok(o) => o,
        Err(e) => {
            let err = ServerEvent::new(ServerEventBody::Error {
                error: ErrorPayload::server(e.code(), e.to_string()),
            });
            let _ = sink.send(Message::Text(err.to_json().into())).await;
            let _ = sink.send(close(1013, "model unavailable")).await;
            return;
        }
    };
    let (in_tx, in_rx) = mpsc::channel(INBOX);
    let span =
        tracing::info_span!("session", session = %opened.session.id(), transport = "websocket");
    tracing::info!(parent: &span, "session opened");
    let mut actor = tokio::spawn(crate::session::run(
        opened.session,
        in_rx,
        opened.model_rx,
        state.lifecycle.subscribe(),
    ));
    let mut writer = tokio::spawn(write_loop(sink, opened.events, state.ws));
    let budget = Arc::new(Semaphore::new(state.max_inbound_bytes));
    let (mut writer_done, mut actor_done) = (false, false);
    tokio::select! {
        _ = read_loop(&mut stream, in_tx, budget, state.ws) => {}
        _ = &mut writer => writer_done = true,
        _ = &mut actor => actor_done = true,
    }
    // The reader's end closes the session's inbox: the session ends and its last events
    // leave, unless the client stopped reading.
    if !writer_done && tokio::time::timeout(FLUSH, &mut writer).await.is_err() {
        writer.abort();
    }
    if !actor_done {
        let _ = actor.await;
    }
    tracing::info!(parent: &span, "session closed");
}

/// A sideband connection (`?call_id=`): the same events as the call's data channel, and
/// client events into the call's session (server-side control). Closing it leaves the call
/// as it was.
async fn sideband(state: Arc<AppState>, socket: WebSocket, session: mpsc::Sender<Inbound>) {
    let (sink, mut stream) = socket.split();
    let (tx, events) = queue(state.limits.max_outbound_bytes);
    if session.send(SessionInput::Attach(tx).into()).await.is_err() {
        return;
    }
    let mut writer = tokio::spawn(write_loop(sink, events, state.ws));
    let budget = Arc::new(Semaphore::new(state.max_inbound_bytes));
    tokio::select! {
        _ = read_loop(&mut stream, session, budget, state.ws) => writer.abort(),
        _ = &mut writer => {}
    }
}

fn close(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: Utf8Bytes::from(reason.to_string()),
    }))
}

/// A rendered event as a text frame, sharing its bytes.
fn text_frame(event: &Rendered) -> Message {
    struct Shared(Arc<String>);
    impl AsRef<[u8]> for Shared {
        fn as_ref(&self) -> &[u8] {
            self.0.as_bytes()
        }
    }
    let bytes = bytes::Bytes::from_owner(Shared(event.json.clone()));
    match Utf8Bytes::try_from(bytes) {
        Ok(text) => Message::Text(text),
        Err(_) => Message::Text(event.json.to_string().into()),
    }
}

async fn read_loop(
    stream: &mut SplitStream<WebSocket>,
    inbox: mpsc::Sender<Inbound>,
    budget: Arc<Semaphore>,
    limits: WsLimits,
) {
    let max = budget.available_permits();
    loop {
        let msg = match tokio::time::timeout(limits.idle, stream.next()).await {
            Err(_) => {
                tracing::info!(
                    idle_secs = limits.idle.as_secs(),
                    "no frame from the client; closing the websocket"
                );
                return;
            }
            Ok(None) => return,
            Ok(Some(msg)) => msg,
        };
        let text = match msg {
            Ok(Message::Text(text)) => text,
            Ok(Message::Binary(_)) => {
                let err = ErrorPayload::invalid(
                    codes::INVALID_JSON,
                    "binary frames are not supported; send JSON events as text frames",
                );
                if inbox.send(SessionInput::Invalid(err).into()).await.is_err() {
                    return;
                }
                continue;
            }
            Ok(Message::Close(_)) => return,
            Ok(Message::Ping(_) | Message::Pong(_)) => continue,
            Err(e) => {
                tracing::debug!(error = %e, "websocket read ended");
                return;
            }
        };
        // The event's bytes count until the session handled it.
        let permits = u32::try_from(text.len().clamp(1, max)).unwrap_or(u32::MAX);
        let Ok(hold) = budget.clone().acquire_many_owned(permits).await else {
            return;
        };
        let input = match protocol::decode(text.as_str()) {
            Ok(env) => SessionInput::Client(env),
            Err(e) => SessionInput::Invalid(e),
        };
        drop(text);
        let inbound = Inbound {
            input,
            hold: Some(hold),
        };
        if inbox.send(inbound).await.is_err() {
            return;
        }
    }
}

async fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    mut events: EventReceiver,
    limits: WsLimits,
) {
    let start = tokio::time::Instant::now() + limits.ping;
    let mut ping = tokio::time::interval_at(start, limits.ping);
    loop {
        let (msg, held) = tokio::select! {
            biased;
            next = events.recv() => match next {
                Some(Ok(Delivery::Event(event, held))) => (text_frame(&event), Some(held)),
                Some(Ok(Delivery::Close { code, reason })) => {
                    let _ = tokio::time::timeout(limits.write, sink.send(close(code, &reason))).await;
                    return;
                }
                Some(Err(abort)) => return send_abort(&mut sink, abort).await,
                None => {
                    let _ = tokio::time::timeout(limits.write, sink.send(close(1000, "session ended"))).await;
                    return;
                }
            },
            _ = ping.tick() => (Message::Ping(bytes::Bytes::new()), None),
        };
        tokio::select! {
            sent = tokio::time::timeout(limits.write, sink.send(msg)) => match sent {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return,
                Err(_) => {
                    tracing::info!(write_timeout_secs = limits.write.as_secs(), "the client stopped reading; closing the websocket");
                    return;
                }
            },
            // An abort while a frame is half-written: no close frame can follow it.
            _ = events.aborted() => return,
        }
        drop(held);
    }
}

/// Sends an abort's `error` and close frame if the socket takes them at once.
async fn send_abort(sink: &mut SplitSink<WebSocket, Message>, abort: Abort) {
    let send = async {
        if let Some(error) = &abort.error {
            sink.send(text_frame(error)).await?;
        }
        sink.send(close(abort.code, &abort.reason)).await
    };
    let _ = tokio::time::timeout(ABORT_GRACE, send).await;
}
