//! The SIP stack (`rsipstack`, pinned; no other file uses it): one endpoint on UDP and TCP,
//! the loop of new server transactions, and the loop of dialog states, each routed to its
//! call's task. Retransmitted requests, ACKs and CANCELs are the stack's own business (a
//! CANCEL gets its `200` and the INVITE its `487` while the call's INVITE transaction is
//! driven); out-of-dialog OPTIONS get `200`, anything else out of dialog `481` or `405`
//! ([`sip_call::out_of_dialog`]).
//!
//! The calls see the stack through this file's small types only: a new INVITE
//! ([`Invite`]), its transaction ([`InviteTransaction`]), the dialog ([`Dialog`]), its news
//! ([`DialogEvent`], a request in it [`InDialog`]) and the endpoint's stop ([`Stop`]), in the
//! words of `duet_signaling::sip_call` ([`Status`], [`SipMethod`]), where the decisions are.
//!
//! The endpoint (sockets, parsing, transactions and their timers) and the answers to every
//! request run on their own thread and runtime (`duet-sip`), so nothing they do, a flood
//! included, can stall HTTP, WebSockets or sessions; only a new INVITE that got a ringing
//! place becomes a call task on the server's runtime. Before any
//! parsing, a source `--sip-allow` refuses is dropped (UDP datagrams, TCP connections at
//! accept); before any transaction, a new INVITE over its source's `--sip-invite-rate` is
//! dropped. TCP is Duet's own accept loop: capped in all and per source, the first bytes
//! due within [`FIRST_BYTES`], accept errors backed off and logged once a minute at most.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use duet_signaling::sip_call::{self, DialogEnd, Method as SipMethod, Status};
use rsipstack::dialog::dialog::{
    DialogState, DialogStateReceiver, DialogStateSender, TerminatedReason, TransactionHandle,
};
use rsipstack::dialog::dialog_layer::DialogLayer;
use rsipstack::dialog::invite_dialog::InviteDialog;
use rsipstack::platform::CancellationToken;
use rsipstack::sip::prelude::HeadersExt;
use rsipstack::sip::{Header, Method, Request, SipMessage, StatusCode};
use rsipstack::transaction::endpoint::{EndpointInnerRef, TransportEventInspector};
use rsipstack::transaction::{Transaction, TransactionReceiver};
use rsipstack::transport::tcp::TcpConnection;
use rsipstack::transport::TransportLayer;
use rsipstack::transport::{udp::UdpConnection, SipAddr, SipConnection, TransportEvent};
use rsipstack::EndpointBuilder;
use tokio::sync::{mpsc, oneshot};

use super::limits::{InviteRate, TcpSlot, TcpSlots};
use super::{call, SipCalls, SipSettings};
use crate::calls::PhoneHost;
use crate::metrics::METRICS;

/// How long a SIP TCP connection may stay silent after accept before it is closed.
const FIRST_BYTES: Duration = Duration::from_secs(10);
/// The pause after a failed TCP accept (out of file descriptors, say).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// At most one log line per this long about failed TCP accepts.
const ACCEPT_LOG_EVERY: Duration = Duration::from_secs(60);

/// How long a final failure answer (4xx–6xx) is retransmitted while no ACK comes (Timer G
/// at 0.5 s, 1.5 s): then its transaction is dropped, a resent INVITE still gets the answer
/// once more and its ACK is absorbed. RFC 3261 would go on for 32 s, to a source that may
/// be spoofed (about ten datagrams for one INVITE).
const FINAL_RESENT_FOR: Duration = Duration::from_secs(2);

/// Dialog news by dialog id, to the call that owns the dialog.
pub(super) type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<DialogEvent>>>>;

/// What every call task shares.
pub(super) struct Shared {
    pub settings: SipSettings,
    pub host: Arc<dyn PhoneHost>,
    pub calls: Arc<SipCalls>,
    pub dialogs: Arc<DialogLayer>,
    pub routes: Routes,
    pub states: DialogStateSender,
    /// The address SIP is answered on (the Contact's port).
    pub local: SocketAddr,
}

/// The endpoint, started on its thread.
struct Started {
    local: SocketAddr,
    inner: EndpointInnerRef,
    incoming: TransactionReceiver,
    /// The SIP thread's runtime.
    runtime: tokio::runtime::Handle,
}

