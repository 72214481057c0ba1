//! A simple granular pitch shifter.
//!
//! The output is rebuilt from Hann-windowed grains (about 40 ms, 50 %
//! overlap). Each grain is centred on its own output position and reads the
//! source around that same position at `factor` times normal speed, so the
//! pitch is multiplied by `factor` while the timing (and length) is kept.
//! Periodic Hann windows at 50 % overlap sum to exactly one, so a factor of
//! 1.0 reproduces the input and the output never exceeds the input's peak.
//!
//! Limitation of the method: grains repeat every hop (20 ms), so a pure tone
//! at `f` comes out as lines at `f + k * 50 Hz`, the strongest being the one
//! nearest `f * factor`. Good enough for a voice effect, not for tuning.

/// Grain length in milliseconds.
pub const GRAIN_MS: u32 = 40;

/// Returns `input` with its pitch multiplied by `factor` and the same length.
///
/// Deterministic. A factor that is not a positive finite number returns a
/// copy of the input. Source reads outside the input count as silence, so
/// the first and last half-grain fade a little when `factor != 1.0`.
pub fn pitch_shift(input: &[f32], sample_rate: u32, factor: f32) -> Vec<f32> {
    if input.is_empty() || !factor.is_finite() || factor <= 0.0 {
        return input.to_vec();
    }
    let window = hann(grain_len(sample_rate));
    let hop = window.len() / 2;
    let mut out = vec![0.0f32; input.len()];
    let mut start = -(hop as i64);
    while start < input.len() as i64 {
        add_grain(input, &mut out, &window, start, f64::from(factor));
        start += hop as i64;
    }
    out
}

/// Grain length in samples: even and at least 4.
fn grain_len(sample_rate: u32) -> usize {
    let n = (u64::from(sample_rate) * u64::from(GRAIN_MS) / 1000) as usize;
    (n & !1).max(4)
}

/// A periodic Hann window of `n` samples.
fn hann(n: usize) -> Vec<f32> {
    (0..n)
        .map(|j| {
            let phase = 2.0 * std::f64::consts::PI * j as f64 / n as f64;
            (0.5 - 0.5 * phase.cos()) as f32
        })
        .collect()
}

/// Adds one windowed grain starting at output index `start`.
fn add_grain(input: &[f32], out: &mut [f32], window: &[f32], start: i64, factor: f64) {
    let half = (window.len() / 2) as f64;
    let center = start as f64 + half;
    for (j, &w) in window.iter().enumerate() {
        let Ok(idx) = usize::try_from(start + j as i64) else {
            continue;
        };
        let Some(slot) = out.get_mut(idx) else {
            break;
        };
        let src = center + (j as f64 - half) * factor;
        *slot += w * sample_at(input, src);
    }
}

/// Linearly interpolated sample at fractional position `pos` (0 outside).
fn sample_at(input: &[f32], pos: f64) -> f32 {
    let base = pos.floor();
    let frac = (pos - base) as f32;
    let at = |i: f64| -> f32 {
        if i < 0.0 || i >= input.len() as f64 {
            0.0
        } else {
            input[i as usize]
        }
    };
    at(base) * (1.0 - frac) + at(base + 1.0) * frac
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{dominant_freq, rms, sine, Rng};

    fn middle(x: &[f32]) -> &[f32] {
        &x[x.len() / 4..x.len() * 3 / 4]
    }

    fn check_shift(freq: f64, factor: f32, rate: u32) {
        let input = sine(freq, rate, 0.5, rate as usize);
        let out = pitch_shift(&input, rate, factor);
        assert_eq!(out.len(), input.len());
        assert!(out.iter().all(|v| v.is_finite() && v.abs() <= 0.5 + 1e-5));
        let want = freq * f64::from(factor);
        let got = dominant_freq(middle(&out), rate, 50.0, 1000.0, 2.0);
        assert!((got - want).abs() <= 6.0, "{freq} Hz x {factor}: {got} Hz");
        assert!(rms(middle(&out)) > 0.5 * rms(&input), "level collapsed");
    }

    #[test]
    fn shifts_a_sine_up() {
        check_shift(200.0, 1.5, 16000);
        check_shift(220.0, 1.25, 24000);
        check_shift(150.0, 1.33, 48000);
    }

    #[test]
    fn shifts_a_sine_down() {
        check_shift(400.0, 0.75, 16000);
    }

    #[test]
    fn unit_factor_is_identity_and_bad_factors_copy() {
        let mut rng = Rng(11);
        let input: Vec<f32> = (0..3001).map(|_| rng.unit()).collect();
        let out = pitch_shift(&input, 16000, 1.0);
        for (a, b) in input.iter().zip(&out) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
        for bad in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            assert_eq!(pitch_shift(&input, 16000, bad), input);
        }
        assert!(pitch_shift(&[], 16000, 1.5).is_empty());
    }

    #[test]
    fn deterministic_bounded_for_noise_and_odd_sizes() {
        let mut rng = Rng(3);
        for n in [1, 3, 100, 641, 7777] {
            let input: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
            let a = pitch_shift(&input, 16000, 1.25);
            assert_eq!(a, pitch_shift(&input, 16000, 1.25));
            assert_eq!(a.len(), n);
            assert!(a.iter().all(|v| v.is_finite() && v.abs() <= 1.0));
        }
        assert_eq!(pitch_shift(&[0.5; 10], 0, 2.0).len(), 10);
    }
}
