//! The answer side of the session: the model slot and the epoch that fences its output, the
//! response in flight, what of its audio played (WebRTC), the autonomous model's floor, and
//! an answer started before its turn was confirmed. Its behaviour (`respond`, `calls`,
//! `floor`, `playback`, `speculate`) lives on [`Reply`] and reaches the rest of the session
//! through a [`Cx`]: the configuration, the conversation, the outbox, the transport and the
//! few other parts an answer touches, borrowed for one step.

use super::conversation::Conversation;
use super::durable::Lease;
use super::floor::Floor;
use super::machine::{Model, Timers};
use super::memory::Metering;
use super::outbox::Outbox;
use super::playback::PlaybackView;
use super::response::ActiveResponse;
use super::speculate::Speculation;
use super::transcripts::Transcripts;
use super::{Limits, Transport};
use crate::protocol::SessionConfig;

/// The answer side of a session (see the module docs).
pub(super) struct Reply {
    /// Its model slot, the epoch that fences the slot's output, what the model can do, and
    /// an update waiting for a slot.
    pub(super) model: Model,
    /// The response in flight.
    pub(super) active: Option<ActiveResponse>,
    /// WebRTC: what of each response's audio the engine sent.
    pub(super) view: PlaybackView,
    /// The autonomous model's floor.
    pub(super) floor: Floor,
    /// An answer started before its turn was confirmed (see `speculate`).
    pub(super) speculation: Option<Speculation>,
}

impl Reply {
    pub(super) fn new(model: Model, floor: Floor) -> Self {
        Self {
            model,
            active: None,
            view: PlaybackView::default(),
            floor,
            speculation: None,
        }
    }

    /// Whether a response that belongs to the conversation is in flight.
    pub(super) fn responding(&self) -> bool {
        self.active.as_ref().is_some_and(|a| a.in_conversation)
    }
}

/// What an answer touches of the rest of the session during one step.
pub(super) struct Cx<'a> {
    pub(super) cfg: &'a SessionConfig,
    pub(super) conv: &'a mut Conversation,
    pub(super) out: &'a mut Outbox,
    pub(super) transport: &'a Transport,
    pub(super) meters: &'a mut Metering,
    pub(super) timers: &'a mut Timers,
    pub(super) transcripts: &'a mut Transcripts,
    pub(super) lease: Option<&'a Lease>,
    pub(super) limits: &'a Limits,
    /// The input clock (samples of input heard so far).
    pub(super) clock: u64,
}
