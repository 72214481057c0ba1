//! Moshi (Kyutai's full-duplex speech model) on candle.
//!
//! One [`MoshiModel`] owns the weights on one device and steps every session of that device
//! together, once per 80 ms frame:
//!
//! 1. per session: Mimi encodes the caller's 1920 samples to `input_audio_codebooks` tokens
//!    (Mimi keeps per-session streaming state, so each session has its own clone; the
//!    weights are shared);
//! 2. **batched**: the 7B temporal transformer runs once for all slots (`LmModel::batched`
//!    with a slot mask, a scattered KV cache per slot, `reset_batch_idx` on reuse);
//! 3. the text token of every active session is sampled from one host copy of the logits;
//! 4. **batched**: the depth transformer makes the audio tokens of every active session
//!    together, one pass per codebook ([`depformer::BatchedDepformer`]);
//! 5. per session: Mimi decodes the (delayed) audio tokens to 1920 samples, and the text
//!    token becomes transcript text.
//!
//! Each session's state is small: its Mimi state, a ring of `acoustic_delay + 2` token rows,
//! two seeded samplers and its KV-cache slot.

pub mod config;
mod depformer;
mod mimi;
mod sampler;
mod spm;
pub mod tiny;

#[cfg(test)]
mod tests;

use std::path::Path;

use candle::{DType, Device, IndexOp, Tensor};
use moshi::lm::LmModel;
use moshi::nn::MaybeQuantizedVarBuilder;
use moshi::StreamMask;

use crate::{DuplexModel, ModelError, ModelInfo, Request, SlotId, StepInput, StepOutput};
pub use config::{Generation, ModelFiles, MoshiConfig, PRESETS};
use depformer::BatchedDepformer;
use mimi::BatchedMimi;
use sampler::Sampler;
pub use sampler::Sampling;
pub use spm::TextDecoder;

/// Samples per step at 24 kHz (80 ms).
pub const FRAME_SAMPLES: usize = 1920;
const UNSET: u32 = u32::MAX;

/// Where the model runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSpec {
    /// The CPU (f32).
    Cpu,
    /// CUDA device N (bf16 LM); needs a build with the `cuda` feature.
    Cuda(usize),
}

impl DeviceSpec {
    /// Parses `cpu`, `cuda` or `cuda:N`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Self::Cuda)
                .ok_or_else(|| format!("bad device {s:?}; expected cpu, cuda or cuda:N")),
        }
    }

    /// Opens the device.
    pub fn open(&self) -> Result<Device, ModelError> {
        match self {
            Self::Cpu => Ok(Device::Cpu),
            Self::Cuda(n) => Device::new_cuda(*n).map_err(|e| {
                let hint = if cfg!(feature = "cuda") {
                    "is an NVIDIA driver installed and the GPU visible?"
                } else {
                    "this binary was built without CUDA; build with `--features cuda`"
                };
                ModelError::Failed(format!("cannot open cuda:{n}: {e} ({hint})"))
            }),
        }
    }
}

/// How to load Moshi.
#[derive(Clone, Debug)]
pub struct MoshiOptions {
    /// Preset (architecture) name, overridden by `duet-moshi.toml` in the directory.
    pub preset: String,
    /// Device.
    pub device: DeviceSpec,
    /// Sessions stepped together (the KV cache is allocated for all of them).
    pub max_slots: usize,
    /// Sampling seed (each session derives its own from it); `None` = random.
    pub seed: Option<u64>,
    /// Benchmark switch: run upstream's single-session depformer once per session instead
    /// of the batched one (same weights; compares the two strategies).
    pub per_session_depformer: bool,
    /// Mimi decoding batched across sessions (`None`: on CUDA yes, on the CPU no, where
    /// candle 0.9.2's CPU matmul gets a batched transposed convolution wrong; see
    /// [`MimiDecode`]).
    pub batched_decode: Option<bool>,
}

