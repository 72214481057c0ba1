//! What the session reports: its events, rendered once and queued for every subscriber
//! (journaled first on an opted-in session), errors counted in the metrics and the usage
//! ledger, and the usage of its responses. The parts of the session that produce events
//! take the outbox, so emitting is not a reason for behaviour to live on `Session`.
//!
//! A transport lost while sending (closed, or not reading) is only recorded here
//! ([`Subscribers::take_lost`]); the session looks after each input and detaches (or
//! closes) then.

use std::sync::Arc;
use std::time::Instant;

use super::subscribers::{too_large_error, Subscribers};
use super::{Rendered, UsageEvent, UsageSink};
use crate::protocol::{ErrorPayload, ServerEvent, ServerEventBody};

/// The session's subscribers, the input being handled (its time and the client event that
/// caused it) and where usage is counted.
pub(super) struct Outbox {
    pub(super) subs: Subscribers,
    /// The client `event_id` of the event being handled (named by errors that replace
    /// events too large for the transport).
    pub(super) cause: Option<Arc<str>>,
    /// The time of the input being handled (the journal stamps events with it).
    pub(super) now: Instant,
    /// The session's id (for logs and `session.resync_required`).
    id: String,
    /// Bytes of events a subscriber may have unsent ([`super::Limits::max_outbound_bytes`]).
    max_bytes: usize,
    /// Where usage is counted.
    usage: Option<Arc<dyn UsageSink>>,
}

impl Outbox {
    pub(super) fn new(
        subs: Subscribers,
        id: String,
        max_bytes: usize,
        usage: Option<Arc<dyn UsageSink>>,
        now: Instant,
    ) -> Self {
        Self {
            subs,
            cause: None,
            now,
            id,
            max_bytes,
            usage,
        }
    }

    /// Sends an event to every subscriber, rendered once.
    pub(super) fn emit(&mut self, body: ServerEventBody) {
        if self.subs.closing() {
            return;
        }
        let event = Rendered::new(&ServerEvent::new(body), self.cause.clone());
        self.emit_rendered(event);
    }

    /// [`Self::emit`] for each of `events`, in order.
    pub(super) fn emit_all(&mut self, events: impl IntoIterator<Item = ServerEventBody>) {
        for event in events {
            self.emit(event);
        }
    }

    /// [`Self::emit`] for an event rendered by the caller. An event larger than a whole
    /// queue is replaced by an `error` naming the client event that caused it.
    pub(super) fn emit_rendered(&mut self, mut event: Rendered) {
        if event.len() > self.max_bytes {
            tracing::warn!(session = %self.id, kind = event.kind, bytes = event.len(), "event larger than the outbound budget; replaced by an error");
            let error = too_large_error(&event, self.max_bytes, "the outbound queue");
            event = Rendered::new(&error, event.cause.clone());
        }
        let id = &self.id;
        let resync = || super::durable::resync(id, "journal_overflow");
        self.subs.send(&event, self.now, resync);
    }

    /// An `error` event, counted in the metrics and the usage ledger.
    pub(super) fn error(&mut self, error: ErrorPayload) {
        if let Some(code) = &error.code {
            crate::metrics::METRICS.error(code);
            self.count(UsageEvent::Error(code.clone()));
        }
        tracing::debug!(session = %self.id, code = ?error.code, message = %error.message, "error event");
        self.emit(ServerEventBody::Error { error });
    }

    /// Counts usage, when the session has a sink.
    pub(super) fn count(&self, event: UsageEvent) {
        if let Some(u) = &self.usage {
            u.record(event);
        }
    }
}
