//! Mimi batched across sessions.
//!
//! Upstream's `Mimi::batched` runs every session's codec in one pass, but its
//! `reset_batch_idx` resets the encoder transformer twice and the decoder transformer never
//! (moshi 0.6.4), so a reused slot would attend to the previous caller's last seconds. This
//! builds the same modules from the same tensor names (a test checks them against upstream's
//! constructor), steps them the same way, and resets every part of a slot.
//!
//! The encoder half ([`BatchedEncoder`]) stands alone too: speech-to-text
//! (`kyutai_stt`) never decodes, so it builds neither the decoder nor its per-slot KV cache.

use candle::{Result, Tensor};
use candle_nn::VarBuilder;
use moshi::conv::{ConvDownsample1d, ConvTrUpsample1d};
use moshi::mimi::Config;
use moshi::quantization::SplitResidualVectorQuantizer;
use moshi::seanet::{SeaNetDecoder, SeaNetEncoder};
use moshi::transformer::Transformer;
use moshi::{StreamMask, StreamTensor, StreamingModule};

/// Mimi's encoder for `batch` streams (SEANet encoder, encoder transformer, downsampling,
/// quantizer); each step takes `[batch, 1, 1920]` samples.
#[derive(Clone, Debug)]
pub struct BatchedEncoder {
    encoder: SeaNetEncoder,
    transformer: Transformer,
    downsample: ConvDownsample1d,
    quantizer: SplitResidualVectorQuantizer,
    batch: usize,
}

impl BatchedEncoder {
    /// Builds it from Mimi's weights.
    pub fn new(batch: usize, cfg: &Config, vb: VarBuilder) -> Result<Self> {
        let dim = cfg.seanet.dimension;
        Ok(Self {
            encoder: SeaNetEncoder::new(&cfg.seanet, vb.pp("encoder"))?,
            transformer: Transformer::new(
                Some(batch),
                dim,
                &cfg.transformer,
                vb.pp("encoder_transformer"),
            )?,
            downsample: ConvDownsample1d::new(stride(cfg), dim, true, true, vb.pp("downsample"))?,
            quantizer: SplitResidualVectorQuantizer::new(
                cfg.quantizer_dim,
                Some(dim),
                Some(dim),
                cfg.quantizer_n_q,
                cfg.quantizer_bins,
                vb.pp("quantizer"),
            )?,
            batch,
        })
    }

    /// Audio `[batch, 1, samples]` → codes `[batch, n_q, frames]` (none until a frame is
    /// complete). Rows whose mask is false keep their state.
    pub fn encode_step(&mut self, xs: &Tensor, m: &StreamMask) -> Result<Option<Tensor>> {
        let xs = self
            .encoder
            .step(&StreamTensor::from_tensor(xs.clone()), m)?;
        let xs = self.transformer.step(&xs, m)?;
        let xs = self.downsample.step(&xs, m)?;
        xs.as_option().map(|x| self.quantizer.encode(x)).transpose()
    }

    /// Fresh state for one slot, in every part.
    pub fn reset_slot(&mut self, slot: usize) -> Result<()> {
        let b = self.batch;
        self.encoder.reset_batch_idx(slot, b)?;
        self.transformer.reset_batch_idx(slot, b)?;
        self.downsample.reset_batch_idx(slot, b)?;
        Ok(())
    }
}

/// Encoder frames per codec frame: the down- and upsampling stride.
fn stride(cfg: &Config) -> usize {
    let encoder_frame_rate = cfg.sample_rate / cfg.seanet.ratios.iter().product::<usize>() as f64;
    (encoder_frame_rate / cfg.frame_rate) as usize
}

/// The codec for `batch` sessions; each step takes `[batch, 1, 1920]` samples.
#[derive(Clone, Debug)]
pub struct BatchedMimi {
    encoder: BatchedEncoder,
    decoder: SeaNetDecoder,
    decoder_transformer: Transformer,
    upsample: ConvTrUpsample1d,
    batch: usize,
}

impl BatchedMimi {
    /// Builds it from Mimi's weights.
    pub fn new(batch: usize, cfg: &Config, vb: VarBuilder) -> Result<Self> {
        let dim = cfg.seanet.dimension;
        Ok(Self {
            encoder: BatchedEncoder::new(batch, cfg, vb.clone())?,
            decoder: SeaNetDecoder::new(&cfg.seanet, vb.pp("decoder"))?,
            decoder_transformer: Transformer::new(
                Some(batch),
                dim,
                &cfg.transformer,
                vb.pp("decoder_transformer"),
            )?,
            upsample: ConvTrUpsample1d::new(stride(cfg), dim, true, true, vb.pp("upsample"))?,
            batch,
        })
    }

    /// Audio `[batch, 1, samples]` → codes `[batch, n_q, frames]` (empty until a frame is
    /// complete). Rows whose mask is false keep their state.
    pub fn encode_step(&mut self, xs: &Tensor, m: &StreamMask) -> Result<Option<Tensor>> {
        self.encoder.encode_step(xs, m)
    }

    /// Codes `[batch, n, 1]` → audio `[batch, 1, samples]`. Rows whose mask is false keep
    /// their state.
    pub fn decode_step(&mut self, codes: &Tensor, m: &StreamMask) -> Result<Option<Tensor>> {
        let emb = StreamTensor::from_tensor(self.encoder.quantizer.decode(codes)?);
        let emb = self.upsample.step(&emb, m)?;
        let out = self.decoder_transformer.step(&emb, m)?;
        Ok(self.decoder.step(&out, m)?.as_option().cloned())
    }

    /// Fresh state for one slot, in every part (both transformers included).
    pub fn reset_slot(&mut self, slot: usize) -> Result<()> {
        let b = self.batch;
        self.encoder.reset_slot(slot)?;
        self.upsample.reset_batch_idx(slot, b)?;
        self.decoder_transformer.reset_batch_idx(slot, b)?;
        self.decoder.reset_batch_idx(slot, b)?;
        Ok(())
    }
}
