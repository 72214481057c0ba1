//! Streaming mono sample-rate conversion.
//!
//! [`StreamResampler`] wraps rubato's [`FftFixedInOut`]. Why that one:
//! Duet only converts between fixed, integer-related rates (8/16/24/48 kHz),
//! so a synchronous resampler is exact (no drift, no ratio control needed).
//! The FFT variant is the cheapest per sample of rubato's synchronous
//! resamplers, and the fixed-in/fixed-out form gives exactly
//! `chunk_in * to / from` output samples per chunk, which keeps the output
//! length arithmetic (and thus media time) exact. Chunks are 10 ms of input:
//! a 20 ms frame is two chunks, and the filter delay is half a chunk (5 ms).

use rubato::{FftFixedInOut, Resampler};
use thiserror::Error;

/// Highest sample rate accepted (Hz).
pub const MAX_RATE_HZ: u32 = 384_000;

/// Errors from building a [`StreamResampler`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ResampleError {
    /// A rate is zero or above [`MAX_RATE_HZ`].
    #[error("unsupported sample rate: {from_hz} Hz -> {to_hz} Hz")]
    UnsupportedRate {
        /// Input rate.
        from_hz: u32,
        /// Output rate.
        to_hz: u32,
    },
    /// The rates share too small a common divisor: the smallest exact chunk
    /// would be longer than 100 ms.
    #[error("incompatible sample rates {from_hz} Hz -> {to_hz} Hz (chunk too long)")]
    IncompatibleRates {
        /// Input rate.
        from_hz: u32,
        /// Output rate.
        to_hz: u32,
    },
    /// rubato refused the configuration.
    #[error("resampler construction failed: {0}")]
    Backend(String),
}

impl ResampleError {
    /// A stable machine-readable code for this error.
    pub fn code(&self) -> &'static str {
        match self {
            ResampleError::UnsupportedRate { .. } => "resample_unsupported_rate",
            ResampleError::IncompatibleRates { .. } => "resample_incompatible_rates",
            ResampleError::Backend(_) => "resample_backend",
        }
    }
}

/// The rubato state for a real (non-passthrough) conversion.
struct Engine {
    rubato: FftFixedInOut<f32>,
    chunk_in: usize,
    chunk_out: usize,
    pending: Vec<f32>,
    scratch: Vec<Vec<f32>>,
}

impl Engine {
    fn new(from_hz: u32, to_hz: u32) -> Result<Self, ResampleError> {
        let gcd = gcd(from_hz, to_hz);
        if from_hz / gcd > from_hz / 10 {
            return Err(ResampleError::IncompatibleRates { from_hz, to_hz });
        }
        let want = (from_hz as usize / 100).max(1);
        let rubato = FftFixedInOut::<f32>::new(from_hz as usize, to_hz as usize, want, 1)
            .map_err(|e| ResampleError::Backend(e.to_string()))?;
        let chunk_in = rubato.input_frames_next();
        let chunk_out = rubato.output_frames_next();
        Ok(Engine {
            rubato,
            chunk_in,
            chunk_out,
            pending: Vec::with_capacity(chunk_in),
            scratch: vec![vec![0.0; chunk_out]],
        })
    }

    /// Resamples the full `pending` chunk, appending `chunk_out` samples.
    fn run_chunk(&mut self, out: &mut Vec<f32>) {
        let input = [self.pending.as_slice()];
        match self
            .rubato
            .process_into_buffer(&input, &mut self.scratch, None)
        {
            Ok((_, n)) => out.extend_from_slice(&self.scratch[0][..n]),
            // Unreachable with correctly sized buffers; keep time exact anyway.
            Err(_) => out.resize(out.len() + self.chunk_out, 0.0),
        }
        self.pending.clear();
    }

    /// Buffers `input`, resampling every completed chunk into `out`.
    fn process(&mut self, mut input: &[f32], out: &mut Vec<f32>) {
        loop {
            let need = self.chunk_in - self.pending.len();
            if input.len() < need {
                self.pending.extend_from_slice(input);
                return;
            }
            self.pending.extend_from_slice(&input[..need]);
            input = &input[need..];
            self.run_chunk(out);
        }
    }

