//! The session's outbound queues, one per subscriber (the transport, sideband sockets).
//!
//! Events are rendered to JSON once and shared by every subscriber. Each queue is bounded in
//! bytes (the JSON not yet handed to the socket or the data channel), not only in events: one
//! `conversation.item.retrieve` of a long audio item is tens of megabytes, so a count bound
//! alone let one client hold gigabytes. A queued event keeps its bytes counted until the
//! transport drops its [`Delivery`], i.e. after the event was written.
//!
//! Orderly closes travel in the queue, after the events before them. An [`Abort`] overtakes
//! everything: the transport sends what it can of the abort within a short grace and drops
//! the connection.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::memory::{Exhausted, Meter};
use crate::protocol::ServerEvent;

/// Events a queue may hold, however small (the byte budget is the real bound).
const MAX_QUEUED_EVENTS: usize = 65_536;

/// One server event rendered once, shared by every subscriber.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// The JSON text frame (shared: a retrieved audio item is tens of megabytes).
    pub json: Arc<String>,
    /// Its `type`.
    pub kind: &'static str,
    /// The client `event_id` of the event that caused it, if any (a transport that cannot
    /// carry the event names it in the `error` that replaces it).
    pub cause: Option<Arc<str>>,
}

impl Rendered {
    /// Renders `event`.
    pub fn new(event: &ServerEvent, cause: Option<Arc<str>>) -> Self {
        Self::from_json(event.to_json(), event.kind(), cause)
    }

    /// An event already rendered as `json`.
    pub fn from_json(json: String, kind: &'static str, cause: Option<Arc<str>>) -> Self {
        Self {
            json: Arc::new(json),
            kind,
            cause,
        }
    }

    /// Bytes of the JSON text.
    pub fn len(&self) -> usize {
        self.json.len()
    }

    /// Whether the JSON text is empty (never, for a rendered event).
    pub fn is_empty(&self) -> bool {
        self.json.is_empty()
    }
}

/// An urgent close: the queued events are dropped.
#[derive(Clone, Debug)]
pub struct Abort {
    /// Close code (WebSocket semantics).
    pub code: u16,
    /// Close reason.
    pub reason: String,
    /// An `error` event to send first, when the transport still can.
    pub error: Option<Rendered>,
}

/// What a transport takes from its queue.
#[derive(Debug)]
pub enum Delivery {
    /// An event; its bytes stay counted until this value is dropped.
    Event(Rendered, Held),
    /// Close the connection (after the events before it).
    Close {
        /// Close code (WebSocket semantics).
        code: u16,
        /// Reason.
        reason: String,
    },
}

/// Keeps an event's bytes counted in its queue until dropped.
#[derive(Debug)]
pub struct Held {
    shared: Arc<Shared>,
    bytes: usize,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.shared.uncount(self.bytes);
    }
}

enum Item {
    Event(Rendered),
    Close { code: u16, reason: String },
}

#[derive(Default)]
struct State {
    items: VecDeque<Item>,
    abort: Option<Abort>,
    /// An abort happened: nothing is queued any more.
    aborted: bool,
    /// The sender side is gone (the session ended).
    closed: bool,
    /// The receiver side is gone (the transport ended).
    gone: bool,
}

struct Shared {
    state: Mutex<State>,
    bytes: AtomicUsize,
    budget: usize,
    notify: Notify,
    /// The session's share of the memory budget, charged with the queued bytes.
    meter: Option<Arc<Meter>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("bytes", &self.bytes)
            .field("budget", &self.budget)
            .finish()
    }
}

impl Shared {
    /// Drops every queued item and uncounts its bytes.
    fn discard(&self, state: &mut State) {
        let bytes: usize = state
            .items
            .drain(..)
            .map(|item| match item {
                Item::Event(e) => e.len(),
                Item::Close { .. } => 0,
            })
            .sum();
        self.uncount(bytes);
    }

    /// `bytes` left the queue.
    fn uncount(&self, bytes: usize) {
        self.bytes.fetch_sub(bytes, Ordering::AcqRel);
        if let Some(m) = &self.meter {
            m.sub(bytes as u64);
        }
    }
}

/// Why an event could not be queued.
#[derive(Debug, PartialEq, Eq)]
pub enum QueueError {
    /// The queue holds its budget of bytes (or events): the subscriber is not reading.
    Full,
    /// The subscriber is gone.
    Gone,
    /// The server's memory budget has no room for the event.
    Memory(Exhausted),
}

/// A new queue bounded to `budget` bytes.
pub fn queue(budget: usize) -> (EventSender, EventReceiver) {
    metered_queue(budget, None)
}

