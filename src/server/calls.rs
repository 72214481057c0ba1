//! `POST /v1/realtime/calls` (WebRTC signalling), hangup, and the call registry glue.
//! Bad offers are refused before anything is allocated; an admitted call gives its slots back
//! through a guard, whichever way (and on whichever thread) it ends.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use duet_signaling::{check_offer, Call};
use tokio::sync::{mpsc, oneshot, watch};

use super::admission::{Admitted, Kind};
pub(super) use super::offer::session_patch;
use super::offer::{bad_offer, read_offer, resume_refused, resume_request, CallsQuery, Offer};
pub(super) use super::offer::{read_body, resume_expired};
use super::open::{open_session, spawn_session, Initial, OpenError};
use super::secrets::{credential, Cred, Credential};
use super::AppState;
use crate::calls::{CallEntry, CallMedia, CallRegistry, PhoneSession};
use crate::engine::{CallKey, NewCall};
use crate::error::{ApiError, Code};
use crate::memory::Charge;
use crate::protocol::duplex::ResumeRequest;
use crate::protocol::SessionPatch;
use crate::session::{
    AttachmentId, EventReceiver, EventSender, Inbound, MediaSignals, SessionInput, Transport,
};

/// Client events queued for a call's session.
const INBOX: usize = 1024;

/// Everything a call holds on the server side, released when the engine drops the call
/// (ended, reaped, or lost with a dead engine thread): its registry entry and call slot,
/// its sidebands (they end with it), and the session learns the call ended. The session's
/// own admission is the session's, not the call's.
pub struct CallGuard {
    id: String,
    calls: CallRegistry,
    signals: Arc<MediaSignals>,
    admitted: CallSlot,
    /// Dropped with the call: its sidebands watch it.
    _ended: watch::Sender<()>,
    /// The call's media state on the memory budget, given back with the call.
    _media: Charge,
}

/// A call's slot, which the handler can give back at once when the call is refused after
/// it was handed to the engine (a refused resume).
type CallSlot = Arc<std::sync::Mutex<Option<Admitted>>>;

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.calls.remove(&self.id);
        if let Ok(mut slot) = self.admitted.lock() {
            slot.take();
        }
        self.signals.ended();
    }
}

/// `POST /v1/realtime/calls`.
pub async fn create(
    State(state): State<Arc<AppState>>,
    cred: Cred,
    Query(q): Query<CallsQuery>,
    req: Request,
) -> Response {
    let cred = credential(&cred);
    let started = Instant::now();
    let ip = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.ip());
    let duplex = super::ws::flag_on(q.duplex.as_deref());
    let turn_events = super::ws::flag_on(q.turn_events.as_deref());
    let response = match create_call(state, req, ip, (duplex, turn_events), cred).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    crate::metrics::METRICS
        .call_setup
        .observe(started.elapsed());
    response
}

/// The stages of a call: read and check the offer, admit it, answer on a live engine, bind
/// its session (open one, or find the one it resumes), hand the call to the engine, and for
/// a resume hand the session to the call.
async fn create_call(
    state: Arc<AppState>,
    req: Request,
    ip: Option<IpAddr>,
    (duplex, turn_events): (bool, bool),
    cred: Credential,
) -> Result<Response, ApiError> {
    let placed = req
        .extensions()
        .get::<super::cluster_routes::Placed>()
        .is_some();
    let wait = super::cluster_routes::admission_wait(&state, placed);
    let offer = read_offer(req).await?;
    let summary = check_offer(&offer.sdp).map_err(|e| bad_offer(&e))?;
    let mut opening = admit(&state, &offer, (duplex, wait), ip, &cred).await?;
    if let Opening::New { turn_events: t, .. } = &mut opening {
        *t = turn_events;
    }
    let call_admission = state
        .sessions
        .admissions
        .admit_waiting(Kind::Call, None, None, wait)
        .await?;
    let media = call_media(&state)?;
    let (engine_index, engine) = state
        .calls
        .engines
        .pick()
        .ok_or_else(|| ApiError::new(Code::NotReady, "no media engine thread is running"))?;
    let engine = engine.clone();
    let (call, answer) = Call::accept(&offer.sdp, summary, engine.answer_config(), Instant::now())
        .map_err(|e| bad_offer(&e))?;
    let key = next_call_key(&state);
    let signals = Arc::new(MediaSignals::default());
    let attachment = AttachmentId::fresh();
    let bound = bind(
        &state,
        &engine,
        (key, attachment),
        signals.clone(),
        opening,
        &cred,
    )
    .await?;
    let started = Started {
        engine: (engine_index, &engine),
        key,
        attachment,
        call,
        signals,
        has_data_channel: summary.has_data_channel,
        media,
    };
    let id = start_call(&state, started, bound, call_admission).await?;
    tracing::info!(call = %id, codec = ?summary.codec, "call created");
    Ok(answered(&id, answer))
}

