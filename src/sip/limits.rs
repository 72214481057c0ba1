//! What bounds the SIP side's intake, free of the stack: the INVITE rate of each source
//! (token buckets in a bounded map), the SIP TCP connections (per source and in all), and
//! the calls ringing at once. Each count is held by a guard that gives it back on drop.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Sources whose INVITE rate is remembered at most: past it the map starts afresh (a
/// spoofed-source flood cannot grow it; the ringing cap bounds what gets through).
const MAX_SOURCES: usize = 4096;

/// New INVITEs per second from one source: a bucket of `rate` tokens, refilled at `rate`
/// a second (so a burst of one second's worth, then the rate).
pub struct InviteRate {
    rate: f64,
    sources: Mutex<HashMap<IpAddr, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl InviteRate {
    /// `per_second` INVITEs a second from each source (at least 1).
    pub fn new(per_second: u32) -> Self {
        Self {
            rate: f64::from(per_second.max(1)),
            sources: Mutex::default(),
        }
    }

    /// Whether a new INVITE from `ip` at `now` is within its rate (and counts it).
    pub fn admit(&self, ip: IpAddr, now: Instant) -> bool {
        let Ok(mut sources) = self.sources.lock() else {
            return true;
        };
        if sources.len() >= MAX_SOURCES && !sources.contains_key(&ip) {
            sources.clear();
        }
        let bucket = sources.entry(ip).or_insert(Bucket {
            tokens: self.rate,
            at: now,
        });
        let refill = now.saturating_duration_since(bucket.at).as_secs_f64() * self.rate;
        bucket.tokens = (bucket.tokens + refill).min(self.rate);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// SIP TCP connections held, per source and in all.
pub struct TcpSlots {
    max_total: usize,
    max_per_source: usize,
    held: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One SIP TCP connection's place; given back on drop.
pub struct TcpSlot {
    slots: Arc<TcpSlots>,
    ip: IpAddr,
}

impl TcpSlots {
    /// At most `max_total` connections, `max_per_source` from one address.
    pub fn new(max_total: usize, max_per_source: usize) -> Arc<Self> {
        Arc::new(Self {
            max_total,
            max_per_source,
            held: Mutex::default(),
        })
    }

    /// A place for a connection from `ip`, or `None` past either cap.
    pub fn take(self: &Arc<Self>, ip: IpAddr) -> Option<TcpSlot> {
        let mut held = self.held.lock().ok()?;
        let (total, per) = &mut *held;
        let mine = per.get(&ip).copied().unwrap_or(0);
        if *total >= self.max_total || mine >= self.max_per_source {
            return None;
        }
        *total += 1;
        per.insert(ip, mine + 1);
        Some(TcpSlot {
            slots: self.clone(),
            ip,
        })
    }

    /// Connections held now.
    pub fn held(&self) -> usize {
        self.held.lock().map_or(0, |h| h.0)
    }
}

impl Drop for TcpSlot {
    fn drop(&mut self) {
        if let Ok(mut held) = self.slots.held.lock() {
            let (total, per) = &mut *held;
            *total = total.saturating_sub(1);
            if let Some(n) = per.get_mut(&self.ip) {
                *n -= 1;
                if *n == 0 {
                    per.remove(&self.ip);
                }
            }
        }
    }
}

/// Calls ringing (announced, not yet accepted or ended).
#[derive(Default)]
pub struct Ringing {
    count: Arc<AtomicUsize>,
}

/// One ringing call's place; given back on drop (the call accepted or ended).
pub struct RingSlot(Arc<AtomicUsize>);

impl Ringing {
    /// A place for one more ringing call while fewer than `cap` ring, or `None`.
    pub fn take(&self, cap: usize) -> Option<RingSlot> {
        self.count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < cap).then_some(n + 1)
            })
            .ok()
            .map(|_| RingSlot(self.count.clone()))
    }

    /// Calls ringing now.
    pub fn held(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }
}

impl Drop for RingSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn invite_rate_allows_a_burst_then_the_rate() {
        let rate = InviteRate::new(5);
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        let t0 = Instant::now();
        let admitted = (0..20).filter(|_| rate.admit(ip, t0)).count();
        assert_eq!(admitted, 5, "a second's worth at once");
        assert!(rate.admit(other, t0), "another source has its own bucket");
        assert!(!rate.admit(ip, t0 + Duration::from_millis(100)));
        assert!(rate.admit(ip, t0 + Duration::from_millis(250)), "refilled");
    }

    #[test]
    fn invite_rate_map_stays_bounded() {
        let rate = InviteRate::new(1);
        let t0 = Instant::now();
        for i in 0..(MAX_SOURCES as u32 * 3) {
            rate.admit(IpAddr::from(i.to_be_bytes()), t0);
        }
        assert!(rate.sources.lock().unwrap().len() <= MAX_SOURCES);
    }

    #[test]
    fn tcp_slots_cap_per_source_and_in_all_and_come_back() {
        let slots = TcpSlots::new(3, 2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let a1 = slots.take(a).unwrap();
        let _a2 = slots.take(a).unwrap();
        assert!(slots.take(a).is_none(), "per source");
        let _b1 = slots.take(b).unwrap();
        assert!(slots.take(b).is_none(), "in all");
        drop(a1);
        assert_eq!(slots.held(), 2);
        assert!(slots.take(b).is_some());
    }

    #[test]
    fn ringing_is_capped_and_released() {
        let ringing = Ringing::default();
        let one = ringing.take(2).unwrap();
        let _two = ringing.take(2).unwrap();
        assert!(ringing.take(2).is_none());
        drop(one);
        assert_eq!(ringing.held(), 1);
        assert!(ringing.take(2).is_some());
    }
}
