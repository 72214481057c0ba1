use super::*;
use crate::testutil::Rng;
use proptest::prelude::*;

const MS20: Duration = Duration::from_millis(20);

/// Independent reference: `start + k·period` with u128 nanoseconds.
fn grid_at(start: Instant, period: Duration, k: u64) -> Instant {
    let ns = period.as_nanos() * u128::from(k);
    start + Duration::new((ns / 1_000_000_000) as u64, (ns % 1_000_000_000) as u32)
}

#[test]
fn on_time_ticks_serve_consecutive_slots() {
    let start = Instant::now();
    let mut g = FrameGrid::new(start, MS20);
    assert_eq!(g.next_deadline(), start + MS20);
    assert_eq!(g.tick(start), None);
    assert_eq!(g.tick(start + MS20 - Duration::from_nanos(1)), None);
    for slot in 0..5 {
        let now = g.next_deadline();
        let t = g.tick(now).unwrap();
        assert_eq!((t.slot, t.skipped, t.lateness), (slot, 0, Duration::ZERO));
        assert_eq!(g.tick(now), None, "same instant twice");
    }
    assert_eq!(g.next_slot(), 5);
    assert_eq!(g.period(), MS20);
}

#[test]
fn stall_skips_to_current_slot_without_bursting() {
    let start = Instant::now();
    let mut g = FrameGrid::new(start, MS20);
    // Deadline of slot 0 is 20 ms; wake at 95 ms: slots 0..=2 are missed.
    let t = g.tick(start + Duration::from_millis(95)).unwrap();
    assert_eq!(t.slot, 3);
    assert_eq!(t.skipped, 3);
    assert_eq!(t.lateness, Duration::from_millis(15));
    assert_eq!(g.next_deadline(), start + Duration::from_millis(100));
    assert_eq!(g.tick(start + Duration::from_millis(99)), None);
    // Late by less than one period: no skip.
    let t = g.tick(start + Duration::from_millis(119)).unwrap();
    assert_eq!((t.slot, t.skipped), (4, 0));
    assert_eq!(t.lateness, Duration::from_millis(19));
}

#[test]
fn zero_period_does_not_divide_by_zero() {
    let start = Instant::now();
    let mut g = FrameGrid::new(start, Duration::ZERO);
    let t = g.tick(start + Duration::from_nanos(10)).unwrap();
    assert_eq!(t.slot, 9);
    assert_eq!(g.tick(start), None);
}

#[test]
fn histogram_basics() {
    let mut h = Histogram::new();
    assert_eq!(h.percentile(50.0), Duration::ZERO);
    assert_eq!(h.mean(), Duration::ZERO);
    for us in 1..=100u64 {
        h.record(Duration::from_micros(us));
    }
    assert_eq!(h.count(), 100);
    assert_eq!(h.max(), Duration::from_micros(100));
    assert_eq!(h.percentile(0.0), Duration::from_micros(1));
    assert_eq!(h.percentile(5.0), Duration::from_micros(5));
    let p50 = h.percentile(50.0).as_micros();
    assert!((50..=56).contains(&p50), "p50 {p50}");
    assert_eq!(h.percentile(100.0), Duration::from_micros(100));
    assert_eq!(h.percentile(f64::NAN), Duration::from_micros(100));
    assert_eq!(h.mean(), Duration::from_micros(50));
    h.record(Duration::from_secs(10_000_000)); // beyond the top bucket
    assert_eq!(h.max(), Duration::from_secs(10_000_000));
    h.reset();
    assert_eq!(h.count(), 0);
}

#[test]
fn buckets_are_contiguous_and_ordered() {
    let mut prev_upper = None;
    for i in 0..BUCKETS {
        let upper = bucket_upper(i);
        assert_eq!(bucket_of(upper), i);
        if let Some(p) = prev_upper {
            assert_eq!(bucket_of(p + 1), i, "gap before bucket {i}");
        }
        prev_upper = Some(upper);
    }
    assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    /// 100k wakes with random lateness (sometimes several periods): every
    /// deadline is exactly `start + k·period`, skips are counted right and
    /// no slot is served twice.
    #[test]
    fn grid_never_drifts(seed in 1u64.., period_ns in 1_000u64..50_000_000) {
        let period = Duration::from_nanos(period_ns);
        let start = Instant::now();
        let mut g = FrameGrid::new(start, period);
        let mut rng = Rng(seed);
        let mut expect_next = 0u64;
        let mut last_slot: Option<u64> = None;
        let mut total_skipped = 0u64;
        for _ in 0..100_000 {
            let deadline = g.next_deadline();
            prop_assert_eq!(deadline, grid_at(start, period, expect_next + 1));
            prop_assert_eq!(g.tick(deadline - Duration::from_nanos(1)), None);
            let late_ns = match rng.below(10) {
                0 => rng.next_u64() % (period_ns * 4),
                _ => rng.next_u64() % period_ns,
            };
            let now = deadline + Duration::from_nanos(late_ns);
            let t = g.tick(now).unwrap();
            let elapsed = (now - start).as_nanos();
            let want_slot = (elapsed / u128::from(period_ns)) as u64 - 1;
            prop_assert_eq!(t.slot, want_slot);
            prop_assert_eq!(t.skipped, want_slot - expect_next);
            prop_assert_eq!(t.lateness, now - grid_at(start, period, want_slot + 1));
            prop_assert!(t.lateness < period);
            prop_assert!(last_slot.is_none_or(|l| t.slot > l));
            prop_assert_eq!(g.tick(now), None);
            total_skipped += t.skipped;
            last_slot = Some(t.slot);
            expect_next = t.slot + 1;
        }
        // Served + skipped accounts for every slot up to the last one.
        prop_assert_eq!(100_000 + total_skipped, expect_next);
    }
}

proptest! {
    /// Percentiles land on or just above the true value (one bucket: 12.5 %).
    #[test]
    fn percentile_is_within_one_bucket(
        values in proptest::collection::vec(0u64..10_000_000, 1..500),
        p in 0.0f64..=100.0,
    ) {
        let mut h = Histogram::new();
        for &v in &values {
            h.record(Duration::from_micros(v));
        }
        let mut sorted = values.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0 * values.len() as f64).ceil() as usize).clamp(1, values.len());
        let truth = sorted[rank - 1];
        let got = h.percentile(p).as_micros() as u64;
        prop_assert!(got >= truth, "got {} < truth {}", got, truth);
        prop_assert!(got <= truth + truth / 8, "got {} vs truth {}", got, truth);
        prop_assert_eq!(h.max(), Duration::from_micros(sorted[sorted.len() - 1]));
        prop_assert_eq!(h.count(), values.len() as u64);
    }
}