/// Binds UDP and TCP on `settings.listen` (TCP on UDP's port when that was 0) and starts
/// the endpoint on its own thread; returns the bound address and the token that stops it.
pub(super) async fn start(
    settings: SipSettings,
    host: Arc<dyn PhoneHost>,
    calls: Arc<SipCalls>,
) -> anyhow::Result<(SocketAddr, Stop)> {
    let token = CancellationToken::new();
    let (ready, started) = oneshot::channel();
    let (thread_settings, thread_token) = (settings.clone(), token.clone());
    std::thread::Builder::new()
        .name("duet-sip".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            match runtime {
                Ok(rt) => rt.block_on(endpoint_thread(thread_settings, thread_token, ready)),
                Err(e) => {
                    let _ = ready.send(Err(e.into()));
                }
            }
        })?;
    let Started {
        local,
        inner,
        incoming,
        runtime,
    } = started
        .await
        .map_err(|_| anyhow::anyhow!("the SIP thread ended"))??;
    let dialogs = Arc::new(DialogLayer::new(inner));
    let (states, state_rx) = dialogs.new_dialog_state_channel();
    let shared = Arc::new(Shared {
        settings,
        host,
        calls,
        dialogs,
        routes: Routes::default(),
        states,
        local,
    });
    tokio::spawn(route_states(
        shared.routes.clone(),
        shared.dialogs.clone(),
        state_rx,
    ));
    let calls_runtime = tokio::runtime::Handle::current();
    runtime.spawn(incoming_loop(shared, incoming, calls_runtime));
    Ok((local, Stop(token)))
}

/// Each dialog state to its call; a terminated dialog is forgotten.
async fn route_states(routes: Routes, dialogs: Arc<DialogLayer>, mut rx: DialogStateReceiver) {
    while let Some(state) = rx.recv().await {
        let did = state.id().clone();
        let id = did.to_string();
        let terminated = matches!(state, DialogState::Terminated(..));
        let route = routes.lock().ok().and_then(|r| r.get(&id).cloned());
        if let Some(tx) = route {
            let _ = tx.send(DialogEvent::of(state));
        }
        if terminated {
            if let Ok(mut r) = routes.lock() {
                r.remove(&id);
            }
            dialogs.remove_dialog(&did);
        }
    }
}

/// On the SIP thread: a new INVITE from an allowed source that gets a ringing place becomes
/// its call's task on the server's runtime (`calls`); every other request is answered here,
/// each on its own task (answering may wait for a transaction's response).
async fn incoming_loop(
    shared: Arc<Shared>,
    mut incoming: TransactionReceiver,
    calls: tokio::runtime::Handle,
) {
    while let Some(tx) = incoming.recv().await {
        let shared = shared.clone();
        if is_new_invite(&tx) && !refused(&shared, &tx) {
            if let Some(ring) = call::ring_slot(&shared) {
                calls.spawn(call::invite(shared, Invite(tx), ring));
                continue;
            }
        }
        tokio::spawn(async move { request(shared, tx).await });
    }
}

/// An INVITE out of any dialog (no To tag).
fn is_new_invite(tx: &Transaction) -> bool {
    tx.original.method == Method::Invite
        && tx
            .original
            .to_header()
            .and_then(|t| t.tag())
            .is_ok_and(|tag| tag.is_none())
}

/// Whether `tx` came from a source `--sip-allow` refuses (dropped by the transport before
/// now, except on a connection Duet opened itself).
fn refused(shared: &Shared, tx: &Transaction) -> bool {
    let source = tx
        .connection
        .as_ref()
        .and_then(|c| c.get_remote_addr())
        .and_then(|a| a.get_socketaddr().ok());
    source.is_some_and(|s| !shared.settings.allows(s.ip()))
}

