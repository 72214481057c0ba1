//! The session's share of the server's memory budget (`--memory-budget-mib`). What the
//! session itself holds (the input buffer, the conversation's audio and its cached retrieve
//! encoding, the answer being generated, the replay journal) is charged to its
//! [`Meter`]: a growth a client asks for (an append, an item's audio, a retrieve, more of
//! an answer) is charged before it is taken and refused with `server_memory_exhausted` when
//! it would pass the budget; after every step the shell settles the meter to what the
//! buffers hold, so what shrank is given back and nothing drifts. Its transport's queues
//! and its transcriber stream charge the same meter themselves.

use std::sync::Arc;

use serde_json::Value;

use super::Limits;
use crate::memory::{Charge, Meter};
use crate::protocol::{codes, ErrorPayload};

/// A session's memory: its meter, and the fixed charge of its model input queue.
pub struct SessionMemory {
    /// The meter its buffers are charged to.
    pub meter: Arc<Meter>,
    /// The model input queue at worst, charged for the session's life.
    pub fixed: Charge,
}

/// What the session charged to its memory meter (its own buffers and its prompt).
#[derive(Default)]
pub(super) struct Metering {
    /// Its share of the memory budget (none: no budget).
    memory: Option<SessionMemory>,
    /// Bytes of its own buffers charged to the meter.
    metered: u64,
    /// Bytes its `instructions` and `tools` take (counted in its buffers).
    prompt_bytes: u64,
}

impl Metering {
    pub(super) fn new(memory: Option<SessionMemory>) -> Self {
        Self {
            memory,
            ..Self::default()
        }
    }

    /// Charges `bytes` more of the session's own buffers before they are taken.
    pub(super) fn reserve(&mut self, bytes: u64) -> Result<(), ErrorPayload> {
        let Some(m) = &self.memory else {
            return Ok(());
        };
        m.meter.add(bytes).map_err(|e| e.error())?;
        self.metered += bytes;
        Ok(())
    }

    /// Gives back `bytes` of what [`Self::reserve`] charged.
    pub(super) fn give_back(&mut self, bytes: u64) {
        let bytes = bytes.min(self.metered);
        if let Some(m) = &self.memory {
            m.meter.sub(bytes);
        }
        self.metered -= bytes;
    }

    /// Settles the meter to `buffers`, what the session's own buffers hold now (the prompt
    /// is added here): gives back what shrank, charges what grew without asking (live media,
    /// the journal).
    pub(super) fn settle(&mut self, buffers: u64) {
        let held = buffers + self.prompt_bytes;
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

    /// The prompt takes `bytes` from now on: what it adds is charged (refused past the
    /// budget).
    pub(super) fn charge_prompt(&mut self, bytes: u64) -> Result<(), ErrorPayload> {
        self.reserve(bytes.saturating_sub(self.prompt_bytes))?;
        self.prompt_bytes = bytes;
        Ok(())
    }
}

/// Refuses `instructions` or `tools` (of `scope`: `session` or `response`) over their
/// limits; returns the bytes they take.
pub(super) fn check_prompt(
    limits: &Limits,
    instructions: &str,
    tools: &[Value],
    scope: &str,
) -> Result<u64, ErrorPayload> {
    let over = |param: &str, bytes: usize, max: usize, flag: &str| {
        ErrorPayload::invalid(
            codes::INVALID_VALUE,
            format!(
                "{scope}.{param} is {bytes} bytes; at most {max} are allowed ({flag} {})",
                max >> 10
            ),
        )
        .with_param(format!("{scope}.{param}"))
    };
    let max = limits.max_instructions;
    if instructions.len() > max {
        let flag = "--max-instructions-kib";
        return Err(over("instructions", instructions.len(), max, flag));
    }
    let tools_bytes = json_bytes(tools);
    let max = limits.max_tools;
    if tools_bytes > max {
        return Err(over("tools", tools_bytes, max, "--max-tools-kib"));
    }
    Ok((instructions.len() + tools_bytes) as u64)
}

/// The length of `tools` as JSON, without writing it anywhere.
fn json_bytes(tools: &[Value]) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail (a `Value` always serializes).
    let _ = serde_json::to_writer(&mut count, tools);
    count.0
}
