//! The session state machine: its state, its entry points (each takes the time), its timers
//! and the dispatch of client events. What each concern does lives in its part: what goes
//! out (`outbox.rs`), input and VAD (`input.rs`), items (`items.rs`, on the conversation),
//! the answer side (`reply.rs`: responses in `respond.rs` and `response.rs`, tool calls in
//! `calls.rs`, the autonomous model's floor in `floor.rs`, WebRTC playback in
//! `playback.rs`), durability (`durable.rs`).

use std::sync::Arc;
use std::time::Instant;

use super::conversation::Conversation;
use super::durable::LeaseDue;
use super::floor::Floor;
use super::input::InputState;
use super::outbox::Outbox;
use super::reply::{Cx, Reply};
use super::subscribers::Subscribers;
use super::{
    Epoch, Limits, MediaReport, ModelEvent, ModelPort, Rendered, SessionInput, SessionParams,
    Transport,
};
use crate::protocol::{
    codes, ClientEvent, Envelope, ErrorPayload, ServerEvent, ServerEventBody, SessionConfig,
};

/// When the session's own timers fire.
#[derive(Debug)]
pub(super) struct Timers {
    /// The session's end of life (`--max-session-secs`).
    pub(super) expiry: Instant,
    /// When the client last sent an event or audio (for [`Limits::idle`]).
    last_activity: Instant,
    /// Draining: when the session closes.
    drain: Option<Instant>,
    /// When server VAD's `idle_timeout_ms` fires, and the input clock when it was armed.
    pub(super) vad_idle: Option<(Instant, u64)>,
    /// When the latencies `/metrics` reports started counting.
    pub(super) stamps: Stamps,
}

impl Timers {
    /// A session's timers, started at `now`: it lives for `max_session`.
    fn new(now: Instant, max_session: std::time::Duration) -> Self {
        Self {
            expiry: now + max_session,
            last_activity: now,
            drain: None,
            vad_idle: None,
            stamps: Stamps::default(),
        }
    }

    /// Arms (or disarms) server VAD's idle timeout after a response ended at `now` (the
    /// input clock then: `clock`). Not on an autonomous model: it decides itself when to
    /// speak, so a silent caller prompts nothing.
    pub(super) fn arm_vad_idle(
        &mut self,
        cfg: &SessionConfig,
        autonomous: bool,
        now: Instant,
        clock: u64,
    ) {
        self.vad_idle = match &cfg.audio.input.turn_detection {
            Some(crate::protocol::TurnDetection::ServerVad {
                idle_timeout_ms: Some(ms),
                ..
            }) if !autonomous => Some((now + std::time::Duration::from_millis(*ms), clock)),
            _ => None,
        };
    }

    /// The client was active at `now`: the idle timer starts over.
    pub(super) fn touch(&mut self, now: Instant) {
        self.last_activity = now;
    }
}

/// What the server and the model can do for the session.
#[derive(Debug, Clone, Copy)]
pub(super) struct Caps {
    /// The server has a transcriber to open a stream on.
    pub(super) transcriber: bool,
    /// The model can call tools.
    pub(super) tools: bool,
    /// The model reads user turns as words: user audio is always transcribed.
    pub(super) reads_text: bool,
}

/// When metrics started counting, for the latencies `/metrics` reports.
#[derive(Debug, Default)]
pub(super) struct Stamps {
    /// Server VAD saw the caller stop speaking (speech end → first answer audio).
    pub(super) turn_end: Option<Instant>,
    /// A barge-in was detected (barge-in → playback purged).
    pub(super) barge_at: Option<Instant>,
}

/// The session's model slot and the epoch that fences its output (a response's requests
/// go under the epoch, and output from before the last fence belongs to a cancelled one),
/// what the model and the server can do, and a `session.update` held until the slot or
/// stream it needs is there (see `provision`).
pub(super) struct Model {
    /// None: a transcription session, or one still waiting for a slot.
    pub(super) port: Option<Box<dyn ModelPort>>,
    pub(super) epoch: Epoch,
    /// What the server and the model can do.
    pub(super) caps: Caps,
    /// A `session.update` waiting for a model slot or a transcriber stream.
    pub(super) pending: Option<super::provision::Pending>,
}

