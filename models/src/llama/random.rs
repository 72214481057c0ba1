//! Llama, Qwen2 and Qwen3 GGUF files with seeded random weights and a byte-level vocabulary with the ChatML
//! tokens: a tiny one for the tests, and one of SmolLM2-135M's exact shape for benchmarks
//! where the real file cannot go (a GPU machine without it). The output is noise; the
//! arithmetic is the real model's.

use std::path::Path;

use candle::quantized::{gguf_file, GgmlDType, QTensor};
use candle::{Device, Tensor};

use super::model::Arch;
use super::tokenizer::byte_chars;

/// The dimensions of a random model.
#[derive(Clone, Debug)]
#[allow(missing_docs)] // the usual names of a transformer's dimensions
pub struct RandomShape {
    pub arch: Arch,
    /// Qwen3's head size (`key_length`); the others divide the embedding by the heads.
    pub head_dim: Option<usize>,
    pub vocab: usize,
    pub embedding: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub ffn: usize,
    pub layers: usize,
    pub context: usize,
    /// The matrices' format (SmolLM2 ships Q4_1).
    pub dtype: GgmlDType,
}

impl RandomShape {
    /// Small enough for unit tests (ms to build and run).
    pub fn tiny() -> Self {
        Self {
            arch: Arch::Llama,
            head_dim: None,
            vocab: 0,
            embedding: 64,
            heads: 4,
            kv_heads: 2,
            ffn: 128,
            layers: 2,
            context: 512,
            dtype: GgmlDType::Q8_0,
        }
    }

    /// [`RandomShape::tiny`] itself, or as a Qwen2 (biases) or a Qwen3 (q/k norms, and
    /// heads of 24 that do not tile the embedding of 64) with room for a tools block spelled
    /// in bytes.
    pub fn tiny_of(arch: Arch) -> Self {
        match arch {
            Arch::Llama => Self::tiny(),
            Arch::Qwen2 | Arch::Qwen3 => Self {
                arch,
                head_dim: (arch == Arch::Qwen3).then_some(24),
                context: 4096,
                ..Self::tiny()
            },
        }
    }

    /// Qwen2.5-0.5B-Instruct's shape in Q8_0 (its vocabulary of 151,936 tokens).
    pub fn qwen2_5_0_5b() -> Self {
        Self {
            arch: Arch::Qwen2,
            head_dim: None,
            vocab: 151_936,
            embedding: 896,
            heads: 14,
            kv_heads: 2,
            ffn: 4864,
            layers: 24,
            context: 8192,
            dtype: GgmlDType::Q8_0,
        }
    }

    /// The size of each attention head.
    pub fn head_size(&self) -> usize {
        self.head_dim.unwrap_or(self.embedding / self.heads)
    }

    /// SmolLM2-135M-Instruct's shape and format.
    pub fn smollm2_135m() -> Self {
        Self {
            arch: Arch::Llama,
            head_dim: None,
            vocab: 49_152,
            embedding: 576,
            heads: 9,
            kv_heads: 3,
            ffn: 1536,
            layers: 30,
            context: 8192,
            dtype: GgmlDType::Q4_1,
        }
    }
}

/// Writes `dir/random.gguf` of `shape` with weights from `seed`. The vocabulary is the
/// control tokens, the 256 bytes, a few merges and filler tokens up to `shape.vocab`.
pub fn write_random_gguf(dir: &Path, shape: &RandomShape, seed: u64) -> candle::Result<()> {
    let (tokens, types, merges) = vocabulary(shape);
    let named = tensors(shape, tokens.len(), seed)?;
    let md = metadata(shape, &tokens, &types, &merges);
    use gguf_file::Value as V;
    let md: Vec<(&str, &V)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = named.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = std::fs::File::create(dir.join("random.gguf"))?;
    gguf_file::write(&mut file, &md, &tensors)
}

