//! A bounded sample buffer on an absolute sample clock.
//!
//! Holding the newest N seconds of a live stream in a `Vec` and dropping the
//! oldest with `drain(..n)` moves the whole buffer on every frame (28.8 MB
//! per 20 ms frame for 300 s at 24 kHz). [`SampleRing`] drops from the front
//! in O(1) instead, and addresses samples by their absolute position on the
//! stream, which stays valid however much has been dropped.

use std::collections::VecDeque;
use std::iter::Chain;
use std::slice;

/// The newest samples of a stream, at most `capacity` of them, addressed by
/// absolute position (the first sample ever pushed is at 0).
///
/// Memory grows with use (an idle stream costs nothing) up to `capacity`
/// samples and is reused from then on: no reallocation once full. Samples are
/// `f32` unless stored more compactly (a session keeps its input as `i16`).
#[derive(Debug, Clone, Default)]
pub struct SampleRing<T = f32> {
    buf: VecDeque<T>,
    capacity: usize,
    /// Position just past the newest sample.
    end: u64,
}

/// Samples a ring keeps allocated however little it holds (2 s at 24 kHz): live audio
/// that comes and goes in turns does not reallocate every turn.
pub const KEEP_ALLOCATED: usize = 48_000;

impl<T: Copy> SampleRing<T> {
    /// An empty ring that keeps at most `capacity` samples; allocates nothing
    /// until samples arrive.
    pub fn new(capacity: usize) -> Self {
        SampleRing {
            buf: VecDeque::new(),
            capacity,
            end: 0,
        }
    }

    /// Most samples kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Samples the ring has memory for now (at least [`SampleRing::len`]).
    pub fn allocated(&self) -> usize {
        self.buf.capacity()
    }

    /// Samples kept.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Position of the oldest kept sample (`end()` when empty).
    pub fn start(&self) -> u64 {
        self.end - self.buf.len() as u64
    }

    /// Position just past the newest sample: the number of samples ever
    /// pushed.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Appends `samples`, dropping the oldest ones past capacity. Returns how
    /// many samples were dropped (kept ones and, when `samples` alone exceeds
    /// capacity, its own oldest ones).
    pub fn push(&mut self, samples: &[T]) -> usize {
        let n = samples.len();
        self.end += n as u64;
        let keep = &samples[n.saturating_sub(self.capacity)..];
        let over = (self.buf.len() + keep.len()).saturating_sub(self.capacity);
        self.drop_front(over);
        self.grow_for(keep.len());
        self.buf.extend(keep);
        over + (n - keep.len())
    }

    /// Drops every sample before position `pos` (all of them if `pos` is at
    /// or past `end()`); returns how many were dropped.
    pub fn drop_before(&mut self, pos: u64) -> usize {
        let n = pos.saturating_sub(self.start()).min(self.buf.len() as u64) as usize;
        self.drop_front(n);
        n
    }

    /// Drops everything; the clock (`end()`) is kept, and memory past
    /// [`KEEP_ALLOCATED`] samples is given back. Returns how many samples were dropped.
    pub fn clear(&mut self) -> usize {
        let n = self.buf.len();
        self.drop_front(n);
        n
    }

    /// A copy of the kept samples in positions `from..to` (clamped to
    /// `start()..end()`; empty if nothing of it is kept).
    pub fn copy_range(&self, from: u64, to: u64) -> Vec<T> {
        let mut out = Vec::new();
        self.extend_range(from, to, &mut out);
        out
    }

    /// Appends the kept samples in positions `from..to` (clamped as in
    /// [`SampleRing::copy_range`]) to `out`; returns how many were appended.
    pub fn extend_range(&self, from: u64, to: u64, out: &mut Vec<T>) -> usize {
        let (a, b) = self.slices(from, to);
        out.reserve(a.len() + b.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b);
        a.len() + b.len()
    }

    /// The kept samples in positions `from..to` (clamped as in
    /// [`SampleRing::copy_range`]), oldest first, without copying them.
    pub fn range(&self, from: u64, to: u64) -> Chain<slice::Iter<'_, T>, slice::Iter<'_, T>> {
        let (a, b) = self.slices(from, to);
        a.iter().chain(b)
    }

    /// The kept samples in positions `from..to` as the ring's two slices.
    fn slices(&self, from: u64, to: u64) -> (&[T], &[T]) {
        let start = self.start();
        let lo = (from.clamp(start, self.end) - start) as usize;
        let hi = (to.clamp(start, self.end) - start) as usize;
        if lo >= hi {
            return (&[], &[]);
        }
        let (x, y) = self.buf.as_slices();
        let split = |i: usize| (i.min(x.len()), i.saturating_sub(x.len()));
        let ((xa, ya), (xb, yb)) = (split(lo), split(hi));
        (&x[xa..xb], &y[ya..yb])
    }

    /// Drops the oldest `n` samples; memory four times what is left (and over
    /// [`KEEP_ALLOCATED`] samples) is given back, so a long utterance's buffer does not
    /// stay allocated once it was committed.
    fn drop_front(&mut self, n: usize) {
        self.buf.drain(..n);
        if self.buf.capacity() > KEEP_ALLOCATED && self.buf.capacity() > 4 * self.buf.len() {
            self.buf.shrink_to((2 * self.buf.len()).max(KEEP_ALLOCATED));
        }
    }

    /// Makes room for `n` more samples: doubling, but never past capacity,
    /// so a full ring holds exactly `capacity` samples' worth of memory.
    fn grow_for(&mut self, n: usize) {
        let need = self.buf.len() + n;
        if need > self.buf.capacity() {
            let want = need.max(self.buf.capacity() * 2).min(self.capacity);
            self.buf.reserve_exact(want - self.buf.len());
        }
    }
}

#[cfg(test)]
#[path = "ring_tests.rs"]
mod tests;
