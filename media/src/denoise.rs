//! [`Denoiser`]: noise suppression for session audio (RNNoise, by the `nnnoiseless` crate,
//! its model built in).
//!
//! RNNoise works on 10 ms frames at 48 kHz; session audio is 24 kHz. Everything that listens
//! to session audio (the VADs, the turn model, Whisper) works at 16 kHz, so the band above
//! 8 kHz hardly matters, and the rate is doubled and halved with the cheapest causal filters
//! that keep it clean: linear interpolation up, a `[1/4, 1/2, 1/4]` half-band average down.
//!
//! The denoiser gives back exactly as many samples as it is given, [`LATENCY_SAMPLES`]
//! later (10 ms of framing and RNNoise's own 10 ms), so a session's input clock is
//! unchanged: a sound at input sample `t` is heard at `t + LATENCY_SAMPLES`. Output does
//! not depend on how the input is split into calls.

use std::collections::VecDeque;

use nnnoiseless::DenoiseState;

/// Session samples (24 kHz) in one RNNoise frame: 10 ms.
pub const BLOCK: usize = DenoiseState::FRAME_SIZE / 2;

/// How much later (in 24 kHz samples) a sound comes out than it went in: the framing
/// (one block) and RNNoise's overlap (one more).
pub const LATENCY_SAMPLES: usize = 2 * BLOCK;

/// Float samples in [-1, 1] to RNNoise's 16-bit scale, and back.
const SCALE: f32 = 32_768.0;

/// A stateful denoiser for one stream of 24 kHz mono audio.
pub struct Denoiser {
    state: Box<DenoiseState<'static>>,
    /// Input not yet a whole block (fewer than `BLOCK` samples).
    pending: Vec<f32>,
    /// Denoised output not yet given back, primed with one block of silence.
    ready: VecDeque<f32>,
    /// The last input sample (the interpolation's left neighbour), in RNNoise's scale.
    last_in: f32,
    /// The last 48 kHz denoised sample (the half-band filter's left neighbour).
    last_up: f32,
    up: Vec<f32>,
    cleaned: Vec<f32>,
}

impl Default for Denoiser {
    fn default() -> Self {
        Self::new()
    }
}

impl Denoiser {
    /// A denoiser at the start of a stream.
    pub fn new() -> Self {
        let n = DenoiseState::FRAME_SIZE;
        Self {
            state: DenoiseState::new(),
            pending: Vec::with_capacity(BLOCK),
            ready: std::iter::repeat_n(0.0, BLOCK).collect(),
            last_in: 0.0,
            last_up: 0.0,
            up: vec![0.0; n],
            cleaned: vec![0.0; n],
        }
    }

    /// Bytes this denoiser holds (its RNNoise state and buffers), for a memory budget.
    pub fn bytes() -> usize {
        std::mem::size_of::<DenoiseState<'static>>()
            + 4 * (2 * DenoiseState::FRAME_SIZE + 3 * BLOCK)
            // RNNoise's recurrent state (three GRUs of at most 96 units).
            + 4 * 3 * 96
    }

    /// Denoises `input` (24 kHz, [-1, 1]) and appends exactly `input.len()` samples to
    /// `out`: the stream so far, `LATENCY_SAMPLES` late.
    pub fn process(&mut self, mut input: &[f32], out: &mut Vec<f32>) {
        let n = input.len();
        while !input.is_empty() {
            let take = (BLOCK - self.pending.len()).min(input.len());
            self.pending.extend_from_slice(&input[..take]);
            input = &input[take..];
            if self.pending.len() == BLOCK {
                self.run_block();
                self.pending.clear();
            }
        }
        // `ready` holds one block, plus what was denoised, less what was given back: at
        // least `BLOCK - pending` > 0 samples, so it never runs dry.
        out.extend(self.ready.drain(..n));
    }

    /// One 10 ms block: up to 48 kHz, RNNoise, back down to 24 kHz.
    fn run_block(&mut self) {
        for (i, &x) in self.pending.iter().enumerate() {
            let x = x * SCALE;
            self.up[2 * i] = 0.5 * (self.last_in + x);
            self.up[2 * i + 1] = x;
            self.last_in = x;
        }
        self.state.process_frame(&mut self.cleaned, &self.up);
        let y = &self.cleaned;
        for i in 0..BLOCK {
            let left = if i == 0 { self.last_up } else { y[2 * i - 1] };
            let z = 0.25 * left + 0.5 * y[2 * i] + 0.25 * y[2 * i + 1];
            self.ready.push_back((z / SCALE).clamp(-1.0, 1.0));
        }
        self.last_up = y[2 * BLOCK - 1];
    }
}

impl std::fmt::Debug for Denoiser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Denoiser")
            .field("pending", &self.pending.len())
            .field("ready", &self.ready.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[path = "denoise_tests.rs"]
mod tests;
