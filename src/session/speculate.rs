//! Speculative starts, for models that read words (the cascade): when the user has been
//! silent for `--speculative-start-ms` inside a server-VAD turn, the audio so far is
//! transcribed and the model is asked to answer it before the silence window confirms the
//! turn. What the model answers is held back here, never sent. When `speech_stopped`
//! confirms the turn, the committed item takes the speculation's transcript (the audio it
//! adds is the silence), and the response that follows adopts the speculative answer when its
//! request has the same words (the same instructions, tools and context): the held output
//! plays at once. When the voice comes back first, or the request differs (the conversation
//! changed meanwhile), the speculative answer is cancelled and discarded.
//!
//! What it saves is the transcription and the model's first words after the silence window
//! (`cascade_bench`, docs/benchmarks.md "Cascade: voice to voice"); what it costs is a
//! transcription and an answer started in vain whenever the user pauses that long
//! mid-sentence.

use std::sync::Arc;

use duet_models::{ContextItem, Request, StepOutput, TranscribeOutput, TurnInput};

use super::audio_io::to_f32;
use super::input::InputState;
use super::reply::Reply;
use super::transcripts::Transcripts;
use super::turn::Words;
use super::Limits;
use super::{Epoch, Session, TranscriptEvent};
use crate::protocol::SessionConfig;

/// Audio a held answer may hold before it is given up (10 s at 24 kHz, 960 KB as f32).
const MAX_HELD_SAMPLES: usize = 240_000;
/// Text it may hold (bytes).
const MAX_HELD_TEXT: usize = 64 << 10;

/// A turn being answered before it is confirmed.
pub(super) struct Speculation {
    /// Its transcription's id (not a conversation item).
    id: Arc<str>,
    /// The silence (samples) seen after the last append: it only grows until a voiced
    /// window resets it.
    silence: u64,
    /// Seconds of audio it transcribed.
    seconds: f64,
    /// What the transcriber heard, once it answered.
    transcript: Option<String>,
    /// The model request sent on it, and the epoch it went under.
    request: Option<(Epoch, Request)>,
    /// The model's output, held back.
    held: Vec<StepOutput>,
    held_samples: usize,
    held_text: usize,
    /// `speech_stopped` confirmed the turn: the committed item takes its transcript.
    confirmed: bool,
    /// The item that took its transcription before the transcript came.
    adopted_by: Option<Arc<str>>,
}

impl Speculation {
    /// A speculation on the turn so far (`seconds` of audio) sent for transcription under
    /// `id`, after `silence` samples of silence.
    fn start(id: Arc<str>, silence: u64, seconds: f64) -> Self {
        crate::metrics::METRICS.speculation("started");
        Self {
            id,
            silence,
            seconds,
            transcript: None,
            request: None,
            held: Vec::new(),
            held_samples: 0,
            held_text: 0,
            confirmed: false,
            adopted_by: None,
        }
    }

    /// Whether an item took its transcription (it only routes that now).
    pub(super) fn is_adopted(&self) -> bool {
        self.adopted_by.is_some()
    }

    /// `speech_stopped` confirmed the turn.
    pub(super) fn confirm(&mut self) {
        self.confirmed = true;
    }

    /// The model's output under `epoch` while no response is active: held when it answers
    /// the speculation (`Some`, true when the held answer grew past its limits and must be
    /// given up), else `None` (the caller drops it).
    pub(super) fn hold(&mut self, out: StepOutput, epoch: Epoch) -> Option<bool> {
        if !matches!(&self.request, Some((e, _)) if *e == epoch) {
            return None;
        }
        self.held_samples += out.audio.len();
        self.held_text += out.text.len();
        self.held.push(out);
        Some(self.held_samples > MAX_HELD_SAMPLES || self.held_text > MAX_HELD_TEXT)
    }

    /// Whether a response under `epoch` that asks the model `request` asks what the
    /// speculation asked: then its answer is adopted ([`Self::adopt`]).
    pub(super) fn answers(&self, request: &Request, epoch: Epoch) -> bool {
        matches!(&self.request, Some((e, asked)) if *e == epoch && same_words(asked, request))
    }

