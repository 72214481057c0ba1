//! One live call inside an engine thread: its media pipeline, its session's channels, and
//! the per-tick work (send a frame, report playback, pass caller audio and client events to
//! the session, write the session's events to `oai-events`). Every piece runs under
//! [`guarded`]: a panic ends this call, not the engine.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use duet_media::{CallAudio, CallCodec};
use duet_signaling::{AudioCodec, Call, CallEvent, SendError};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use super::NewCall;
use crate::metrics::METRICS;
use crate::session::InboundRefused;
use crate::session::{
    busy_error, too_large_error, AttachmentId, Delivery, EventReceiver, Held, Inbound,
    MediaSignals, PcmPool, Received, Rendered, SessionInput,
};

/// Errors the engine itself answers (the session could not take an event) that may wait for
/// room on the data channel; beyond this they are dropped (the client floods).
const MAX_LOCAL_ERRORS: usize = 64;

pub(super) struct LiveCall {
    pub(super) id: String,
    pub(super) call: Call,
    pub(super) media: CallAudio,
    pub(super) session: mpsc::Sender<Inbound>,
    attachment: AttachmentId,
    events: EventReceiver,
    signals: Arc<MediaSignals>,
    inbound: crate::session::InboundBudget,
    has_dc: bool,
    /// The event taken from the queue that the data channel had no room for yet.
    held: Option<(Rendered, Held)>,
    /// Errors for client events the session could not take, sent before `held`.
    local: std::collections::VecDeque<Rendered>,
    pub(super) last_rx: Instant,
    pub(super) next_timeout: Instant,
    pub(super) created: Instant,
    pub(super) connected: bool,
    pub(super) closing: bool,
    /// A panic happened in this call's work: it is reaped.
    pub(super) failed: bool,
    /// Test hook: panic in the next media tick.
    pub(super) fault: bool,
    /// The answer whose audio came last.
    playing: Option<u64>,
    /// Which of the grid's phases this call's frames go out in.
    pub(super) phase: u64,
    /// An answer started while the call idled: move it to the phase due next.
    pub(super) hop: bool,
    /// Buffers for caller audio to the session, back here once it is done with them.
    pool: Arc<PcmPool>,
    /// An answer's first audio and when the session handed it over, until its first frame
    /// leaves (the playout wait).
    first_wait: Option<(u64, Instant)>,
    _guard: Box<dyn Send>,
}

/// Runs `f` on the call, containing a panic to it (it is then reaped).
pub(super) fn guarded<T>(c: &mut LiveCall, f: impl FnOnce(&mut LiveCall) -> T) -> Option<T> {
    if c.failed {
        return None;
    }
    match catch_unwind(AssertUnwindSafe(|| f(c))) {
        Ok(v) => Some(v),
        Err(_) => {
            tracing::error!(call = %c.id, "a call's media work panicked; the call ends");
            c.failed = true;
            None
        }
    }
}

/// The negotiated codec, as the audio pipeline knows it.
fn media_codec(codec: AudioCodec) -> CallCodec {
    match codec {
        AudioCodec::Opus => CallCodec::Opus,
        AudioCodec::Pcmu => CallCodec::Pcmu,
        AudioCodec::Pcma => CallCodec::Pcma,
    }
}

impl LiveCall {
    pub(super) fn new(new: NewCall) -> Result<Self, duet_media::call_audio::CallAudioError> {
        let media = CallAudio::new(media_codec(new.call.codec()))?;
        let now = Instant::now();
        tracing::info!(call = %new.id, codec = ?new.call.codec(), "call added to the media engine");
        Ok(Self {
            id: new.id,
            call: new.call,
            media,
            session: new.session,
            attachment: new.attachment,
            events: new.events,
            signals: new.signals,
            inbound: new.inbound,
            has_dc: new.has_data_channel,
            held: None,
            local: Default::default(),
            last_rx: now,
            next_timeout: now,
            created: now,
            connected: false,
            closing: false,
            failed: false,
            fault: false,
            playing: None,
            phase: 0,
            hop: false,
            pool: PcmPool::new(),
            first_wait: None,
            _guard: new.guard,
        })
    }