/// A fresh key for a call on the engines.
fn next_call_key(state: &AppState) -> CallKey {
    CallKey(
        state
            .calls
            .next_key
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    )
}

/// A call accepted on a media engine, its session not handed to it yet.
struct Started<'e> {
    engine: (usize, &'e crate::engine::Engine),
    key: CallKey,
    attachment: AttachmentId,
    call: Call,
    signals: Arc<MediaSignals>,
    has_data_channel: bool,
    media: Charge,
}

/// Hands the call and its bound session to the engine, registers the call and counts it
/// for its owner; returns its id.
async fn start_call(
    state: &Arc<AppState>,
    started: Started<'_>,
    bound: Bound,
    call_admission: Admitted,
) -> Result<String, ApiError> {
    let Bound {
        events,
        inbox,
        owner,
        resume,
    } = bound;
    let (engine_index, engine) = started.engine;
    let handoff = Handoff {
        key: started.key,
        attachment: started.attachment,
        call: started.call,
        signals: started.signals.clone(),
        has_data_channel: started.has_data_channel,
        events,
        resume,
        media: started.media,
    };
    let (id, ended) = hand_over(state, engine, handoff, &inbox, call_admission).await?;
    let usage_id = owner.clone().unwrap_or_else(|| "server".into());
    let entry = CallEntry {
        media: CallMedia::Engine {
            engine: engine_index,
            key: started.key,
        },
        session: inbox,
        attachment: started.attachment,
        owner,
        sidebands: Arc::new(AtomicUsize::new(0)),
        signals: started.signals,
        ended,
    };
    register(state, &id, entry);
    state
        .credentials
        .usage
        .opened(&usage_id, crate::stores::usage::Opened::Call);
    Ok(id)
}

/// A call on its way to its engine.
struct Handoff {
    key: CallKey,
    attachment: AttachmentId,
    call: Call,
    signals: Arc<MediaSignals>,
    has_data_channel: bool,
    /// What the call's data channel sends.
    events: EventReceiver,
    /// For a resume: the request and the resumed connection's queue.
    resume: Option<(ResumeRequest, EventSender)>,
    /// The call's media state on the memory budget.
    media: Charge,
}

/// Charges a new call's media state (its worst case) to the memory budget.
fn call_media(state: &AppState) -> Result<Charge, ApiError> {
    state
        .sessions
        .memory
        .charge(crate::memory::CALL_RESERVE)
        .map_err(|e| ApiError::new(Code::ServerMemoryExhausted, e.to_string()))
}

/// Hands the call to its engine with the guard that frees its slot when it ends, and for a
/// resume hands the session to the call; returns the call's id and its end. A refused resume
/// ends the call at once, its slot free before the client hears why (it has no call id to
/// hang up).
async fn hand_over(
    state: &AppState,
    engine: &crate::engine::Engine,
    h: Handoff,
    inbox: &mpsc::Sender<Inbound>,
    admitted: Admitted,
) -> Result<(String, watch::Receiver<()>), ApiError> {
    let id = duet_signaling::call_id_on(state.node_id());
    let slot: CallSlot = Arc::new(std::sync::Mutex::new(Some(admitted)));
    let (ended_tx, ended) = watch::channel(());
    let guard = CallGuard {
        id: id.clone(),
        calls: state.calls.registry.clone(),
        signals: h.signals.clone(),
        admitted: slot.clone(),
        _ended: ended_tx,
        _media: h.media,
    };
    engine.add(NewCall {
        key: h.key,
        id: id.clone(),
        call: h.call,
        session: inbox.clone(),
        attachment: h.attachment,
        events: h.events,
        signals: h.signals.clone(),
        inbound: state.inbound_budget(),
        has_data_channel: h.has_data_channel,
        guard: Box::new(guard),
    });
    let Some((request, out)) = h.resume else {
        return Ok((id, ended));
    };
    let transport = Transport::WebRtc {
        sink: engine.sink(h.key),
        signals: h.signals,
    };
    if let Err(e) = resume_call(inbox, request, out, h.attachment, transport).await {
        if let Ok(mut s) = slot.lock() {
            s.take();
        }
        engine.hangup(h.key);
        return Err(e);
    }
    Ok((id, ended))
}

