//! Opening a session, the same way for both transports: what its configuration needs (a
//! model slot, a transcriber stream), the transport's outbound queue, the session actor's
//! state.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;

use super::AppState;
use crate::memory::{Exhausted, MemoryAccount, Meter, MODEL_QUEUE, SESSION_RESERVE};
use crate::session::{
    metered_queue, AttachmentId, EventReceiver, EventSender, Feeds, Inbound, ModelPort, Needs,
    Provider, Provision, Session, SessionMemory, SessionParams, SessionStatus, Slot, Transport,
};

/// A session ready to run, and the queue its transport reads.
pub struct Opened {
    /// The credential it was opened with (`server` or `cred_…`).
    pub credential: String,
    /// The session (run it with its inbox and `feeds`).
    pub session: Session,
    /// The model loop's and the transcription loop's channels for it.
    pub feeds: Feeds,
    /// What the pool view shows of it.
    pub status: Arc<SessionStatus>,
    /// Where it gets a slot or a stream later.
    pub provider: Arc<dyn Provider>,
    /// What the transport sends.
    pub events: EventReceiver,
}

/// Opens a session on `transport` with what its configuration needs: a model slot unless
/// it is a transcription session (or fails with the model's error), a transcriber stream
/// only when it transcribes. `duplex`: the client opted into the extension on the
/// connection `AttachmentId`. `start`: the session configuration of the client secret it
/// was opened with.
pub async fn open_session(
    state: &AppState,
    transport: Transport,
    duplex: Option<AttachmentId>,
    initial: Initial,
    credential: &str,
) -> Result<Opened, OpenError> {
    let memory = session_memory(&state.sessions.memory)?;
    let meter = memory.meter.clone();
    let (out, events) = metered_queue(
        state.sessions.limits.max_outbound_bytes,
        Some(meter.clone()),
    );
    let (turn, turns) = state
        .backends
        .speech
        .turn
        .as_ref()
        .map(|t| t.open())
        .unzip();
    let unix_secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let params = SessionParams {
        transport,
        duplex: duplex.is_some(),
        attachment: duplex.unwrap_or_default(),
        usage: Some(state.credentials.usage.sink(credential)),
        turn,
        transcription_session: initial.asked.transcription,
        turn_events: initial.asked.turn_events,
        memory: Some(memory),
        ..server_params(state, out)
    };
    let mut session = Session::new(params, Instant::now(), unix_secs);
    configure(&mut session, initial.secret, initial.patch)?;
    let provider = server_provider(state, meter);
    let status = Arc::new(SessionStatus::default());
    let mut feeds = Feeds {
        model: None,
        transcripts: None,
        turns,
    };
    let got = provider.provide(session.needs()).await;
    let ports = feeds.take(got, &status);
    if let Some(Err(e)) = ports.model {
        return Err(OpenError::Model(e));
    }
    session.provide(ports, Instant::now());
    Ok(Opened {
        credential: credential.to_string(),
        session,
        feeds,
        status,
        provider,
        events,
    })
}

/// What provides this server's sessions with model slots and transcription streams,
/// charging `meter`.
fn server_provider(state: &AppState, meter: Arc<crate::memory::Meter>) -> Arc<dyn Provider> {
    Arc::new(ServerProvider {
        model: state.backends.model.clone(),
        transcriber: state.backends.speech.transcriber.clone(),
        wait: state.sessions.admission_wait,
        meter,
    })
}

/// What every session of this server starts with, its events going out on `out`; the
/// caller fills in its connection's part (transport, extensions, usage, memory, turn port).
fn server_params(state: &AppState, out: EventSender) -> SessionParams {
    SessionParams {
        session_id: crate::protocol::ids::session_id_on(state.node_id()),
        transport: Transport::WebSocket,
        model: None,
        model_info: state.backends.model.info().clone(),
        limits: state.sessions.limits.clone(),
        out,
        duplex: false,
        attachment: AttachmentId::default(),
        headroom: Some(headroom(&state.sessions.admissions)),
        usage: None,
        transcriber: None,
        can_transcribe: state.backends.speech.transcriber.is_some(),
        vad_model: state.backends.speech.vad.clone(),
        turn: None,
        transcription_session: false,
        turn_events: false,
        memory: None,
    }
}

/// Applies a client secret's session object, then the request's: before anything is
/// provided, since the configuration decides what the session needs.
fn configure(
    session: &mut Session,
    secret: Option<crate::protocol::SessionPatch>,
    patch: Option<crate::protocol::SessionPatch>,
) -> Result<(), OpenError> {
    if let Some(patch) = secret {
        // Checked when the secret was minted; a failure here leaves the defaults.
        if let Err(e) = session.configure(patch) {
            tracing::warn!(error = %e.message, "a client secret's session did not apply");
        }
    }
    if let Some(patch) = patch {
        session.configure(patch).map_err(OpenError::Invalid)?;
    }
    Ok(())
}