impl Default for MoshiOptions {
    fn default() -> Self {
        Self {
            preset: "moshiko".into(),
            device: DeviceSpec::Cpu,
            max_slots: 8,
            seed: None,
            per_session_depformer: false,
            batched_decode: None,
        }
    }
}

pub(crate) fn err(context: &str) -> impl Fn(candle::Error) -> ModelError + '_ {
    move |e| ModelError::Failed(format!("{context}: {e}"))
}

/// Token rows of the last `acoustic_delay + 2` steps (all codebooks, generated first).
#[derive(Clone, Debug)]
struct History {
    rows: Vec<Vec<u32>>,
}

impl History {
    fn new(delay: usize, codebooks: usize) -> Self {
        Self {
            rows: vec![vec![UNSET; codebooks]; delay + 2],
        }
    }
    fn row(&self, step: usize) -> &[u32] {
        &self.rows[step % self.rows.len()]
    }
    fn row_mut(&mut self, step: usize) -> &mut Vec<u32> {
        let n = self.rows.len();
        &mut self.rows[step % n]
    }
}

/// Time spent per phase of the step, summed since the last [`MoshiModel::take_phase_times`].
#[derive(Clone, Copy, Debug, Default)]
pub struct PhaseTimes {
    /// Steps counted.
    pub steps: u32,
    /// Mimi encoding (all sessions).
    pub encode: std::time::Duration,
    /// Temporal transformer and text sampling.
    pub lm: std::time::Duration,
    /// Depth transformer and audio sampling.
    pub depformer: std::time::Duration,
    /// Mimi decoding, text and speaking state.
    pub decode: std::time::Duration,
}

/// One active slot's tokens from a batched step: (text token, audio tokens), or its error.
type SlotTokens = Result<(u32, Vec<u32>), ModelError>;

/// One session's state.
struct Slot {
    history: History,
    step: usize,
    last_text: u32,
    text_sampler: Sampler,
    audio_sampler: Sampler,
    speaking: bool,
    quiet_frames: u32,
    pending_bytes: Vec<u8>,
}

/// The Moshi plugin.
pub struct MoshiModel {
    info: ModelInfo,
    cfg: MoshiConfig,
    device: Device,
    lm: LmModel,
    depformer: Depformer,
    mimi: BatchedMimi,
    mimi_decode: MimiDecode,
    text: TextDecoder,
    slots: Vec<Option<Slot>>,
    seed: u64,
    opened: u64,
    times: PhaseTimes,
}

impl MoshiModel {
    /// Loads from a Kyutai candle release directory (or one written by
    /// [`tiny::write_tiny_dir`]). Never downloads anything.
    pub fn load(dir: &Path, opts: &MoshiOptions) -> Result<Self, ModelError> {
        let files = ModelFiles::find(dir)?;
        let cfg = files.config(&opts.preset)?;
        let device = opts.device.open()?;
        let tok = std::fs::read(&files.tokenizer)
            .map_err(|e| ModelError::Failed(format!("{}: {e}", files.tokenizer.display())))?;
        let text = TextDecoder::parse(&tok).map_err(|e| {
            ModelError::Failed(format!(
                "{}: not a SentencePiece model: {e}",
                files.tokenizer.display()
            ))
        })?;
        if text.len() < cfg.lm.text_out_vocab_size {
            return Err(ModelError::Failed(format!(
                "{} has {} pieces but the model's text vocabulary is {}: tokenizer and \
                 model do not match",
                files.tokenizer.display(),
                text.len(),
                cfg.lm.text_out_vocab_size
            )));
        }
        let lm_dtype = lm_dtype(&device);
        let quantized = files.lm.extension().is_some_and(|e| e == "gguf");
        let unreadable = |what: &Path| {
            let name = what.display().to_string();
            move |e: candle::Error| ModelError::Failed(format!("cannot read {name}: {e}"))
        };
        let lm_vb = if quantized {
            let vb = candle_transformers_gguf(&files.lm, &device).map_err(unreadable(&files.lm))?;
            MaybeQuantizedVarBuilder::Quantized(vb)
        } else {
            // SAFETY: the weights file is mapped read-only; Duet never writes it, and the
            // operator must not modify it while the server runs (as with any mmaped model).
            let vb = unsafe {
                candle_nn::VarBuilder::from_mmaped_safetensors(&[&files.lm], lm_dtype, &device)
            }
            .map_err(unreadable(&files.lm))?;
            MaybeQuantizedVarBuilder::Real(vb)
        };
        // SAFETY: as above, a read-only mapping of a file nobody writes.
        let mimi_vb = unsafe {
            candle_nn::VarBuilder::from_mmaped_safetensors(&[&files.mimi], DType::F32, &device)
        }
        .map_err(unreadable(&files.mimi))?;
        let ctx = |f: &Path| {
            let extra = match &files.config {
                Some(_) => format!(" in {}", config::CONFIG_FILE),
                None => format!(" of preset {}", opts.preset),
            };
            format!("{} does not match the architecture{extra}", f.display())
        };
        Self::build_named(
            cfg,
            (lm_vb, &ctx(&files.lm)),
            (mimi_vb, &ctx(&files.mimi)),
            text,
            device,
            opts,
        )
    }

