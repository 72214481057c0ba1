//! Calls as the HTTP API, the SIP connector and the media engines share them: the registry
//! of live calls ([`CallRegistry`]: what carries each call's media, its session inbox, its
//! owner), the controls the HTTP API sends a phone call ([`PhoneControl`]), and the port
//! through which SIP opens a phone call's session ([`PhoneHost`], which the server
//! implements). It sits below `server` and `sip`, so that neither imports the other's
//! internals.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, watch};

use crate::error::ApiError;
use crate::protocol::SessionPatch;
use crate::session::{EventReceiver, Inbound, Transport};

/// Live calls by id, shared with the calls' cleanup guards (a clone is the same registry).
/// Its lock is held only inside these methods, never across an await.
#[derive(Clone, Default)]
pub struct CallRegistry(Arc<Mutex<HashMap<String, CallEntry>>>);

impl CallRegistry {
    /// Registers call `id` (replacing an entry of the same id).
    pub fn insert(&self, id: &str, entry: CallEntry) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(id.to_string(), entry);
        }
    }

    /// Call `id`, if it is live.
    pub fn get(&self, id: &str) -> Option<CallEntry> {
        self.0.lock().ok().and_then(|m| m.get(id).cloned())
    }

    /// Forgets call `id` (ended).
    pub fn remove(&self, id: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(id);
        }
    }

    /// How many calls are live.
    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |m| m.len())
    }

    /// Whether no call is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What carries a call's media, and so how it is hung up.
#[derive(Clone)]
pub enum CallMedia {
    /// A WebRTC call: engine `engine` of the pool runs it under `key`.
    Engine {
        /// Which engine of the pool.
        engine: usize,
        /// Its key there.
        key: crate::engine::CallKey,
    },
    /// A phone call (SIP): its call task takes `/hangup` and `/refer`.
    Sip(mpsc::Sender<PhoneControl>),
}

/// A live call, as the HTTP layer sees it.
#[derive(Clone)]
pub struct CallEntry {
    /// What carries its media.
    pub media: CallMedia,
    /// The call's session inbox (sideband connections).
    pub session: mpsc::Sender<Inbound>,
    /// The call as its session's attachment.
    pub attachment: crate::session::AttachmentId,
    /// The client secret that opened it (`None`: the server key): only it, or the server
    /// key, reaches the call.
    pub owner: Option<String>,
    /// Sideband sockets attached now.
    pub sidebands: Arc<AtomicUsize>,
    /// The call's media signals (a hangup is told there, where it cannot be lost).
    pub signals: Arc<crate::session::MediaSignals>,
    /// Closed when the call ends (its sidebands end with it).
    pub ended: watch::Receiver<()>,
}

/// What the HTTP API asks of a SIP call; each answers on its `reply`.
pub enum PhoneControl {
    /// `/accept`: open the session with this configuration and answer `200 OK`.
    Accept {
        /// The session configuration of the body.
        patch: Box<SessionPatch>,
        /// The credential that accepted (`None`: the server key): it owns the call.
        owner: Option<String>,
        /// Done, or why not.
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
    /// `/reject`: answer the INVITE with `status`.
    Reject {
        /// A SIP status (4xx–6xx).
        status: u16,
        /// Done, or why not.
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
    /// `/refer`: transfer the caller to `target` (REFER).
    Refer {
        /// `sip:…` or `tel:…`, put in `Refer-To`.
        target: String,
        /// Done (the REFER was accepted), or why not.
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
    /// `/hangup`: BYE (or, still ringing, `603 Decline`).
    Hangup {
        /// Done.
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
}

/// A phone call's session, opened when the call is accepted.
pub struct PhoneSession {
    /// What the session sends (no data channel: the call's task discards it; sidebands
    /// get their own copy).
    pub events: EventReceiver,
    /// The session's inbox.
    pub inbox: mpsc::Sender<Inbound>,
    /// The call's slot and its media's share of the memory budget, held while it lives.
    pub _hold: Box<dyn Send>,
}

/// What SIP needs of the server: where calls are registered, how much room for one more
/// call there is, this node's id, and a phone call's session. The server's state implements
/// it; SIP is given one at start.
pub trait PhoneHost: Send + Sync {
    /// The live calls.
    fn calls(&self) -> &CallRegistry;

    /// Calls that may still be admitted (`--max-calls` less those admitted now).
    fn call_room(&self) -> usize;

    /// This node's id in a cluster (`None`: a single server).
    fn node_id(&self) -> Option<&str>;

    /// Opens the session of an accepted phone call on `transport` (its RTP leg), configured
    /// by `patch`, owned by `owner`.
    fn open_phone_session(
        &self,
        transport: Transport,
        patch: SessionPatch,
        owner: Option<String>,
    ) -> Pin<Box<dyn Future<Output = Result<PhoneSession, ApiError>> + Send + '_>>;
}
