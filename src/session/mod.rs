//! The duplex session actor: one task per call that owns all of the call's state (effective
//! config, conversation, input buffer, VAD, the active response and its playback ledger, the
//! epoch fence) and is fed, in order, by client events, model outputs and timers. It never
//! blocks: audio decoding is a few microseconds per frame, model steps run on the model loop.

mod audio_io;
mod conversation;
mod input;
mod items;
pub mod ledger;
pub mod outbound;
mod playback;
mod response;
mod signals;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, watch, OwnedSemaphorePermit};

use crate::model_loop::{ModelEvent, ModelSession};
use crate::protocol::{
    codes, ids, ClientEvent, Envelope, ErrorPayload, ServerEvent, ServerEventBody, SessionConfig,
};
use conversation::Conversation;
use input::InputState;
use outbound::QueueError;
pub use outbound::{queue, Abort, Delivery, EventReceiver, EventSender, Held, Received, Rendered};
use response::Active;
pub use signals::{MediaReport, MediaSignals};

/// Where a WebRTC session's audio goes: the media engine's playback queue for the call.
pub trait MediaSink: Send {
    /// Queues 24 kHz audio of the response tagged `tag` for playout.
    fn play(&self, tag: u64, pcm: Vec<f32>);
    /// No more audio of `tag` will come; the engine answers [`SessionInput::Media`]`.drained` once
    /// its last sample left.
    fn finish(&self, tag: u64);
    /// Purges everything queued; the engine answers with [`MediaSignals::cleared`].
    fn clear(&self);
}

/// Which transport carries the session.
pub enum Transport {
    /// `GET /v1/realtime`: audio travels base64 in events.
    WebSocket,
    /// `POST /v1/realtime/calls`: audio on RTP, paced by the media engine, which reports
    /// what played through `signals`.
    WebRtc {
        /// The call's playback queue.
        sink: Box<dyn MediaSink>,
        /// What the engine reports back (never lost).
        signals: Arc<MediaSignals>,
    },
}

impl Transport {
    fn is_webrtc(&self) -> bool {
        matches!(self, Transport::WebRtc { .. })
    }
}

/// The server's lifecycle, as sessions see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    /// Serving.
    Running,
    /// Shutting down: sessions are told at once and closed at the deadline.
    Draining {
        /// When every session closes (1001).
        deadline: tokio::time::Instant,
    },
}

/// How long a client-created response on an autonomous model waits for the model to speak
/// before it completes empty.
const SPEAK_TIMEOUT: Duration = Duration::from_secs(4);

/// One second of session audio, in samples.
const SECOND: u64 = duet_media::SESSION_RATE as u64;

/// Bounds that keep a session's memory and lifetime finite.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Uncommitted input audio, in samples at 24 kHz.
    pub max_input_samples: u64,
    /// Items in the conversation before the oldest are evicted.
    pub max_items: usize,
    /// Audio stored in the conversation, in samples at 24 kHz, before the oldest items are evicted.
    pub max_conversation_samples: u64,
    /// Audio of one item (`conversation.item.create`), in samples at 24 kHz.
    pub max_item_samples: u64,
    /// Bytes of events a subscriber may have unsent before the session closes
    /// (`event_queue_full`); a single larger event is replaced by an `error`.
    pub max_outbound_bytes: usize,
    /// Longest session.
    pub max_session: Duration,
    /// A session with no client event and no audio for this long closes (`session_idle`).
    pub idle: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_input_samples: 300 * SECOND,
            max_items: 1_000,
            max_conversation_samples: 900 * SECOND,
            max_item_samples: 300 * SECOND,
            max_outbound_bytes: 32 << 20,
            max_session: Duration::from_secs(3_600),
            idle: Duration::from_secs(300),
        }
    }
}

