//! The `error` payload and the stable error codes Duet sends.

use serde::Serialize;

/// `error.type` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorType {
    /// The client sent something wrong; the session continues.
    InvalidRequestError,
    /// Something failed on our side.
    ServerError,
}

/// The object inside an `error` event (and inside HTTP error bodies).
///
/// `code`, `param` and `event_id` are nullable in the GA types and always rendered.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ErrorPayload {
    /// `invalid_request_error` or `server_error`.
    #[serde(rename = "type")]
    pub kind: ErrorType,
    /// Stable snake_case code (see [`codes`]).
    pub code: Option<String>,
    /// Human-readable explanation.
    pub message: String,
    /// The offending parameter path, e.g. `session.audio.input.format`.
    pub param: Option<String>,
    /// The client's `event_id` of the event that caused the error.
    pub event_id: Option<String>,
}

impl ErrorPayload {
    /// An `invalid_request_error` with `code` and `message`.
    pub fn invalid(code: &str, message: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::InvalidRequestError,
            code: Some(code.to_string()),
            message: message.into(),
            param: None,
            event_id: None,
        }
    }

    /// A `server_error` with `code` and `message`.
    pub fn server(code: &str, message: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::ServerError,
            ..Self::invalid(code, message)
        }
    }

    /// Sets `param`.
    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    /// Sets `event_id` (the client's event id).
    pub fn with_event_id(mut self, event_id: Option<String>) -> Self {
        self.event_id = event_id;
        self
    }
}

