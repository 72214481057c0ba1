//! The replay journal of an opted-in session: every event after `session.created` gets the
//! next `server_event_seq` and is kept, as the JSON sent, until the client acknowledges it
//! (`session.event_ack`), it is older than the journal's age limit, or the journal would
//! exceed its byte budget. A resume replays what the client missed from here.
//!
//! Overflow is final, as in the contract: the journal empties, `push` reports it once (the
//! session sends `session.resync_required`), and events go out live without a seq for the
//! rest of the session; a later resume finds a gap.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::Rendered;

/// What [`Journal::push`] made of an event.
#[derive(Debug)]
pub(super) enum Pushed {
    /// Sequenced and journaled: send this rendering.
    Sequenced(Rendered),
    /// The journal overflowed just now: send `session.resync_required`, then the event as it is.
    Overflowed,
    /// The journal overflowed earlier: send the event as it is.
    Unsequenced,
}

/// Why a resume cannot replay.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ReplayError {
    /// The client claims a seq the session never sent.
    Ahead {
        /// The last seq sent.
        head: u64,
    },
    /// Events the client missed are no longer held (acknowledged, aged out, overflowed).
    Gap,
}

/// One session's journal.
#[derive(Debug)]
pub(super) struct Journal {
    entries: VecDeque<(u64, Instant, Rendered)>,
    bytes: usize,
    head: u64,
    overflowed: bool,
    max_bytes: usize,
    max_age: Duration,
}

impl Journal {
    pub(super) fn new(max_bytes: usize, max_age: Duration) -> Self {
        Self {
            entries: VecDeque::new(),
            bytes: 0,
            head: 0,
            overflowed: false,
            max_bytes,
            max_age,
        }
    }

    /// The last seq assigned (0: none yet).
    #[cfg(test)]
    pub(super) fn head(&self) -> u64 {
        self.head
    }

    /// Bytes held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether the journal overflowed (events go out without a seq).
    #[cfg(test)]
    pub(super) fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Sequences and keeps `event`, sent at `now`.
    pub(super) fn push(&mut self, event: &Rendered, now: Instant) -> Pushed {
        if self.overflowed {
            return Pushed::Unsequenced;
        }
        self.prune(now);
        let seq = self.head + 1;
        let sequenced = with_seq(event, seq);
        if self.bytes + sequenced.len() > self.max_bytes {
            self.overflowed = true;
            self.entries.clear();
            self.bytes = 0;
            return Pushed::Overflowed;
        }
        self.head = seq;
        self.bytes += sequenced.len();
        self.entries.push_back((seq, now, sequenced.clone()));
        Pushed::Sequenced(sequenced)
    }

    /// `session.event_ack`: drops every entry up to `seq`. `Err(head)` when `seq` is past
    /// the head or negative.
    pub(super) fn ack(&mut self, seq: i64) -> Result<(), u64> {
        let seq = u64::try_from(seq).map_err(|_| self.head)?;
        if seq > self.head {
            return Err(self.head);
        }
        while self.entries.front().is_some_and(|(s, _, _)| *s <= seq) {
            if let Some((_, _, e)) = self.entries.pop_front() {
                self.bytes -= e.len();
            }
        }
        Ok(())
    }

    /// The events after `last`, in order, for a resume at `now`.
    pub(super) fn replay(&mut self, last: u64, now: Instant) -> Result<Vec<Rendered>, ReplayError> {
        if last > self.head {
            return Err(ReplayError::Ahead { head: self.head });
        }
        if self.overflowed {
            return Err(ReplayError::Gap);
        }
        self.prune(now);
        let first_kept = self.entries.front().map_or(self.head + 1, |(s, _, _)| *s);
        if last + 1 < first_kept {
            return Err(ReplayError::Gap);
        }
        Ok(self
            .entries
            .iter()
            .filter(|(s, _, _)| *s > last)
            .map(|(_, _, e)| e.clone())
            .collect())
    }

    /// Drops entries older than the age limit.
    fn prune(&mut self, now: Instant) {
        while let Some((_, at, e)) = self.entries.front() {
            if now.saturating_duration_since(*at) <= self.max_age {
                break;
            }
            self.bytes -= e.len();
            self.entries.pop_front();
        }
    }
}

/// `event` with `"server_event_seq":seq` as its first member (one copy of the JSON; the
/// rest is what every subscriber gets).
fn with_seq(event: &Rendered, seq: u64) -> Rendered {
    let json = event.json.as_str();
    let rest = json.strip_prefix('{').unwrap_or(json);
    let sep = if rest.starts_with('}') { "" } else { "," };
    let json = format!("{{\"server_event_seq\":{seq}{sep}{rest}");
    Rendered::from_json(json, event.kind, event.cause.clone())
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
