//! Sessions that outlive their transport (the duplex extension, opted into with
//! `?duplex=1`): the lease (attachment generation, resume token, disconnect grace, idle TTL,
//! the expiry warning), detaching when the transport drops, resuming and taking over from a
//! new connection with the journal's replay, and the extension's commands (`session.*`,
//! `barge_in`, `playback.ack`).
//!
//! Like the rest of the core this takes the time as an argument and reads no clock: the
//! grace and the idle TTL are deadlines in [`Session::next_deadline`], exact to the
//! session's own timer.

use std::time::{Duration, Instant};

use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::journal::ReplayError;
use super::reply::{Cx, Reply};
use super::{AttachmentId, EventSender, Rendered, Session, SessionInput};
use crate::protocol::duplex::{Capabilities, ResumeRequest};
use crate::protocol::{codes, ClientEvent, ErrorPayload, ServerEvent, ServerEventBody};

/// Where an opted-in session stands with its transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionState {
    /// A transport carries it.
    Attached,
    /// Its transport dropped; it waits for a resume until the grace runs out.
    Detached,
}

/// An opted-in session's lease.
pub(super) struct Lease {
    /// The attachment's generation: 1 at open, + 1 for every resume.
    generation: u64,
    /// SHA-256 of the current resume token (compared in constant time).
    token_digest: [u8; 32],
    /// The token for `session.created`, until it is sent.
    first_token: Option<String>,
    /// The connection that holds the session.
    attachment: AttachmentId,
    /// Detached: when the grace runs out.
    pub(super) grace_until: Option<Instant>,
    /// `session.expiring` was sent.
    warned: bool,
    /// Journal bytes last reported to the metrics.
    reported_bytes: usize,
    /// The server's admission headroom, for `rate_limits.updated`.
    headroom: Option<super::Headroom>,
}

impl Lease {
    pub(super) fn new(attachment: AttachmentId, headroom: Option<super::Headroom>) -> Self {
        let (token, token_digest) = new_token();
        crate::metrics::METRICS
            .sessions_attached
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self {
            generation: 1,
            token_digest,
            first_token: Some(token),
            attachment,
            grace_until: None,
            warned: false,
            reported_bytes: 0,
            headroom,
        }
    }

    fn token_matches(&self, token: &str) -> bool {
        digest(token).ct_eq(&self.token_digest).into()
    }

    fn state(&self) -> SessionState {
        if self.grace_until.is_some() {
            SessionState::Detached
        } else {
            SessionState::Attached
        }
    }

    /// Whether input from connection `from` is stale: it comes from a connection the
    /// session no longer belongs to (replaced by a resume). Resumes are never stale.
    fn is_stale(&self, from: AttachmentId, input: &SessionInput) -> bool {
        from != AttachmentId::ANY
            && from != self.attachment
            && !matches!(input, SessionInput::Resume { .. })
    }

    /// For `session.created`: the first resume token (once) and the generation.
    pub(super) fn created(&mut self) -> (Option<String>, Option<u64>) {
        (self.first_token.take(), Some(self.generation))
    }

    /// The transport dropped: the lease waits for a resume until `until`. False when it
    /// was already detached.
    fn detach(&mut self, until: Instant) -> bool {
        if self.grace_until.is_some() {
            return false;
        }
        move_gauge(self.state(), SessionState::Detached);
        self.grace_until = Some(until);
        true
    }

    /// A resume took the session over for connection `attachment`: the generation moves
    /// on and the token rotates. Returns the new token, the old generation and the new one.
    fn reattach(&mut self, attachment: AttachmentId) -> (String, u64, u64) {
        let (token, token_digest) = new_token();
        let old_generation = self.generation;
        self.generation += 1;
        self.token_digest = token_digest;
        self.attachment = attachment;
        move_gauge(self.state(), SessionState::Attached);
        self.grace_until = None;
        (token, old_generation, self.generation)
    }