/// A new queue bounded to `budget` bytes, its queued bytes charged to `meter` (an event that
/// does not fit the memory budget is refused with [`QueueError::Memory`]).
pub fn metered_queue(budget: usize, meter: Option<Arc<Meter>>) -> (EventSender, EventReceiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        bytes: AtomicUsize::new(0),
        budget,
        notify: Notify::new(),
        meter,
    });
    (
        EventSender {
            shared: shared.clone(),
        },
        EventReceiver { shared },
    )
}

/// The session's side of a queue.
#[derive(Debug)]
pub struct EventSender {
    shared: Arc<Shared>,
}

impl EventSender {
    /// The queue's byte budget.
    pub fn budget(&self) -> usize {
        self.shared.budget
    }

    /// Bytes queued and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.shared.bytes.load(Ordering::Acquire)
    }

    /// Queues an event, unless that would pass the byte budget.
    pub fn send(&self, event: Rendered) -> Result<(), QueueError> {
        let Ok(mut state) = self.shared.state.lock() else {
            return Err(QueueError::Gone);
        };
        if state.gone || state.aborted {
            return Err(QueueError::Gone);
        }
        let len = event.len();
        let bytes = self.shared.bytes.load(Ordering::Acquire);
        if bytes + len > self.shared.budget || state.items.len() >= MAX_QUEUED_EVENTS {
            return Err(QueueError::Full);
        }
        if let Some(m) = &self.shared.meter {
            m.add(len as u64).map_err(QueueError::Memory)?;
        }
        self.shared.bytes.fetch_add(len, Ordering::AcqRel);
        state.items.push_back(Item::Event(event));
        drop(state);
        self.shared.notify.notify_one();
        Ok(())
    }

    /// Closes the connection after the queued events.
    pub fn close(&self, code: u16, reason: &str) {
        if let Ok(mut state) = self.shared.state.lock() {
            state.items.push_back(Item::Close {
                code,
                reason: reason.to_string(),
            });
        }
        self.shared.notify.notify_one();
    }

    /// Closes the connection at once: queued events are dropped.
    pub fn abort(&self, abort: Abort) {
        if let Ok(mut state) = self.shared.state.lock() {
            if !state.aborted {
                state.aborted = true;
                state.abort = Some(abort);
            }
        }
        self.shared.notify.notify_one();
    }

    /// Whether the transport stopped reading the queue.
    pub fn is_gone(&self) -> bool {
        self.shared.state.lock().map_or(true, |s| s.gone)
    }
}

impl Drop for EventSender {
    fn drop(&mut self) {
        if let Ok(mut state) = self.shared.state.lock() {
            state.closed = true;
        }
        self.shared.notify.notify_one();
    }
}

/// What [`EventReceiver::try_recv`] found.
#[derive(Debug)]
pub enum Received {
    /// The next delivery.
    Delivery(Delivery),
    /// The queue was aborted.
    Abort(Abort),
    /// Nothing queued now.
    Empty,
    /// The session is gone and the queue is drained.
    Closed,
}

/// The transport's side of a queue.
#[derive(Debug)]
pub struct EventReceiver {
    shared: Arc<Shared>,
}

impl EventReceiver {
    /// Takes what is next without waiting: an abort overtakes queued events.
    pub fn try_recv(&mut self) -> Received {
        let Ok(mut state) = self.shared.state.lock() else {
            return Received::Closed;
        };
        if let Some(abort) = state.abort.take() {
            self.shared.discard(&mut state);
            state.closed = true;
            return Received::Abort(abort);
        }
        match state.items.pop_front() {
            Some(Item::Event(event)) => {
                let bytes = event.len();
                Received::Delivery(Delivery::Event(
                    event,
                    Held {
                        shared: self.shared.clone(),
                        bytes,
                    },
                ))
            }
            Some(Item::Close { code, reason }) => {
                Received::Delivery(Delivery::Close { code, reason })
            }
            None if state.closed => Received::Closed,
            None => Received::Empty,
        }
    }

    /// Waits for what is next; `None` once the session is gone and the queue drained.
    pub async fn recv(&mut self) -> Option<Result<Delivery, Abort>> {
        let shared = self.shared.clone();
        loop {
            let notified = shared.notify.notified();
            match self.try_recv() {
                Received::Delivery(d) => return Some(Ok(d)),
                Received::Abort(a) => return Some(Err(a)),
                Received::Closed => return None,
                Received::Empty => notified.await,
            }
        }
    }

    /// Waits until the queue is aborted (for a writer blocked on a slow socket).
    pub async fn aborted(&self) -> Abort {
        loop {
            let notified = self.shared.notify.notified();
            if let Some(abort) = self.shared.state.lock().ok().and_then(|s| s.abort.clone()) {
                return abort;
            }
            notified.await;
        }
    }
}

impl Drop for EventReceiver {
    fn drop(&mut self) {
        if let Ok(mut state) = self.shared.state.lock() {
            state.gone = true;
            self.shared.discard(&mut state);
        }
    }
}

#[cfg(test)]
#[path = "outbound_tests.rs"]
mod tests;
