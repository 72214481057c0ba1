//! The duplex session actor: one task per call that owns all of the call's state (effective
//! config, conversation, input buffer, VAD, the active response and its playback ledger, the
//! epoch fence) and is fed, in order, by client events, model outputs and timers. It never
//! blocks: audio decoding is a few microseconds per frame, model steps run on the model loop.

mod audio_io;
mod conversation;
mod input;
mod items;
pub mod ledger;
mod playback;
mod response;
#[cfg(test)]
mod tests;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;

use crate::model_loop::{ModelEvent, ModelSession};
use crate::protocol::{
    codes, ids, ClientEvent, Envelope, ErrorPayload, ServerEvent, ServerEventBody, SessionConfig,
};
use conversation::Conversation;
use input::InputState;
use response::Active;

/// Where a WebRTC session's audio goes: the media engine's playback queue for the call.
pub trait MediaSink: Send {
    /// Queues 24 kHz audio of the response tagged `tag` for playout.
    fn play(&self, tag: u64, pcm: Vec<f32>);
    /// No more audio of `tag` will come; the engine answers [`SessionInput::Media`]`.drained` once
    /// its last sample left.
    fn finish(&self, tag: u64);
    /// Purges everything queued; the engine answers with [`SessionInput::Cleared`].
    fn clear(&self);
}

/// Which transport carries the session.
pub enum Transport {
    /// `GET /v1/realtime`: audio travels base64 in events.
    WebSocket,
    /// `POST /v1/realtime/calls`: audio on RTP, paced by the media engine.
    WebRtc(Box<dyn MediaSink>),
}

impl Transport {
    fn is_webrtc(&self) -> bool {
        matches!(self, Transport::WebRtc(_))
    }
}

/// How long a client-created response on an autonomous model waits for the model to speak
/// before it completes empty.
const SPEAK_TIMEOUT: Duration = Duration::from_secs(4);

/// Bounds that keep a session's memory finite.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Uncommitted input audio, in samples at 24 kHz.
    pub max_input_samples: u64,
    /// Items in the conversation before the oldest are evicted.
    pub max_items: usize,
    /// Audio stored in the conversation, in samples at 24 kHz, before the oldest items are evicted.
    pub max_conversation_samples: u64,
    /// Events the client may have unread before the session is closed.
    pub max_outbound_events: usize,
    /// Longest session.
    pub max_session: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_input_samples: 300 * 24_000,
            max_items: 1_000,
            max_conversation_samples: 900 * 24_000,
            max_outbound_events: 4_096,
            max_session: Duration::from_secs(3_600),
        }
    }
}

/// What the transports hand to the session.
#[derive(Debug)]
pub enum SessionInput {
    /// A decoded client event.
    Client(Envelope),
    /// A client message that failed to decode; reported as an `error` event.
    Invalid(ErrorPayload),
    /// A client event as text (decoded by the actor; the WebRTC data channel).
    Text(String),
    /// One media-engine tick of a WebRTC call, in one message.
    Media {
        /// Caller audio at 24 kHz (20 ms), once RTP flows.
        audio: Option<Vec<f32>>,
        /// `(tag, samples at 24 kHz)` of response audio that left on RTP.
        played: Vec<(u64, u64)>,
        /// Tags whose last sample left (replies to [`MediaSink::finish`]).
        drained: Vec<u64>,
    },
    /// The media engine purged its playback queue (reply to [`MediaSink::clear`]).
    Cleared,
    /// Another connection (a sideband WebSocket) subscribes to this session's events.
    Attach(mpsc::Sender<Outbound>),
    /// The call ended (hangup, peer gone, timeout): close every subscriber and stop.
    Ended,
}

/// What the session hands to the transport.
#[derive(Debug)]
pub enum Outbound {
    /// An event to send.
    Event(ServerEvent),
    /// Close the connection after the events before it.
    Close {
        /// Close code (WebSocket semantics).
        code: u16,
        /// Reason.
        reason: String,
    },
}

/// Everything a new session needs.
pub struct SessionParams {
    /// The transport.
    pub transport: Transport,
    /// Model name reported in the session.
    pub model_name: String,
    /// The session's model slot.
    pub model: ModelSession,
    /// Model frame size in samples.
    pub model_frame: usize,
    /// Limits.
    pub limits: Limits,
    /// Outbound events.
    pub out: mpsc::Sender<Outbound>,
}

