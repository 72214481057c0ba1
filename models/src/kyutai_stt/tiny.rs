//! Kyutai STT without downloads: a recording `VarBuilder` backend builds the model through
//! upstream's constructors, so the constructors themselves are the schema of the files.
//!
//! * [`write_tiny_dir`]: a tiny STT ([`TINY_TOML`]: small dimensions, the real 24 kHz /
//!   1920-sample framing and 6-step text delay) with seeded weights, saved with the
//!   release's file names, so the production loader ([`super::KyutaiStt::load`]) reads it
//!   like a real release.
//! * [`random_model`]: any architecture (e.g. the full-size 1B) with random weights made
//!   directly on the device, for benchmarks. No file involved.
//! * [`schema`]: every (name, shape) of the two files for an architecture, without
//!   allocating the weights.
//!
//! The recorder and the file writers are Moshi's (`moshi::tiny`).

use std::path::Path;

use candle::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use moshi::nn::MaybeQuantizedVarBuilder;

use super::config::{self, SttConfig, TEXT_EOP, TEXT_PAD};
use super::{err, KyutaiStt, SttOptions};
use crate::moshi::tiny::{
    drain, named_shapes, random_var_builders, record, save_bf16, start_tiny_dir, text_decoder,
    tokenizer, Fill, Recorder, Tensors,
};
use crate::ModelError;

/// The tiny architecture (also written as `duet-stt.toml` in a tiny directory).
pub const TINY_TOML: &str = include_str!("tiny.toml");

/// The tiny configuration.
pub fn tiny_config() -> SttConfig {
    SttConfig::from_toml(TINY_TOML, SttConfig::stt_1b_en_fr()).expect("built-in tiny config")
}

/// How much larger the text head's rows for the pad and end-of-pause tokens are than the
/// others in seeded weights, so that a random model ends words now and then (with equal
/// rows, 2 ids in 100 would almost never win and no word would ever end).
const SEPARATOR_GAIN: f32 = 2.5;

/// Scales the seeded text head's rows of the pad and end-of-pause tokens by
/// [`SEPARATOR_GAIN`] (in f32, before the LM is saved as bf16).
fn boost_separators(lm: &mut Tensors) -> candle::Result<()> {
    let Some(head) = lm.get_mut("text_linear.weight") else {
        return Ok(());
    };
    let [rows, cols] = *head.dims() else {
        return Ok(());
    };
    let mut v = head.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    for r in [TEXT_PAD, TEXT_EOP].map(|t| t as usize) {
        if r < rows {
            v[r * cols..(r + 1) * cols]
                .iter_mut()
                .for_each(|x| *x *= SEPARATOR_GAIN);
        }
    }
    *head = Tensor::from_vec(v, (rows, cols), head.device())?.to_dtype(head.dtype())?;
    Ok(())
}

/// Every (name, shape) of the two weights files of `cfg`, names prefixed `lm:` / `mimi:`,
/// sorted; nothing is allocated (a full-size architecture takes a moment).
pub fn schema(cfg: &SttConfig) -> Result<Vec<(String, Vec<usize>)>, ModelError> {
    let (lm, mimi) =
        record(&cfg.lm, &cfg.mimi, Fill::Shape, DType::F32, &Device::Cpu).map_err(err("schema"))?;
    Ok(named_shapes(&lm, &mimi))
}

/// What Duet's loader asks for (batched LM, batched Mimi encoder), in [`schema`]'s form:
/// a subset of the files, the Mimi decoder being left out.
pub fn loader_schema(cfg: &SttConfig) -> Result<Vec<(String, Vec<usize>)>, ModelError> {
    let (rec, lm) = Recorder::new(Fill::Shape);
    let vb = VarBuilder::from_backend(Box::new(rec), DType::F32, Device::Cpu);
    moshi::lm::LmModel::batched(1, &cfg.lm, MaybeQuantizedVarBuilder::Real(vb))
        .map_err(err("schema"))?;
    let (rec, mimi) = Recorder::new(Fill::Shape);
    let vb = VarBuilder::from_backend(Box::new(rec), DType::F32, Device::Cpu);
    crate::moshi::mimi::BatchedEncoder::new(1, &cfg.mimi, vb).map_err(err("schema"))?;
    Ok(named_shapes(&drain(lm), &drain(mimi)))
}

/// Text pieces of a tiny model: control tokens at the ids the text stream uses for them,
/// then words.
fn tiny_pieces(n: usize) -> Vec<String> {
    const WORDS: &[&str] = &[
        "bonjour", "hello", "world", "duet", "listens", "and", "writes", "every", "word", "tiny",
        "random", "model", "oui", "yes", "no", "merci",
    ];
    const SUFFIXES: &[&str] = &["s", "ing", ",", "ed", "."];
    (0..n)
        .map(|i| match i {
            0 => "<eop>".to_string(),
            1 => "<s>".to_string(),
            2 => "</s>".to_string(),
            3 => "<pad>".to_string(),
            // Every third piece continues a word (no leading `▁`).
            i if i % 3 == 0 => SUFFIXES[i % SUFFIXES.len()].to_string(),
            i => format!("\u{2581}{}", WORDS[i % WORDS.len()]),
        })
        .collect()
}

/// Writes a tiny Kyutai STT directory: the LM as `model.safetensors` (bf16, like Kyutai's
/// release), the Mimi file (f32), a SentencePiece tokenizer and `duet-stt.toml`, all from
/// `seed`.
pub fn write_tiny_dir(dir: &Path, seed: u64) -> Result<(), ModelError> {
    let io = |e: std::io::Error| ModelError::Failed(format!("{}: {e}", dir.display()));
    let cfg = tiny_config();
    let (mut lm, mimi) = start_tiny_dir(dir, &cfg.lm, &cfg.mimi, seed)?;
    boost_separators(&mut lm).map_err(err("generate"))?;
    save_bf16(&lm, &dir.join(config::LM_FILE))?;
    candle::safetensors::save(&mimi, dir.join(config::MIMI_FILE)).map_err(err("save"))?;
    let pieces = tiny_pieces(cfg.lm.text_out_vocab_size);
    std::fs::write(dir.join(config::TEXT_TOKENIZER), tokenizer(&pieces)).map_err(io)?;
    std::fs::write(dir.join(config::CONFIG_FILE), TINY_TOML).map_err(io)?;
    Ok(())
}

/// Any architecture with random weights made on the device (bf16 LM on GPU, f32 on CPU):
/// real timings and memory without a weights file. The text is the tiny vocabulary's.
pub fn random_model(cfg: SttConfig, opts: &SttOptions) -> Result<KyutaiStt, ModelError> {
    let device = opts.device.open()?;
    let (lm_vb, mimi_vb) = random_var_builders(&device);
    let text = text_decoder(&tiny_pieces(cfg.lm.text_out_vocab_size))?;
    KyutaiStt::build(
        cfg,
        MaybeQuantizedVarBuilder::Real(lm_vb),
        mimi_vb,
        text,
        device,
        opts,
    )
}