/// A new session's starting configuration.
#[derive(Default)]
pub struct Initial {
    /// The session object of the client secret it is opened with.
    pub secret: Option<crate::protocol::SessionPatch>,
    /// The session object the request carries (a call's multipart `session`), applied after
    /// the secret's; refused when invalid.
    pub patch: Option<crate::protocol::SessionPatch>,
    /// What the connection asked for besides the session object.
    pub asked: Asked,
}

/// What a connection's query asks of its session.
#[derive(Clone, Copy, Debug, Default)]
pub struct Asked {
    /// Opens as a transcription session (`?intent=transcription`).
    pub transcription: bool,
    /// Extension (`?turn_events=1`): the session reports the turn detector's decisions
    /// (`turn.scored`, `turn.overlap`).
    pub turn_events: bool,
}

/// Why a session could not open.
#[derive(Debug)]
pub enum OpenError {
    /// No model slot (or the model failed).
    Model(duet_models::ModelError),
    /// The memory budget has no room for another session.
    Memory(Exhausted),
    /// The request's session object is invalid.
    Invalid(crate::protocol::ErrorPayload),
}

impl OpenError {
    /// The error's stable code.
    pub fn code(&self) -> &'static str {
        match self {
            OpenError::Model(e) => e.code(),
            OpenError::Memory(_) => crate::protocol::codes::SERVER_MEMORY_EXHAUSTED,
            OpenError::Invalid(_) => crate::protocol::codes::INVALID_VALUE,
        }
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Model(e) => e.fmt(f),
            OpenError::Memory(e) => e.fmt(f),
            OpenError::Invalid(e) => f.write_str(&e.message),
        }
    }
}

/// A new session's memory: its model input queue's fixed charge and its meter's reserve.
fn session_memory(account: &Arc<MemoryAccount>) -> Result<SessionMemory, OpenError> {
    let fixed = account.charge(MODEL_QUEUE).map_err(OpenError::Memory)?;
    let meter = Meter::open(account, SESSION_RESERVE).map_err(OpenError::Memory)?;
    Ok(SessionMemory { meter, fixed })
}

/// The server's model loop and transcription loop, as sessions get slots and streams.
struct ServerProvider {
    model: crate::model_loop::ModelLoop,
    transcriber: Option<crate::stt::Stt>,
    wait: std::time::Duration,
    meter: Arc<Meter>,
}

impl Provider for ServerProvider {
    fn provide(&self, needs: Needs) -> Pin<Box<dyn Future<Output = Provision> + Send + '_>> {
        Box::pin(async move {
            let slot = match needs.slot {
                true => Some(self.slot().await),
                false => None,
            };
            let stream = match (&self.transcriber, needs.transcriber) {
                (Some(t), true) => Some(t.open(Some(self.meter.clone())).await),
                _ => None,
            };
            Provision { slot, stream }
        })
    }
}

impl ServerProvider {
    /// A model slot; at capacity, retried for up to `--admission-wait-ms` as slots free.
    async fn slot(&self) -> Result<Slot, duet_models::ModelError> {
        let deadline = tokio::time::Instant::now() + self.wait;
        loop {
            match self.model.open().await {
                Err(duet_models::ModelError::SlotsExhausted(_))
                    if tokio::time::Instant::now() + SLOT_POLL < deadline =>
                {
                    tokio::time::sleep(SLOT_POLL).await;
                }
                Ok((port, rx)) => {
                    let slot = port.slot();
                    return Ok((Box::new(port) as Box<dyn ModelPort>, rx, slot));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The admission headroom, as sessions read it.
fn headroom(a: &Arc<super::Admissions>) -> crate::session::Headroom {
    let a = Arc::downgrade(a);
    Arc::new(move || a.upgrade().map_or((0, 0), |a| a.headroom()))
}

/// How often a request waiting for a model slot looks again.
const SLOT_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// Runs an opened session on its own task, listed in the pool view until it ends. An
/// opted-in session is also in the directory (resumes find its inbox there); `hold` (its
/// admission) is released when it ends.
pub fn spawn_session(
    state: &AppState,
    opened: Opened,
    inbox: (mpsc::Sender<Inbound>, mpsc::Receiver<Inbound>),
    owner: Option<String>,
    hold: impl Send + 'static,
) -> (EventReceiver, tokio::task::JoinHandle<()>) {
    let (in_tx, in_rx) = inbox;
    let Opened {
        credential,
        session,
        feeds,
        status,
        provider,
        events,
    } = opened;
    let id = session.id().to_string();
    let durable = session.state().is_some();
    if durable {
        state.sessions.directory.insert(&id, in_tx, owner);
    }
    state.sessions.live.insert(
        &id,
        super::LiveSession {
            created: std::time::Instant::now(),
            credential,
            status: status.clone(),
        },
    );
    let actor = crate::session::run(
        session,
        in_rx,
        feeds,
        state.lifecycle.subscribe(),
        status,
        provider,
    );
    let directory = state.sessions.directory.clone();
    let live = state.sessions.live.clone();
    let task = tokio::spawn(async move {
        actor.await;
        if durable {
            directory.remove(&id);
        }
        live.remove(&id);
        drop(hold);
    });
    (events, task)
}
