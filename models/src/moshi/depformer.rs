//! Moshi's depth transformer, batched across sessions.
//!
//! Upstream's `DepFormer::sample` takes one session at a time (it bails on a batch of
//! more than one), so every tick would run `sessions × codebooks` tiny transformer passes,
//! each a string of small kernel launches. This one builds the same modules from the same
//! tensor names (`depformer.{slice}.{transformer,emb,linear_in,linear_out}`; a test checks
//! the names against upstream's constructor) and runs each codebook slice once for every
//! active session together. Its KV cache lives only within one tick (reset at slice 0 and
//! handed from slice to slice), so no per-session state is kept here.

use candle::{Device, Module, Result, Tensor};
use moshi::lm::DepFormerConfig;
use moshi::nn::{linear, MaybeQuantizedEmbedding, MaybeQuantizedLinear, MaybeQuantizedVarBuilder};
use moshi::streaming::StreamingModule;
use moshi::transformer::StreamingTransformer;

#[derive(Clone, Debug)]
struct Slice {
    transformer: StreamingTransformer,
    emb: MaybeQuantizedEmbedding,
    low_rank: Option<MaybeQuantizedLinear>,
    linear_in: MaybeQuantizedLinear,
    linear_out: MaybeQuantizedLinear,
}

/// Picks a token for (row, slice) from that row's logits.
pub type SampleFn<'a> = dyn FnMut(usize, usize, &[f32]) -> Result<u32> + 'a;

/// The depth transformer: one slice per generated codebook.
#[derive(Clone, Debug)]
pub struct BatchedDepformer {
    slices: Vec<Slice>,
}

impl BatchedDepformer {
    /// Builds it under `vb` (the `depformer` prefix).
    pub fn new(
        text_vocab_size: usize,
        audio_vocab_size: usize,
        main_dim: usize,
        cfg: &DepFormerConfig,
        vb: MaybeQuantizedVarBuilder,
    ) -> Result<Self> {
        let dim = cfg.transformer.d_model;
        let mut slices = Vec::with_capacity(cfg.num_slices);
        for i in 0..cfg.num_slices {
            let vb = vb.pp(i);
            let in_vocab = if i == 0 {
                text_vocab_size
            } else {
                audio_vocab_size
            };
            let vb_e = vb.pp("emb");
            let (emb, low_rank) = match cfg.low_rank_embeddings {
                None => (MaybeQuantizedEmbedding::new(in_vocab, dim, vb_e)?, None),
                Some(r) => (
                    MaybeQuantizedEmbedding::new(in_vocab, r, vb_e.clone())?,
                    Some(linear(r, dim, false, vb_e.pp("low_rank"))?),
                ),
            };
            slices.push(Slice {
                transformer: StreamingTransformer::new(&cfg.transformer, vb.pp("transformer"))?,
                emb,
                low_rank,
                linear_in: linear(main_dim, dim, false, vb.pp("linear_in"))?,
                // The depformer never emits the audio padding token.
                linear_out: linear(dim, audio_vocab_size - 1, false, vb.pp("linear_out"))?,
            });
        }
        Ok(Self { slices })
    }

    /// Samples one token per codebook for every row of `xs` (`[rows, 1, main_dim]`, the
    /// temporal transformer's output for each active session).
    ///
    /// `text[r]` is row r's text token for this step; `feed(r, slice, token)` says which
    /// token enters the next slice (the sampled one, or a forced padding token before the
    /// acoustic delay); `sample(r, slice, logits)` picks a token from row r's logits.
    /// Returns `tokens[r][slice]`.
    pub fn sample(
        &mut self,
        xs: &Tensor,
        text: &[u32],
        feed: &dyn Fn(usize, usize, u32) -> u32,
        sample: &mut SampleFn<'_>,
    ) -> Result<Vec<Vec<u32>>> {
        let rows = text.len();
        let dev: Device = xs.device().clone();
        let mut tokens = vec![Vec::with_capacity(self.slices.len()); rows];
        let mut last: Vec<u32> = text.to_vec();
        for s in 0..self.slices.len() {
            if s == 0 {
                self.slices[0].transformer.reset_state();
            } else {
                let (done, rest) = self.slices.split_at_mut(s);
                rest[0].transformer.copy_state(&done[s - 1].transformer)?;
            }
            let slice = &mut self.slices[s];
            let ids = Tensor::from_vec(last.clone(), (rows, 1), &dev)?;
            let mut emb = slice.emb.forward(&ids)?;
            if let Some(lr) = &slice.low_rank {
                emb = lr.forward(&emb)?;
            }
            let x = slice.linear_in.forward(xs)?.broadcast_add(&emb)?;
            let x = slice.transformer.forward(&x)?;
            let logits = slice
                .linear_out
                .forward(&x)?
                .squeeze(1)?
                .to_dtype(candle::DType::F32)?
                .to_vec2::<f32>()?;
            for (r, row) in logits.iter().enumerate() {
                let t = sample(r, s, row)?;
                tokens[r].push(t);
                last[r] = feed(r, s, t);
            }
        }
        Ok(tokens)
    }
}
