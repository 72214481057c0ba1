//! The server's memory budget: what one session can hold at worst under the configured
//! limits, and what `--max-sessions` and `--max-calls` of them add up to. Logged at start-up
//! (with a warning when it exceeds the machine's memory) and documented in
//! docs/configuration.md, so an operator can size the limits to the machine; and the account
//! that enforces a budget ([`MemoryAccount`]), which every client-fillable buffer is charged to.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::protocol::{codes, ErrorPayload};

/// Bytes per sample of the audio a session keeps for its life (PCM16): the input buffer,
/// the conversation, the response being generated.
pub(crate) const PCM16: u64 = std::mem::size_of::<i16>() as u64;
/// Bytes per sample of audio on its way (f32): the model's and the transcriber's queues, a
/// call's playback queue.
pub(crate) const F32: u64 = std::mem::size_of::<f32>() as u64;
/// Session audio rate.
pub(crate) const RATE: u64 = duet_media::SESSION_RATE as u64;
/// A call's media state at worst: 30 s of 48 kHz playback queue, jitter buffer, codecs.
pub(crate) const CALL_MEDIA: u64 = 30 * 48_000 * F32 + (1 << 20);
/// The model loop's input queue per session at worst (500 frames of 80 ms, Moshi's frame).
pub const MODEL_QUEUE: u64 = 500 * 1_920 * F32;

/// Worst cases, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// One session.
    pub per_session: u64,
    /// Added by a WebRTC call (media state; its session is counted as a session).
    pub per_call: u64,
    /// Held by the server itself: the live client secrets (`--max-client-secrets`, and
    /// `--max-demo-secrets` with `--demo-mint-secrets`).
    pub shared: u64,
    /// `--max-sessions` sessions (a call's session is one of them) and `--max-calls` calls'
    /// media, plus `shared`.
    pub total: u64,
}

/// The largest client secret record (its session object).
pub const SECRET: u64 = 32 * 1024;

impl Budget {
    /// The machine's memory, from `/proc/meminfo` (Linux), in bytes.
    pub fn machine() -> Option<u64> {
        let info = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }
}

fn mib(bytes: u64) -> u64 {
    bytes >> 20
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "worst case {} MiB per session + {} MiB per call + {} MiB of client secrets; {} MiB at the session and call caps",
            mib(self.per_session),
            mib(self.per_call),
            mib(self.shared),
            mib(self.total)
        )
    }
}

/// The server-wide account every client-fillable buffer is charged to, against
/// `--memory-budget-mib`. A charge that would pass the limit is refused ([`Exhausted`]);
/// what was charged is given back when the charge (or the [`Meter`]) is dropped.
#[derive(Debug)]
pub struct MemoryAccount {
    limit: u64,
    used: AtomicU64,
}

/// A charge that would pass the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exhausted {
    /// The budget, in bytes.
    pub limit: u64,
}

impl Exhausted {
    /// The `server_memory_exhausted` error, naming the limit.
    pub fn error(self) -> ErrorPayload {
        ErrorPayload::server(codes::SERVER_MEMORY_EXHAUSTED, self.to_string())
    }
}

impl fmt::Display for Exhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the server's memory budget (--memory-budget-mib {}) is spent; this request was refused, and the session goes on",
            mib(self.limit)
        )
    }
}

impl MemoryAccount {
    /// An account of `limit` bytes.
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicU64::new(0),
        })
    }

    /// The budget, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes charged now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    fn add(&self, bytes: u64) -> Result<(), Exhausted> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(bytes).filter(|&n| n <= self.limit)
            })
            .map(drop)
            .map_err(|_| Exhausted { limit: self.limit })
    }

    fn release(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                Some(u.saturating_sub(bytes))
            });
    }

    /// Charges `bytes`, held until the [`Charge`] is dropped.
    pub fn charge(self: &Arc<Self>, bytes: u64) -> Result<Charge, Exhausted> {
        self.add(bytes)?;
        Ok(Charge {
            account: self.clone(),
            bytes,
        })
    }
}

/// Bytes charged to a [`MemoryAccount`], given back when dropped.
#[derive(Debug)]
pub struct Charge {
    account: Arc<MemoryAccount>,
    bytes: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.account.release(self.bytes);
    }
}