    /// Builds from any var builders (the loader above, or generated weights).
    pub fn build(
        cfg: MoshiConfig,
        lm_vb: MaybeQuantizedVarBuilder,
        mimi_vb: candle_nn::VarBuilder,
        text: TextDecoder,
        device: Device,
        opts: &MoshiOptions,
    ) -> Result<Self, ModelError> {
        Self::build_named(
            cfg,
            (lm_vb, "language model"),
            (mimi_vb, "Mimi codec"),
            text,
            device,
            opts,
        )
    }

    fn build_named(
        cfg: MoshiConfig,
        (lm_vb, lm_name): (MaybeQuantizedVarBuilder, &str),
        (mimi_vb, mimi_name): (candle_nn::VarBuilder, &str),
        text: TextDecoder,
        device: Device,
        opts: &MoshiOptions,
    ) -> Result<Self, ModelError> {
        cfg.validate()?;
        if opts.max_slots == 0 {
            return Err(ModelError::Failed("max_slots must be at least 1".into()));
        }
        let (lm, depformer) = build_lm(&cfg, opts.max_slots, opts.per_session_depformer, lm_vb)
            .map_err(err(lm_name))?;
        let mimi =
            BatchedMimi::new(opts.max_slots, &cfg.mimi, mimi_vb.clone()).map_err(err(mimi_name))?;
        let mimi_decode = if opts.batched_decode.unwrap_or(!device.is_cpu()) {
            MimiDecode::Batched
        } else {
            let template =
                moshi::mimi::Mimi::new(cfg.mimi.clone(), mimi_vb).map_err(err(mimi_name))?;
            MimiDecode::PerSession {
                template: Box::new(template),
                slots: (0..opts.max_slots).map(|_| None).collect(),
            }
        };
        let seed = opts.seed.unwrap_or_else(rand::random);
        Ok(Self {
            info: ModelInfo {
                name: "moshi".into(),
                frame_samples: FRAME_SAMPLES,
                max_slots: opts.max_slots,
                autonomous: true,
            },
            cfg,
            device,
            lm,
            depformer,
            mimi,
            mimi_decode,
            text,
            slots: (0..opts.max_slots).map(|_| None).collect(),
            seed,
            opened: 0,
            times: PhaseTimes::default(),
        })
    }

    /// Per-phase time since the last call (for benchmarks).
    pub fn take_phase_times(&mut self) -> PhaseTimes {
        std::mem::take(&mut self.times)
    }

    /// The architecture in use.
    pub fn config(&self) -> &MoshiConfig {
        &self.cfg
    }

    fn listen_after_frames(&self) -> u32 {
        (self.cfg.generation.listen_after_ms / 80).max(1)
    }

