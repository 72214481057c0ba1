//! Silero VAD (v6, 16 kHz) on candle: speech probability per 512-sample chunk.
//!
//! The network, per 512-sample chunk at 16 kHz with the previous chunk's last 64 samples in
//! front (576 samples):
//!
//! 1. reflect-pad 64 samples on the right (640), then a learned STFT: a 256-tap, hop-128
//!    convolution to 258 channels over 4 frames, whose magnitude `sqrt(re² + im²)` gives
//!    129 bins per frame;
//! 2. four kernel-3, padding-1 convolutions with ReLU (129→128 stride 1, 128→64 stride 2,
//!    64→64 stride 2, 64→128 stride 1), down to one 128-wide vector;
//! 3. an LSTM cell of 128 (gates i, f, g, o), ReLU, a 1×1 convolution and a sigmoid.
//!
//! Every convolution runs as one matrix product over all streams of a batch (im2col with the
//! bias folded in as a column of ones). Taps that can only ever see zero padding are dropped
//! at load time: the 64→64 convolution keeps 2 of its 3 taps and the last one keeps 1. The
//! LSTM's input and recurrent products are one product on `[x, h, 1]`.
//!
//! [`SileroVad`] holds the weights (shared, cheap to clone), [`SileroStream`] the state of
//! one audio stream, and [`SileroDetector`] wraps both for one session's 24 kHz audio.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use candle::{DType, Device, Storage, Tensor};
use duet_media::StreamResampler;

use crate::ModelError;

/// File name of the weights inside the Silero VAD model directory.
pub const WEIGHTS_FILE: &str = "silero_vad_16k.safetensors";
/// Sample rate the network runs at (Hz).
pub const SAMPLE_RATE: u32 = 16_000;
/// Samples per chunk at [`SAMPLE_RATE`] (32 ms).
pub const CHUNK_SAMPLES: usize = 512;
/// Samples of the previous chunk seen again in front of each chunk.
pub const CONTEXT_SAMPLES: usize = 64;
/// Rate of the audio a [`SileroDetector`] takes (the session rate, Hz).
pub const DETECTOR_RATE: u32 = duet_media::SESSION_RATE;
/// One chunk in samples at [`DETECTOR_RATE`] (768: 32 ms at 24 kHz).
pub const DETECTOR_CHUNK: u64 =
    (CHUNK_SAMPLES as u64) * (DETECTOR_RATE as u64) / (SAMPLE_RATE as u64);

/// LSTM width.
const HIDDEN: usize = 128;
/// STFT window (taps of the first convolution).
const N_FFT: usize = 256;
/// STFT hop.
const HOP: usize = 128;
/// Magnitude bins (`N_FFT / 2 + 1`).
const BINS: usize = N_FFT / 2 + 1;
/// STFT frames per chunk: `(576 + 64 - 256) / 128 + 1`.
const FRAMES: usize = 4;
/// Context plus chunk.
const WINDOW: usize = CONTEXT_SAMPLES + CHUNK_SAMPLES;
/// Window plus the reflect padding.
const PADDED: usize = WINDOW + CONTEXT_SAMPLES;

/// Tensors of the weights file, with their shapes.
const TENSORS: [(&str, &[usize]); 15] = [
    ("stft_conv.weight", &[2 * BINS, 1, N_FFT]),
    ("conv1.weight", &[128, BINS, 3]),
    ("conv1.bias", &[128]),
    ("conv2.weight", &[64, 128, 3]),
    ("conv2.bias", &[64]),
    ("conv3.weight", &[64, 64, 3]),
    ("conv3.bias", &[64]),
    ("conv4.weight", &[128, 64, 3]),
    ("conv4.bias", &[128]),
    ("lstm_cell.weight_ih", &[4 * HIDDEN, 128]),
    ("lstm_cell.weight_hh", &[4 * HIDDEN, HIDDEN]),
    ("lstm_cell.bias_ih", &[4 * HIDDEN]),
    ("lstm_cell.bias_hh", &[4 * HIDDEN]),
    ("final_conv.weight", &[1, HIDDEN, 1]),
    ("final_conv.bias", &[1]),
];

