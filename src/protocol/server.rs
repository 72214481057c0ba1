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
    Error { error: ErrorPayload },
    /// First event on every connection.
    #[serde(rename = "session.created")]
    SessionCreated { session: Box<SessionConfig> },
    /// The full effective session after an update.
    #[serde(rename = "session.updated")]
    SessionUpdated { session: Box<SessionConfig> },
    /// Item inserted.
    #[serde(rename = "conversation.item.added")]
    ConversationItemAdded {
        previous_item_id: Option<String>,
        item: Box<Item>,
    },
    /// Item finalised.
    #[serde(rename = "conversation.item.done")]
    ConversationItemDone {
        previous_item_id: Option<String>,
        item: Box<Item>,
    },
    /// Reply to `conversation.item.retrieve`, audio included.
    #[serde(rename = "conversation.item.retrieved")]
    ConversationItemRetrieved { item: Box<Item> },
    /// Reply to truncate (or a server truncation after an interruption).
    #[serde(rename = "conversation.item.truncated")]
    ConversationItemTruncated {
        item_id: String,
        content_index: u32,
        audio_end_ms: u64,
    },
    /// Item removed.
    #[serde(rename = "conversation.item.deleted")]
    ConversationItemDeleted { item_id: String },
    /// Input transcription text so far.
    #[serde(rename = "conversation.item.input_audio_transcription.delta")]
    InputAudioTranscriptionDelta {
        item_id: String,
        content_index: u32,
        delta: String,
    },
    /// Input transcription finished.
    #[serde(rename = "conversation.item.input_audio_transcription.completed")]
    InputAudioTranscriptionCompleted {
        item_id: String,
        content_index: u32,
        transcript: String,
        usage: TranscriptionUsage,
    },
    /// Input transcription failed.
    #[serde(rename = "conversation.item.input_audio_transcription.failed")]
    InputAudioTranscriptionFailed {
        item_id: String,
        content_index: u32,
        error: TranscriptionError,
    },
    /// The input buffer became a user item.
    #[serde(rename = "input_audio_buffer.committed")]
    InputAudioBufferCommitted {
        previous_item_id: Option<String>,
        item_id: String,
    },
    /// The input buffer was cleared.
    #[serde(rename = "input_audio_buffer.cleared")]
    InputAudioBufferCleared {},
    /// VAD: speech began (ms on the session's input clock, prefix padding included).
    #[serde(rename = "input_audio_buffer.speech_started")]
    InputAudioBufferSpeechStarted {
        audio_start_ms: u64,
        item_id: String,
    },
    /// VAD: speech ended.
    #[serde(rename = "input_audio_buffer.speech_stopped")]
    InputAudioBufferSpeechStopped { audio_end_ms: u64, item_id: String },
    /// VAD idle timeout.
    #[serde(rename = "input_audio_buffer.timeout_triggered")]
    InputAudioBufferTimeoutTriggered {
        audio_start_ms: u64,
        audio_end_ms: u64,
        item_id: String,
    },
    /// WebRTC: the first frame of a response left.
    #[serde(rename = "output_audio_buffer.started")]
    OutputAudioBufferStarted { response_id: String },
    /// WebRTC: the last frame of a response left.
    #[serde(rename = "output_audio_buffer.stopped")]
    OutputAudioBufferStopped { response_id: String },
    /// WebRTC: queued audio was dropped.
    #[serde(rename = "output_audio_buffer.cleared")]
    OutputAudioBufferCleared { response_id: String },
    /// A response began.
    #[serde(rename = "response.created")]
    ResponseCreated { response: Box<Response> },
    /// A response ended (always sent).
    #[serde(rename = "response.done")]
    ResponseDone { response: Box<Response> },
    /// An output item began.
    #[serde(rename = "response.output_item.added")]
    ResponseOutputItemAdded {
        response_id: String,
        output_index: u32,
        item: Box<Item>,
    },
    /// An output item ended.
    #[serde(rename = "response.output_item.done")]
    ResponseOutputItemDone {
        response_id: String,
        output_index: u32,
        item: Box<Item>,
    },
    /// A content part began.
    #[serde(rename = "response.content_part.added")]
    ResponseContentPartAdded {
        #[serde(flatten)]
        at: ContentRef,
        part: Part,
    },
    /// A content part ended.
    #[serde(rename = "response.content_part.done")]
    ResponseContentPartDone {
        #[serde(flatten)]
        at: ContentRef,
        part: Part,
    },
    /// Audio bytes (WebSocket only), base64 in the output format.
    #[serde(rename = "response.output_audio.delta")]
    ResponseOutputAudioDelta {
        #[serde(flatten)]
        at: ContentRef,
        delta: String,
    },
    /// End of the audio (also on cancel).
    #[serde(rename = "response.output_audio.done")]
    ResponseOutputAudioDone {
        #[serde(flatten)]
        at: ContentRef,
    },
    /// Transcript text of the audio.
    #[serde(rename = "response.output_audio_transcript.delta")]
    ResponseOutputAudioTranscriptDelta {
        #[serde(flatten)]
        at: ContentRef,
        delta: String,
    },
    /// The whole transcript.
    #[serde(rename = "response.output_audio_transcript.done")]
    ResponseOutputAudioTranscriptDone {
        #[serde(flatten)]
        at: ContentRef,
        transcript: String,
    },
    /// Text output.
    #[serde(rename = "response.output_text.delta")]
    ResponseOutputTextDelta {
        #[serde(flatten)]
        at: ContentRef,
        delta: String,
    },
    /// The whole text.
    #[serde(rename = "response.output_text.done")]
    ResponseOutputTextDone {
        #[serde(flatten)]
        at: ContentRef,
        text: String,
    },
    /// Function call arguments so far.
    #[serde(rename = "response.function_call_arguments.delta")]
    ResponseFunctionCallArgumentsDelta {
        response_id: String,
        item_id: String,
        output_index: u32,
        call_id: String,
        delta: String,
    },
    /// Function call arguments, complete.
    #[serde(rename = "response.function_call_arguments.done")]
    ResponseFunctionCallArgumentsDone {
        response_id: String,
        item_id: String,
        output_index: u32,
        call_id: String,
        name: String,
        arguments: String,
    },
    /// Rate limits.
    #[serde(rename = "rate_limits.updated")]
    RateLimitsUpdated { rate_limits: Vec<RateLimit> },
    /// Duplex extension (full-duplex models only): the model took the turn and speaks in
    /// this response. At most once per response, before its first audio delta.
    #[serde(rename = "response.speak")]
    ResponseSpeak {
        #[serde(flatten)]
        at: ContentRef,
        metadata: SpeakMetadata,
    },
    /// Duplex extension (full-duplex models only): the model fell silent and listens. Names
    /// the response it ended (after that response's `response.done`), if any.
    #[serde(rename = "response.listen")]
    ResponseListen {
        session_id: String,
        epoch: u64,
        response: ListenResponse,
        #[serde(skip_serializing_if = "Option::is_none")]
        response_id: Option<String>,
    },
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
    Duration { seconds: f64 },
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
            InputAudioTranscriptionFailed { .. } => {
                "conversation.item.input_audio_transcription.failed"
            }
            InputAudioBufferCommitted { .. } => "input_audio_buffer.committed",
            InputAudioBufferCleared {} => "input_audio_buffer.cleared",
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
        }
    }
}
