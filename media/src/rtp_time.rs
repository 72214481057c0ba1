//! Typed media time: RTP counter unwrapping and sample counts.
//!
//! RTP sequence numbers (16 bit) and timestamps (32 bit) wrap. The
//! unwrappers extend them to `u64` by assuming consecutive values differ by
//! less than half the counter range, which holds for any sane reordering.

use std::ops::{Add, AddAssign};

/// Opus' RTP clock and Duet's internal WebRTC sample rate (Hz).
pub const OPUS_RATE: u32 = 48_000;
/// Duration of one audio frame (ms).
pub const FRAME_MS: u32 = 20;
/// Samples in one 20 ms frame at [`OPUS_RATE`].
pub const OPUS_FRAME: usize = 960;

/// Extends 16-bit RTP sequence numbers to monotonic 64-bit ones.
///
/// Each number is placed relative to the previous one (forward or backward
/// by less than 32 768), so wrap-around in either direction and reordering
/// across the wrap are handled. The first number maps to `BASE + seq`
/// (one cycle in, see [`SeqUnwrapper::BASE`]), so packets reordered from
/// before the first one still get a valid, smaller value; subtract `BASE`
/// for the RFC 3550 extended sequence number. Values never go below 0
/// (a walk back further than that saturates).
#[derive(Debug, Clone, Default)]
pub struct SeqUnwrapper {
    last: Option<u64>,
}

impl SeqUnwrapper {
    /// Offset given to the first cycle.
    pub const BASE: u64 = 1 << 16;

    /// Creates an unwrapper that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Extends `seq`.
    pub fn unwrap(&mut self, seq: u16) -> u64 {
        let ext = match self.last {
            None => Self::BASE + u64::from(seq),
            Some(last) => {
                let delta = i64::from(seq.wrapping_sub(last as u16) as i16);
                last.saturating_add_signed(delta)
            }
        };
        self.last = Some(ext);
        ext
    }
}

/// Extends 32-bit RTP timestamps to monotonic 64-bit ones; the 32-bit
/// counterpart of [`SeqUnwrapper`] (the first value maps to `BASE + ts`,
/// see [`TsUnwrapper::BASE`]).
#[derive(Debug, Clone, Default)]
pub struct TsUnwrapper {
    last: Option<u64>,
}

impl TsUnwrapper {
    /// Offset given to the first cycle.
    pub const BASE: u64 = 1 << 32;

    /// Creates an unwrapper that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Extends `ts`.
    pub fn unwrap(&mut self, ts: u32) -> u64 {
        let ext = match self.last {
            None => Self::BASE + u64::from(ts),
            Some(last) => {
                let delta = i64::from(ts.wrapping_sub(last as u32) as i32);
                last.saturating_add_signed(delta)
            }
        };
        self.last = Some(ext);
        ext
    }
}

/// A number of samples at a given rate: a media-time duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SampleCount {
    samples: u64,
    rate: u32,
}

impl SampleCount {
    /// `samples` samples at `rate` Hz.
    pub fn new(samples: u64, rate: u32) -> Self {
        SampleCount { samples, rate }
    }

    /// The sample count.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The sample rate (Hz).
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// Duration in whole milliseconds (rounded down; 0 at rate 0).
    pub fn to_ms(&self) -> u64 {
        scale(self.samples, 1000, self.rate)
    }

    /// `ms` milliseconds at `rate` Hz (rounded down).
    pub fn from_ms(ms: u64, rate: u32) -> Self {
        SampleCount {
            samples: scale(ms, rate, 1000),
            rate,
        }
    }

    /// The same duration at `rate` Hz, rounded down (0 if either rate is 0).
    pub fn convert(&self, rate: u32) -> Self {
        if rate == self.rate {
            return *self;
        }
        SampleCount {
            samples: scale(self.samples, rate, self.rate),
            rate,
        }
    }
}

/// `v * num / den` without intermediate overflow, saturating; 0 when `den` is 0.
fn scale(v: u64, num: u32, den: u32) -> u64 {
    if den == 0 {
        return 0;
    }
    let r = u128::from(v) * u128::from(num) / u128::from(den);
    u64::try_from(r).unwrap_or(u64::MAX)
}

impl Add for SampleCount {
    type Output = SampleCount;

    /// Sums two durations in `self`'s rate (`rhs` is converted, rounding
    /// down, if its rate differs). Saturates at `u64::MAX` samples.
    fn add(self, rhs: SampleCount) -> SampleCount {
        let rhs = rhs.convert(self.rate);
        SampleCount {
            samples: self.samples.saturating_add(rhs.samples),
            rate: self.rate,
        }
    }
}