/// Where the weights come from, for error messages.
const INSTALL_HINT: &str = "it is made by `scripts/install-models DIR` \
     (then pass `--vad-model-dir DIR/silero-vad`)";

/// One kernel-3, padding-1 convolution as a matrix product.
struct Conv {
    /// `[taps * c_in + 1, c_out]`: row `tap' * c_in + ci` is `weight[.., ci, taps.start + tap']`,
    /// the last row the bias.
    weight: Tensor,
    /// Input channels.
    c_in: usize,
    /// Output channels.
    c_out: usize,
    /// Stride.
    stride: usize,
    /// Output positions per chunk.
    t_out: usize,
    /// Kernel taps kept (the others only ever see padding).
    taps: Range<usize>,
}

impl Conv {
    /// Columns of the im2col input.
    fn k(&self) -> usize {
        self.taps.len() * self.c_in + 1
    }

    /// Appends the im2col rows of one stream's input (`[t_in, c_in]`, row-major) to `out`,
    /// applying ReLU to the input when `relu`.
    fn im2col(&self, input: &[f32], relu: bool, out: &mut Vec<f32>) {
        let t_in = input.len() / self.c_in;
        for j in 0..self.t_out {
            for tap in self.taps.clone() {
                // Padding 1: input position of this tap.
                let t = (j * self.stride + tap).wrapping_sub(1);
                if t < t_in {
                    let row = &input[t * self.c_in..(t + 1) * self.c_in];
                    if relu {
                        out.extend(row.iter().map(|&v| v.max(0.0)));
                    } else {
                        out.extend_from_slice(row);
                    }
                } else {
                    out.resize(out.len() + self.c_in, 0.0);
                }
            }
            out.push(1.0);
        }
    }
}

/// The prepared weights.
struct Weights {
    /// `[N_FFT, 2 * BINS]`: the STFT convolution, transposed.
    stft: Tensor,
    /// The four convolutions.
    convs: [Conv; 4],
    /// `[128 + HIDDEN + 1, 4 * HIDDEN]`: `[W_ih; W_hh; b_ih + b_hh]`, transposed.
    lstm: Tensor,
    /// The 1×1 output convolution.
    final_w: Vec<f32>,
    /// Its bias.
    final_b: f32,
}

/// Silero VAD weights on the CPU.
///
/// Cheap to clone (the weights sit behind an [`Arc`]) and `Send + Sync`: one instance can
/// serve every session, each with its own [`SileroStream`].
#[derive(Clone)]
pub struct SileroVad {
    weights: Arc<Weights>,
}

impl fmt::Debug for SileroVad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SileroVad").finish_non_exhaustive()
    }
}

/// The state of one audio stream: the last [`CONTEXT_SAMPLES`] samples and the LSTM's
/// `h` and `c`.
#[derive(Clone, Debug, PartialEq)]
pub struct SileroStream {
    context: [f32; CONTEXT_SAMPLES],
    h: [f32; HIDDEN],
    c: [f32; HIDDEN],
}

impl Default for SileroStream {
    fn default() -> Self {
        SileroStream {
            context: [0.0; CONTEXT_SAMPLES],
            h: [0.0; HIDDEN],
            c: [0.0; HIDDEN],
        }
    }
}