    /// The answer is adopted: the held output, to play now (the request is not sent again).
    pub(super) fn adopt(self) -> Vec<StepOutput> {
        crate::metrics::METRICS.speculation("adopted");
        self.held
    }
}

/// Whether two answer requests have the same words: equal but for the audio of user turns
/// that carry a transcript (the speculation heard less trailing silence than the item).
fn same_words(a: &Request, b: &Request) -> bool {
    fn words(r: &Request) -> Request {
        let mut r = r.clone();
        if let Request::Respond { input, .. } = &mut r {
            for item in input.iter_mut() {
                if let ContextItem::User(TurnInput::Transcribed { audio, .. }) = item {
                    *audio = Arc::from([]);
                }
            }
        }
        r
    }
    words(a) == words(b)
}

impl Session {
    /// After each append, each turn score and each timer: at a pause inside a turn, starts
    /// a speculation once the user has been silent long enough (at the turn model's
    /// candidate pause under `semantic_vad` with a model) and gives it up when the voice
    /// comes back; then lets the judge of pauses end the turn (`semantic_vad` with a turn
    /// model), with the speculation's words as its second signal.
    pub(super) fn on_pause(&mut self) {
        let Some((in_speech, silence)) = self.input.silence() else {
            return;
        };
        match &mut self.reply.speculation {
            Some(s) if s.confirmed || s.adopted_by.is_some() => {}
            Some(s) => {
                if !in_speech || silence < s.silence {
                    // The voice came back (or the turn reset).
                    self.reply.abandon_speculation(&self.transcripts);
                } else {
                    s.silence = silence;
                }
            }
            None => {
                let wait = match &self.input.judge {
                    Some(_) if self.limits.speculative_ms > 0 => super::turn::WORDS_MS,
                    _ => self.limits.speculative_ms,
                };
                let wait = u64::from(wait) * super::ledger::SAMPLES_PER_MS;
                if in_speech
                    && silence >= wait
                    && self.reply.may_speculate(
                        &self.cfg,
                        &self.limits,
                        &self.input,
                        &self.transcripts,
                    )
                {
                    let audio = self.input.buffered();
                    let id: Arc<str> =
                        Arc::from(format!("spec_{}", crate::protocol::ids::item_id()));
                    self.transcripts
                        .send_whole(id.clone(), to_f32(&audio), false);
                    let seconds = audio.len() as f64 / f64::from(super::audio_io::RATE);
                    self.reply.speculation = Some(Speculation::start(id, silence, seconds));
                }
            }
        }
        let words = match &self.reply.speculation {
            Some(s) => s.transcript.as_deref().map_or(Words::Pending, Words::of),
            None => Words::Absent,
        };
        let ended = self.input.judge_pause(self.out.now, words);
        if let Some(scored) = self.input.turn_scored() {
            self.out.emit(scored); // before the speech_stopped it may cause
        }
        if let Some(at) = ended {
            self.speech_stopped(at);
        }
        self.on_overlap();
    }
}

impl Reply {
    /// Whether a session configured as `cfg` may start answers early now: its model reads
    /// words, answers on its own and is not answering; the user is inside a turn that
    /// creates a response; the transcriber takes whole utterances.
    pub(super) fn may_speculate(
        &self,
        cfg: &SessionConfig,
        limits: &Limits,
        input: &InputState,
        transcripts: &Transcripts,
    ) -> bool {
        limits.speculative_ms > 0
            && self.model.caps.reads_text
            && !self.floor.autonomous
            && !cfg.is_transcription()
            && self.active.is_none()
            && input.in_turn()
            && input.creates_responses()
            && transcripts.can_send_whole()
    }

    /// Gives the speculation up: its answer (if asked) is cancelled, its output dropped and
    /// its transcription, if the words have not come, taken off the transcriber's queue.
    pub(super) fn abandon_speculation(&mut self, transcripts: &Transcripts) {
        let Some(s) = self.speculation.take() else {
            return;
        };
        if s.adopted_by.is_some() {
            // Its transcription belongs to an item now: keep routing it there.
            self.speculation = Some(s);
            return;
        }
        if s.transcript.is_none() {
            // Its words are not wanted any more: the transcriber drops them if it can.
            transcripts.give_up(&s.id);
        }
        if matches!(&s.request, Some((epoch, _)) if *epoch == self.model.epoch)
            && self.active.is_none()
        {
            self.fence_model();
        }
        crate::metrics::METRICS.speculation("abandoned");
    }
}

