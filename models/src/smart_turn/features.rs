//! Smart Turn's input: the last 8 s of a turn at 16 kHz as Whisper log-mel features, 80 mel
//! bins × 800 frames, exactly as Pipecat computes them (`transformers`'
//! `WhisperFeatureExtractor` with `chunk_length=8` and `do_normalize`): the audio left
//! zero-padded to 8 s (or its last 8 s kept), normalized to zero mean and unit variance, a
//! centred power spectrogram (reflect padding, a periodic 400-point Hann window, hop 160), a
//! Slaney mel filterbank, `log10` floored at 1e-10, the last frame dropped, clamped to 8
//! below the maximum and scaled as `(x + 4) / 4`. Pure and allocation-bounded.

use std::sync::Arc;

use realfft::{RealFftPlanner, RealToComplex};

/// The model's sample rate.
pub const RATE: usize = 16_000;
/// Samples of the window: 8 s.
pub const WINDOW: usize = 8 * RATE;
/// Mel bins.
pub const MELS: usize = 80;
/// Frames of the window.
pub const FRAMES: usize = 800;

const N_FFT: usize = 400;
const HOP: usize = 160;
const BINS: usize = N_FFT / 2 + 1;

/// The feature extractor (its FFT plan, window and filterbank made once).
pub struct Features {
    fft: Arc<dyn RealToComplex<f64>>,
    window: Vec<f64>,
    /// `MELS` rows of `BINS` weights.
    filters: Vec<f64>,
    /// Each row's bins with a weight other than zero (a triangle spans a few of the 201),
    /// so a frame's mel energies cost those products only, with the same sums.
    spans: Vec<std::ops::Range<usize>>,
}

impl Default for Features {
    fn default() -> Self {
        Self::new()
    }
}

impl Features {
    /// A new extractor.
    pub fn new() -> Self {
        let fft = RealFftPlanner::<f64>::new().plan_fft_forward(N_FFT);
        let window = (0..N_FFT)
            .map(|n| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * n as f64 / N_FFT as f64).cos())
            .collect();
        let filters = slaney_filters();
        let spans = filters.chunks(BINS).map(nonzero_span).collect();
        Self {
            fft,
            window,
            filters,
            spans,
        }
    }

    /// The features of the turn `pcm` (16 kHz, any length; the last 8 s count), `MELS` rows
    /// of `FRAMES` values, into `out` (cleared first).
    pub fn compute(&self, pcm: &[f32], out: &mut Vec<f32>) {
        let x = normalized_window(pcm);
        let power = self.power_spectrogram(&x);
        let frames = power.len() / BINS; // FRAMES + 1
        let mut log = vec![0f64; MELS * FRAMES];
        for (m, span) in self.spans.iter().enumerate() {
            let weights = &self.filters[m * BINS..(m + 1) * BINS][span.clone()];
            for t in 0..FRAMES.min(frames) {
                let column = &power[t * BINS..(t + 1) * BINS][span.clone()];
                let e: f64 = weights.iter().zip(column).map(|(w, p)| w * p).sum();
                log[m * FRAMES + t] = e.max(1e-10).log10();
            }
        }
        let top = log.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        out.clear();
        out.extend(log.iter().map(|&v| ((v.max(top - 8.0) + 4.0) / 4.0) as f32));
    }

    /// `|rfft|²` of each centred frame, frame after frame (`BINS` values each).
    fn power_spectrogram(&self, x: &[f64]) -> Vec<f64> {
        let pad = N_FFT / 2;
        let n = x.len();
        // Reflect padding, the edge sample not repeated (numpy's "reflect").
        let padded: Vec<f64> = (0..n + 2 * pad)
            .map(|i| {
                let j = i as isize - pad as isize;
                let j = if j < 0 {
                    -j
                } else if j >= n as isize {
                    2 * (n as isize - 1) - j
                } else {
                    j
                };
                x[j as usize]
            })
            .collect();
        let frames = (padded.len() - N_FFT) / HOP + 1;
        let mut out = Vec::with_capacity(frames * BINS);
        let mut frame = self.fft.make_input_vec();
        let mut spectrum = self.fft.make_output_vec();
        let mut scratch = self.fft.make_scratch_vec();
        for f in 0..frames {
            let start = f * HOP;
            for (k, v) in frame.iter_mut().enumerate() {
                *v = padded[start + k] * self.window[k];
            }
            if self
                .fft
                .process_with_scratch(&mut frame, &mut spectrum, &mut scratch)
                .is_err()
            {
                out.extend(std::iter::repeat_n(0.0, BINS));
                continue;
            }
            out.extend(spectrum.iter().map(|c| c.norm_sqr()));
        }
        out
    }
}

