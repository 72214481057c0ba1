//! Responses: the GA lifecycle (created → output item → content part → deltas → the done
//! chain → `response.done`, always), cancellation behind the epoch fence, and usage.
//!
//! A full-duplex (autonomous) model decides itself when to speak: its speaking frames open a
//! response when none is active (`response.speak` before the content part), fill a response
//! the client created (`response.speak` before the first delta), and its falling silent
//! completes the response (`response.done`, then `response.listen`). After a cancel the
//! session waits for the model to fall silent before it opens another response on its own.

use std::sync::Arc;

use base64::Engine;
use duet_models::{OutputModality, Request, StepOutput, TurnInput};
use serde_json::Value;

use super::audio_io::Encoder;
use super::conversation::{user_turn, Placement, StoredItem};
use super::ledger::PlaybackLedger;
use super::Session;
use crate::protocol::response::{ResponseAudio, ResponseAudioOutput, StatusError};
use crate::protocol::server::SpeakMetadata;
use crate::protocol::session::{validate_max_tokens, validate_modalities};
use crate::protocol::{
    codes, ids, Content, ContentRef, ErrorPayload, Item, ItemStatus, Modality, Part, Response,
    ResponseParams, ResponseStatus, Role, ServerEventBody, StatusDetails, Usage,
};

/// User turns handed to the model as context.
const CONTEXT_TURNS: usize = 4;
/// Samples per audio token (20 ms).
const SAMPLES_PER_TOKEN: u64 = 480;

/// The response in progress.
pub struct Active {
    pub(super) response: Response,
    pub(super) in_conversation: bool,
    pub(super) item_id: String,
    /// Tag of this response's audio in the media engine (WebRTC).
    pub(super) tag: u64,
    modality: Modality,
    pub(super) ledger: PlaybackLedger,
    text: String,
    audio: Vec<f32>,
    encoder: Encoder,
    input_tokens: (u64, u64),
    max_tokens: Option<u64>,
    /// Autonomous models: `response.speak` went out (the model's speech fills this response).
    spoke: bool,
}

impl Active {
    fn at(&self) -> ContentRef {
        ContentRef {
            response_id: self.response.id.clone(),
            item_id: self.item_id.clone(),
            output_index: 0,
            content_index: 0,
        }
    }

    /// Whether the output reached `max_output_tokens`.
    fn over_limit(&self) -> bool {
        self.max_tokens.is_some_and(|max| {
            let (t, au) = self.output_tokens();
            t + au >= max
        })
    }

    fn output_tokens(&self) -> (u64, u64) {
        let words = |s: &str| s.split_whitespace().count() as u64;
        match self.modality {
            Modality::Audio => (
                words(self.ledger.transcript()),
                self.ledger.generated.div_ceil(SAMPLES_PER_TOKEN),
            ),
            Modality::Text => (words(&self.text), 0),
        }
    }

    fn item(&self, status: ItemStatus) -> Item {
        let content = match self.modality {
            Modality::Audio => Content::OutputAudio {
                audio: None,
                transcript: Some(self.ledger.transcript().to_string()),
            },
            Modality::Text => Content::OutputText {
                text: self.text.clone(),
            },
        };
        Item::Message {
            id: Some(self.item_id.clone()),
            object: Some("realtime.item".into()),
            status: Some(status),
            role: Role::Assistant,
            content: vec![content],
        }
    }

    fn part(&self) -> Part {
        match self.modality {
            Modality::Audio => Part::Audio {
                transcript: self.ledger.transcript().to_string(),
            },
            Modality::Text => Part::Text {
                text: self.text.clone(),
            },
        }
    }
}

fn input_tokens(turns: &[TurnInput]) -> (u64, u64) {
    turns.iter().fold((0, 0), |(t, a), turn| match turn {
        TurnInput::Text(s) => (t + s.split_whitespace().count() as u64, a),
        TurnInput::Audio(pcm) => (t, a + (pcm.len() as u64).div_ceil(SAMPLES_PER_TOKEN)),
    })
}

impl Session {
    /// `response.create` (also used by server VAD with default parameters). On an autonomous
    /// model the response opens at once and waits for the model's speech to fill it (no
    /// request goes to the model, which decides itself when to speak); without speech within
    /// the speak timeout it completes empty.
    pub(super) fn response_create(&mut self, params: ResponseParams) -> Result<(), ErrorPayload> {
        let (active, instructions, input) = self.prepare(params)?;
        if self.autonomous {
            self.speak_deadline = Some(tokio::time::Instant::now() + self.speak_timeout);
            self.start(active, None, false);
            return Ok(());
        }
        let modality = match active.modality {
            Modality::Audio => OutputModality::Audio,
            Modality::Text => OutputModality::Text,
        };
        let request = Request::Respond {
            modality,
            instructions,
            input,
        };
        self.start(active, Some(request), false);
        Ok(())
    }

