//! A Llama-family decoder from a GGUF file — Llama (SmolLM2, Llama 3.2, TinyLlama…), Qwen2
//! (Qwen2, Qwen2.5: biases on the query, key and value projections) and Qwen3 (a per-head
//! RMS norm on queries and keys, a head size of its own) — with the KV cache outside the
//! weights: one [`KvCache`] per conversation, so a turn prefills only
//! what is new, a cache can be cut back to a common prefix, and many conversations share one
//! set of weights. Grouped-query attention runs without copying keys and values.

use candle::quantized::{gguf_file, GgmlDType, QMatMul, QTensor};
use candle::{DType, Device, Module, Tensor};
use candle_transformers::quantized_nn::RmsNorm;

/// How the weight matrices are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    /// Dequantized to f16 at load (twice the memory of Q4/Q8, faster on the CPU without
    /// `-C target-cpu`: half-precision matmuls pick their SIMD path at run time).
    F16,
    /// As the file has them (Q4_1, Q8_0…): least memory; candle's quantized kernels pick
    /// AVX2 only when the binary is built for it.
    Quantized,
}

/// The architecture of a GGUF (`general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// `llama`: rotary embedding on interleaved pairs (llama.cpp permutes q and k for it).
    Llama,
    /// `qwen2` (Qwen2, Qwen2.5): biased q/k/v projections, rotary on the two halves.
    Qwen2,
    /// `qwen3`: q/k RMS norms per head, `key_length` heads, rotary on the two halves.
    Qwen3,
}

impl Arch {
    /// The architecture named `name`.
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "llama" => Some(Self::Llama),
            "qwen2" => Some(Self::Qwen2),
            "qwen3" => Some(Self::Qwen3),
            _ => None,
        }
    }

    /// Its name in GGUF metadata keys.
    pub fn name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
        }
    }
}

/// The shape of the model, from the GGUF metadata.
#[derive(Clone, Debug)]
#[allow(missing_docs)] // the usual names of a transformer's dimensions
pub struct Shape {
    pub arch: Arch,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub embedding: usize,
    /// The longest sequence the model was trained on.
    pub context: usize,
    pub vocab: usize,
}

struct Layer {
    wq: QMatMul,
    wk: QMatMul,
    wv: QMatMul,
    wo: QMatMul,
    gate: QMatMul,
    down: QMatMul,
    up: QMatMul,
    attn_norm: RmsNorm,
    ffn_norm: RmsNorm,
    /// Qwen2's projection biases (q, k, v).
    bias: Option<[Tensor; 3]>,
    /// Qwen3's per-head norms of queries and keys.
    qk_norm: Option<(RmsNorm, RmsNorm)>,
}

/// The weights. See the module docs.
pub struct Llama {
    shape: Shape,
    embed: candle_nn::Embedding,
    layers: Vec<Layer>,
    norm: RmsNorm,
    output: QMatMul,
    cos: Tensor,
    sin: Tensor,
    device: Device,
}

/// The keys and values of one conversation's tokens so far, for every layer.
#[derive(Debug, Default)]
pub struct KvCache {
    /// Per layer: keys and values, `(kv_heads, capacity, head_dim)`, the first `len` used.
    kv: Vec<(Tensor, Tensor)>,
    len: usize,
    capacity: usize,
}

impl KvCache {
    /// Tokens held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated (capacity, not only what is used).
    pub fn bytes(&self) -> usize {
        self.kv
            .iter()
            .map(|(k, v)| (k.elem_count() + v.elem_count()) * 4)
            .sum()
    }

    /// Forgets every token after the first `len`.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// A copy of the first `len` tokens, in storage of its own sized to them (the copy can
    /// grow without touching this one).
    pub fn prefix(&self, len: usize) -> candle::Result<KvCache> {
        let len = len.min(self.len);
        if len == 0 {
            return Ok(KvCache::default());
        }
        let mut kv = Vec::with_capacity(self.kv.len());
        for (k, v) in &self.kv {
            kv.push((
                k.narrow(1, 0, len)?.contiguous()?.copy()?,
                v.narrow(1, 0, len)?.contiguous()?.copy()?,
            ));
        }
        Ok(KvCache {
            kv,
            len,
            capacity: len,
        })
    }

