//! The duplex session: one per call, owning all of the call's state (effective config,
//! conversation, input buffer, VAD, the active response and its playback ledger, the epoch
//! fence, its timers), fed in order by client events, caller audio, model outputs, media
//! reports and time.
//!
//! Split as str0m is: [`Session`] is a sans-IO state machine. Every input comes with the time
//! as an argument; it pushes what it produces into its ports (the subscribers' byte-bounded
//! event queues, the [`ModelPort`], the [`MediaSink`]) and says when it next needs the time
//! ([`Session::next_deadline`]). Nothing in it reads a clock, spawns or blocks, so its tests
//! step a virtual clock. [`run`] is the shell: one task, one `select!` over its channels and
//! one timer, the only place that reads the clock.

mod audio_io;
mod calls;
mod conversation;
mod durable;
mod floor;
mod input;
mod interrupt;
mod items;
mod journal;
pub mod ledger;
mod machine;
mod memory;
pub mod outbound;
mod outbox;
mod pcm;
mod playback;
mod port;
mod provision;
mod reply;
mod respond;
mod response;
mod signals;
mod speculate;
mod subscribers;
#[cfg(test)]
mod tests;
mod tools;
mod transcripts;
pub mod turn;
mod vad;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use crate::memory::{Exhausted, Meter, MeterCharge};

use crate::protocol::{Envelope, ErrorPayload};

pub use durable::SessionState;
pub use machine::Session;
pub use memory::SessionMemory;
pub use outbound::{
    metered_queue, queue, Abort, Delivery, EventReceiver, EventSender, Held, Received, Rendered,
};
pub use pcm::{Pcm, PcmPool};
pub use port::{
    Epoch, MediaSink, ModelEvent, ModelPort, PlaybackTag, TranscriberPort, TranscriptEvent,
    TranscriptionHints, TurnPort, TurnScore, UsageEvent, UsageSink,
};
pub use provision::{Needs, Ports, Provider, Provision, Slot, Stream};
pub use signals::{MediaReport, MediaSignals};
pub use subscribers::{busy_error, event_id_of, memory_error, too_large_error};

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

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_webrtc() {
            "WebRtc"
        } else {
            "WebSocket"
        })
    }
}

impl Transport {
    fn is_webrtc(&self) -> bool {
        matches!(self, Transport::WebRtc { .. })
    }

    fn sink(&self) -> Option<&dyn MediaSink> {
        match self {
            Transport::WebRtc { sink, .. } => Some(sink.as_ref()),
            Transport::WebSocket => None,
        }
    }

    /// `websocket`, `webrtc` or `sip`.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::WebRtc { sink, .. } => sink.kind(),
            Transport::WebSocket => "websocket",
        }
    }

    /// What the media engine reports (WebRTC and phone calls).
    pub fn signals(&self) -> Option<Arc<MediaSignals>> {
        match self {
            Transport::WebRtc { signals, .. } => Some(signals.clone()),
            Transport::WebSocket => None,
        }
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
        deadline: Instant,
    },
}

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
    /// Text the conversation keeps, in bytes, before the oldest items are evicted (one item
    /// larger than this is refused).
    pub max_conversation_text: usize,
    /// Longest `instructions`, in bytes.
    pub max_instructions: usize,
    /// Largest `tools` array (as JSON), in bytes.
    pub max_tools: usize,
    /// Bytes of events a subscriber may have unsent before the session closes
    /// (`event_queue_full`); a single larger event is replaced by an `error`.
    pub max_outbound_bytes: usize,
    /// Longest session.
    pub max_session: Duration,
    /// A session with no client event and no audio for this long closes (`session_idle`).
    pub idle: Duration,
    /// How long a client-created response on an autonomous model waits for the model to
    /// speak before it completes empty.
    pub speak_timeout: Duration,
    /// Opted-in sessions: how long a detached session waits for a resume.
    pub disconnect_grace: Duration,
    /// Opted-in sessions: the replay journal's budget, in bytes of JSON.
    pub journal_bytes: usize,
    /// Opted-in sessions: how long the journal keeps an event.
    pub journal_age: Duration,
    /// Opted-in sessions: how long before `max_session` `session.expiring` is sent.
    pub expiry_warning: Duration,
    /// Silero VAD: voiced input in a row, in ms, before speech starts (a turn or a
    /// barge-in); `--vad-min-speech-ms`.
    pub vad_min_speech_ms: u32,
    /// Models that read words: silence inside a turn, in ms, after which the answer starts
    /// before the turn is confirmed (0: never); `--speculative-start-ms`.
    pub speculative_ms: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_input_samples: 300 * SECOND,
            max_items: 1_000,
            max_conversation_samples: 900 * SECOND,
            max_item_samples: 300 * SECOND,
            max_conversation_text: 8 << 20,
            max_instructions: 256 << 10,
            max_tools: 1 << 20,
            max_outbound_bytes: 32 << 20,
            max_session: Duration::from_secs(3_600),
            idle: Duration::from_secs(300),
            speak_timeout: Duration::from_secs(4),
            disconnect_grace: Duration::from_secs(30),
            journal_bytes: 8 << 20,
            journal_age: Duration::from_secs(60),
            expiry_warning: Duration::from_secs(60),
            vad_min_speech_ms: 100,
            speculative_ms: 0,
        }
    }
}

