//! The session's seams to the outside, as small types and traits: the model it talks to
//! ([`ModelPort`], with what comes back as [`ModelEvent`]), the media engine's playback queue
//! ([`MediaSink`]), and the newtypes that cross them ([`Epoch`], [`PlaybackTag`]). The core
//! calls ports and never knows whether a model loop thread or a test script is behind them.

use std::sync::Arc;

use duet_models::{Request, StepOutput};

/// The interruption fence: every cancel, clear or barge-in advances it, and model output
/// stamped with an older epoch is dropped before it reaches any queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(pub u64);

impl Epoch {
    /// The next epoch.
    pub fn next(self) -> Self {
        Self(self.0 + 1)
    }
}

/// Tags one response's audio in the media engine's playback queue (WebRTC), so that what
/// left on RTP is accounted to the right response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PlaybackTag(pub u64);

/// The session's model slot.
pub trait ModelPort: Send {
    /// Whether the model decides on its own when to speak (full duplex).
    fn autonomous(&self) -> bool;
    /// Queues whole input frames (a multiple of the model's frame size).
    fn input(&self, pcm: &[f32]);
    /// Sends a request; outputs after it carry `epoch`.
    fn request(&self, epoch: Epoch, request: Request);
}

/// What the model sends back to its session.
#[derive(Debug)]
pub enum ModelEvent {
    /// One step's output (only sent when it carries audio, text or the end of a turn; every
    /// step of an autonomous model).
    Output {
        /// Epoch of the request this output belongs to.
        epoch: Epoch,
        /// The output.
        output: StepOutput,
    },
    /// The model failed for this session; the slot is closed.
    Failed {
        /// Stable code.
        code: &'static str,
        /// Message.
        message: String,
    },
    /// The model loop stopped (the shell's own event, when the slot's channel closes).
    Stopped,
}

/// Where a WebRTC session's audio goes: the media engine's playback queue for the call.
pub trait MediaSink: Send {
    /// Queues 24 kHz audio of the response tagged `tag` for playout.
    fn play(&self, tag: PlaybackTag, pcm: &[f32]);
    /// No more audio of `tag` will come; the engine reports in its signals when its last
    /// sample left.
    fn finish(&self, tag: PlaybackTag);
    /// Purges everything queued; the engine reports the purge in its signals.
    fn clear(&self);
    /// Pauses the playout (silence goes out, the queue waits) or resumes it where it
    /// paused; a [`Self::clear`] ends a pause too.
    fn pause(&self, paused: bool);
    /// What carries the media, as `/v1/pool` names it: `webrtc`, or `sip` for a phone call.
    fn kind(&self) -> &'static str {
        "webrtc"
    }
}

/// What a session reports for usage accounting (`GET /v1/usage`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UsageEvent {
    /// Caller audio the session took, in 24 kHz samples.
    AudioIn(u64),
    /// Audio spoken outside a response (`/v1/audio/speech`), in 24 kHz samples.
    AudioOut(u64),
    /// A response ended.
    Response {
        /// `completed`, `cancelled`, `incomplete` or `failed`.
        status: &'static str,
        /// Audio it produced, in 24 kHz samples.
        audio_out: u64,
        /// Text tokens it produced.
        text_tokens: u64,
    },
    /// An `error` event went out, with this code.
    Error(String),
}

/// Where a session's usage goes (the credential it was opened with is the sink's).
pub trait UsageSink: Send + Sync {
    /// Counts `event`.
    fn record(&self, event: UsageEvent);
}

/// What a session's `audio.input.transcription` asks of the transcriber beyond the audio.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TranscriptionHints {
    /// `language` (ISO-639-1), when set.
    pub language: Option<String>,
    /// `prompt`, when set.
    pub prompt: Option<String>,
}

impl TranscriptionHints {
    /// The hints of a session's `audio.input.transcription` object.
    pub fn of(transcription: Option<&serde_json::Value>) -> Self {
        let text = |key: &str| {
            transcription
                .and_then(|t| t[key].as_str())
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        Self {
            language: text("language"),
            prompt: text("prompt"),
        }
    }
}

/// The session's stream on a transcriber (input transcription, transcription sessions).
pub trait TranscriberPort: Send {
    /// The transcriber's name (the transcription `model` the session reports).
    fn name(&self) -> &str;
    /// Streaming: it hears the utterance as it arrives; otherwise it gets the committed
    /// item's audio whole.
    fn streaming(&self) -> bool;
    /// Sends 24 kHz audio of the utterance that becomes item `item_id`; `end`: the item was
    /// committed, answer it.
    fn send(&self, item_id: Arc<str>, pcm: Arc<[f32]>, end: bool, logprobs: bool);
    /// The session's language and prompt for the utterances it ends from now on (the
    /// embedded transcribers do not use them).
    fn hints(&self, _hints: &TranscriptionHints) {}
    /// Utterance `item_id`'s transcript is not wanted any more: dropped if the transcriber
    /// has not started on it (a remote one has already sent it: nothing to do).
    fn forget(&self, _item_id: &Arc<str>) {}
}

/// What a transcriber sends back to its session.
#[derive(Debug)]
pub struct TranscriptEvent {
    /// The user item the audio belongs to.
    pub item_id: Arc<str>,
    /// The answer, or why the utterance could not be transcribed.
    pub output: Result<duet_models::TranscribeOutput, String>,
}

/// The session's judge of its pauses: a turn model (Smart Turn) on the turn loop, shared by
/// every session of the server.
pub trait TurnPort: Send {
    /// Asks whether the turn ending in `pcm` (24 kHz, at most its last 8 s) is complete;
    /// the answer comes back as a [`TurnScore`] tagged `pause`.
    fn score(&self, pause: u64, pcm: Arc<[f32]>);
}

/// A turn model's answer for one pause.
#[derive(Debug)]
pub struct TurnScore {
    /// The pause it judged (as the session tagged it).
    pub pause: u64,
    /// The probability that the turn is complete, or why there is none.
    pub complete: Result<f32, String>,
}
