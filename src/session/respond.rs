//! Responses in the session: the GA lifecycle (created → output item → content part →
//! deltas → the done chain → `response.done`, always), cancellation behind the epoch fence,
//! and where a response's item goes. What a response itself does is `response.rs`; how an
//! autonomous model opens and ends responses is `floor.rs`.

use std::sync::Arc;

use duet_media::Adpcm;
use duet_models::{ContextItem, OutputModality, Request, StepOutput, Tool, ToolChoice};
use serde_json::Value;

use super::conversation::{context_item, user_turn_of, Conversation, StoredItem};
use super::reply::{Cx, Reply};
use super::response::{input_tokens, ActiveResponse};
use super::Epoch;
use crate::protocol::response::{ResponseAudio, ResponseAudioOutput};
use crate::protocol::session::{validate_max_tokens, validate_modalities};
use crate::protocol::{
    codes, ids, AudioFormat, Content, ErrorPayload, Item, ItemStatus, Modality, Response,
    ResponseParams, ResponseStatus, Role, ServerEventBody, SessionConfig,
};

/// User audio items whose audio goes to the model with the context (the newest); older ones
/// go as their transcripts.
const CONTEXT_AUDIO_TURNS: usize = 4;

/// What a response asks the model, besides its output modality.
pub(super) struct Ask {
    instructions: String,
    pub(super) input: Vec<ContextItem>,
    tools: Vec<Tool>,
    tool_choice: ToolChoice,
}

impl Reply {
    /// `response.create` (also used by server VAD with default parameters). On an autonomous
    /// model the response opens at once and waits for the model's speech to fill it (no
    /// request goes to the model, which decides itself when to speak); without speech within
    /// the speak timeout it completes empty.
    pub(super) fn response_create(
        &mut self,
        cx: &mut Cx<'_>,
        params: ResponseParams,
    ) -> Result<(), ErrorPayload> {
        let (active, ask) = self.prepare(cx, params)?;
        if self.floor.autonomous {
            self.floor.speak_deadline = Some(cx.out.now + self.floor.speak_timeout);
            self.begin(cx, active, None, false);
            return Ok(());
        }
        let request = respond_request(cx.cfg, &active, ask);
        // An answer started before the turn was confirmed, to the same words: it plays now.
        let epoch = self.model.epoch;
        let answer = match self.speculation.take() {
            Some(s) if !s.is_adopted() && s.answers(&request, epoch) => Some(s.adopt()),
            Some(s) if !s.is_adopted() => {
                self.speculation = Some(s);
                self.abandon_speculation(cx.transcripts);
                None
            }
            // None, or one whose transcription belongs to an item now: it stays.
            other => {
                self.speculation = other;
                None
            }
        };
        if let Some(held) = answer {
            self.begin(cx, active, None, false);
            for out in held {
                if self.active.is_none() {
                    break;
                }
                self.on_model_output(cx, out);
            }
            return Ok(());
        }
        self.begin(cx, active, Some(request), false);
        Ok(())
    }