/// Which connection a session input came from. An opted-in session takes input only from
/// the attachment that holds it (after a takeover the old one's input is ignored);
/// [`AttachmentId::ANY`] (sidebands, the tests) is always taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AttachmentId(pub u64);

impl AttachmentId {
    /// Input the session takes from anyone.
    pub const ANY: Self = Self(0);

    /// A fresh id, for a new connection.
    pub fn fresh() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

/// The bytes of client events one connection may have waiting for its session: a byte cap
/// of its own, and the connection's meter on the server's memory budget.
///
/// A connection's reader keeps the memory of the largest message it read (its buffer grows
/// to fit one and stays), so that much is charged for the connection's life as well.
#[derive(Clone, Debug)]
pub struct InboundBudget {
    permits: Arc<Semaphore>,
    max: usize,
    meter: Arc<Meter>,
    /// The largest message read so far (what the reader keeps), in bytes.
    kept: Arc<std::sync::atomic::AtomicU64>,
}

/// Why a client event could not be taken.
#[derive(Debug)]
pub enum InboundRefused {
    /// The connection's own cap is full (or closed).
    Busy,
    /// The server's memory budget has no room for it.
    Memory(Exhausted),
}

/// A client event's bytes, held until the session handled it.
#[derive(Debug)]
pub struct Hold {
    _permit: OwnedSemaphorePermit,
    _charge: MeterCharge,
}

impl InboundBudget {
    /// `max` bytes for one connection, charged to `meter`.
    pub fn new(max: usize, meter: Arc<Meter>) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max)),
            max,
            meter,
            kept: Arc::default(),
        }
    }

    /// The connection's cap in bytes.
    pub fn max(&self) -> usize {
        self.max
    }

    fn permits(&self, bytes: usize) -> u32 {
        u32::try_from(bytes.clamp(1, self.max)).unwrap_or(u32::MAX)
    }

    /// Takes `bytes`, waiting while the connection's cap is full.
    pub async fn acquire(&self, bytes: usize) -> Result<Hold, InboundRefused> {
        let permit = self
            .permits
            .clone()
            .acquire_many_owned(self.permits(bytes))
            .await
            .map_err(|_| InboundRefused::Busy)?;
        let charge = self.charge(bytes)?;
        Ok(Hold {
            _permit: permit,
            _charge: charge,
        })
    }

    /// An event's text and, once decoded, its fields: twice its bytes on the meter while it
    /// waits; and the growth of what the reader keeps, for good.
    fn charge(&self, bytes: usize) -> Result<MeterCharge, InboundRefused> {
        use std::sync::atomic::Ordering;
        let bytes = bytes as u64;
        let charge = self
            .meter
            .charge(2 * bytes)
            .map_err(InboundRefused::Memory)?;
        let kept = self.kept.load(Ordering::Acquire);
        if bytes > kept {
            self.meter
                .add(bytes - kept)
                .map_err(InboundRefused::Memory)?;
            self.kept.fetch_max(bytes, Ordering::AcqRel);
        }
        Ok(charge)
    }

    /// Takes `bytes` now, or says why not.
    pub fn try_acquire(&self, bytes: usize) -> Result<Hold, InboundRefused> {
        let permit = self
            .permits
            .clone()
            .try_acquire_many_owned(self.permits(bytes))
            .map_err(|_| InboundRefused::Busy)?;
        let charge = self.charge(bytes)?;
        Ok(Hold {
            _permit: permit,
            _charge: charge,
        })
    }
}

