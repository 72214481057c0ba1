//! Kyutai STT (`stt-1b-en_fr`, Kyutai's candle release) as a streaming
//! [`crate::Transcriber`].
//!
//! One [`KyutaiStt`] owns the weights on one device and `max_streams` fixed slots, as
//! moshi-server's batched ASR does: every model step runs all slots at once, a
//! `StreamMask` marking the slots that have a frame, and a slot is reset in place
//! (`reset_batch_idx`) when a stream opens or an utterance ends. A step is:
//!
//! 1. **batched**: Mimi's encoder turns every stepping stream's 1920 samples (80 ms at
//!    24 kHz, Mimi's own rate: no resampling) into `audio_codebooks` codes
//!    (Moshi's `mimi::BatchedEncoder`; Mimi's decoder is never built);
//! 2. **batched**: the temporal transformer runs once for all slots (`LmModel::batched`,
//!    a scattered KV cache per slot), fed each stream's previous text token and its
//!    previous frame's codes, exactly as upstream's `moshi::asr::State::step_tokens`;
//! 3. the end-of-turn head (extra head 2, class 0, as Kyutai's `stt-rs --vad` reads it) is
//!    kept per stream for [`crate::Transcriber::end_of_turn`];
//! 4. the text token of every stream is taken greedily (argmax on the device; or sampled
//!    with a seeded per-stream generator when `temperature` > 0) with its log probability;
//!    tokens form words as in `moshi::asr`: from the `delay_tokens`-th step of an
//!    utterance on, the pad (3) and end-of-pause (0) tokens end the word in progress.
//!
//! The step loop is upstream's `asr::State` re-stated over the same modules rather than
//! that type itself, for three things it does not give: the text logits (log
//! probabilities), the word still in progress when an utterance ends (its tokens are
//! private there), and seeded sampling. A test checks that both make the same words.
//!
//! [`Transcriber::step`] feeds each stream's audio in 1920-sample frames (a partial frame
//! waits for the next call), so a stream steps the model once per 80 ms of audio, and
//! answers with the words completed since its last answer as one [`TranscribeOutput::Delta`]
//! (`"hello"`, then `" world"`: the deltas join into the text), or `NotYet`. The text trails
//! the audio by the model's delay (stt-1b: 6 steps, 0.48 s). On `end`, the last partial
//! frame is padded with silence and [`AsrSettings::flush_frames`] frames of silence follow
//! (default `delay_tokens + 2` = 8 frames, 0.64 s, for stt-1b: the delay, one step because
//! a frame's codes reach the LM one step later, one for the pad that closes the last word);
//! a word still open after that is closed too, and the answer is
//! [`TranscribeOutput::Completed`] with the utterance's whole text. Then the slot is reset
//! for the stream's next utterance. The flush steps run inside that `step` call, batched
//! with every other stream ending in it (the others are masked out of those steps).

pub mod config;
pub mod tiny;

#[cfg(test)]
mod tests;

use std::path::Path;

use candle::{DType, Device, IndexOp, Tensor, D};
use moshi::lm::LmModel;
use moshi::nn::MaybeQuantizedVarBuilder;
use moshi::StreamMask;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::moshi::mimi::BatchedEncoder;
use crate::moshi::{err, open_release, TextDecoder};
pub use crate::moshi::{DeviceSpec, FRAME_SAMPLES};
use crate::{
    EndOfTurn, ModelError, StreamId, TokenLogprob, TranscribeInput, TranscribeOutput, Transcriber,
    TranscriberInfo, TRANSCRIBE_SAMPLE_RATE,
};
pub use config::{AsrSettings, SttConfig, SttFiles, PRESETS, TEXT_EOP, TEXT_PAD};

/// How to load Kyutai STT.
#[derive(Clone, Debug)]
pub struct SttOptions {
    /// Preset (architecture) name, overridden by `duet-stt.toml` in the directory.
    pub preset: String,
    /// Device.
    pub device: DeviceSpec,
    /// Streams stepped together (the KV cache is allocated for all of them up front).
    pub max_streams: usize,
    /// Seed of the per-stream samplers (used only when `temperature` > 0); `None`: random.
    pub seed: Option<u64>,
}