impl AddAssign for SampleCount {
    fn add_assign(&mut self, rhs: SampleCount) {
        *self = *self + rhs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seq_wraps_forward_and_back() {
        let mut u = SeqUnwrapper::new();
        let b = SeqUnwrapper::BASE;
        assert_eq!(u.unwrap(65_534), b + 65_534);
        assert_eq!(u.unwrap(65_535), b + 65_535);
        assert_eq!(u.unwrap(0), b + 65_536);
        assert_eq!(u.unwrap(65_535), b + 65_535); // reordered across the wrap
        assert_eq!(u.unwrap(1), b + 65_537);
        assert_eq!(u.unwrap(65_534), b + 65_534);
    }

    #[test]
    fn seq_before_first_is_smaller() {
        let mut u = SeqUnwrapper::new();
        assert_eq!(u.unwrap(0), 1 << 16);
        assert_eq!(u.unwrap(65_535), (1 << 16) - 1);
        assert_eq!(u.unwrap(0), 1 << 16);
    }

    #[test]
    fn ts_wraps() {
        let mut u = TsUnwrapper::new();
        let b = TsUnwrapper::BASE;
        assert_eq!(u.unwrap(u32::MAX - 959), b + u64::from(u32::MAX) - 959);
        assert_eq!(u.unwrap(0), b + (1 << 32));
        assert_eq!(u.unwrap(960), b + (1 << 32) + 960);
        assert_eq!(u.unwrap(u32::MAX), b + u64::from(u32::MAX));
    }

    #[test]
    fn sample_count_conversions() {
        let c = SampleCount::from_ms(20, OPUS_RATE);
        assert_eq!(c.samples(), OPUS_FRAME as u64);
        assert_eq!(c.to_ms(), u64::from(FRAME_MS));
        assert_eq!(c.convert(16_000), SampleCount::new(320, 16_000));
        assert_eq!(SampleCount::new(959, OPUS_RATE).to_ms(), 19);
        assert_eq!(SampleCount::new(5, 48_000).convert(16_000).samples(), 1);
        assert_eq!(SampleCount::new(5, 0).to_ms(), 0);
        assert_eq!(SampleCount::new(5, 0).convert(8000).samples(), 0);
        let sum = SampleCount::new(960, 48_000) + SampleCount::new(160, 8000);
        assert_eq!(sum, SampleCount::new(1920, 48_000));
        let mut acc = SampleCount::new(0, 8000);
        acc += SampleCount::new(u64::MAX, 8000);
        acc += SampleCount::new(1, 8000);
        assert_eq!(acc.samples(), u64::MAX);
    }

    proptest! {
        #[test]
        fn seq_tracks_true_counter(
            start in any::<u16>(),
            steps in proptest::collection::vec(-3000i64..=3000, 1..2000),
        ) {
            let mut u = SeqUnwrapper::new();
            let mut truth = i64::from(start);
            let offset = u.unwrap(start) as i64 - truth;
            prop_assert_eq!(offset, SeqUnwrapper::BASE as i64);
            for step in steps {
                truth += step;
                if truth + offset < 0 {
                    break;
                }
                let ext = u.unwrap(truth.rem_euclid(1 << 16) as u16);
                prop_assert_eq!(ext as i64, truth + offset);
            }
        }

        #[test]
        fn seq_tracks_large_forward_jumps(
            start in any::<u16>(),
            steps in proptest::collection::vec(-1000i64..=32_767, 1..500),
        ) {
            let mut u = SeqUnwrapper::new();
            let mut truth = i64::from(start) + SeqUnwrapper::BASE as i64;
            u.unwrap(start);
            for step in steps {
                truth += step;
                if truth < 0 {
                    break;
                }
                let ext = u.unwrap(truth.rem_euclid(1 << 16) as u16);
                prop_assert_eq!(ext as i64, truth);
            }
        }

        #[test]
        fn ts_tracks_true_counter(
            start in any::<u32>(),
            steps in proptest::collection::vec(-100_000i64..=2_000_000_000, 1..500),
        ) {
            let mut u = TsUnwrapper::new();
            let mut truth = i64::from(start) + TsUnwrapper::BASE as i64;
            u.unwrap(start);
            for step in steps {
                truth += step;
                if truth < 0 {
                    break;
                }
                let ext = u.unwrap(truth.rem_euclid(1 << 32) as u32);
                prop_assert_eq!(ext as i64, truth);
            }
        }
    }
}