/// A client message and the inbound bytes it holds (released once the session handled it).
#[derive(Debug)]
pub struct Inbound {
    /// The message.
    pub input: SessionInput,
    /// Its share of the connection's inbound byte budget.
    pub hold: Option<Hold>,
    /// The connection it came from.
    pub from: AttachmentId,
}

impl From<SessionInput> for Inbound {
    fn from(input: SessionInput) -> Self {
        Self {
            input,
            hold: None,
            from: AttachmentId::ANY,
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
    /// A client event as text (decoded by the session; the WebRTC data channel).
    Text(String),
    /// Caller audio of a WebRTC call at 24 kHz (one 20 ms media-engine tick). What played,
    /// drained or was cleared travels in [`MediaSignals`], which never drop.
    Media(Pcm),
    /// A key pressed on a phone call, reported to the client as
    /// `input_audio_buffer.dtmf_event_received`.
    Dtmf {
        /// `0`–`9`, `*`, `#`, `A`–`D`.
        key: char,
        /// When it arrived, in Unix seconds (the driver's wall clock).
        received_at: u64,
    },
    /// Another connection (a sideband WebSocket) subscribes to this session's events.
    Attach(EventSender),
    /// Duplex extension: a new connection resumes the session (`session.resume`); it
    /// becomes the session's transport, or gets an `error` and a close.
    Resume {
        /// What the client sent.
        request: crate::protocol::duplex::ResumeRequest,
        /// The new connection's queue.
        out: EventSender,
        /// The new connection (its input is tagged with it).
        attachment: AttachmentId,
        /// What carries the session from now on (a WebSocket, or the new call's media).
        transport: Transport,
        /// Told whether the resume was taken (a new call is answered only then).
        reply: Option<tokio::sync::oneshot::Sender<Result<(), ErrorPayload>>>,
    },
    /// The connection the input is tagged with dropped: an opted-in session detaches (if it
    /// is still the session's transport); any other closes.
    Detach,
    /// The turn model's answer for a pause (from the turn loop, not a transport).
    TurnScore(TurnScore),
}

impl SessionInput {
    /// A binary message arrived where JSON text events belong.
    pub fn binary_message(bytes: usize) -> Self {
        SessionInput::Invalid(ErrorPayload::invalid(
            crate::protocol::codes::INVALID_JSON,
            format!("binary message of {bytes} bytes; send JSON events as text"),
        ))
    }
}

/// Everything a new session needs.
pub struct SessionParams {
    /// Its id (`sess_…`; in a cluster it names the owning node).
    pub session_id: String,
    /// The transport.
    pub transport: Transport,
    /// The session's model slot (none: opened without one; see [`Session::needs`]).
    pub model: Option<Box<dyn ModelPort>>,
    /// What the model declares about itself: its name, frame size, whether it decides on
    /// its own when to speak, calls tools, reads user turns as words.
    pub model_info: duet_models::ModelInfo,
    /// Limits.
    pub limits: Limits,
    /// Outbound events (the transport's queue).
    pub out: EventSender,
    /// Whether the client opted into the duplex extension (`?duplex=1`).
    pub duplex: bool,
    /// Extension (`?turn_events=1`): report the turn detector's decisions.
    pub turn_events: bool,
    /// The opening connection.
    pub attachment: AttachmentId,
    /// The server's headroom (sessions it can hold, and can still take), reported to
    /// opted-in clients in `rate_limits.updated`.
    pub headroom: Option<Headroom>,
    /// Where its usage is counted.
    pub usage: Option<Arc<dyn UsageSink>>,
    /// Its stream on the transcriber (none: not opened yet, or transcription is
    /// unavailable).
    pub transcriber: Option<Box<dyn TranscriberPort>>,
    /// The server has a transcriber a stream can be opened on later.
    pub can_transcribe: bool,
    /// Silero VAD for server VAD (none: the energy detector).
    pub vad_model: Option<duet_models::silero::SileroVad>,
    /// Its port on the turn loop, which judges pauses under `semantic_vad` (none: no turn
    /// model loaded; `semantic_vad` ends turns after a fixed silence).
    pub turn: Option<Arc<dyn TurnPort + Sync>>,
    /// Opens as a transcription session (`?intent=transcription`).
    pub transcription_session: bool,
    /// Its share of the server's memory budget (none: unmetered).
    pub memory: Option<SessionMemory>,
}

/// Reads the server's admission headroom: (limit, remaining).
pub type Headroom = Arc<dyn Fn() -> (u64, u64) + Send + Sync>;

// The session's shell: one task per session with one `select!` over its channels (the
// transport's inbox, the model's events, the media engine's signals, the server's
// lifecycle) and one timer, [`Session::next_deadline`]. It is the only part of the session
// that reads a clock.

/// What the pool view shows of a running session, updated by its shell after every step.
#[derive(Debug, Default)]
pub struct SessionStatus {
    /// The model slot's number plus one (0: none).
    slot: std::sync::atomic::AtomicUsize,
    /// 0: WebSocket, 1: WebRTC, 2: SIP.
    transport: std::sync::atomic::AtomicU8,
    detached: std::sync::atomic::AtomicBool,
    durable: std::sync::atomic::AtomicBool,
}

impl SessionStatus {
    fn update(&self, session: &Session) {
        use std::sync::atomic::Ordering::Relaxed;
        let kind = match session.transport().kind() {
            "webrtc" => 1,
            "sip" => 2,
            _ => 0,
        };
        self.transport.store(kind, Relaxed);
        if session.reply.model.port.is_none() {
            self.slot.store(0, Relaxed);
        }
        let state = session.state();
        self.durable.store(state.is_some(), Relaxed);
        self.detached
            .store(state == Some(SessionState::Detached), Relaxed);
    }

    /// Records the session's model slot.
    pub fn set_slot(&self, slot: Option<usize>) {
        let v = slot.map_or(0, |s| s + 1);
        self.slot.store(v, std::sync::atomic::Ordering::Relaxed);
    }

    /// The session's model slot (none: a transcription session).
    pub fn slot(&self) -> Option<usize> {
        self.slot
            .load(std::sync::atomic::Ordering::Relaxed)
            .checked_sub(1)
    }

    /// `websocket`, `webrtc` or `sip`.
    pub fn transport(&self) -> &'static str {
        match self.transport.load(std::sync::atomic::Ordering::Relaxed) {
            1 => "webrtc",
            2 => "sip",
            _ => "websocket",
        }
    }

    /// `open` (GA), `attached` or `detached` (duplex extension).
    pub fn state(&self) -> &'static str {
        use std::sync::atomic::Ordering::Relaxed;
        match (self.durable.load(Relaxed), self.detached.load(Relaxed)) {
            (false, _) => "open",
            (true, false) => "attached",
            (true, true) => "detached",
        }
    }

