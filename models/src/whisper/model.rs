//! Whisper's network on candle, reading candle's (Hugging Face's) tensor names, with a
//! decoder that keeps a key/value cache for its self-attention.
//!
//! candle-transformers' `whisper::model` has the same weights and maths but re-runs the
//! decoder over the whole prefix at every token (its cache holds the cross-attention only)
//! and keeps its layers private; on the CPU a prefix of two or more tokens costs three
//! times a single one. Here each step feeds one token and reads its logits; tokens whose
//! logits are not read (a prompt's previous text) are fed together in one pass under a
//! causal mask, without the output projection. GELU is the exact (erf) one, as OpenAI's.

use candle::{Device, Module, Result, Tensor, D};
use candle_nn::{Conv1d, Conv1dConfig, LayerNorm, Linear, VarBuilder};

use super::DirConfig;

fn layer_norm(d: usize, vb: VarBuilder) -> Result<LayerNorm> {
    candle_nn::layer_norm(d, 1e-5, vb)
}

/// Multi-head attention projections.
#[derive(Debug, Clone)]
struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    heads: usize,
}

/// `[t, d]` → `[heads, t, d / heads]`, contiguous.
fn split_heads(x: &Tensor, heads: usize) -> Result<Tensor> {
    let (t, d) = x.dims2()?;
    x.reshape((t, heads, d / heads))?
        .transpose(0, 1)?
        .contiguous()
}

/// Softmax attention of `q` `[h, tq, dh]` over keys `kt` `[h, dh, tk]` and values `v`
/// `[h, tk, dh]`, with `mask` `[tq, tk]` (0 or −∞) added to the scores when given; returns
/// `[tq, h * dh]`.
fn attend(q: &Tensor, kt: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    let (h, tq, dh) = q.dims3()?;
    let mut scores = (q.matmul(kt)? * (1.0 / (dh as f64).sqrt()))?;
    if let Some(mask) = mask {
        scores = scores.broadcast_add(mask)?;
    }
    let w = candle_nn::ops::softmax_last_dim(&scores)?;
    w.matmul(v)?.transpose(0, 1)?.reshape((tq, h * dh))
}

impl Attention {
    fn load(d: usize, heads: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            q: candle_nn::linear(d, d, vb.pp("q_proj"))?,
            k: candle_nn::linear_no_bias(d, d, vb.pp("k_proj"))?,
            v: candle_nn::linear(d, d, vb.pp("v_proj"))?,
            out: candle_nn::linear(d, d, vb.pp("out_proj"))?,
            heads,
        })
    }

    /// Keys (transposed, `[h, dh, t]`) and values (`[h, t, dh]`) of `x` `[t, d]`.
    fn keys_values(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        let k = split_heads(&self.k.forward(x)?, self.heads)?;
        let v = split_heads(&self.v.forward(x)?, self.heads)?;
        Ok((k.transpose(1, 2)?.contiguous()?, v))
    }

    /// Attention of `x` `[t, d]` over the keys and values given.
    fn forward(&self, x: &Tensor, kt: &Tensor, v: &Tensor) -> Result<Tensor> {
        self.forward_masked(x, kt, v, None)
    }

    /// [`Self::forward`] with an additive `mask` `[t, tk]`.
    fn forward_masked(
        &self,
        x: &Tensor,
        kt: &Tensor,
        v: &Tensor,
        mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        let q = split_heads(&self.q.forward(x)?, self.heads)?;
        self.out.forward(&attend(&q, kt, v, mask)?)
    }
}

/// The feed-forward part of a block.
#[derive(Debug, Clone)]
struct Mlp {
    ln: LayerNorm,
    fc1: Linear,
    fc2: Linear,
}

impl Mlp {
    fn load(d: usize, vb: &VarBuilder) -> Result<Self> {
        Ok(Self {
            ln: layer_norm(d, vb.pp("final_layer_norm"))?,
            fc1: candle_nn::linear(d, 4 * d, vb.pp("fc1"))?,
            fc2: candle_nn::linear(4 * d, d, vb.pp("fc2"))?,
        })
    }

    /// `x + mlp(x)`.
    fn residual(&self, x: &Tensor) -> Result<Tensor> {
        let h = self
            .fc2
            .forward(&self.fc1.forward(&self.ln.forward(x)?)?.gelu_erf()?)?;
        x + h
    }
}