    /// Answer audio from the session (handed over at `at`), encoded ahead now.
    pub(super) fn play(&mut self, tag: u64, pcm: &[f32], at: Instant) {
        if self.playing != Some(tag) {
            self.playing = Some(tag);
            self.first_wait = Some((tag, at));
            self.hop = self.media.is_idle();
        }
        if !self.media.play(tag, pcm) {
            tracing::warn!(call = %self.id, "playback queue full; audio dropped");
        }
    }

    /// Purges the playback queue; the session learns it through its signals.
    pub(super) fn clear(&mut self) {
        self.first_wait = None;
        self.media.clear();
        self.signals.cleared();
    }

    /// Sends this tick's frame, encoded ahead of it (see [`CallAudio::prepare`]); reports
    /// what of each answer left.
    pub(super) fn send_frame(&mut self, now: Instant) {
        if std::mem::take(&mut self.fault) {
            panic!("injected fault: call media");
        }
        match self.media.next_frame() {
            Ok(frame) => {
                if frame.inline {
                    METRICS.frames_inline.fetch_add(1, Ordering::Relaxed);
                }
                if self.call.can_send_audio() && self.call.send_audio(now, frame.payload).is_ok() {
                    METRICS.frames_sent.fetch_add(1, Ordering::Relaxed);
                }
                if let Some((tag, at)) = self.first_wait {
                    if frame.played.iter().any(|(t, _)| *t == tag) {
                        METRICS
                            .playout_wait
                            .observe(Instant::now().saturating_duration_since(at));
                        self.first_wait = None;
                    }
                }
                self.signals.played(frame.played, frame.drained);
            }
            Err(e) => tracing::warn!(call = %self.id, error = %e, "encoding failed"),
        }
    }

    /// After the tick's sends: the next frames encoded ahead, events out, caller audio in
    /// (unless this slot's audio left on arrival).
    pub(super) fn after_tick(&mut self, now: Instant) {
        self.media.prepare();
        self.flush_events();
        let mut pcm = self.pool.take(duet_media::SESSION_RATE as usize / 50);
        if let Some(frame) = self.media.inbound_frame(now, pcm.samples_mut()) {
            self.hand_to_session(pcm, frame);
        }
    }

    /// A caller packet arrived: in order, its audio goes to the session now.
    fn caller_audio(&mut self, ssrc: u32, seq: u64, payload: Vec<u8>) {
        let now = Instant::now();
        self.media.receive(ssrc, seq, payload, now);
        let mut pcm = self.pool.take(duet_media::SESSION_RATE as usize / 50);
        if let Some(frame) = self.media.arrival_frame(now, pcm.samples_mut()) {
            self.hand_to_session(pcm, frame);
        }
    }

    fn hand_to_session(
        &mut self,
        pcm: crate::session::Pcm,
        frame: duet_media::call_audio::InFrame,
    ) {
        if let Some(waited) = frame.waited {
            METRICS.inbound_wait.observe(waited);
        }
        // Lossy by design: a session too busy for live audio loses a frame, never the
        // engine its pace. (What must not be lost travels in the signals.)
        let frame = Inbound {
            input: SessionInput::Media(pcm),
            hold: None,
            from: self.attachment,
        };
        if self.session.try_send(frame).is_err() {
            tracing::debug!(call = %self.id, "session inbox full; caller audio frame dropped");
        }
    }

    /// Writes the session's events to `oai-events`, in order, as far as the data channel
    /// takes them now; the rest wait in the session's byte-bounded queue. Events are held
    /// until the channel opens, and discarded when the offer has no data channel.
    pub(super) fn flush_events(&mut self) {
        if self.has_dc && !self.call.channel_open() {
            return;
        }
        while let Some(err) = self.local.front() {
            match self.call.send_text(&err.json) {
                Err(SendError::Full) => return,
                _ => {
                    self.local.pop_front();
                }
            }
        }
        loop {
            let (event, held) = match self.held.take() {
                Some(x) => x,
                None => match self.next_event() {
                    Some(x) => x,
                    None => return,
                },
            };
            if !self.has_dc {
                continue;
            }
            if !self.write(event, held) {
                return;
            }
        }
    }

