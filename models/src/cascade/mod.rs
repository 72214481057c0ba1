//! The cascade: the session's transcripts of what the user said → a text LLM (any
//! OpenAI-compatible server, through the [`Llm`] port the server implements) → the answer,
//! streamed as it comes, with the LLM's tool calls passed on as the Realtime API's function
//! calls. Turn-based: the session's server VAD ends the user's turn, its transcriber fills in
//! what was said, and a [`Request::Respond`] carries the whole conversation.
//!
//! Speech synthesis is not part of it yet: an answer asked for in audio fails at once with
//! [`TTS_UNAVAILABLE`] (the session goes on); text answers and tool calls work.

pub mod chat;
pub mod sse;

use std::collections::VecDeque;

pub use chat::{ChatRequest, ChunkReader};
pub use sse::SseDecoder;

use crate::model::*;

/// The LLM could not be reached (connection refused, timed out, or it closed mid-answer).
pub const LLM_UNAVAILABLE: &str = "llm_unavailable";
/// The LLM answered with an error (an HTTP error status, or an error in its stream).
pub const LLM_ERROR: &str = "llm_error";
/// An answer in audio was asked of a cascade without speech synthesis.
pub const TTS_UNAVAILABLE: &str = "tts_unavailable";

/// Samples per step: 20 ms at 24 kHz.
const FRAME: usize = 480;

/// What an LLM's answer stream gives, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum LlmEvent {
    /// Words of the answer.
    Text(String),
    /// A piece of a tool call.
    ToolCall(ToolCallDelta),
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

/// One answer on its way. Dropping it cancels the answer (the upstream request is closed).
pub trait LlmStream: Send {
    /// Pushes what arrived since the last call onto `out`; never blocks.
    fn poll(&mut self, out: &mut Vec<LlmEvent>);
}

/// An answer in progress in one slot.
struct Answer {
    /// None once nothing more can come (or nothing was asked: a refusal queued below).
    stream: Option<Box<dyn LlmStream>>,
    pending: VecDeque<LlmEvent>,
}

/// The cascade model. See the module docs.
pub struct CascadeModel {
    info: ModelInfo,
    llm: Box<dyn Llm>,
    slots: Vec<Option<Option<Answer>>>,
    scratch: Vec<LlmEvent>,
}

impl CascadeModel {
    /// A cascade on `llm`, serving up to `max_slots` sessions.
    pub fn new(llm: Box<dyn Llm>, max_slots: usize) -> Self {
        Self {
            info: ModelInfo {
                name: "cascade".into(),
                frame_samples: FRAME,
                max_slots: max_slots.max(1),
                autonomous: false,
                tools: true,
            },
            llm,
            slots: Vec::new(),
            scratch: Vec::new(),
        }
    }

    fn slot_mut(&mut self, slot: SlotId) -> Result<&mut Option<Answer>, ModelError> {
        self.slots
            .get_mut(slot)
            .and_then(Option::as_mut)
            .ok_or(ModelError::UnknownSlot(slot))
    }

    /// The answer's next step: its pending words together, or one tool call's pieces
    /// together, or its end.
    fn next_output(answer: &mut Answer) -> (StepOutput, bool) {
        let mut out = StepOutput::default();
        while let Some(ev) = answer.pending.front_mut() {
            match ev {
                LlmEvent::Text(t) if out.tool_call.is_none() => {
                    out.text.push_str(t);
                    answer.pending.pop_front();
                }
                LlmEvent::ToolCall(d) if out.text.is_empty() => match &mut out.tool_call {
                    None => {
                        out.tool_call = Some(std::mem::take(d));
                        answer.pending.pop_front();
                    }
                    Some(call) if call.call_id == d.call_id => {
                        call.arguments.push_str(&d.arguments);
                        answer.pending.pop_front();
                    }
                    Some(_) => break,
                },
                LlmEvent::Done => {
                    out.end_of_turn = true;
                    return (out, true);
                }
                LlmEvent::Failed(f) => {
                    out.failed = Some(std::mem::take(f));
                    out.end_of_turn = true;
                    return (out, true);
                }
                _ => break,
            }
        }
        (out, false)
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
        if let Some(free) = self.slots.iter().position(Option::is_none) {
            self.slots[free] = Some(None);
            return Ok(free);
        }
        if self.slots.len() >= self.info.max_slots {
            return Err(ModelError::SlotsExhausted(self.info.max_slots));
        }
        self.slots.push(Some(None));
        Ok(self.slots.len() - 1)
    }

    fn close_slot(&mut self, slot: SlotId) {
        if let Some(s) = self.slots.get_mut(slot) {
            *s = None; // drops an answer in flight: its upstream request closes
        }
    }

    fn request(&mut self, slot: SlotId, request: Request) -> Result<(), ModelError> {
        let answer = match request {
            Request::Respond {
                modality: OutputModality::Audio,
                ..
            } => Some(Answer {
                stream: None,
                pending: VecDeque::from([LlmEvent::Failed(AnswerFailure {
                    code: TTS_UNAVAILABLE.into(),
                    message: "this cascade has no speech synthesis yet: ask for \
                              output_modalities [\"text\"]"
                        .into(),
                })]),
            }),
            Request::Respond {
                instructions,
                input,
                tools,
                tool_choice,
                ..
            } => Some(Answer {
                stream: Some(self.llm.start(ChatRequest::new(
                    &instructions,
                    &input,
                    tools,
                    tool_choice,
                ))),
                pending: VecDeque::new(),
            }),
            Request::Cancel => None,
        };
        *self.slot_mut(slot)? = answer;
        Ok(())
    }

    fn step(&mut self, batch: &[StepInput<'_>], out: &mut Vec<Result<StepOutput, ModelError>>) {
        for input in batch {
            let mut scratch = std::mem::take(&mut self.scratch);
            let result = self.slot_mut(input.slot).map(|state| {
                let Some(answer) = state else {
                    return StepOutput::default();
                };
                if let Some(stream) = &mut answer.stream {
                    stream.poll(&mut scratch);
                    answer.pending.extend(scratch.drain(..));
                }
                let (output, ended) = Self::next_output(answer);
                if ended {
                    *state = None;
                }
                output
            });
            self.scratch = scratch;
            out.push(result);
        }
    }
}

#[cfg(test)]
mod tests;