impl SileroStream {
    /// A stream at its start (silent context, zero LSTM state).
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets everything heard, as if the stream had just started.
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

fn candle_err(e: candle::Error) -> ModelError {
    ModelError::Failed(format!("silero vad: {e}"))
}

/// Runs `f` on a tensor's contiguous f32 data, without copying when it lives on the CPU.
fn with_data<R>(t: &Tensor, f: impl FnOnce(&[f32]) -> R) -> Result<R, ModelError> {
    {
        let (storage, layout) = t.storage_and_layout();
        if let (Storage::Cpu(cpu), Some((start, end))) = (&*storage, layout.contiguous_offsets()) {
            let data = cpu.as_slice::<f32>().map_err(candle_err)?;
            return Ok(f(&data[start..end]));
        }
    }
    let data = t
        .flatten_all()
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(candle_err)?;
    Ok(f(&data))
}

/// `[rows, k]` data times `weight` (`[k, n]`).
fn matmul(data: Vec<f32>, rows: usize, weight: &Tensor) -> Result<Tensor, ModelError> {
    let k = data.len() / rows.max(1);
    Tensor::from_vec(data, (rows, k), &Device::Cpu)
        .and_then(|x| x.matmul(weight))
        .map_err(candle_err)
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Replaces NaN and infinities by silence.
fn finite(x: f32) -> f32 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

impl SileroVad {
    /// Loads `DIR/`[`WEIGHTS_FILE`] onto the CPU.
    ///
    /// Fails with a message naming the expected file when the directory or file is missing,
    /// unreadable, or holds a tensor of the wrong shape.
    pub fn load(dir: &Path) -> Result<SileroVad, ModelError> {
        let path = dir.join(WEIGHTS_FILE);
        if !dir.is_dir() {
            return Err(ModelError::Failed(format!(
                "Silero VAD model directory {} does not exist (expected {}); {INSTALL_HINT}",
                dir.display(),
                path.display()
            )));
        }
        if !path.is_file() {
            return Err(ModelError::Failed(format!(
                "Silero VAD weights {} not found; {INSTALL_HINT}",
                path.display()
            )));
        }
        let tensors = candle::safetensors::load(&path, &Device::Cpu).map_err(|e| {
            ModelError::Failed(format!(
                "Silero VAD weights {} unreadable: {e}; {INSTALL_HINT}",
                path.display()
            ))
        })?;
        Self::from_tensors(&tensors).map_err(|e| {
            let msg = match e {
                ModelError::Failed(msg) => msg,
                other => other.to_string(),
            };
            ModelError::Failed(format!(
                "Silero VAD weights {}: {msg}; {INSTALL_HINT}",
                path.display()
            ))
        })
    }

    /// Builds the model from its 15 named tensors (the names and shapes of
    /// [`WEIGHTS_FILE`]; any float dtype). Extra tensors are ignored.
    pub fn from_tensors(tensors: &HashMap<String, Tensor>) -> Result<SileroVad, ModelError> {
        let get = |name: &str, shape: &[usize]| -> Result<Tensor, ModelError> {
            let t = tensors
                .get(name)
                .ok_or_else(|| ModelError::Failed(format!("tensor `{name}` is missing")))?;
            if t.dims() != shape {
                return Err(ModelError::Failed(format!(
                    "tensor `{name}` has shape {:?}, expected {shape:?}",
                    t.dims()
                )));
            }
            if !t.dtype().is_float() {
                return Err(ModelError::Failed(format!(
                    "tensor `{name}` has dtype {:?}, expected a float type",
                    t.dtype()
                )));
            }
            t.to_device(&Device::Cpu)
                .and_then(|t| t.to_dtype(DType::F32))
                .map_err(candle_err)
        };
        let mut t = Vec::with_capacity(TENSORS.len());
        for (name, shape) in TENSORS {
            t.push(get(name, shape)?);
        }
        Self::prepare(&t).map_err(candle_err)
    }

    /// Builds the matrices of the fast path from the tensors, in [`TENSORS`] order.
    fn prepare(t: &[Tensor]) -> candle::Result<SileroVad> {
        let stft = t[0].reshape((2 * BINS, N_FFT))?.t()?.contiguous()?;
        // weight [c_out, c_in, 3] -> [taps * c_in + 1, c_out] with the bias as last row.
        let conv = |w: &Tensor,
                    b: &Tensor,
                    stride: usize,
                    t_out: usize,
                    taps: Range<usize>|
         -> candle::Result<Conv> {
            let (c_out, c_in, _) = w.dims3()?;
            let kept = w.narrow(2, taps.start, taps.len())?.permute((2, 1, 0))?;
            let weight = Tensor::cat(
                &[
                    kept.reshape((taps.len() * c_in, c_out))?,
                    b.reshape((1, c_out))?,
                ],
                0,
            )?
            .contiguous()?;
            Ok(Conv {
                weight,
                c_in,
                c_out,
                stride,
                t_out,
                taps,
            })
        };
        // Lengths 4 -> 4 -> 2 -> 1 -> 1. conv3's first tap and conv4's outer taps only see
        // the zero padding.
        let convs = [
            conv(&t[1], &t[2], 1, FRAMES, 0..3)?,
            conv(&t[3], &t[4], 2, 2, 0..3)?,
            conv(&t[5], &t[6], 2, 1, 1..3)?,
            conv(&t[7], &t[8], 1, 1, 1..2)?,
        ];
        let bias = (&t[11] + &t[12])?.reshape((1, 4 * HIDDEN))?;
        let lstm = Tensor::cat(&[t[9].t()?, t[10].t()?, bias], 0)?.contiguous()?;
        let final_w = t[13].flatten_all()?.to_vec1::<f32>()?;
        let final_b = t[14].flatten_all()?.to_vec1::<f32>()?[0];
        Ok(SileroVad {
            weights: Arc::new(Weights {
                stft,
                convs,
                lstm,
                final_w,
                final_b,
            }),
        })
    }

    /// Random weights of the right shapes (uniform in `±1/sqrt(fan_in)`), for tests and
    /// benchmarks that must not need the real file.
    #[doc(hidden)]
    pub fn random_tensors(seed: u64) -> HashMap<String, Tensor> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut map = HashMap::new();
        for (name, shape) in TENSORS {
            let fan_in = match name {
                n if n.starts_with("lstm_cell") => HIDDEN,
                n if n.starts_with("stft") => N_FFT,
                "conv1.weight" | "conv1.bias" => BINS * 3,
                "conv2.weight" | "conv2.bias" => 128 * 3,
                "conv3.weight" | "conv3.bias" => 64 * 3,
                "conv4.weight" | "conv4.bias" => 64 * 3,
                _ => HIDDEN,
            };
            let a = 1.0 / (fan_in as f32).sqrt();
            let n: usize = shape.iter().product();
            let data: Vec<f32> = (0..n).map(|_| rng.random_range(-a..a)).collect();
            let t = Tensor::from_vec(data, shape, &Device::Cpu).expect("shape matches its data");
            map.insert(name.to_string(), t);
        }
        map
    }

    /// A model with [`random_tensors`](Self::random_tensors) weights.
    #[doc(hidden)]
    pub fn random(seed: u64) -> SileroVad {
        Self::from_tensors(&Self::random_tensors(seed))
            .expect("random tensors have the right shapes")
    }

    /// A fresh stream state for this model.
    pub fn stream(&self) -> SileroStream {
        SileroStream::new()
    }

    /// Runs one chunk of every stream, all streams batched through each operation.
    ///
    /// `chunks[i]` (exactly [`CHUNK_SAMPLES`] samples at 16 kHz, nominally in `[-1, 1]`;
    /// NaN and infinities count as silence) is the next audio of `streams[i]`, whose state
    /// advances. Returns one speech probability in `[0, 1]` per stream, in order. On error
    /// no stream changes.
    pub fn forward(
        &self,
        streams: &mut [&mut SileroStream],
        chunks: &[&[f32]],
    ) -> Result<Vec<f32>, ModelError> {
        let mut out = Vec::with_capacity(streams.len());
        self.forward_into(streams, chunks, &mut out)?;
        Ok(out)
    }

    /// [`forward`](Self::forward), appending the probabilities to `out`.
    pub fn forward_into(
        &self,
        streams: &mut [&mut SileroStream],
        chunks: &[&[f32]],
        out: &mut Vec<f32>,
    ) -> Result<(), ModelError> {
        check_batch(streams, chunks)?;
        let b = streams.len();
        if b == 0 {
            return Ok(());
        }
        let w = &*self.weights;
        let spec = w.stft(streams, chunks)?;
        let y = w.conv1(&spec, b)?;
        let y = w.conv_rest(y, b)?;
        let gates = w.lstm_gates(streams, &y)?;
        // The streams change only here, once every product has succeeded.
        with_data(&gates, |gates| {
            for ((s, chunk), g) in streams
                .iter_mut()
                .zip(chunks)
                .zip(gates.chunks_exact(4 * HIDDEN))
            {
                out.push(w.lstm_step(s, chunk, g));
            }
        })
    }
}

/// Checks a batch has one chunk per stream, each of [`CHUNK_SAMPLES`] samples.
fn check_batch(streams: &[&mut SileroStream], chunks: &[&[f32]]) -> Result<(), ModelError> {
    if streams.len() != chunks.len() {
        return Err(ModelError::Failed(format!(
            "silero vad: {} streams but {} chunks",
            streams.len(),
            chunks.len()
        )));
    }
    if let Some(bad) = chunks.iter().find(|c| c.len() != CHUNK_SAMPLES) {
        return Err(ModelError::BadFrame {
            got: bad.len(),
            expected: CHUNK_SAMPLES,
        });
    }
    Ok(())
}

impl Weights {
    /// The STFT (`[b * FRAMES, 2 * BINS]`) of each stream's frames of [context, chunk,
    /// reflect padding].
    fn stft(&self, streams: &[&mut SileroStream], chunks: &[&[f32]]) -> Result<Tensor, ModelError> {
        let b = streams.len();
        let mut frames = Vec::with_capacity(b * FRAMES * N_FFT);
        let mut padded = [0.0f32; PADDED];
        for (s, chunk) in streams.iter().zip(chunks) {
            padded[..CONTEXT_SAMPLES].copy_from_slice(&s.context);
            for (d, &v) in padded[CONTEXT_SAMPLES..WINDOW].iter_mut().zip(chunk.iter()) {
                *d = finite(v);
            }
            for i in 0..CONTEXT_SAMPLES {
                padded[WINDOW + i] = padded[WINDOW - 2 - i];
            }
            for t in 0..FRAMES {
                frames.extend_from_slice(&padded[t * HOP..t * HOP + N_FFT]);
            }
        }
        matmul(frames, b * FRAMES, &self.stft)
    }