    /// The batched part of a step: every slot with codes goes through the LM and the
    /// depformer together. Returns per active slot (text token, audio tokens).
    fn step_lm(&mut self, active: &[usize]) -> Result<Vec<SlotTokens>, candle::Error> {
        let g = &self.cfg.generation;
        let b = self.slots.len();
        let total = g.generated_audio_codebooks + g.input_audio_codebooks;
        let pad = self.lm.audio_pad_token();
        let mut mask = vec![false; b];
        let mut text_in = vec![g.text_start_token; b];
        let mut audio_in = vec![vec![pad; b]; total];
        for &s in active {
            let slot = self.slots[s].as_ref().expect("active slot is open");
            mask[s] = true;
            text_in[s] = slot.last_text;
            for (cb, col) in audio_in.iter_mut().enumerate() {
                col[s] = input_token(slot, cb, g.generated_audio_codebooks, g.acoustic_delay, pad);
            }
        }
        let t_lm = std::time::Instant::now();
        let dev = &self.device;
        let text = Tensor::from_vec(text_in, (b, 1), dev)?;
        let audio = audio_in
            .into_iter()
            .map(|col| Tensor::from_vec(col, (b, 1), dev).map(Some))
            .collect::<candle::Result<Vec<_>>>()?;
        let mask = StreamMask::new(mask, dev)?;
        let (logits, ys) = self.lm.forward(Some(text), audio, &mask)?;
        let idx = Tensor::from_vec(
            active.iter().map(|&s| s as u32).collect(),
            active.len(),
            dev,
        )?;
        let ys = ys.index_select(&idx, 0)?;
        let text_logits = logits
            .index_select(&idx, 0)?
            .i((.., 0))?
            .to_dtype(DType::F32)?
            .to_vec2::<f32>()?;
        let mut results: Vec<SlotTokens> = Vec::with_capacity(active.len());
        let mut text_tokens = Vec::with_capacity(active.len());
        for (r, &s) in active.iter().enumerate() {
            let slot = self.slots[s].as_mut().expect("active slot is open");
            match slot.text_sampler.sample(&text_logits[r]) {
                Some(t) => {
                    text_tokens.push(t);
                    results.push(Ok((t, Vec::new())));
                }
                None => {
                    text_tokens.push(g.text_pad_token);
                    results.push(Err(ModelError::Failed("text logits are not finite".into())));
                }
            }
        }
        let delay = g.acoustic_delay;
        let pre_delay: Vec<bool> = active
            .iter()
            .map(|&s| self.slots[s].as_ref().is_some_and(|sl| sl.step < delay))
            .collect();
        let feed = |r: usize, slice: usize, t: u32| if pre_delay[r] && slice > 0 { pad } else { t };
        let slots = &mut self.slots;
        let mut failed = vec![false; active.len()];
        let mut sample = |r: usize, _slice: usize, logits: &[f32]| -> candle::Result<u32> {
            let slot = slots[active[r]].as_mut().expect("active slot is open");
            Ok(slot.audio_sampler.sample(logits).unwrap_or_else(|| {
                failed[r] = true;
                0
            }))
        };
        let t_dep = std::time::Instant::now();
        self.times.lm += t_dep - t_lm;
        let audio = match &mut self.depformer {
            Depformer::Batched(d) => d.sample(&ys, &text_tokens, &feed, &mut sample)?,
            Depformer::PerSession(d) => {
                let a = g.audio;
                let mut all = Vec::with_capacity(active.len());
                for (r, &t) in text_tokens.iter().enumerate() {
                    let sampling = if a.temperature <= 0.0 {
                        candle_transformers::generation::Sampling::ArgMax
                    } else {
                        candle_transformers::generation::Sampling::TopK {
                            k: a.top_k.max(1),
                            temperature: f64::from(a.temperature),
                        }
                    };
                    let mut lp = candle_transformers::generation::LogitsProcessor::from_sampling(
                        self.seed ^ r as u64,
                        sampling,
                    );
                    let forced: Vec<Option<u32>> = if pre_delay[r] {
                        (0..g.generated_audio_codebooks)
                            .map(|c| (c > 0).then_some(pad))
                            .collect()
                    } else {
                        Vec::new()
                    };
                    all.push(d.sample(&ys.narrow(0, r, 1)?, Some(t), &forced, &mut lp)?);
                }
                all
            }
        };
        for (r, toks) in audio.into_iter().enumerate() {
            if failed[r] {
                results[r] = Err(ModelError::Failed("audio logits are not finite".into()));
            } else if let Ok((_, a)) = &mut results[r] {
                *a = toks;
            }
        }
        self.times.depformer += t_dep.elapsed();
        Ok(results)
    }