    /// The replay a resume of session `session_id` gets from `journal`, or why it gets
    /// none.
    fn check_resume(
        &self,
        req: &ResumeRequest,
        session_id: &str,
        journal: Option<&mut super::journal::Journal>,
        now: Instant,
    ) -> Result<Vec<Rendered>, Refusal> {
        if req.session_id != session_id {
            return Err(refusal(
                codes::SESSION_RESUME_EXPIRED,
                "no such session".into(),
            ));
        }
        if !self.token_matches(&req.resume_token) {
            return Err(refusal(
                codes::INVALID_RESUME_TOKEN,
                "the resume token does not match this session's".into(),
            ));
        }
        let last = req.last_received_server_event_seq;
        match journal.map(|j| j.replay(last, now)) {
            Some(Ok(r)) => Ok(r),
            Some(Err(ReplayError::Ahead { head })) => Err(refusal(
                codes::SESSION_RESUME_CONFLICT,
                format!("last_received_server_event_seq {last} is ahead of the last event sent ({head})"),
            )),
            Some(Err(ReplayError::Gap)) | None => Err(Refusal::Gap),
        }
    }

    /// The journal holds `bytes` now: the metrics learn the difference.
    pub(super) fn report_journal(&mut self, bytes: usize) {
        let delta = bytes as i64 - self.reported_bytes as i64;
        if delta != 0 {
            crate::metrics::METRICS
                .journal_bytes
                .fetch_add(delta, std::sync::atomic::Ordering::Relaxed);
            self.reported_bytes = bytes;
        }
    }

    /// The lease's deadlines for a session that ends at `expiry` and is warned `warning`
    /// before: the end of the grace, the expiry warning.
    pub(super) fn deadline(&self, expiry: Instant, warning: Duration) -> Option<Instant> {
        let warn = (!self.warned).then(|| expiry.checked_sub(warning).unwrap_or(expiry));
        [self.grace_until, warn].into_iter().flatten().min()
    }

    /// Which of the lease's timers is due at `now` (see [`Self::deadline`]).
    pub(super) fn due(&mut self, now: Instant, expiry: Instant, warning: Duration) -> LeaseDue {
        if self.grace_until.is_some_and(|at| now >= at) {
            return LeaseDue::GraceOver;
        }
        let warn_at = expiry.checked_sub(warning);
        if !self.warned && warn_at.is_none_or(|at| now >= at) {
            self.warned = true;
            return LeaseDue::Warn;
        }
        LeaseDue::Nothing
    }

    /// After each `response.done`: `rate_limits.updated` with the server's real headroom
    /// (`sessions`: what it can hold, what it can still take), when the server reports it.
    pub(super) fn rate_limits(&self) -> Option<ServerEventBody> {
        let (limit, remaining) = self.headroom.as_ref()?();
        Some(ServerEventBody::RateLimitsUpdated {
            rate_limits: vec![crate::protocol::server::RateLimit {
                name: "sessions".into(),
                limit,
                remaining,
                reset_seconds: 0.0,
            }],
        })
    }

    /// The session ends: its gauges and journal bytes leave the metrics.
    pub(super) fn release(self) {
        use std::sync::atomic::Ordering::Relaxed;
        gauge(self.state()).fetch_sub(1, Relaxed);
        crate::metrics::METRICS
            .journal_bytes
            .fetch_sub(self.reported_bytes as i64, Relaxed);
    }
}

/// What a lease's timer asks for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum LeaseDue {
    Nothing,
    /// The disconnect grace ran out: the session expires.
    GraceOver,
    /// The session ends soon: `session.expiring`.
    Warn,
}

/// The `capabilities` of an opted-in session on this model.
pub(super) fn capabilities(autonomous: bool, frame_samples: usize) -> Capabilities {
    let per_ms = (duet_media::SESSION_RATE / 1000) as usize;
    let chunk = u32::try_from(frame_samples / per_ms.max(1)).unwrap_or(u32::MAX);
    Capabilities::new(autonomous, chunk)
}