    /// Makes room for `extra` more tokens (growing by doubling, so appends stay amortised).
    fn reserve(&mut self, shape: &Shape, extra: usize, device: &Device) -> candle::Result<()> {
        let need = self.len + extra;
        if need <= self.capacity && self.kv.len() == shape.layers {
            return Ok(());
        }
        let capacity = need
            .max(self.capacity * 2)
            .max(64)
            .min(shape.context.max(need));
        let mut kv = Vec::with_capacity(shape.layers);
        for layer in 0..shape.layers {
            let dims = (shape.kv_heads, capacity, shape.head_dim);
            let (k, v) = (
                Tensor::zeros(dims, DType::F32, device)?,
                Tensor::zeros(dims, DType::F32, device)?,
            );
            if self.len > 0 {
                let (old_k, old_v) = &self.kv[layer];
                k.slice_set(&old_k.narrow(1, 0, self.len)?.contiguous()?, 1, 0)?;
                v.slice_set(&old_v.narrow(1, 0, self.len)?.contiguous()?, 1, 0)?;
            }
            kv.push((k, v));
        }
        self.kv = kv;
        self.capacity = capacity;
        Ok(())
    }
}

impl Layer {
    /// Layer `i`'s weights (`blk.{i}.…`), with the architecture's extras.
    fn load<R: std::io::Read + std::io::Seek>(
        content: &gguf_file::Content,
        reader: &mut R,
        i: usize,
        (shape, eps): (&Shape, f64),
        format: WeightFormat,
        device: &Device,
    ) -> candle::Result<Self> {
        // "attn_q" is the weight blk.{i}.attn_q.weight; "attn_q.bias" names its bias.
        let mut get = |name: &str| {
            let full = if name.ends_with(".bias") {
                format!("blk.{i}.{name}")
            } else {
                format!("blk.{i}.{name}.weight")
            };
            content.tensor(reader, &full, device)
        };
        let mut mm = |name: &str| matmul(get(name)?, format, device);
        let (wq, wk, wv, wo) = (
            mm("attn_q")?,
            mm("attn_k")?,
            mm("attn_v")?,
            mm("attn_output")?,
        );
        let (gate, down, up) = (mm("ffn_gate")?, mm("ffn_down")?, mm("ffn_up")?);
        let bias = match shape.arch {
            Arch::Qwen2 => Some([
                get("attn_q.bias")?.dequantize(device)?,
                get("attn_k.bias")?.dequantize(device)?,
                get("attn_v.bias")?.dequantize(device)?,
            ]),
            Arch::Llama | Arch::Qwen3 => None,
        };
        let qk_norm = match shape.arch {
            Arch::Qwen3 => Some((
                RmsNorm::from_qtensor(get("attn_q_norm")?, eps)?,
                RmsNorm::from_qtensor(get("attn_k_norm")?, eps)?,
            )),
            Arch::Llama | Arch::Qwen2 => None,
        };
        Ok(Layer {
            wq,
            wk,
            wv,
            wo,
            gate,
            down,
            up,
            attn_norm: RmsNorm::from_qtensor(get("attn_norm")?, eps)?,
            ffn_norm: RmsNorm::from_qtensor(get("ffn_norm")?, eps)?,
            bias,
            qk_norm,
        })
    }
}

fn matmul(q: QTensor, format: WeightFormat, device: &Device) -> candle::Result<QMatMul> {
    let dequantize = matches!(q.dtype(), GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16)
        || format == WeightFormat::F16;
    Ok(if dequantize {
        QMatMul::TensorF16(q.dequantize_f16(device)?)
    } else {
        QMatMul::QTensor(std::sync::Arc::new(q))
    })
}