    /// Opens a response because an autonomous model started speaking on its own.
    fn open_model_response(&mut self) {
        match self.prepare(ResponseParams::default()) {
            Ok((active, _, _)) => self.start(active, None, true),
            Err(e) => self.error(e),
        }
    }

    /// Validates `response.create` parameters into a response (not yet started), its
    /// instructions and its model context.
    fn prepare(
        &self,
        params: ResponseParams,
    ) -> Result<(Active, String, Vec<TurnInput>), ErrorPayload> {
        let in_conversation = match params.conversation.as_deref() {
            None | Some("auto") => true,
            Some("none") => false,
            Some(other) => {
                return Err(ErrorPayload::invalid(
                    codes::INVALID_VALUE,
                    format!("conversation must be \"auto\" or \"none\", got {other:?}"),
                )
                .with_param("response.conversation"))
            }
        };
        if let Some(active) = &self.active {
            return Err(if in_conversation && active.in_conversation {
                ErrorPayload::invalid(
                    codes::CONVERSATION_ALREADY_HAS_ACTIVE_RESPONSE,
                    format!("Conversation already has an active response in progress: {}. Wait until the response is finished before creating a new one.", active.response.id),
                )
            } else {
                ErrorPayload::invalid(codes::RESPONSE_ALREADY_ACTIVE, format!("the model is producing response {}; Duet runs one response at a time per session", active.response.id))
            });
        }
        let modality = match params.output_modalities {
            Some(m) => validate_modalities(m, "response.output_modalities")?[0],
            None => self.cfg.output_modalities[0],
        };
        let max_output_tokens = match params.max_output_tokens {
            Some(v) => validate_max_tokens(v, "response.max_output_tokens")?,
            None => self.cfg.max_output_tokens.clone(),
        };
        let out_audio = params.audio.and_then(|a| a.output).unwrap_or_default();
        let format = out_audio.format.unwrap_or(self.cfg.audio.output.format);
        let voice = out_audio
            .voice
            .unwrap_or_else(|| self.cfg.audio.output.voice.clone());
        let context = match params.input {
            Some(items) => self.resolve_input(&items)?,
            None => self.conv.user_context(CONTEXT_TURNS),
        };
        let instructions = params
            .instructions
            .unwrap_or_else(|| self.cfg.instructions.clone());
        let response = Response {
            id: ids::response_id(),
            object: "realtime.response",
            status: ResponseStatus::InProgress,
            status_details: None,
            output: Vec::new(),
            conversation_id: in_conversation.then(|| self.conversation_id.clone()),
            output_modalities: vec![modality],
            max_output_tokens: max_output_tokens.clone(),
            audio: ResponseAudio {
                output: ResponseAudioOutput { format, voice },
            },
            metadata: params.metadata,
            usage: None,
        };
        let active = Active {
            response,
            in_conversation,
            item_id: ids::item_id(),
            tag: 0,
            modality,
            ledger: PlaybackLedger::default(),
            text: String::new(),
            audio: Vec::new(),
            encoder: Encoder::new(format),
            input_tokens: input_tokens(&context),
            max_tokens: max_output_tokens.as_u64(),
            spoke: false,
        };
        Ok((active, instructions, context))
    }

    /// Emits the opening events of a response, sends `request` to the model, and makes the
    /// response active. `speaking`: an autonomous model is already speaking it
    /// (`response.speak` goes out before the content part).
    fn start(&mut self, mut active: Active, request: Option<Request>, speaking: bool) {
        active.tag = self.next_tag;
        self.last_response_id = Some(active.response.id.clone());
        self.next_tag += 1;
        if active.modality == Modality::Audio {
            let item = active.in_conversation.then_some(active.item_id.as_str());
            self.track_playback(active.tag, &active.response.id, item);
        }
        self.emit(ServerEventBody::ResponseCreated {
            response: Box::new(active.response.clone()),
        });
        let empty = Item::Message {
            id: Some(active.item_id.clone()),
            object: Some("realtime.item".into()),
            status: Some(ItemStatus::InProgress),
            role: Role::Assistant,
            content: vec![],
        };
        self.emit(ServerEventBody::ResponseOutputItemAdded {
            response_id: active.response.id.clone(),
            output_index: 0,
            item: Box::new(empty.clone()),
        });
        if active.in_conversation {
            match self
                .conv
                .insert(Placement::End, StoredItem::plain(empty.clone()))
            {
                Ok(evicted) => {
                    let prev = self.conv.previous_id(&active.item_id);
                    self.emit_item_added(prev, empty, false);
                    self.emit_evicted(evicted);
                }
                Err(e) => self.error(e),
            }
        }
        if speaking {
            self.emit_speak(&mut active);
        }
        self.emit(ServerEventBody::ResponseContentPartAdded {
            at: active.at(),
            part: active.part(),
        });
        self.idle = None;
        if let Some(request) = request {
            self.model.request(self.epoch, request);
        }
        self.active = Some(active);
    }

