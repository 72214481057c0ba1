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
use tokio::sync::{mpsc, oneshot};

use super::admission::{Kind, SidebandSlot};
use super::open::{open_session, spawn_session};
use super::secrets::{credential, Cred, Credential};
use super::{AppState, WsLimits};
use crate::error::{ApiError, Code};
use crate::protocol::{self, codes, ErrorPayload, ServerEvent, ServerEventBody, MAX_EVENT_BYTES};
use crate::session::{
    event_id_of, Abort, AttachmentId, Delivery, EventReceiver, Inbound, InboundBudget,
    InboundRefused, Rendered, SessionInput, Transport,
};
use crate::stores::usage::Opened;

/// Largest WebSocket message read; events over [`MAX_EVENT_BYTES`] but under this get an
/// `event_too_large` error and the session continues, larger ones close the socket (1009).
pub(super) const MAX_WS_MESSAGE: usize = MAX_EVENT_BYTES + 1024 * 1024;
/// Client events queued for the session before the reader waits (backpressure).
const INBOX: usize = 256;
/// How long a closing connection may take to send the session's last events.
const FLUSH: Duration = Duration::from_secs(2);
/// How long a resume socket may take to send `session.resume`.
const RESUME_FIRST_MESSAGE: Duration = Duration::from_secs(10);
/// How long an aborted connection may take to send its `error` and close frame.
const ABORT_GRACE: Duration = Duration::from_millis(100);

/// Query of `GET /v1/realtime`.
#[derive(Debug, Deserialize)]
pub struct RealtimeQuery {
    /// Accepted and ignored: the server runs one model, reported in `session.created`.
    pub model: Option<String>,
    /// Join a live WebRTC call's events (sideband control).
    pub call_id: Option<String>,
    /// Duplex extension: `1`, `true` or `on` opts in (sequenced events, resume).
    pub duplex: Option<String>,
    /// Duplex extension: `1` makes this a resume socket (its first message is
    /// `session.resume`; no session is opened for it).
    pub resume: Option<String>,
    /// `transcription` opens a transcription session (`session.created` says
    /// `type: "transcription"`); anything else a realtime one.
    pub intent: Option<String>,
    /// Extension: `1`, `true` or `on` reports the turn detector's decisions
    /// (`turn.scored`, `turn.overlap`; docs/turn-taking.md).
    pub turn_events: Option<String>,
}

