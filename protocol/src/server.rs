//! Server events. Each is rendered with a fresh `event_id`; optional fields are omitted,
//! nullable ones (`previous_item_id`, `status_details`, `usage`, …) are rendered.

use serde::Serialize;

use super::error::ErrorPayload;
use super::ids;
use super::items::{Item, Part};
use super::response::Response;
use super::session::SessionConfig;

/// A server event: an `event_id` and the typed body.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerEvent {
    /// `event_…`, unique per event.
    pub event_id: String,
    /// The event.
    #[serde(flatten)]
    pub body: ServerEventBody,
}

impl ServerEvent {
    /// Wraps a body with a fresh `event_id`.
    pub fn new(body: ServerEventBody) -> Self {
        Self {
            event_id: ids::event_id(),
            body,
        }
    }

    /// Renders the event as a JSON text frame.
    pub fn to_json(&self) -> String {
        // Serializing these types cannot fail: no maps with non-string keys, no custom impls.
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!(r#"{{"type":"error","event_id":"{}","error":{{"type":"server_error","code":"serialization","message":"{e}","param":null,"event_id":null}}}}"#, self.event_id)
        })
    }

    /// The `type` string of this event.
    pub fn kind(&self) -> &'static str {
        self.body.kind()
    }
}

impl From<ServerEventBody> for ServerEvent {
    fn from(body: ServerEventBody) -> Self {
        Self::new(body)
    }
}

/// Fields shared by the per-content streaming events.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContentRef {
    /// `resp_…`.
    pub response_id: String,
    /// `item_…`.
    pub item_id: String,
    /// Index of the item in the response output.
    pub output_index: u32,
    /// Index of the content part in the item.
    pub content_index: u32,
}

/// One rate limit entry.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RateLimit {
    /// `requests` or `tokens`.
    pub name: String,
    /// The limit.
    pub limit: u64,
    /// What remains.
    pub remaining: u64,
    /// Seconds until reset.
    pub reset_seconds: f64,
}