async fn request(shared: Arc<Shared>, mut tx: Transaction) {
    if refused(&shared, &tx) {
        crate::metrics::METRICS.sip_call("refused");
        let _ = tx.reply(status_code(Status::FORBIDDEN)).await;
        return;
    }
    let Ok(to_tag) = tx.original.to_header().and_then(|t| t.tag()) else {
        // No To header: nothing can be answered (a reply needs it to add a tag).
        return;
    };
    if to_tag.is_some() {
        match shared.dialogs.match_dialog(&tx) {
            // The dialog's handler answers BYE itself and hands INFO, UPDATE, re-INVITE,
            // NOTIFY and REFER to the call as dialog states.
            Some(mut d) => {
                if let Err(e) = d.handle(&mut tx).await {
                    tracing::debug!(error = %e, "SIP in-dialog request failed");
                }
                if tx.last_response.is_none() {
                    // A request the dialog did not take (not confirmed yet): say so.
                    let _ = tx.reply(status_code(Status::REQUEST_PENDING)).await;
                }
            }
            None => {
                let _ = tx.reply(status_code(Status::NO_SUCH_CALL)).await;
            }
        }
        return;
    }
    let method = sip_method(&tx.original.method);
    let answer = sip_call::out_of_dialog(method);
    if method == SipMethod::Invite {
        // A new INVITE here found no ringing place.
        METRICS.sip_call("ringing_full");
        Invite(tx).refuse(answer.status).await;
        return;
    }
    let mut headers = Vec::new();
    if answer.allow {
        headers.push(Header::Allow(sip_call::ALLOW.into()));
    }
    if answer.accept_sdp {
        headers.push(Header::Accept("application/sdp".into()));
    }
    let _ = if headers.is_empty() {
        tx.reply(status_code(answer.status)).await
    } else {
        tx.reply_with(status_code(answer.status), headers, None)
            .await
    };
}

/// The stack's status code for `status`.
fn status_code(status: Status) -> StatusCode {
    StatusCode::from(status.code())
}

/// A method in the words of the decisions.
fn sip_method(method: &Method) -> SipMethod {
    match method {
        Method::Invite => SipMethod::Invite,
        Method::Ack => SipMethod::Ack,
        Method::Bye => SipMethod::Bye,
        Method::Cancel => SipMethod::Cancel,
        Method::Options => SipMethod::Options,
        Method::Info => SipMethod::Info,
        Method::Update => SipMethod::Update,
        Method::Refer => SipMethod::Refer,
        Method::Notify => SipMethod::Notify,
        Method::Message => SipMethod::Message,
        Method::Publish => SipMethod::Publish,
        _ => SipMethod::Other,
    }
}

/// A new INVITE (out of any dialog) that a call takes.
pub(super) struct Invite(Transaction);

impl Invite {
    /// Its body (an SDP offer, or nothing: a late offer).
    pub fn body(&self) -> &[u8] {
        &self.0.original.body
    }

    /// Its headers (name, value), in order.
    pub fn headers(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.0
            .original
            .headers
            .iter()
            .map(|h| (h.name().to_string(), h.value().to_string()))
    }

    /// Answers it `status` with no dialog made, and absorbs its ACK (for a short while: see
    /// [`FINAL_RESENT_FOR`]).
    pub async fn refuse(mut self, status: Status) {
        let tx = &mut self.0;
        if tx.reply(status_code(status)).await.is_ok() {
            let _ = tokio::time::timeout(FINAL_RESENT_FOR, async {
                while tx.receive().await.is_some() {}
            })
            .await;
        }
    }

    /// Makes its dialog (the Contact on the transport it came in on), answers `100 Trying`
    /// and drives the transaction from now on; the dialog's news come on the receiver.
    /// `None`: no dialog could be made (no Contact?), and `400` was answered.
    pub async fn open(
        self,
        shared: &Shared,
    ) -> Option<(
        Dialog,
        mpsc::UnboundedReceiver<DialogEvent>,
        InviteTransaction,
    )> {
        let tcp = self
            .0
            .connection
            .as_ref()
            .is_some_and(|c| c.transport() != rsipstack::sip::Transport::Udp);
        let contact = contact(shared, tcp);
        let dialog = match shared.dialogs.get_or_create_server_invite(
            &self.0,
            shared.states.clone(),
            None,
            contact,
        ) {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!(error = %e, "SIP INVITE without a dialog (no Contact?)");
                self.refuse(Status::BAD_REQUEST).await;
                return None;
            }
        };
        let mut tx = self.0;
        // 100 at once (the caller stops retransmitting), then 180 from the call.
        let _ = tx.send_trying().await;
        let (events_tx, events) = mpsc::unbounded_channel();
        if let Ok(mut r) = shared.routes.lock() {
            r.insert(dialog.id().to_string(), events_tx);
        }
        let mut driver = dialog.clone();
        // The INVITE transaction: 100, the queued 180s and final answer, 2xx retransmissions
        // until the ACK, a CANCEL's 487.
        let task = tokio::spawn(async move {
            if let Err(e) = driver.handle(&mut tx).await {
                tracing::debug!(error = %e, "SIP INVITE transaction ended");
            }
        });
        Some((Dialog(dialog), events, InviteTransaction(task)))
    }
}

