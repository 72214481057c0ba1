//! What a session takes from the server only while it needs it: a model slot (a realtime
//! session; a transcription session holds none) and a stream on the transcriber (a session
//! that transcribes). The core says what it needs ([`Needs`]); the shell asks its
//! [`Provider`] and hands back what it got ([`Provision`]), so the core never waits.
//!
//! A `session.update` that needs something it lacks (a transcription session turning
//! realtime, transcription turned on) is held until the shell answered: the update applies
//! (`session.updated`) only once the slot is there; without one it is refused with
//! `model_slots_exhausted` and the session stays as it was.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::memory::Metering;
use super::transcripts::Transcripts;
use super::Limits;
use super::{ModelEvent, ModelPort, Session, TranscriberPort, TranscriptEvent};
use crate::protocol::{ErrorPayload, SessionConfig, SessionPatch};

/// What a session lacks for its configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// A model slot (it is a realtime session).
    pub slot: bool,
    /// A stream on the transcriber (it transcribes, and the server has a transcriber).
    pub transcriber: bool,
}

impl Needs {
    /// Whether anything is needed.
    pub fn any(self) -> bool {
        self.slot || self.transcriber
    }
}

/// A model slot as the shell gets it: the port for the session, the events for the shell,
/// and the slot's number (for the pool view).
pub type Slot = (Box<dyn ModelPort>, mpsc::Receiver<ModelEvent>, usize);
/// A transcriber stream: the port for the session, the answers for the shell.
pub type Stream = (Box<dyn TranscriberPort>, mpsc::Receiver<TranscriptEvent>);

/// What the provider got, for what was needed (`None`: not asked for).
#[derive(Default)]
pub struct Provision {
    /// The model slot, or why there is none (`model_slots_exhausted` when all are taken).
    pub slot: Option<Result<Slot, duet_models::ModelError>>,
    /// The transcriber stream, or why there is none.
    pub stream: Option<Result<Stream, duet_models::ModelError>>,
}

/// Where the shell gets what a session needs (the server: its model loop, its transcription
/// loop).
pub trait Provider: Send + Sync {
    /// Gets what `needs` asks for.
    fn provide(&self, needs: Needs) -> Pin<Box<dyn Future<Output = Provision> + Send + '_>>;
}

/// A session update waiting for what it needs.
pub(super) struct Pending {
    cfg: SessionConfig,
    needs: Needs,
    cause: Option<Arc<str>>,
    event_id: Option<String>,
}

impl Pending {
    /// A configuration held until what it `needs` is there, for the client event `cause`.
    pub(super) fn new(cfg: SessionConfig, needs: Needs, cause: Option<Arc<str>>) -> Self {
        let event_id = cause.as_deref().map(String::from);
        Self {
            cfg,
            needs,
            cause,
            event_id,
        }
    }
}

/// The ports of a provision, given to the session; the receivers stay with the caller.
pub struct Ports {
    /// The model slot's port, or the error that refused it.
    pub model: Option<Result<Box<dyn ModelPort>, duet_models::ModelError>>,
    /// The transcriber stream's port, or the error that refused it.
    pub transcriber: Option<Result<Box<dyn TranscriberPort>, duet_models::ModelError>>,
}

impl super::machine::Model {
    /// What a session configured as `cfg` lacks: a slot (a realtime session), a stream on
    /// the transcriber (it transcribes, and the server has a transcriber).
    pub(super) fn needs(&self, cfg: &SessionConfig, transcripts: &Transcripts) -> Needs {
        Needs {
            slot: self.port.is_none() && !cfg.is_transcription(),
            transcriber: transcripts.lacks_port()
                && self.caps.transcriber
                && self.caps.transcribes(cfg),
        }
    }

    /// What a held `session.update` waits for (the shell provides it, then calls
    /// [`Session::provide`]).
    pub(super) fn waiting_for(&self) -> Option<Needs> {
        self.pending.as_ref().map(|p| p.needs)
    }

    /// The configuration `patch` makes of `cfg`: checked (its tools, and its
    /// `instructions` and `tools` against their limits), its prompt charged to the memory
    /// budget (refused past it; it counts as the session's from now on).
    pub(super) fn next_config(
        &self,
        cfg: &SessionConfig,
        patch: SessionPatch,
        limits: &Limits,
        meters: &mut Metering,
    ) -> Result<SessionConfig, ErrorPayload> {
        let mut next = cfg.clone();
        next.apply(patch)?;
        let (tools, choice) = (&next.tools, &next.tool_choice);
        self.caps
            .check_tools(&cfg.model, tools, choice, "session")?;
        let bytes = super::memory::check_prompt(limits, &next.instructions, tools, "session")?;
        meters.charge_prompt(bytes)?;
        Ok(next)
    }
}

impl Session {
    /// What the session lacks for its configuration now.
    pub fn needs(&self) -> Needs {
        self.reply.model.needs(&self.cfg, &self.transcripts)
    }

    /// `session.update`: applied at once, or held until what it needs is there.
    pub(super) fn session_update(&mut self, patch: SessionPatch) -> Result<(), ErrorPayload> {
        let model = &self.reply.model;
        let next = model.next_config(&self.cfg, patch, &self.limits, &mut self.meters)?;
        let needs = model.needs(&next, &self.transcripts);
        if needs.any() {
            let cause = self.out.cause.clone();
            self.reply.model.pending = Some(Pending::new(next, needs, cause));
        } else {
            self.apply_config(next);
        }
        Ok(())
    }

    /// Takes the ports the shell got (at open, or for a held update). A held update then
    /// applies, unless it needed the slot that was refused: then the client gets the error
    /// and the session keeps its configuration. A refused transcriber stream only degrades
    /// transcription to `.failed` events.
    pub fn provide(&mut self, ports: Ports, now: std::time::Instant) {
        self.out.now = now;
        let refused = match ports.model {
            Some(Ok(port)) => {
                self.reply.model.port = Some(port);
                None
            }
            Some(Err(e)) => Some(e),
            None => None,
        };
        match ports.transcriber {
            Some(Ok(port)) => self.transcripts.set_port(port),
            Some(Err(e)) => {
                tracing::warn!(session = %self.cfg.id, "no transcription stream for this session: {e}")
            }
            None => {}
        }
        let Some(pending) = self.reply.model.pending.take() else {
            return;
        };
        self.out.cause = pending.cause;
        match refused {
            Some(e) if pending.needs.slot => {
                let error = ErrorPayload::server(
                    e.code(),
                    format!("{e}; the session stays a transcription session"),
                );
                self.out.error(error.with_event_id(pending.event_id));
            }
            _ => self.apply_config(pending.cfg),
        }
        self.out.cause = None;
    }

    /// Makes `cfg` the session's configuration and says so (`session.updated`). A session
    /// that became a transcription session gives its model slot back (when no response
    /// holds it).
    pub(super) fn apply_config(&mut self, cfg: SessionConfig) {
        self.cfg = cfg;
        self.input.reconfigure(&self.cfg);
        let transcription = self.cfg.audio.input.transcription.as_ref();
        self.transcripts.set_hints(transcription);
        if self.cfg.is_transcription() && self.reply.active.is_none() {
            self.reply.model.port = None;
        }
        self.out
            .emit(crate::protocol::ServerEventBody::SessionUpdated {
                session: Box::new(self.cfg.clone()),
            });
    }
}