/// `session.resync_required{reason}` for session `session_id`, rendered (outside the
/// journal).
pub(super) fn resync(session_id: &str, reason: &'static str) -> Rendered {
    Rendered::new(
        &ServerEvent::new(ServerEventBody::SessionResyncRequired {
            session_id: session_id.to_string(),
            reason,
        }),
        None,
    )
}

fn refusal(code: &str, message: String) -> Refusal {
    Refusal::Error(ErrorPayload::invalid(code, message))
}

/// A resume token (32 random bytes, URL-safe base64) and its digest.
fn new_token() -> (String, [u8; 32]) {
    let mut bytes = [0u8; 32];
    rand::Rng::fill(&mut rand::rng(), &mut bytes);
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let d = digest(&token);
    (token, d)
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The gauge a state counts in.
fn gauge(state: SessionState) -> &'static std::sync::atomic::AtomicI64 {
    match state {
        SessionState::Attached => &crate::metrics::METRICS.sessions_attached,
        SessionState::Detached => &crate::metrics::METRICS.sessions_detached,
    }
}

fn move_gauge(from: SessionState, to: SessionState) {
    use std::sync::atomic::Ordering::Relaxed;
    if from != to {
        gauge(from).fetch_sub(1, Relaxed);
        gauge(to).fetch_add(1, Relaxed);
    }
}

impl Session {
    /// Where an opted-in session stands (`None`: not opted in).
    pub fn state(&self) -> Option<SessionState> {
        self.lease.as_ref().map(Lease::state)
    }

    /// Takes a transport's input: an opted-in session ignores connections it no longer
    /// belongs to (replaced by a resume).
    pub fn handle_from(&mut self, from: AttachmentId, input: SessionInput, now: Instant) {
        if self
            .lease
            .as_ref()
            .is_some_and(|l| l.is_stale(from, &input))
        {
            return;
        }
        self.handle(input, now);
    }

    /// The transport dropped: an opted-in session detaches and waits for a resume for the
    /// disconnect grace; any other closes.
    pub(super) fn transport_dropped(&mut self) {
        let grace = self.limits.disconnect_grace;
        let now = self.out.now;
        let Some(lease) = &mut self.lease else {
            return self.close(1000, "transport closed");
        };
        if !lease.detach(now + grace) {
            return;
        }
        self.out.subs.detach();
        // Nothing plays any more: what was not heard is cut, and until a resume the session
        // produces its audio as events (journaled), as on a WebSocket.
        self.answer(|r, cx| r.abandon_playback(cx));
        self.transport = super::Transport::WebSocket;
        tracing::info!(session = %self.cfg.id, grace_secs = grace.as_secs(), "transport dropped; session detached");
    }

    /// A new connection resumes the session: check the token and the journal, rotate the
    /// token, send `session.resumed` and the replay, take the session over from the
    /// transport that held it, if any, and move to `transport`. A refusal goes to the new
    /// connection (an `error` or `session.resync_required`, then a close) and is returned.
    pub(super) fn resume(
        &mut self,
        req: ResumeRequest,
        out: EventSender,
        attachment: AttachmentId,
        transport: super::Transport,
    ) -> Result<(), ErrorPayload> {
        let checked = match &self.lease {
            None => Err(refusal(
                codes::UNSUPPORTED_SESSION_RESUME,
                "this session did not opt into the duplex extension".into(),
            )),
            Some(l) => l.check_resume(&req, &self.cfg.id, self.out.subs.journal(), self.out.now),
        };
        let replay = match checked {
            Ok(replay) => replay,
            Err(Refusal::Error(error)) => {
                refuse(&out, error.clone());
                return Err(error);
            }
            Err(Refusal::Gap) => return Err(refuse_gap(&out, &self.cfg.id)),
        };
        let Some(lease) = &mut self.lease else {
            return Ok(());
        };
        let (token, old_generation, generation) = lease.reattach(attachment);
        // Audio the old call queued and never played is not the conversation's.
        self.answer(|r, cx| r.abandon_playback(cx));
        self.transport = transport;
        let resumed = ServerEvent::new(ServerEventBody::SessionResumed {
            session_id: self.cfg.id.clone(),
            session: Box::new(self.cfg.clone()),
            attachment_generation: generation,
            resume_token: token,
        });
        let last = req.last_received_server_event_seq;
        if let Some(old) = self
            .out
            .subs
            .reattach(out, &Rendered::new(&resumed, None), &replay)
        {
            replaced(&old, &self.cfg.id, old_generation);
        }
        crate::metrics::METRICS.resume("ok");
        tracing::info!(session = %self.cfg.id, last, replayed = replay.len(), transport = ?self.transport, "session resumed");
        self.timers.touch(self.out.now);
        Ok(())
    }