/// One session's (or one connection's) share of the account: a reserve charged when it
/// opens, so that what a well-behaved session holds never competes with anyone, and every
/// byte past the reserve charged as it is taken. Shared by the parts that fill its buffers
/// (the session, its transport's queues, its transcriber stream); everything it holds is
/// given back when the last of them drops it.
#[derive(Debug)]
pub struct Meter {
    account: Arc<MemoryAccount>,
    reserve: u64,
    /// Bytes held now.
    held: Mutex<u64>,
}

impl Meter {
    /// A meter with `reserve` bytes charged up front (refused when they do not fit).
    pub fn open(account: &Arc<MemoryAccount>, reserve: u64) -> Result<Arc<Self>, Exhausted> {
        account.add(reserve)?;
        Ok(Arc::new(Self {
            account: account.clone(),
            reserve,
            held: Mutex::new(0),
        }))
    }

    /// A meter with no reserve: every byte competes for the budget.
    pub fn unreserved(account: &Arc<MemoryAccount>) -> Arc<Self> {
        Arc::new(Self {
            account: account.clone(),
            reserve: 0,
            held: Mutex::new(0),
        })
    }

    /// A meter with `reserve` bytes charged up front when they fit, else none.
    pub fn open_or_unreserved(account: &Arc<MemoryAccount>, reserve: u64) -> Arc<Self> {
        Self::open(account, reserve).unwrap_or_else(|_| Self::unreserved(account))
    }

    /// Bytes held now.
    pub fn held(&self) -> u64 {
        self.held.lock().map_or(0, |h| *h)
    }

    /// Takes `bytes` more, refused when the part past the reserve does not fit the budget.
    pub fn add(&self, bytes: u64) -> Result<(), Exhausted> {
        self.grow(bytes, |extra| self.account.add(extra))
    }

    /// Takes `bytes` more whether or not they fit (memory already taken, reported late).
    pub fn force(&self, bytes: u64) {
        let _ = self.grow(bytes, |extra| {
            self.account.used.fetch_add(extra, Ordering::AcqRel);
            Ok(())
        });
    }

    /// Holds `bytes` more once `charge` took the part past the reserve.
    fn grow(
        &self,
        bytes: u64,
        charge: impl FnOnce(u64) -> Result<(), Exhausted>,
    ) -> Result<(), Exhausted> {
        let exhausted = Exhausted {
            limit: self.account.limit,
        };
        let mut held = self.held.lock().map_err(|_| exhausted)?;
        let next = *held + bytes;
        let extra = next.max(self.reserve) - (*held).max(self.reserve);
        if extra > 0 {
            charge(extra)?;
        }
        *held = next;
        Ok(())
    }

    /// Gives `bytes` back.
    pub fn sub(&self, bytes: u64) {
        if let Ok(mut held) = self.held.lock() {
            let next = held.saturating_sub(bytes);
            self.account
                .release((*held).max(self.reserve) - next.max(self.reserve));
            *held = next;
        }
    }

    /// Takes `bytes` as a [`MeterCharge`] that gives them back when dropped.
    pub fn charge(self: &Arc<Self>, bytes: u64) -> Result<MeterCharge, Exhausted> {
        self.add(bytes)?;
        Ok(MeterCharge {
            meter: self.clone(),
            bytes,
        })
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        let held = self.held.lock().map_or(0, |h| *h);
        self.account.release(held.max(self.reserve));
    }
}

/// Bytes held on a [`Meter`] until dropped (an inbound message, audio queued for the
/// transcriber).
#[derive(Debug)]
pub struct MeterCharge {
    meter: Arc<Meter>,
    bytes: u64,
}

impl Drop for MeterCharge {
    fn drop(&mut self) {
        self.meter.sub(self.bytes);
    }
}

/// A session's reserve: what its own buffers, queues and transcriber stream hold before
/// they compete for the rest of the budget (its model input queue is charged beside it, at
/// its worst case, [`MODEL_QUEUE`]).
pub const SESSION_RESERVE: u64 = 4 << 20;
/// The reserve of a connection's inbound events (one socket, one data channel).
pub const CONNECTION_RESERVE: u64 = 1 << 20;
/// What a call's media state is charged when the call is admitted (its worst case).
pub const CALL_RESERVE: u64 = CALL_MEDIA;

