//! `GET /v1/realtime`: the WebSocket transport. A reader turns text frames into session
//! inputs, a writer renders the session's events; the session actor sits between them.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::sync::mpsc;

use super::http::error_response;
use super::AppState;
use crate::protocol::{self, codes, ErrorPayload, ServerEvent, ServerEventBody, MAX_EVENT_BYTES};
use crate::session::{Outbound, Session, SessionInput, SessionParams, Transport};

/// Largest WebSocket message read; events over [`MAX_EVENT_BYTES`] but under this get an
/// `event_too_large` error and the session continues, larger ones close the socket (1009).
const MAX_WS_MESSAGE: usize = MAX_EVENT_BYTES + 1024 * 1024;
/// Client events queued for the session before the reader waits (backpressure).
const INBOX: usize = 256;

/// Query of `GET /v1/realtime`.
#[derive(Debug, Deserialize)]
pub struct RealtimeQuery {
    /// Accepted and ignored: the server runs one model, reported in `session.created`.
    pub model: Option<String>,
    /// Join a live WebRTC call's events (sideband control).
    pub call_id: Option<String>,
}

/// Upgrades to a session.
pub async fn upgrade(
    State(state): State<Arc<AppState>>,
    Query(q): Query<RealtimeQuery>,
    ws: WebSocketUpgrade,
) -> Response {
    tracing::debug!(requested_model = ?q.model, "websocket session requested");
    if let Some(call) = q.call_id {
        let entry = state.calls.lock().ok().and_then(|m| m.get(&call).cloned());
        let Some(entry) = entry else {
            return error_response(
                StatusCode::NOT_FOUND,
                "call_not_found",
                format!("no active call {call:?}"),
            );
        };
        let queue = state.limits.max_outbound_events;
        return ws
            .protocols(["realtime"])
            .max_message_size(MAX_WS_MESSAGE)
            .max_frame_size(MAX_WS_MESSAGE)
            .on_upgrade(move |socket| sideband(socket, entry.session, queue));
    }
    if !state.model.is_ready() {
        return error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            "the model is still warming up",
        );
    }
    let open = state.sessions.fetch_add(1, Ordering::AcqRel);
    if open >= state.max_sessions {
        state.sessions.fetch_sub(1, Ordering::AcqRel);
        return error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_busy",
            format!(
                "the server is at its limit of {} sessions",
                state.max_sessions
            ),
        );
    }
    let guard = SessionGuard(state.clone());
    ws.protocols(["realtime"])
        .max_message_size(MAX_WS_MESSAGE)
        .max_frame_size(MAX_WS_MESSAGE)
        .on_upgrade(move |socket| async move {
            run(guard.0.clone(), socket).await;
            drop(guard);
        })
}

/// Decrements the open-session count when the connection ends, however it ends.
struct SessionGuard(Arc<AppState>);

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.0.sessions.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn run(state: Arc<AppState>, socket: WebSocket) {
    let (mut sink, mut stream) = socket.split();
    let (model, model_rx) = match state.model.open().await {
        Ok(m) => m,
        Err(e) => {
            let err = ServerEvent::new(ServerEventBody::Error {
                error: ErrorPayload::server(e.code(), e.to_string()),
            });
            let _ = sink.send(Message::Text(err.to_json().into())).await;
            let _ = sink.send(close(1013, "model unavailable")).await;
            return;
        }
    };
    let (out_tx, out_rx) = mpsc::channel(state.limits.max_outbound_events);
    let (in_tx, in_rx) = mpsc::channel(INBOX);
    let session = Session::new(SessionParams {
        transport: Transport::WebSocket,
        model_name: state.model.info().name.clone(),
        model,
        model_frame: state.model.info().frame_samples,
        limits: state.limits.clone(),
        out: out_tx,
    });
    let span = tracing::info_span!("session", session = %session.id(), transport = "websocket");
    let _enter = span.enter();
    tracing::info!("session opened");
    drop(_enter);
    let actor = tokio::spawn(session.run(in_rx, model_rx));
    let writer = tokio::spawn(write_loop(sink, out_rx));
    tokio::select! {
        _ = read_loop(&mut stream, in_tx) => {}
        _ = wait(writer) => {}
    }
    let _ = actor.await;
    tracing::info!(parent: &span, "session closed");
}

/// A sideband connection (`?call_id=`): the same events as the call's data channel, and
/// client events into the call's session (server-side control).
async fn sideband(socket: WebSocket, session: mpsc::Sender<SessionInput>, queue: usize) {
    let (sink, mut stream) = socket.split();
    let (out_tx, out_rx) = mpsc::channel(queue);
    if session.send(SessionInput::Attach(out_tx)).await.is_err() {
        return;
    }
    let writer = tokio::spawn(write_loop(sink, out_rx));
    tokio::select! {
        _ = read_loop(&mut stream, session) => {}
        _ = wait(writer) => {}
    }
}

async fn wait(task: tokio::task::JoinHandle<()>) {
    let _ = task.await;
}

fn close(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: Utf8Bytes::from(reason.to_string()),
    }))
}

async fn read_loop(
    stream: &mut futures_util::stream::SplitStream<WebSocket>,
    inbox: mpsc::Sender<SessionInput>,
) {
    while let Some(msg) = stream.next().await {
        let input = match msg {
            Ok(Message::Text(text)) => match protocol::decode(text.as_str()) {
                Ok(env) => SessionInput::Client(env),
                Err(e) => SessionInput::Invalid(e),
            },
            Ok(Message::Binary(_)) => SessionInput::Invalid(ErrorPayload::invalid(
                codes::INVALID_JSON,
                "binary frames are not supported; send JSON events as text frames",
            )),
            Ok(Message::Close(_)) => return,
            Ok(Message::Ping(_) | Message::Pong(_)) => continue,
            Err(e) => {
                tracing::debug!(error = %e, "websocket read ended");
                return;
            }
        };
        if inbox.send(input).await.is_err() {
            return;
        }
    }
}

async fn write_loop(
    mut sink: futures_util::stream::SplitSink<WebSocket, Message>,
    mut out: mpsc::Receiver<Outbound>,
) {
    while let Some(item) = out.recv().await {
        let msg = match item {
            Outbound::Event(ev) => Message::Text(ev.to_json().into()),
            Outbound::Close { code, reason } => {
                let _ = sink.send(close(code, &reason)).await;
                return;
            }
        };
        if sink.send(msg).await.is_err() {
            return;
        }
    }
    let _ = sink.send(close(1000, "session ended")).await;
}
