//! Moshi (Kyutai's full-duplex speech model) on candle.
//!
//! One [`MoshiModel`] owns the weights on one device and steps every session of that device
//! together, once per 80 ms frame:
//!
//! 1. **batched**: Mimi encodes every caller's 1920 samples to `input_audio_codebooks`
//!    tokens in one pass (`mimi::BatchedMimi`: per-slot streaming state, every part reset
//!    when a slot is reused);
//! 2. **batched**: the 7B temporal transformer runs once for all slots (`LmModel::batched`
//!    with a slot mask, a scattered KV cache per slot, `reset_batch_idx` on reuse);
//! 3. the text token of every active session is sampled from one host copy of the logits;
//! 4. **batched**: the depth transformer makes the audio tokens of every active session
//!    together, one pass per codebook ([`depformer::BatchedDepformer`]);
//! 5. Mimi decodes the (delayed) audio tokens to 1920 samples: batched on CUDA, per session
//!    on the CPU (each session's own single-stream decoder, weights shared: candle's CPU
//!    matmul breaks the batched transposed convolutions); the text token becomes transcript
//!    text.
//!
//! Each session's state is small: its Mimi state, a ring of `acoustic_delay + 2` token rows,
//! two seeded samplers and its KV-cache slot.

pub mod config;
mod depformer;
/// Header checks run on weights files before candle opens them, so that a file lying about
/// its lengths is an error instead of an allocation that aborts the process.
pub mod filecheck;
pub(crate) mod mimi;
mod sampler;
pub(crate) mod spm;
mod step;
pub mod tiny;

#[cfg(test)]
mod tests;

use std::path::Path;

use candle::{DType, Device};
use moshi::lm::LmModel;
use moshi::nn::MaybeQuantizedVarBuilder;

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

/// Time spent per phase of the step, summed since the last [`MoshiModel::take_phase_times`]
/// (zero unless a clock was given with [`MoshiModel::set_clock`]).
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
    clock: Option<Clock>,
}

/// Monotonic time since some origin, supplied by the caller (the model stays free of I/O
/// and clocks; benchmarks pass one in).
pub type Clock = Box<dyn Fn() -> std::time::Duration + Send>;

impl MoshiModel {
    /// Loads from a Kyutai candle release directory (or one written by
    /// [`tiny::write_tiny_dir`]). Never downloads anything.
    pub fn load(dir: &Path, opts: &MoshiOptions) -> Result<Self, ModelError> {
        let files = ModelFiles::find(dir)?;
        let cfg = files.config(&opts.preset)?;
        let r = open_release(
            &files,
            config::CONFIG_FILE,
            &cfg.lm,
            &opts.device,
            &opts.preset,
        )?;
        Self::build_named(
            cfg,
            (r.lm.0, &r.lm.1),
            (r.mimi.0, &r.mimi.1),
            r.text,
            r.device,
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
                tools: false,
                reads_text: false,
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
            clock: None,
        })
    }

    /// Measures the step's phases with `clock` (see [`PhaseTimes`]).
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = Some(clock);
    }

    /// Now on the given clock; zero without one.
    fn now(&self) -> std::time::Duration {
        self.clock
            .as_ref()
            .map_or(std::time::Duration::ZERO, |c| c())
    }

    /// Per-phase time since the last call.
    pub fn take_phase_times(&mut self) -> PhaseTimes {
        std::mem::take(&mut self.times)
    }

    /// The architecture in use.
    pub fn config(&self) -> &MoshiConfig {
        &self.cfg
    }
}