    /// conv1 on the magnitudes of the `b` streams' STFT `spec`.
    fn conv1(&self, spec: &Tensor, b: usize) -> Result<Tensor, ModelError> {
        let conv1 = &self.convs[0];
        let mut x = Vec::with_capacity(b * conv1.t_out * conv1.k());
        with_data(spec, |spec| {
            let mut mag = [0.0f32; FRAMES * BINS];
            for s in spec.chunks_exact(FRAMES * 2 * BINS) {
                for (frame, m) in s.chunks_exact(2 * BINS).zip(mag.chunks_exact_mut(BINS)) {
                    let (re, im) = frame.split_at(BINS);
                    for ((m, &r), &i) in m.iter_mut().zip(re).zip(im) {
                        *m = (r * r + i * i).sqrt();
                    }
                }
                conv1.im2col(&mag, false, &mut x);
            }
        })?;
        matmul(x, b * conv1.t_out, &conv1.weight)
    }

    /// conv2..conv4 on conv1's output `y` (`b` streams), each on the ReLU of the previous
    /// output.
    fn conv_rest(&self, mut y: Tensor, b: usize) -> Result<Tensor, ModelError> {
        for pair in self.convs.windows(2) {
            let (prev, conv) = (&pair[0], &pair[1]);
            let mut x = Vec::with_capacity(b * conv.t_out * conv.k());
            with_data(&y, |data| {
                for s in data.chunks_exact(prev.t_out * prev.c_out) {
                    conv.im2col(s, true, &mut x);
                }
            })?;
            y = matmul(x, b * conv.t_out, &conv.weight)?;
        }
        Ok(y)
    }