    fn reset(&mut self) {
        self.rubato.reset();
        self.pending.clear();
    }
}

/// A stateful mono resampler for one direction of one stream.
///
/// Accepts input of any length; samples that do not fill a whole internal
/// chunk are kept until the next call. Over a stream, `process` calls
/// followed by [`flush`](Self::flush) emit exactly
/// `ceil(n_in * to / from) + delay_samples()` samples, the first
/// `delay_samples()` of which are the filter's lead-in (an empty stream
/// emits nothing).
pub struct StreamResampler {
    from_hz: u32,
    to_hz: u32,
    engine: Option<Engine>,
    total_in: u64,
    total_out: u64,
}

impl StreamResampler {
    /// Creates a resampler from `from_hz` to `to_hz`. Equal rates give a
    /// passthrough that copies samples and has no delay.
    pub fn new(from_hz: u32, to_hz: u32) -> Result<Self, ResampleError> {
        let valid = |r: u32| r > 0 && r <= MAX_RATE_HZ;
        if !valid(from_hz) || !valid(to_hz) {
            return Err(ResampleError::UnsupportedRate { from_hz, to_hz });
        }
        let engine = if from_hz == to_hz {
            None
        } else {
            Some(Engine::new(from_hz, to_hz)?)
        };
        Ok(StreamResampler {
            from_hz,
            to_hz,
            engine,
            total_in: 0,
            total_out: 0,
        })
    }

    /// Input rate in Hz.
    pub fn from_hz(&self) -> u32 {
        self.from_hz
    }

    /// Output rate in Hz.
    pub fn to_hz(&self) -> u32 {
        self.to_hz
    }

    /// Feeds `input` and appends every output sample now available to `out`.
    pub fn process(&mut self, input: &[f32], out: &mut Vec<f32>) {
        let before = out.len();
        match &mut self.engine {
            None => out.extend_from_slice(input),
            Some(engine) => engine.process(input, out),
        }
        self.total_in += input.len() as u64;
        self.total_out += (out.len() - before) as u64;
    }

    /// Pushes out everything still buffered by feeding zeros, so the stream's
    /// total output is `ceil(n_in * to / from) + delay_samples()` (nothing
    /// at all for a stream with no input), then resets for a new stream.
    pub fn flush(&mut self, out: &mut Vec<f32>) {
        let target = self.flush_target();
        if let Some(engine) = &mut self.engine {
            let mut tmp = Vec::with_capacity(engine.chunk_out);
            while self.total_out < target {
                let pad = engine.chunk_in - engine.pending.len();
                tmp.clear();
                engine.process(&vec![0.0; pad], &mut tmp);
                let left = (target - self.total_out).min(tmp.len() as u64) as usize;
                out.extend_from_slice(&tmp[..left]);
                self.total_out += left as u64;
            }
        }
        self.reset();
    }

    /// Total output the stream should have once flushed.
    fn flush_target(&self) -> u64 {
        if self.total_in == 0 {
            return 0;
        }
        let num = u128::from(self.total_in) * u128::from(self.to_hz);
        let exact = num.div_ceil(u128::from(self.from_hz));
        (exact as u64).saturating_add(self.delay_samples() as u64)
    }

    /// Filter delay in output samples: an input event at time `t` appears in
    /// the output at `t * to / from + delay_samples()`. Zero for passthrough.
    pub fn delay_samples(&self) -> usize {
        self.engine
            .as_ref()
            .map_or(0, |engine| engine.rubato.output_delay())
    }

    /// Input samples buffered and not yet resampled.
    pub fn pending_input(&self) -> usize {
        self.engine
            .as_ref()
            .map_or(0, |engine| engine.pending.len())
    }

    /// Drops buffered input and filter history, starting a new stream.
    pub fn reset(&mut self) {
        if let Some(engine) = &mut self.engine {
            engine.reset();
        }
        self.total_in = 0;
        self.total_out = 0;
    }
}

impl std::fmt::Debug for StreamResampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamResampler")
            .field("from_hz", &self.from_hz)
            .field("to_hz", &self.to_hz)
            .field("pending_input", &self.pending_input())
            .field("delay_samples", &self.delay_samples())
            .finish()
    }
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
#[path = "resample_tests.rs"]
mod tests;