/// What the GGUF metadata says of the model: its shape (the vocabulary still 0: the
/// embedding tensor tells), the RMS-norm epsilon and the rope base.
fn metadata(content: &gguf_file::Content) -> candle::Result<(Shape, f64, f32)> {
    let md = |key: &str| {
        content
            .metadata
            .get(key)
            .ok_or_else(|| candle::Error::Msg(format!("the GGUF has no {key}")))
    };
    let name = md("general.architecture")?.to_string()?.clone();
    let arch = Arch::named(&name).ok_or_else(|| {
        candle::Error::Msg(format!(
            "general.architecture is {name:?}; \"llama\", \"qwen2\" and \"qwen3\" are supported"
        ))
    })?;
    let key = |k: &str| format!("{}.{k}", arch.name());
    let u = |k: &str| -> candle::Result<usize> { Ok(md(&key(k))?.to_u32()? as usize) };
    let heads = u("attention.head_count")?;
    if heads == 0 {
        candle::bail!("{} is 0", key("attention.head_count"));
    }
    let embedding = u("embedding_length")?;
    let head_dim = match arch {
        // Qwen3's heads need not tile the embedding (its attention is wider or narrower).
        Arch::Qwen3 => u("attention.key_length").unwrap_or(embedding / heads),
        Arch::Llama | Arch::Qwen2 => embedding / heads,
    };
    if head_dim == 0 || head_dim % 2 == 1 {
        candle::bail!("a head size of {head_dim} cannot be rotated");
    }
    let shape = Shape {
        arch,
        layers: u("block_count")?,
        heads,
        kv_heads: u("attention.head_count_kv").unwrap_or(heads),
        head_dim,
        embedding,
        context: u("context_length").unwrap_or(4096).clamp(256, 32_768),
        vocab: 0,
    };
    if shape.kv_heads == 0 || !shape.heads.is_multiple_of(shape.kv_heads) {
        candle::bail!(
            "{heads} heads do not group over {} KV heads",
            shape.kv_heads
        );
    }
    let eps = md(&key("attention.layer_norm_rms_epsilon"))?.to_f32()? as f64;
    let rope_base = md(&key("rope.freq_base"))
        .and_then(|v| v.to_f32())
        .unwrap_or(10_000.0);
    Ok((shape, eps, rope_base))
}

/// The rope angles of every position: (cos, sin), each `(context, head_dim / 2)`.
fn rope_table(shape: &Shape, base: f32, device: &Device) -> candle::Result<(Tensor, Tensor)> {
    let half = shape.head_dim / 2;
    let theta: Vec<f32> = (0..half)
        .map(|i| 1.0 / base.powf(2.0 * i as f32 / shape.head_dim as f32))
        .collect();
    let positions = Tensor::arange(0, shape.context as u32, device)?
        .to_dtype(DType::F32)?
        .reshape((shape.context, 1))?;
    let angles = positions.matmul(&Tensor::new(theta.as_slice(), device)?.reshape((1, half))?)?;
    Ok((angles.cos()?, angles.sin()?))
}