impl Model {
    /// Sends `request` under `epoch` to the slot, when the session holds one.
    pub(super) fn request(&self, epoch: Epoch, request: duet_models::Request) {
        if let Some(m) = &self.port {
            m.request(epoch, request);
        }
    }
}

impl Caps {
    /// Whether a session configured as `cfg` transcribes its committed items: asked for
    /// (`audio.input.transcription`, or a transcription session), or needed by a model that
    /// reads words — with or without a transcriber to do it.
    pub(super) fn transcribes(&self, cfg: &SessionConfig) -> bool {
        cfg.is_transcription() || cfg.audio.input.transcription.is_some() || self.reads_text
    }
}

/// One duplex session (see the module docs of `session`).
pub struct Session {
    pub(super) cfg: SessionConfig,
    pub(super) transport: Transport,
    pub(super) conv: Conversation,
    /// Its events, errors and usage (see `outbox`), and the input being handled.
    pub(super) out: Outbox,
    pub(super) limits: Limits,
    pub(super) input: InputState,
    /// The answer side: the model slot, the response in flight, its playback, the floor and
    /// the speculation (see `reply`).
    pub(super) reply: Reply,
    pub(super) timers: Timers,
    /// Opted-in sessions (`?duplex=1`): the lease that lets the session outlive its transport.
    pub(super) lease: Option<super::durable::Lease>,
    /// Input transcription.
    pub(super) transcripts: super::transcripts::Transcripts,
    /// What it charged to its share of the memory budget (see `memory`).
    pub(super) meters: super::memory::Metering,
}

impl Session {
    /// A session with the default configuration, created at `now` (`unix_secs` is the wall
    /// clock then, for `expires_at`).
    pub fn new(p: SessionParams, now: Instant, unix_secs: u64) -> Self {
        let expires_at = unix_secs + p.limits.max_session.as_secs();
        let mut cfg = SessionConfig::new(p.session_id, p.model_info.name.clone(), expires_at);
        if p.transcription_session {
            cfg.set_transcription();
        }
        let (autonomous, frame) = (p.model_info.autonomous, p.model_info.frame_samples);
        if p.duplex {
            cfg.capabilities = Some(super::durable::capabilities(autonomous, frame));
        }
        let journal = p
            .duplex
            .then(|| super::journal::Journal::new(p.limits.journal_bytes, p.limits.journal_age));
        let lease = p
            .duplex
            .then(|| super::durable::Lease::new(p.attachment, p.headroom));
        let detectors = super::input::Detectors {
            vad_model: p.vad_model,
            min_speech_ms: p.limits.vad_min_speech_ms,
            turn: p.turn,
            report: p.turn_events,
        };
        let input = InputState::new(&cfg, frame, p.limits.max_input_samples, detectors);
        let floor = Floor::new(autonomous, p.limits.speak_timeout);
        let id = cfg.id.clone();
        Self {
            conv: Conversation::new(p.limits.max_items, p.limits.max_conversation_samples)
                .with_max_text(p.limits.max_conversation_text),
            cfg,
            transport: p.transport,
            out: Outbox::new(
                Subscribers::new(p.out, journal),
                id,
                p.limits.max_outbound_bytes,
                p.usage,
                now,
            ),
            timers: Timers::new(now, p.limits.max_session),
            limits: p.limits,
            input,
            reply: Reply::new(
                Model {
                    port: p.model,
                    epoch: Epoch::default(),
                    caps: Caps {
                        transcriber: p.can_transcribe,
                        tools: p.model_info.tools,
                        reads_text: p.model_info.reads_text,
                    },
                    pending: None,
                },
                floor,
            ),
            lease,
            transcripts: super::transcripts::Transcripts::new(p.transcriber),
            meters: super::memory::Metering::new(p.memory),
        }
    }

    /// Applies the `session` object a call was created with, before the session runs.
    pub fn configure(&mut self, patch: crate::protocol::SessionPatch) -> Result<(), ErrorPayload> {
        let model = &self.reply.model;
        self.cfg = model.next_config(&self.cfg, patch, &self.limits, &mut self.meters)?;
        self.input.reconfigure(&self.cfg);
        let transcription = self.cfg.audio.input.transcription.as_ref();
        self.transcripts.set_hints(transcription);
        Ok(())
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.cfg.id
    }