/// The tokens (in the byte-level spelling), their types (3 = control, 4 = user-defined)
/// and the merges.
fn vocabulary(shape: &RandomShape) -> (Vec<String>, Vec<i32>, Vec<String>) {
    let mut tokens: Vec<String> = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    tokens.extend(byte_chars().iter().map(|c| c.to_string()));
    let merges = ["h e", "l l", "he ll", "Ġ w"];
    tokens.extend(merges.iter().map(|m| m.replace(' ', "")));
    // Qwen's vocabularies spell their tool and thinking tags as user-defined tokens.
    let user_defined = match shape.arch {
        Arch::Llama => &[][..],
        Arch::Qwen2 | Arch::Qwen3 => &["<tool_call>", "</tool_call>", "<think>", "</think>"][..],
    };
    let first_user = tokens.len();
    tokens.extend(user_defined.iter().map(|t| t.to_string()));
    while tokens.len() < shape.vocab {
        tokens.push(format!("<filler_{}>", tokens.len()));
    }
    let mut types = vec![1i32; tokens.len()];
    types[..3].fill(3);
    types[first_user..first_user + user_defined.len()].fill(4);
    let merges = merges.iter().map(|s| s.to_string()).collect();
    (tokens, types, merges)
}

/// Seeded uniform noise: `(rows, cols)` tensors in `[-scale, scale]`.
struct Noise {
    state: u64,
}

impl Noise {
    fn tensor(&mut self, rows: usize, cols: usize, scale: f32) -> candle::Result<Tensor> {
        let data: Vec<f32> = (0..rows * cols)
            .map(|_| {
                self.state ^= self.state << 13;
                self.state ^= self.state >> 7;
                self.state ^= self.state << 17;
                ((self.state % 2001) as f32 / 1000.0 - 1.0) * scale
            })
            .collect();
        Tensor::from_vec(data, (rows, cols), &Device::Cpu)
    }
}

/// Every tensor of the model, by name.
fn tensors(shape: &RandomShape, vocab: usize, seed: u64) -> candle::Result<Vec<(String, QTensor)>> {
    let mut rand = Noise { state: seed | 1 };
    let ones = |n: usize| {
        QTensor::quantize(
            &Tensor::ones(n, candle::DType::F32, &Device::Cpu)?,
            GgmlDType::F32,
        )
    };
    let e = shape.embedding;
    let mut named: Vec<(String, QTensor)> = vec![
        (
            "token_embd.weight".into(),
            QTensor::quantize(&rand.tensor(vocab, e, 0.5)?, GgmlDType::Q8_0)?,
        ),
        ("output_norm.weight".into(), ones(e)?),
    ];
    for i in 0..shape.layers {
        layer_tensors(shape, i, &mut rand, &mut named)?;
        named.push((format!("blk.{i}.attn_norm.weight"), ones(e)?));
        named.push((format!("blk.{i}.ffn_norm.weight"), ones(e)?));
    }
    Ok(named)
}

/// Layer `i`'s matrices, and Qwen2's biases or Qwen3's q/k norms.
fn layer_tensors(
    shape: &RandomShape,
    i: usize,
    rand: &mut Noise,
    named: &mut Vec<(String, QTensor)>,
) -> candle::Result<()> {
    let (e, f) = (shape.embedding, shape.ffn);
    let (q, kv) = (
        shape.heads * shape.head_size(),
        shape.kv_heads * shape.head_size(),
    );
    let f32s = |t: Tensor| QTensor::quantize(&t.flatten_all()?, GgmlDType::F32);
    let p = |n: &str| format!("blk.{i}.{n}.weight");
    for (name, rows, cols) in [
        ("attn_q", q, e),
        ("attn_k", kv, e),
        ("attn_v", kv, e),
        ("attn_output", e, q),
        ("ffn_gate", f, e),
        ("ffn_up", f, e),
        ("ffn_down", e, f),
    ] {
        let t = QTensor::quantize(&rand.tensor(rows, cols, 0.2)?, shape.dtype)?;
        named.push((p(name), t));
    }
    match shape.arch {
        Arch::Qwen2 => {
            for (n, rows) in [("attn_q", q), ("attn_k", kv), ("attn_v", kv)] {
                named.push((
                    format!("blk.{i}.{n}.bias"),
                    f32s(rand.tensor(1, rows, 0.5)?)?,
                ));
            }
        }
        Arch::Qwen3 => {
            // Norm weights other than one, so that a missing norm shows.
            let hd = shape.head_size();
            named.push((p("attn_q_norm"), f32s((rand.tensor(1, hd, 0.5)? + 1.0)?)?));
            named.push((p("attn_k_norm"), f32s((rand.tensor(1, hd, 0.5)? + 1.0)?)?));
        }
        Arch::Llama => {}
    }
    Ok(())
}

