//! Whisper's log-mel front end: 25 ms Hann windows every 10 ms at 16 kHz, power spectrum,
//! Slaney mel filters, log10, clamped to 8 (in log10 units) below the maximum, scaled.
//!
//! Framing follows OpenAI's reference (`torch.stft(center=True)`, reflect padding on the
//! left, the zeros that pad the audio on the right, the last frame dropped), not
//! candle's `audio::pcm_to_mel` (uncentred frames): the model was trained on the former. The
//! DFT is one matmul of the windowed frames by a cosine/sine basis, so it runs on the
//! model's device as fast as the encoder's own matmuls.

use candle::{DType, Device, Tensor};

use crate::moshi::err;
use crate::ModelError;

/// Whisper's sample rate.
pub const SAMPLE_RATE: usize = 16_000;
/// Window length in samples (25 ms).
pub const N_FFT: usize = 400;
/// Hop in samples (10 ms).
pub const HOP: usize = 160;
/// Frequency bins of the power spectrum.
pub const N_FREQ: usize = N_FFT / 2 + 1;

/// Mel filter bank `[n_mels, N_FREQ]` (row-major), as librosa's `filters.mel(sr=16000,
/// n_fft=400, n_mels, htk=False, norm="slaney")`, which is what Whisper ships in
/// `mel_filters.npz`.
pub fn mel_filters(n_mels: usize) -> Vec<f32> {
    fn hz_to_mel(f: f64) -> f64 {
        let f_sp = 200.0 / 3.0;
        let min_log_hz = 1000.0;
        let min_log_mel = min_log_hz / f_sp;
        let logstep = 6.4f64.ln() / 27.0;
        if f >= min_log_hz {
            min_log_mel + (f / min_log_hz).ln() / logstep
        } else {
            f / f_sp
        }
    }
    fn mel_to_hz(m: f64) -> f64 {
        let f_sp = 200.0 / 3.0;
        let min_log_hz = 1000.0;
        let min_log_mel = min_log_hz / f_sp;
        let logstep = 6.4f64.ln() / 27.0;
        if m >= min_log_mel {
            min_log_hz * (logstep * (m - min_log_mel)).exp()
        } else {
            f_sp * m
        }
    }
    let nyquist = SAMPLE_RATE as f64 / 2.0;
    let fft_freqs: Vec<f64> = (0..N_FREQ)
        .map(|i| i as f64 * nyquist / (N_FREQ - 1) as f64)
        .collect();
    let (lo, hi) = (hz_to_mel(0.0), hz_to_mel(nyquist));
    let mel_f: Vec<f64> = (0..n_mels + 2)
        .map(|i| mel_to_hz(lo + (hi - lo) * i as f64 / (n_mels + 1) as f64))
        .collect();
    let mut out = vec![0f32; n_mels * N_FREQ];
    for m in 0..n_mels {
        let (f0, f1, f2) = (mel_f[m], mel_f[m + 1], mel_f[m + 2]);
        let enorm = 2.0 / (f2 - f0);
        for (k, &f) in fft_freqs.iter().enumerate() {
            let lower = (f - f0) / (f1 - f0);
            let upper = (f2 - f) / (f2 - f1);
            out[m * N_FREQ + k] = (lower.min(upper).max(0.0) * enorm) as f32;
        }
    }
    out
}

/// The front end's constant tensors on one device.
#[derive(Debug)]
pub struct MelFrontend {
    n_mels: usize,
    /// `[N_FFT, 2 * N_FREQ]`: Hann-windowed cosines then sines.
    basis: Tensor,
    /// `[N_FREQ, n_mels]`.
    filters_t: Tensor,
    device: Device,
}

impl MelFrontend {
    /// Builds the DFT basis and filters for `n_mels` bins.
    pub fn new(n_mels: usize, device: &Device) -> Result<Self, ModelError> {
        let e = err("mel front end");
        let mut basis = vec![0f32; N_FFT * 2 * N_FREQ];
        for n in 0..N_FFT {
            // Periodic Hann window, as torch.hann_window(400).
            let w = 0.5 * (1.0 - (2.0 * std::f64::consts::PI * n as f64 / N_FFT as f64).cos());
            for k in 0..N_FREQ {
                let a = 2.0 * std::f64::consts::PI * ((n * k) % N_FFT) as f64 / N_FFT as f64;
                basis[n * 2 * N_FREQ + k] = (w * a.cos()) as f32;
                basis[n * 2 * N_FREQ + N_FREQ + k] = (w * a.sin()) as f32;
            }
        }
        let basis = Tensor::from_vec(basis, (N_FFT, 2 * N_FREQ), device).map_err(&e)?;
        let filters = Tensor::from_vec(mel_filters(n_mels), (n_mels, N_FREQ), device)
            .and_then(|t| t.t()?.contiguous())
            .map_err(&e)?;
        Ok(Self {
            n_mels,
            basis,
            filters_t: filters,
            device: device.clone(),
        })
    }

    /// Log-mel spectrogram `[1, n_mels, n_frames]` of `pcm` (16 kHz) followed by silence:
    /// frame `i` is centred on sample `i * HOP`; audio past `n_frames * HOP` is ignored.
    pub fn log_mel(&self, pcm: &[f32], n_frames: usize) -> candle::Result<Tensor> {
        let half = N_FFT / 2;
        // [reflect(200) | pcm, zeros] covering every frame.
        let body = n_frames * HOP + half;
        let mut x = vec![0f32; half + body];
        let n = pcm.len().min(body);
        x[half..half + n].copy_from_slice(&pcm[..n]);
        for i in 0..half {
            // x_pad[half - 1 - i] = x[i + 1] (numpy/torch "reflect": the edge not repeated).
            x[half - 1 - i] = x[half + 1 + i];
        }
        let mut frames = vec![0f32; n_frames * N_FFT];
        for (f, row) in frames.chunks_exact_mut(N_FFT).enumerate() {
            row.copy_from_slice(&x[f * HOP..f * HOP + N_FFT]);
        }
        let frames = Tensor::from_vec(frames, (n_frames, N_FFT), &self.device)?;
        let spec = frames.matmul(&self.basis)?; // [n_frames, 2 * N_FREQ]
        let power = spec.sqr()?;
        let power = (power.narrow(1, 0, N_FREQ)? + power.narrow(1, N_FREQ, N_FREQ)?)?;
        let mel = power.matmul(&self.filters_t)?; // [n_frames, n_mels]
        let log = mel.clamp(1e-10f32, f32::MAX)?.log()?;
        let log = (log * (1.0 / std::f64::consts::LN_10))?;
        let max = log.max_all()?.to_dtype(DType::F32)?.to_scalar::<f32>()?;
        let log = log.clamp(max - 8.0, f32::MAX)?;
        let log = ((log + 4.0)? / 4.0)?;
        log.t()?.contiguous()?.reshape((1, self.n_mels, n_frames))
    }
}