    /// What carries the session now (a resume may change it).
    pub fn transport(&self) -> &Transport {
        &self.transport
    }

    /// Whether the session is over (its subscribers were closed).
    pub fn is_closed(&self) -> bool {
        self.out.subs.closing()
    }

    /// Starts the session: `session.created` (outside the journal), with the first resume
    /// token on an opted-in session.
    pub fn start(&mut self, now: Instant) {
        self.out.now = now;
        let (resume_token, attachment_generation) = self
            .lease
            .as_mut()
            .map_or((None, None), super::durable::Lease::created);
        let created = created(&self.cfg, (resume_token, attachment_generation));
        self.out.subs.deliver(&created);
    }

    /// A transport's input.
    pub fn handle(&mut self, input: SessionInput, now: Instant) {
        self.out.now = now;
        match input {
            SessionInput::Client(env) => self.client_event(Ok(env)),
            SessionInput::Invalid(err) => self.client_event(Err(err)),
            SessionInput::Text(text) => {
                // Only opted-in sessions decode the duplex extension's events.
                let decoded = match self.lease {
                    Some(_) => crate::protocol::decode_duplex(&text),
                    None => crate::protocol::decode(&text),
                };
                self.client_event(decoded);
            }
            SessionInput::Media(pcm) => {
                self.timers.touch(self.out.now);
                if let Err(e) = self.append_pcm(&pcm, false) {
                    self.out.error(e);
                }
            }
            SessionInput::Dtmf { key, received_at } => {
                self.timers.touch(self.out.now);
                self.out
                    .emit(ServerEventBody::InputAudioBufferDtmfEventReceived {
                        event: key.to_string(),
                        received_at,
                    });
            }
            SessionInput::Attach(tx) => {
                // A sideband subscriber: `session.created` first.
                self.out.subs.attach(tx, &created(&self.cfg, (None, None)));
            }
            SessionInput::Resume {
                request,
                out,
                attachment,
                transport,
                reply,
            } => {
                let taken = self.resume(request, out, attachment, transport);
                if let Some(reply) = reply {
                    let _ = reply.send(taken);
                }
            }
            SessionInput::Detach => self.transport_dropped(),
            SessionInput::TurnScore(score) => {
                if let Some(judge) = &mut self.input.judge {
                    judge.scored(score.pause, score.complete);
                }
                self.on_pause();
            }
        }
    }

    /// After every step (the shell calls it before it waits): a transport lost while events
    /// went out detaches the session, or closes it (see `outbox`); the journal's size goes
    /// to the metrics; the memory meter settles to what the session's buffers hold.
    pub fn settle(&mut self) {
        if self.out.subs.take_lost() {
            self.transport_dropped();
        }
        let journal = self.out.subs.journal_bytes();
        if let Some(l) = &mut self.lease {
            l.report_journal(journal);
        }
        let answer = self.reply.active.as_ref().map_or(0, |a| a.audio_bytes());
        let buffers = self.input.allocated_bytes() + self.conv.held_bytes() + answer + journal;
        self.meters.settle(buffers as u64);
    }

    /// A model event: output goes to the answer side; a failure, or the model loop's end,
    /// fails the response and the session.
    pub fn on_model(&mut self, ev: ModelEvent, now: Instant) {
        self.out.now = now;
        let (code, message, detail) = match ev {
            ModelEvent::Output { epoch, output } => {
                return self.answer(|r, cx| r.on_output(cx, epoch, output));
            }
            ModelEvent::Failed { code, message } => {
                let detail = format!("{code}: {message}");
                (code, message, detail)
            }
            ModelEvent::Stopped => {
                let message = String::from("the model loop stopped");
                (codes::MODEL_ERROR, message.clone(), message)
            }
        };
        self.answer(|r, cx| r.fail_response(cx, code, &message));
        self.out
            .error(ErrorPayload::server(codes::MODEL_ERROR, detail));
        self.close(1011, "session failed");
    }