    /// Validates `response.create` parameters into a response (not yet started) and what it
    /// asks the model: instructions, context and tools.
    pub(super) fn prepare(
        &self,
        cx: &Cx<'_>,
        params: ResponseParams,
    ) -> Result<(ActiveResponse, Ask), ErrorPayload> {
        let in_conversation = in_conversation(params.conversation.as_deref())?;
        check_none_active(self.active.as_ref(), in_conversation)?;
        if params.instructions.is_some() || params.tools.is_some() {
            super::memory::check_prompt(
                cx.limits,
                params.instructions.as_deref().unwrap_or_default(),
                params.tools.as_deref().unwrap_or_default(),
                "response",
            )?;
        }
        let modality = match params.output_modalities {
            Some(m) => validate_modalities(m, "response.output_modalities")?[0],
            None => cx.cfg.output_modalities[0],
        };
        let max_output_tokens = match params.max_output_tokens {
            Some(v) => validate_max_tokens(v, "response.max_output_tokens")?,
            None => cx.cfg.max_output_tokens.clone(),
        };
        let audio = response_audio(cx.cfg, params.audio.and_then(|a| a.output));
        let format = audio.output.format;
        let (tools, tool_choice) = response_tools(
            &self.model.caps,
            cx.cfg,
            params.tools.as_deref(),
            params.tool_choice.as_ref(),
        )?;
        let context = match params.input {
            Some(items) => resolve_input(cx.conv, cx.cfg.audio.input.format, &items)?,
            None => cx.conv.context(CONTEXT_AUDIO_TURNS),
        };
        let instructions = params
            .instructions
            .unwrap_or_else(|| cx.cfg.instructions.clone());
        let response = Response {
            conversation_id: in_conversation.then(|| cx.conv.id.clone()),
            output_modalities: vec![modality],
            max_output_tokens: max_output_tokens.clone(),
            metadata: params.metadata,
            ..new_response(audio)
        };
        let (tokens, max) = (input_tokens(&context), max_output_tokens.as_u64());
        let mut active = ActiveResponse::new(response, in_conversation, format, tokens, max);
        // A response that may call a tool opens its message only when the model speaks or
        // writes (a call alone makes no empty message).
        active.defer_message = !tools.is_empty() && tool_choice != ToolChoice::None;
        let input = context;
        let ask = Ask {
            instructions,
            input,
            tools,
            tool_choice,
        };
        Ok((active, ask))
    }

    /// Emits the opening events of a response, sends `request` to the model, and makes the
    /// response active. `speaking`: an autonomous model is already speaking it
    /// (`response.speak` goes out before the content part).
    pub(super) fn begin(
        &mut self,
        cx: &mut Cx<'_>,
        mut active: ActiveResponse,
        request: Option<Request>,
        speaking: bool,
    ) {
        active.tag = self.view.next_tag();
        self.view.last_response_id = Some(active.response.id.clone());
        if active.modality == Modality::Audio {
            let item = active.in_conversation.then_some(active.item_id.as_str());
            if cx.transport.is_webrtc() {
                self.view
                    .track(cx.conv, active.tag, &active.response.id, item);
            }
        }
        cx.out.emit(ServerEventBody::ResponseCreated {
            response: Box::new(active.response.clone()),
        });
        let defer = active.defer_message;
        cx.timers.vad_idle = None;
        self.active = Some(active);
        if !defer {
            self.open_message(cx, speaking);
        }
        if let Some(request) = request {
            self.request_model(cx, request);
        }
    }

    /// A model step under `epoch`: one from before the last fence belongs to a cancelled
    /// response.
    pub(super) fn on_output(&mut self, cx: &mut Cx<'_>, epoch: Epoch, out: StepOutput) {
        if epoch == self.model.epoch {
            self.on_model_output(cx, out);
        } else {
            self.on_fenced_output(cx, &out);
        }
    }

    /// A model step (already past the epoch fence).
    pub(super) fn on_model_output(&mut self, cx: &mut Cx<'_>, out: StepOutput) {
        if cx.cfg.is_transcription() {
            return; // a transcription session never responds
        }
        if self.floor.autonomous {
            return self.on_autonomous_output(cx, out);
        }
        if self.active.is_none() {
            let epoch = self.model.epoch;
            match self.speculation.as_mut().and_then(|s| s.hold(out, epoch)) {
                Some(true) => self.abandon_speculation(cx.transcripts),
                Some(false) => {}
                None => {
                    tracing::debug!(session = %cx.cfg.id, "model output without a response; dropped")
                }
            }
            return;
        }
        let over_limit = self.stream_active(cx, &out);
        if let Some(failure) = out.failed {
            // The answer failed, not the session: the response ends failed, the error
            // follows it, and the session goes on.
            self.fail_response(cx, &failure.code, &failure.message);
            cx.out
                .error(ErrorPayload::server(&failure.code, failure.message));
        } else if out.end_of_turn {
            self.finish(cx, ResponseStatus::Completed, None);
        } else if over_limit {
            self.stop_incomplete(cx);
        }
    }

