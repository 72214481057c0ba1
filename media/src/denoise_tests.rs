use super::*;
use crate::pcm::rms_dbfs;

/// Deterministic white noise at `dbfs` (RMS), `n` samples (xorshift, uniform).
fn white(n: usize, dbfs: f32, seed: u64) -> Vec<f32> {
    let rms = 10f32.powf(dbfs / 20.0);
    let amp = rms * 3f32.sqrt(); // a uniform [-a, a] has RMS a/√3
    let mut s = seed.max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            amp * ((s >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        })
        .collect()
}

/// A buzzy voiced sound: a 120 Hz pulse train's first 30 harmonics, slowly swelling.
fn voiced(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let t = i as f32 / 24_000.0;
            let swell = 0.5 + 0.5 * (2.0 * std::f32::consts::PI * 3.0 * t).sin().abs();
            let buzz: f32 = (1..=30)
                .map(|k| (2.0 * std::f32::consts::PI * 120.0 * k as f32 * t).sin() / k as f32)
                .sum();
            0.08 * swell * buzz
        })
        .collect()
}

fn denoise_in_chunks(input: &[f32], chunks: &[usize]) -> Vec<f32> {
    let mut d = Denoiser::new();
    let mut out = Vec::new();
    let mut rest = input;
    let mut i = 0;
    while !rest.is_empty() {
        let take = chunks[i % chunks.len()].min(rest.len());
        let before = out.len();
        d.process(&rest[..take], &mut out);
        assert_eq!(out.len() - before, take, "one sample out for each in");
        rest = &rest[take..];
        i += 1;
    }
    out
}

#[test]
fn gives_back_as_many_samples_as_it_gets_whatever_the_chunks() {
    let input: Vec<f32> = white(24_000, -30.0, 3)
        .iter()
        .zip(voiced(24_000))
        .map(|(a, b)| a + b)
        .collect();
    let whole = denoise_in_chunks(&input, &[input.len()]);
    assert_eq!(whole.len(), input.len());
    for chunks in [&[1][..], &[7, 240, 1], &[480], &[239, 241], &[960, 3, 20]] {
        assert_eq!(
            denoise_in_chunks(&input, chunks),
            whole,
            "chunks {chunks:?}"
        );
    }
    assert!(
        whole[..BLOCK].iter().all(|&s| s == 0.0),
        "the first block is the latency"
    );
    let mut d = Denoiser::new();
    let mut out = Vec::new();
    d.process(&[], &mut out);
    assert!(out.is_empty());
}

#[test]
fn white_noise_drops_by_more_than_10_db() {
    let input = white(3 * 24_000, -30.0, 11);
    let out = denoise_in_chunks(&input, &[480]);
    // After half a second of adaptation.
    let (before, after) = (rms_dbfs(&input[12_000..]), rms_dbfs(&out[12_000..]));
    assert!(
        after < before - 10.0,
        "noise {before:.1} dBFS -> {after:.1} dBFS"
    );
}

#[test]
fn a_voiced_sound_survives_and_comes_out_latency_samples_late() {
    let input = voiced(2 * 24_000);
    let out = denoise_in_chunks(&input, &[480]);
    let (before, after) = (rms_dbfs(&input[12_000..]), rms_dbfs(&out[12_000..]));
    assert!(
        after > before - 6.0,
        "voice {before:.1} dBFS -> {after:.1} dBFS"
    );
    // The lag that lines the output up best with the input.
    let span = 12_000..36_000;
    let corr = |lag: usize| -> f64 {
        span.clone()
            .map(|i| f64::from(input[i]) * f64::from(out[i + lag]))
            .sum()
    };
    let best = (0..2 * LATENCY_SAMPLES)
        .max_by(|&a, &b| corr(a).total_cmp(&corr(b)))
        .expect("lags");
    assert!(
        best.abs_diff(LATENCY_SAMPLES) <= 2,
        "best lag {best}, documented {LATENCY_SAMPLES}"
    );
}

#[test]
fn silence_stays_silence() {
    let out = denoise_in_chunks(&vec![0.0; 4_800], &[480]);
    assert!(out.iter().all(|&s| s == 0.0));
}