    /// Writes a slot's new tokens, advances it, and returns the generated codes that are
    /// now due for decoding (none before the acoustic delay or while any is padding).
    fn advance_slot(&mut self, s: usize, text_token: u32, audio: &[u32]) -> Option<Vec<u32>> {
        let g = &self.cfg.generation;
        let pad = self.lm.audio_pad_token();
        let slot = self.slots[s].as_mut().expect("open slot");
        let step = slot.step;
        for (c, &t) in audio.iter().enumerate() {
            let at = if c == 0 {
                step
            } else {
                step.saturating_sub(g.acoustic_delay)
            };
            slot.history.row_mut(at)[c] = t;
        }
        slot.last_text = text_token;
        slot.step += 1;
        if slot.step <= g.acoustic_delay {
            return None;
        }
        let row =
            &slot.history.row(slot.step - g.acoustic_delay - 1)[..g.generated_audio_codebooks];
        row.iter().all(|&t| t < pad).then(|| row.to_vec())
    }

    /// A slot's output for this step: its audio, the text of its token, whether it speaks.
    fn emit_slot(&mut self, s: usize, text_token: u32, pcm: Vec<f32>) -> StepOutput {
        let listen_after = self.listen_after_frames();
        let g = &self.cfg.generation;
        let slot = self.slots[s].as_mut().expect("open slot");
        let mut text = String::new();
        let word = text_token != g.text_pad_token
            && text_token != g.text_eop_token
            && text_token != g.text_start_token;
        if word {
            self.text
                .push(text_token, &mut slot.pending_bytes, &mut text);
        }
        let loud = duet_media::pcm::rms_dbfs(&pcm) >= g.voice_dbfs;
        if word || loud {
            slot.speaking = true;
            slot.quiet_frames = 0;
        } else if slot.speaking {
            slot.quiet_frames += 1;
            if slot.quiet_frames >= listen_after {
                slot.speaking = false;
            }
        }
        StepOutput {
            audio: pcm,
            text,
            end_of_turn: false,
            speaking: slot.speaking,
        }
    }

    /// Mimi-encodes every stepping slot's frame in one pass and stores the user codes.
    /// `false` when Mimi has no complete frame yet (then nobody steps the LM).
    fn encode(&mut self, stepping: &[(usize, &[f32])]) -> candle::Result<bool> {
        let g = &self.cfg.generation;
        let b = self.slots.len();
        let mut pcm = vec![0f32; b * FRAME_SAMPLES];
        let mut mask = vec![false; b];
        for &(s, frame) in stepping {
            pcm[s * FRAME_SAMPLES..(s + 1) * FRAME_SAMPLES].copy_from_slice(frame);
            mask[s] = true;
        }
        let x = Tensor::from_vec(pcm, (b, 1, FRAME_SAMPLES), &self.device)?;
        let mask = StreamMask::new(mask, &self.device)?;
        let Some(codes) = self.mimi.encode_step(&x, &mask)? else {
            return Ok(false);
        };
        let (_, n_q, t) = codes.dims3()?;
        if t != 1 || n_q < g.input_audio_codebooks {
            candle::bail!("Mimi produced {n_q}x{t} codes for one frame");
        }
        let codes = codes
            .i((.., ..g.input_audio_codebooks, 0))?
            .to_vec2::<u32>()?;
        for &(s, _) in stepping {
            let slot = self.slots[s].as_mut().expect("open slot");
            let row = slot.history.row_mut(slot.step);
            row.fill(UNSET);
            row[g.generated_audio_codebooks..].copy_from_slice(&codes[s]);
        }
        Ok(true)
    }

