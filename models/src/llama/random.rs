//! Llama GGUF files with seeded random weights and a byte-level vocabulary with the ChatML
//! tokens: a tiny one for the tests, and one of SmolLM2-135M's exact shape for benchmarks
//! where the real file cannot go (a GPU machine without it). The output is noise; the
//! arithmetic is the real model's.

use std::path::Path;

use candle::quantized::{gguf_file, GgmlDType, QTensor};
use candle::{Device, Tensor};

use super::tokenizer::byte_chars;

/// The dimensions of a random model.
#[derive(Clone, Debug)]
#[allow(missing_docs)] // the usual names of a transformer's dimensions
pub struct RandomShape {
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

    /// SmolLM2-135M-Instruct's shape and format.
    pub fn smollm2_135m() -> Self {
        Self {
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
    let dev = Device::Cpu;
    let mut tokens: Vec<String> = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    tokens.extend(byte_chars().iter().map(|c| c.to_string()));
    let merges = ["h e", "l l", "he ll", "Ġ w"];
    tokens.extend(merges.iter().map(|m| m.replace(' ', "")));
    while tokens.len() < shape.vocab {
        tokens.push(format!("<filler_{}>", tokens.len()));
    }
    let mut types = vec![1i32; tokens.len()];
    types[..3].fill(3);
    let vocab = tokens.len();

    let mut state = seed | 1;
    let mut rand = |rows: usize, cols: usize, scale: f32| {
        let data: Vec<f32> = (0..rows * cols)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state % 2001) as f32 / 1000.0 - 1.0) * scale
            })
            .collect();
        Tensor::from_vec(data, (rows, cols), &dev)
    };
    let mat = |t: Tensor| QTensor::quantize(&t, shape.dtype);
    let ones =
        |n: usize| QTensor::quantize(&Tensor::ones(n, candle::DType::F32, &dev)?, GgmlDType::F32);
    let (e, f) = (shape.embedding, shape.ffn);
    let kv = shape.kv_heads * (e / shape.heads);
    let mut named: Vec<(String, QTensor)> = vec![
        (
            "token_embd.weight".into(),
            QTensor::quantize(&rand(vocab, e, 0.5)?, GgmlDType::Q8_0)?,
        ),
        ("output_norm.weight".into(), ones(e)?),
    ];
    for i in 0..shape.layers {
        let p = |n: &str| format!("blk.{i}.{n}.weight");
        named.push((p("attn_q"), mat(rand(e, e, 0.2)?)?));
        named.push((p("attn_k"), mat(rand(kv, e, 0.2)?)?));
        named.push((p("attn_v"), mat(rand(kv, e, 0.2)?)?));
        named.push((p("attn_output"), mat(rand(e, e, 0.2)?)?));
        named.push((p("ffn_gate"), mat(rand(f, e, 0.2)?)?));
        named.push((p("ffn_up"), mat(rand(f, e, 0.2)?)?));
        named.push((p("ffn_down"), mat(rand(e, f, 0.2)?)?));
        named.push((p("attn_norm"), ones(e)?));
        named.push((p("ffn_norm"), ones(e)?));
    }
    let merges: Vec<String> = merges.iter().map(|s| s.to_string()).collect();
    let md = metadata(shape, &tokens, &types, &merges);
    use gguf_file::Value as V;
    let md: Vec<(&str, &V)> = md.iter().map(|(k, v)| (*k, v)).collect();
    let tensors: Vec<(&str, &QTensor)> = named.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = std::fs::File::create(dir.join("random.gguf"))?;
    gguf_file::write(&mut file, &md, &tensors)
}

/// The GGUF metadata of a random model of `shape` with this vocabulary.
fn metadata(
    shape: &RandomShape,
    tokens: &[String],
    types: &[i32],
    merges: &[String],
) -> Vec<(&'static str, gguf_file::Value)> {
    use gguf_file::Value as V;
    let e = shape.embedding;
    let strs = |v: &[String]| V::Array(v.iter().map(|s| V::String(s.clone())).collect());
    vec![
        ("general.architecture", V::String("llama".into())),
        ("general.name", V::String("random".into())),
        ("llama.block_count", V::U32(shape.layers as u32)),
        ("llama.context_length", V::U32(shape.context as u32)),
        ("llama.embedding_length", V::U32(e as u32)),
        ("llama.attention.head_count", V::U32(shape.heads as u32)),
        (
            "llama.attention.head_count_kv",
            V::U32(shape.kv_heads as u32),
        ),
        ("llama.rope.freq_base", V::F32(10_000.0)),
        ("llama.attention.layer_norm_rms_epsilon", V::F32(1e-5)),
        (
            "llama.rope.dimension_count",
            V::U32((e / shape.heads) as u32),
        ),
        ("tokenizer.ggml.model", V::String("gpt2".into())),
        ("tokenizer.ggml.tokens", strs(tokens)),
        (
            "tokenizer.ggml.token_type",
            V::Array(types.iter().map(|&t| V::I32(t)).collect()),
        ),
        ("tokenizer.ggml.merges", strs(merges)),
        (
            "tokenizer.chat_template",
            V::String(
                "{{ '<|im_start|>system\nYou are tiny.<|im_end|>\n' }}{{'<|im_start|>'}}".into(),
            ),
        ),
    ]
}
