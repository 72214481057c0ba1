//! The session's event subscribers: the transport first, then sideband sockets. Every event
//! is rendered once and queued for each in its byte-bounded queue. A transport that lets its
//! queue fill (it stopped reading) gets the session closed at once (`event_queue_full`,
//! 1008); a sideband that does is dropped the same way.

use std::sync::Arc;

use super::outbound::QueueError;
use super::{Abort, EventSender, Rendered};
use crate::protocol::{codes, ErrorPayload, ServerEvent, ServerEventBody};

/// The subscribers and whether the session is closing.
pub(super) struct Subscribers {
    outs: Vec<EventSender>,
    closing: bool,
}

impl Subscribers {
    /// The transport's queue.
    pub(super) fn new(transport: EventSender) -> Self {
        Self {
            outs: vec![transport],
            closing: false,
        }
    }

    /// Whether the session closes (no more events go out).
    pub(super) fn closing(&self) -> bool {
        self.closing
    }

    /// Queues `event` for everyone.
    pub(super) fn send(&mut self, event: &Rendered) {
        if self.closing {
            return;
        }
        let mut i = 0;
        while i < self.outs.len() {
            match self.outs[i].send(event.clone()) {
                Ok(()) => i += 1,
                Err(QueueError::Full) => {
                    let budget = self.outs[i].budget();
                    tracing::warn!(
                        subscriber = i,
                        budget,
                        "a subscriber is not reading events; closing it"
                    );
                    self.outs[i].abort(queue_full(budget, event.cause.clone()));
                    if i == 0 {
                        return self.stop();
                    }
                    self.outs.remove(i);
                }
                Err(QueueError::Gone) if i == 0 => return self.stop(),
                Err(QueueError::Gone) => {
                    self.outs.remove(i);
                }
            }
        }
    }

    /// A sideband joins with `created` (its `session.created`) first.
    pub(super) fn attach(&mut self, tx: EventSender, created: &Rendered) {
        if !self.closing && tx.send(created.clone()).is_ok() {
            self.outs.push(tx);
        }
    }

    /// Closes every subscriber after its queued events.
    pub(super) fn close(&mut self, code: u16, reason: &str) {
        if !self.closing {
            for out in &self.outs {
                out.close(code, reason);
            }
        }
        self.closing = true;
    }

    /// The transport is gone or overrun: the session ends now.
    fn stop(&mut self) {
        self.closing = true;
        for out in &self.outs[1..] {
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
    #[derive(serde::Deserialize)]
    struct Id {
        event_id: Option<String>,
    }
    let event_id = serde_json::from_str::<Id>(text)
        .ok()
        .and_then(|id| id.event_id);
    crate::metrics::METRICS.error(codes::SESSION_OVERLOADED);
    let error = ErrorPayload::invalid(
        codes::SESSION_OVERLOADED,
        "the session is not keeping up with this client's events; this one was dropped: send fewer, or wait for answers",
    )
    .with_event_id(event_id);
    Rendered::new(&ServerEvent::new(ServerEventBody::Error { error }), None)
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