    /// Streams one step into the active response and sends what it produced; returns
    /// whether the response reached `max_output_tokens`.
    pub(super) fn stream_active(&mut self, cx: &mut Cx<'_>, out: &StepOutput) -> bool {
        let keep = cx
            .limits
            .max_item_samples
            .min(cx.limits.max_conversation_samples);
        // The answer's kept audio grows with it (at most one item's worth).
        if let Err(e) = cx.meters.reserve(Adpcm::bytes_for(out.audio.len()) as u64) {
            self.fence_model();
            self.fail_response(cx, codes::SERVER_MEMORY_EXHAUSTED, &e.message);
            cx.out.error(e);
            return false;
        }
        if let Some(call) = &out.tool_call {
            self.stream_call(cx, call);
        }
        let Some(a) = self.active.as_ref() else {
            return false;
        };
        if a.message_index.is_none() && a.speaks(out) {
            self.close_call(cx, ItemStatus::Completed);
            self.open_message(cx, false);
        }
        let sink = cx.transport.sink();
        let Some(a) = self.active.as_mut() else {
            return false;
        };
        let streamed = a.stream(out, keep, sink);
        let over_limit = a.over_limit();
        if streamed.first_handed {
            if let Some(t) = cx.timers.stamps.turn_end {
                crate::metrics::METRICS
                    .answer_start
                    .observe(cx.out.now.saturating_duration_since(t));
            }
        }
        if streamed.first_audio {
            if let Some(t) = cx.timers.stamps.turn_end.take() {
                crate::metrics::METRICS
                    .speech_end_to_first_audio
                    .observe(cx.out.now.saturating_duration_since(t));
            }
        }
        for ev in streamed.events {
            cx.out.emit(ev);
        }
        over_limit
    }

    /// The response reached `max_output_tokens`: stop the model and end it `incomplete`.
    pub(super) fn stop_incomplete(&mut self, cx: &mut Cx<'_>) {
        self.fence_model();
        self.finish(cx, ResponseStatus::Incomplete, Some("max_output_tokens"));
    }

    /// Advances the epoch (fencing off the model's output in flight) and stops the model. An
    /// autonomous model may keep speaking: no response opens on its speech until it fell
    /// silent (if it is silent now, its next speech is new).
    pub(super) fn fence_model(&mut self) {
        self.model.epoch = self.model.epoch.next();
        self.model.request(self.model.epoch, Request::Cancel);
        if self.floor.autonomous {
            self.floor.suppress_speak = self.floor.model_speaking;
        }
    }

    /// `response.cancel`.
    pub(super) fn response_cancel(
        &mut self,
        cx: &mut Cx<'_>,
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
        self.cancel_active(cx, "client_cancelled");
        Ok(())
    }

    /// Cancels the active response: advance the epoch (fencing the model's output), stop the
    /// model, finish the response as `cancelled`.
    pub(super) fn cancel_active(&mut self, cx: &mut Cx<'_>, reason: &str) {
        if self.active.is_none() {
            return;
        }
        self.fence_model();
        self.finish(cx, ResponseStatus::Cancelled, Some(reason));
    }

    /// Fails the active response after a model error (an autonomous model's response that
    /// had spoken is followed by `response.listen`, as every `response.speak` is).
    pub(super) fn fail_response(&mut self, cx: &mut Cx<'_>, code: &str, message: &str) {
        let Some(a) = &mut self.active else { return };
        let spoke = a.spoke.then(|| a.response.id.clone());
        a.fail(code);
        tracing::warn!(session = %cx.cfg.id, %message, "response failed");
        self.finish(cx, ResponseStatus::Failed, None);
        if spoke.is_some() {
            let listen = ServerEventBody::model_listen(&cx.cfg.id, self.model.epoch.0, spoke);
            cx.out.emit(listen);
        }
    }

