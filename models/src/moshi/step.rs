//! One batched step of every active session: Mimi encode, temporal transformer, text
//! sampling, depth transformer, Mimi decode, transcript text and the speaking state.

use candle::{DType, IndexOp, Tensor};
use moshi::StreamMask;

use super::config::Generation;
use super::{Depformer, MimiDecode, MoshiModel, Sampling, Slot, SlotTokens, FRAME_SAMPLES, UNSET};
use crate::{ModelError, StepOutput};

impl MoshiModel {
    pub(super) fn listen_after_frames(&self) -> u32 {
        (self.cfg.generation.listen_after_ms / 80).max(1)
    }

    /// The batched part of a step: every slot with codes goes through the LM and the
    /// depformer together. Returns per active slot (text token, audio tokens).
    fn step_lm(&mut self, active: &[usize]) -> Result<Vec<SlotTokens>, candle::Error> {
        let inputs = self.lm_inputs(active);
        let t_lm = self.now();
        let (ys, text_logits) = self.lm_forward(inputs, active)?;
        let (mut results, text_tokens) = self.sample_text(active, &text_logits);
        let t_dep = self.now();
        self.times.lm += t_dep.saturating_sub(t_lm);
        let (audio, failed) = self.sample_audio(active, &ys, &text_tokens)?;
        for (r, toks) in audio.into_iter().enumerate() {
            if failed[r] {
                results[r] = Err(ModelError::Failed("audio logits are not finite".into()));
            } else if let Ok((_, a)) = &mut results[r] {
                *a = toks;
            }
        }
        self.times.depformer += self.now().saturating_sub(t_dep);
        Ok(results)
    }

    /// The LM's host-side inputs: each active slot's last text token and delayed audio
    /// tokens ([`input_token`]); idle slots are masked out and fed padding.
    fn lm_inputs(&self, active: &[usize]) -> LmInputs {
        let g = &self.cfg.generation;
        let b = self.slots.len();
        let total = g.generated_audio_codebooks + g.input_audio_codebooks;
        let pad = self.lm.audio_pad_token();
        let mut inputs = LmInputs {
            mask: vec![false; b],
            text: vec![g.text_start_token; b],
            audio: vec![vec![pad; b]; total],
        };
        for &s in active {
            let slot = self.slots[s].as_ref().expect("active slot is open");
            inputs.mask[s] = true;
            inputs.text[s] = slot.last_text;
            for (cb, col) in inputs.audio.iter_mut().enumerate() {
                col[s] = input_token(slot, cb, g.generated_audio_codebooks, g.acoustic_delay, pad);
            }
        }
        inputs
    }

    /// Runs the temporal transformer over every slot at once; returns the active rows'
    /// hidden states (the depformer's input) and their text logits on the host.
    fn lm_forward(
        &mut self,
        inputs: LmInputs,
        active: &[usize],
    ) -> candle::Result<(Tensor, Vec<Vec<f32>>)> {
        let b = self.slots.len();
        let dev = &self.device;
        let text = Tensor::from_vec(inputs.text, (b, 1), dev)?;
        let audio = inputs
            .audio
            .into_iter()
            .map(|col| Tensor::from_vec(col, (b, 1), dev).map(Some))
            .collect::<candle::Result<Vec<_>>>()?;
        let mask = StreamMask::new(inputs.mask, dev)?;
        let (logits, ys) = self.lm.forward(Some(text), audio, &mask)?;
        let idx = Tensor::from_vec(
            active.iter().map(|&s| s as u32).collect(),
            active.len(),
            dev,
        )?;
        let ys = ys.index_select(&idx, 0)?;
        let text_logits = logits
            .index_select(&idx, 0)?
            .i((.., 0))?
            .to_dtype(DType::F32)?
            .to_vec2::<f32>()?;
        Ok((ys, text_logits))
    }

    /// Samples each active slot's text token. A slot whose logits are not finite gets an
    /// error, and the depformer is fed the pad token for it so that the batch still runs.
    fn sample_text(
        &mut self,
        active: &[usize],
        text_logits: &[Vec<f32>],
    ) -> (Vec<SlotTokens>, Vec<u32>) {
        let text_pad = self.cfg.generation.text_pad_token;
        let mut results: Vec<SlotTokens> = Vec::with_capacity(active.len());
        let mut text_tokens = Vec::with_capacity(active.len());
        for (r, &s) in active.iter().enumerate() {
            let slot = self.slots[s].as_mut().expect("active slot is open");
            match slot.text_sampler.sample(&text_logits[r]) {
                Some(t) => {
                    text_tokens.push(t);
                    results.push(Ok((t, Vec::new())));
                }
                None => {
                    text_tokens.push(text_pad);
                    results.push(Err(ModelError::Failed("text logits are not finite".into())));
                }
            }
        }
        (results, text_tokens)
    }