/// The additive causal mask of `t` new tokens after `start` cached ones: row `i` (position
/// `start + i`) sees keys `0..=start + i`. None for one token (it sees everything).
fn causal_mask(t: usize, start: usize, device: &Device) -> candle::Result<Option<Tensor>> {
    if t == 1 {
        return Ok(None);
    }
    let total = start + t;
    let m: Vec<f32> = (0..t)
        .flat_map(|i| {
            (0..total).map(move |j| {
                if j > start + i {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
        })
        .collect();
    Tensor::from_vec(m, (1, 1, t, total), device).map(Some)
}

impl Llama {
    /// Loads the weights of a `general.architecture` `llama`, `qwen2` or `qwen3` GGUF.
    pub fn load<R: std::io::Read + std::io::Seek>(
        content: &gguf_file::Content,
        reader: &mut R,
        format: WeightFormat,
        device: &Device,
    ) -> candle::Result<Self> {
        let (mut shape, eps, rope_base) = metadata(content)?;
        let tensor = |name: &str, reader: &mut R| content.tensor(reader, name, device);
        let embed_q = tensor("token_embd.weight", reader)?;
        shape.vocab = embed_q.shape().dims()[0];
        let embed = embed_q.dequantize(device)?;
        let output = match tensor("output.weight", reader) {
            Ok(t) => t,
            Err(_) => embed_q, // tied embeddings
        };
        let layers = (0..shape.layers)
            .map(|i| Layer::load(content, reader, i, (&shape, eps), format, device))
            .collect::<candle::Result<Vec<_>>>()?;
        let (cos, sin) = rope_table(&shape, rope_base, device)?;
        Ok(Self {
            embed: candle_nn::Embedding::new(embed, shape.embedding),
            layers,
            norm: RmsNorm::from_qtensor(tensor("output_norm.weight", reader)?, eps)?,
            output: matmul(output, format, device)?,
            cos,
            sin,
            shape,
            device: device.clone(),
        })
    }

    /// One conversation's attention in one layer: its `t` new rows of queries, keys and
    /// values (`(1, t, ·)`) at positions `start..`, the keys and values written into its
    /// `cache` and attended over with the ones before. Returns `(1, t, heads * head_dim)`.
    #[allow(clippy::too_many_arguments)]
    fn attend(
        &self,
        layer: &Layer,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        (k_cache, v_cache): &(Tensor, Tensor),
        start: usize,
        mask: Option<&Tensor>,
    ) -> candle::Result<Tensor> {
        let s = &self.shape;
        let t = q.dim(1)?;
        let (total, rep) = (start + t, s.heads / s.kv_heads);
        let cos = self.cos.narrow(0, start, t)?;
        let sin = self.sin.narrow(0, start, t)?;
        let heads = |x: Tensor, n: usize| {
            x.reshape((1, t, n, s.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let (mut q, mut k) = (heads(q, s.heads)?, heads(k, s.kv_heads)?);
        if let Some((q_norm, k_norm)) = &layer.qk_norm {
            q = q_norm.forward(&q)?;
            k = k_norm.forward(&k)?;
        }
        let rope = match s.arch {
            Arch::Llama => candle_nn::rotary_emb::rope_i,
            Arch::Qwen2 | Arch::Qwen3 => candle_nn::rotary_emb::rope,
        };
        let q = rope(&q, &cos, &sin)?;
        let k = rope(&k, &cos, &sin)?.squeeze(0)?;
        let v = heads(v, s.kv_heads)?.squeeze(0)?;
        k_cache.slice_set(&k, 1, start)?;
        v_cache.slice_set(&v, 1, start)?;
        let keys = k_cache.narrow(1, 0, total)?; // (kv_heads, total, head_dim)
        let values = v_cache.narrow(1, 0, total)?;
        // The query heads that share a KV head, stacked: (kv_heads, rep * t, head_dim).
        let q = q.reshape((s.kv_heads, rep * t, s.head_dim))?;
        let att = (q.matmul(&keys.t()?)? / (s.head_dim as f64).sqrt())?;
        let att = match mask {
            Some(m) => att
                .reshape((s.kv_heads, rep, t, total))?
                .broadcast_add(m)?
                .reshape((s.kv_heads, rep * t, total))?,
            None => att,
        };
        candle_nn::ops::softmax_last_dim(&att)?
            .matmul(&values)? // (kv_heads, rep * t, head_dim) = (heads, t, head_dim)
            .reshape((s.heads, t, s.head_dim))?
            .transpose(0, 1)?
            .reshape((1, t, s.heads * s.head_dim))
    }

    /// The device it runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The model's shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// Runs `tokens` after what `cache` holds and returns the logits that follow the last
    /// one (`vocab` f32). The tokens join the cache.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache) -> candle::Result<Tensor> {
        let mut out = self.forward_many(&mut [(tokens, cache)])?;
        Ok(out.remove(0))
    }

    /// [`Llama::forward`] for several conversations in one pass: their tokens go through
    /// the weight matrices together (one read of the weights for all of them: decoding
    /// several answers a token each costs little more than one), and attention runs on each
    /// conversation's own cache. Returns each one's logits, in order.
    pub fn forward_many(&self, seqs: &mut [(&[u32], &mut KvCache)]) -> candle::Result<Vec<Tensor>> {
        let (rows, ids) = self.batch_rows(seqs)?;
        let n = ids.len();
        let masks = rows
            .iter()
            .map(|&(_, t, start)| causal_mask(t, start, &self.device))
            .collect::<candle::Result<Vec<_>>>()?;
        let ids = Tensor::new(ids.as_slice(), &self.device)?.unsqueeze(0)?;
        let mut x = self.embed.forward(&ids)?; // (1, n, embedding)
        for (li, layer) in self.layers.iter().enumerate() {
            let h = layer.attn_norm.forward(&x)?;
            let (mut q_all, mut k_all, mut v_all) = (
                layer.wq.forward(&h)?,
                layer.wk.forward(&h)?,
                layer.wv.forward(&h)?,
            );
            if let Some([bq, bk, bv]) = &layer.bias {
                q_all = q_all.broadcast_add(bq)?;
                k_all = k_all.broadcast_add(bk)?;
                v_all = v_all.broadcast_add(bv)?;
            }
            let mut ys = Vec::with_capacity(seqs.len());
            for (si, &(row, t, start)) in rows.iter().enumerate() {
                let [q, k, v] = [&q_all, &k_all, &v_all].map(|m| m.narrow(1, row, t));
                let cache = &seqs[si].1.kv[li];
                ys.push(self.attend(layer, q?, k?, v?, cache, start, masks[si].as_ref())?);
            }
            let y = cat_rows(ys)?;
            x = (layer.wo.forward(&y)? + x)?;
            let h = layer.ffn_norm.forward(&x)?;
            let ffn = (candle_nn::ops::silu(&layer.gate.forward(&h)?)? * layer.up.forward(&h)?)?;
            x = (layer.down.forward(&ffn)? + x)?;
        }
        debug_assert_eq!(x.dim(1)?, n);
        // Each conversation's last row, through the output head together.
        let last: Vec<Tensor> = rows
            .iter()
            .map(|&(row, t, _)| x.narrow(1, row + t - 1, 1))
            .collect::<candle::Result<_>>()?;
        let logits = self
            .output
            .forward(&self.norm.forward(&cat_rows(last)?)?)?
            .to_dtype(DType::F32)?
            .squeeze(0)?; // (conversations, vocab)
        for ((_, cache), &(_, t, start)) in seqs.iter_mut().zip(&rows) {
            cache.len = start + t;
        }
        (0..rows.len()).map(|i| logits.get(i)).collect()
    }

    /// Per conversation: its first row in the batch, its length and where it starts in its
    /// cache (room reserved there); and the batch's token ids.
    #[allow(clippy::type_complexity)]
    fn batch_rows(
        &self,
        seqs: &mut [(&[u32], &mut KvCache)],
    ) -> candle::Result<(Vec<(usize, usize, usize)>, Vec<u32>)> {
        let s = &self.shape;
        let mut rows = Vec::with_capacity(seqs.len());
        let mut ids = Vec::new();
        for (tokens, cache) in seqs.iter_mut() {
            let (t, start) = (tokens.len(), cache.len);
            if t == 0 {
                candle::bail!("nothing to run");
            }
            if start + t > s.context {
                candle::bail!(
                    "{} tokens pass the model's context of {}",
                    start + t,
                    s.context
                );
            }
            cache.reserve(s, t, &self.device)?;
            rows.push((ids.len(), t, start));
            ids.extend_from_slice(tokens);
        }
        Ok((rows, ids))
    }
}

/// The conversations' rows side by side on the sequence axis (one needs no copy).
fn cat_rows(mut parts: Vec<Tensor>) -> candle::Result<Tensor> {
    if parts.len() == 1 {
        Ok(parts.remove(0))
    } else {
        Tensor::cat(&parts, 1)
    }
}