    /// The done chain and `response.done`.
    pub(super) fn finish(&mut self, cx: &mut Cx<'_>, status: ResponseStatus, reason: Option<&str>) {
        self.close_call(
            cx,
            match status {
                ResponseStatus::Completed => ItemStatus::Completed,
                _ => ItemStatus::Incomplete,
            },
        );
        let Some(mut a) = self.active.take() else {
            return;
        };
        self.floor.speak_deadline = None;
        if a.modality == Modality::Audio {
            if let Some(sink) = cx.transport.sink() {
                self.view.finish(sink, a.tag);
            }
        }
        let message = a.message_index.map(|_| {
            let (events, item) = a.done_chain(status, cx.transport.is_webrtc());
            for ev in events {
                cx.out.emit(ev);
            }
            if a.in_conversation {
                // The finished item (its audio and ledger) moves into the conversation.
                let audio = a.take_audio();
                let events = cx.conv.finish_answer(&a.item_id, item.clone(), audio);
                cx.out.emit_all(events);
            }
            item
        });
        let audio_out = a.ledger.generated;
        let response = a.into_done(status, reason, message);
        cx.out.count(super::UsageEvent::Response {
            status: status_name(status),
            audio_out,
            text_tokens: response
                .usage
                .as_ref()
                .map_or(0, |u| u.output_token_details.text_tokens),
        });
        cx.out.emit(ServerEventBody::ResponseDone {
            response: Box::new(response),
        });
        if let Some(ev) = cx.lease.and_then(super::durable::Lease::rate_limits) {
            cx.out.emit(ev);
        }
        let (autonomous, clock) = (self.floor.autonomous, cx.clock);
        cx.timers
            .arm_vad_idle(cx.cfg, autonomous, cx.out.now, clock);
    }
}

/// Whether a response belongs to the conversation (`conversation`: `auto` or absent) or
/// stands apart (`none`).
fn in_conversation(conversation: Option<&str>) -> Result<bool, ErrorPayload> {
    match conversation {
        None | Some("auto") => Ok(true),
        Some("none") => Ok(false),
        Some(other) => Err(ErrorPayload::invalid(
            codes::INVALID_VALUE,
            format!("conversation must be \"auto\" or \"none\", got {other:?}"),
        )
        .with_param("response.conversation")),
    }
}

/// A response's tools and tool choice: the session's, unless the response gives its own.
fn response_tools(
    caps: &super::machine::Caps,
    cfg: &SessionConfig,
    tools: Option<&[Value]>,
    choice: Option<&Value>,
) -> Result<(Vec<Tool>, ToolChoice), ErrorPayload> {
    match (tools, choice) {
        (None, None) => caps.check_tools(&cfg.model, &cfg.tools, &cfg.tool_choice, "session"),
        (tools, choice) => caps.check_tools(
            &cfg.model,
            tools.unwrap_or(&cfg.tools),
            choice.unwrap_or(&cfg.tool_choice),
            "response",
        ),
    }
}

/// A new response in progress with `audio`, nothing in it yet.
fn new_response(audio: ResponseAudio) -> Response {
    Response {
        id: ids::response_id(),
        object: "realtime.response",
        status: ResponseStatus::InProgress,
        status_details: None,
        output: Vec::new(),
        conversation_id: None,
        output_modalities: Vec::new(),
        max_output_tokens: Default::default(),
        audio,
        metadata: None,
        usage: None,
    }
}