    /// The LSTM cell's gates (`[b, 4 * HIDDEN]`) on each stream's [relu(conv4), h, 1].
    fn lstm_gates(&self, streams: &[&mut SileroStream], y: &Tensor) -> Result<Tensor, ModelError> {
        let b = streams.len();
        let c4 = self.convs[3].c_out;
        let mut x = Vec::with_capacity(b * (c4 + HIDDEN + 1));
        with_data(y, |data| {
            for (s, y) in streams.iter().zip(data.chunks_exact(c4)) {
                x.extend(y.iter().map(|&v| v.max(0.0)));
                x.extend_from_slice(&s.h);
                x.push(1.0);
            }
        })?;
        matmul(x, b, &self.lstm)
    }

    /// Advances stream `s` by its `chunk` given its gates `g` (the LSTM's `c` and `h`, then
    /// the context); returns its speech probability.
    fn lstm_step(&self, s: &mut SileroStream, chunk: &[f32], g: &[f32]) -> f32 {
        let (gi, rest) = g.split_at(HIDDEN);
        let (gf, rest) = rest.split_at(HIDDEN);
        let (gg, go) = rest.split_at(HIDDEN);
        let mut logit = self.final_b;
        for j in 0..HIDDEN {
            let c = sigmoid(gf[j]) * s.c[j] + sigmoid(gi[j]) * gg[j].tanh();
            let h = sigmoid(go[j]) * c.tanh();
            s.c[j] = c;
            s.h[j] = h;
            logit += h.max(0.0) * self.final_w[j];
        }
        for (d, &v) in s
            .context
            .iter_mut()
            .zip(&chunk[CHUNK_SAMPLES - CONTEXT_SAMPLES..])
        {
            *d = finite(v);
        }
        sigmoid(logit)
    }
}

/// The speech probability of one chunk seen by a [`SileroDetector`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChunkProbability {
    /// First sample of the chunk, in [`DETECTOR_RATE`] samples of everything pushed.
    pub start: u64,
    /// Length of the chunk in [`DETECTOR_RATE`] samples ([`DETECTOR_CHUNK`]).
    pub len: u64,
    /// Speech probability in `[0, 1]`.
    pub probability: f32,
}