    /// Mimi-decodes the due codes of every slot in one pass; slots without codes keep their
    /// decoder state and get silence.
    fn decode(&mut self, due: &[(usize, Vec<u32>)]) -> candle::Result<Vec<Vec<f32>>> {
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let n = self.cfg.generation.generated_audio_codebooks;
        if let MimiDecode::PerSession { slots, .. } = &mut self.mimi_decode {
            let mut out = Vec::with_capacity(due.len());
            for (s, c) in due {
                let mimi = slots[*s].as_mut().expect("open slot has a decoder");
                let codes = Tensor::from_vec(c.clone(), (1, n, 1), &self.device)?;
                let pcm = mimi.decode_step(&codes.into(), &().into())?;
                let mut v = match pcm.as_option() {
                    Some(p) => p.flatten_all()?.to_vec1::<f32>()?,
                    None => Vec::new(),
                };
                v.resize(FRAME_SAMPLES, 0.0);
                out.push(v);
            }
            return Ok(out);
        }
        let b = self.slots.len();
        let mut codes = vec![0u32; b * n];
        let mut mask = vec![false; b];
        for (s, c) in due {
            codes[s * n..(s + 1) * n].copy_from_slice(c);
            mask[*s] = true;
        }
        let codes = Tensor::from_vec(codes, (b, n, 1), &self.device)?;
        let mask = StreamMask::new(mask, &self.device)?;
        let mut out = Vec::with_capacity(due.len());
        match self.mimi.decode_step(&codes, &mask)? {
            None => out.resize(due.len(), vec![0f32; FRAME_SAMPLES]),
            Some(pcm) => {
                let pcm = pcm.i((.., 0))?.to_vec2::<f32>()?;
                for (s, _) in due {
                    let mut v = pcm[*s].clone();
                    v.resize(FRAME_SAMPLES, 0.0);
                    out.push(v);
                }
            }
        }
        Ok(out)
    }

    /// One tick for the slots in `stepping`; one result per entry, in order.
    fn step_slots(&mut self, stepping: &[(usize, &[f32])]) -> Vec<Result<StepOutput, ModelError>> {
        let n = stepping.len();
        let fail_all = |what: &str, e: candle::Error| -> Vec<Result<StepOutput, ModelError>> {
            let msg = format!("{what}: {e}");
            (0..n)
                .map(|_| Err(ModelError::Failed(msg.clone())))
                .collect()
        };
        let t0 = std::time::Instant::now();
        self.times.steps += 1;
        let encoded = self.encode(stepping);
        self.times.encode += t0.elapsed();
        match encoded {
            Err(e) => return fail_all("Mimi encode", e),
            Ok(false) => {
                return stepping
                    .iter()
                    .map(|&(s, _)| {
                        Ok(StepOutput {
                            audio: vec![0.0; FRAME_SAMPLES],
                            speaking: self.slots[s].as_ref().is_some_and(|sl| sl.speaking),
                            ..StepOutput::default()
                        })
                    })
                    .collect()
            }
            Ok(true) => {}
        }
        let active: Vec<usize> = stepping.iter().map(|&(s, _)| s).collect();
        let tokens = match self.step_lm(&active) {
            Ok(t) => t,
            Err(e) => return fail_all("model step", e),
        };
        let t_decode = std::time::Instant::now();
        let mut due = Vec::new();
        for (&s, t) in active.iter().zip(&tokens) {
            if let Ok((text, audio)) = t {
                if let Some(codes) = self.advance_slot(s, *text, audio) {
                    due.push((s, codes));
                }
            }
        }
        let mut pcm = match self.decode(&due) {
            Ok(p) => due
                .iter()
                .map(|d| d.0)
                .zip(p)
                .collect::<Vec<_>>()
                .into_iter(),
            Err(e) => return fail_all("Mimi decode", e),
        }
        .peekable();
        let mut out = Vec::with_capacity(n);
        for (&s, t) in active.iter().zip(tokens) {
            out.push(t.map(|(text, _)| {
                let audio = match pcm.peek() {
                    Some((ds, _)) if *ds == s => pcm.next().map(|p| p.1).unwrap_or_default(),
                    _ => vec![0f32; FRAME_SAMPLES],
                };
                self.emit_slot(s, text, audio)
            }));
        }
        self.times.decode += t_decode.elapsed();
        out
    }
}