/// A client message and the inbound bytes it holds (released once the session handled it).
#[derive(Debug)]
pub struct Inbound {
    /// The message.
    pub input: SessionInput,
    /// Its share of the connection's inbound byte budget.
    pub hold: Option<OwnedSemaphorePermit>,
}

impl From<SessionInput> for Inbound {
    fn from(input: SessionInput) -> Self {
        Self { input, hold: None }
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
    /// Caller audio of a WebRTC call at 24 kHz (one 20 ms media-engine tick). What played,
    /// drained or was cleared travels in [`MediaSignals`], which never drop.
    Media(Vec<f32>),
    /// Another connection (a sideband WebSocket) subscribes to this session's events.
    Attach(EventSender),
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
    /// Outbound events (the transport's queue).
    pub out: EventSender,
    /// The server's lifecycle (drain).
    pub lifecycle: watch::Receiver<Lifecycle>,
}

/// The actor's state.
pub struct Session {
    cfg: SessionConfig,
    transport: Transport,
    conversation_id: String,
    conv: Conversation,
    /// Event subscribers: the transport first, then sideband connections.
    outs: Vec<EventSender>,
    closing: bool,
    /// The client `event_id` of the event being handled (named by errors that replace
    /// events too large for the transport).
    cause: Option<Arc<str>>,
    /// When the client last sent an event or audio (for [`Limits::idle`]).
    last_activity: tokio::time::Instant,
    lifecycle: watch::Receiver<Lifecycle>,
    /// Draining: when the session closes.
    drain_deadline: Option<tokio::time::Instant>,
    /// What the media engine reports (WebRTC).
    signals: Option<Arc<MediaSignals>>,
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
        let input = InputState::new(&cfg, p.model_frame, p.limits.max_input_samples);
        let autonomous = p.model.autonomous();
        let signals = match &p.transport {
            Transport::WebRtc { signals, .. } => Some(signals.clone()),
            Transport::WebSocket => None,
        };
        Self {
            conv: Conversation::new(p.limits.max_items, p.limits.max_conversation_samples),
            cfg,
            transport: p.transport,
            conversation_id: ids::conversation_id(),
            outs: vec![p.out],
            closing: false,
            cause: None,
            last_activity: tokio::time::Instant::now(),
            lifecycle: p.lifecycle,
            drain_deadline: None,
            signals,
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

    /// Runs the actor until the transport closes, the session expires, idles or is drained,
    /// or the model fails.
    pub async fn run(
        mut self,
        mut inbox: mpsc::Receiver<Inbound>,
        mut model_rx: mpsc::Receiver<ModelEvent>,
    ) {
        self.emit(ServerEventBody::SessionCreated {
            session: Box::new(self.cfg.clone()),
        });
        let expiry = tokio::time::sleep(self.limits.max_session);
        tokio::pin!(expiry);
        let signals = self.signals.clone();
        let mut lifecycle_open = true;
        self.on_lifecycle();
        while !self.closing {
            tokio::select! {
                biased;
                () = media_signal(signals.as_deref()) => {
                    if let Some(s) = &signals {
                        self.on_media_report(s.take());
                    }
                }
                msg = inbox.recv() => match msg {
                    Some(Inbound { input, hold }) => {
                        self.input(input);
                        drop(hold);
                    }
                    None => break,
                },
                ev = model_rx.recv() => match ev {
                    Some(ev) => self.on_model(ev),
                    None => {
                        self.fail_response(codes::MODEL_ERROR, "the model loop stopped");
                        self.fatal(ErrorPayload::server(codes::MODEL_ERROR, "the model loop stopped"));
                    }
                },
                changed = self.lifecycle.changed(), if lifecycle_open => match changed {
                    Ok(()) => self.on_lifecycle(),
                    Err(_) => lifecycle_open = false,
                },
                _ = sleep_until(self.idle.map(|(at, _)| at)) => self.idle_timeout(),
                _ = sleep_until(self.speak_deadline) => self.speak_timed_out(),
                _ = sleep_until(Some(self.last_activity + self.limits.idle)) => self.session_idle(),
                _ = sleep_until(self.drain_deadline) => self.close(1001, "server shutting down"),
                _ = &mut expiry => {
                    self.error(ErrorPayload::invalid(codes::SESSION_EXPIRED, "the session reached its maximum duration"));
                    self.close(1000, "session expired");
                }
            }
        }
        tracing::debug!(session = %self.cfg.id, "session ended");
    }

    /// The server started draining: tell the client at once, close at the deadline.
    fn on_lifecycle(&mut self) {
        let Lifecycle::Draining { deadline } = *self.lifecycle.borrow_and_update() else {
            return;
        };
        if self.drain_deadline.is_none() {
            self.drain_deadline = Some(deadline);
            let secs = deadline
                .saturating_duration_since(tokio::time::Instant::now())
                .as_secs();
            self.error(ErrorPayload::server(
                codes::SERVER_DRAINING,
                format!("the server is shutting down; this session closes in {secs} s: reconnect to another instance"),
            ));
        }
    }

    /// No client event and no audio for [`Limits::idle`].
    fn session_idle(&mut self) {
        self.error(ErrorPayload::invalid(
            codes::SESSION_IDLE,
            format!(
                "no client event and no audio for {} s; the session is closed",
                self.limits.idle.as_secs()
            ),
        ));
        self.close(1000, "session idle");
    }

    /// What the media engine reported since the last look, in the order it happened within
    /// a tick: audio that left, responses that drained, then purges and the end of the call.
    fn on_media_report(&mut self, report: MediaReport) {
        for (tag, samples) in report.played {
            self.on_played(tag, samples);
        }
        for tag in report.drained {
            self.on_drained(tag);
        }
        for _ in 0..report.cleared {
            self.on_cleared();
        }
        if report.ended {
            self.close(1000, "call ended");
        }
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
            SessionInput::Invalid(err) => {
                self.touch();
                self.error(err);
            }
            SessionInput::Text(text) => match crate::protocol::decode(&text) {
                Ok(env) => self.handle(env),
                Err(err) => {
                    self.touch();
                    self.error(err);
                }
            },
            SessionInput::Media(pcm) => {
                self.touch();
                if let Err(e) = self.append_pcm(&pcm, false) {
                    self.error(e);
                }
            }
            SessionInput::Attach(tx) => self.attach(tx),
        }
    }

