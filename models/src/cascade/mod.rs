//! The cascade: the session's transcripts of what the user said → a text LLM (any
//! OpenAI-compatible server, through the [`Llm`] port the server implements) → the answer,
//! streamed as it comes, with the LLM's tool calls passed on as the Realtime API's function
//! calls. Turn-based: the session's server VAD ends the user's turn, its transcriber fills in
//! what was said, and a [`Request::Respond`] carries the whole conversation.
//!
//! Spoken answers: the words are cut into clauses as they arrive and each is synthesized off the
//! model loop ([`speech`]) while the LLM goes on; a cascade started without a voice
//! answers audio requests with [`TTS_UNAVAILABLE`] (the session goes on).

mod answer;
mod channel;
pub mod chat;
pub mod speech;

use answer::{Answer, Voice};
pub use channel::{answer_channel, AnswerEvents, AnswerSender};
pub use chat::{ChatRequest, ChunkReader};
pub use duet_protocol::sse::SseDecoder;
pub use speech::{Clauses, Speaker, SpeechWorker, Synthesis};

use crate::model::*;

/// The LLM could not be reached (connection refused, timed out, or it closed mid-answer).
pub const LLM_UNAVAILABLE: &str = "llm_unavailable";
/// The LLM answered with an error (an HTTP error status, or an error in its stream).
pub const LLM_ERROR: &str = "llm_error";
/// An answer in audio was asked of a cascade without a voice (`--tts-model-dir`).
pub const TTS_UNAVAILABLE: &str = "tts_unavailable";
/// Speech synthesis failed for a clause of the answer.
pub const TTS_ERROR: &str = "tts_error";

/// Samples per step: 20 ms at 24 kHz.
const FRAME: usize = 480;

/// What an LLM's answer stream gives, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum LlmEvent {
    /// Words of the answer.
    Text(String),
    /// A piece of a tool call.
    ToolCall(ToolCallDelta),
    /// Tokens the answer took (an embedded LLM says so just before [`LlmEvent::Done`]).
    Usage {
        /// Tokens of the prompt.
        prompt_tokens: usize,
        /// Tokens of the answer.
        completion_tokens: usize,
        /// Prompt tokens whose keys and values were kept from an earlier answer.
        cached_tokens: usize,
    },
    /// The answer is complete.
    Done,
    /// The answer failed; nothing more comes.
    Failed(AnswerFailure),
}

/// The LLM the cascade talks to (the server's HTTP client, in production).
pub trait Llm: Send + Sync {
    /// Starts an answer. Never blocks: the answer arrives on the stream.
    fn start(&self, request: ChatRequest) -> Box<dyn LlmStream>;
}

/// A shared LLM (the server's embedded one serves the cascade and `/v1/chat/completions`).
impl<T: Llm + ?Sized> Llm for std::sync::Arc<T> {
    fn start(&self, request: ChatRequest) -> Box<dyn LlmStream> {
        (**self).start(request)
    }
}

/// One answer on its way. Dropping it cancels the answer (the upstream request is closed).
pub trait LlmStream: Send {
    /// Pushes what arrived since the last call onto `out`; never blocks.
    fn poll(&mut self, out: &mut Vec<LlmEvent>);

    /// Wakes `waker` when something arrives after the last [`LlmStream::poll`] (at once when
    /// something is already there): an async consumer waits for it instead of polling on a
    /// timer. (The model loop polls every step and needs no waking.)
    fn wake_on(&mut self, waker: &std::task::Waker);
}

/// The cascade model. See the module docs.
pub struct CascadeModel {
    info: ModelInfo,
    llm: Box<dyn Llm>,
    speech: Option<SpeechWorker>,
    slots: Vec<Option<Option<Answer>>>,
    scratch: Vec<LlmEvent>,
    answers: u64,
}

