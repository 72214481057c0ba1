//! Models without downloads: a recording `VarBuilder` backend builds Moshi through the
//! production constructors, so the constructors themselves are the schema.
//!
//! * [`write_tiny_dir`]: a tiny Moshi ([`TINY_TOML`]: small dimensions, the real 24 kHz /
//!   1920-sample framing) with seeded weights, saved with the release's file names, so the
//!   production loader ([`super::MoshiModel::load`]) reads it like a real release.
//! * [`random_model`]: any architecture (e.g. full-size Moshiko) with random weights made
//!   directly on the device, for benchmarks. No file involved.
//!
//! The recorder and the file writers are shared with `kyutai_stt::tiny`, whose model is
//! built from the same upstream modules.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use candle::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::VarBuilder;
use moshi::nn::MaybeQuantizedVarBuilder;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::config::{self, MoshiConfig};
use super::{build_lm, err, spm, MoshiModel, MoshiOptions, TextDecoder};
use crate::ModelError;

/// The tiny architecture (also written as `duet-moshi.toml` in a tiny directory).
pub const TINY_TOML: &str = include_str!("tiny.toml");

/// The tiny configuration.
pub fn tiny_config() -> MoshiConfig {
    let base = MoshiConfig::preset("moshiko").expect("built-in preset");
    MoshiConfig::from_toml(TINY_TOML, base).expect("built-in tiny config is valid")
}

/// How a recorder fills the tensors it is asked for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fill {
    /// Values from a generator seeded by (seed, tensor name): reproducible, CPU.
    Seeded(u64),
    /// `randn` on the device (fast for billions of parameters; not reproducible).
    Device,
    /// A broadcast zero: names and shapes only, nothing allocated.
    Shape,
}

/// Tensors by name.
pub(crate) type Tensors = HashMap<String, Tensor>;

/// A `SimpleBackend` that invents every tensor it is asked for and remembers it.
pub(crate) struct Recorder {
    fill: Fill,
    tensors: Arc<Mutex<Tensors>>,
}

impl Recorder {
    /// A recorder and a handle on what it records.
    pub(crate) fn new(fill: Fill) -> (Self, Arc<Mutex<Tensors>>) {
        let tensors = Arc::new(Mutex::new(HashMap::new()));
        let rec = Self {
            fill,
            tensors: tensors.clone(),
        };
        (rec, tensors)
    }

    fn make(
        &self,
        shape: &Shape,
        name: &str,
        dtype: DType,
        dev: &Device,
    ) -> candle::Result<Tensor> {
        if let Fill::Shape = self.fill {
            return Tensor::zeros((), dtype, dev)?.broadcast_as(shape);
        }
        let leaf = name.rsplit('.').next().unwrap_or(name);
        let is_norm = leaf == "alpha"
            || (leaf == "weight" && name.contains("norm"))
            || leaf == "cluster_usage"
            || leaf == "_initialized";
        if is_norm {
            return Tensor::ones(shape, dtype, dev);
        }
        if leaf == "bias" {
            return Tensor::zeros(shape, dtype, dev);
        }
        // Fan-in scaling keeps activations alive through the networks, so the caller's
        // audio changes Mimi's codes and the LM's tokens, and decoded audio is not silence.
        let std = match shape.dims() {
            _ if leaf == "embedding_sum" => 1.0,
            [_, rest @ ..] if !rest.is_empty() => {
                1.0 / (rest.iter().product::<usize>() as f32).sqrt()
            }
            _ => 0.02,
        };
        match self.fill {
            Fill::Shape => unreachable!("handled above"),
            Fill::Device => Tensor::randn(0f32, std, shape, dev)?.to_dtype(dtype),
            Fill::Seeded(seed) => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ fnv1a(name));
                let n = shape.elem_count();
                let v: Vec<f32> = (0..n).map(|_| normal(&mut rng) * std).collect();
                Tensor::from_vec(v, shape, dev)?.to_dtype(dtype)
            }
        }
    }
}