/// What a response asks the model (in a session configured as `cfg`).
pub(super) fn respond_request(cfg: &SessionConfig, active: &ActiveResponse, ask: Ask) -> Request {
    let modality = match active.modality {
        Modality::Audio => OutputModality::Audio,
        Modality::Text => OutputModality::Text,
    };
    Request::Respond {
        modality,
        instructions: ask.instructions,
        input: ask.input,
        tools: ask.tools,
        tool_choice: ask.tool_choice,
        voice: voice_name(&active.response.audio.output.voice),
        speed: cfg.audio.output.speed as f32,
    }
}

/// The response's audio output: its own format and voice, else the session's (`cfg`).
fn response_audio(
    cfg: &SessionConfig,
    requested: Option<crate::protocol::response::ResponseAudioOutputParams>,
) -> ResponseAudio {
    let out = requested.unwrap_or_default();
    ResponseAudio {
        output: ResponseAudioOutput {
            format: out.format.unwrap_or(cfg.audio.output.format),
            voice: out.voice.unwrap_or_else(|| cfg.audio.output.voice.clone()),
        },
    }
}

/// One response at a time (`active`: the one now): OpenAI's error when both write to the conversation.
fn check_none_active(
    active: Option<&ActiveResponse>,
    in_conversation: bool,
) -> Result<(), ErrorPayload> {
    let Some(active) = active else {
        return Ok(());
    };
    Err(if in_conversation && active.in_conversation {
        ErrorPayload::invalid(
            codes::CONVERSATION_ALREADY_HAS_ACTIVE_RESPONSE,
            format!("Conversation already has an active response in progress: {}. Wait until the response is finished before creating a new one.", active.response.id),
        )
    } else {
        ErrorPayload::invalid(
            codes::RESPONSE_ALREADY_ACTIVE,
            format!(
                "the model is producing response {}; Duet runs one response at a time per session",
                active.response.id
            ),
        )
    })
}

/// Resolves `response.input`: item references and inline items, as model context (`format`: the input audio format).
fn resolve_input(
    conv: &Conversation,
    format: AudioFormat,
    items: &[Value],
) -> Result<Vec<ContextItem>, ErrorPayload> {
    let mut turns = Vec::new();
    for (i, v) in items.iter().enumerate() {
        let param = format!("response.input[{i}]");
        let turn = input_turn(conv, format, v).map_err(|e| e.with_param(param))?;
        turns.extend(turn);
    }
    Ok(turns)
}

/// One entry of `response.input`: an item reference or an inline item.
fn input_turn(
    conv: &Conversation,
    format: AudioFormat,
    v: &Value,
) -> Result<Option<ContextItem>, ErrorPayload> {
    if v.get("type").and_then(Value::as_str) == Some("item_reference") {
        let id = v.get("id").and_then(Value::as_str).unwrap_or_default();
        let stored = conv.get(id).ok_or_else(|| {
            ErrorPayload::invalid(
                codes::ITEM_NOT_FOUND,
                format!("item {id:?} does not exist in the conversation"),
            )
        })?;
        return Ok(context_item(stored, true));
    }
    let mut item: Item = serde_json::from_value(v.clone()).map_err(|e| {
        ErrorPayload::invalid(codes::INVALID_VALUE, format!("invalid input item: {e}"))
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
        .map(|b64| super::audio_io::decode_clip(format, &b64))
        .transpose()?;
    if let Some(turn) = user_turn_of(&item, || audio.map(Arc::from)) {
        return Ok(Some(ContextItem::User(turn)));
    }
    Ok(context_item(&StoredItem::plain(item), false))
}

/// A voice's name: the string, or a custom voice's `id`.
fn voice_name(voice: &Value) -> String {
    match voice {
        Value::String(s) => s.clone(),
        other => other
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    }
}

/// A finished response's status, as usage names it.
fn status_name(status: ResponseStatus) -> &'static str {
    match status {
        ResponseStatus::InProgress => "in_progress",
        ResponseStatus::Completed => "completed",
        ResponseStatus::Cancelled => "cancelled",
        ResponseStatus::Incomplete => "incomplete",
        ResponseStatus::Failed => "failed",
    }
}