/// The default `--memory-budget-mib`: three quarters of the memory the process may use
/// (the machine's, or its cgroup's limit when lower).
pub fn default_budget() -> u64 {
    let machine = Budget::machine().unwrap_or(4 << 30);
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    machine.min(cgroup.unwrap_or(u64::MAX)) / 4 * 3
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServeArgs;
    use clap::Parser;

    #[test]
    fn charges_past_the_limit_are_refused_and_given_back_on_drop() {
        let account = MemoryAccount::new(100);
        let a = account.charge(60).unwrap();
        assert_eq!(account.charge(41).unwrap_err(), Exhausted { limit: 100 });
        let b = account.charge(40).unwrap();
        assert_eq!(account.used(), 100);
        drop(a);
        assert_eq!(account.used(), 40);
        drop(b);
        assert_eq!(account.used(), 0);
        let msg = Exhausted { limit: 512 << 20 }.error();
        assert_eq!(msg.code.as_deref(), Some("server_memory_exhausted"));
        assert!(
            msg.message.contains("--memory-budget-mib 512"),
            "{}",
            msg.message
        );
    }

    #[test]
    fn a_meter_uses_its_reserve_first_and_gives_everything_back() {
        let account = MemoryAccount::new(1000);
        let meter = Meter::open(&account, 300).unwrap();
        assert_eq!(account.used(), 300, "the reserve is charged up front");
        meter.add(200).unwrap();
        assert_eq!(account.used(), 300, "within the reserve");
        meter.add(300).unwrap();
        assert_eq!(account.used(), 500, "past it: charged");
        let other = account.charge(500).unwrap();
        assert!(meter.add(1).is_err(), "the budget is spent");
        assert_eq!(meter.held(), 500, "a refusal takes nothing");
        meter.sub(100);
        assert_eq!(account.used(), 900);
        meter.sub(350);
        assert_eq!(account.used(), 800, "never below the reserve");
        meter.force(1000);
        assert_eq!(
            account.used(),
            800 + 1000 - 250,
            "forced: charged past the limit"
        );
        let charge = meter.charge(0).unwrap();
        drop(other);
        drop(charge);
        drop(meter);
        assert_eq!(account.used(), 0);
        assert!(Meter::open(&MemoryAccount::new(10), 11).is_err());
    }

    #[test]
    fn defaults_add_up() {
        let args = ServeArgs::parse_from(["serve"]);
        let b = Budget::of(&args);
        assert_eq!(
            b.total,
            256 * b.per_session + 100 * b.per_call + 10_000 * SECRET,
            "{b}"
        );
        let small = ServeArgs::parse_from([
            "serve",
            "--max-sessions",
            "1",
            "--max-calls",
            "0",
            "--max-client-secrets",
            "1",
        ]);
        assert_eq!(Budget::of(&small).total, b.per_session + SECRET);
        let demo = ServeArgs::parse_from(["serve", "--demo-mint-secrets"]);
        assert_eq!(Budget::of(&demo).shared, (10_000 + 100) * SECRET);
    }

    #[test]
    fn stored_audio_counts_its_encoding() {
        // Set on the parsed flags: 0 is below the flag's minimum, but shows the rest alone.
        let args = |secs: u64| {
            let mut a = ServeArgs::parse_from(["serve"]);
            a.limits.max_item_audio_secs = secs;
            a
        };
        let (one, two) = (Budget::of(&args(1)), Budget::of(&args(2)));
        // A second more of item audio: the response being generated (ADPCM) and its cached
        // retrieve encoding (base64 of PCM16).
        assert_eq!(two.per_session - one.per_session, 12_000 + 64_000);
        // With no item audio at all, the audio kept is the input buffer's 300 s (PCM16,
        // 48 000 bytes a second) and the conversation's 900 s (ADPCM, 12 000).
        let zero = Budget::of(&args(0));
        // Besides the queues: the conversation's text (8 MiB), instructions and tools (1.25 MiB).
        let queues = (32 << 20) + (16 << 20) + (8 << 20) + MODEL_QUEUE;
        let text = (8 << 20) + (1280 << 10);
        assert_eq!(
            zero.per_session - queues - text,
            300 * 48_000 + 900 * 12_000
        );
        // The defaults: docs/configuration.md's "≈ 115 MiB" per session (224 MiB with f32 audio).
        let defaults = Budget::of(&ServeArgs::parse_from(["serve"]));
        assert_eq!(defaults.per_session, 120_259_584, "{defaults}");
    }
}