    /// The depformer's audio tokens per active row, and which rows had non-finite logits.
    /// Before the acoustic delay, the acoustic codebooks are forced to padding.
    fn sample_audio(
        &mut self,
        active: &[usize],
        ys: &Tensor,
        text_tokens: &[u32],
    ) -> candle::Result<(Vec<Vec<u32>>, Vec<bool>)> {
        let g = &self.cfg.generation;
        let pad = self.lm.audio_pad_token();
        let delay = g.acoustic_delay;
        let pre_delay: Vec<bool> = active
            .iter()
            .map(|&s| self.slots[s].as_ref().is_some_and(|sl| sl.step < delay))
            .collect();
        let feed = |r: usize, slice: usize, t: u32| if pre_delay[r] && slice > 0 { pad } else { t };
        let mut failed = vec![false; active.len()];
        let audio = match &mut self.depformer {
            Depformer::Batched(d) => {
                let slots = &mut self.slots;
                let mut sample = |r: usize, _slice: usize, logits: &[f32]| -> candle::Result<u32> {
                    let slot = slots[active[r]].as_mut().expect("active slot is open");
                    Ok(slot.audio_sampler.sample(logits).unwrap_or_else(|| {
                        failed[r] = true;
                        0
                    }))
                };
                d.sample(ys, text_tokens, &feed, &mut sample)?
            }
            Depformer::PerSession(d) => {
                let rows: Vec<(u64, bool)> = active
                    .iter()
                    .zip(&pre_delay)
                    .map(|(&s, &pre)| {
                        let step = self.slots[s].as_ref().map_or(0, |sl| sl.step);
                        (slot_step_seed(self.seed, s, step), pre)
                    })
                    .collect();
                sample_per_session(d, ys, text_tokens, &rows, g, pad)?
            }
        };
        Ok((audio, failed))
    }

    /// Writes a slot's new tokens, advances it, and returns the generated codes that are
    /// now due for decoding (none before the acoustic delay or while any is padding).
    fn advance_slot(&mut self, s: usize, text_token: u32, audio: &[u32]) -> Option<Vec<u32>> {
        let g = &self.cfg.generation;
        let pad = self.lm.audio_pad_token();
        let slot = self.slots[s].as_mut().expect("open slot");
        let step = slot.step;
        for (c, &t) in audio.iter().enumerate() {
            let at = if c == 0 {
                step
            } else {
                step.saturating_sub(g.acoustic_delay)
            };
            slot.history.row_mut(at)[c] = t;
        }
        slot.last_text = text_token;
        slot.step += 1;
        if slot.step <= g.acoustic_delay {
            return None;
        }
        let row =
            &slot.history.row(slot.step - g.acoustic_delay - 1)[..g.generated_audio_codebooks];
        row.iter().all(|&t| t < pad).then(|| row.to_vec())
    }

    /// A slot's output for this step: its audio, the text of its token, whether it speaks.
    fn emit_slot(&mut self, s: usize, text_token: u32, pcm: Vec<f32>) -> StepOutput {
        let listen_after = self.listen_after_frames();
        let g = &self.cfg.generation;
        let slot = self.slots[s].as_mut().expect("open slot");
        let mut text = String::new();
        let word = text_token != g.text_pad_token
            && text_token != g.text_eop_token
            && text_token != g.text_start_token;
        if word {
            self.text
                .push(text_token, &mut slot.pending_bytes, &mut text);
        }
        let loud = duet_media::pcm::rms_dbfs(&pcm) >= g.voice_dbfs;
        if word || loud {
            slot.speaking = true;
            slot.quiet_frames = 0;
        } else if slot.speaking {
            slot.quiet_frames += 1;
            if slot.quiet_frames >= listen_after {
                slot.speaking = false;
            }
        }
        StepOutput {
            audio: pcm,
            text,
            tool_call: None,
            failed: None,
            end_of_turn: false,
            speaking: slot.speaking,
        }
    }