    /// Whether it waits for a resume.
    pub fn is_detached(&self) -> bool {
        self.detached.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The time, for the session (tokio's clock, so a paused runtime pauses it too).
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// The channels a session's shell reads besides its inbox: the model's events (none while
/// it holds no slot) and the transcriber's answers (none without a stream).
pub struct Feeds {
    /// The model loop's events for its slot.
    pub model: Option<mpsc::Receiver<ModelEvent>>,
    /// The transcription loop's answers for its stream.
    pub transcripts: Option<mpsc::Receiver<TranscriptEvent>>,
    /// The turn loop's scores of its pauses.
    pub turns: Option<mpsc::Receiver<TurnScore>>,
}

/// Runs `session` until it closes: its transport closes, it expires, idles or is drained,
/// or the model fails. A `session.update` that needs a slot or a stream is served from
/// `provider` before the next input is read.
pub async fn run(
    mut session: Session,
    mut inbox: mpsc::Receiver<Inbound>,
    mut feeds: Feeds,
    mut lifecycle: watch::Receiver<Lifecycle>,
    status: Arc<SessionStatus>,
    provider: Arc<dyn Provider>,
) {
    session.start(now());
    let mut lifecycle_open = true;
    if let Lifecycle::Draining { deadline } = *lifecycle.borrow_and_update() {
        session.drain(deadline, now());
    }
    let mut report = MediaReport::default();
    while !session.is_closed() {
        settle(&mut session, &mut feeds, &status, provider.as_ref()).await;
        let wake = tokio::time::Instant::from_std(session.next_deadline());
        // A resume may move the session to another transport: look each time.
        let signals = session.transport().signals();
        tokio::select! {
            biased;
            () = media_signal(signals.as_deref()) => {
                if let Some(s) = &signals {
                    s.take_into(&mut report);
                    session.on_media(&report, now());
                }
            }
            msg = inbox.recv() => match msg {
                Some(Inbound { input, hold, from }) => {
                    session.handle_from(from, input, now());
                    drop(hold);
                }
                None => break,
            },
            ev = recv(&mut feeds.model) => on_model(&mut session, &mut feeds, ev),
            ev = recv(&mut feeds.transcripts) => match ev {
                Some(ev) => session.on_transcript(ev, now()),
                None => feeds.transcripts = None,
            },
            score = recv(&mut feeds.turns) => match score {
                Some(score) => session.handle(SessionInput::TurnScore(score), now()),
                None => feeds.turns = None,
            },
            changed = lifecycle.changed(), if lifecycle_open => match changed {
                Ok(()) => {
                    if let Lifecycle::Draining { deadline } = *lifecycle.borrow_and_update() {
                        session.drain(deadline, now());
                    }
                }
                Err(_) => lifecycle_open = false,
            },
            () = tokio::time::sleep_until(wake) => session.on_timeout(now()),
        }
    }
    tracing::debug!(session = %session.id(), "session ended");
}

/// Before each wait: the session's memory settled, what it waits for provided (a slot or
/// a stream a `session.update` asked for), its status published.
async fn settle(
    session: &mut Session,
    feeds: &mut Feeds,
    status: &SessionStatus,
    provider: &dyn Provider,
) {
    session.settle();
    if let Some(needs) = session.reply.model.waiting_for() {
        let got = provider.provide(needs).await;
        let ports = feeds.take(got, status);
        session.provide(ports, now());
    }
    status.update(session);
}

/// The model's next event, or its end (a slot given back when the session turned
/// transcription is no failure).
fn on_model(session: &mut Session, feeds: &mut Feeds, ev: Option<ModelEvent>) {
    match ev {
        Some(ev) => session.on_model(ev, now()),
        None => {
            feeds.model = None;
            if session.reply.model.port.is_some() {
                session.on_model(ModelEvent::Stopped, now());
            }
        }
    }
}

impl Feeds {
    /// Keeps the receivers of `got` (and the slot's number in `status`); returns the ports
    /// for the session.
    pub fn take(&mut self, got: Provision, status: &SessionStatus) -> Ports {
        let model = got.slot.map(|r| {
            r.map(|(port, rx, slot)| {
                self.model = Some(rx);
                status.set_slot(Some(slot));
                port
            })
        });
        let transcriber = got.stream.map(|r| {
            r.map(|(port, rx)| {
                self.transcripts = Some(rx);
                port
            })
        });
        Ports { model, transcriber }
    }
}

/// The next message of `rx`; never, without one.
async fn recv<T>(rx: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Resolves when the media engine reported something (never on WebSocket).
async fn media_signal(signals: Option<&MediaSignals>) {
    match signals {
        Some(s) => s.changed().await,
        None => std::future::pending().await,
    }
}