/// A chunk whose level (RMS) is below this (−60 dBFS) holds no voice, whatever the network
/// says of it.
pub const SILENT_RMS: f32 = 0.001;

/// Whether `chunk` is quieter than any voice ([`SILENT_RMS`]). Silero goes on calling the
/// one to three chunks after a voice stops speech (its state carries it), even in digital
/// silence: the level gate ends that hangover at the first quiet chunk, as an energy floor
/// beside the network's confidence does in other VADs (Pipecat's `min_volume`).
fn below_voice(chunk: &[f32]) -> bool {
    let energy: f32 = chunk.iter().map(|s| s * s).sum();
    energy < SILENT_RMS * SILENT_RMS * chunk.len() as f32
}

/// Silero VAD over one session's 24 kHz audio: resamples to 16 kHz, cuts 512-sample chunks
/// and reports each chunk's speech probability (0 for a chunk under [`SILENT_RMS`]: the
/// network still hears it, so its state stays in step).
///
/// Chunk `k` after creation (or after the last [`reset`](Self::reset) at position `p`)
/// covers input samples `[p + k·768, p + (k+1)·768)`. The resampler's filter lead-in
/// (5 ms) is dropped, so the chunk's audio is aligned with that span up to the filter's
/// smoothing; in exchange a chunk is reported only once the input reaches 5 ms past its
/// end, rounded up to the resampler's 10 ms blocks (5 to 15 ms after the chunk's end).
pub struct SileroDetector {
    vad: SileroVad,
    stream: SileroStream,
    resampler: StreamResampler,
    /// Resampler output of the current push.
    resampled: Vec<f32>,
    /// The chunk being filled (16 kHz).
    chunk: Vec<f32>,
    /// Probabilities of the current forward.
    probs: Vec<f32>,
    /// Resampler lead-in still to drop (16 kHz samples).
    lead_in: usize,
    /// Input samples pushed in all.
    position: u64,
    /// Position of the last reset (or 0).
    origin: u64,
    /// Chunks completed since `origin`.
    chunks: u64,
}

