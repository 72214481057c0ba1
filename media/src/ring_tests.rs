use super::*;
use proptest::prelude::*;

/// Samples whose values are their positions, so copies can be checked.
fn ramp(from: u64, n: usize) -> Vec<f32> {
    (from..from + n as u64).map(|p| p as f32).collect()
}

#[test]
fn keeps_positions_across_drops() {
    let mut r = SampleRing::new(100);
    assert_eq!(r.push(&ramp(0, 30)), 0);
    assert_eq!((r.start(), r.end(), r.len()), (0, 30, 30));
    assert_eq!(r.drop_before(10), 10);
    assert_eq!((r.start(), r.end(), r.len()), (10, 30, 20));
    assert_eq!(r.copy_range(12, 15), ramp(12, 3));
    // Clamped to what is kept.
    assert_eq!(r.copy_range(0, 12), ramp(10, 2));
    assert_eq!(r.copy_range(28, 99), ramp(28, 2));
    assert!(r.copy_range(20, 20).is_empty() && r.copy_range(25, 5).is_empty());
    assert_eq!(r.drop_before(5), 0);
    assert_eq!(r.drop_before(1_000), 20);
    assert!(r.is_empty());
    assert_eq!((r.start(), r.end()), (30, 30));
}

#[test]
fn full_ring_drops_oldest() {
    let mut r = SampleRing::new(10);
    r.push(&ramp(0, 8));
    assert_eq!(r.push(&ramp(8, 5)), 3);
    assert_eq!((r.start(), r.end()), (3, 13));
    assert_eq!(r.copy_range(0, 13), ramp(3, 10));
    // A push bigger than the whole ring keeps its newest samples.
    assert_eq!(r.push(&ramp(13, 25)), 25);
    assert_eq!(r.copy_range(0, u64::MAX), ramp(28, 10));
}

#[test]
fn clear_keeps_the_clock_and_memory() {
    let mut r = SampleRing::new(1_000);
    r.push(&ramp(0, 480));
    let mem = r.buf.capacity();
    assert_eq!(r.clear(), 480);
    assert!(r.is_empty());
    assert_eq!((r.start(), r.end()), (480, 480));
    r.push(&ramp(480, 10));
    assert_eq!(r.copy_range(0, 1_000), ramp(480, 10));
    assert_eq!(r.buf.capacity(), mem);
}

#[test]
fn a_long_buffer_gives_its_memory_back_once_dropped() {
    let mut r = SampleRing::new(10 * KEEP_ALLOCATED);
    r.push(&vec![1.0f32; 8 * KEEP_ALLOCATED]);
    assert!(r.allocated() >= 8 * KEEP_ALLOCATED);
    r.drop_before(r.end() - 100);
    assert_eq!(r.len(), 100);
    assert!(r.allocated() < 2 * KEEP_ALLOCATED, "{}", r.allocated());
    r.clear();
    assert!(r.allocated() <= 2 * KEEP_ALLOCATED);
    assert!(r.allocated() >= KEEP_ALLOCATED.min(r.allocated()));
}

#[test]
fn zero_capacity_only_counts() {
    let mut r = SampleRing::new(0);
    assert_eq!(r.push(&ramp(0, 7)), 7);
    assert_eq!((r.len(), r.end()), (0, 7));
    assert!(r.copy_range(0, 7).is_empty());
}

#[test]
fn extend_range_appends() {
    let mut r = SampleRing::new(8);
    r.push(&ramp(0, 12));
    let mut out = vec![-1.0];
    assert_eq!(r.extend_range(5, 9, &mut out), 4);
    assert_eq!(out, [-1.0, 5.0, 6.0, 7.0, 8.0]);
}

#[test]
fn allocates_lazily_and_not_past_capacity() {
    let cap = 24_000 * 10;
    let mut r = SampleRing::new(cap);
    assert_eq!(r.buf.capacity(), 0);
    let frame = vec![0.5; 480];
    r.push(&frame);
    assert!(r.buf.capacity() < 4 * 480);
    while r.len() < cap {
        r.push(&frame);
    }
    let mem = r.buf.capacity();
    assert!(mem >= cap && mem < cap + 480, "{mem}");
    for _ in 0..1_000 {
        assert_eq!(r.push(&frame), 480);
    }
    assert_eq!(r.buf.capacity(), mem);
}

#[test]
fn holds_i16_samples_across_the_wrap() {
    let mut r: SampleRing<i16> = SampleRing::new(8);
    r.push(&[1, 2, 3, 4, 5, 6, 7, 8]);
    r.drop_before(4);
    // Full again without growing: the newest samples go where the dropped ones were.
    r.push(&[9, 10, 11, i16::MIN]);
    assert_eq!((r.start(), r.end()), (4, 12));
    assert_eq!(r.copy_range(0, 12), [5, 6, 7, 8, 9, 10, 11, i16::MIN]);
    assert_eq!(r.range(6, 10).copied().collect::<Vec<_>>(), [7, 8, 9, 10]);
    assert_eq!(r.range(0, 99).count(), 8);
}

/// The obvious model: a `Vec` trimmed from the front.
struct Model {
    buf: Vec<f32>,
    start: u64,
    cap: usize,
}

impl Model {
    fn push(&mut self, s: &[f32]) -> usize {
        self.buf.extend_from_slice(s);
        let over = self.buf.len().saturating_sub(self.cap);
        self.drop(over)
    }

    fn drop(&mut self, n: usize) -> usize {
        self.buf.drain(..n);
        self.start += n as u64;
        n
    }

    fn copy(&self, from: u64, to: u64) -> Vec<f32> {
        let end = self.start + self.buf.len() as u64;
        let lo = from.clamp(self.start, end);
        let hi = to.clamp(lo, end);
        self.buf[(lo - self.start) as usize..(hi - self.start) as usize].to_vec()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Push(usize),
    DropBefore(u64),
    Clear,
    Copy(u64, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..700).prop_map(Op::Push),
        2 => (0u64..5_000).prop_map(Op::DropBefore),
        1 => Just(Op::Clear),
        3 => (0u64..5_000, 0u64..5_000).prop_map(|(a, b)| Op::Copy(a, b)),
    ]
}

proptest! {
    /// Any sequence of operations agrees with the `Vec` model.
    #[test]
    fn matches_vec_model(cap in 0usize..1_500, ops in proptest::collection::vec(op(), 1..80)) {
        let mut r = SampleRing::new(cap);
        let mut m = Model { buf: Vec::new(), start: 0, cap };
        for op in ops {
            match op {
                Op::Push(n) => {
                    let s = ramp(r.end(), n);
                    prop_assert_eq!(r.push(&s), m.push(&s));
                }
                Op::DropBefore(pos) => {
                    let n = pos.saturating_sub(m.start).min(m.buf.len() as u64);
                    prop_assert_eq!(r.drop_before(pos), m.drop(n as usize));
                }
                Op::Clear => prop_assert_eq!(r.clear(), m.drop(m.buf.len())),
                Op::Copy(a, b) => {
                    prop_assert_eq!(r.copy_range(a, b), m.copy(a, b));
                    prop_assert_eq!(r.range(a, b).copied().collect::<Vec<_>>(), m.copy(a, b));
                }
            }
            prop_assert_eq!(r.start(), m.start);
            prop_assert_eq!(r.len(), m.buf.len());
            prop_assert!(r.len() <= cap);
            prop_assert_eq!(r.copy_range(0, u64::MAX), m.buf.clone());
        }
    }
}