    /// The lease ran out: `session.expired` (journaled), then the session closes.
    pub(super) fn expire(&mut self, reason: &'static str) {
        crate::metrics::METRICS.expiry(reason);
        tracing::info!(session = %self.cfg.id, reason, "session expired");
        self.out.emit(ServerEventBody::SessionExpired {
            session_id: self.cfg.id.clone(),
            reason,
        });
        self.close(1000, "session expired");
    }

    /// The extension's commands (only opted-in sessions decode them).
    pub(super) fn duplex_command(&mut self, event: ClientEvent) -> Result<(), ErrorPayload> {
        if self.lease.is_none() {
            return Err(ErrorPayload::invalid(
                codes::UNKNOWN_EVENT_TYPE,
                "duplex extension events need ?duplex=1",
            )
            .with_param("type"));
        }
        match event {
            ClientEvent::SessionResume(_) => Err(ErrorPayload::invalid(
                codes::UNSUPPORTED_SESSION_RESUME,
                "session.resume is only valid as the first message of a new connection (?duplex=1&resume=1)",
            )),
            ClientEvent::SessionEventAck { server_event_seq } => {
                let acked = self.out.subs.journal().map(|j| j.ack(server_event_seq));
                if let Some(Err(head)) = acked {
                    return Err(ErrorPayload::invalid(
                        codes::INVALID_EVENT_ACK,
                        format!("server_event_seq {server_event_seq} is negative or past the last event sent ({head})"),
                    )
                    .with_param("server_event_seq"));
                }
                Ok(())
            }
            ClientEvent::SessionHeartbeat => {
                self.out.emit(ServerEventBody::SessionHeartbeatAck {
                    session_id: self.cfg.id.clone(),
                });
                Ok(())
            }
            ClientEvent::SessionClose { reason } => {
                self.out.emit(ServerEventBody::SessionClosed {
                    session_id: self.cfg.id.clone(),
                    reason: reason.unwrap_or_else(|| "client_close".into()),
                });
                self.close(1000, "session closed");
                Ok(())
            }
            ClientEvent::BargeIn => {
                self.answer(|r, cx| r.barge_in(cx));
                Ok(())
            }
            ClientEvent::PlaybackAck {
                played_ms,
                response_id,
                item_id,
                truncate,
            } => {
                let ack = PlaybackAck {
                    played_ms,
                    response_id,
                    item_id,
                    truncate,
                };
                self.answer(|r, cx| r.playback_ack(cx, ack))
            }
            _ => Ok(()),
        }
    }
}

impl Reply {
    /// `barge_in`: a hard interrupt. The epoch advances and the model stops; the active
    /// response is cancelled (on WebRTC its playback is purged and its item truncated to
    /// what was heard, as for server VAD's barge-in).
    fn barge_in(&mut self, cx: &mut Cx<'_>) {
        if self.active.is_none() {
            self.fence_model();
        } else if cx.transport.is_webrtc() {
            cx.timers.stamps.barge_at = Some(cx.out.now);
            self.clear_output(cx, "client_cancelled");
        } else {
            self.cancel_active(cx, "client_cancelled");
        }
    }

