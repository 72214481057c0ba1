//! The session's share of the server's memory budget (`--memory-budget-mib`). What the
//! session itself holds (the input buffer, the conversation's audio and its cached retrieve
//! encoding, the answer being generated, the replay journal) is charged to its
//! [`Meter`]: a growth a client asks for (an append, an item's audio, a retrieve, more of
//! an answer) is charged before it is taken and refused with `server_memory_exhausted` when
//! it would pass the budget; after every step the shell settles the meter to what the
//! buffers hold, so what shrank is given back and nothing drifts. Its transport's queues
//! and its transcriber stream charge the same meter themselves.

use std::sync::Arc;

use super::Session;
use crate::memory::{Charge, Meter};
use crate::protocol::ErrorPayload;

/// A session's memory: its meter, and the fixed charge of its model input queue.
pub struct SessionMemory {
    /// The meter its buffers are charged to.
    pub meter: Arc<Meter>,
    /// The model input queue at worst, charged for the session's life.
    pub fixed: Charge,
}

impl Session {
    /// Charges `bytes` more of the session's own buffers before they are taken.
    pub(super) fn reserve(&mut self, bytes: u64) -> Result<(), ErrorPayload> {
        let Some(m) = &self.memory else {
            return Ok(());
        };
        m.meter.add(bytes).map_err(|e| e.error())?;
        self.metered += bytes;
        Ok(())
    }

    /// Settles the meter to what the session's own buffers hold now: gives back what shrank,
    /// charges what grew without asking (live media, the journal).
    pub fn settle_memory(&mut self) {
        let held = self.held_bytes();
        if held == self.metered {
            return;
        }
        if let Some(m) = &self.memory {
            if held > self.metered {
                m.meter.force(held - self.metered);
            } else {
                m.meter.sub(self.metered - held);
            }
        }
        self.metered = held;
    }

    /// Bytes the session's own buffers hold.
    pub(super) fn held_bytes(&self) -> u64 {
        let answer = self.active.as_ref().map_or(0, |a| a.audio_bytes());
        (self.input.allocated_bytes() + self.conv.held_bytes() + answer + self.subs.journal_bytes())
            as u64
    }
}