impl Default for SttOptions {
    fn default() -> Self {
        Self {
            preset: "stt-1b-en_fr".into(),
            device: DeviceSpec::Cpu,
            max_streams: 8,
            seed: None,
        }
    }
}

/// One open stream: its utterance so far and the tokens fed at its next step.
struct Stream {
    /// Audio not yet stepped (less than a frame between calls).
    pcm: Vec<f32>,
    /// Model steps since the utterance began.
    step: usize,
    /// The last text token (fed at the next step).
    text_token: u32,
    /// The last frame's codes (fed at the next step: audio reaches the LM a step late).
    codes: Vec<u32>,
    /// Tokens of the word in progress, with their log probabilities.
    word: Vec<(u32, f32)>,
    /// The utterance's text so far (finished words).
    text: String,
    /// The tokens of the finished words.
    tokens: Vec<(u32, f32)>,
    /// How much of `text` / `tokens` earlier deltas carried.
    reported_text: usize,
    reported_tokens: usize,
    /// Samples of audio the utterance held.
    samples: u64,
    /// The end-of-turn head's last estimate.
    end_of_turn: Option<f32>,
    rng: ChaCha8Rng,
}

impl Stream {
    fn new(codebooks: usize, pad: u32, seed: u64) -> Self {
        Self {
            pcm: Vec::new(),
            step: 0,
            text_token: 0,
            codes: vec![pad; codebooks],
            word: Vec::new(),
            text: String::new(),
            tokens: Vec::new(),
            reported_text: 0,
            reported_tokens: 0,
            samples: 0,
            end_of_turn: None,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// Forgets the utterance (the sampler goes on).
    fn reset(&mut self, pad: u32) {
        self.pcm.clear();
        self.step = 0;
        self.text_token = 0;
        self.codes.fill(pad);
        self.word.clear();
        self.text.clear();
        self.tokens.clear();
        self.reported_text = 0;
        self.reported_tokens = 0;
        self.samples = 0;
        self.end_of_turn = None;
    }

    /// Appends audio; samples are clamped to full scale and non-finite ones count as
    /// silence (a NaN would poison the slot's encoder state past a reset).
    fn push_pcm(&mut self, pcm: &[f32]) {
        self.pcm.extend(pcm.iter().map(|&v| {
            if v.is_finite() {
                v.clamp(-1.0, 1.0)
            } else {
                0.0
            }
        }));
        self.samples += pcm.len() as u64;
    }

    /// Takes a step's text token, as `moshi::asr`: after the delay, pad and end-of-pause
    /// end the word in progress, any other token extends it.
    fn advance(&mut self, token: u32, logprob: f32, delay: usize, text: &TextDecoder) {
        self.text_token = token;
        self.step += 1;
        if self.step >= delay {
            if token == TEXT_PAD || token == TEXT_EOP {
                self.finish_word(text);
            } else {
                self.word.push((token, logprob));
            }
        }
    }

    /// Appends the word in progress to the text (space-separated).
    fn finish_word(&mut self, text: &TextDecoder) {
        if self.word.is_empty() {
            return;
        }
        let word = decode(text, self.word.iter().map(|w| w.0));
        let word = word.trim();
        if !word.is_empty() {
            if !self.text.is_empty() {
                self.text.push(' ');
            }
            self.text.push_str(word);
            self.tokens.extend_from_slice(&self.word);
        }
        self.word.clear();
    }
}

/// The text of some tokens (byte pieces that never complete a character come out lossy).
fn decode(text: &TextDecoder, ids: impl Iterator<Item = u32>) -> String {
    let (mut pending, mut out) = (Vec::new(), String::new());
    for id in ids {
        text.push(id, &mut pending, &mut out);
    }
    if !pending.is_empty() {
        out.push_str(&String::from_utf8_lossy(&pending));
    }
    out
}

fn token_logprob(text: &TextDecoder, id: u32, logprob: f32) -> TokenLogprob {
    let token = decode(text, std::iter::once(id));
    TokenLogprob {
        bytes: token.as_bytes().to_vec(),
        token,
        logprob,
    }
}

/// One stream's share of a `step` call.
struct Work {
    slot: usize,
    /// Frames of its own audio this call (the padded last one included when ending).
    frames: usize,
    /// Frames it steps this call: its audio, then the flush silence when ending.
    total: usize,
    end: bool,
    failed: Option<String>,
}

/// The Kyutai STT transcriber.
pub struct KyutaiStt {
    info: TranscriberInfo,
    cfg: SttConfig,
    device: Device,
    lm: LmModel,
    encoder: BatchedEncoder,
    text: TextDecoder,
    streams: Vec<Option<Stream>>,
    end_of_turn_head: Option<usize>,
    seed: u64,
    opened: u64,
    model_steps: u64,
}

impl KyutaiStt {
    /// Loads from a directory holding Kyutai's candle release (or one written by
    /// [`tiny::write_tiny_dir`]). Never downloads anything.
    pub fn load(dir: &Path, opts: &SttOptions) -> Result<Self, ModelError> {
        let files = SttFiles::find(dir)?;
        let cfg = files.config(&opts.preset)?;
        // The LM is always safetensors here: `SttFiles` finds no `.gguf`.
        let r = open_release(
            &files.into(),
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
        cfg: SttConfig,
        lm_vb: MaybeQuantizedVarBuilder,
        mimi_vb: candle_nn::VarBuilder,
        text: TextDecoder,
        device: Device,
        opts: &SttOptions,
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
        cfg: SttConfig,
        (lm_vb, lm_name): (MaybeQuantizedVarBuilder, &str),
        (mimi_vb, mimi_name): (candle_nn::VarBuilder, &str),
        text: TextDecoder,
        device: Device,
        opts: &SttOptions,
    ) -> Result<Self, ModelError> {
        cfg.validate()?;
        let n = opts.max_streams;
        if n == 0 {
            return Err(ModelError::Failed("max_streams must be at least 1".into()));
        }
        let lm = LmModel::batched(n, &cfg.lm, lm_vb).map_err(err(lm_name))?;
        let encoder = BatchedEncoder::new(n, &cfg.mimi, mimi_vb).map_err(err(mimi_name))?;
        Ok(Self {
            info: TranscriberInfo {
                name: format!("kyutai-{}", opts.preset),
                max_streams: n,
                streaming: true,
            },
            end_of_turn_head: cfg.end_of_turn_head(),
            cfg,
            device,
            lm,
            encoder,
            text,
            streams: (0..n).map(|_| None).collect(),
            seed: opts.seed.unwrap_or_else(rand::random),
            opened: 0,
            model_steps: 0,
        })
    }

    /// The architecture in use.
    pub fn config(&self) -> &SttConfig {
        &self.cfg
    }

    /// Batched model steps run since loading (each steps every slot with a frame).
    pub fn model_steps(&self) -> u64 {
        self.model_steps
    }

    /// Silence frames an utterance's end feeds.
    pub fn flush_frames(&self) -> usize {
        self.cfg.asr.flush_frames()
    }

    fn stream_mut(&mut self, s: usize) -> &mut Stream {
        self.streams[s].as_mut().expect("stepping stream is open")
    }

    /// Fresh model state for slot `s` (KV cache, encoder) and a fresh utterance.
    fn reset_slot(&mut self, s: usize) -> Result<(), ModelError> {
        let b = self.streams.len();
        self.lm.reset_batch_idx(s, b).map_err(err("reset stream"))?;
        self.encoder.reset_slot(s).map_err(err("reset stream"))?;
        let pad = self.lm.audio_pad_token();
        if let Some(st) = self.streams[s].as_mut() {
            st.reset(pad);
        }
        Ok(())
    }

    /// Steps the model over every stream's frames: round `r` steps each stream that has an
    /// `r`-th frame this call, all of them in one batched step.
    fn run(&mut self, work: &mut [Work]) {
        let b = self.streams.len();
        let rounds = work.iter().map(|w| w.total).max().unwrap_or(0);
        for r in 0..rounds {
            let active: Vec<usize> = work
                .iter()
                .filter(|w| r < w.total && w.failed.is_none())
                .map(|w| w.slot)
                .collect();
            if active.is_empty() {
                break;
            }
            let mut pcm = vec![0f32; b * FRAME_SAMPLES];
            for &s in &active {
                let src = &self.streams[s].as_ref().expect("open").pcm;
                let start = (r * FRAME_SAMPLES).min(src.len());
                let end = (start + FRAME_SAMPLES).min(src.len());
                pcm[s * FRAME_SAMPLES..s * FRAME_SAMPLES + (end - start)]
                    .copy_from_slice(&src[start..end]);
            }
            match self.model_step(&active, pcm) {
                Ok(failed) => {
                    for (s, why) in failed {
                        if let Some(w) = work.iter_mut().find(|w| w.slot == s) {
                            w.failed = Some(why);
                        }
                    }
                }
                Err(e) => {
                    let why = format!("Kyutai STT step: {e}");
                    for w in work.iter_mut().filter(|w| active.contains(&w.slot)) {
                        w.failed = Some(why.clone());
                    }
                }
            }
        }
        for w in work.iter() {
            let st = self.stream_mut(w.slot);
            let used = (w.frames * FRAME_SAMPLES).min(st.pcm.len());
            st.pcm.drain(..used);
        }
    }

    /// One batched step of the slots in `active` over `pcm` (`[slots × 1920]`, zeros for
    /// the others). Returns the streams that failed on their own (non-finite logits).
    fn model_step(
        &mut self,
        active: &[usize],
        pcm: Vec<f32>,
    ) -> candle::Result<Vec<(usize, String)>> {
        let b = self.streams.len();
        let mut mask = vec![false; b];
        for &s in active {
            mask[s] = true;
        }
        let mask = StreamMask::new(mask, &self.device)?;
        let x = Tensor::from_vec(pcm, (b, 1, FRAME_SAMPLES), &self.device)?;
        let Some(codes) = self.encoder.encode_step(&x, &mask)? else {
            return Ok(Vec::new());
        };
        let (_, n_q, frames) = codes.dims3()?;
        let n = self.cfg.lm.audio_codebooks;
        if n_q < n {
            candle::bail!("Mimi made {n_q} codebooks, the model needs {n}");
        }
        let mut failed = Vec::new();
        for f in 0..frames {
            let codes = codes.i((.., ..n, f))?.to_vec2::<u32>()?;
            self.lm_step(active, &codes, &mask, &mut failed)?;
        }
        Ok(failed)
    }

    /// The LM's step over one frame of codes (`codes[slot]`), as `asr::State::step_tokens`.
    fn lm_step(
        &mut self,
        active: &[usize],
        codes: &[Vec<u32>],
        mask: &StreamMask,
        failed: &mut Vec<(usize, String)>,
    ) -> candle::Result<()> {
        let b = self.streams.len();
        let n = self.cfg.lm.audio_codebooks;
        let pad = self.lm.audio_pad_token();
        let start = self.lm.text_start_token();
        let mut text = vec![start; b];
        let mut audio = vec![vec![pad; b]; n];
        for &s in active {
            let st = self.stream_mut(s);
            if st.step > 0 {
                text[s] = st.text_token;
                for (col, &c) in audio.iter_mut().zip(&st.codes) {
                    col[s] = c;
                }
            }
            st.codes.copy_from_slice(&codes[s][..n]);
        }
        let dev = &self.device;
        let text = Tensor::from_vec(text, (b, 1), dev)?;
        let audio = audio
            .into_iter()
            .map(|col| Tensor::from_vec(col, (b, 1), dev).map(Some))
            .collect::<candle::Result<Vec<_>>>()?;
        let (logits, ys) = self.lm.forward_cond(Some(text), audio, None, mask)?;
        self.model_steps += 1;
        if let Some(h) = self.end_of_turn_head {
            let heads = self.lm.extra_heads(&ys)?;
            let p = candle_nn::ops::softmax_last_dim(&heads[h].to_dtype(DType::F32)?)?
                .i((.., 0, 0))?
                .to_vec1::<f32>()?;
            for &s in active {
                self.stream_mut(s).end_of_turn = Some(p[s]);
            }
        }
        let tokens = self.text_tokens(&logits.i((.., 0))?, active)?;
        let delay = self.cfg.asr.delay_tokens;
        for (&s, (t, lp)) in active.iter().zip(tokens) {
            if !lp.is_finite() || t as usize >= self.cfg.lm.text_out_vocab_size {
                failed.push((s, "text logits are not finite".into()));
                continue;
            }
            let st = self.streams[s].as_mut().expect("open");
            st.advance(t, lp, delay, &self.text);
        }
        Ok(())
    }

    /// Each active slot's text token and its log probability, from `[slots, vocab]`
    /// logits: the argmax on the device (greedy), or a draw from the stream's generator.
    fn text_tokens(
        &mut self,
        logits: &Tensor,
        active: &[usize],
    ) -> candle::Result<Vec<(u32, f32)>> {
        let temperature = self.cfg.asr.temperature;
        if temperature <= 0.0 {
            let ids = logits.argmax(D::Minus1)?;
            let lsm = candle_nn::ops::log_softmax(&logits.to_dtype(DType::F32)?, D::Minus1)?;
            let lp = lsm.gather(&ids.unsqueeze(1)?, 1)?.squeeze(1)?;
            let (ids, lp) = (ids.to_vec1::<u32>()?, lp.to_vec1::<f32>()?);
            return Ok(active.iter().map(|&s| (ids[s], lp[s])).collect());
        }
        let idx: Vec<u32> = active.iter().map(|&s| s as u32).collect();
        let idx = Tensor::from_vec(idx, active.len(), &self.device)?;
        let rows = logits.index_select(&idx, 0)?.to_dtype(DType::F32)?;
        let lsm = candle_nn::ops::log_softmax(&rows, D::Minus1)?.to_vec2::<f32>()?;
        let mut out = Vec::with_capacity(active.len());
        for (&s, row) in active.iter().zip(&lsm) {
            let rng = &mut self.stream_mut(s).rng;
            let t = sample(row, temperature, rng);
            out.push((t, row.get(t as usize).copied().unwrap_or(f32::NAN)));
        }
        Ok(out)
    }

    /// A stream's answer once its frames are stepped.
    fn answer(&mut self, w: &Work, logprobs: bool) -> Result<TranscribeOutput, ModelError> {
        if let Some(why) = &w.failed {
            self.reset_slot(w.slot)?;
            return Err(ModelError::Failed(why.clone()));
        }
        let text = &self.text;
        let st = self.streams[w.slot].as_mut().expect("open");
        let lps = |tokens: &[(u32, f32)]| -> Vec<TokenLogprob> {
            if !logprobs {
                return Vec::new();
            }
            tokens
                .iter()
                .map(|&(id, lp)| token_logprob(text, id, lp))
                .collect()
        };
        if w.end {
            st.finish_word(text);
            let out = TranscribeOutput::Completed {
                text: std::mem::take(&mut st.text),
                logprobs: lps(&st.tokens),
                audio_seconds: st.samples as f64 / f64::from(TRANSCRIBE_SAMPLE_RATE),
                language: None,
            };
            self.reset_slot(w.slot)?;
            return Ok(out);
        }
        if st.text.len() == st.reported_text {
            return Ok(TranscribeOutput::NotYet);
        }
        let out = TranscribeOutput::Delta {
            text: st.text[st.reported_text..].to_string(),
            logprobs: lps(&st.tokens[st.reported_tokens..]),
        };
        st.reported_text = st.text.len();
        st.reported_tokens = st.tokens.len();
        Ok(out)
    }
}

/// A draw from `softmax(logprobs / temperature)`.
fn sample(logprobs: &[f32], temperature: f32, rng: &mut ChaCha8Rng) -> u32 {
    let max = logprobs
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(f32::NEG_INFINITY, f32::max);
    let w: Vec<f32> = logprobs
        .iter()
        .map(|&v| {
            if v.is_finite() {
                ((v - max) / temperature).exp()
            } else {
                0.0
            }
        })
        .collect();
    let total: f32 = w.iter().sum();
    if !(total.is_finite() && total > 0.0) {
        return 0;
    }
    let mut u = rng.random::<f32>() * total;
    for (i, &x) in w.iter().enumerate() {
        if u < x {
            return i as u32;
        }
        u -= x;
    }
    w.iter().rposition(|&x| x > 0.0).unwrap_or(0) as u32
}

impl Transcriber for KyutaiStt {
    fn info(&self) -> &TranscriberInfo {
        &self.info
    }

    fn warmup(&mut self) -> Result<(), ModelError> {
        let s = self.open_stream()?;
        let silence = vec![0f32; FRAME_SAMPLES];
        let mut out = Vec::new();
        self.step(
            &[TranscribeInput {
                stream: s,
                pcm: &silence,
                end: true,
                logprobs: false,
            }],
            &mut out,
        );
        self.close_stream(s);
        match out.pop() {
            Some(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }

    fn open_stream(&mut self) -> Result<StreamId, ModelError> {
        let s = crate::transcribe::free_slot(&self.streams)?;
        let seed = self.seed ^ self.opened.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.opened += 1;
        let pad = self.lm.audio_pad_token();
        self.streams[s] = Some(Stream::new(self.cfg.lm.audio_codebooks, pad, seed));
        if let Err(e) = self.reset_slot(s) {
            self.streams[s] = None;
            return Err(e);
        }
        Ok(s)
    }

    fn close_stream(&mut self, stream: StreamId) {
        crate::transcribe::clear_slot(&mut self.streams, stream);
    }

    fn step(
        &mut self,
        batch: &[TranscribeInput<'_>],
        out: &mut Vec<Result<TranscribeOutput, ModelError>>,
    ) {
        let flush = self.flush_frames();
        // Checks first; a bad input fails its own stream only.
        let mut work: Vec<Work> = Vec::with_capacity(batch.len());
        let mut plan: Vec<Result<usize, ModelError>> = Vec::with_capacity(batch.len());
        for inp in batch {
            let s = inp.stream;
            plan.push(if !matches!(self.streams.get(s), Some(Some(_))) {
                Err(ModelError::UnknownSlot(s))
            } else if work.iter().any(|w| w.slot == s) {
                Err(ModelError::Failed(format!("stream {s} twice in one step")))
            } else {
                let st = self.stream_mut(s);
                st.push_pcm(inp.pcm);
                let (frames, total) = if inp.end {
                    let frames = st.pcm.len().div_ceil(FRAME_SAMPLES);
                    // Nothing heard at all: nothing to flush.
                    let tail = if st.samples > 0 { flush } else { 0 };
                    (frames, frames + tail)
                } else {
                    let frames = st.pcm.len() / FRAME_SAMPLES;
                    (frames, frames)
                };
                work.push(Work {
                    slot: s,
                    frames,
                    total,
                    end: inp.end,
                    failed: None,
                });
                Ok(work.len() - 1)
            });
        }
        self.run(&mut work);
        for (inp, p) in batch.iter().zip(plan) {
            out.push(p.and_then(|i| self.answer(&work[i], inp.logprobs)));
        }
    }

    fn end_of_turn(&self, stream: StreamId) -> EndOfTurn {
        EndOfTurn {
            probability: self
                .streams
                .get(stream)
                .and_then(Option::as_ref)
                .and_then(|s| s.end_of_turn),
        }
    }
}
