//! Sans-IO frame pacing on an absolute grid, and a latency histogram.
//!
//! [`FrameGrid`] computes every deadline as `start + k·period` from the
//! slot number, never by adding periods to the previous wake-up, so timer
//! lateness does not accumulate into drift. When the caller wakes more than
//! one period late it skips to the current slot instead of bursting to
//! catch up. [`Histogram`] records deviations (e.g. wake lateness) in
//! fixed log-spaced microsecond buckets.

use std::time::{Duration, Instant};

/// An absolute grid of frame deadlines: slot `n` is due at
/// `start + (n + 1)·period`.
#[derive(Debug, Clone)]
pub struct FrameGrid {
    start: Instant,
    period_ns: u128,
    next_slot: u64,
    deadline: Instant,
}

/// One served slot, from [`FrameGrid::tick`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    /// The slot to serve now.
    pub slot: u64,
    /// Slots passed over since the previous tick because the wake-up was
    /// more than one period late.
    pub skipped: u64,
    /// How far past this slot's deadline the wake-up was (< one period).
    pub lateness: Duration,
}

impl FrameGrid {
    /// A grid starting at `start` (a zero `period` is treated as 1 ns).
    pub fn new(start: Instant, period: Duration) -> Self {
        let period_ns = period.as_nanos().max(1);
        let mut grid = FrameGrid {
            start,
            period_ns,
            next_slot: 0,
            deadline: start,
        };
        grid.deadline = grid.at(1).unwrap_or(start);
        grid
    }

    /// Deadline of the next slot `n` to serve: `start + (n + 1)·period`.
    pub fn next_deadline(&self) -> Instant {
        self.deadline
    }

    /// The next slot number to be served.
    pub fn next_slot(&self) -> u64 {
        self.next_slot
    }

    /// The grid period.
    pub fn period(&self) -> Duration {
        duration_from_nanos(self.period_ns)
    }

    /// Called when woken at `now`. Returns `None` if `now` is before
    /// [`Self::next_deadline`]. Otherwise returns the latest slot whose
    /// deadline has passed, with the count of slots skipped to get there
    /// (never bursts: after a stall it jumps to the current slot, and no
    /// slot is ever served twice).
    pub fn tick(&mut self, now: Instant) -> Option<Tick> {
        if now < self.deadline {
            return None;
        }
        let elapsed = now.saturating_duration_since(self.start).as_nanos();
        // Slot n is due at (n + 1)·period, so the current slot is the
        // number of whole periods elapsed, minus one.
        let periods = elapsed / self.period_ns;
        let current = u64::try_from(periods.saturating_sub(1)).unwrap_or(u64::MAX);
        let slot = current.max(self.next_slot);
        let skipped = slot - self.next_slot;
        let due = self.at(u128::from(slot) + 1).unwrap_or(self.deadline);
        let lateness = now.saturating_duration_since(due);
        self.next_slot = slot.saturating_add(1);
        if let Some(next) = self.at(u128::from(slot) + 2) {
            self.deadline = next;
        }
        Some(Tick {
            slot,
            skipped,
            lateness,
        })
    }

    /// `start + k·period`, or `None` if not representable.
    fn at(&self, k: u128) -> Option<Instant> {
        let ns = k.checked_mul(self.period_ns)?;
        let secs = u64::try_from(ns / 1_000_000_000).ok()?;
        let nanos = (ns % 1_000_000_000) as u32;
        self.start.checked_add(Duration::new(secs, nanos))
    }
}

fn duration_from_nanos(ns: u128) -> Duration {
    let secs = u64::try_from(ns / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (ns % 1_000_000_000) as u32)
}

/// Values below this many microseconds get one bucket each.
const LINEAR: u64 = 8;
/// Sub-buckets per power of two above [`LINEAR`] (resolution 1/8 = 12.5 %).
const SUB_BITS: u32 = 3;
/// Largest power of two with its own buckets (2^40 µs ≈ 12.7 days).
const MAX_EXP: u32 = 40;
const BUCKETS: usize = LINEAR as usize + ((MAX_EXP - SUB_BITS + 1) as usize) * (1 << SUB_BITS);

/// A fixed-size histogram of durations in microseconds with log-spaced
/// buckets (exact below 8 µs, then 8 buckets per power of two, so
/// percentiles are reported within 12.5 %). Larger values than the top
/// bucket are clamped into it; [`Histogram::max`] stays exact.
#[derive(Debug, Clone)]
pub struct Histogram {
    buckets: Box<[u64; BUCKETS]>,
    count: u64,
    sum_us: u128,
    max: Duration,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram {
            buckets: Box::new([0; BUCKETS]),
            count: 0,
            sum_us: 0,
            max: Duration::ZERO,
        }
    }

    /// Records one value (truncated to whole microseconds for bucketing).
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(us)] += 1;
        self.count += 1;
        self.sum_us += u128::from(us);
        self.max = self.max.max(d);
    }

    /// The value at percentile `p` (percent, clamped to 0..=100): the upper
    /// edge of the bucket holding the rank `ceil(p/100 · count)` value,
    /// capped at [`Self::max`]. Zero when empty.
    pub fn percentile(&self, p: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let p = if p.is_nan() {
            100.0
        } else {
            p.clamp(0.0, 100.0)
        };
        let rank = ((p / 100.0 * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0u64;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Duration::from_micros(bucket_upper(i)).min(self.max);
            }
        }
        self.max
    }

    /// The largest value recorded (exact).
    pub fn max(&self) -> Duration {
        self.max
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Mean of the recorded values (whole microseconds); zero when empty.
    pub fn mean(&self) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let us = self.sum_us / u128::from(self.count);
        Duration::from_micros(u64::try_from(us).unwrap_or(u64::MAX))
    }

    /// Forgets everything recorded.
    pub fn reset(&mut self) {
        *self = Self::new();
    }
}

fn bucket_of(us: u64) -> usize {
    if us < LINEAR {
        return us as usize;
    }
    let exp = 63 - us.leading_zeros();
    if exp > MAX_EXP {
        return BUCKETS - 1;
    }
    let sub = (us >> (exp - SUB_BITS)) & ((1 << SUB_BITS) - 1);
    LINEAR as usize + ((exp - SUB_BITS) as usize) * (1 << SUB_BITS) + sub as usize
}

/// Largest value (µs) that lands in bucket `i`.
fn bucket_upper(i: usize) -> u64 {
    if i < LINEAR as usize {
        return i as u64;
    }
    let j = i - LINEAR as usize;
    let exp = (j >> SUB_BITS) as u32 + SUB_BITS;
    let sub = (j & ((1 << SUB_BITS) - 1)) as u64;
    let width = 1u64 << (exp - SUB_BITS);
    ((1 << SUB_BITS) + sub) * width + width - 1
}

#[cfg(test)]
#[path = "pacer_tests.rs"]
mod tests;
