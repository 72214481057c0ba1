//! One answer in a cascade slot: what the LLM streams, turned into step outputs. A text
//! answer passes the words on as they come; a spoken one cuts them into clauses, has each
//! synthesized, and plays the audio 20 ms a step, each clause's words going out with its
//! first audio (the transcript follows the audio that carries it). Tool calls go out as
//! they come in either.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use super::speech::{Clauses, SpeechWorker};
use super::{LlmEvent, LlmStream, FRAME, TTS_ERROR};
use crate::{AnswerFailure, SlotId, StepOutput};

/// A spoken answer's voice state.
#[derive(Default)]
pub(super) struct Voice {
    clauses: Clauses,
    speed: f32,
    /// The voice to speak in (`audio.output.voice`).
    name: Arc<str>,
    /// The text of every clause queued for synthesis, by index.
    texts: Vec<String>,
    /// Synthesized audio of clauses not yet played out, as it came.
    ready: BTreeMap<u32, Synthesized>,
    /// The next clause to start.
    next: u32,
    /// The clause started (its words went out) whose audio is still coming or playing.
    current: Option<u32>,
    /// Audio of the current clause being played.
    playing: VecDeque<f32>,
}

/// What synthesis gave of one clause so far.
#[derive(Default)]
struct Synthesized {
    audio: Vec<f32>,
    /// All of it came.
    done: bool,
    /// Synthesis failed.
    error: Option<String>,
}

impl Voice {
    pub(super) fn new(speed: f32, name: &str) -> Self {
        Self {
            speed,
            name: Arc::from(name),
            ..Self::default()
        }
    }

    /// Synthesized audio of clause `index` arrived (all that is left of it when `last`).
    pub(super) fn ready(&mut self, index: u32, audio: Result<Vec<f32>, String>, last: bool) {
        let clause = self.ready.entry(index).or_default();
        match audio {
            Ok(samples) => clause.audio.extend(samples),
            Err(e) => clause.error = Some(e),
        }
        clause.done |= last;
    }

    /// Moves audio that arrived for the clause playing (or the next clause's first audio,
    /// its words into `text`) into `playing`. `Err`: synthesis failed; `Ok(false)`: nothing
    /// to play yet.
    fn feed(&mut self, text: &mut String) -> Result<bool, String> {
        let index = self.current.unwrap_or(self.next);
        let Some(clause) = self.ready.get_mut(&index) else {
            return Ok(false);
        };
        if let Some(e) = clause.error.take() {
            return Err(e);
        }
        if self.current.is_none() {
            if clause.audio.is_empty() && !clause.done {
                return Ok(false); // its words wait for its first audio
            }
            if self.next > 0 {
                text.push(' ');
            }
            text.push_str(&self.texts[self.next as usize]);
            self.current = Some(self.next);
            self.next += 1;
        }
        let fed = !clause.audio.is_empty();
        self.playing.extend(clause.audio.drain(..));
        if clause.done {
            self.ready.remove(&index);
            self.current = None;
            return Ok(true);
        }
        Ok(fed)
    }
}

/// An answer in progress.
pub(super) struct Answer {
    /// Its number, to match synthesized clauses to it.
    pub(super) id: u64,
    /// None once nothing more can come (or nothing was asked: a refusal queued below).
    pub(super) stream: Option<Box<dyn LlmStream>>,
    pub(super) pending: VecDeque<LlmEvent>,
    /// Spoken answers: the clauses and their audio.
    pub(super) voice: Option<Voice>,
    /// The LLM's answer is complete.
    llm_done: bool,
}

impl Answer {
    pub(super) fn new(id: u64, stream: Option<Box<dyn LlmStream>>, voice: Option<Voice>) -> Self {
        Self {
            id,
            stream,
            pending: VecDeque::new(),
            voice,
            llm_done: false,
        }
    }

    /// An answer that fails at once.
    pub(super) fn failing(id: u64, failure: AnswerFailure) -> Self {
        let mut a = Self::new(id, None, None);
        a.pending.push_back(LlmEvent::Failed(failure));
        a
    }

    /// This step's output; `true` when the answer ended with it.
    pub(super) fn step(
        &mut self,
        slot: SlotId,
        worker: Option<&SpeechWorker>,
    ) -> (StepOutput, bool) {
        let mut out = StepOutput::default();
        if let Some(failure) = self.take_events(&mut out, slot, worker) {
            out.failed = Some(failure);
            out.end_of_turn = true;
            return (out, true);
        }
        let Some(voice) = &mut self.voice else {
            out.end_of_turn = self.llm_done;
            return (out, self.llm_done);
        };
        // A whole frame when there is audio for one, the next clause starting right after
        // the last ends (its words with its first audio).
        while out.audio.len() < FRAME {
            if voice.playing.is_empty() {
                match voice.feed(&mut out.text) {
                    Ok(true) => continue,
                    Ok(false) => break,
                    Err(e) => {
                        out.failed = Some(AnswerFailure {
                            code: TTS_ERROR.into(),
                            message: format!("speech synthesis failed: {e}"),
                        });
                        out.end_of_turn = true;
                        return (out, true);
                    }
                }
            }
            let n = voice.playing.len().min(FRAME - out.audio.len());
            out.audio.extend(voice.playing.drain(..n));
        }
        let ended = self.llm_done
            && voice.playing.is_empty()
            && voice.current.is_none()
            && voice.next as usize == voice.texts.len();
        out.end_of_turn = ended;
        (out, ended)
    }

    /// Applies what the LLM sent: words (to the output, or to the clauses of a spoken
    /// answer), one tool call's pieces, the end. Returns a failure.
    fn take_events(
        &mut self,
        out: &mut StepOutput,
        slot: SlotId,
        worker: Option<&SpeechWorker>,
    ) -> Option<AnswerFailure> {
        while let Some(ev) = self.pending.front_mut() {
            match ev {
                LlmEvent::Text(t) => {
                    if out.tool_call.is_some() {
                        break;
                    }
                    match &mut self.voice {
                        Some(v) => {
                            for clause in v.clauses.push(t) {
                                queue(v, worker, slot, self.id, clause);
                            }
                        }
                        None => out.text.push_str(t),
                    }
                }
                LlmEvent::ToolCall(d) => {
                    if !out.text.is_empty() {
                        break;
                    }
                    match &mut out.tool_call {
                        None => out.tool_call = Some(std::mem::take(d)),
                        Some(call) if call.call_id == d.call_id => {
                            call.arguments.push_str(&d.arguments)
                        }
                        Some(_) => break,
                    }
                }
                LlmEvent::Done => {
                    self.llm_done = true;
                    self.stream = None;
                    if let Some(v) = &mut self.voice {
                        if let Some(rest) = v.clauses.finish() {
                            queue(v, worker, slot, self.id, rest);
                        }
                    }
                }
                LlmEvent::Usage { .. } => {}
                LlmEvent::Failed(f) => return Some(std::mem::take(f)),
            }
            self.pending.pop_front();
        }
        None
    }
}

fn queue(v: &mut Voice, worker: Option<&SpeechWorker>, slot: SlotId, answer: u64, clause: String) {
    let index = v.texts.len() as u32;
    let style = (v.speed, v.name.clone());
    let queued = worker.is_some_and(|w| w.speak(slot, answer, index, clause.clone(), style));
    if !queued {
        // No speech thread to say it: the clause fails, and with it the answer.
        v.ready(index, Err("the speech thread is gone".into()), true);
    }
    v.texts.push(clause);
}