/// The actor's state.
pub struct Session {
    cfg: SessionConfig,
    transport: Transport,
    conversation_id: String,
    conv: Conversation,
    /// Event subscribers: the transport first, then sideband connections.
    outs: Vec<mpsc::Sender<Outbound>>,
    closing: bool,
    limits: Limits,
    input: InputState,
    model: ModelSession,
    epoch: u64,
    active: Option<Active>,
    /// The most recent response's id (for `output_audio_buffer.cleared` when nothing plays).
    last_response_id: Option<String>,
    /// Tag of the next response (WebRTC playback accounting).
    next_tag: u64,
    /// Responses whose audio the media engine is playing (WebRTC), oldest first.
    playback: Vec<playback::Playback>,
    /// A purge was requested and its [`SessionInput::Cleared`] is pending.
    clearing: bool,
    /// The purge covers responses with tags below this (those started before it): audio
    /// sent to the engine after the purge command is queued after it and plays.
    clear_below: u64,
    /// When server VAD last saw the caller stop speaking (for the latency metric).
    turn_end: Option<std::time::Instant>,
    /// When a barge-in was detected (for the barge-in metric).
    barge_at: Option<std::time::Instant>,
    /// When server VAD's `idle_timeout_ms` fires, and the input clock when it was armed.
    idle: Option<(tokio::time::Instant, u64)>,
    /// The model decides on its own when to speak (full duplex): its speech opens and ends
    /// responses, with `response.speak`/`response.listen`.
    autonomous: bool,
    /// Autonomous models: whether the model's last step was part of its speech.
    model_speaking: bool,
    /// Autonomous models: a response was cancelled; its model's ongoing speech opens no new
    /// response until the model fell silent.
    suppress_speak: bool,
    /// Autonomous models: when the client-created response still waiting for speech gives up.
    speak_deadline: Option<tokio::time::Instant>,
    /// How long that wait is ([`SPEAK_TIMEOUT`]).
    speak_timeout: Duration,
}

impl Session {
    /// Builds a session with default configuration.
    pub fn new(p: SessionParams) -> Self {
        let expires = SystemTime::now() + p.limits.max_session;
        let expires_at = expires
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let cfg = SessionConfig::new(ids::session_id(), p.model_name, expires_at);
        let input = InputState::new(&cfg, p.model_frame);
        let autonomous = p.model.autonomous();
        Self {
            conv: Conversation::new(p.limits.max_items, p.limits.max_conversation_samples),
            cfg,
            transport: p.transport,
            conversation_id: ids::conversation_id(),
            outs: vec![p.out],
            closing: false,
            limits: p.limits,
            input,
            model: p.model,
            epoch: 0,
            active: None,
            last_response_id: None,
            next_tag: 1,
            playback: Vec::new(),
            clearing: false,
            clear_below: 0,
            turn_end: None,
            barge_at: None,
            idle: None,
            autonomous,
            model_speaking: false,
            suppress_speak: false,
            speak_deadline: None,
            speak_timeout: SPEAK_TIMEOUT,
        }
    }

    /// Applies the `session` object a call was created with, before the session runs.
    pub fn configure(&mut self, patch: crate::protocol::SessionPatch) -> Result<(), ErrorPayload> {
        self.cfg.apply(patch)?;
        self.input.reconfigure(&self.cfg);
        Ok(())
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.cfg.id
    }

    /// Runs the actor until the transport closes, the session expires or the model fails.
    pub async fn run(
        mut self,
        mut inbox: mpsc::Receiver<SessionInput>,
        mut model_rx: mpsc::Receiver<ModelEvent>,
    ) {
        self.emit(ServerEventBody::SessionCreated {
            session: Box::new(self.cfg.clone()),
        });
        let expiry = tokio::time::sleep(self.limits.max_session);
        tokio::pin!(expiry);
        while !self.closing {
            tokio::select! {
                biased;
                msg = inbox.recv() => match msg {
                    Some(input) => self.input(input),
                    None => break,
                },
                ev = model_rx.recv() => match ev {
                    Some(ev) => self.on_model(ev),
                    None => {
                        self.fail_response(codes::MODEL_ERROR, "the model loop stopped");
                        self.fatal(ErrorPayload::server(codes::MODEL_ERROR, "the model loop stopped"));
                    }
                },
                _ = sleep_until(self.idle.map(|(at, _)| at)) => self.idle_timeout(),
                _ = sleep_until(self.speak_deadline) => self.speak_timed_out(),
                _ = &mut expiry => {
                    self.error(ErrorPayload::invalid(codes::SESSION_EXPIRED, "the session reached its maximum duration"));
                    self.close(1000, "session expired");
                }
            }
        }
        tracing::debug!(session = %self.cfg.id, "session ended");
    }

    /// Arms (or disarms) the VAD idle timeout after a response ended. Not on an autonomous
    /// model: it decides itself when to speak, so a silent caller prompts nothing.
    fn arm_idle(&mut self) {
        if self.autonomous {
            self.idle = None;
            return;
        }
        self.idle = match &self.cfg.audio.input.turn_detection {
            Some(crate::protocol::TurnDetection::ServerVad {
                idle_timeout_ms: Some(ms),
                ..
            }) => {
                let at = tokio::time::Instant::now() + Duration::from_millis(*ms);
                Some((at, self.input.clock()))
            }
            _ => None,
        };
    }

