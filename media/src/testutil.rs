//! Signal helpers shared by the unit tests.

use std::f64::consts::PI;

/// `n` samples of a sine at `freq` Hz with peak `amp`.
pub fn sine(freq: f64, rate: u32, amp: f32, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (amp as f64 * (2.0 * PI * freq * i as f64 / rate as f64).sin()) as f32)
        .collect()
}

/// Amplitude of the `freq` component of `x` (Goertzel, normalised so that a
/// sine of peak `a` at exactly `freq` reads about `a`).
pub fn goertzel_amp(x: &[f32], freq: f64, rate: u32) -> f64 {
    let w = 2.0 * PI * freq / rate as f64;
    let coeff = 2.0 * w.cos();
    let (mut s1, mut s2) = (0.0f64, 0.0f64);
    for &v in x {
        let s0 = v as f64 + coeff * s1 - s2;
        s2 = s1;
        s1 = s0;
    }
    let power = s1 * s1 + s2 * s2 - coeff * s1 * s2;
    2.0 * power.max(0.0).sqrt() / x.len() as f64
}

/// Frequency in `lo..=hi` (step `step` Hz) with the strongest Goertzel response.
pub fn dominant_freq(x: &[f32], rate: u32, lo: f64, hi: f64, step: f64) -> f64 {
    let mut best = (lo, 0.0);
    let mut f = lo;
    while f <= hi {
        let a = goertzel_amp(x, f, rate);
        if a > best.1 {
            best = (f, a);
        }
        f += step;
    }
    best.0
}

/// Number of sign changes (from negative to non-negative or back).
pub fn zero_crossings(x: &[f32]) -> usize {
    x.windows(2)
        .filter(|w| (w[0] < 0.0) != (w[1] < 0.0))
        .count()
}

/// Root mean square of `x`.
pub fn rms(x: &[f32]) -> f64 {
    if x.is_empty() {
        return 0.0;
    }
    (x.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / x.len() as f64).sqrt()
}

/// A tiny deterministic generator (xorshift) for chunk sizes and noise.
pub struct Rng(pub u64);

impl Rng {
    /// Next raw 64-bit value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform value in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform value in `-1.0..1.0`.
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}