/// Our Contact (the transport the call came in on, or the dialog would move to UDP).
fn contact(shared: &Shared, tcp: bool) -> Option<rsipstack::sip::Uri> {
    let addr = SocketAddr::new(shared.settings.public, shared.local.port());
    let uri = if tcp {
        format!("sip:duet@{addr};transport=tcp")
    } else {
        format!("sip:duet@{addr}")
    };
    uri.as_str().try_into().ok()
}

/// A new INVITE's transaction, driven on its own task.
pub(super) struct InviteTransaction(tokio::task::JoinHandle<()>);

impl InviteTransaction {
    /// Once the call is decided: a `200 OK`'s transaction runs on to its end; a final
    /// failure answer is resent for a short while only (see [`FINAL_RESENT_FOR`]), then the
    /// transaction goes.
    pub async fn finish(mut self, accepted: bool) {
        if !accepted {
            let _ = tokio::time::timeout(FINAL_RESENT_FOR, &mut self.0).await;
            self.0.abort();
        }
    }
}

/// A call's dialog (the server side of its INVITE).
#[derive(Clone)]
pub(super) struct Dialog(InviteDialog);

/// What the caller's side made of a REFER.
pub(super) enum ReferAnswer {
    /// It answered `status` (`line`: the status as the stack writes it).
    Answered(Status, String),
    /// The dialog is not established yet.
    NotEstablished,
    /// The target is not a SIP URI.
    BadTarget,
    /// The REFER failed (no answer, transport).
    Failed(String),
}

impl Dialog {
    /// Sends the INVITE `status`: `180 Ringing`, or a final failure (the dialog ends).
    pub fn send(&self, status: Status) {
        if status.is_provisional() {
            let _ = self.0.ringing(None, None);
        } else {
            let _ = self.0.reject(Some(status_code(status)), None);
        }
    }

    /// Answers the INVITE `200 OK` with `sdp`.
    pub fn accept(&self, sdp: &str) {
        let headers = vec![Header::ContentType("application/sdp".into())];
        let _ = self.0.accept(Some(headers), Some(sdp.as_bytes().to_vec()));
    }

    /// The ACK's body (a late offer's answer), empty when none came.
    pub fn ack_body(&self) -> Vec<u8> {
        self.0.last_remote_ack().map(|a| a.body).unwrap_or_default()
    }

    /// BYE, on its own task (it waits for the answer, up to 32 s on UDP).
    pub fn bye(&self) {
        let d = self.0.clone();
        tokio::spawn(async move {
            let _ = d.bye().await;
        });
    }

    /// Sends REFER to `target` and waits for its answer.
    pub async fn refer(&self, target: &str) -> ReferAnswer {
        let Ok(uri) = rsipstack::sip::Uri::try_from(target) else {
            return ReferAnswer::BadTarget;
        };
        match self.0.refer(uri, None, None).await {
            Ok(Some(r)) => {
                let status = Status(u16::from(r.status_code.clone()));
                ReferAnswer::Answered(status, r.status_code.to_string())
            }
            Ok(None) => ReferAnswer::NotEstablished,
            Err(e) => ReferAnswer::Failed(e.to_string()),
        }
    }
}

/// A dialog's news for its call.
pub(super) enum DialogEvent {
    /// The dialog is over (a BYE either way, a CANCEL, no ACK).
    Ended(DialogEnd),
    /// The ACK came.
    Confirmed,
    /// A request inside the dialog, to answer.
    Request(InDialog),
    /// Anything else (provisional states).
    Other,
}

impl DialogEvent {
    fn of(state: DialogState) -> Self {
        match state {
            DialogState::Terminated(_, reason) => Self::Ended(dialog_end(&reason)),
            DialogState::Confirmed(..) => Self::Confirmed,
            DialogState::Updated(_, req, h) => {
                // A re-INVITE or an UPDATE: a session refresh either way.
                let method = match req.method {
                    Method::Invite => SipMethod::Invite,
                    _ => SipMethod::Update,
                };
                InDialog::event(method, req, h)
            }
            DialogState::Info(_, req, h) => InDialog::event(SipMethod::Info, req, h),
            DialogState::Notify(_, req, h) => InDialog::event(SipMethod::Notify, req, h),
            DialogState::Refer(_, req, h) => InDialog::event(SipMethod::Refer, req, h),
            DialogState::Options(_, req, h) => InDialog::event(SipMethod::Options, req, h),
            DialogState::Message(_, req, h) => InDialog::event(SipMethod::Message, req, h),
            DialogState::Publish(_, req, h) => InDialog::event(SipMethod::Publish, req, h),
            _ => Self::Other,
        }
    }
}