impl fmt::Debug for SileroDetector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SileroDetector")
            .field("position", &self.position)
            .field("origin", &self.origin)
            .field("chunks", &self.chunks)
            .field("partial", &self.chunk.len())
            .finish_non_exhaustive()
    }
}

impl SileroDetector {
    /// A detector at position 0 using `vad`'s weights.
    pub fn new(vad: SileroVad) -> Result<SileroDetector, ModelError> {
        let resampler = StreamResampler::new(DETECTOR_RATE, SAMPLE_RATE)
            .map_err(|e| ModelError::Failed(format!("silero vad resampler: {e}")))?;
        let lead_in = resampler.delay_samples();
        Ok(SileroDetector {
            stream: vad.stream(),
            vad,
            resampler,
            resampled: Vec::with_capacity(CHUNK_SAMPLES),
            chunk: Vec::with_capacity(CHUNK_SAMPLES),
            probs: Vec::with_capacity(1),
            lead_in,
            position: 0,
            origin: 0,
            chunks: 0,
        })
    }

    /// Feeds 24 kHz samples (any length) and appends every chunk completed by them to `out`.
    ///
    /// On an inference error the failed chunk is skipped (not reported), the rest of the
    /// input is still processed, and the first error is returned.
    pub fn push(
        &mut self,
        pcm24: &[f32],
        out: &mut Vec<ChunkProbability>,
    ) -> Result<(), ModelError> {
        self.resampled.clear();
        self.resampler.process(pcm24, &mut self.resampled);
        self.position += pcm24.len() as u64;
        let skip = self.lead_in.min(self.resampled.len());
        self.lead_in -= skip;
        let mut src = &self.resampled[skip..];
        let mut first_err = None;
        while !src.is_empty() {
            let take = (CHUNK_SAMPLES - self.chunk.len()).min(src.len());
            self.chunk.extend_from_slice(&src[..take]);
            src = &src[take..];
            if self.chunk.len() < CHUNK_SAMPLES {
                break;
            }
            let start = self.origin + self.chunks * DETECTOR_CHUNK;
            self.chunks += 1;
            let quiet = below_voice(&self.chunk);
            self.probs.clear();
            let result = self.vad.forward_into(
                &mut [&mut self.stream],
                &[self.chunk.as_slice()],
                &mut self.probs,
            );
            self.chunk.clear();
            match result {
                Ok(()) => {
                    if let Some(&probability) = self.probs.first() {
                        out.push(ChunkProbability {
                            start,
                            len: DETECTOR_CHUNK,
                            probability: if quiet { 0.0 } else { probability },
                        });
                    }
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Forgets the audio heard and any partial chunk; the position is kept, and the next
    /// chunk starts there.
    pub fn reset(&mut self) {
        self.stream.reset();
        self.resampler.reset();
        self.lead_in = self.resampler.delay_samples();
        self.chunk.clear();
        self.origin = self.position;
        self.chunks = 0;
    }

    /// Input samples (24 kHz) pushed since creation.
    pub fn position(&self) -> u64 {
        self.position
    }
}

#[cfg(test)]
#[path = "silero_tests.rs"]
mod tests;