    /// What the media engine reported since the last look, in the order it happened within
    /// a tick: audio that left, responses that drained, then purges and the end of the call.
    pub fn on_media(&mut self, report: &MediaReport, now: Instant) {
        self.out.now = now;
        for &(tag, samples) in &report.played {
            self.answer(|r, cx| r.on_played(cx, tag, samples));
        }
        for &tag in &report.drained {
            self.answer(|r, cx| r.on_drained(cx, tag));
        }
        for _ in 0..report.cleared {
            self.answer(|r, cx| r.on_cleared(cx));
        }
        if report.hung_up {
            // An explicit end, not a drop.
            if self.lease.is_some() {
                self.out.emit(ServerEventBody::SessionClosed {
                    session_id: self.cfg.id.clone(),
                    reason: "hangup".into(),
                });
            }
            self.close(1000, "call hung up");
        } else if report.ended {
            if self.lease.is_some() {
                self.transport_dropped();
            } else {
                self.close(1000, "call ended");
            }
        }
    }

    /// The server started draining: tell the client at once, close at `deadline`.
    pub fn drain(&mut self, deadline: Instant, now: Instant) {
        self.out.now = now;
        if self.timers.drain.is_some() {
            return;
        }
        self.timers.drain = Some(deadline);
        let secs = deadline.saturating_duration_since(now).as_secs();
        self.out.error(ErrorPayload::server(
            codes::SERVER_DRAINING,
            format!("the server is shutting down; this session closes in {secs} s: reconnect to another instance"),
        ));
    }

    /// When the session next needs [`Session::on_timeout`].
    pub fn next_deadline(&self) -> Instant {
        let t = &self.timers;
        [
            t.vad_idle.map(|(at, _)| at),
            self.reply.floor.speak_deadline,
            t.drain,
            Some(t.last_activity + self.limits.idle),
            self.lease
                .as_ref()
                .and_then(|l| l.deadline(t.expiry, self.limits.expiry_warning)),
            self.transcripts.deadline(),
            self.input
                .judge
                .as_ref()
                .and_then(super::turn::Judge::deadline),
            self.input
                .overlap
                .as_ref()
                .and_then(super::interrupt::Overlap::deadline),
        ]
        .into_iter()
        .flatten()
        .fold(t.expiry, Instant::min)
    }

    /// Runs the timers that are due at `now`.
    pub fn on_timeout(&mut self, now: Instant) {
        self.out.now = now;
        if now >= self.timers.expiry {
            self.out.error(ErrorPayload::invalid(
                codes::SESSION_EXPIRED,
                "the session reached its maximum duration",
            ));
            return self.close(1000, "session expired");
        }
        if self.timers.drain.is_some_and(|at| now >= at) {
            return self.close(1001, "server shutting down");
        }
        if now >= self.timers.last_activity + self.limits.idle {
            if self.lease.is_some() {
                return self.expire("idle_ttl_expired");
            }
            self.out.error(idle_error(self.limits.idle));
            return self.close(1000, "session idle");
        }
        let due = self
            .lease
            .as_mut()
            .map(|l| l.due(now, self.timers.expiry, self.limits.expiry_warning));
        match due {
            Some(LeaseDue::GraceOver) => return self.expire("disconnect_grace_expired"),
            Some(LeaseDue::Warn) => {
                let left = self.timers.expiry.saturating_duration_since(now).as_secs();
                self.out.emit(ServerEventBody::SessionExpiring {
                    session_id: self.cfg.id.clone(),
                    expires_at: self.cfg.expires_at,
                    seconds_left: left,
                });
            }
            Some(LeaseDue::Nothing) | None => {}
        }
        if self.timers.vad_idle.is_some_and(|(at, _)| now >= at) {
            self.idle_timeout();
        }
        if self.reply.floor.speak_deadline.is_some_and(|at| now >= at) {
            self.answer(|r, cx| r.speak_timed_out(cx));
        }
        self.answer(|r, cx| r.transcript_wait_over(cx, now));
        self.on_pause();
    }