/// Every server event Duet can send.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum ServerEventBody {
    /// An error; the session continues unless it says otherwise.
    #[serde(rename = "error")]
    Error {
        /// What went wrong.
        error: ErrorPayload,
    },
    /// First event on every connection.
    #[serde(rename = "session.created")]
    SessionCreated {
        /// The session's initial effective configuration.
        session: Box<SessionConfig>,
        /// Duplex extension (opted-in sessions): the token that resumes this session.
        #[serde(skip_serializing_if = "Option::is_none")]
        resume_token: Option<String>,
        /// Duplex extension (opted-in sessions): the attachment's generation, 1.
        #[serde(skip_serializing_if = "Option::is_none")]
        attachment_generation: Option<u64>,
    },
    /// The full effective session after an update.
    #[serde(rename = "session.updated")]
    SessionUpdated {
        /// The session's effective configuration after the update.
        session: Box<SessionConfig>,
    },
    /// Item inserted.
    #[serde(rename = "conversation.item.added")]
    ConversationItemAdded {
        /// The item it follows in the conversation, `null` when first.
        previous_item_id: Option<String>,
        /// The item, without audio bytes.
        item: Box<Item>,
    },
    /// Item finalised.
    #[serde(rename = "conversation.item.done")]
    ConversationItemDone {
        /// The item it follows in the conversation, `null` when first.
        previous_item_id: Option<String>,
        /// The item, without audio bytes.
        item: Box<Item>,
    },
    /// Reply to `conversation.item.retrieve`, audio included.
    #[serde(rename = "conversation.item.retrieved")]
    ConversationItemRetrieved {
        /// The item, with its audio bytes.
        item: Box<Item>,
    },
    /// Reply to truncate (or a server truncation after an interruption).
    #[serde(rename = "conversation.item.truncated")]
    ConversationItemTruncated {
        /// The assistant item whose audio was cut.
        item_id: String,
        /// Index of the truncated content part.
        content_index: u32,
        /// Milliseconds of audio kept; the rest was dropped.
        audio_end_ms: u64,
    },
    /// Item removed.
    #[serde(rename = "conversation.item.deleted")]
    ConversationItemDeleted {
        /// The removed item.
        item_id: String,
    },
    /// Input transcription text so far.
    #[serde(rename = "conversation.item.input_audio_transcription.delta")]
    InputAudioTranscriptionDelta {
        /// The user item being transcribed.
        item_id: String,
        /// Index of its audio content part.
        content_index: u32,
        /// Transcript text added since the last delta.
        delta: String,
        /// Log probabilities of the delta's tokens (when `include` asks for them).
        #[serde(skip_serializing_if = "Option::is_none")]
        logprobs: Option<Vec<LogProb>>,
    },
    /// Input transcription finished.
    #[serde(rename = "conversation.item.input_audio_transcription.completed")]
    InputAudioTranscriptionCompleted {
        /// The transcribed user item.
        item_id: String,
        /// Index of its audio content part.
        content_index: u32,
        /// The full transcript.
        transcript: String,
        /// Usage of the transcription.
        usage: TranscriptionUsage,
        /// Log probabilities of the transcript's tokens (when `include` asks for them).
        #[serde(skip_serializing_if = "Option::is_none")]
        logprobs: Option<Vec<LogProb>>,
    },
    /// Input transcription failed.
    #[serde(rename = "conversation.item.input_audio_transcription.failed")]
    InputAudioTranscriptionFailed {
        /// The user item that could not be transcribed.
        item_id: String,
        /// Index of its audio content part.
        content_index: u32,
        /// Why transcription failed.
        error: TranscriptionError,
    },
    /// Duet: the voice activity detector's speech probability over a stretch of input
    /// (sent when `include` has `input_audio_buffer.speech_probability`, about every 100 ms).
    #[serde(rename = "input_audio_buffer.speech_probability")]
    InputAudioBufferSpeechProbability {
        /// Start of the stretch on the input clock.
        audio_start_ms: u64,
        /// Its end.
        audio_end_ms: u64,
        /// Highest speech probability in it, 0..=1.
        probability: f32,
        /// `silero` or `energy`.
        detector: &'static str,
    },
    /// The input buffer became a user item.
    #[serde(rename = "input_audio_buffer.committed")]
    InputAudioBufferCommitted {
        /// The item the new one follows, `null` when first.
        previous_item_id: Option<String>,
        /// The user item created from the buffer.
        item_id: String,
    },
    /// The input buffer was cleared.
    #[serde(rename = "input_audio_buffer.cleared")]
    InputAudioBufferCleared {},
    /// A key pressed on a phone call (SIP: RFC 4733 telephone-event, or SIP INFO).
    #[serde(rename = "input_audio_buffer.dtmf_event_received")]
    InputAudioBufferDtmfEventReceived {
        /// The key: `0`–`9`, `*`, `#` or `A`–`D`.
        event: String,
        /// When it arrived, in Unix seconds.
        received_at: u64,
    },
    /// VAD: speech began (ms on the session's input clock, prefix padding included).
    #[serde(rename = "input_audio_buffer.speech_started")]
    InputAudioBufferSpeechStarted {
        /// Milliseconds into the input audio buffer where speech was detected.
        audio_start_ms: u64,
        /// The user item that will be created when speech stops.
        item_id: String,
    },
    /// VAD: speech ended.
    #[serde(rename = "input_audio_buffer.speech_stopped")]
    InputAudioBufferSpeechStopped {
        /// Milliseconds into the input audio buffer where speech ended.
        audio_end_ms: u64,
        /// The user item that will be created.
        item_id: String,
    },
    /// VAD idle timeout.
    #[serde(rename = "input_audio_buffer.timeout_triggered")]
    InputAudioBufferTimeoutTriggered {
        /// Milliseconds into the input audio buffer where the idle wait began.
        audio_start_ms: u64,
        /// Milliseconds into the input audio buffer when the timeout fired.
        audio_end_ms: u64,
        /// The user item committed for this segment.
        item_id: String,
    },
    /// WebRTC: the first frame of a response left.
    #[serde(rename = "output_audio_buffer.started")]
    OutputAudioBufferStarted {
        /// The response whose audio started playing.
        response_id: String,
    },
    /// WebRTC: the last frame of a response left.
    #[serde(rename = "output_audio_buffer.stopped")]
    OutputAudioBufferStopped {
        /// The response whose audio finished playing.
        response_id: String,
    },
    /// WebRTC: queued audio was dropped.
    #[serde(rename = "output_audio_buffer.cleared")]
    OutputAudioBufferCleared {
        /// The response whose queued audio was dropped.
        response_id: String,
    },
    /// A response began.
    #[serde(rename = "response.created")]
    ResponseCreated {
        /// The new response, `in_progress` with no output yet.
        response: Box<Response>,
    },
    /// A response ended (always sent).
    #[serde(rename = "response.done")]
    ResponseDone {
        /// The final response: status, output items and usage.
        response: Box<Response>,
    },
    /// An output item began.
    #[serde(rename = "response.output_item.added")]
    ResponseOutputItemAdded {
        /// The response producing the item.
        response_id: String,
        /// Index of the item in the response output.
        output_index: u32,
        /// The item, with no content yet.
        item: Box<Item>,
    },
    /// An output item ended.
    #[serde(rename = "response.output_item.done")]
    ResponseOutputItemDone {
        /// The response that produced the item.
        response_id: String,
        /// Index of the item in the response output.
        output_index: u32,
        /// The finished item, without audio bytes.
        item: Box<Item>,
    },
    /// A content part began.
    #[serde(rename = "response.content_part.added")]
    ResponseContentPartAdded {
        /// Where the part sits.
        #[serde(flatten)]
        at: ContentRef,
        /// The part, empty so far.
        part: Part,
    },
    /// A content part ended.
    #[serde(rename = "response.content_part.done")]
    ResponseContentPartDone {
        /// Where the part sits.
        #[serde(flatten)]
        at: ContentRef,
        /// The finished part.
        part: Part,
    },
    /// Audio bytes (WebSocket only), base64 in the output format.
    #[serde(rename = "response.output_audio.delta")]
    ResponseOutputAudioDelta {
        /// Where the audio belongs.
        #[serde(flatten)]
        at: ContentRef,
        /// Base64 audio in the session's output format.
        delta: String,
    },
    /// End of the audio (also on cancel).
    #[serde(rename = "response.output_audio.done")]
    ResponseOutputAudioDone {
        /// The audio part that ended.
        #[serde(flatten)]
        at: ContentRef,
    },
    /// Transcript text of the audio.
    #[serde(rename = "response.output_audio_transcript.delta")]
    ResponseOutputAudioTranscriptDelta {
        /// The audio part transcribed.
        #[serde(flatten)]
        at: ContentRef,
        /// Transcript text added since the last delta.
        delta: String,
    },
    /// The whole transcript.
    #[serde(rename = "response.output_audio_transcript.done")]
    ResponseOutputAudioTranscriptDone {
        /// The audio part transcribed.
        #[serde(flatten)]
        at: ContentRef,
        /// The final transcript.
        transcript: String,
    },
    /// Text output.
    #[serde(rename = "response.output_text.delta")]
    ResponseOutputTextDelta {
        /// The text part.
        #[serde(flatten)]
        at: ContentRef,
        /// Text added since the last delta.
        delta: String,
    },
    /// The whole text.
    #[serde(rename = "response.output_text.done")]
    ResponseOutputTextDone {
        /// The text part.
        #[serde(flatten)]
        at: ContentRef,
        /// The final text.
        text: String,
    },
    /// Function call arguments so far.
    #[serde(rename = "response.function_call_arguments.delta")]
    ResponseFunctionCallArgumentsDelta {
        /// The response making the call.
        response_id: String,
        /// The `function_call` item.
        item_id: String,
        /// Index of the item in the response output.
        output_index: u32,
        /// The call's `call_id`.
        call_id: String,
        /// JSON arguments text added since the last delta.
        delta: String,
    },
    /// Function call arguments, complete.
    #[serde(rename = "response.function_call_arguments.done")]
    ResponseFunctionCallArgumentsDone {
        /// The response making the call.
        response_id: String,
        /// The `function_call` item.
        item_id: String,
        /// Index of the item in the response output.
        output_index: u32,
        /// The call's `call_id`.
        call_id: String,
        /// The function's name.
        name: String,
        /// The final arguments as a JSON string.
        arguments: String,
    },
    /// Rate limits.
    #[serde(rename = "rate_limits.updated")]
    RateLimitsUpdated {
        /// The current limits.
        rate_limits: Vec<RateLimit>,
    },
    /// Duplex extension (full-duplex models only): the model took the turn and speaks in
    /// this response. At most once per response, before its first audio delta.
    #[serde(rename = "response.speak")]
    ResponseSpeak {
        /// The audio part the model speaks in.
        #[serde(flatten)]
        at: ContentRef,
        /// Session, epoch and the speak decision.
        metadata: SpeakMetadata,
    },
    /// Duplex extension (full-duplex models only): the model fell silent and listens. Names
    /// the response it ended (after that response's `response.done`), if any.
    #[serde(rename = "response.listen")]
    ResponseListen {
        /// `sess_…`.
        session_id: String,
        /// The session's interruption epoch.
        epoch: u64,
        /// The listening state and why.
        response: ListenResponse,
        /// The response this listen ended (omitted when none).
        #[serde(skip_serializing_if = "Option::is_none")]
        response_id: Option<String>,
    },
    /// Duplex extension: a resume was accepted; the replay follows. Sent outside the journal.
    #[serde(rename = "session.resumed")]
    SessionResumed {
        /// `sess_…`.
        session_id: String,
        /// The session's effective configuration.
        session: Box<SessionConfig>,
        /// The new attachment's generation.
        attachment_generation: u64,
        /// The rotated token (the old one no longer resumes).
        resume_token: String,
    },
    /// Duplex extension: another transport resumed this session; this one is closed. Sent
    /// outside the journal.
    #[serde(rename = "session.replaced")]
    SessionReplaced {
        /// `sess_…`.
        session_id: String,
        /// The generation of the attachment that was replaced.
        attachment_generation: u64,
    },
    /// Duplex extension: the journal cannot replay what the client missed. Sent outside the
    /// journal.
    #[serde(rename = "session.resync_required")]
    SessionResyncRequired {
        /// `sess_…`.
        session_id: String,
        /// `journal_overflow` or `journal_gap`.
        reason: &'static str,
    },
    /// Duplex extension: the session's lease ran out; it is closed.
    #[serde(rename = "session.expired")]
    SessionExpired {
        /// `sess_…`.
        session_id: String,
        /// `disconnect_grace_expired` or `idle_ttl_expired`.
        reason: &'static str,
    },
    /// Duplex extension: the session reaches `--max-session-secs` soon.
    #[serde(rename = "session.expiring")]
    SessionExpiring {
        /// `sess_…`.
        session_id: String,
        /// Unix seconds when the session ends.
        expires_at: u64,
        /// Seconds until then.
        seconds_left: u64,
    },
    /// Duplex extension: answer to `session.heartbeat`.
    #[serde(rename = "session.heartbeat_ack")]
    SessionHeartbeatAck {
        /// `sess_…`.
        session_id: String,
    },
    /// Duplex extension: the session is closed; the last event.
    #[serde(rename = "session.closed")]
    SessionClosed {
        /// `sess_…`.
        session_id: String,
        /// Why (`client_close` for `session.close` without a reason).
        reason: String,
    },
    /// Duplex extension: answer to `playback.ack`.
    #[serde(rename = "playback.acknowledged")]
    PlaybackAcknowledged {
        /// What the ack resolved to.
        event: PlaybackAckResult,
    },
    /// Turn-events extension (`?turn_events=1`): the turn model judged a pause in the
    /// user's speech (`semantic_vad` with a turn model).
    #[serde(rename = "turn.scored")]
    TurnScored {
        /// The user item the speech commits to.
        item_id: String,
        /// Where the pause began, in milliseconds of input audio.
        audio_end_ms: u64,
        /// The probability that the turn is complete (absent when the model failed or
        /// answered too late).
        #[serde(skip_serializing_if = "Option::is_none")]
        probability: Option<f32>,
        /// `end` (the turn ends after `end_after_ms` of silence), `wait` (not confident,
        /// or the words so far end mid-sentence: the turn ends when the voice stops for
        /// `end_after_ms`, the preset's maximum pause) or `fallback` (no score: fixed
        /// silence).
        decision: &'static str,
        /// The silence after which the turn ends unless the voice comes back.
        end_after_ms: u32,
        /// The words heard so far end where a sentence does not ("for", "the", "um", a
        /// comma): they keep a confident score from ending the turn.
        unfinished_words: bool,
    },
    /// Turn-events extension: speech over an answer was judged.
    #[serde(rename = "turn.overlap")]
    TurnOverlap {
        /// `backchannel` (a backchannel or a noise: the answer goes on where it paused) or
        /// `interruption` (the user takes the turn: the answer is cancelled).
        outcome: &'static str,
        /// From the voice's onset to where it was judged: to where the detector ended it
        /// (its silence window included), or to now while it still goes on.
        duration_ms: u64,
        /// What the transcriber heard of it, when it was asked.
        #[serde(skip_serializing_if = "Option::is_none")]
        transcript: Option<String>,
    },
}

