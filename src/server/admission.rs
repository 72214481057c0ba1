//! Admission: one place that counts what a client holds and refuses with the right error.
//! Every session (WebSocket or a call's, attached or detached) and every sideband socket
//! holds a `Session` slot against `--max-sessions`, the per-IP cap and the per-credential
//! quota for its whole life; a WebRTC call adds only a `Call` slot against `--max-calls`
//! (a call that resumes a session takes nothing else: the session keeps its own). Each
//! admission is a guard that gives its slot back when dropped, whichever way the session or
//! call ends; a refusal undoes its count without counting as turnover.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::error::{ApiError, Code};
use crate::stores::{SharedHold, SharedKeys};

/// What is admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A WebSocket session, or a sideband socket on a call.
    Session = 0,
    /// A WebRTC call (counted from the offer until the call ends).
    Call = 1,
}

/// Sideband sockets one call may have.
pub const MAX_SIDEBANDS: usize = 4;

/// The server's counters and caps.
#[derive(Debug)]
pub struct Admissions {
    sessions: AtomicUsize,
    calls: AtomicUsize,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    per_key: Mutex<HashMap<String, usize>>,
    max_sessions: usize,
    max_calls: usize,
    /// 0: no per-IP cap.
    max_per_ip: usize,
    /// 0: no per-credential cap.
    max_per_key: usize,
    /// Wakes one waiter (oldest first) when a slot of the kind frees.
    freed_sessions: Notify,
    freed_calls: Notify,
    /// Admissions waiting for a slot of each kind (newcomers queue behind them).
    waiting: [AtomicUsize; 2],
    /// When the last slots were released, for `Retry-After`.
    releases: Mutex<VecDeque<Instant>>,
    /// Cluster mode: `--max-sessions-per-key` counted across every node.
    shared_keys: std::sync::OnceLock<Arc<dyn SharedKeys>>,
}

/// Releases remembered for the turnover estimate.
const TURNOVER_WINDOW: usize = 64;

/// The caps of [`Admissions::new`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Caps {
    /// `--max-sessions`.
    pub sessions: usize,
    /// `--max-calls`.
    pub calls: usize,
    /// `--max-per-ip` (0: none).
    pub per_ip: usize,
    /// `--max-sessions-per-key` (0: none).
    pub per_key: usize,
}

impl Admissions {
    /// Counters with caps (`max_per_ip` 0 = none).
    pub fn new(max_sessions: usize, max_calls: usize, max_per_ip: usize) -> Arc<Self> {
        Self::with_caps(Caps {
            sessions: max_sessions,
            calls: max_calls,
            per_ip: max_per_ip,
            per_key: 0,
        })
    }

    /// Counters with every cap.
    pub fn with_caps(caps: Caps) -> Arc<Self> {
        Arc::new(Self {
            sessions: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            per_ip: Mutex::new(HashMap::new()),
            per_key: Mutex::new(HashMap::new()),
            max_sessions: caps.sessions,
            max_calls: caps.calls,
            max_per_ip: caps.per_ip,
            max_per_key: caps.per_key,
            freed_sessions: Notify::new(),
            freed_calls: Notify::new(),
            waiting: [AtomicUsize::new(0), AtomicUsize::new(0)],
            releases: Mutex::new(VecDeque::new()),
            shared_keys: std::sync::OnceLock::new(),
        })
    }

    /// Counts `--max-sessions-per-key` across a cluster too (set once, at start).
    pub fn share_keys(&self, shared: Arc<dyn SharedKeys>) {
        let _ = self.shared_keys.set(shared);
    }

    /// Cluster mode: rewrites this node's share of the per-credential counts from its own
    /// (called every heartbeat).
    pub async fn heal_shared(&self) {
        let Some(shared) = self.shared_keys.get() else {
            return;
        };
        let local = self.per_key.lock().map(|m| m.clone()).unwrap_or_default();
        shared.heal(local).await;
    }

    /// The cluster's count of a new admission's credential, when one is shared: a refusal
    /// there undoes the local count.
    async fn admit_shared(
        &self,
        admitted: Result<Admitted, ApiError>,
    ) -> Result<Admitted, ApiError> {
        let mut admitted = admitted?;
        let (Some(key), Some(shared)) = (admitted.key.clone(), self.shared_keys.get()) else {
            return Ok(admitted);
        };
        match shared.take(&key, self.max_per_key).await {
            Ok(hold) => {
                admitted.shared = hold;
                Ok(admitted)
            }
            Err(()) => {
                admitted.refused = true;
                Err(self.key_refusal())
            }
        }
    }