/// The token fed for codebook `cb` at the slot's current step (as upstream's
/// `lm_generate_multistream::State::step_`: first codebook of each stream from the
/// previous step, the others `acoustic_delay` further back; padding before that).
fn input_token(slot: &Slot, cb: usize, generated: usize, delay: usize, pad: u32) -> u32 {
    let step = slot.step;
    let t = if cb == 0 || cb == generated {
        if step == 0 {
            pad
        } else {
            slot.history.row(step - 1)[cb]
        }
    } else if step <= delay {
        pad
    } else {
        slot.history.row(step - delay - 1)[cb]
    };
    if t == UNSET {
        pad
    } else {
        t
    }
}

fn lm_dtype(device: &Device) -> DType {
    if device.is_cpu() {
        DType::F32
    } else {
        DType::BF16
    }
}

fn candle_transformers_gguf(
    path: &Path,
    device: &Device,
) -> candle::Result<candle_transformers::quantized_var_builder::VarBuilder> {
    candle_transformers::quantized_var_builder::VarBuilder::from_gguf(path, device)
}

/// The temporal transformer (batched over `slots`) and the batched depformer, from the
/// same tensor names as upstream's `LmModel::new`.
fn build_lm(
    cfg: &MoshiConfig,
    slots: usize,
    per_session_depformer: bool,
    vb: MaybeQuantizedVarBuilder,
) -> candle::Result<(LmModel, Depformer)> {
    let mut lm_cfg = cfg.lm.clone();
    let dep_cfg = lm_cfg.depformer.take().expect("validated");
    let (text_vocab, audio_vocab, dim) = (
        lm_cfg.text_in_vocab_size,
        lm_cfg.audio_vocab_size,
        lm_cfg.transformer.d_model,
    );
    let vb_d = vb.pp("depformer");
    let depformer = if per_session_depformer {
        let d = moshi::lm::DepFormer::new(text_vocab, audio_vocab, dim, &dep_cfg, vb_d)?;
        Depformer::PerSession(d)
    } else {
        let d = BatchedDepformer::new(text_vocab, audio_vocab, dim, &dep_cfg, vb_d)?;
        Depformer::Batched(d)
    };
    let lm = LmModel::batched(slots, &lm_cfg, vb)?;
    Ok((lm, depformer))
}

/// How audio leaves Mimi.
///
/// Batched decoding needs batched transposed convolutions, and candle 0.9.2's CPU matmul
/// folds a broadcast batch wrongly when the other side is a transposed view
/// (huggingface/candle#3744): rows of a batch come out wrong. So on the CPU each session
/// decodes through its own single-stream Mimi (upstream's, weights shared); the CUDA path
/// batches (cuBLAS' strided-batched GEMM takes the strides as given), and `moshi_bench
/// --check` compares the two on the device it runs on.
enum MimiDecode {
    Batched,
    PerSession {
        template: Box<moshi::mimi::Mimi>,
        slots: Vec<Option<moshi::mimi::Mimi>>,
    },
}

/// How audio tokens are made: batched across sessions (production) or upstream's
/// one-session depformer per session (benchmark comparison).
enum Depformer {
    Batched(BatchedDepformer),
    PerSession(moshi::lm::DepFormer),
}