/// What a call does with a session.
enum Opening {
    /// Opens one, which holds `admitted` (its slot, IP and credential share) for its whole
    /// life, seeded with the offer's `session` part.
    New {
        admitted: Admitted,
        patch: Option<Box<SessionPatch>>,
        durable: bool,
        /// `?turn_events=1`.
        turn_events: bool,
    },
    /// Resumes one, which keeps the admission it has.
    Resume(ResumeRequest),
}

/// Checks the offer's `session` and `resume` parts and the credential, then admits a new
/// session (a resume takes no session place).
async fn admit(
    state: &AppState,
    offer: &Offer,
    (duplex, wait): (bool, std::time::Duration),
    ip: Option<IpAddr>,
    cred: &Credential,
) -> Result<Opening, ApiError> {
    let resume = resume_request(offer.resume.as_deref(), duplex)?;
    let patch = session_patch(offer.session.as_deref())?;
    if resume.is_some() && patch.is_some() {
        return Err(ApiError::new(
            Code::InvalidValue,
            "send a session part to open a session or a resume part to resume one, not both",
        ));
    }
    if resume.is_none() && cred.resume_only() {
        return Err(super::secrets::resume_only_refused());
    }
    state.accepting()?;
    if let Some(r) = resume {
        return Ok(Opening::Resume(r));
    }
    let admitted = state
        .sessions
        .admissions
        .admit_waiting(Kind::Session, ip, cred.owner().as_deref(), wait)
        .await?;
    Ok(Opening::New {
        admitted,
        patch: patch.map(Box::new),
        durable: duplex,
        turn_events: false,
    })
}

/// A call's session side: what its events go out on, the session's inbox, the session's
/// owner, and for a resume the request and the queue of the resumed connection.
struct Bound {
    events: EventReceiver,
    inbox: mpsc::Sender<Inbound>,
    owner: Option<String>,
    resume: Option<(ResumeRequest, EventSender)>,
}

/// Opens the call's session, or finds the one it resumes (another credential's session is
/// as good as unknown; the resume token alone stands for a secret that expired since it
/// opened the session).
async fn bind(
    state: &Arc<AppState>,
    engine: &crate::engine::Engine,
    (key, attachment): (CallKey, AttachmentId),
    signals: Arc<MediaSignals>,
    opening: Opening,
    cred: &Credential,
) -> Result<Bound, ApiError> {
    match opening {
        Opening::New {
            admitted,
            patch,
            durable,
            turn_events,
        } => {
            let start = Start {
                secret: cred.session(),
                patch: patch.map(|p| *p),
                durable: durable.then_some(attachment),
                turn_events,
                owner: cred.owner(),
                admitted,
            };
            let transport = Transport::WebRtc {
                sink: engine.sink(key),
                signals,
            };
            let (events, inbox) = start_session(state, transport, start).await?;
            let owner = cred.owner();
            Ok(Bound {
                events,
                inbox,
                owner,
                resume: None,
            })
        }
        Opening::Resume(request) => {
            let entry = state
                .sessions
                .directory
                .get(&request.session_id)
                .filter(|e| cred.resume_only() || cred.reaches(e.owner.as_deref()))
                .ok_or_else(resume_expired)?;
            let (out, events) = state.event_queue();
            Ok(Bound {
                events,
                inbox: entry.inbox,
                owner: entry.owner,
                resume: Some((request, out)),
            })
        }
    }
}