    fn key_refusal(&self) -> ApiError {
        ApiError::new(
            Code::TooManySessionsForKey,
            format!(
                "this credential holds {} sessions, the most one may hold",
                self.max_per_key
            ),
        )
        .retry(crate::error::RETRY_AFTER_SECS)
    }

    /// Open sessions (sidebands included).
    pub fn sessions(&self) -> usize {
        self.sessions.load(Ordering::Acquire)
    }

    /// Admitted calls.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Acquire)
    }

    /// `--max-sessions` and `--max-calls`.
    pub fn limits(&self) -> (usize, usize) {
        (self.max_sessions, self.max_calls)
    }

    /// Sessions the server can hold, and how many more it can take now (every session,
    /// a call's included, holds one).
    pub fn headroom(&self) -> (u64, u64) {
        let limit = self.max_sessions;
        (limit as u64, limit.saturating_sub(self.sessions()) as u64)
    }

    fn counter(&self, kind: Kind) -> (&AtomicUsize, usize, &'static str) {
        match kind {
            Kind::Session => (&self.sessions, self.max_sessions, "sessions"),
            Kind::Call => (&self.calls, self.max_calls, "calls"),
        }
    }

    fn freed(&self, kind: Kind) -> &Notify {
        match kind {
            Kind::Session => &self.freed_sessions,
            Kind::Call => &self.freed_calls,
        }
    }

    fn waiting(&self, kind: Kind) -> &AtomicUsize {
        &self.waiting[kind as usize]
    }

    /// Takes a slot of `kind` for a client at `ip` (with the server key's quota).
    pub fn admit(self: &Arc<Self>, kind: Kind, ip: Option<IpAddr>) -> Result<Admitted, ApiError> {
        self.admit_as(kind, ip, None)
    }

    /// Takes a slot of `kind` for a client at `ip` using credential `key` (`None`: the
    /// server key), at once or not at all.
    pub fn admit_as(
        self: &Arc<Self>,
        kind: Kind,
        ip: Option<IpAddr>,
        key: Option<&str>,
    ) -> Result<Admitted, ApiError> {
        if !self.take_slot(kind) {
            return Err(self.busy(kind));
        }
        let admitted = Admitted {
            admissions: self.clone(),
            kind,
            ip: None,
            key: None,
            refused: false,
            shared: None,
        };
        let admitted = self.admit_ip(admitted, ip)?;
        self.admit_key(admitted, key)
    }

    /// [`Self::admit_as`], waiting up to `wait` for a slot at capacity: waiters are
    /// admitted oldest first as slots free, and newcomers queue behind them. Past `wait`,
    /// `503 server_busy` with a `Retry-After` from the observed turnover.
    pub async fn admit_waiting(
        self: &Arc<Self>,
        kind: Kind,
        ip: Option<IpAddr>,
        key: Option<&str>,
        wait: Duration,
    ) -> Result<Admitted, ApiError> {
        let queued = self.waiting(kind).load(Ordering::Acquire) > 0;
        if wait.is_zero() || !queued {
            match self.admit_as(kind, ip, key) {
                Err(e) if e.code == Code::ServerBusy && !wait.is_zero() => {}
                other => return self.admit_shared(other).await,
            }
        }
        let deadline = tokio::time::Instant::now() + wait;
        self.waiting(kind).fetch_add(1, Ordering::AcqRel);
        let _queued = Queued(self.waiting(kind));
        loop {
            let notified = self.freed(kind).notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.admit_as(kind, ip, key) {
                Err(e) if e.code == Code::ServerBusy => {}
                other => return self.admit_shared(other).await,
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(self.busy(kind));
            }
        }
    }

    fn take_slot(&self, kind: Kind) -> bool {
        let (count, max, _) = self.counter(kind);
        if count.fetch_add(1, Ordering::AcqRel) >= max {
            count.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    fn busy(&self, kind: Kind) -> ApiError {
        let (_, max, what) = self.counter(kind);
        ApiError::new(
            Code::ServerBusy,
            format!("the server is at its limit of {max} {what}"),
        )
        .retry(self.retry_after())
    }

    /// Seconds until a slot is likely to free: the mean time between the last releases
    /// (within a minute), 1..=60; the default when there were too few.
    pub fn retry_after(&self) -> u64 {
        let Ok(r) = self.releases.lock() else {
            return crate::error::RETRY_AFTER_SECS;
        };
        let recent: Vec<&Instant> = r
            .iter()
            .filter(|t| t.elapsed() < Duration::from_secs(60))
            .collect();
        match (recent.first(), recent.last()) {
            (Some(first), Some(last)) if recent.len() >= 2 => {
                let span = last.saturating_duration_since(**first).as_secs_f64();
                let mean = span / (recent.len() - 1) as f64;
                (mean.ceil() as u64).clamp(1, 60)
            }
            _ => crate::error::RETRY_AFTER_SECS,
        }
    }

    fn admit_ip(&self, mut admitted: Admitted, ip: Option<IpAddr>) -> Result<Admitted, ApiError> {
        let (Some(ip), true) = (ip, self.max_per_ip > 0) else {
            return Ok(admitted);
        };
        let Ok(mut per_ip) = self.per_ip.lock() else {
            return Ok(admitted);
        };
        let n = per_ip.entry(ip).or_insert(0);
        if *n >= self.max_per_ip {
            admitted.refused = true;
            return Err(ApiError::new(
                Code::TooManySessionsFromIp,
                format!(
                    "{ip} holds {} sessions, the most one address may hold",
                    self.max_per_ip
                ),
            )
            .retry(crate::error::RETRY_AFTER_SECS));
        }
        *n += 1;
        admitted.ip = Some(ip);
        Ok(admitted)
    }

    fn admit_key(&self, mut admitted: Admitted, key: Option<&str>) -> Result<Admitted, ApiError> {
        if self.max_per_key == 0 {
            return Ok(admitted);
        }
        let key = key.unwrap_or(SERVER_KEY);
        let Ok(mut per_key) = self.per_key.lock() else {
            return Ok(admitted);
        };
        let n = per_key.entry(key.to_string()).or_insert(0);
        if *n >= self.max_per_key {
            admitted.refused = true;
            return Err(self.key_refusal());
        }
        *n += 1;
        admitted.key = Some(key.to_string());
        Ok(admitted)
    }

    /// Gives a slot back. A `turnover` (a session or call that was admitted and ended)
    /// counts toward `Retry-After` and wakes a waiter; a refusal only undoes its count.
    fn release(&self, kind: Kind, ip: Option<IpAddr>, key: Option<&str>, turnover: bool) {
        self.counter(kind).0.fetch_sub(1, Ordering::AcqRel);
        if turnover {
            if let Ok(mut r) = self.releases.lock() {
                if r.len() == TURNOVER_WINDOW {
                    r.pop_front();
                }
                r.push_back(Instant::now());
            }
            self.freed(kind).notify_one();
        }
        if let (Some(ip), Ok(mut per_ip)) = (ip, self.per_ip.lock()) {
            decrement(&mut per_ip, &ip);
        }
        if let (Some(key), Ok(mut per_key)) = (key, self.per_key.lock()) {
            decrement(&mut per_key, key);
        }
    }
}

/// The per-key quota's name for the server key.
const SERVER_KEY: &str = "server";

fn decrement<K: std::hash::Hash + Eq + ?Sized, O: std::borrow::Borrow<K> + std::hash::Hash + Eq>(
    map: &mut HashMap<O, usize>,
    k: &K,
) {
    if let Some(n) = map.get_mut(k) {
        *n -= 1;
        if *n == 0 {
            map.remove(k);
        }
    }
}

/// Counts an admission that waits for a slot, while it waits.
struct Queued<'a>(&'a AtomicUsize);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A held slot; released on drop.
#[derive(Debug)]
pub struct Admitted {
    admissions: Arc<Admissions>,
    kind: Kind,
    ip: Option<IpAddr>,
    key: Option<String>,
    /// Refused by the per-IP or per-credential cap: dropping it undoes the count only.
    refused: bool,
    /// Its count in the cluster's per-credential count (cluster mode).
    shared: Option<SharedHold>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.admissions
            .release(self.kind, self.ip, self.key.as_deref(), !self.refused);
    }
}

/// A sideband socket's place among its call's [`MAX_SIDEBANDS`]; released on drop.
#[derive(Debug)]
pub struct SidebandSlot(Arc<AtomicUsize>);

impl SidebandSlot {
    /// Takes one of the call's sideband places.
    pub fn take(count: &Arc<AtomicUsize>) -> Result<Self, ApiError> {
        if count.fetch_add(1, Ordering::AcqRel) >= MAX_SIDEBANDS {
            count.fetch_sub(1, Ordering::AcqRel);
            return Err(ApiError::new(
                Code::SidebandLimit,
                format!("the call already has {MAX_SIDEBANDS} sideband connections"),
            ));
        }
        Ok(Self(count.clone()))
    }
}

impl Drop for SidebandSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