    /// `response.speak`: the model's speech fills `a` from now on.
    fn emit_speak(&mut self, a: &mut Active) {
        a.spoke = true;
        self.speak_deadline = None;
        self.emit(ServerEventBody::ResponseSpeak {
            at: a.at(),
            metadata: SpeakMetadata {
                session_id: self.cfg.id.clone(),
                epoch: self.epoch,
                model_speak: true,
            },
        });
    }

    /// Resolves `response.input`: item references and inline items, as model context.
    fn resolve_input(&self, items: &[Value]) -> Result<Vec<TurnInput>, ErrorPayload> {
        let mut turns = Vec::new();
        for (i, v) in items.iter().enumerate() {
            let param = format!("response.input[{i}]");
            if v.get("type").and_then(Value::as_str) == Some("item_reference") {
                let id = v.get("id").and_then(Value::as_str).unwrap_or_default();
                let stored = self.conv.get(id).ok_or_else(|| {
                    ErrorPayload::invalid(
                        codes::ITEM_NOT_FOUND,
                        format!("item {id:?} does not exist in the conversation"),
                    )
                    .with_param(param.clone())
                })?;
                turns.extend(user_turn(stored));
                continue;
            }
            let mut item: Item = serde_json::from_value(v.clone()).map_err(|e| {
                ErrorPayload::invalid(codes::INVALID_VALUE, format!("invalid input item: {e}"))
                    .with_param(param.clone())
            })?;
            let audio = match &mut item {
                Item::Message {
                    role: Role::User,
                    content,
                    ..
                } => content.iter_mut().find_map(|c| match c {
                    Content::InputAudio { audio, .. } => audio.take(),
                    _ => None,
                }),
                _ => None,
            };
            let audio = audio
                .map(|b64| self.decode_clip(&b64))
                .transpose()
                .map_err(|e| e.with_param(param.clone()))?;
            turns.extend(user_turn(&StoredItem::with_audio(
                item,
                audio.map(Arc::from),
            )));
        }
        Ok(turns)
    }

    /// A model step (already past the epoch fence).
    pub(super) fn on_model_output(&mut self, out: StepOutput) {
        if self.autonomous {
            self.on_autonomous_output(out);
            return;
        }
        let Some(mut a) = self.active.take() else {
            tracing::debug!(session = %self.cfg.id, "model output without a response; dropped");
            return;
        };
        self.stream(&mut a, &out);
        let over_limit = a.over_limit();
        self.active = Some(a);
        if out.end_of_turn {
            self.finish(ResponseStatus::Completed, None);
        } else if over_limit {
            self.stop_incomplete();
        }
    }

    /// A step of an autonomous model: its speaking frames open or fill a response, its
    /// falling silent completes it; listening frames (silence) are dropped.
    fn on_autonomous_output(&mut self, out: StepOutput) {
        if !self.model_speaking_now(out.speaking) {
            return;
        }
        if self.suppress_speak {
            // The rest of speech whose response was cancelled: it opens no response, nor
            // fills one the client created since (that waits for the model's next speech).
            return;
        }
        if self.active.is_none() {
            self.open_model_response();
        }
        let Some(mut a) = self.active.take() else {
            return;
        };
        if !a.spoke {
            self.emit_speak(&mut a);
        }
        self.stream(&mut a, &out);
        let over_limit = a.over_limit();
        self.active = Some(a);
        if over_limit {
            self.stop_incomplete();
        }
    }