    /// A client event, or the error of one that could not be decoded.
    fn client_event(&mut self, env: Result<Envelope, ErrorPayload>) {
        self.timers.touch(self.out.now);
        let env = match env {
            Ok(env) => env,
            Err(err) => return self.out.error(err),
        };
        let event_id = env.event_id;
        self.out.cause = event_id.as_deref().map(Arc::from);
        if let Err(e) = self.dispatch(env.event) {
            self.out.error(e.with_event_id(event_id));
        }
        self.out.cause = None;
    }

    fn dispatch(&mut self, event: ClientEvent) -> Result<(), ErrorPayload> {
        let webrtc = self.transport.is_webrtc();
        match event {
            ClientEvent::SessionUpdate { session } => self.session_update(*session),
            ClientEvent::InputAudioBufferAppend { .. } if webrtc => Err(ErrorPayload::invalid(
                codes::INVALID_EVENT_FOR_TRANSPORT,
                "input_audio_buffer.append is not used on WebRTC calls: the audio arrives on the RTP track",
            )),
            ClientEvent::InputAudioBufferAppend { .. }
            | ClientEvent::InputAudioBufferCommit
            | ClientEvent::InputAudioBufferClear => self.input_event(event),
            ClientEvent::OutputAudioBufferClear if webrtc => {
                self.answer(|r, cx| r.clear_output(cx, "client_cancelled"));
                Ok(())
            }
            ClientEvent::OutputAudioBufferClear => Err(ErrorPayload::invalid(
                codes::INVALID_EVENT_FOR_TRANSPORT,
                "output_audio_buffer.clear applies to WebRTC calls; on WebSocket the client owns playback",
            )),
            ClientEvent::ConversationItemCreate { .. }
            | ClientEvent::ConversationItemRetrieve { .. }
            | ClientEvent::ConversationItemTruncate { .. }
            | ClientEvent::ConversationItemDelete { .. } => self.item_event(event),
            ClientEvent::ResponseCreate { .. } if self.cfg.is_transcription() => {
                Err(ErrorPayload::invalid(
                    codes::INVALID_EVENT_FOR_SESSION,
                    "response.create does not apply to a transcription session: it transcribes the input and never responds",
                ))
            }
            ClientEvent::ResponseCreate { response } => {
                self.answer(|r, cx| r.response_create(cx, response.map(|b| *b).unwrap_or_default()))
            }
            ClientEvent::ResponseCancel { response_id } => self.answer(|r, cx| r.response_cancel(cx, response_id)),
            other => self.duplex_command(other),
        }
    }

    /// Calls into the answer side with what it touches of the rest of the session.
    pub(super) fn answer<T>(&mut self, f: impl FnOnce(&mut Reply, &mut Cx<'_>) -> T) -> T {
        let mut cx = Cx {
            cfg: &self.cfg,
            conv: &mut self.conv,
            out: &mut self.out,
            transport: &self.transport,
            meters: &mut self.meters,
            timers: &mut self.timers,
            transcripts: &mut self.transcripts,
            lease: self.lease.as_ref(),
            limits: &self.limits,
            clock: self.input.clock(),
        };
        f(&mut self.reply, &mut cx)
    }

    pub(super) fn close(&mut self, code: u16, reason: &str) {
        self.out.subs.close(code, reason);
        if let Some(lease) = self.lease.take() {
            lease.release();
        }
    }
}

/// `session.created` for `cfg` (outside the journal), with the first resume token and the
/// attachment generation of an opted-in session's first transport.
fn created(
    cfg: &SessionConfig,
    (resume_token, attachment_generation): (Option<String>, Option<u64>),
) -> Rendered {
    let created = ServerEventBody::SessionCreated {
        session: Box::new(cfg.clone()),
        resume_token,
        attachment_generation,
    };
    Rendered::new(&ServerEvent::new(created), None)
}

/// The error of a session with no client event and no audio for `idle` ([`Limits::idle`]).
fn idle_error(idle: std::time::Duration) -> ErrorPayload {
    ErrorPayload::invalid(
        codes::SESSION_IDLE,
        format!(
            "no client event and no audio for {} s; the session is closed",
            idle.as_secs()
        ),
    )
}