/// `event` of `playback.acknowledged`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlaybackAckResult {
    /// `playback.acknowledged`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `sess_…`.
    pub session_id: String,
    /// The session's interruption epoch.
    pub epoch: u64,
    /// The assistant item the ack applied to.
    pub item_id: String,
    /// The response the ack applied to (omitted when the client named only the item).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// Milliseconds of that item's audio the client reports as played.
    pub played_ms: u64,
    /// Milliseconds of the item's audio the conversation keeps.
    pub committed_ms: u64,
    /// Whether the item was truncated to what played.
    pub truncate: bool,
}

/// `metadata` of `response.speak`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpeakMetadata {
    /// `sess_…`.
    pub session_id: String,
    /// The session's interruption epoch.
    pub epoch: u64,
    /// Always true: the model decided to speak.
    pub model_speak: bool,
}

/// `response` of `response.listen`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ListenResponse {
    /// `realtime.response`.
    pub object: &'static str,
    /// `listening`.
    pub status: &'static str,
    /// Why the model listens.
    pub metadata: ListenMetadata,
    /// The response this listen ended (omitted when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// `response.metadata` of `response.listen`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ListenMetadata {
    /// `model_listen`: the model chose to listen.
    pub reason: String,
}

impl ServerEventBody {
    /// `response.listen` with reason `model_listen`, ending `response_id` when given.
    pub fn model_listen(session_id: &str, epoch: u64, response_id: Option<String>) -> Self {
        ServerEventBody::ResponseListen {
            session_id: session_id.to_string(),
            epoch,
            response: ListenResponse {
                object: "realtime.response",
                status: "listening",
                metadata: ListenMetadata {
                    reason: "model_listen".into(),
                },
                id: response_id.clone(),
            },
            response_id,
        }
    }
}