    /// Mimi-encodes every stepping slot's frame in one pass and stores the user codes.
    /// `false` when Mimi has no complete frame yet (then nobody steps the LM). Samples are
    /// clamped to full scale and non-finite ones count as silence: a NaN would otherwise
    /// poison the slot's encoder caches, past a reset, into the next session on the slot.
    pub(super) fn encode(&mut self, stepping: &[(usize, &[f32])]) -> candle::Result<bool> {
        let g = &self.cfg.generation;
        let b = self.slots.len();
        let mut pcm = vec![0f32; b * FRAME_SAMPLES];
        let mut mask = vec![false; b];
        for &(s, frame) in stepping {
            let row = &mut pcm[s * FRAME_SAMPLES..(s + 1) * FRAME_SAMPLES];
            for (d, &v) in row.iter_mut().zip(frame) {
                *d = if v.is_finite() {
                    v.clamp(-1.0, 1.0)
                } else {
                    0.0
                };
            }
            mask[s] = true;
        }
        let x = Tensor::from_vec(pcm, (b, 1, FRAME_SAMPLES), &self.device)?;
        let mask = StreamMask::new(mask, &self.device)?;
        let Some(codes) = self.mimi.encode_step(&x, &mask)? else {
            return Ok(false);
        };
        let (_, n_q, t) = codes.dims3()?;
        if t != 1 || n_q < g.input_audio_codebooks {
            candle::bail!("Mimi produced {n_q}x{t} codes for one frame");
        }
        let codes = codes
            .i((.., ..g.input_audio_codebooks, 0))?
            .to_vec2::<u32>()?;
        for &(s, _) in stepping {
            let slot = self.slots[s].as_mut().expect("open slot");
            let row = slot.history.row_mut(slot.step);
            row.fill(UNSET);
            row[g.generated_audio_codebooks..].copy_from_slice(&codes[s]);
        }
        Ok(true)
    }

    /// Mimi-decodes the due codes of every slot (one result per entry of `due`); slots
    /// without codes keep their decoder state and get silence. Decoding per session, an
    /// error is that session's; a batched pass fails every entry.
    pub(super) fn decode(&mut self, due: &[(usize, Vec<u32>)]) -> Vec<Result<Vec<f32>, String>> {
        if due.is_empty() {
            return Vec::new();
        }
        let n = self.cfg.generation.generated_audio_codebooks;
        if let MimiDecode::PerSession { slots, .. } = &mut self.mimi_decode {
            let device = &self.device;
            return due
                .iter()
                .map(|(s, c)| {
                    let mimi = slots[*s].as_mut().ok_or("no decoder for the slot")?;
                    let mut one = || -> candle::Result<Vec<f32>> {
                        let codes = Tensor::from_vec(c.clone(), (1, n, 1), device)?;
                        match mimi.decode_step(&codes.into(), &().into())?.as_option() {
                            Some(p) => p.flatten_all()?.to_vec1::<f32>(),
                            None => Ok(Vec::new()),
                        }
                    };
                    let mut v = one().map_err(|e| e.to_string())?;
                    v.resize(FRAME_SAMPLES, 0.0);
                    Ok(v)
                })
                .collect();
        }
        match self.decode_batched(due, n) {
            Ok(out) => out.into_iter().map(Ok).collect(),
            Err(e) => due.iter().map(|_| Err(e.to_string())).collect(),
        }
    }

    /// [`Self::decode`] in one batched Mimi pass.
    fn decode_batched(
        &mut self,
        due: &[(usize, Vec<u32>)],
        n: usize,
    ) -> candle::Result<Vec<Vec<f32>>> {
        let b = self.slots.len();
        let mut codes = vec![0u32; b * n];
        let mut mask = vec![false; b];
        for (s, c) in due {
            codes[s * n..(s + 1) * n].copy_from_slice(c);
            mask[*s] = true;
        }
        let codes = Tensor::from_vec(codes, (b, n, 1), &self.device)?;
        let mask = StreamMask::new(mask, &self.device)?;
        let mut out = Vec::with_capacity(due.len());
        match self.mimi.decode_step(&codes, &mask)? {
            None => out.resize(due.len(), vec![0f32; FRAME_SAMPLES]),
            Some(pcm) => {
                let pcm = pcm.i((.., 0))?.to_vec2::<f32>()?;
                for (s, _) in due {
                    let mut v = pcm[*s].clone();
                    v.resize(FRAME_SAMPLES, 0.0);
                    out.push(v);
                }
            }
        }
        Ok(out)
    }

    /// One tick for the slots in `stepping`; one result per entry, in order.
    pub(super) fn step_slots(
        &mut self,
        stepping: &[(usize, &[f32])],
    ) -> Vec<Result<StepOutput, ModelError>> {
        let fail_all = |what: &str, e: candle::Error| -> Vec<Result<StepOutput, ModelError>> {
            let msg = format!("{what}: {e}");
            (0..stepping.len())
                .map(|_| Err(ModelError::Failed(msg.clone())))
                .collect()
        };
        let t0 = self.now();
        self.times.steps += 1;
        let encoded = self.encode(stepping);
        self.times.encode += self.now().saturating_sub(t0);
        match encoded {
            Err(e) => return fail_all("Mimi encode", e),
            Ok(false) => return self.silent_outputs(stepping),
            Ok(true) => {}
        }
        let active: Vec<usize> = stepping.iter().map(|&(s, _)| s).collect();
        match self.step_lm(&active) {
            Ok(tokens) => self.decode_and_emit(&active, tokens),
            Err(e) => fail_all("model step", e),
        }
    }

