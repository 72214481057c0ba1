//! Opening a session, the same way for both transports: a model slot, the transport's
//! outbound queue, the session actor's state.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use std::sync::Arc;

use tokio::sync::mpsc;

use super::AppState;
use crate::session::{
    queue, AttachmentId, EventReceiver, Inbound, ModelEvent, Session, SessionParams, Transport,
};

/// A session ready to run, and the queue its transport reads.
pub struct Opened {
    /// Its model slot's id.
    pub slot: usize,
    /// The credential it was opened with (`server` or `cred_…`).
    pub credential: String,
    /// The session (run it with its inbox and `model_rx`).
    pub session: Session,
    /// The model loop's events for it.
    pub model_rx: mpsc::Receiver<ModelEvent>,
    /// The transcription loop's events for it.
    pub transcripts: Option<mpsc::Receiver<crate::session::TranscriptEvent>>,
    /// What the transport sends.
    pub events: EventReceiver,
}

/// Opens a session on `transport`: takes a model slot (or fails with the model's error).
/// `duplex`: the client opted into the extension on the connection `AttachmentId`.
/// `start`: the session configuration of the client secret it was opened with.
pub async fn open_session(
    state: &AppState,
    transport: Transport,
    duplex: Option<AttachmentId>,
    start: Option<crate::protocol::SessionPatch>,
    credential: &str,
    transcription_session: bool,
) -> Result<Opened, duet_models::ModelError> {
    let (model, model_rx) = open_slot(state).await?;
    let (transcriber, transcripts) = match &state.speech.transcriber {
        Some(t) => match t.open().await {
            Ok((port, rx)) => (
                Some(Box::new(port) as Box<dyn crate::session::TranscriberPort>),
                Some(rx),
            ),
            Err(e) => {
                // Transcription degrades to `.failed` events; the session itself goes on.
                tracing::warn!("no transcription stream for this session: {e}");
                (None, None)
            }
        },
        None => (None, None),
    };
    let slot = model.slot();
    let (out, events) = queue(state.limits.max_outbound_bytes);
    let info = state.model.info();
    let unix_secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let params = SessionParams {
        transport,
        model_name: info.name.clone(),
        model: Box::new(model),
        model_frame: info.frame_samples,
        limits: state.limits.clone(),
        out,
        duplex: duplex.is_some(),
        attachment: duplex.unwrap_or_default(),
        headroom: Some(headroom(&state.admissions)),
        usage: Some(state.usage.sink(credential)),
        transcriber,
        vad_model: state.speech.vad.clone(),
        transcription_session,
    };
    let mut session = Session::new(params, Instant::now(), unix_secs);
    if let Some(patch) = start {
        // Checked when the secret was minted; a failure here leaves the defaults.
        if let Err(e) = session.configure(patch) {
            tracing::warn!(error = %e.message, "a client secret's session did not apply");
        }
    }
    Ok(Opened {
        slot,
        credential: credential.to_string(),
        session,
        model_rx,
        transcripts,
        events,
    })
}

/// A model slot; at capacity, retried for up to `--admission-wait-ms` as slots free.
async fn open_slot(
    state: &AppState,
) -> Result<(crate::model_loop::ModelSession, mpsc::Receiver<ModelEvent>), duet_models::ModelError>
{
    let deadline = tokio::time::Instant::now() + state.admission_wait;
    loop {
        match state.model.open().await {
            Err(duet_models::ModelError::SlotsExhausted(_))
                if tokio::time::Instant::now() + SLOT_POLL < deadline =>
            {
                tokio::time::sleep(SLOT_POLL).await;
            }
            other => return other,
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
        slot,
        credential,
        session,
        model_rx,
        transcripts,
        events,
    } = opened;
    let id = session.id().to_string();
    let durable = session.state().is_some();
    if durable {
        state.directory.insert(&id, in_tx, owner);
    }
    let status = Arc::new(crate::session::SessionStatus::default());
    state.live.insert(
        &id,
        super::LiveSession {
            created: std::time::Instant::now(),
            credential,
            model_slot: slot,
            status: status.clone(),
        },
    );
    let actor = crate::session::run(
        session,
        in_rx,
        model_rx,
        transcripts,
        state.lifecycle.subscribe(),
        status,
    );
    let directory = state.directory.clone();
    let live = state.live.clone();
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