impl SimpleBackend for Recorder {
    fn get(
        &self,
        s: Shape,
        name: &str,
        _h: candle_nn::Init,
        dtype: DType,
        dev: &Device,
    ) -> candle::Result<Tensor> {
        let mut map = self.tensors.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = map.get(name) {
            if t.shape() != &s {
                candle::bail!(
                    "{name} asked for twice with shapes {:?} and {s:?}",
                    t.shape()
                );
            }
            return t.to_dtype(dtype);
        }
        let t = self.make(&s, name, dtype, dev)?;
        map.insert(name.to_string(), t.clone());
        Ok(t)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, _dev: &Device) -> candle::Result<Tensor> {
        let map = self.tensors.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(name) {
            Some(t) => t.to_dtype(dtype),
            None => candle::bail!("recorder: {name} was never created"),
        }
    }

    fn contains_tensor(&self, name: &str) -> bool {
        // Answer like an inference checkpoint: plain `weight` (no weight-norm `weight_g`,
        // `weight_v`), norms as `alpha`, no fused cross-attention projections.
        name.ends_with(".weight") && !name.ends_with("in_proj_weight")
            || name.ends_with("alpha")
            || self
                .tensors
                .lock()
                .map(|m| m.contains_key(name))
                .unwrap_or(false)
    }
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn normal(rng: &mut ChaCha8Rng) -> f32 {
    // Box-Muller; u1 in (0, 1].
    let u1 = 1.0 - rng.random::<f32>();
    let u2 = rng.random::<f32>();
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

/// What a recorder recorded.
pub(crate) fn drain(map: Arc<Mutex<Tensors>>) -> Tensors {
    std::mem::take(&mut *map.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Every (name, shape) upstream's `LmModel::new` and `Mimi::new` ask for, with values: the
/// tensors of the release's two files (the LM's as `lm_dtype`, Mimi's as f32).
pub(crate) fn record(
    lm_cfg: &moshi::lm::Config,
    mimi_cfg: &moshi::mimi::Config,
    fill: Fill,
    lm_dtype: DType,
    dev: &Device,
) -> candle::Result<(Tensors, Tensors)> {
    let (rec, lm) = Recorder::new(fill);
    let vb = VarBuilder::from_backend(Box::new(rec), lm_dtype, dev.clone());
    // Upstream's own constructor (with its depformer, if any) is the schema of the file.
    moshi::lm::LmModel::new(lm_cfg, MaybeQuantizedVarBuilder::Real(vb))?;
    let (rec, mimi) = Recorder::new(fill);
    let vb = VarBuilder::from_backend(Box::new(rec), DType::F32, dev.clone());
    moshi::mimi::Mimi::new(mimi_cfg.clone(), vb)?;
    Ok((drain(lm), drain(mimi)))
}

/// Var builders over recorders that make random tensors on `device` (the LM's in
/// [`super::lm_dtype`], Mimi's in f32), for models that need no file.
pub(crate) fn random_var_builders(device: &Device) -> (VarBuilder<'static>, VarBuilder<'static>) {
    let (rec, _) = Recorder::new(Fill::Device);
    let lm = VarBuilder::from_backend(Box::new(rec), super::lm_dtype(device), device.clone());
    let (rec, _) = Recorder::new(Fill::Device);
    let mimi = VarBuilder::from_backend(Box::new(rec), DType::F32, device.clone());
    (lm, mimi)
}

/// The tensor names and shapes Duet's loader asks for (batched LM, batched depformer,
/// batched Mimi), to compare with upstream's schema. Names are prefixed `lm:` / `mimi:`.
pub fn loader_schema(cfg: &MoshiConfig) -> Result<Vec<(String, Vec<usize>)>, ModelError> {
    let (rec, lm) = Recorder::new(Fill::Seeded(0));
    let vb = VarBuilder::from_backend(Box::new(rec), DType::F32, Device::Cpu);
    build_lm(cfg, 1, false, MaybeQuantizedVarBuilder::Real(vb)).map_err(err("schema"))?;
    let (rec, mimi) = Recorder::new(Fill::Seeded(0));
    let vb = VarBuilder::from_backend(Box::new(rec), DType::F32, Device::Cpu);
    super::mimi::BatchedMimi::new(1, &cfg.mimi, vb).map_err(err("schema"))?;
    Ok(named_shapes(&drain(lm), &drain(mimi)))
}

/// Upstream's schema of the two files for `cfg` (its `LmModel::new` and `Mimi::new`).
pub fn upstream_schema(cfg: &MoshiConfig) -> Result<Vec<(String, Vec<usize>)>, ModelError> {
    let (lm, mimi) = record(
        &cfg.lm,
        &cfg.mimi,
        Fill::Seeded(0),
        DType::F32,
        &Device::Cpu,
    )
    .map_err(err("schema"))?;
    Ok(named_shapes(&lm, &mimi))
}

/// Every (name, shape) of two files' tensors, prefixed `lm:` / `mimi:`, sorted.
pub(crate) fn named_shapes(lm: &Tensors, mimi: &Tensors) -> Vec<(String, Vec<usize>)> {
    let mut v: Vec<_> = lm
        .iter()
        .map(|(k, t)| (format!("lm:{k}"), t.dims().to_vec()))
        .chain(
            mimi.iter()
                .map(|(k, t)| (format!("mimi:{k}"), t.dims().to_vec())),
        )
        .collect();
    v.sort();
    v
}

/// Text pieces of a tiny model: control tokens at the ids Moshi uses for them, then words.
fn tiny_pieces(n: usize) -> Vec<String> {
    const WORDS: &[&str] = &[
        "hello", "there", "duet", "speaks", "and", "listens", "at", "once", "tiny", "random",
        "model", "voice", "yes", "no", "maybe", "okay",
    ];
    (0..n)
        .map(|i| match i {
            0 => "<eop>".to_string(),
            1 => "<s>".to_string(),
            2 => "</s>".to_string(),
            3 => "<pad>".to_string(),
            i => format!("\u{2581}{}", WORDS[i % WORDS.len()]),
        })
        .collect()
}

/// Creates `dir` and makes the tensors of a tiny model's two weights files (LM, Mimi) from
/// `seed`, in f32 on the CPU.
pub(crate) fn start_tiny_dir(
    dir: &Path,
    lm: &moshi::lm::Config,
    mimi: &moshi::mimi::Config,
    seed: u64,
) -> Result<(Tensors, Tensors), ModelError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| ModelError::Failed(format!("{}: {e}", dir.display())))?;
    record(lm, mimi, Fill::Seeded(seed), DType::F32, &Device::Cpu).map_err(err("generate"))
}

/// Writes a tiny Moshi directory: the LM as `model.safetensors` (bf16, like Kyutai's
/// release) or, with `q8`, as `model.q8.gguf` (matrices Q8_0, the rest f32, like the q8
/// release), the Mimi file (f32), a SentencePiece tokenizer and `duet-moshi.toml`, all from
/// `seed`.
pub fn write_tiny_dir(dir: &Path, seed: u64, q8: bool) -> Result<(), ModelError> {
    let io = |e: std::io::Error| ModelError::Failed(format!("{}: {e}", dir.display()));
    let cfg = tiny_config();
    let (lm, mimi) = start_tiny_dir(dir, &cfg.lm, &cfg.mimi, seed)?;
    // One LM file only, so the loader's choice is unambiguous.
    for stale in [config::LM_SAFETENSORS, config::LM_GGUF] {
        let _ = std::fs::remove_file(dir.join(stale));
    }
    if q8 {
        write_gguf(&lm, &dir.join(config::LM_GGUF))?;
    } else {
        save_bf16(&lm, &dir.join(config::LM_SAFETENSORS))?;
    }
    candle::safetensors::save(&mimi, dir.join(config::MIMI_FILE)).map_err(err("save"))?;
    let pieces = tiny_pieces(cfg.lm.text_out_vocab_size);
    std::fs::write(dir.join(config::TEXT_TOKENIZER), tokenizer(&pieces)).map_err(io)?;
    std::fs::write(dir.join(config::CONFIG_FILE), TINY_TOML).map_err(io)?;
    Ok(())
}

/// Saves `tensors` as bf16 safetensors (as Kyutai's releases store their LMs).
pub(crate) fn save_bf16(tensors: &Tensors, path: &Path) -> Result<(), ModelError> {
    let bf16 = tensors
        .iter()
        .map(|(k, t)| Ok((k.clone(), t.to_dtype(DType::BF16)?)))
        .collect::<candle::Result<Tensors>>()
        .map_err(err("convert"))?;
    candle::safetensors::save(&bf16, path).map_err(err("save"))
}

/// A SentencePiece model file of these pieces ([`spm::write_model`]).
pub(crate) fn tokenizer(pieces: &[String]) -> Vec<u8> {
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    spm::write_model(&refs)
}

/// The text decoder of these pieces, for models built without a directory.
pub(crate) fn text_decoder(pieces: &[String]) -> Result<TextDecoder, ModelError> {
    TextDecoder::parse(&tokenizer(pieces)).map_err(|e| ModelError::Failed(e.0))
}

/// GGUF with matrices whose rows fill whole Q8_0 blocks quantized, everything else f32.
fn write_gguf(tensors: &Tensors, path: &Path) -> Result<(), ModelError> {
    use candle::quantized::{gguf_file, GgmlDType, QTensor};
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    let block = GgmlDType::Q8_0.block_size();
    let q = names
        .iter()
        .map(|name| {
            let t = &tensors[*name];
            let quantize = t.rank() >= 2 && t.dims().last().is_some_and(|d| d % block == 0);
            let dtype = if quantize {
                GgmlDType::Q8_0
            } else {
                GgmlDType::F32
            };
            QTensor::quantize(t, dtype)
        })
        .collect::<candle::Result<Vec<_>>>()
        .map_err(err("quantize"))?;
    let entries: Vec<(&str, &QTensor)> = names.iter().map(|n| n.as_str()).zip(q.iter()).collect();
    let mut f = std::fs::File::create(path)
        .map_err(|e| ModelError::Failed(format!("{}: {e}", path.display())))?;
    gguf_file::write(&mut f, &[], &entries).map_err(err("write gguf"))
}

/// Any architecture with random weights made on the device (bf16 on GPU, f32 on CPU):
/// real timings and memory without a weights file.
pub fn random_model(cfg: MoshiConfig, opts: &MoshiOptions) -> Result<MoshiModel, ModelError> {
    let mut v = random_models(cfg, std::slice::from_ref(opts))?;
    Ok(v.remove(0))
}

/// Several models over one set of random weights (made once, shared), e.g. to compare
/// strategies. The device and dtype come from the first options.
pub fn random_models(
    cfg: MoshiConfig,
    opts: &[MoshiOptions],
) -> Result<Vec<MoshiModel>, ModelError> {
    let first = opts
        .first()
        .ok_or_else(|| ModelError::Failed("no options".into()))?;
    let device = first.device.open()?;
    let (lm_vb, mimi_vb) = random_var_builders(&device);
    let text = text_decoder(&tiny_pieces(cfg.lm.text_out_vocab_size))?;
    opts.iter()
        .map(|o| {
            MoshiModel::build(
                cfg.clone(),
                MaybeQuantizedVarBuilder::Real(lm_vb.clone()),
                mimi_vb.clone(),
                text.clone(),
                device.clone(),
                o,
            )
        })
        .collect()
}