    /// The autonomous model stopped speaking: the response its speech filled completes, then
    /// `response.listen` (naming that response, if any).
    fn model_fell_silent(&mut self) {
        let ended = self
            .active
            .as_ref()
            .filter(|a| a.spoke)
            .map(|a| a.response.id.clone());
        if ended.is_some() {
            self.finish(ResponseStatus::Completed, None);
        }
        let listen = ServerEventBody::model_listen(&self.cfg.id, self.epoch, ended);
        self.emit(listen);
    }

    /// A client-created response on an autonomous model got no speech in time: it completes
    /// empty and the model is reported listening.
    pub(super) fn speak_timed_out(&mut self) {
        self.speak_deadline = None;
        let Some(a) = self.active.as_ref().filter(|a| !a.spoke) else {
            return;
        };
        let id = a.response.id.clone();
        self.finish(ResponseStatus::Completed, None);
        let listen = ServerEventBody::model_listen(&self.cfg.id, self.epoch, Some(id));
        self.emit(listen);
    }

    /// Streams one step into `a`: audio (with transcript) or text, by its modality. A text
    /// response drops the audio.
    fn stream(&mut self, a: &mut Active, out: &StepOutput) {
        match a.modality {
            Modality::Audio => self.stream_audio(a, out),
            Modality::Text => {
                if !out.text.is_empty() {
                    a.text.push_str(&out.text);
                    self.emit(ServerEventBody::ResponseOutputTextDelta {
                        at: a.at(),
                        delta: out.text.clone(),
                    });
                }
            }
        }
    }

    /// The response reached `max_output_tokens`: stop the model and end it `incomplete`.
    fn stop_incomplete(&mut self) {
        self.fence_model();
        self.finish(ResponseStatus::Incomplete, Some("max_output_tokens"));
    }

    /// Advances the epoch (fencing off the model's output in flight) and stops the model. An
    /// autonomous model may keep speaking: no response opens on its speech until it fell
    /// silent (if it is silent now, its next speech is new).
    fn fence_model(&mut self) {
        self.epoch += 1;
        self.model.request(self.epoch, Request::Cancel);
        if self.autonomous {
            self.suppress_speak = self.model_speaking;
        }
    }

    /// A step of an autonomous model from before the last fence: its audio and text belong
    /// to a cancelled response and are dropped, but whether the model is speaking still
    /// counts (falling silent there ends the suppression, as in [`Self::on_model_output`]).
    pub(super) fn on_fenced_output(&mut self, out: &StepOutput) {
        if self.autonomous {
            self.model_speaking_now(out.speaking);
        }
    }

    /// Tracks the autonomous model's speaking state; true if it speaks now. Falling silent
    /// ends the suppression and reports it ([`Self::model_fell_silent`]).
    fn model_speaking_now(&mut self, speaking: bool) -> bool {
        let was_speaking = std::mem::replace(&mut self.model_speaking, speaking);
        if !speaking {
            self.suppress_speak = false;
            if was_speaking {
                self.model_fell_silent();
            }
        }
        speaking
    }

    fn stream_audio(&mut self, a: &mut Active, out: &StepOutput) {
        if !out.text.is_empty() {
            a.ledger.text(&out.text);
            self.emit(ServerEventBody::ResponseOutputAudioTranscriptDelta {
                at: a.at(),
                delta: out.text.clone(),
            });
        }
        if out.audio.is_empty() {
            return;
        }
        let n = out.audio.len() as u64;
        a.ledger.generated(n);
        // The stored item keeps at most one item's worth of audio (what retrieval returns).
        let keep = self
            .limits
            .max_item_samples
            .min(self.limits.max_conversation_samples);
        if a.audio.len() as u64 + n <= keep {
            a.audio.extend_from_slice(&out.audio);
        }
        a.ledger.queued(n);
        if self.play(a.tag, &out.audio) {
            return; // WebRTC: the engine reports what left
        }
        if a.ledger.generated == n {
            if let Some(t) = self.turn_end.take() {
                crate::metrics::METRICS
                    .speech_end_to_first_audio
                    .observe(t.elapsed());
            }
        }
        let bytes = a.encoder.encode(&out.audio);
        if !bytes.is_empty() {
            let delta = base64::engine::general_purpose::STANDARD.encode(bytes);
            self.emit(ServerEventBody::ResponseOutputAudioDelta { at: a.at(), delta });
        }
        // WebSocket: handed to the socket is what the ledger counts as sent.
        a.ledger.sent(n);
    }

