//! Who has the floor with a full-duplex (autonomous) model, which decides itself when to
//! speak: its speaking frames open a response when none is active (`response.speak` before
//! the content part), fill a response the client created (`response.speak` before the first
//! delta), and its falling silent completes the response (`response.done`, then
//! `response.listen`). After a cancel the session waits for the model to fall silent before
//! it opens another response on its own.

use std::time::{Duration, Instant};

use duet_models::StepOutput;

use super::reply::{Cx, Reply};
use crate::protocol::{ResponseParams, ResponseStatus, ServerEventBody};

/// The autonomous model's speak/listen state.
#[derive(Debug)]
pub(super) struct Floor {
    /// The model decides on its own when to speak (full duplex).
    pub(super) autonomous: bool,
    /// Whether the model's last step was part of its speech.
    pub(super) model_speaking: bool,
    /// A response was cancelled: the model's ongoing speech opens no new response until
    /// the model fell silent.
    pub(super) suppress_speak: bool,
    /// When a client-created response still waiting for speech gives up.
    pub(super) speak_deadline: Option<Instant>,
    /// How long that wait is.
    pub(super) speak_timeout: Duration,
}

impl Floor {
    /// The floor of a session on an (autonomous or turn-based) model.
    pub(super) fn new(autonomous: bool, speak_timeout: Duration) -> Self {
        Self {
            autonomous,
            model_speaking: false,
            suppress_speak: false,
            speak_deadline: None,
            speak_timeout,
        }
    }

    /// Tracks whether the model speaks; returns whether it just fell silent. Falling silent
    /// ends the suppression.
    fn speaking(&mut self, speaking: bool) -> bool {
        let was_speaking = std::mem::replace(&mut self.model_speaking, speaking);
        if !speaking {
            self.suppress_speak = false;
        }
        was_speaking && !speaking
    }
}

impl Reply {
    /// A step of an autonomous model: its speaking frames open or fill a response, its
    /// falling silent completes it; listening frames (silence) are dropped.
    pub(super) fn on_autonomous_output(&mut self, cx: &mut Cx<'_>, out: StepOutput) {
        if self.floor.speaking(out.speaking) {
            self.model_fell_silent(cx);
        }
        if !out.speaking {
            return;
        }
        if self.floor.suppress_speak {
            // The rest of speech whose response was cancelled: it opens no response, nor
            // fills one the client created since (that waits for the model's next speech).
            return;
        }
        if self.active.is_none() {
            // The model started speaking on its own: it opens a response.
            match self.prepare(cx, ResponseParams::default()) {
                Ok((active, _)) => self.begin(cx, active, None, true),
                Err(e) => cx.out.error(e),
            }
        }
        let speak = match self.active.as_mut() {
            None => return,
            Some(a) if !a.spoke => Some(a.speak(&cx.cfg.id, self.model.epoch)),
            Some(_) => None,
        };
        if let Some(speak) = speak {
            self.floor.speak_deadline = None;
            cx.out.emit(speak);
        }
        if self.stream_active(cx, &out) {
            self.stop_incomplete(cx);
        }
    }

    /// The autonomous model stopped speaking: the response its speech filled completes, then
    /// `response.listen` (naming that response, if any).
    fn model_fell_silent(&mut self, cx: &mut Cx<'_>) {
        let ended = self
            .active
            .as_ref()
            .filter(|a| a.spoke)
            .map(|a| a.response.id.clone());
        if ended.is_some() {
            self.finish(cx, ResponseStatus::Completed, None);
        }
        let listen = ServerEventBody::model_listen(&cx.cfg.id, self.model.epoch.0, ended);
        cx.out.emit(listen);
    }

    /// A client-created response on an autonomous model got no speech in time: it completes
    /// empty and the model is reported listening.
    pub(super) fn speak_timed_out(&mut self, cx: &mut Cx<'_>) {
        self.floor.speak_deadline = None;
        let Some(a) = self.active.as_ref().filter(|a| !a.spoke) else {
            return;
        };
        let id = a.response.id.clone();
        self.finish(cx, ResponseStatus::Completed, None);
        let listen = ServerEventBody::model_listen(&cx.cfg.id, self.model.epoch.0, Some(id));
        cx.out.emit(listen);
    }

    /// A step of an autonomous model from before the last fence: its audio and text belong
    /// to a cancelled response and are dropped, but whether the model is speaking still
    /// counts (falling silent there ends the suppression, as in [`Self::on_model_output`]).
    pub(super) fn on_fenced_output(&mut self, cx: &mut Cx<'_>, out: &StepOutput) {
        if self.floor.autonomous && self.floor.speaking(out.speaking) {
            self.model_fell_silent(cx);
        }
    }
}