/// `usage` of a completed transcription (duration-based).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TranscriptionUsage {
    /// Seconds of audio transcribed.
    Duration {
        /// Length of the transcribed audio in seconds.
        seconds: f64,
    },
}

/// One token's log probability (`LogProbProperties`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogProb {
    /// The token's text.
    pub token: String,
    /// Natural log of its probability.
    pub logprob: f32,
    /// Its UTF-8 bytes.
    pub bytes: Vec<u8>,
}

/// `error` of a failed transcription.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TranscriptionError {
    /// Error type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Error code.
    pub code: String,
    /// Message.
    pub message: String,
}

impl ServerEventBody {
    /// The `type` string.
    pub fn kind(&self) -> &'static str {
        use ServerEventBody::*;
        match self {
            Error { .. } => "error",
            SessionCreated { .. } => "session.created",
            SessionUpdated { .. } => "session.updated",
            ConversationItemAdded { .. } => "conversation.item.added",
            ConversationItemDone { .. } => "conversation.item.done",
            ConversationItemRetrieved { .. } => "conversation.item.retrieved",
            ConversationItemTruncated { .. } => "conversation.item.truncated",
            ConversationItemDeleted { .. } => "conversation.item.deleted",
            InputAudioTranscriptionDelta { .. } => {
                "conversation.item.input_audio_transcription.delta"
            }
            InputAudioTranscriptionCompleted { .. } => {
                "conversation.item.input_audio_transcription.completed"
            }
            InputAudioBufferSpeechProbability { .. } => "input_audio_buffer.speech_probability",
            InputAudioTranscriptionFailed { .. } => {
                "conversation.item.input_audio_transcription.failed"
            }
            InputAudioBufferCommitted { .. } => "input_audio_buffer.committed",
            InputAudioBufferCleared {} => "input_audio_buffer.cleared",
            InputAudioBufferDtmfEventReceived { .. } => "input_audio_buffer.dtmf_event_received",
            InputAudioBufferSpeechStarted { .. } => "input_audio_buffer.speech_started",
            InputAudioBufferSpeechStopped { .. } => "input_audio_buffer.speech_stopped",
            InputAudioBufferTimeoutTriggered { .. } => "input_audio_buffer.timeout_triggered",
            OutputAudioBufferStarted { .. } => "output_audio_buffer.started",
            OutputAudioBufferStopped { .. } => "output_audio_buffer.stopped",
            OutputAudioBufferCleared { .. } => "output_audio_buffer.cleared",
            ResponseCreated { .. } => "response.created",
            ResponseDone { .. } => "response.done",
            ResponseOutputItemAdded { .. } => "response.output_item.added",
            ResponseOutputItemDone { .. } => "response.output_item.done",
            ResponseContentPartAdded { .. } => "response.content_part.added",
            ResponseContentPartDone { .. } => "response.content_part.done",
            ResponseOutputAudioDelta { .. } => "response.output_audio.delta",
            ResponseOutputAudioDone { .. } => "response.output_audio.done",
            ResponseOutputAudioTranscriptDelta { .. } => "response.output_audio_transcript.delta",
            ResponseOutputAudioTranscriptDone { .. } => "response.output_audio_transcript.done",
            ResponseOutputTextDelta { .. } => "response.output_text.delta",
            ResponseOutputTextDone { .. } => "response.output_text.done",
            ResponseFunctionCallArgumentsDelta { .. } => "response.function_call_arguments.delta",
            ResponseFunctionCallArgumentsDone { .. } => "response.function_call_arguments.done",
            RateLimitsUpdated { .. } => "rate_limits.updated",
            ResponseSpeak { .. } => "response.speak",
            ResponseListen { .. } => "response.listen",
            SessionResumed { .. } => "session.resumed",
            SessionReplaced { .. } => "session.replaced",
            SessionResyncRequired { .. } => "session.resync_required",
            SessionExpired { .. } => "session.expired",
            SessionExpiring { .. } => "session.expiring",
            SessionHeartbeatAck { .. } => "session.heartbeat_ack",
            SessionClosed { .. } => "session.closed",
            PlaybackAcknowledged { .. } => "playback.acknowledged",
            TurnScored { .. } => "turn.scored",
            TurnOverlap { .. } => "turn.overlap",
        }
    }
}