/// Hands a resumed session to the new call; the session's refusal as an HTTP error.
async fn resume_call(
    inbox: &mpsc::Sender<Inbound>,
    request: ResumeRequest,
    out: EventSender,
    attachment: AttachmentId,
    transport: Transport,
) -> Result<(), ApiError> {
    let (reply, taken) = oneshot::channel();
    let input = SessionInput::Resume {
        request,
        out,
        attachment,
        transport,
        reply: Some(reply),
    };
    let inbound = Inbound {
        input,
        hold: None,
        from: attachment,
    };
    inbox.send(inbound).await.map_err(|_| resume_expired())?;
    match taken.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(resume_refused(&e)),
        Err(_) => Err(resume_expired()),
    }
}

/// How a call's session starts.
struct Start {
    /// The session configuration of the client secret the call was made with.
    secret: Option<SessionPatch>,
    /// The offer's `session` part, applied after it.
    patch: Option<SessionPatch>,
    /// The client opted into the duplex extension; the call is the first attachment.
    durable: Option<AttachmentId>,
    /// The client asked for the turn detector's decisions (`?turn_events=1`).
    turn_events: bool,
    /// The credential that opened it (`None`: the server key).
    owner: Option<String>,
    /// The session's admission, held by the session for its whole life.
    admitted: Admitted,
}

/// Opens the call's session (seeded with the secret's and then the offer's `session`
/// object) and runs it; returns the queue its events go out on and its inbox.
async fn start_session(
    state: &Arc<AppState>,
    transport: Transport,
    start: Start,
) -> Result<(EventReceiver, mpsc::Sender<Inbound>), ApiError> {
    let durable = start.durable;
    let credential = start.owner.clone().unwrap_or_else(|| "server".into());
    let initial = Initial {
        secret: start.secret,
        patch: start.patch,
        asked: super::open::Asked {
            transcription: false,
            turn_events: start.turn_events,
        },
    };
    let opened = open_session(state, transport, durable, initial, &credential)
        .await
        .map_err(|e| match e {
            OpenError::Invalid(e) => ApiError::from_payload(e),
            OpenError::Model(e) => ApiError::new(Code::from(&e), e.to_string()),
            OpenError::Memory(e) => ApiError::new(Code::ServerMemoryExhausted, e.to_string()),
        })?;
    let (in_tx, in_rx) = mpsc::channel(INBOX);
    tracing::debug!(session = %opened.session.id(), durable = durable.is_some(), "call session opened");
    let inbox = (in_tx.clone(), in_rx);
    state
        .credentials
        .usage
        .opened(&credential, crate::stores::usage::Opened::Session);
    let (events, _) = spawn_session(state, opened, inbox, start.owner, start.admitted);
    Ok((events, in_tx))
}

/// The server as SIP's host: its call registry, its call room, its node id, and phone
/// calls' sessions.
impl crate::calls::PhoneHost for Arc<AppState> {
    fn calls(&self) -> &crate::calls::CallRegistry {
        &self.calls.registry
    }

    fn call_room(&self) -> usize {
        let admissions = &self.sessions.admissions;
        admissions.limits().1.saturating_sub(admissions.calls())
    }

    fn node_id(&self) -> Option<&str> {
        AppState::node_id(self)
    }