#[derive(Debug, Clone)]
struct EncoderBlock {
    ln: LayerNorm,
    attn: Attention,
    mlp: Mlp,
}

/// The audio encoder.
#[derive(Debug, Clone)]
pub struct Encoder {
    conv1: Conv1d,
    conv2: Conv1d,
    positions: Tensor,
    blocks: Vec<EncoderBlock>,
    ln_post: LayerNorm,
}

/// Sinusoidal positions `[length, channels]`, as OpenAI's (and candle's) `sinusoids`.
fn sinusoids(length: usize, channels: usize, device: &Device) -> Result<Tensor> {
    let half = channels / 2;
    let inc = 10000f32.ln() / (half - 1) as f32;
    let mut v = vec![0f32; length * channels];
    for t in 0..length {
        for i in 0..half {
            let x = t as f32 * (-(i as f32) * inc).exp();
            v[t * channels + i] = x.sin();
            v[t * channels + half + i] = x.cos();
        }
    }
    Tensor::from_vec(v, (length, channels), device)
}

impl Encoder {
    fn load(cfg: &DirConfig, vb: VarBuilder) -> Result<Self> {
        let d = cfg.d_model;
        let conv = |stride| Conv1dConfig {
            padding: 1,
            stride,
            dilation: 1,
            groups: 1,
            cudnn_fwd_algo: None,
        };
        let blocks = (0..cfg.encoder_layers)
            .map(|i| {
                let vb = vb.pp(format!("layers.{i}"));
                Ok(EncoderBlock {
                    ln: layer_norm(d, vb.pp("self_attn_layer_norm"))?,
                    attn: Attention::load(d, cfg.encoder_attention_heads, vb.pp("self_attn"))?,
                    mlp: Mlp::load(d, &vb)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            conv1: candle_nn::conv1d(cfg.num_mel_bins, d, 3, conv(1), vb.pp("conv1"))?,
            conv2: candle_nn::conv1d(d, d, 3, conv(2), vb.pp("conv2"))?,
            positions: sinusoids(cfg.max_source_positions, d, vb.device())?,
            blocks,
            ln_post: layer_norm(d, vb.pp("layer_norm"))?,
        })
    }

    /// Audio features `[frames / 2, d]` of a log-mel spectrogram `[1, n_mels, frames]`.
    pub fn forward(&self, mel: &Tensor) -> Result<Tensor> {
        let x = self.conv1.forward(mel)?.gelu_erf()?;
        let x = self.conv2.forward(&x)?.gelu_erf()?;
        let x = x.squeeze(0)?.t()?; // [t, d]
        let t = x.dim(0)?;
        let mut x = x.broadcast_add(&self.positions.narrow(0, 0, t)?)?;
        for b in &self.blocks {
            let h = b.ln.forward(&x)?;
            let (kt, v) = b.attn.keys_values(&h)?;
            x = (&x + b.attn.forward(&h, &kt, &v)?)?;
            x = b.mlp.residual(&x)?;
        }
        self.ln_post.forward(&x)
    }
}

#[derive(Debug, Clone)]
struct DecoderBlock {
    ln_self: LayerNorm,
    self_attn: Attention,
    ln_cross: LayerNorm,
    cross_attn: Attention,
    mlp: Mlp,
}

/// The text decoder.
#[derive(Debug, Clone)]
pub struct Decoder {
    tokens: Tensor,
    positions: Tensor,
    blocks: Vec<DecoderBlock>,
    ln: LayerNorm,
}

/// One utterance's decoder state: the cross-attention keys and values of its audio and the
/// self-attention cache of the tokens fed so far.
#[derive(Debug)]
pub struct DecodeState {
    cross: Vec<(Tensor, Tensor)>,
    cache: Vec<Option<(Tensor, Tensor)>>,
    fed: usize,
}

impl Decoder {
    fn load(cfg: &DirConfig, vb: VarBuilder) -> Result<Self> {
        let d = cfg.d_model;
        let heads = cfg.decoder_attention_heads;
        let blocks = (0..cfg.decoder_layers)
            .map(|i| {
                let vb = vb.pp(format!("layers.{i}"));
                Ok(DecoderBlock {
                    ln_self: layer_norm(d, vb.pp("self_attn_layer_norm"))?,
                    self_attn: Attention::load(d, heads, vb.pp("self_attn"))?,
                    ln_cross: layer_norm(d, vb.pp("encoder_attn_layer_norm"))?,
                    cross_attn: Attention::load(d, heads, vb.pp("encoder_attn"))?,
                    mlp: Mlp::load(d, &vb)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            tokens: vb.get((cfg.vocab_size, d), "embed_tokens.weight")?,
            positions: vb.get((cfg.max_target_positions, d), "embed_positions.weight")?,
            blocks,
            ln: layer_norm(d, vb.pp("layer_norm"))?,
        })
    }

    /// Positions the decoder has.
    pub fn max_positions(&self) -> usize {
        self.positions.dim(0).unwrap_or(0)
    }

    /// A fresh state for the audio `features` `[t, d]`.
    pub fn start(&self, features: &Tensor) -> Result<DecodeState> {
        let cross = self
            .blocks
            .iter()
            .map(|b| b.cross_attn.keys_values(features))
            .collect::<Result<_>>()?;
        Ok(DecodeState {
            cross,
            cache: vec![None; self.blocks.len()],
            fed: 0,
        })
    }

    /// Feeds the next token; returns the logits `[vocab]` after it.
    pub fn step(&self, state: &mut DecodeState, token: u32) -> Result<Tensor> {
        let h = self.advance(state, &[token])?; // [1, d]
                                                // Tied output projection: [vocab, d] x [d, 1], a matrix-vector product.
        self.tokens.matmul(&h.t()?)?.squeeze(D::Minus1)
    }

    /// Feeds the next tokens when their logits are not needed (a prompt's), all in one
    /// pass (each sees those before it: a causal mask): the output projection, which reads
    /// the whole embedding table and costs most of a step, is skipped.
    pub fn feed(&self, state: &mut DecodeState, tokens: &[u32]) -> Result<()> {
        self.advance(state, tokens).map(drop)
    }

    /// Runs the next tokens through the blocks (one pass, a causal mask when there are
    /// several); returns the final layer-normed `[n, d]`.
    fn advance(&self, state: &mut DecodeState, tokens: &[u32]) -> Result<Tensor> {
        let (n, pos) = (tokens.len(), state.fed);
        if pos + n > self.max_positions() {
            candle::bail!("the decoder holds {} tokens at most", self.max_positions());
        }
        let device = self.tokens.device();
        let ids = Tensor::new(tokens, device)?;
        let mut x = (self.tokens.index_select(&ids, 0)? + self.positions.narrow(0, pos, n)?)?; // [n, d]
                                                                                               // One token sees every key: no mask is needed.
        let mask = if n > 1 {
            let causal = |i: usize, j: usize| if j <= pos + i { 0.0 } else { f32::NEG_INFINITY };
            let m: Vec<f32> = (0..n)
                .flat_map(|i| (0..pos + n).map(move |j| causal(i, j)))
                .collect();
            Some(Tensor::from_vec(m, (n, pos + n), device)?)
        } else {
            None
        };
        for (b, (cache, (ckt, cv))) in self
            .blocks
            .iter()
            .zip(state.cache.iter_mut().zip(&state.cross))
        {
            let h = b.ln_self.forward(&x)?;
            let (kt, v) = b.self_attn.keys_values(&h)?;
            let (kt, v) = match cache.take() {
                None => (kt, v),
                Some((pk, pv)) => (Tensor::cat(&[&pk, &kt], 2)?, Tensor::cat(&[&pv, &v], 1)?),
            };
            x = (&x + b.self_attn.forward_masked(&h, &kt, &v, mask.as_ref())?)?;
            *cache = Some((kt, v));
            let h = b.ln_cross.forward(&x)?;
            x = (&x + b.cross_attn.forward(&h, ckt, cv)?)?;
            x = b.mlp.residual(&x)?;
        }
        state.fed += n;
        self.ln.forward(&x)
    }
}

/// Encoder and decoder.
#[derive(Debug, Clone)]
pub struct WhisperNet {
    /// The audio encoder.
    pub encoder: Encoder,
    /// The text decoder.
    pub decoder: Decoder,
}

impl WhisperNet {
    /// Loads `model.encoder.*` and `model.decoder.*`, every shape checked against `cfg`.
    pub fn load(cfg: &DirConfig, vb: &VarBuilder) -> Result<Self> {
        Ok(Self {
            encoder: Encoder::load(cfg, vb.pp("model.encoder"))?,
            decoder: Decoder::load(cfg, vb.pp("model.decoder"))?,
        })
    }
}