/// Why the stack ended a dialog.
fn dialog_end(reason: &TerminatedReason) -> DialogEnd {
    match reason {
        TerminatedReason::UacBye => DialogEnd::CallerBye,
        TerminatedReason::UasBye => DialogEnd::OurBye,
        TerminatedReason::Timeout => DialogEnd::NoAck,
        _ => DialogEnd::Other,
    }
}

/// A request inside a call's dialog, answered with [`InDialog::answer`] (dropped
/// unanswered, the stack answers it).
pub(super) struct InDialog {
    /// Its method.
    pub method: SipMethod,
    /// Its first `Content-Type`.
    pub content_type: Option<String>,
    /// Its body.
    pub body: Vec<u8>,
    handle: TransactionHandle,
}

impl InDialog {
    fn event(method: SipMethod, req: Request, handle: TransactionHandle) -> DialogEvent {
        let content_type = req
            .headers
            .iter()
            .find(|h| h.name().eq_ignore_ascii_case("content-type"))
            .map(|h| h.value().to_string());
        DialogEvent::Request(Self {
            method,
            content_type,
            body: req.body,
            handle,
        })
    }

    /// Answers it `status`, with `sdp` as its body when given; returns once the answer was
    /// handed to the transport (at most [`ANSWER_SENT_WAIT`]), so that what the call sends
    /// next (a BYE after a NOTIFY that reports a transfer done) cannot overtake it.
    pub async fn answer(self, status: Status, sdp: Option<&str>) {
        let (headers, body) = match sdp {
            Some(sdp) => (
                Some(vec![Header::ContentType("application/sdp".into())]),
                Some(sdp.as_bytes().to_vec()),
            ),
            None => (None, None),
        };
        let sent = self
            .handle
            .respond(status_code(status), headers, body)
            .await;
        if sent.is_ok() {
            let _ = tokio::time::timeout(ANSWER_SENT_WAIT, self.handle.closed()).await;
        }
    }
}

/// The longest an in-dialog answer is waited for on its way to the transport.
const ANSWER_SENT_WAIT: Duration = Duration::from_secs(1);

/// What stops the endpoint (its thread, sockets and tasks).
pub(super) struct Stop(CancellationToken);

impl Stop {
    /// Stops it.
    pub fn cancel(&self) {
        self.0.cancel();
    }
}