    fn open_phone_session(
        &self,
        transport: Transport,
        patch: SessionPatch,
        owner: Option<String>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<PhoneSession, ApiError>> + Send + '_>,
    > {
        Box::pin(open_phone_session(self, transport, patch, owner))
    }
}

/// Opens the session of an accepted phone call on `transport` (its RTP leg), configured by
/// the accept body `patch`, owned by `owner`: a session place and a call slot are taken
/// first, so a full server answers `503` (and the caller `486`).
pub(crate) async fn open_phone_session(
    state: &Arc<AppState>,
    transport: Transport,
    patch: SessionPatch,
    owner: Option<String>,
) -> Result<PhoneSession, ApiError> {
    state.accepting()?;
    let admitted = state
        .sessions
        .admissions
        .admit_waiting(
            Kind::Session,
            None,
            owner.as_deref(),
            state.sessions.admission_wait,
        )
        .await?;
    let call_slot = state
        .sessions
        .admissions
        .admit_waiting(Kind::Call, None, None, state.sessions.admission_wait)
        .await?;
    let media = call_media(state)?;
    let usage_id = owner.clone().unwrap_or_else(|| "server".into());
    let start = Start {
        secret: None,
        patch: Some(patch),
        durable: None,
        turn_events: false,
        owner,
        admitted,
    };
    let (events, inbox) = start_session(state, transport, start).await?;
    state
        .credentials
        .usage
        .opened(&usage_id, crate::stores::usage::Opened::Call);
    Ok(PhoneSession {
        events,
        inbox,
        _hold: Box::new((call_slot, media)),
    })
}

fn register(state: &AppState, id: &str, entry: CallEntry) {
    state.calls.insert(id, entry);
}

/// `201 Created` with the answer SDP and the call's `Location`.
fn answered(id: &str, answer: String) -> Response {
    let mut r = (StatusCode::CREATED, answer).into_response();
    let h: &mut HeaderMap = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/sdp"),
    );
    if let Ok(loc) = HeaderValue::from_str(&format!("/v1/realtime/calls/{id}")) {
        h.insert(header::LOCATION, loc);
    }
    r
}

/// `PATCH /v1/realtime/calls/{id}`: a new `application/sdp` offer on a live call (an ICE
/// restart, e.g. after the network changed); `200` with the answer, and media resumes on the
/// new path in the same session.
pub async fn renegotiate(
    State(state): State<Arc<AppState>>,
    cred: Cred,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    match restart_call(&state, &id, &credential(&cred), req).await {
        Ok(answer) => {
            let mut r = (StatusCode::OK, answer).into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/sdp"),
            );
            r
        }
        Err(e) => e.into_response(),
    }
}

/// The live call `id`, if `cred` reaches it (a call another secret opened is not found).
fn live_call(state: &AppState, id: &str, cred: &Credential) -> Option<CallEntry> {
    state
        .calls
        .get(id)
        .filter(|e| cred.reaches(e.owner.as_deref()))
}

async fn restart_call(
    state: &AppState,
    id: &str,
    cred: &Credential,
    req: Request,
) -> Result<String, ApiError> {
    let entry = live_call(state, id, cred);
    let entry =
        entry.ok_or_else(|| ApiError::new(Code::CallNotFound, format!("no active call {id:?}")))?;
    let offer = read_offer(req).await?;
    if offer.session.is_some() || offer.resume.is_some() {
        return Err(ApiError::new(
            Code::InvalidValue,
            "a PATCH carries only the new offer (application/sdp)",
        ));
    }
    let summary = check_offer(&offer.sdp).map_err(|e| bad_offer(&e))?;
    let CallMedia::Engine { engine, key } = entry.media else {
        return Err(ApiError::new(
            Code::InvalidValue,
            "a phone call is renegotiated by its SIP peer (re-INVITE), not over HTTP",
        ));
    };
    let engine = state
        .calls
        .engines
        .get(engine)
        .ok_or_else(|| ApiError::new(Code::NotReady, "the call's media engine is gone"))?;
    engine
        .renegotiate(key, offer.sdp, summary)
        .await
        .map_err(|e| bad_offer(&e))
}

/// `POST /v1/realtime/calls/{id}/hangup` and `DELETE /v1/realtime/calls/{id}`.
pub async fn hangup(
    State(state): State<Arc<AppState>>,
    cred: Cred,
    Path(id): Path<String>,
) -> Response {
    let cred = credential(&cred);
    let entry = live_call(&state, &id, &cred);
    match entry.map(|e| (e.media, e.signals)) {
        Some((CallMedia::Engine { engine, key }, signals)) => {
            // The session ends with the call, an opted-in one too (a plain end would detach
            // it); the signal is set before the engine ends the call and cannot be lost.
            signals.hung_up();
            if let Some(engine) = state.calls.engines.get(engine) {
                engine.hangup(key);
            }
            StatusCode::OK.into_response()
        }
        // The call's task sends the BYE and then ends the session.
        Some((CallMedia::Sip(_), _)) => super::sip_calls::hangup(&state, &id, &cred).await,
        // A phone call still ringing is not live yet: hanging it up declines it.
        None => super::sip_calls::hangup(&state, &id, &cred).await,
    }
}