    fn input(&mut self, input: SessionInput) {
        match input {
            SessionInput::Client(env) => self.handle(env),
            SessionInput::Invalid(err) => self.error(err),
            SessionInput::Text(text) => match crate::protocol::decode(&text) {
                Ok(env) => self.handle(env),
                Err(err) => self.error(err),
            },
            SessionInput::Media {
                audio,
                played,
                drained,
            } => {
                if let Some(pcm) = audio {
                    if let Err(e) = self.append_pcm(&pcm, false) {
                        self.error(e);
                    }
                }
                for (tag, samples) in played {
                    self.on_played(tag, samples);
                }
                for tag in drained {
                    self.on_drained(tag);
                }
            }
            SessionInput::Ended => self.close(1000, "call ended"),
            SessionInput::Cleared => self.on_cleared(),
            SessionInput::Attach(tx) => {
                let created = ServerEvent::new(ServerEventBody::SessionCreated {
                    session: Box::new(self.cfg.clone()),
                });
                if tx.try_send(Outbound::Event(created)).is_ok() {
                    self.outs.push(tx);
                }
            }
        }
    }

    fn handle(&mut self, env: Envelope) {
        let event_id = env.event_id;
        let result = match env.event {
            ClientEvent::SessionUpdate { session } => self.session_update(*session),
            ClientEvent::InputAudioBufferAppend { .. } if self.transport.is_webrtc() => Err(ErrorPayload::invalid(
                codes::INVALID_EVENT_FOR_TRANSPORT,
                "input_audio_buffer.append is not used on WebRTC calls: the audio arrives on the RTP track",
            )),
            ClientEvent::InputAudioBufferAppend { audio } => self.append_base64(&audio),
            ClientEvent::InputAudioBufferCommit => self.commit_manual(),
            ClientEvent::InputAudioBufferClear => {
                self.clear_input();
                Ok(())
            }
            ClientEvent::OutputAudioBufferClear if self.transport.is_webrtc() => {
                self.clear_output("client_cancelled");
                Ok(())
            }
            ClientEvent::OutputAudioBufferClear => Err(ErrorPayload::invalid(
                codes::INVALID_EVENT_FOR_TRANSPORT,
                "output_audio_buffer.clear applies to WebRTC calls; on WebSocket the client owns playback",
            )),
            ClientEvent::ConversationItemCreate { previous_item_id, item } => {
                self.item_create(previous_item_id, *item)
            }
            ClientEvent::ConversationItemRetrieve { item_id } => self.item_retrieve(&item_id),
            ClientEvent::ConversationItemTruncate { item_id, content_index, audio_end_ms } => {
                self.item_truncate(&item_id, content_index, audio_end_ms)
            }
            ClientEvent::ConversationItemDelete { item_id } => self.item_delete(&item_id),
            ClientEvent::ResponseCreate { response } => {
                self.response_create(response.map(|b| *b).unwrap_or_default())
            }
            ClientEvent::ResponseCancel { response_id } => self.response_cancel(response_id),
        };
        if let Err(e) = result {
            self.error(e.with_event_id(event_id));
        }
    }

    fn session_update(&mut self, patch: crate::protocol::SessionPatch) -> Result<(), ErrorPayload> {
        self.cfg.apply(patch)?;
        self.input.reconfigure(&self.cfg);
        self.emit(ServerEventBody::SessionUpdated {
            session: Box::new(self.cfg.clone()),
        });
        Ok(())
    }

    fn on_model(&mut self, ev: ModelEvent) {
        match ev {
            ModelEvent::Output { epoch, output } => {
                if epoch != self.epoch {
                    // Fenced: belongs to a cancelled response.
                    self.on_fenced_output(&output);
                    return;
                }
                self.on_model_output(output);
            }
            ModelEvent::Failed { code, message } => {
                self.fail_response(code, &message);
                self.fatal(ErrorPayload::server(
                    codes::MODEL_ERROR,
                    format!("{code}: {message}"),
                ));
            }
        }
    }

    /// Sends an event to every subscriber. The transport that stops reading gets the session
    /// closed; a sideband subscriber that stops reading is dropped.
    fn emit(&mut self, body: ServerEventBody) {
        if self.closing {
            return;
        }
        let event = ServerEvent::new(body);
        let mut i = 0;
        while i < self.outs.len() {
            match self.outs[i].try_send(Outbound::Event(event.clone())) {
                Ok(()) => i += 1,
                Err(e) if i == 0 => {
                    tracing::warn!(session = %self.cfg.id, error = %e, "the transport is not reading events; closing the session");
                    self.closing = true;
                    return;
                }
                Err(_) => {
                    self.outs.remove(i);
                }
            }
        }
    }

    fn error(&mut self, error: ErrorPayload) {
        if let Some(code) = &error.code {
            crate::metrics::METRICS.error(code);
        }
        tracing::debug!(session = %self.cfg.id, code = ?error.code, message = %error.message, "error event");
        self.emit(ServerEventBody::Error { error });
    }

    fn fatal(&mut self, error: ErrorPayload) {
        self.error(error);
        self.close(1011, "session failed");
    }

    fn close(&mut self, code: u16, reason: &str) {
        if !self.closing {
            for out in &self.outs {
                let _ = out.try_send(Outbound::Close {
                    code,
                    reason: reason.to_string(),
                });
            }
        }
        self.closing = true;
    }
}

/// Sleeps until a deadline, or forever when none is armed.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