impl Session {
    /// A transcript for the speculation (`ev.item_id` is its id): asks the model, or hands
    /// the transcript to the item that took it. Returns `ev` when it is not the speculation's.
    pub(super) fn on_speculative_transcript(
        &mut self,
        ev: TranscriptEvent,
    ) -> Option<TranscriptEvent> {
        if self.input.overlap.as_mut().is_some_and(|o| o.hear(&ev)) {
            // The words of speech over the answer (so far, or all of it): they judge it.
            self.on_overlap();
            return None;
        }
        let speculation = self.reply.speculation.as_ref();
        let Some(s) = speculation.filter(|s| s.id == ev.item_id) else {
            return Some(ev);
        };
        let text = match &ev.output {
            Ok(TranscribeOutput::Completed { text, .. }) => text.trim().to_string(),
            Ok(_) => return None, // deltas: an utterance transcriber sends none
            Err(_) => String::new(),
        };
        if let Some(item_id) = s.adopted_by.clone() {
            // The item was committed first: this is its transcript.
            self.reply.speculation = None;
            return Some(TranscriptEvent {
                item_id,
                output: ev.output,
            });
        }
        let may = self
            .reply
            .may_speculate(&self.cfg, &self.limits, &self.input, &self.transcripts);
        if text.is_empty() || !may {
            self.reply.abandon_speculation(&self.transcripts);
            return None;
        }
        let request = match self.answer(|r, cx| r.prepare(cx, Default::default())) {
            Ok((active, mut ask)) => {
                ask.input.push(ContextItem::User(TurnInput::Transcribed {
                    audio: Arc::from([]),
                    transcript: text.clone(),
                }));
                super::respond::respond_request(&self.cfg, &active, ask)
            }
            Err(_) => return None,
        };
        let model = &self.reply.model;
        model.request(model.epoch, request.clone());
        if let Some(s) = &mut self.reply.speculation {
            s.transcript = Some(text);
            s.request = Some((model.epoch, request));
        }
        None
    }

    /// The confirmed turn's item `item_id` was committed: it takes the speculation's
    /// transcription (true), or nothing was speculated and it is transcribed as usual.
    pub(super) fn adopt_transcription(&mut self, item_id: &Arc<str>) -> bool {
        let Some(s) = self.reply.speculation.as_mut().filter(|s| s.confirmed) else {
            self.reply.abandon_speculation(&self.transcripts); // a commit of another kind: start over
            return false;
        };
        match s.transcript.clone() {
            Some(text) => {
                let seconds = s.seconds;
                self.transcripts.expect(item_id.clone());
                self.on_transcript(
                    TranscriptEvent {
                        item_id: item_id.clone(),
                        output: Ok(TranscribeOutput::Completed {
                            text,
                            logprobs: Vec::new(),
                            audio_seconds: seconds,
                            language: None,
                        }),
                    },
                    self.out.now,
                );
            }
            None => {
                s.adopted_by = Some(item_id.clone());
                self.transcripts.expect(item_id.clone());
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use duet_models::{OutputModality, ToolChoice};

    fn respond(words: &str, audio: &[f32]) -> Request {
        Request::Respond {
            modality: OutputModality::Audio,
            instructions: "Be brief.".into(),
            input: vec![ContextItem::User(TurnInput::Transcribed {
                audio: Arc::from(audio),
                transcript: words.into(),
            })],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            voice: "alloy".into(),
            speed: 1.0,
        }
    }

    #[test]
    fn requests_with_the_same_words_match_whatever_their_audio() {
        assert!(same_words(
            &respond("What time is it?", &[0.1; 10]),
            &respond("What time is it?", &[0.2; 30])
        ));
        assert!(!same_words(
            &respond("What time is it?", &[]),
            &respond("What time is it now?", &[])
        ));
    }
}