/// Every error code Duet emits. `docs/api.md` lists them with their meaning.
pub mod codes {
    /// The message was not valid JSON, or not a JSON object.
    pub const INVALID_JSON: &str = "invalid_json";
    /// `type` names no client event Duet knows.
    pub const UNKNOWN_EVENT_TYPE: &str = "unknown_event_type";
    /// A required field is missing.
    pub const MISSING_REQUIRED_PARAMETER: &str = "missing_required_parameter";
    /// A field Duet does not know (e.g. a beta-only session field).
    pub const UNKNOWN_PARAMETER: &str = "unknown_parameter";
    /// A field has the wrong type or an out-of-range value.
    pub const INVALID_VALUE: &str = "invalid_value";
    /// The event is larger than the 15 MiB limit.
    pub const EVENT_TOO_LARGE: &str = "event_too_large";
    /// Audio that cannot be decoded (bad base64, odd PCM byte count).
    pub const INVALID_AUDIO: &str = "invalid_audio";
    /// OpenAI's code: commit of less than 100 ms of audio.
    pub const INPUT_AUDIO_BUFFER_COMMIT_EMPTY: &str = "input_audio_buffer_commit_empty";
    /// The uncommitted input buffer would exceed its limit.
    pub const INPUT_AUDIO_BUFFER_FULL: &str = "input_audio_buffer_full";
    /// An `item_id` that the conversation does not hold, where OpenAI has no code of its own
    /// (`response.input` item references, `playback.ack`). The three item events use OpenAI's
    /// codes below (they replaced this one there).
    pub const ITEM_NOT_FOUND: &str = "item_not_found";
    /// OpenAI's code: `conversation.item.retrieve` of an id the conversation does not hold.
    pub const ITEM_RETRIEVE_INVALID_ITEM_ID: &str = "item_retrieve_invalid_item_id";
    /// OpenAI's code: `conversation.item.delete` of an id the conversation does not hold.
    pub const ITEM_DELETE_INVALID_ITEM_ID: &str = "item_delete_invalid_item_id";
    /// OpenAI's code: `conversation.item.truncate` of an id the conversation does not hold.
    pub const ITEM_TRUNCATE_INVALID_ITEM_ID: &str = "item_truncate_invalid_item_id";
    /// `previous_item_id` names no item in the conversation.
    pub const PREVIOUS_ITEM_NOT_FOUND: &str = "previous_item_not_found";
    /// OpenAI's code: a response is already writing to the conversation.
    pub const CONVERSATION_ALREADY_HAS_ACTIVE_RESPONSE: &str =
        "conversation_already_has_active_response";
    /// The model is already producing a response (an out-of-band one included).
    pub const RESPONSE_ALREADY_ACTIVE: &str = "response_already_active";
    /// OpenAI's code: `response.cancel` with nothing to cancel.
    pub const RESPONSE_CANCEL_NOT_ACTIVE: &str = "response_cancel_not_active";
    /// The event does not apply to this transport (e.g. `output_audio_buffer.clear` on WebSocket).
    pub const INVALID_EVENT_FOR_TRANSPORT: &str = "invalid_event_for_transport";
    /// A feature the session or the model does not support.
    pub const UNSUPPORTED: &str = "unsupported";
    /// The session's mailbox is full: the client sends faster than the session can process.
    pub const SESSION_OVERLOADED: &str = "session_overloaded";
    /// The model failed; the response ends as `failed`.
    pub const MODEL_ERROR: &str = "model_error";
    /// The session reached its maximum lifetime.
    pub const SESSION_EXPIRED: &str = "session_expired";
    /// A `conversation.item.create` whose audio is longer than one item may hold (or than
    /// the whole conversation may store).
    pub const ITEM_AUDIO_TOO_LONG: &str = "item_audio_too_long";
    /// A `conversation.item.create` with more text than the whole conversation keeps
    /// (`--max-conversation-text-mib`).
    pub const ITEM_TEXT_TOO_LONG: &str = "item_text_too_long";
    /// An event the transport cannot carry (larger than the session's outbound budget, or
    /// than the peer's data-channel `max-message-size`) was replaced by this error.
    pub const EVENT_TOO_LARGE_FOR_TRANSPORT: &str = "event_too_large_for_transport";
    /// The client left more than the outbound budget of events unread; the session closes.
    pub const EVENT_QUEUE_FULL: &str = "event_queue_full";
    /// No client event and no audio for `--session-idle-secs`; the session closes.
    pub const SESSION_IDLE: &str = "session_idle";
    /// The server is shutting down: the session closes at the drain deadline.
    pub const SERVER_DRAINING: &str = "server_draining";
    /// Input transcription is not available with this model.
    pub const TRANSCRIPTION_UNAVAILABLE: &str = "transcription_unavailable";
    /// The transcriber could not transcribe this item (the message says why).
    pub const TRANSCRIPTION_FAILED: &str = "transcription_failed";
    /// The event does not apply to this session type (e.g. `response.create` in a
    /// transcription session).
    pub const INVALID_EVENT_FOR_SESSION: &str = "invalid_event_for_session";
    /// Duplex extension: `session.resume` is malformed, or not the first message.
    pub const INVALID_SESSION_RESUME: &str = "invalid_session_resume";
    /// Duplex extension: `session.resume` mid-session.
    pub const UNSUPPORTED_SESSION_RESUME: &str = "unsupported_session_resume";
    /// Duplex extension: the resume token does not match the session's.
    pub const INVALID_RESUME_TOKEN: &str = "invalid_resume_token";
    /// Duplex extension: no such session to resume (unknown, closed or expired).
    pub const SESSION_RESUME_EXPIRED: &str = "session_resume_expired";
    /// Duplex extension: `last_received_server_event_seq` is ahead of the journal's head.
    pub const SESSION_RESUME_CONFLICT: &str = "session_resume_conflict";
    /// Duplex extension: `session.event_ack` of a seq above the head, or negative.
    pub const INVALID_EVENT_ACK: &str = "invalid_event_ack";
    /// Duplex extension: a resume socket's first message did not come in time.
    pub const CONFIG_TIMEOUT: &str = "config_timeout";
    /// The server's memory budget (`--memory-budget-mib`) is spent: the request that would
    /// pass it was refused; the session goes on.
    pub const SERVER_MEMORY_EXHAUSTED: &str = "server_memory_exhausted";
    /// `tools` were given to a model that cannot call them (`--model echo`, `moshi`).
    pub const TOOLS_UNSUPPORTED: &str = "tools_unsupported";
}
