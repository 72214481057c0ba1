//! The session's event subscribers: the transport first, then sideband sockets. Every event
//! is rendered once and queued for each in its byte-bounded queue. A transport that lets its
//! queue fill (it stopped reading) gets the session closed at once (`event_queue_full`,
//! 1008); a sideband that does is dropped the same way.

use std::sync::Arc;
use std::time::Instant;

use super::journal::{Journal, Pushed};
use super::outbound::QueueError;
use super::{Abort, EventSender, Rendered};
use crate::protocol::{codes, ErrorPayload, ServerEvent, ServerEventBody};

/// The subscribers, the journal of an opted-in session, and whether the session is closing.
pub(super) struct Subscribers {
    /// The attached transport (none while an opted-in session is detached).
    transport: Option<EventSender>,
    sidebands: Vec<EventSender>,
    /// Opted-in sessions: every event after `session.created` is sequenced and kept here.
    journal: Option<Journal>,
    /// The transport was lost since the session last looked ([`Self::take_lost`]).
    lost: bool,
    closing: bool,
}

impl Subscribers {
    /// The transport's queue; `journal` for an opted-in session.
    pub(super) fn new(transport: EventSender, journal: Option<Journal>) -> Self {
        Self {
            transport: Some(transport),
            sidebands: Vec::new(),
            journal,
            lost: false,
            closing: false,
        }
    }

    /// Whether the session closes (no more events go out).
    pub(super) fn closing(&self) -> bool {
        self.closing
    }

    /// Bytes the journal holds (opted-in sessions).
    pub(super) fn journal_bytes(&self) -> usize {
        self.journal.as_ref().map_or(0, Journal::bytes)
    }

    /// The journal (opted-in sessions).
    pub(super) fn journal(&mut self) -> Option<&mut Journal> {
        self.journal.as_mut()
    }

    /// Whether the transport was lost since the last call (an opted-in session detaches).
    pub(super) fn take_lost(&mut self) -> bool {
        std::mem::take(&mut self.lost)
    }

    /// Queues `event` for everyone: sequenced and journaled first on an opted-in session
    /// (`resync` is the `session.resync_required` to send when the journal overflows).
    pub(super) fn send(
        &mut self,
        event: &Rendered,
        now: Instant,
        resync: impl FnOnce() -> Rendered,
    ) {
        if self.closing {
            return;
        }
        match self.journal.as_mut().map(|j| j.push(event, now)) {
            Some(Pushed::Sequenced(e)) => self.deliver(&e),
            Some(Pushed::Overflowed) => {
                tracing::warn!("replay journal overflowed; events go out without server_event_seq");
                self.deliver(&resync());
                self.deliver(event);
            }
            Some(Pushed::Unsequenced) | None => self.deliver(event),
        }
    }

    /// Queues `event` for everyone, outside the journal.
    pub(super) fn deliver(&mut self, event: &Rendered) {
        if self.closing {
            return;
        }
        if let Some(tx) = &self.transport {
            match tx.send(event.clone()) {
                Ok(()) => {}
                Err(QueueError::Full) => {
                    let budget = tx.budget();
                    tracing::warn!(budget, "the transport is not reading events; closing it");
                    tx.abort(queue_full(budget, event.cause.clone()));
                    self.lose();
                }
                Err(QueueError::Gone) => self.lose(),
                Err(QueueError::Memory(e)) => {
                    tracing::warn!("no memory budget left for the transport's events; closing it");
                    tx.abort(memory_abort(e, event.cause.clone()));
                    self.lose();
                }
            }
        }
        self.sidebands.retain(|out| match out.send(event.clone()) {
            Ok(()) => true,
            Err(QueueError::Full) => {
                let budget = out.budget();
                tracing::warn!(budget, "a sideband is not reading events; closing it");
                out.abort(queue_full(budget, event.cause.clone()));
                false
            }
            Err(QueueError::Gone) => false,
            Err(QueueError::Memory(e)) => {
                out.abort(memory_abort(e, event.cause.clone()));
                false
            }
        });
    }

    /// A sideband joins with `created` (its `session.created`) first.
    pub(super) fn attach(&mut self, tx: EventSender, created: &Rendered) {
        if !self.closing && tx.send(created.clone()).is_ok() {
            self.sidebands.push(tx);
        }
    }