/// The LM's var builder and the error context to give its constructor (what to name when
/// the weights do not fit the architecture).
pub(crate) type LmWeights = (MaybeQuantizedVarBuilder<'static>, String);
/// Mimi's var builder and its error context, as [`LmWeights`].
pub(crate) type MimiWeights = (candle_nn::VarBuilder<'static>, String);

/// What a Kyutai model's `load` opens: its device, text tokenizer and weights.
pub(crate) struct OpenRelease {
    pub device: Device,
    pub text: TextDecoder,
    pub lm: LmWeights,
    pub mimi: MimiWeights,
}

/// Opens `device` and reads the tokenizer (checked against `lm`'s text vocabulary) and the
/// weights of `files`; `config_file` is the name of the directory's config file, named in
/// errors when the directory has one.
pub(crate) fn open_release(
    files: &ModelFiles,
    config_file: &str,
    lm: &moshi::lm::Config,
    device: &DeviceSpec,
    preset: &str,
) -> Result<OpenRelease, ModelError> {
    let device = device.open()?;
    let text = load_tokenizer(&files.tokenizer, lm.text_out_vocab_size)?;
    let config_file = files.config.as_ref().map(|_| config_file);
    let (lm, mimi) = release_weights(&files.lm, &files.mimi, &device, config_file, preset)?;
    Ok(OpenRelease {
        device,
        text,
        lm,
        mimi,
    })
}

/// A Kyutai release's two weights files mapped on `device`: the LM ([`lm_var_builder`])
/// and Mimi (f32). Each comes with the context that names its file and where the
/// architecture came from: the directory's `config_file` when it has one, else the preset.
fn release_weights(
    lm: &Path,
    mimi: &Path,
    device: &Device,
    config_file: Option<&str>,
    preset: &str,
) -> Result<(LmWeights, MimiWeights), ModelError> {
    let lm_vb = lm_var_builder(lm, device)?;
    let mimi_vb = mapped_safetensors(mimi, DType::F32, device)?;
    let ctx = |file: &Path| {
        let extra = match config_file {
            Some(name) => format!(" in {name}"),
            None => format!(" of preset {preset}"),
        };
        format!("{} does not match the architecture{extra}", file.display())
    };
    Ok(((lm_vb, ctx(lm)), (mimi_vb, ctx(mimi))))
}

/// Reads the SentencePiece tokenizer, refusing one with fewer pieces than the model's text
/// vocabulary (its tokens would have no text).
pub(crate) fn load_tokenizer(path: &Path, text_vocab: usize) -> Result<TextDecoder, ModelError> {
    let tok =
        std::fs::read(path).map_err(|e| ModelError::Failed(format!("{}: {e}", path.display())))?;
    let text = TextDecoder::parse(&tok).map_err(|e| {
        ModelError::Failed(format!(
            "{}: not a SentencePiece model: {e}",
            path.display()
        ))
    })?;
    if text.len() < text_vocab {
        return Err(ModelError::Failed(format!(
            "{} has {} pieces but the model's text vocabulary is {text_vocab}: tokenizer and \
             model do not match",
            path.display(),
            text.len(),
        )));
    }
    Ok(text)
}

/// The LM's weights, quantized from a `.gguf` file or mapped from safetensors, each header
/// checked first ([`filecheck`]).
fn lm_var_builder(
    path: &Path,
    device: &Device,
) -> Result<MaybeQuantizedVarBuilder<'static>, ModelError> {
    if path.extension().is_some_and(|e| e == "gguf") {
        filecheck::check_gguf(path)?;
        let vb = candle_transformers_gguf(path, device).map_err(unreadable(path))?;
        return Ok(MaybeQuantizedVarBuilder::Quantized(vb));
    }
    let vb = mapped_safetensors(path, lm_dtype(device), device)?;
    Ok(MaybeQuantizedVarBuilder::Real(vb))
}

/// A safetensors weights file mapped as `dtype`, its header checked first ([`filecheck`]).
fn mapped_safetensors(
    path: &Path,
    dtype: DType,
    device: &Device,
) -> Result<candle_nn::VarBuilder<'static>, ModelError> {
    filecheck::check_safetensors(path)?;
    // SAFETY: the weights file is mapped read-only; Duet never writes it, and the operator
    // must not modify it while the server runs (as with any mmaped model).
    unsafe { candle_nn::VarBuilder::from_mmaped_safetensors(&[path], dtype, device) }
        .map_err(unreadable(path))
}

/// Maps candle's error on reading a weights file to one that names the file.
pub(crate) fn unreadable(path: &Path) -> impl Fn(candle::Error) -> ModelError {
    let name = path.display().to_string();
    move |e| ModelError::Failed(format!("cannot read {name}: {e}"))
}

/// The LM's dtype: bf16 on a GPU (as the release), f32 on the CPU.
pub(crate) fn lm_dtype(device: &Device) -> DType {
    if device.is_cpu() {
        DType::F32
    } else {
        DType::BF16
    }
}

/// Opens a GGUF weights file. candle's reader trusts the header (a zero alignment divides by
/// zero, a corrupt length overflows a capacity): its panics become an error naming the
/// problem. (A header that asks for a huge allocation would abort the process, which no
/// `catch_unwind` stops: [`filecheck::check_gguf`] refuses such headers before this runs.)
fn candle_transformers_gguf(
    path: &Path,
    device: &Device,
) -> candle::Result<candle_transformers::quantized_var_builder::VarBuilder> {
    let read = std::panic::AssertUnwindSafe(|| {
        candle_transformers::quantized_var_builder::VarBuilder::from_gguf(path, device)
    });
    std::panic::catch_unwind(read).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(candle::Error::Msg(format!("malformed GGUF file: {why}")))
    })
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
        let s = crate::transcribe::free_slot(&self.slots)?;
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
        crate::transcribe::clear_slot(&mut self.slots, slot);
        if let MimiDecode::PerSession { slots, .. } = &mut self.mimi_decode {
            crate::transcribe::clear_slot(slots, slot);
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
