//! Opening a session, the same way for both transports: a model slot, the transport's
//! outbound queue, the session actor's state.

use tokio::sync::mpsc;

use super::AppState;
use crate::model_loop::ModelEvent;
use crate::session::{queue, EventReceiver, Session, SessionParams, Transport};

/// A session ready to run, and the queue its transport reads.
pub struct Opened {
    /// The session (run it with its inbox and `model_rx`).
    pub session: Session,
    /// The model loop's events for it.
    pub model_rx: mpsc::Receiver<ModelEvent>,
    /// What the transport sends.
    pub events: EventReceiver,
}

/// Opens a session on `transport`: takes a model slot (or fails with the model's error).
pub async fn open_session(
    state: &AppState,
    transport: Transport,
) -> Result<Opened, duet_models::ModelError> {
    let (model, model_rx) = state.model.open().await?;
    let (out, events) = queue(state.limits.max_outbound_bytes);
    let info = state.model.info();
    let session = Session::new(SessionParams {
        transport,
        model_name: info.name.clone(),
        model,
        model_frame: info.frame_samples,
        limits: state.limits.clone(),
        out,
        lifecycle: state.lifecycle.subscribe(),
    });
    Ok(Opened {
        session,
        model_rx,
        events,
    })
}
