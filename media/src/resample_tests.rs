//! Tests for [`super::StreamResampler`].

use super::*;
use crate::testutil::{dominant_freq, rms, sine, zero_crossings, Rng};

const RATES: [u32; 4] = [8000, 16000, 24000, 48000];

fn pairs() -> impl Iterator<Item = (u32, u32)> {
    RATES
        .iter()
        .flat_map(|&a| RATES.iter().map(move |&b| (a, b)))
}

fn run_all(from: u32, to: u32, input: &[f32]) -> Vec<f32> {
    let mut rs = StreamResampler::new(from, to).unwrap();
    let mut out = Vec::new();
    rs.process(input, &mut out);
    rs.flush(&mut out);
    out
}

#[test]
fn rejects_bad_rates_with_codes() {
    let e = StreamResampler::new(0, 16000).unwrap_err();
    assert_eq!(e.code(), "resample_unsupported_rate");
    let e = StreamResampler::new(16000, MAX_RATE_HZ + 1).unwrap_err();
    assert_eq!(e.code(), "resample_unsupported_rate");
    let e = StreamResampler::new(48000, 47999).unwrap_err();
    assert_eq!(
        e,
        ResampleError::IncompatibleRates {
            from_hz: 48000,
            to_hz: 47999
        }
    );
    assert_eq!(e.code(), "resample_incompatible_rates");
    assert!(StreamResampler::new(44100, 48000).is_ok());
    assert!(StreamResampler::new(22050, 16000).is_ok());
}

#[test]
fn same_rate_is_an_exact_passthrough() {
    let mut rs = StreamResampler::new(24000, 24000).unwrap();
    assert_eq!(rs.delay_samples(), 0);
    let input: Vec<f32> = (0..333).map(|i| i as f32 / 333.0).collect();
    let mut out = Vec::new();
    rs.process(&input[..100], &mut out);
    rs.process(&input[100..], &mut out);
    rs.flush(&mut out);
    assert_eq!(out, input);
}

#[test]
fn output_length_tracks_input_over_odd_chunks() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for (from, to) in pairs() {
        let mut rs = StreamResampler::new(from, to).unwrap();
        let chunk_out = u64::from(to / 100);
        let (mut n_in, mut out) = (0u64, Vec::new());
        for _ in 0..200 {
            let n = [0, 1, 7, 13, 159, 161, 479, 997][rng.below(8)];
            rs.process(&vec![0.25; n], &mut out);
            n_in += n as u64;
            let ideal = n_in * u64::from(to) / u64::from(from);
            let got = out.len() as u64;
            assert!(got <= ideal, "{from}->{to}: {got} > {ideal}");
            assert!(ideal - got < chunk_out.max(1), "{from}->{to}: lagging");
        }
        let delay = rs.delay_samples() as u64;
        assert!(delay < chunk_out.max(1) || from == to);
        rs.flush(&mut out);
        let ideal = (n_in * u64::from(to)).div_ceil(u64::from(from));
        assert_eq!(out.len() as u64, ideal + delay, "{from}->{to}");
        assert_eq!(rs.pending_input(), 0);
    }
}

#[test]
fn chunking_does_not_change_the_output() {
    let mut rng = Rng(42);
    let input: Vec<f32> = (0..5000).map(|_| rng.unit() * 0.5).collect();
    for (from, to) in pairs() {
        let whole = run_all(from, to, &input);
        let mut rs = StreamResampler::new(from, to).unwrap();
        let (mut pos, mut out) = (0, Vec::new());
        while pos < input.len() {
            let n = rng.below(300).min(input.len() - pos);
            rs.process(&input[pos..pos + n], &mut out);
            pos += n;
        }
        rs.flush(&mut out);
        assert_eq!(out, whole, "{from}->{to}");
    }
}

#[test]
fn impulse_appears_after_the_reported_delay() {
    for (from, to) in pairs().filter(|(a, b)| a != b) {
        let at_in = from as usize / 100 * 3; // 30 ms: maps to an integer output index
        let mut input = vec![0.0f32; from as usize / 10];
        input[at_in] = 1.0;
        let out = run_all(from, to, &input);
        let peak = out
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .map(|(i, _)| i)
            .unwrap();
        let want = at_in * to as usize / from as usize
            + StreamResampler::new(from, to).unwrap().delay_samples();
        assert!(
            peak.abs_diff(want) <= 1,
            "{from}->{to}: peak {peak}, want {want}"
        );
    }
}

/// Resamples a 1 kHz sine and checks frequency and level after the delay.
fn check_tone_kept(from: u32, to: u32) {
    let input = sine(1000.0, from, 0.5, from as usize); // one second
    let out = run_all(from, to, &input);
    let delay = StreamResampler::new(from, to).unwrap().delay_samples();
    let steady = &out[delay + to as usize / 10..delay + to as usize * 9 / 10];
    let secs = steady.len() as f64 / f64::from(to);
    let crossings = zero_crossings(steady) as f64;
    assert!(
        (crossings - 2000.0 * secs).abs() <= 2.0,
        "{from}->{to}: {crossings}"
    );
    assert_eq!(dominant_freq(steady, to, 900.0, 1100.0, 5.0), 1000.0);
    let level_db = 20.0 * (rms(steady) / (0.5 / 2f64.sqrt())).log10();
    assert!(level_db.abs() < 1.0, "{from}->{to}: {level_db} dB");
}

#[test]
fn tone_keeps_frequency_and_level_upsampling() {
    check_tone_kept(8000, 24000);
    check_tone_kept(16000, 48000);
}

#[test]
fn tone_keeps_frequency_and_level_downsampling() {
    check_tone_kept(48000, 24000);
    check_tone_kept(24000, 8000);
}

#[test]
fn downsampling_removes_tones_above_the_new_nyquist() {
    let input = sine(6000.0, 24000, 0.5, 24000);
    let out = run_all(24000, 8000, &input);
    let steady = &out[800..7200];
    let atten_db = 20.0 * (rms(steady) / rms(&input)).log10();
    assert!(atten_db < -40.0, "6 kHz only attenuated by {atten_db} dB");
}

#[test]
fn reset_and_flush_start_a_fresh_stream() {
    let mut rng = Rng(7);
    let a: Vec<f32> = (0..1234).map(|_| rng.unit()).collect();
    let b: Vec<f32> = (0..999).map(|_| rng.unit()).collect();
    let fresh = run_all(16000, 24000, &b);

    let mut rs = StreamResampler::new(16000, 24000).unwrap();
    let mut out = Vec::new();
    rs.process(&a, &mut out);
    rs.reset();
    assert_eq!(rs.pending_input(), 0);
    out.clear();
    rs.process(&b, &mut out);
    rs.flush(&mut out);
    assert_eq!(out, fresh);

    out.clear();
    rs.process(&b, &mut out);
    rs.flush(&mut out);
    assert_eq!(out, fresh);
}

#[test]
fn empty_stream_flushes_to_nothing() {
    let mut rs = StreamResampler::new(48000, 16000).unwrap();
    let mut out = Vec::new();
    rs.process(&[], &mut out);
    rs.flush(&mut out);
    assert!(out.is_empty());
    assert!(format!("{rs:?}").contains("48000"));
}

#[test]
fn resampler_is_send() {
    fn is_send<T: Send>() {}
    is_send::<StreamResampler>();
}
