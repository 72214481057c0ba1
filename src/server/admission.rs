//! Admission: one place that counts what a client holds (WebSocket sessions and sidebands
//! against `--max-sessions`, WebRTC calls against `--max-calls`, both against the optional
//! per-IP cap) and refuses with the right error. Each admission is a guard that gives its
//! slot back when dropped, whichever way the session or call ends.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;

use super::error::ApiError;

/// What is admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A WebSocket session, or a sideband socket on a call.
    Session,
    /// A WebRTC call (counted from the offer until the call ends).
    Call,
}

/// Sideband sockets one call may have.
pub const MAX_SIDEBANDS: usize = 4;

/// The server's counters and caps.
#[derive(Debug)]
pub struct Admissions {
    sessions: AtomicUsize,
    calls: AtomicUsize,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    max_sessions: usize,
    max_calls: usize,
    /// 0: no per-IP cap.
    max_per_ip: usize,
}

impl Admissions {
    /// Counters with caps (`max_per_ip` 0 = none).
    pub fn new(max_sessions: usize, max_calls: usize, max_per_ip: usize) -> Arc<Self> {
        Arc::new(Self {
            sessions: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            per_ip: Mutex::new(HashMap::new()),
            max_sessions,
            max_calls,
            max_per_ip,
        })
    }

    /// Open sessions (sidebands included).
    pub fn sessions(&self) -> usize {
        self.sessions.load(Ordering::Acquire)
    }

    /// Admitted calls.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Acquire)
    }

    fn counter(&self, kind: Kind) -> (&AtomicUsize, usize, &'static str) {
        match kind {
            Kind::Session => (&self.sessions, self.max_sessions, "sessions"),
            Kind::Call => (&self.calls, self.max_calls, "calls"),
        }
    }

    /// Takes a slot of `kind` for a client at `ip`.
    pub fn admit(self: &Arc<Self>, kind: Kind, ip: Option<IpAddr>) -> Result<Admitted, ApiError> {
        let (count, max, what) = self.counter(kind);
        if count.fetch_add(1, Ordering::AcqRel) >= max {
            count.fetch_sub(1, Ordering::AcqRel);
            return Err(ApiError::unavailable(
                "server_busy",
                format!("the server is at its limit of {max} {what}"),
            ));
        }
        let admitted = Admitted {
            admissions: self.clone(),
            kind,
            ip: None,
        };
        self.admit_ip(admitted, ip)
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
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_sessions_from_ip",
                format!(
                    "{ip} holds {} sessions and calls, the most one address may hold",
                    self.max_per_ip
                ),
            )
            .retry(super::error::RETRY_AFTER_SECS));
        }
        *n += 1;
        admitted.ip = Some(ip);
        Ok(admitted)
    }

    fn release(&self, kind: Kind, ip: Option<IpAddr>) {
        self.counter(kind).0.fetch_sub(1, Ordering::AcqRel);
        let Some(ip) = ip else { return };
        if let Ok(mut per_ip) = self.per_ip.lock() {
            if let Some(n) = per_ip.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    per_ip.remove(&ip);
                }
            }
        }
    }
}

/// A held slot; released on drop.
#[derive(Debug)]
pub struct Admitted {
    admissions: Arc<Admissions>,
    kind: Kind,
    ip: Option<IpAddr>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.admissions.release(self.kind, self.ip);
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
                StatusCode::CONFLICT,
                "sideband_limit",
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