impl CascadeModel {
    /// A cascade on `llm` that speaks through `speech` (none: text answers only), serving up
    /// to `max_slots` sessions.
    pub fn new(llm: Box<dyn Llm>, speech: Option<SpeechWorker>, max_slots: usize) -> Self {
        Self {
            info: ModelInfo {
                name: "cascade".into(),
                frame_samples: FRAME,
                max_slots: max_slots.max(1),
                autonomous: false,
                tools: true,
                reads_text: true,
            },
            llm,
            speech,
            slots: Vec::new(),
            scratch: Vec::new(),
            answers: 0,
        }
    }

    fn slot_mut(&mut self, slot: SlotId) -> Result<&mut Option<Answer>, ModelError> {
        self.slots
            .get_mut(slot)
            .and_then(Option::as_mut)
            .ok_or(ModelError::UnknownSlot(slot))
    }

    /// Hands synthesized clauses to their answers (those of dropped answers are dropped).
    fn collect_speech(&mut self) {
        let Some(worker) = &self.speech else { return };
        for spoken in worker.take() {
            let answer = self
                .slots
                .get_mut(spoken.slot)
                .and_then(Option::as_mut)
                .and_then(Option::as_mut);
            if let Some(a) = answer.filter(|a| a.id == spoken.answer) {
                if let Some(v) = &mut a.voice {
                    v.ready(spoken.index, spoken.audio, spoken.last);
                }
            }
        }
    }

    fn set_live(&self, slot: SlotId, answer: Option<u64>) {
        if let Some(w) = &self.speech {
            w.set_live(slot, answer);
        }
    }
}

impl DuplexModel for CascadeModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn warmup(&mut self) -> Result<(), ModelError> {
        Ok(())
    }

    fn open_slot(&mut self) -> Result<SlotId, ModelError> {
        crate::transcribe::take_slot(&mut self.slots, self.info.max_slots, None)
    }

    fn close_slot(&mut self, slot: SlotId) {
        if let Some(s) = self.slots.get_mut(slot) {
            *s = None; // drops an answer in flight: its upstream request closes
        }
    }

    fn request(&mut self, slot: SlotId, request: Request) -> Result<(), ModelError> {
        self.slot_mut(slot)?;
        self.answers += 1;
        let id = self.answers;
        let answer = match request {
            Request::Respond {
                modality: OutputModality::Audio,
                ..
            } if self.speech.is_none() => Some(Answer::failing(
                id,
                AnswerFailure {
                    code: TTS_UNAVAILABLE.into(),
                    message: "this cascade has no voice: start the server with --tts-model-dir \
                              (or ask for output_modalities [\"text\"])"
                        .into(),
                },
            )),
            Request::Respond {
                modality,
                instructions,
                input,
                tools,
                tool_choice,
                speed,
                voice,
                ..
            } => {
                let request = ChatRequest::new(&instructions, &input, tools, tool_choice);
                let voice = (modality == OutputModality::Audio).then(|| Voice::new(speed, &voice));
                Some(Answer::new(id, Some(self.llm.start(request)), voice))
            }
            Request::Cancel => None,
        };
        self.set_live(slot, answer.as_ref().map(|a| a.id));
        *self.slot_mut(slot)? = answer;
        Ok(())
    }

    fn step(&mut self, batch: &[StepInput<'_>], out: &mut Vec<Result<StepOutput, ModelError>>) {
        self.collect_speech();
        for input in batch {
            let mut scratch = std::mem::take(&mut self.scratch);
            let worker = self.speech.as_ref();
            let slot = self
                .slots
                .get_mut(input.slot)
                .and_then(Option::as_mut)
                .ok_or(ModelError::UnknownSlot(input.slot));
            let mut ended = false;
            let result = slot.map(|state| {
                let Some(answer) = state else {
                    return StepOutput::default();
                };
                if let Some(stream) = &mut answer.stream {
                    stream.poll(&mut scratch);
                    answer.pending.extend(scratch.drain(..));
                }
                let (output, end) = answer.step(input.slot, worker);
                if end {
                    *state = None;
                    ended = true;
                }
                output
            });
            if ended {
                self.set_live(input.slot, None);
            }
            self.scratch = scratch;
            out.push(result);
        }
    }
}

#[cfg(test)]
mod tests;