    /// The next event of the session's queue; `None` when there is none now (or the session
    /// closed the queue, which ends the call).
    fn next_event(&mut self) -> Option<(Rendered, Held)> {
        match self.events.try_recv() {
            Received::Delivery(Delivery::Event(e, h)) => Some((e, h)),
            Received::Delivery(Delivery::Close { .. }) | Received::Closed => {
                self.closing = true;
                None
            }
            Received::Abort(abort) => {
                if let (Some(error), true) = (&abort.error, self.has_dc) {
                    let _ = self.call.send_text(&error.json);
                }
                self.closing = true;
                None
            }
            Received::Empty => None,
        }
    }

    /// Writes one event; false when the channel is full (the event is kept for later).
    fn write(&mut self, event: Rendered, held: Held) -> bool {
        match self.call.send_text(&event.json) {
            Ok(()) => true,
            Err(SendError::Full) => {
                self.held = Some((event, held));
                false
            }
            Err(SendError::TooLarge { max, .. }) => {
                tracing::warn!(call = %self.id, kind = event.kind, bytes = event.len(), max, "event larger than the peer's max-message-size; replaced by an error");
                let error = too_large_error(&event, max, "the data channel's max-message-size");
                self.local.push_back(Rendered::new(&error, None));
                self.flush_local();
                true
            }
            Err(SendError::NotOpen) => true,
            Err(e) => {
                tracing::debug!(call = %self.id, error = %e, "data channel write failed");
                true
            }
        }
    }

    fn flush_local(&mut self) {
        while let Some(err) = self.local.front() {
            if matches!(self.call.send_text(&err.json), Err(SendError::Full)) {
                return;
            }
            self.local.pop_front();
        }
    }

    pub(super) fn event(&mut self, ev: CallEvent) {
        match ev {
            CallEvent::Connected => {
                self.connected = true;
                tracing::info!(call = %self.id, connect_ms = self.created.elapsed().as_millis() as u64, "call connected");
            }
            CallEvent::Audio {
                ssrc,
                seq,
                payload,
                codec,
            } if codec == self.call.codec() => self.caller_audio(ssrc, seq, payload),
            CallEvent::Audio { .. } => {}
            CallEvent::ChannelOpen => self.flush_events(),
            CallEvent::Text(text) => self.client_text(text),
            CallEvent::Binary(n) => self.client_binary(n),
            CallEvent::ChannelClosed => {}
        }
    }

    /// A client event from `oai-events`: to the session within the call's inbound byte
    /// budget, else answered with an `error` right here (it never vanishes).
    fn client_text(&mut self, text: String) {
        let hold = match self.inbound.try_acquire(text.len()) {
            Ok(hold) => hold,
            Err(InboundRefused::Busy) => return self.refuse(&text),
            Err(InboundRefused::Memory(e)) => return self.refuse_memory(&text, e),
        };
        let inbound = Inbound {
            input: SessionInput::Text(text),
            hold: Some(hold),
            from: self.attachment,
        };
        match self.session.try_send(inbound) {
            Ok(()) => {}
            Err(TrySendError::Full(Inbound {
                input: SessionInput::Text(text),
                ..
            })) => self.refuse(&text),
            Err(_) => {}
        }
    }

    /// A client event the memory budget has no room for: answered with an `error` naming its
    /// `event_id`.
    fn refuse_memory(&mut self, text: &str, e: crate::memory::Exhausted) {
        tracing::warn!(call = %self.id, "memory budget spent; client event answered with an error");
        if self.local.len() < MAX_LOCAL_ERRORS {
            self.local.push_back(crate::session::memory_error(text, e));
        }
        self.flush_local();
    }

    fn refuse(&mut self, text: &str) {
        tracing::warn!(call = %self.id, "session inbox full; client event answered with an error");
        if self.local.len() < MAX_LOCAL_ERRORS {
            self.local.push_back(busy_error(text));
        }
        self.flush_local();
    }

    fn client_binary(&mut self, n: usize) {
        if self
            .session
            .try_send(SessionInput::binary_message(n).into())
            .is_err()
        {
            tracing::debug!(call = %self.id, "session inbox full; binary message report dropped");
        }
    }
}
