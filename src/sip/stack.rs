//! The SIP stack (`rsipstack`, pinned; no other file uses it): one endpoint on UDP and TCP,
//! the loop of new server transactions, and the loop of dialog states, each routed to its
//! call's task. Retransmitted requests, ACKs and CANCELs are the stack's own business (a
//! CANCEL gets its `200` and the INVITE its `487` while the call's INVITE transaction is
//! driven); out-of-dialog OPTIONS get `200`, anything else out of dialog `481` or `405`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use rsipstack::dialog::dialog::{DialogState, DialogStateReceiver, DialogStateSender};
use rsipstack::dialog::dialog_layer::DialogLayer;
use rsipstack::platform::CancellationToken;
use rsipstack::sip::prelude::HeadersExt;
use rsipstack::sip::{Header, Method, StatusCode};
use rsipstack::transaction::{Transaction, TransactionReceiver};
use rsipstack::transport::{udp::UdpConnection, TcpListenerConnection, TransportLayer};
use rsipstack::EndpointBuilder;
use tokio::sync::mpsc;

use super::{call, SipCalls, SipSettings};
use crate::server::AppState;

/// The methods Duet answers.
pub(super) const ALLOW: &str = "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO, UPDATE, REFER, NOTIFY";

/// Dialog states by dialog id, to the call that owns the dialog.
pub(super) type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<DialogState>>>>;

/// What every call task shares.
pub(super) struct Shared {
    pub settings: SipSettings,
    pub state: Arc<AppState>,
    pub calls: Arc<SipCalls>,
    pub dialogs: Arc<DialogLayer>,
    pub routes: Routes,
    pub states: DialogStateSender,
    /// The address SIP is answered on (the Contact's port).
    pub local: SocketAddr,
}

/// Binds UDP and TCP on `settings.listen` (TCP on UDP's port when that was 0) and starts
/// the endpoint; returns the bound address and the token that stops it.
pub(super) async fn start(
    settings: SipSettings,
    state: Arc<AppState>,
    calls: Arc<SipCalls>,
) -> anyhow::Result<(SocketAddr, CancellationToken)> {
    let token = CancellationToken::new();
    let layer = TransportLayer::new(token.child_token());
    let udp =
        UdpConnection::create_connection(settings.listen, None, Some(token.child_token())).await?;
    let local = udp
        .get_addr()
        .get_socketaddr()
        .map_err(|e| anyhow::anyhow!("SIP UDP address: {e}"))?;
    layer.add_transport(udp.into());
    // The TCP listener binds inside the endpoint's serve(): check the port is free first,
    // so a taken one is a startup error, not a log line.
    drop(std::net::TcpListener::bind(local)?);
    layer.add_transport(TcpListenerConnection::new(local, None).await?.into());
    let endpoint = EndpointBuilder::new()
        .with_user_agent(concat!("duet/", env!("CARGO_PKG_VERSION")))
        .with_cancel_token(token.clone())
        .with_transport_layer(layer)
        .build();
    let incoming = endpoint.incoming_transactions()?;
    let dialogs = Arc::new(DialogLayer::new(endpoint.inner.clone()));
    let (states, state_rx) = dialogs.new_dialog_state_channel();
    let shared = Arc::new(Shared {
        settings,
        state,
        calls,
        dialogs,
        routes: Routes::default(),
        states,
        local,
    });
    let inner = endpoint.inner.clone();
    tokio::spawn(async move {
        if let Err(e) = inner.serve().await {
            tracing::error!(error = %e, "SIP endpoint stopped");
        }
    });
    tokio::spawn(route_states(
        shared.routes.clone(),
        shared.dialogs.clone(),
        state_rx,
    ));
    tokio::spawn(incoming_loop(shared, incoming));
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

async fn incoming_loop(shared: Arc<Shared>, mut incoming: TransactionReceiver) {
    while let Some(tx) = incoming.recv().await {
        let shared = shared.clone();
        // Each request on its own task: answering may wait (a transaction's response).
        tokio::spawn(async move { request(shared, tx).await });
    }
}

async fn request(shared: Arc<Shared>, mut tx: Transaction) {
    let source = tx
        .connection
        .as_ref()
        .and_then(|c| c.get_remote_addr())
        .and_then(|a| a.get_socketaddr().ok());
    if source.is_some_and(|s| !shared.settings.allows(s.ip())) {
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
        Method::Invite => call::invite(shared, tx).await,
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