/// The last 8 s of `pcm`, left zero-padded, then normalized to zero mean and unit variance
/// (in `f32`, as the reference does).
fn normalized_window(pcm: &[f32]) -> Vec<f64> {
    let tail = &pcm[pcm.len().saturating_sub(WINDOW)..];
    let mut x = vec![0f32; WINDOW - tail.len()];
    x.extend_from_slice(tail);
    let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / WINDOW as f64;
    let var = x
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / WINDOW as f64;
    let (mean, scale) = (mean as f32, (var as f32 + 1e-7).sqrt());
    x.iter().map(|&v| f64::from((v - mean) / scale)).collect()
}

/// The bins from the first to the last weight other than zero of a filter (empty if none).
fn nonzero_span(weights: &[f64]) -> std::ops::Range<usize> {
    let first = weights.iter().position(|&w| w != 0.0).unwrap_or(0);
    let end = weights
        .iter()
        .rposition(|&w| w != 0.0)
        .map_or(first, |l| l + 1);
    first..end
}

fn hz_to_mel(f: f64) -> f64 {
    let logstep = 27.0 / 6.4f64.ln();
    if f >= 1000.0 {
        15.0 + (f / 1000.0).ln() * logstep
    } else {
        3.0 * f / 200.0
    }
}

fn mel_to_hz(m: f64) -> f64 {
    let logstep = 6.4f64.ln() / 27.0;
    if m >= 15.0 {
        1000.0 * (logstep * (m - 15.0)).exp()
    } else {
        200.0 * m / 3.0
    }
}

