//! The transcription seam: [`Transcriber`], beside [`crate::DuplexModel`]. A transcriber
//! turns each session's user audio into text. The transcription loop thread of a device owns
//! one, opens a stream per session and steps every stream that has work in one batch, as the
//! model loop steps slots.
//!
//! Two kinds exist: utterance transcribers (Whisper) hear a committed item whole and answer
//! once it ended; streaming ones (Kyutai STT) hear the audio as it arrives and send words as
//! they come. Both speak the same values: [`TranscribeOutput::NotYet`] when there is nothing
//! to say yet, deltas, then one completion per utterance.

use crate::model::ModelError;

/// Sample rate every transcriber consumes: the session rate (24 kHz); a transcriber
/// resamples to its own rate.
pub const TRANSCRIBE_SAMPLE_RATE: u32 = crate::MODEL_SAMPLE_RATE;

/// A stream's place in the transcriber's batch.
pub type StreamId = usize;

/// What a transcriber declares about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranscriberInfo {
    /// Name reported as the transcription `model` (e.g. `whisper-tiny.en`).
    pub name: String,
    /// Streams that can be open at once.
    pub max_streams: usize,
    /// Streaming: give it the audio as it arrives (and [`TranscribeInput::end`] at the
    /// commit); otherwise give it the committed item's audio whole with `end` set.
    pub streaming: bool,
}

/// One stream's input for a step.
#[derive(Debug)]
pub struct TranscribeInput<'a> {
    /// Which stream.
    pub stream: StreamId,
    /// More of the utterance at [`TRANSCRIBE_SAMPLE_RATE`] (may be empty).
    pub pcm: &'a [f32],
    /// The utterance ends with this audio: finish it and answer with
    /// [`TranscribeOutput::Completed`] or an error. The stream then starts a new one.
    pub end: bool,
    /// The caller wants per-token log probabilities.
    pub logprobs: bool,
}

/// One token's log probability (the Realtime API's `logprobs` entries).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    /// The token's text.
    pub token: String,
    /// Natural log of its probability.
    pub logprob: f32,
    /// Its UTF-8 bytes.
    pub bytes: Vec<u8>,
}

/// One stream's answer for a step.
#[derive(Clone, Debug, PartialEq)]
pub enum TranscribeOutput {
    /// Nothing to say yet (not enough audio, or the utterance has not ended).
    NotYet,
    /// More text of the current utterance.
    Delta {
        /// The new text.
        text: String,
        /// Its tokens' log probabilities, when asked for.
        logprobs: Vec<TokenLogprob>,
    },
    /// The utterance is transcribed: after any deltas, its whole text.
    Completed {
        /// Text of the whole utterance (the deltas joined, for a streaming transcriber).
        text: String,
        /// Log probabilities of every token, when asked for.
        logprobs: Vec<TokenLogprob>,
        /// Seconds of audio the utterance held (usage).
        audio_seconds: f64,
        /// The language it was transcribed in (ISO-639-1), when the transcriber knows.
        language: Option<String>,
    },
}

/// Per-frame facts of a streaming transcriber that drive semantic turn detection.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EndOfTurn {
    /// Probability that the speaker finished their turn, when the model has such a head.
    pub probability: Option<f32>,
}

/// A speech-to-text model, stepped in batches by the transcription loop.
pub trait Transcriber: Send {
    /// Static facts.
    fn info(&self) -> &TranscriberInfo;
    /// Runs a throwaway utterance so the first real one is on time.
    fn warmup(&mut self) -> Result<(), ModelError>;
    /// Allocates fresh per-session state.
    fn open_stream(&mut self) -> Result<StreamId, ModelError>;
    /// Frees a stream; the id may be reused.
    fn close_stream(&mut self, stream: StreamId);
    /// The language of the stream's next utterances (ISO-639-1; `None`: detect it, or the
    /// transcriber's own). Transcribers with one language ignore it.
    fn set_language(&mut self, _stream: StreamId, _language: Option<&str>) {}
    /// Text that comes before the stream's next utterances (the Realtime API's and the
    /// transcription endpoint's `prompt`: names, spellings, the style of what is said;
    /// `None`: none). Transcribers that cannot be prompted ignore it.
    fn set_prompt(&mut self, _stream: StreamId, _prompt: Option<&str>) {}
    /// Steps every stream in `batch` once; pushes exactly one result per input, in order.
    /// An error fails that stream's current utterance only (the stream stays open).
    fn step(
        &mut self,
        batch: &[TranscribeInput<'_>],
        out: &mut Vec<Result<TranscribeOutput, ModelError>>,
    );
    /// The end-of-turn head's last estimate for a stream (streaming transcribers with one).
    fn end_of_turn(&self, _stream: StreamId) -> EndOfTurn {
        EndOfTurn::default()
    }
}

/// Transcribes one clip (24 kHz) on its own stream, pushed 20 ms at a time as the
/// transcription loop pushes live audio: the text, or the error.
pub fn transcribe_clip(t: &mut dyn Transcriber, pcm: &[f32]) -> Result<String, ModelError> {
    let stream = t.open_stream()?;
    let mut out = Vec::new();
    for chunk in pcm.chunks(480) {
        out.clear();
        t.step(
            &[TranscribeInput {
                stream,
                pcm: chunk,
                end: false,
                logprobs: false,
            }],
            &mut out,
        );
    }
    out.clear();
    t.step(
        &[TranscribeInput {
            stream,
            pcm: &[],
            end: true,
            logprobs: false,
        }],
        &mut out,
    );
    t.close_stream(stream);
    match out.pop() {
        Some(Ok(TranscribeOutput::Completed { text, .. })) => Ok(text),
        Some(Err(e)) => Err(e),
        other => Err(ModelError::Failed(format!(
            "no transcript at the end: {other:?}"
        ))),
    }
}

/// The first free slot of `slots`, or [`ModelError::SlotsExhausted`] when all are taken.
pub(crate) fn free_slot<T>(slots: &[Option<T>]) -> Result<usize, ModelError> {
    slots
        .iter()
        .position(Option::is_none)
        .ok_or(ModelError::SlotsExhausted(slots.len()))
}

/// Takes the first free slot of `slots` for `fresh` state, growing the list up to `max`
/// slots; [`ModelError::SlotsExhausted`] when all `max` are taken.
pub(crate) fn take_slot<T>(
    slots: &mut Vec<Option<T>>,
    max: usize,
    fresh: T,
) -> Result<usize, ModelError> {
    if let Some(free) = slots.iter().position(Option::is_none) {
        slots[free] = Some(fresh);
        return Ok(free);
    }
    if slots.len() >= max {
        return Err(ModelError::SlotsExhausted(max));
    }
    slots.push(Some(fresh));
    Ok(slots.len() - 1)
}

/// Frees slot `i` (nothing when there is no such slot).
pub(crate) fn clear_slot<T>(slots: &mut [Option<T>], i: usize) {
    if let Some(s) = slots.get_mut(i) {
        *s = None;
    }
}