    /// The client was active: the idle timer starts over.
    fn touch(&mut self) {
        self.last_activity = tokio::time::Instant::now();
    }

    /// A sideband subscriber joins: it gets `session.created` first.
    fn attach(&mut self, tx: EventSender) {
        let created = ServerEvent::new(ServerEventBody::SessionCreated {
            session: Box::new(self.cfg.clone()),
        });
        if tx.send(Rendered::new(&created, None)).is_ok() {
            self.outs.push(tx);
        }
    }

    fn handle(&mut self, env: Envelope) {
        self.touch();
        let event_id = env.event_id;
        self.cause = event_id.as_deref().map(Arc::from);
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
        self.cause = None;
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

    /// Sends an event to every subscriber, rendered once. An event larger than a whole
    /// queue is replaced by an `error` naming the client event that caused it. A transport
    /// that lets its queue fill (it stopped reading) gets the session closed at once with
    /// `event_queue_full`; a sideband that does is dropped the same way.
    fn emit(&mut self, body: ServerEventBody) {
        if self.closing {
            return;
        }
        let event = Rendered::new(&ServerEvent::new(body), self.cause.clone());
        self.emit_rendered(event);
    }

    /// [`Self::emit`] for an event rendered by the caller.
    fn emit_rendered(&mut self, mut event: Rendered) {
        if self.closing {
            return;
        }
        if event.len() > self.limits.max_outbound_bytes {
            event = self.too_large(&event);
        }
        let mut i = 0;
        while i < self.outs.len() {
            match self.outs[i].send(event.clone()) {
                Ok(()) => i += 1,
                Err(QueueError::Full) => {
                    let budget = self.outs[i].budget();
                    tracing::warn!(session = %self.cfg.id, subscriber = i, budget, "a subscriber is not reading events; closing it");
                    self.outs[i].abort(queue_full(budget, event.cause.clone()));
                    if i == 0 {
                        return self.stop();
                    }
                    self.outs.remove(i);
                }
                Err(QueueError::Gone) if i == 0 => return self.stop(),
                Err(QueueError::Gone) => {
                    self.outs.remove(i);
                }
            }
        }
    }

    /// The `error` that replaces an event no queue can hold.
    fn too_large(&self, event: &Rendered) -> Rendered {
        tracing::warn!(session = %self.cfg.id, kind = event.kind, bytes = event.len(), "event larger than the outbound budget; replaced by an error");
        let error = too_large_error(event, self.limits.max_outbound_bytes, "the outbound queue");
        Rendered::new(&error, event.cause.clone())
    }

    /// The session ends now (its transport is gone or overrun).
    fn stop(&mut self) {
        self.closing = true;
        for out in &self.outs[1..] {
            out.close(1000, "session ended");
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
                out.close(code, reason);
            }
        }
        self.closing = true;
    }
}

/// The `error` event that replaces `event` when a transport cannot carry it (it is larger
/// than `limit` bytes of `what`), naming the client event that caused it.
pub fn too_large_error(event: &Rendered, limit: usize, what: &str) -> ServerEvent {
    let error = ErrorPayload::invalid(
        codes::EVENT_TOO_LARGE_FOR_TRANSPORT,
        format!(
            "the {} event of {} bytes is larger than {what} allows ({limit} bytes) and was not sent",
            event.kind,
            event.len()
        ),
    )
    .with_event_id(event.cause.as_deref().map(str::to_string));
    ServerEvent::new(ServerEventBody::Error { error })
}

/// The `error` for a client event the session could not take (its inbox or inbound byte
/// budget is full), naming the event's `event_id`; the transport sends it itself.
pub fn busy_error(text: &str) -> Rendered {
    #[derive(serde::Deserialize)]
    struct Id {
        event_id: Option<String>,
    }
    let event_id = serde_json::from_str::<Id>(text)
        .ok()
        .and_then(|id| id.event_id);
    crate::metrics::METRICS.error(codes::SESSION_OVERLOADED);
    let error = ErrorPayload::invalid(
        codes::SESSION_OVERLOADED,
        "the session is not keeping up with this client's events; this one was dropped: send fewer, or wait for answers",
    )
    .with_event_id(event_id);
    Rendered::new(&ServerEvent::new(ServerEventBody::Error { error }), None)
}

impl SessionInput {
    /// A binary message arrived where JSON text events belong.
    pub fn binary_message(bytes: usize) -> Self {
        SessionInput::Invalid(ErrorPayload::invalid(
            codes::INVALID_JSON,
            format!("binary message of {bytes} bytes; send JSON events as text"),
        ))
    }
}

/// The abort that closes a subscriber whose queue is full.
fn queue_full(budget: usize, cause: Option<Arc<str>>) -> Abort {
    let error = ErrorPayload::server(
        codes::EVENT_QUEUE_FULL,
        format!("more than {budget} bytes of events are unsent: the client is not reading; the session is closed"),
    );
    let error = ServerEvent::new(ServerEventBody::Error { error });
    Abort {
        code: 1008,
        reason: "event queue full".into(),
        error: Some(Rendered::new(&error, cause)),
    }
}

/// Resolves when the media engine reported something (never on WebSocket).
async fn media_signal(signals: Option<&MediaSignals>) {
    match signals {
        Some(s) => s.changed().await,
        None => std::future::pending().await,
    }
}

/// Sleeps until a deadline, or forever when none is armed.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