    /// `response.cancel`.
    pub(super) fn response_cancel(
        &mut self,
        response_id: Option<String>,
    ) -> Result<(), ErrorPayload> {
        let matches = match (&self.active, &response_id) {
            (Some(a), Some(id)) => &a.response.id == id,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if !matches {
            return Err(ErrorPayload::invalid(
                codes::RESPONSE_CANCEL_NOT_ACTIVE,
                "Cancellation failed: no active response found",
            )
            .with_param("response_id"));
        }
        self.cancel_active("client_cancelled");
        Ok(())
    }

    /// Cancels the active response: advance the epoch (fencing the model's output), stop the
    /// model, finish the response as `cancelled`.
    pub(super) fn cancel_active(&mut self, reason: &str) {
        if self.active.is_none() {
            return;
        }
        self.fence_model();
        self.finish(ResponseStatus::Cancelled, Some(reason));
    }

    /// Fails the active response after a model error (an autonomous model's response that
    /// had spoken is followed by `response.listen`, as every `response.speak` is).
    pub(super) fn fail_response(&mut self, code: &str, message: &str) {
        if let Some(a) = &mut self.active {
            let spoke = a.spoke.then(|| a.response.id.clone());
            a.response.status_details = Some(StatusDetails {
                kind: ResponseStatus::Failed,
                reason: None,
                error: Some(StatusError {
                    kind: "server_error".into(),
                    code: code.to_string(),
                }),
            });
            tracing::warn!(session = %self.cfg.id, %message, "response failed");
            self.finish(ResponseStatus::Failed, None);
            if spoke.is_some() {
                let listen = ServerEventBody::model_listen(&self.cfg.id, self.epoch, spoke);
                self.emit(listen);
            }
        }
    }

    /// The done chain and `response.done`.
    fn finish(&mut self, status: ResponseStatus, reason: Option<&str>) {
        let Some(mut a) = self.active.take() else {
            return;
        };
        self.speak_deadline = None;
        let at = a.at();
        match a.modality {
            Modality::Audio => {
                self.finish_playback(a.tag);
                let tail = if self.transport.is_webrtc() {
                    Vec::new()
                } else {
                    a.encoder.finish()
                };
                if status == ResponseStatus::Completed && !tail.is_empty() {
                    let delta = base64::engine::general_purpose::STANDARD.encode(tail);
                    self.emit(ServerEventBody::ResponseOutputAudioDelta {
                        at: at.clone(),
                        delta,
                    });
                }
                self.emit(ServerEventBody::ResponseOutputAudioDone { at: at.clone() });
                let transcript = a.ledger.transcript().to_string();
                self.emit(ServerEventBody::ResponseOutputAudioTranscriptDone {
                    at: at.clone(),
                    transcript,
                });
            }
            Modality::Text => self.emit(ServerEventBody::ResponseOutputTextDone {
                at: at.clone(),
                text: a.text.clone(),
            }),
        }
        self.emit(ServerEventBody::ResponseContentPartDone { at, part: a.part() });
        let item_status = if status == ResponseStatus::Completed {
            ItemStatus::Completed
        } else {
            ItemStatus::Incomplete
        };
        let item = a.item(item_status);
        self.emit(ServerEventBody::ResponseOutputItemDone {
            response_id: a.response.id.clone(),
            output_index: 0,
            item: Box::new(item.clone()),
        });
        if a.in_conversation {
            self.store_item(&mut a, item.clone());
        }
        let (out_text, out_audio) = a.output_tokens();
        let r = &mut a.response;
        r.status = status;
        if r.status_details.is_none() {
            r.status_details = Some(StatusDetails {
                kind: status,
                reason: reason.map(str::to_string),
                error: None,
            });
        }
        r.output = vec![item];
        r.usage = Some(Usage::new(
            a.input_tokens.0,
            a.input_tokens.1,
            out_text,
            out_audio,
        ));
        self.emit(ServerEventBody::ResponseDone {
            response: Box::new(a.response),
        });
        self.arm_idle();
    }

    /// Moves the finished assistant item (its audio and ledger) into the conversation.
    fn store_item(&mut self, a: &mut Active, item: Item) {
        let audio = (a.modality == Modality::Audio)
            .then(|| (Arc::from(std::mem::take(&mut a.audio)), a.ledger.clone()));
        if !self.conv.finish_item(&a.item_id, item.clone(), audio) {
            return;
        }
        let evicted = self.conv.evict_except(&a.item_id);
        let prev = self.conv.previous_id(&a.item_id);
        self.emit(ServerEventBody::ConversationItemDone {
            previous_item_id: prev,
            item: Box::new(item),
        });
        self.emit_evicted(evicted);
    }
}