/// The chat template of the random models: ChatML with a default system message.
const TEMPLATE: &str = "{{ '<|im_start|>system\nYou are tiny.<|im_end|>\n' }}{{'<|im_start|>'}}";

/// The GGUF metadata of a random model of `shape` with this vocabulary.
fn metadata(
    shape: &RandomShape,
    tokens: &[String],
    types: &[i32],
    merges: &[String],
) -> Vec<(String, gguf_file::Value)> {
    use gguf_file::Value as V;
    let e = shape.embedding;
    let arch = shape.arch.name();
    // The keys are named after the architecture (`llama.block_count`, `qwen2.block_count`).
    let key = |k: &str| format!("{arch}.{k}");
    let mut md = vec![
        ("general.architecture".into(), V::String(arch.into())),
        ("general.name".into(), V::String("random".into())),
        (key("block_count"), V::U32(shape.layers as u32)),
        (key("context_length"), V::U32(shape.context as u32)),
        (key("embedding_length"), V::U32(e as u32)),
        (key("feed_forward_length"), V::U32(shape.ffn as u32)),
        (key("attention.head_count"), V::U32(shape.heads as u32)),
        (
            key("attention.head_count_kv"),
            V::U32(shape.kv_heads as u32),
        ),
        (key("rope.freq_base"), V::F32(10_000.0)),
        (key("attention.layer_norm_rms_epsilon"), V::F32(1e-5)),
        (
            key("rope.dimension_count"),
            V::U32(shape.head_size() as u32),
        ),
    ];
    if shape.arch == Arch::Qwen3 {
        md.push((
            key("attention.key_length"),
            V::U32(shape.head_size() as u32),
        ));
        md.push((
            key("attention.value_length"),
            V::U32(shape.head_size() as u32),
        ));
    }
    md.extend(tokenizer_metadata(shape.arch, tokens, types, merges));
    md
}

/// The tokenizer's and the chat template's metadata.
fn tokenizer_metadata(
    arch: Arch,
    tokens: &[String],
    types: &[i32],
    merges: &[String],
) -> Vec<(String, gguf_file::Value)> {
    use gguf_file::Value as V;
    let strs = |v: &[String]| V::Array(v.iter().map(|s| V::String(s.clone())).collect());
    let template = match arch {
        // Qwen3's switch (the text is all the loader reads of it).
        Arch::Qwen3 => format!("{TEMPLATE}{{%- if enable_thinking is defined %}}{{%- endif %}}"),
        Arch::Llama | Arch::Qwen2 => TEMPLATE.into(),
    };
    let mut md = vec![
        ("tokenizer.ggml.model".into(), V::String("gpt2".into())),
        ("tokenizer.ggml.tokens".into(), strs(tokens)),
        (
            "tokenizer.ggml.token_type".into(),
            V::Array(types.iter().map(|&t| V::I32(t)).collect()),
        ),
        ("tokenizer.ggml.merges".into(), strs(merges)),
        ("tokenizer.chat_template".into(), V::String(template)),
    ];
    if arch != Arch::Llama {
        md.push(("tokenizer.ggml.pre".into(), V::String("qwen2".into())));
    }
    md
}