/// Slaney-normalized triangular filters from 0 Hz to 8 kHz, `MELS` rows of `BINS`.
fn slaney_filters() -> Vec<f64> {
    let (lo, hi) = (hz_to_mel(0.0), hz_to_mel(RATE as f64 / 2.0));
    let edges: Vec<f64> = (0..MELS + 2)
        .map(|i| mel_to_hz(lo + (hi - lo) * i as f64 / (MELS + 1) as f64))
        .collect();
    let fft_freqs: Vec<f64> = (0..BINS)
        .map(|k| (RATE / 2) as f64 * k as f64 / (BINS - 1) as f64)
        .collect();
    let mut out = vec![0f64; MELS * BINS];
    for m in 0..MELS {
        let enorm = 2.0 / (edges[m + 2] - edges[m]);
        for (k, &f) in fft_freqs.iter().enumerate() {
            let down = (f - edges[m]) / (edges[m + 1] - edges[m]);
            let up = (edges[m + 2] - f) / (edges[m + 2] - edges[m + 1]);
            out[m * BINS + k] = down.min(up).max(0.0) * enorm;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_of_silence_and_a_tone_have_the_reference_shape() {
        let f = Features::new();
        let mut out = Vec::new();
        f.compute(&[], &mut out);
        assert_eq!(out.len(), MELS * FRAMES);
        // All zeros: every value floored alike, at the top after the clamp.
        assert!(out.iter().all(|&v| (v - out[0]).abs() < 1e-6), "{}", out[0]);
        // A 1 kHz tone in the last second: its mel bin is the loudest, and only at the end.
        let tone: Vec<f32> = (0..RATE)
            .map(|i| (2.0 * std::f32::consts::PI * 1000.0 * i as f32 / RATE as f32).sin())
            .collect();
        f.compute(&tone, &mut out);
        let at = |m: usize, t: usize| out[m * FRAMES + t];
        let loudest = (0..MELS)
            .max_by(|&a, &b| at(a, 750).total_cmp(&at(b, 750)))
            .unwrap();
        let centre = mel_to_hz(hz_to_mel(0.0) + (hz_to_mel(8000.0)) * (loudest + 1) as f64 / 81.0);
        assert!(
            (800.0..1250.0).contains(&centre),
            "bin {loudest} at {centre} Hz"
        );
        assert!(at(loudest, 750) > at(loudest, 100) + 1.0);
        // Longer than 8 s: only the last 8 s count.
        let mut long = vec![0.5f32; 3 * RATE];
        long.extend(vec![0f32; WINDOW]);
        f.compute(&long, &mut out);
        let quiet = out.clone();
        f.compute(&vec![0f32; WINDOW], &mut out);
        assert_eq!(quiet, out);
    }

    /// Values of Pipecat's own feature code (`compute_whisper_log_mel_features` in
    /// pipecat-ai 1.14.0, numpy) for a 3 s chirp, 200 Hz rising 600 Hz a second, at 0.3.
    #[test]
    fn features_match_the_reference_implementation() {
        let chirp: Vec<f32> = (0..3 * RATE)
            .map(|i| {
                let t = i as f64 / RATE as f64;
                (0.3 * (2.0 * std::f64::consts::PI * (200.0 + 300.0 * t) * t).sin()) as f32
            })
            .collect();
        let mut out = Vec::new();
        Features::new().compute(&chirp, &mut out);
        let at = |m: usize, t: usize| f64::from(out[m * FRAMES + t]);
        for (m, t, want) in [
            (0, 0, -0.215423583984375),
            (79, 799, 0.015555531717836857),
            (14, 560, 1.784576416015625),
            (17, 560, 0.7461975812911987),
            (12, 560, 1.2820168733596802),
            (28, 650, 1.7466241121292114),
            (31, 650, 0.9188774228096008),
            (37, 720, 1.7288808822631836),
            (40, 720, 0.10362445563077927),
            (43, 790, 1.7210355997085571),
            (41, 790, 0.8166673183441162),
        ] {
            assert!(
                (at(m, t) - want).abs() < 2e-3,
                "mel {m} frame {t}: {} against {want}",
                at(m, t)
            );
        }
        let mean = out.iter().map(|&v| f64::from(v)).sum::<f64>() / out.len() as f64;
        assert!((mean - -0.14432135224342346).abs() < 1e-3, "mean {mean}");
    }

    /// The mel energies over each filter's span are the dense products' sums, bit for bit.
    #[test]
    fn mel_energies_over_the_spans_equal_the_dense_sums() {
        let f = Features::new();
        let noise: Vec<f32> = (0u32..2 * RATE as u32)
            .map(|i| ((i.wrapping_mul(2_654_435_761) >> 8) as f32 / (1u32 << 24) as f32) - 0.5)
            .collect();
        let power = f.power_spectrogram(&normalized_window(&noise));
        let spans: usize = f.spans.iter().map(|s| s.len()).sum();
        assert!(spans < MELS * BINS / 10, "{spans} products a frame");
        for (m, span) in f.spans.iter().enumerate() {
            let weights = &f.filters[m * BINS..(m + 1) * BINS];
            assert!(weights[..span.start]
                .iter()
                .chain(&weights[span.end..])
                .all(|&w| w == 0.0));
            for t in (0..FRAMES).step_by(7) {
                let column = &power[t * BINS..(t + 1) * BINS];
                let dense: f64 = weights.iter().zip(column).map(|(w, p)| w * p).sum();
                let sparse: f64 = weights[span.clone()]
                    .iter()
                    .zip(&column[span.clone()])
                    .map(|(w, p)| w * p)
                    .sum();
                assert_eq!(dense.to_bits(), sparse.to_bits(), "mel {m} frame {t}");
            }
        }
    }

    #[test]
    fn slaney_filters_are_triangles_that_cover_the_band() {
        let f = slaney_filters();
        for m in 0..MELS {
            let row = &f[m * BINS..(m + 1) * BINS];
            assert!(row.iter().any(|&w| w > 0.0), "filter {m} is empty");
            let peak = row
                .iter()
                .position(|&w| w == row.iter().cloned().fold(0.0, f64::max))
                .unwrap();
            assert!(row[..peak].windows(2).all(|w| w[0] <= w[1]));
            assert!(row[peak..].windows(2).all(|w| w[0] >= w[1]));
        }
    }
}