    /// A resumed transport takes over: it gets `first` (`session.resumed`) and the replay,
    /// then live events. Returns the transport it replaces, if one was attached.
    pub(super) fn reattach(
        &mut self,
        tx: EventSender,
        first: &Rendered,
        replay: &[Rendered],
    ) -> Option<EventSender> {
        let old = self.transport.take();
        let ok =
            tx.send(first.clone()).is_ok() && replay.iter().all(|e| tx.send(e.clone()).is_ok());
        if ok {
            self.transport = Some(tx);
        } else {
            self.lost = true;
        }
        old
    }

    /// Detaches the transport (its connection dropped): it is closed, events are journaled.
    pub(super) fn detach(&mut self) {
        if let Some(tx) = self.transport.take() {
            tx.close(1000, "session detached");
        }
    }

    /// Closes every subscriber after its queued events.
    pub(super) fn close(&mut self, code: u16, reason: &str) {
        if !self.closing {
            for out in self.transport.iter().chain(&self.sidebands) {
                out.close(code, reason);
            }
        }
        self.closing = true;
    }

    /// The transport is gone or overrun: an opted-in session detaches (the session sees it
    /// in [`Self::take_lost`]); any other ends now.
    fn lose(&mut self) {
        self.transport = None;
        if self.journal.is_some() {
            self.lost = true;
            return;
        }
        self.closing = true;
        for out in &self.sidebands {
            out.close(1000, "session ended");
        }
    }
}

/// The `error` event that replaces `event` when a transport cannot carry it (it is larger
/// than `limit` bytes of `what`), naming the client event that caused it.
pub fn too_large_error(event: &Rendered, limit: usize, what: &str) -> ServerEvent {
    let error = ErrorPayload::invalid(
        codes::EVENT_TOO_LARGE_FOR_TRANSPORT,
        format!(
            "the {} event of {} bytes is larger than {what} allows ({limit} bytes) and was not sent",
            event.kind,
            event.len()
        ),
    )
    .with_event_id(event.cause.as_deref().map(str::to_string));
    ServerEvent::new(ServerEventBody::Error { error })
}

/// The `error` for a client event the session could not take (its inbox or inbound byte
/// budget is full), naming the event's `event_id`; the transport sends it itself.
pub fn busy_error(text: &str) -> Rendered {
    refusal(
        text,
        ErrorPayload::invalid(
            codes::SESSION_OVERLOADED,
            "the session is not keeping up with this client's events; this one was dropped: send fewer, or wait for answers",
        ),
    )
}

/// The `error` that answers client event `text` when the server's memory budget has no room
/// for it (`server_memory_exhausted`, with its `event_id`).
pub fn memory_error(text: &str, e: crate::memory::Exhausted) -> Rendered {
    refusal(text, e.error())
}

/// `error` answering the client event `text` (its `event_id` named), counted in metrics.
fn refusal(text: &str, error: ErrorPayload) -> Rendered {
    if let Some(code) = &error.code {
        crate::metrics::METRICS.error(code);
    }
    let error = error.with_event_id(event_id_of(text));
    Rendered::new(&ServerEvent::new(ServerEventBody::Error { error }), None)
}

/// The `event_id` of the client event `text`, when it has one.
pub fn event_id_of(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Id {
        event_id: Option<String>,
    }
    serde_json::from_str::<Id>(text)
        .ok()
        .and_then(|id| id.event_id)
}

/// Closes a transport whose events the memory budget has no room for.
fn memory_abort(e: crate::memory::Exhausted, cause: Option<Arc<str>>) -> Abort {
    let error = ServerEvent::new(ServerEventBody::Error { error: e.error() });
    Abort {
        code: 1013,
        reason: "server memory exhausted".into(),
        error: Some(Rendered::new(&error, cause)),
    }
}

/// The abort that closes a subscriber whose queue is full.
fn queue_full(budget: usize, cause: Option<Arc<str>>) -> Abort {
    let error = ErrorPayload::server(
        codes::EVENT_QUEUE_FULL,
        format!("more than {budget} bytes of events are unsent: the client is not reading; the session is closed"),
    );
    let error = ServerEvent::new(ServerEventBody::Error { error });
    Abort {
        code: 1008,
        reason: "event queue full".into(),
        error: Some(Rendered::new(&error, cause)),
    }
}