impl DuplexModel for MoshiModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn warmup(&mut self) -> Result<(), ModelError> {
        let slot = self.open_slot()?;
        let silence = vec![0f32; FRAME_SAMPLES];
        let mut out = Vec::new();
        for _ in 0..(self.cfg.generation.acoustic_delay + 2) {
            out.clear();
            self.step(
                &[StepInput {
                    slot,
                    pcm: &silence,
                }],
                &mut out,
            );
            if let Some(Err(e)) = out.pop() {
                self.close_slot(slot);
                return Err(e);
            }
        }
        self.close_slot(slot);
        Ok(())
    }

    fn open_slot(&mut self) -> Result<SlotId, ModelError> {
        let s = self
            .slots
            .iter()
            .position(Option::is_none)
            .ok_or(ModelError::SlotsExhausted(self.slots.len()))?;
        self.lm
            .reset_batch_idx(s, self.slots.len())
            .map_err(err("reset slot"))?;
        let g = &self.cfg.generation;
        let n = self.opened;
        self.opened += 1;
        let seed = self.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.mimi.reset_slot(s).map_err(err("reset slot"))?;
        if let MimiDecode::PerSession { template, slots } = &mut self.mimi_decode {
            let mut m = (**template).clone();
            m.reset_state();
            slots[s] = Some(m);
        }
        self.slots[s] = Some(Slot {
            history: History::new(
                g.acoustic_delay,
                g.generated_audio_codebooks + g.input_audio_codebooks,
            ),
            step: 0,
            last_text: g.text_start_token,
            text_sampler: Sampler::new(g.text, seed),
            audio_sampler: Sampler::new(g.audio, seed ^ 0xA5A5_A5A5),
            speaking: false,
            quiet_frames: 0,
            pending_bytes: Vec::new(),
        });
        Ok(s)
    }

    fn close_slot(&mut self, slot: SlotId) {
        if let Some(s) = self.slots.get_mut(slot) {
            *s = None;
        }
        if let MimiDecode::PerSession { slots, .. } = &mut self.mimi_decode {
            if let Some(m) = slots.get_mut(slot) {
                *m = None;
            }
        }
    }

    fn request(&mut self, slot: SlotId, _request: Request) -> Result<(), ModelError> {
        // Moshi decides when to speak on its own; the session fences cancelled output by
        // epoch and opens responses from `StepOutput::speaking`.
        match self.slots.get(slot) {
            Some(Some(_)) => Ok(()),
            _ => Err(ModelError::UnknownSlot(slot)),
        }
    }

    fn step(&mut self, batch: &[StepInput<'_>], out: &mut Vec<Result<StepOutput, ModelError>>) {
        // Checks first; a bad input fails its own session only.
        let mut pre: Vec<Option<ModelError>> = Vec::with_capacity(batch.len());
        let mut stepping: Vec<(usize, &[f32])> = Vec::with_capacity(batch.len());
        for inp in batch {
            let e = if !matches!(self.slots.get(inp.slot), Some(Some(_))) {
                Some(ModelError::UnknownSlot(inp.slot))
            } else if inp.pcm.len() != FRAME_SAMPLES {
                Some(ModelError::BadFrame {
                    got: inp.pcm.len(),
                    expected: FRAME_SAMPLES,
                })
            } else if stepping.iter().any(|&(s, _)| s == inp.slot) {
                Some(ModelError::Failed(format!(
                    "slot {} twice in one step",
                    inp.slot
                )))
            } else {
                stepping.push((inp.slot, inp.pcm));
                None
            };
            pre.push(e);
        }
        let mut results = if stepping.is_empty() {
            Vec::new()
        } else {
            self.step_slots(&stepping)
        }
        .into_iter();
        for e in pre {
            out.push(match e {
                Some(e) => Err(e),
                None => results.next().unwrap_or_else(|| {
                    Err(ModelError::Failed("model step produced no output".into()))
                }),
            });
        }
    }
}
