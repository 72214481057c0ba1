//! The SIP stack (`rsipstack`, pinned; no other file uses it): one endpoint on UDP and TCP,
//! the loop of new server transactions, and the loop of dialog states, each routed to its
//! call's task. Retransmitted requests, ACKs and CANCELs are the stack's own business (a
//! CANCEL gets its `200` and the INVITE its `487` while the call's INVITE transaction is
//! driven); out-of-dialog OPTIONS get `200`, anything else out of dialog `481` or `405`.
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

use rsipstack::dialog::dialog::{DialogState, DialogStateReceiver, DialogStateSender};
use rsipstack::dialog::dialog_layer::DialogLayer;
use rsipstack::platform::CancellationToken;
use rsipstack::sip::prelude::HeadersExt;
use rsipstack::sip::{Header, Method, SipMessage, StatusCode};
use rsipstack::transaction::endpoint::{EndpointInnerRef, TransportEventInspector};
use rsipstack::transaction::{Transaction, TransactionReceiver};
use rsipstack::transport::tcp::TcpConnection;
use rsipstack::transport::TransportLayer;
use rsipstack::transport::{udp::UdpConnection, SipAddr, SipConnection, TransportEvent};
use rsipstack::EndpointBuilder;
use tokio::sync::{mpsc, oneshot};

use super::limits::{InviteRate, TcpSlots};
use super::{call, SipCalls, SipSettings};
use crate::calls::PhoneHost;
use crate::metrics::METRICS;

/// How long a SIP TCP connection may stay silent after accept before it is closed.
const FIRST_BYTES: Duration = Duration::from_secs(10);
/// The pause after a failed TCP accept (out of file descriptors, say).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// At most one log line per this long about failed TCP accepts.
const ACCEPT_LOG_EVERY: Duration = Duration::from_secs(60);

/// The methods Duet answers.
pub(super) const ALLOW: &str = "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO, UPDATE, REFER, NOTIFY";

/// Dialog states by dialog id, to the call that owns the dialog.
pub(super) type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<DialogState>>>>;

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
) -> anyhow::Result<(SocketAddr, CancellationToken)> {
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
    Ok((local, token))
}

/// Each dialog state to its call; a terminated dialog is forgotten.
async fn route_states(routes: Routes, dialogs: Arc<DialogLayer>, mut rx: DialogStateReceiver) {
    while let Some(state) = rx.recv().await {
        let did = state.id().clone();
        let id = did.to_string();
        let terminated = matches!(state, DialogState::Terminated(..));
        let route = routes.lock().ok().and_then(|r| r.get(&id).cloned());
        if let Some(tx) = route {
            let _ = tx.send(state);
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
                calls.spawn(call::invite(shared, tx, ring));
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
        let _ = tx.reply(StatusCode::Forbidden).await;
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
                    let _ = tx.reply(StatusCode::RequestPending).await;
                }
            }
            None => {
                let _ = tx.reply(StatusCode::CallTransactionDoesNotExist).await;
            }
        }
        return;
    }
    match tx.original.method {
        // A new INVITE here found no ringing place.
        Method::Invite => call::ringing_full(tx).await,
        Method::Options => {
            let headers = vec![
                Header::Allow(ALLOW.into()),
                Header::Accept("application/sdp".into()),
            ];
            let _ = tx.reply_with(StatusCode::OK, headers, None).await;
        }
        Method::Bye | Method::Info | Method::Update | Method::Notify | Method::Refer => {
            let _ = tx.reply(StatusCode::CallTransactionDoesNotExist).await;
        }
        _ => {
            let headers = vec![Header::Allow(ALLOW.into())];
            let _ = tx
                .reply_with(StatusCode::MethodNotAllowed, headers, None)
                .await;
        }
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
        tokio::spawn(async move {
            let mut first = [0u8; 1];
            match tokio::time::timeout(FIRST_BYTES, stream.peek(&mut first)).await {
                Ok(Ok(n)) if n > 0 => {}
                Ok(_) => return,
                Err(_) => {
                    METRICS.sip_dropped("tcp_silent");
                    return;
                }
            }
            let Ok(conn) = TcpConnection::from_stream(stream, local, Some(conn_token.clone()))
            else {
                return;
            };
            inner
                .transport_layer
                .add_connection(SipConnection::Tcp(conn));
            conn_token.cancelled().await;
            drop(slot);
        });
    }
}