    /// Outputs while Mimi has no complete frame yet: silence, speaking state unchanged.
    fn silent_outputs(&self, stepping: &[(usize, &[f32])]) -> Vec<Result<StepOutput, ModelError>> {
        stepping
            .iter()
            .map(|&(s, _)| {
                Ok(StepOutput {
                    audio: vec![0.0; FRAME_SAMPLES],
                    speaking: self.slots[s].as_ref().is_some_and(|sl| sl.speaking),
                    ..StepOutput::default()
                })
            })
            .collect()
    }

    /// Advances every slot with tokens, decodes the codes now due in one call and emits
    /// each slot's output; a slot with nothing due yet gets silence.
    fn decode_and_emit(
        &mut self,
        active: &[usize],
        tokens: Vec<SlotTokens>,
    ) -> Vec<Result<StepOutput, ModelError>> {
        let t_decode = self.now();
        let mut due = Vec::new();
        for (&s, t) in active.iter().zip(&tokens) {
            if let Ok((text, audio)) = t {
                if let Some(codes) = self.advance_slot(s, *text, audio) {
                    due.push((s, codes));
                }
            }
        }
        let decoded = self.decode(&due);
        let mut pcm = due.iter().map(|d| d.0).zip(decoded).peekable();
        let mut out = Vec::with_capacity(active.len());
        for (&s, t) in active.iter().zip(tokens) {
            out.push(t.and_then(|(text, _)| {
                let audio = match pcm.peek() {
                    Some((ds, _)) if *ds == s => match pcm.next().map(|p| p.1) {
                        Some(Err(e)) => {
                            return Err(ModelError::Failed(format!("Mimi decode: {e}")))
                        }
                        Some(Ok(a)) => a,
                        None => vec![0f32; FRAME_SAMPLES],
                    },
                    _ => vec![0f32; FRAME_SAMPLES],
                };
                Ok(self.emit_slot(s, text, audio))
            }));
        }
        self.times.decode += self.now().saturating_sub(t_decode);
        out
    }
}

/// The LM's inputs for one step, on the host: the slot mask, the text column and one
/// column per audio codebook, each with a row per slot.
struct LmInputs {
    mask: Vec<bool>,
    text: Vec<u32>,
    audio: Vec<Vec<u32>>,
}

/// Upstream's single-session depformer, row by row (`rows[r]`: the row's sampler seed and
/// whether it is before the acoustic delay). Slower than the batched one; kept to check it.
fn sample_per_session(
    d: &mut moshi::lm::DepFormer,
    ys: &Tensor,
    text_tokens: &[u32],
    rows: &[(u64, bool)],
    g: &Generation,
    pad: u32,
) -> candle::Result<Vec<Vec<u32>>> {
    use candle_transformers::generation::LogitsProcessor;
    let mut all = Vec::with_capacity(rows.len());
    for (r, (&t, &(seed, pre_delay))) in text_tokens.iter().zip(rows).enumerate() {
        let mut lp = LogitsProcessor::from_sampling(seed, upstream_sampling(&g.audio));
        let forced: Vec<Option<u32>> = if pre_delay {
            (0..g.generated_audio_codebooks)
                .map(|c| (c > 0).then_some(pad))
                .collect()
        } else {
            Vec::new()
        };
        all.push(d.sample(&ys.narrow(0, r, 1)?, Some(t), &forced, &mut lp)?);
    }
    Ok(all)
}

/// Upstream's sampler for `Sampling` (top_k 0: all tokens).
fn upstream_sampling(a: &Sampling) -> candle_transformers::generation::Sampling {
    use candle_transformers::generation::Sampling as Upstream;
    let temperature = f64::from(a.temperature);
    match (a.temperature <= 0.0, a.top_k) {
        (true, _) => Upstream::ArgMax,
        (false, 0) => Upstream::All { temperature },
        (false, k) => Upstream::TopK { k, temperature },
    }
}

/// A per-session depformer sampler's seed, distinct per slot and step so that draws do
/// not repeat.
fn slot_step_seed(seed: u64, slot: usize, step: usize) -> u64 {
    seed ^ (slot as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (step as u64).rotate_left(32)
}

/// The token fed for codebook `cb` at the slot's current step (as upstream's
/// `lm_generate_multistream::State::step_`: first codebook of each stream from the
/// previous step, the others `acoustic_delay` further back; padding before that).
fn input_token(slot: &Slot, cb: usize, generated: usize, delay: usize, pad: u32) -> u32 {
    let step = slot.step;
    let t = if cb == 0 || cb == generated {
        if step == 0 {
            pad
        } else {
            slot.history.row(step - 1)[cb]
        }
    } else if step <= delay {
        pad
    } else {
        slot.history.row(step - delay - 1)[cb]
    };
    if t == UNSET {
        pad
    } else {
        t
    }
}