    /// `playback.ack`: the client reports how much of an assistant item it played (a
    /// WebSocket client plays the audio itself); with `truncate` the item is cut to that, as
    /// the server does on WebRTC after a barge-in.
    fn playback_ack(&mut self, cx: &mut Cx<'_>, ack: PlaybackAck) -> Result<(), ErrorPayload> {
        let PlaybackAck {
            played_ms,
            response_id,
            item_id,
            truncate,
        } = ack;
        let active = self
            .active
            .as_ref()
            .filter(|a| response_id.as_ref().is_none_or(|r| &a.response.id == r))
            .map(|a| (a.response.id.clone(), a.item_id.clone()));
        let (response_id, item_id) = match (item_id, active) {
            (Some(item), _) => (response_id, item),
            (None, Some((r, item))) => (Some(r), item),
            (None, None) => {
                return Err(ErrorPayload::invalid(
                    codes::MISSING_REQUIRED_PARAMETER,
                    "playback.ack needs item_id when no response is active",
                )
                .with_param("item_id"))
            }
        };
        if truncate && self.active.as_ref().is_some_and(|a| a.item_id == item_id) {
            self.cancel_active(cx, "client_cancelled");
        }
        let generated_ms = cx
            .conv
            .get(&item_id)
            .and_then(|s| s.ledger.as_ref())
            .map(|l| l.generated_ms())
            .ok_or_else(|| {
                ErrorPayload::invalid(
                    codes::ITEM_NOT_FOUND,
                    format!("no assistant audio item {item_id:?} in the conversation"),
                )
                .with_param("item_id")
            })?;
        // Saturating float-to-int: a huge value is "everything".
        let played = (played_ms as u64).min(generated_ms);
        if truncate {
            let busy = self.active.as_ref().map(|a| a.item_id.as_str());
            let truncated = cx.conv.truncate_item(&item_id, 0, played, busy)?;
            cx.out.emit(truncated);
        }
        cx.out.emit(ServerEventBody::PlaybackAcknowledged {
            event: crate::protocol::server::PlaybackAckResult {
                kind: "playback.acknowledged",
                session_id: cx.cfg.id.clone(),
                epoch: self.model.epoch.0,
                item_id,
                response_id,
                played_ms: played,
                committed_ms: if truncate { played } else { generated_ms },
                truncate,
            },
        });
        Ok(())
    }
}

/// What `playback.ack` reports.
struct PlaybackAck {
    played_ms: f64,
    response_id: Option<String>,
    item_id: Option<String>,
    truncate: bool,
}

/// Why a resume is refused.
enum Refusal {
    /// An `error` with this payload.
    Error(ErrorPayload),
    /// A gap in the journal: `session.resync_required{reason:"journal_gap"}`.
    Gap,
}

/// Refuses a resume on the connection that asked: an `error`, then a close.
fn refuse(out: &EventSender, error: ErrorPayload) {
    let code = error.code.clone().unwrap_or_default();
    crate::metrics::METRICS.resume(&code);
    crate::metrics::METRICS.error(&code);
    let _ = out.send(Rendered::new(
        &ServerEvent::new(ServerEventBody::Error { error }),
        None,
    ));
    out.close(1008, &code);
}

/// Refuses a resume whose gap the journal no longer holds: `session.resync_required`, then
/// a close; the error returned.
fn refuse_gap(out: &EventSender, session_id: &str) -> ErrorPayload {
    crate::metrics::METRICS.resume("journal_gap");
    let _ = out.send(resync(session_id, "journal_gap"));
    out.close(1000, "journal_gap");
    ErrorPayload::invalid(
        "journal_gap",
        "the events after last_received_server_event_seq are no longer held: start a new session",
    )
}

/// Tells the transport a resume took the session from that it was replaced, and closes it.
fn replaced(old: &EventSender, session_id: &str, old_generation: u64) {
    let replaced = ServerEvent::new(ServerEventBody::SessionReplaced {
        session_id: session_id.to_string(),
        attachment_generation: old_generation,
    });
    let _ = old.send(Rendered::new(&replaced, None));
    old.close(1000, "session_replaced");
    crate::metrics::METRICS
        .takeovers
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}