/// Whether a query flag is on (`1`, `true`, `on`).
pub fn flag_on(v: Option<&str>) -> bool {
    matches!(v, Some("1" | "true" | "on"))
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
    cred: Cred,
    Query(q): Query<RealtimeQuery>,
    headers: axum::http::HeaderMap,
    placed: Option<Extension<super::cluster_routes::Placed>>,
    ws: WebSocketUpgrade,
) -> Response {
    let cred = credential(&cred);
    tracing::debug!(requested_model = ?q.model, "websocket session requested");
    let ws = ws
        .protocols(["realtime"])
        .max_message_size(MAX_WS_MESSAGE)
        .max_frame_size(MAX_WS_MESSAGE);
    let ip = peer_ip(&peer);
    let duplex = flag_on(q.duplex.as_deref());
    let asked = super::open::Asked {
        transcription: q.intent.as_deref() == Some("transcription"),
        turn_events: flag_on(q.turn_events.as_deref()),
    };
    let result = match q.call_id {
        None if duplex && flag_on(q.resume.as_deref()) => {
            let from = Origin { headers, ip };
            upgrade_resume(state, ws, cred, from)
        }
        _ if cred.resume_only() => Err(super::secrets::resume_only_refused()),
        Some(call) => upgrade_sideband(state, &call, ip, ws, &cred),
        None => {
            let wait = super::cluster_routes::admission_wait(&state, placed.is_some());
            upgrade_session(state, (ip, wait), ws, (duplex, asked), cred).await
        }
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

async fn upgrade_session(
    state: Arc<AppState>,
    (ip, wait): (Option<std::net::IpAddr>, std::time::Duration),
    ws: WebSocketUpgrade,
    (duplex, asked): (bool, super::open::Asked),
    cred: Credential,
) -> Result<Response, ApiError> {
    state.accepting()?;
    let key = cred.owner();
    let admitted = state
        .sessions
        .admissions
        .admit_waiting(Kind::Session, ip, key.as_deref(), wait)
        .await?;
    Ok(ws.on_upgrade(move |socket| async move {
        if duplex {
            run_durable(state, socket, admitted, cred, asked).await;
        } else {
            run(state, socket, cred, asked).await;
            drop(admitted);
        }
    }))
}

/// A resume socket: it holds no session of its own until its `session.resume` attaches it
/// to one.
fn upgrade_resume(
    state: Arc<AppState>,
    ws: WebSocketUpgrade,
    cred: Credential,
    from: Origin,
) -> Result<Response, ApiError> {
    if state.draining() {
        return Err(ApiError::draining());
    }
    Ok(ws.on_upgrade(move |socket| resume_socket(state, socket, cred, from)))
}

/// The upgrade request of a resume socket, for a cluster to carry it to the session's node.
struct Origin {
    headers: axum::http::HeaderMap,
    ip: Option<std::net::IpAddr>,
}

fn upgrade_sideband(
    state: Arc<AppState>,
    call: &str,
    ip: Option<std::net::IpAddr>,
    ws: WebSocketUpgrade,
    cred: &Credential,
) -> Result<Response, ApiError> {
    // A call another credential opened is not found (its existence is not revealed).
    let entry = state
        .calls
        .get(call)
        .filter(|e| cred.reaches(e.owner.as_deref()))
        .ok_or_else(|| ApiError::new(Code::CallNotFound, format!("no active call {call:?}")))?;
    if state.draining() {
        return Err(ApiError::draining());
    }
    let slot = SidebandSlot::take(&entry.sidebands)?;
    let admitted =
        state
            .sessions
            .admissions
            .admit_as(Kind::Session, ip, cred.owner().as_deref())?;
    Ok(ws.on_upgrade(move |socket| async move {
        sideband(state, socket, entry.session, entry.ended).await;
        drop((slot, admitted));
    }))
}

/// Counts a WebSocket that carries a session or a sideband, while it lives.
pub(super) struct Counted(Arc<std::sync::atomic::AtomicUsize>);

impl Counted {
    pub(super) fn new(state: &AppState) -> Self {
        state
            .sessions
            .websockets
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Self(state.sessions.websockets.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Opens a WebSocket session for `cred` (counted in its usage), or refuses the socket with
/// the model's error and close 1013.
async fn open_ws(
    state: &AppState,
    sink: &mut SplitSink<WebSocket, Message>,
    duplex: Option<AttachmentId>,
    cred: &Credential,
    asked: super::open::Asked,
) -> Option<super::open::Opened> {
    let credential = cred.usage_id();
    let start = cred.session();
    let initial = super::open::Initial {
        secret: start,
        patch: None,
        asked,
    };
    let opened = open_session(state, Transport::WebSocket, duplex, initial, &credential).await;
    match opened {
        Ok(o) => {
            state.credentials.usage.opened(&credential, Opened::Session);
            Some(o)
        }
        Err(e) => {
            let error = ErrorPayload::server(e.code(), e.to_string());
            refuse(sink, error, 1013, "model unavailable").await;
            None
        }
    }
}

async fn refuse(
    sink: &mut SplitSink<WebSocket, Message>,
    error: ErrorPayload,
    code: u16,
    reason: &str,
) {
    if let Some(c) = &error.code {
        crate::metrics::METRICS.error(c);
    }
    let err = ServerEvent::new(ServerEventBody::Error { error });
    let _ = sink.send(Message::Text(err.to_json().into())).await;
    let _ = sink.send(close(code, reason)).await;
}

async fn run(state: Arc<AppState>, socket: WebSocket, cred: Credential, asked: super::open::Asked) {
    let _counted = Counted::new(&state);
    let (mut sink, mut stream) = socket.split();
    let Some(opened) = open_ws(&state, &mut sink, None, &cred, asked).await else {
        return;
    };
    let (in_tx, in_rx) = mpsc::channel(INBOX);
    let span =
        tracing::info_span!("session", session = %opened.session.id(), transport = "websocket");
    tracing::info!(parent: &span, "session opened");
    let (events, mut actor) = spawn_session(&state, opened, (in_tx.clone(), in_rx), None, ());
    let (end_tx, end_rx) = oneshot::channel();
    let mut writer = tokio::spawn(write_loop(sink, events, state.sessions.ws, end_rx));
    let budget = state.inbound_budget();
    let (mut writer_done, mut actor_done) = (false, false);
    tokio::select! {
        end = read_loop(&mut stream, in_tx, budget, state.sessions.ws, Reader::GA) => {
            let _ = end_tx.send(end);
        }
        _ = &mut writer => writer_done = true,
        _ = &mut actor => actor_done = true,
    }
    // The reader's end closes the session's inbox: the session ends and its last events
    // leave (unless the client closed, or stopped reading); the writer closes as the reader's
    // end says.
    if !writer_done && tokio::time::timeout(FLUSH, &mut writer).await.is_err() {
        writer.abort();
    }
    if !actor_done {
        let _ = actor.await;
    }
    tracing::info!(parent: &span, "session closed");
}

/// An opted-in session (`?duplex=1`): its actor runs on its own, holding the admission
/// and listed in the directory, until the session ends; this connection is its first
/// attachment, and dropping it detaches the session instead of ending it.
async fn run_durable(
    state: Arc<AppState>,
    socket: WebSocket,
    admitted: super::Admitted,
    cred: Credential,
    asked: super::open::Asked,
) {
    let (mut sink, stream) = socket.split();
    let attachment = AttachmentId::fresh();
    let Some(opened) = open_ws(&state, &mut sink, Some(attachment), &cred, asked).await else {
        return;
    };
    let (in_tx, in_rx) = mpsc::channel(INBOX);
    tracing::info!(session = %opened.session.id(), transport = "websocket", "durable session opened");
    let inbox = (in_tx.clone(), in_rx);
    let (events, _) = spawn_session(&state, opened, inbox, cred.owner(), admitted);
    attach(&state, sink, stream, events, in_tx, attachment).await;
}

/// A resume socket's first message, which must be a well-formed `session.resume` within
/// [`RESUME_FIRST_MESSAGE`]; otherwise the error to refuse the socket with (`None`: the
/// connection ended first).
async fn first_resume(
    stream: &mut SplitStream<WebSocket>,
) -> Result<(protocol::duplex::ResumeRequest, Utf8Bytes), Option<ErrorPayload>> {
    let invalid = |message: String, param: Option<String>| {
        crate::metrics::METRICS.resume(codes::INVALID_SESSION_RESUME);
        let mut error = ErrorPayload::invalid(codes::INVALID_SESSION_RESUME, message);
        error.param = param;
        Some(error)
    };
    let first = match tokio::time::timeout(RESUME_FIRST_MESSAGE, stream.next()).await {
        Err(_) => {
            let message = format!(
                "no session.resume within {} s",
                RESUME_FIRST_MESSAGE.as_secs()
            );
            return Err(Some(ErrorPayload::invalid(codes::CONFIG_TIMEOUT, message)));
        }
        Ok(Some(Ok(Message::Text(text)))) => text,
        Ok(Some(Ok(Message::Binary(_)))) => {
            return Err(invalid(
                "the first message of a resume socket must be session.resume, as JSON text".into(),
                None,
            ))
        }
        Ok(_) => return Err(None),
    };
    match protocol::decode_duplex(first.as_str()) {
        Ok(protocol::Envelope {
            event: protocol::ClientEvent::SessionResume(r),
            ..
        }) => Ok((r, first)),
        Ok(_) => Err(invalid(
            "the first message of a resume socket must be session.resume".into(),
            None,
        )),
        Err(e) => Err(invalid(format!("session.resume: {}", e.message), e.param)),
    }
}

/// `?duplex=1&resume=1`: waits for `session.resume` and hands this connection to the
/// session it names, which answers `session.resumed` and the replay (or an `error` and a
/// close).
async fn resume_socket(state: Arc<AppState>, socket: WebSocket, cred: Credential, from: Origin) {
    let (mut sink, mut stream) = socket.split();
    let (request, first) = match first_resume(&mut stream).await {
        Ok(request) => request,
        Err(Some(error)) => {
            let code = error.code.clone().unwrap_or_default();
            return refuse(&mut sink, error, 1008, &code).await;
        }
        Err(None) => return,
    };
    let expired = || {
        crate::metrics::METRICS.resume(codes::SESSION_RESUME_EXPIRED);
        ErrorPayload::invalid(
            codes::SESSION_RESUME_EXPIRED,
            "no live session with this id: it ended, expired or never existed",
        )
    };
    if let Some(owner) = super::cluster_routes::remote_owner(&state, &request.session_id) {
        let upstream =
            super::cluster_routes::resume_upstream(&state, &owner, from.headers, from.ip).await;
        return match (upstream, sink.reunite(stream)) {
            (Some(up), Ok(socket)) => {
                let ends = super::ws_proxy::Ends::of(&state);
                super::ws_proxy::pump_after(socket, up, first.to_string(), ends).await
            }
            (None, Ok(socket)) => {
                let (mut sink, _) = socket.split();
                refuse(&mut sink, expired(), 1008, codes::SESSION_RESUME_EXPIRED).await;
            }
            (_, Err(_)) => {}
        };
    }
    // Another credential's session is as good as unknown; the resume token alone stands
    // for a secret that expired since it opened the session.
    let found = state.sessions.directory.get(&request.session_id);
    let Some(inbox) = found
        .filter(|e| cred.resume_only() || cred.reaches(e.owner.as_deref()))
        .map(|e| e.inbox)
    else {
        return refuse(&mut sink, expired(), 1008, codes::SESSION_RESUME_EXPIRED).await;
    };
    let attachment = AttachmentId::fresh();
    let (out, events) = state.event_queue();
    let resume = Inbound {
        input: SessionInput::Resume {
            request,
            out,
            attachment,
            transport: Transport::WebSocket,
            reply: None,
        },
        hold: None,
        from: attachment,
    };
    if inbox.send(resume).await.is_err() {
        return refuse(&mut sink, expired(), 1008, codes::SESSION_RESUME_EXPIRED).await;
    }
    attach(&state, sink, stream, events, inbox, attachment).await;
}

/// Carries an opted-in session on this connection until either side ends it, then tells
/// the session the connection dropped (ignored if it was replaced meanwhile).
async fn attach(
    state: &AppState,
    sink: SplitSink<WebSocket, Message>,
    mut stream: SplitStream<WebSocket>,
    events: EventReceiver,
    inbox: mpsc::Sender<Inbound>,
    attachment: AttachmentId,
) {
    let _counted = Counted::new(state);
    let (end_tx, end_rx) = oneshot::channel();
    let mut writer = tokio::spawn(write_loop(sink, events, state.sessions.ws, end_rx));
    let budget = state.inbound_budget();
    let reader = Reader {
        from: attachment,
        duplex: true,
    };
    let mut writer_done = false;
    tokio::select! {
        end = read_loop(&mut stream, inbox.clone(), budget, state.sessions.ws, reader) => {
            let _ = end_tx.send(end);
        }
        _ = &mut writer => writer_done = true,
    }
    let detach = Inbound {
        input: SessionInput::Detach,
        hold: None,
        from: attachment,
    };
    let _ = inbox.send(detach).await;
    if !writer_done && tokio::time::timeout(FLUSH, &mut writer).await.is_err() {
        writer.abort();
    }
}

/// A sideband connection (`?call_id=`): the same events as the call's data channel, and
/// client events into the call's session (server-side control). Closing it leaves the call
/// as it was; the call's end (hangup, timeout, or its session taken over by another
/// connection) ends it with close 1000 `call ended`, even if the session lives on.
async fn sideband(
    state: Arc<AppState>,
    socket: WebSocket,
    session: mpsc::Sender<Inbound>,
    mut ended: tokio::sync::watch::Receiver<()>,
) {
    let _counted = Counted::new(&state);
    let (mut sink, mut stream) = socket.split();
    let (tx, mut events) = state.event_queue();
    if session.send(SessionInput::Attach(tx).into()).await.is_err() {
        return;
    }
    let budget = state.inbound_budget();
    let call_ended = async {
        // Errs once the call's guard (the only sender) is dropped.
        while ended.changed().await.is_ok() {}
    };
    // The reader's end is handled here, after the select: nothing tells the writer.
    let (_never, mut no_end) = oneshot::channel();
    tokio::select! {
        end = read_loop(&mut stream, session, budget, state.sessions.ws, Reader::GA) => {
            finish(&mut sink, end, state.sessions.ws).await;
        }
        _ = write_events(&mut sink, &mut events, state.sessions.ws, &mut no_end) => {}
        _ = call_ended => send_close(&mut sink, close(1000, "call ended"), state.sessions.ws).await,
    }
}

/// Sends a Close frame the server starts. When the client's Close came first, the send is
/// refused (nothing may follow it) and flushing instead sends the answer to it that the
/// WebSocket library queued.
async fn send_close(sink: &mut SplitSink<WebSocket, Message>, frame: Message, limits: WsLimits) {
    if let Ok(Err(_)) = tokio::time::timeout(limits.write, sink.send(frame)).await {
        let _ = tokio::time::timeout(ABORT_GRACE, sink.close()).await;
    }
}

/// Ends the connection as the reader's end says (RFC 6455 §5.5.1, §7.4): the client's Close
/// is answered with a Close frame (its code echoed), a silent client gets 1001, an
/// oversized message 1009; a broken connection gets nothing; when the session ended, the
/// writer sends the session's close.
async fn finish(sink: &mut SplitSink<WebSocket, Message>, end: ReadEnd, limits: WsLimits) {
    match end {
        // Flushing sends the answer the library queued when it read the client's Close.
        ReadEnd::Closed => {
            let _ = tokio::time::timeout(limits.write, sink.close()).await;
        }
        ReadEnd::Idle => {
            send_close(sink, close(1001, "idle: no frame from the client"), limits).await
        }
        ReadEnd::TooBig => {
            let reason = format!("message over {} bytes", MAX_WS_MESSAGE);
            send_close(sink, close(1009, &reason), limits).await;
        }
        ReadEnd::Broken | ReadEnd::Session => {}
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

/// Who reads: the connection its input is tagged with, and whether it speaks the duplex
/// extension.
#[derive(Clone, Copy)]
struct Reader {
    from: AttachmentId,
    duplex: bool,
}

impl Reader {
    /// A GA connection (or a sideband): untagged, GA events only.
    const GA: Self = Self {
        from: AttachmentId::ANY,
        duplex: false,
    };
}

/// How the client's side of a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadEnd {
    /// The client sent a Close frame.
    Closed,
    /// No frame within `--ws-idle-secs`.
    Idle,
    /// A message over [`MAX_WS_MESSAGE`].
    TooBig,
    /// The connection broke (a reset, an end without a Close frame, a protocol error).
    Broken,
    /// The session no longer takes events (it ended).
    Session,
}

async fn read_loop(
    stream: &mut SplitStream<WebSocket>,
    inbox: mpsc::Sender<Inbound>,
    budget: InboundBudget,
    limits: WsLimits,
    reader: Reader,
) -> ReadEnd {
    loop {
        let input = match next_frame(stream, limits).await {
            Frame::End(end) => return end,
            Frame::Skip => continue,
            Frame::Invalid(err) => Inbound {
                input: SessionInput::Invalid(err),
                hold: None,
                from: reader.from,
            },
            Frame::Text(text) => match take_text(text, &budget, reader).await {
                Some(inbound) => inbound,
                None => return ReadEnd::Session,
            },
        };
        if inbox.send(input).await.is_err() {
            return ReadEnd::Session;
        }
    }
}

/// What one client frame is to the reader.
enum Frame {
    /// A text frame: an event.
    Text(Utf8Bytes),
    /// A frame answered with an error (a binary one).
    Invalid(ErrorPayload),
    /// Nothing for the session (ping, pong).
    Skip,
    /// The connection ended (close, idle, error).
    End(ReadEnd),
}

/// The client's next frame, within `--ws-idle-secs`.
async fn next_frame(stream: &mut SplitStream<WebSocket>, limits: WsLimits) -> Frame {
    let msg = match tokio::time::timeout(limits.idle, stream.next()).await {
        Err(_) => {
            tracing::info!(
                idle_secs = limits.idle.as_secs(),
                "no frame from the client; closing the websocket"
            );
            return Frame::End(ReadEnd::Idle);
        }
        Ok(None) => return Frame::End(ReadEnd::Broken),
        Ok(Some(msg)) => msg,
    };
    match msg {
        Ok(Message::Text(text)) => Frame::Text(text),
        Ok(Message::Binary(_)) => Frame::Invalid(ErrorPayload::invalid(
            codes::INVALID_JSON,
            "binary frames are not supported; send JSON events as text frames",
        )),
        Ok(Message::Close(_)) => Frame::End(ReadEnd::Closed),
        Ok(Message::Ping(_) | Message::Pong(_)) => Frame::Skip,
        Err(e) => {
            tracing::debug!(error = %e, "websocket read ended");
            let too_big = e
                .into_inner()
                .downcast_ref::<tokio_tungstenite::tungstenite::Error>()
                .is_some_and(|e| matches!(e, tokio_tungstenite::tungstenite::Error::Capacity(_)));
            Frame::End(if too_big {
                ReadEnd::TooBig
            } else {
                ReadEnd::Broken
            })
        }
    }
}

/// An event for the session: its bytes counted until the session handled it (waiting while
/// the connection's cap is full), then decoded. Past the memory budget it becomes the
/// `server_memory_exhausted` error and the connection goes on. `None`: the budget closed.
async fn take_text(text: Utf8Bytes, budget: &InboundBudget, reader: Reader) -> Option<Inbound> {
    let hold = match budget.acquire(text.len()).await {
        Ok(hold) => hold,
        Err(InboundRefused::Busy) => return None,
        Err(InboundRefused::Memory(e)) => {
            return Some(Inbound {
                input: SessionInput::Invalid(e.error().with_event_id(event_id_of(&text))),
                hold: None,
                from: reader.from,
            })
        }
    };
    let decoded = if reader.duplex {
        protocol::decode_duplex(text.as_str())
    } else {
        protocol::decode(text.as_str())
    };
    let input = match decoded {
        Ok(env) => SessionInput::Client(env),
        Err(e) => SessionInput::Invalid(e),
    };
    drop(text);
    Some(Inbound {
        input,
        hold: Some(hold),
        from: reader.from,
    })
}

async fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    mut events: EventReceiver,
    limits: WsLimits,
    mut reader_end: oneshot::Receiver<ReadEnd>,
) {
    write_events(&mut sink, &mut events, limits, &mut reader_end).await;
}

/// Sends the session's events until it closes the queue (then a close frame), aborts, the
/// client stops reading, or the reader's end arrives (then the connection ends as that
/// says: see [`finish`]).
async fn write_events(
    sink: &mut SplitSink<WebSocket, Message>,
    events: &mut EventReceiver,
    limits: WsLimits,
    reader_end: &mut oneshot::Receiver<ReadEnd>,
) {
    let start = tokio::time::Instant::now() + limits.ping;
    let mut ping = tokio::time::interval_at(start, limits.ping);
    let mut reader_open = true;
    loop {
        let (msg, held) = tokio::select! {
            biased;
            end = &mut *reader_end, if reader_open => match end {
                Ok(ReadEnd::Session) | Err(_) => {
                    // The session's own close follows on the queue.
                    reader_open = false;
                    continue;
                }
                Ok(end) => return finish(sink, end, limits).await,
            },
            next = events.recv() => match next {
                Some(Ok(Delivery::Event(event, held))) => (text_frame(&event), Some(held)),
                Some(Ok(Delivery::Close { code, reason })) => {
                    return send_close(sink, close(code, &reason), limits).await;
                }
                Some(Err(abort)) => return send_abort(sink, abort).await,
                None => return send_close(sink, close(1000, "session ended"), limits).await,
            },
            _ = ping.tick() => (Message::Ping(bytes::Bytes::new()), None),
        };
        tokio::select! {
            sent = tokio::time::timeout(limits.write, sink.send(msg)) => match sent {
                Ok(Ok(())) => {}
                // Refused after the client's Close (nothing may follow it): flushing sends
                // the answer to it that the library queued.
                Ok(Err(_)) => {
                    let _ = tokio::time::timeout(ABORT_GRACE, sink.close()).await;
                    return;
                }
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