/// The SIP thread: binds, hands the endpoint to [`start`], then serves until the token is
/// cancelled (the runtime, and every socket task on it, ends with it).
async fn endpoint_thread(
    settings: SipSettings,
    token: CancellationToken,
    ready: oneshot::Sender<anyhow::Result<Started>>,
) {
    let (endpoint, listener, local) = match bind(&settings, &token).await {
        Ok(bound) => bound,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let inner = endpoint.inner.clone();
    let incoming = match endpoint.incoming_transactions() {
        Ok(incoming) => incoming,
        Err(e) => {
            let _ = ready.send(Err(e.into()));
            return;
        }
    };
    let slots = TcpSlots::new(settings.max_tcp.0, settings.max_tcp.1);
    tokio::spawn(accept_tcp(listener, inner.clone(), settings, slots, token));
    let started = Started {
        local,
        inner: inner.clone(),
        incoming,
        runtime: tokio::runtime::Handle::current(),
    };
    if ready.send(Ok(started)).is_err() {
        return;
    }
    if let Err(e) = inner.serve().await {
        tracing::error!(error = %e, "SIP endpoint stopped");
    }
}

/// The endpoint on UDP (refused sources dropped before parsing, new INVITEs over their
/// source's rate before any transaction) and the TCP listener on the same port.
async fn bind(
    settings: &SipSettings,
    token: &CancellationToken,
) -> anyhow::Result<(
    rsipstack::transaction::Endpoint,
    tokio::net::TcpListener,
    SocketAddr,
)> {
    let layer = TransportLayer::new(token.child_token());
    if !settings.allow.is_empty() {
        let allowed = settings.clone();
        layer.set_whitelist(move |ip: IpAddr| {
            let ok = allowed.allows(ip);
            if !ok {
                METRICS.sip_dropped("refused_source");
            }
            std::future::ready(ok)
        });
    }
    let udp =
        UdpConnection::create_connection(settings.listen, None, Some(token.child_token())).await?;
    let local = udp
        .get_addr()
        .get_socketaddr()
        .map_err(|e| anyhow::anyhow!("SIP UDP address: {e}"))?;
    layer.add_transport(udp.into());
    let listener = tokio::net::TcpListener::bind(local).await?;
    let endpoint = EndpointBuilder::new()
        .with_user_agent(concat!("duet/", env!("CARGO_PKG_VERSION")))
        .with_cancel_token(token.clone())
        .with_transport_layer(layer)
        .with_transport_inspector(Box::new(InviteGate(InviteRate::new(settings.invite_rate))))
        .build();
    Ok((endpoint, listener, local))
}

/// Drops a new INVITE (no To tag) over its source's rate, before any transaction exists.
struct InviteGate(InviteRate);

#[async_trait::async_trait]
impl TransportEventInspector for InviteGate {
    async fn handle(&self, event: TransportEvent) -> Option<TransportEvent> {
        if let TransportEvent::Incoming(SipMessage::Request(req), _, from) = &event {
            let new_invite = req.method == Method::Invite
                && req
                    .to_header()
                    .and_then(|t| t.tag())
                    .is_ok_and(|tag| tag.is_none());
            if new_invite {
                let ip = from.get_socketaddr().map(|a| a.ip());
                if ip.is_ok_and(|ip| !self.0.admit(ip, Instant::now())) {
                    METRICS.sip_dropped("invite_rate");
                    return None;
                }
            }
        }
        Some(event)
    }
}

/// SIP over TCP: a refused source or one past the caps is closed at accept; a connection
/// whose first bytes come within [`FIRST_BYTES`] goes to the stack, and its place is given
/// back when the stack retires it (its token cancelled).
async fn accept_tcp(
    listener: tokio::net::TcpListener,
    inner: EndpointInnerRef,
    settings: SipSettings,
    slots: Arc<TcpSlots>,
    token: CancellationToken,
) {
    let local = SipAddr {
        r#type: Some(rsipstack::sip::Transport::Tcp),
        addr: settings.listen.into(),
    };
    let local = match listener.local_addr() {
        Ok(addr) => SipAddr {
            addr: addr.into(),
            ..local
        },
        Err(_) => local,
    };
    let mut last_log: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            () = token.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                METRICS.sip_dropped("tcp_accept_error");
                if last_log.is_none_or(|t| t.elapsed() >= ACCEPT_LOG_EVERY) {
                    last_log = Some(Instant::now());
                    tracing::warn!(error = %e, "SIP TCP accept failed (backing off; logged once a minute at most)");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        if !settings.allows(peer.ip()) {
            METRICS.sip_dropped("refused_source");
            continue;
        }
        let Some(slot) = slots.take(peer.ip()) else {
            METRICS.sip_dropped("tcp_limit");
            continue;
        };
        let (inner, local, conn_token) = (inner.clone(), local.clone(), token.child_token());
        tokio::spawn(serve_tcp(stream, inner, local, conn_token, slot));
    }
}

/// One accepted SIP TCP connection: given to the SIP stack once its first byte arrives
/// (within [`FIRST_BYTES`]; a silent one is dropped), holding its `slot` until it ends.
async fn serve_tcp(
    stream: tokio::net::TcpStream,
    inner: EndpointInnerRef,
    local: SipAddr,
    token: CancellationToken,
    slot: TcpSlot,
) {
    let mut first = [0u8; 1];
    match tokio::time::timeout(FIRST_BYTES, stream.peek(&mut first)).await {
        Ok(Ok(n)) if n > 0 => {}
        Ok(_) => return,
        Err(_) => {
            METRICS.sip_dropped("tcp_silent");
            return;
        }
    }
    let Ok(conn) = TcpConnection::from_stream(stream, local, Some(token.clone())) else {
        return;
    };
    inner
        .transport_layer
        .add_connection(SipConnection::Tcp(conn));
    token.cancelled().await;
    drop(slot);
}
