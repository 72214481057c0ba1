//! The response object of `response.created` / `response.done`, and `response.create` parameters.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::items::Item;
use super::session::{AudioFormat, Modality};

/// `status` of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseStatus {
    /// Running.
    InProgress,
    /// Finished normally.
    Completed,
    /// Cancelled by the client or by a detected turn.
    Cancelled,
    /// Cut short (e.g. `max_output_tokens`).
    Incomplete,
    /// Failed (model error).
    Failed,
}

/// `status_details` of a finished response.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusDetails {
    /// Same as the response status (`cancelled`, `incomplete`, `failed`, `completed`).
    #[serde(rename = "type")]
    pub kind: ResponseStatus,
    /// `client_cancelled`, `turn_detected`, `max_output_tokens`…
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For `failed`: `{type, code}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<StatusError>,
}

/// Error inside `status_details`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusError {
    /// Error type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Error code.
    pub code: String,
}

/// Token accounting: 1 audio token per 20 ms of audio, 1 text token per word.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Usage {
    /// input + output.
    pub total_tokens: u64,
    /// Tokens the model read.
    pub input_tokens: u64,
    /// Tokens the model produced.
    pub output_tokens: u64,
    /// Input breakdown.
    pub input_token_details: InputTokenDetails,
    /// Output breakdown.
    pub output_token_details: OutputTokenDetails,
}

/// Input token breakdown.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InputTokenDetails {
    /// Text tokens.
    pub text_tokens: u64,
    /// Audio tokens.
    pub audio_tokens: u64,
    /// Image tokens (always 0).
    pub image_tokens: u64,
    /// Cached tokens (always 0).
    pub cached_tokens: u64,
    /// Cached breakdown.
    pub cached_tokens_details: CachedTokenDetails,
}

/// Cached token breakdown (always zero in Duet).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CachedTokenDetails {
    /// Text.
    pub text_tokens: u64,
    /// Audio.
    pub audio_tokens: u64,
    /// Image.
    pub image_tokens: u64,
}

/// Output token breakdown.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OutputTokenDetails {
    /// Text tokens.
    pub text_tokens: u64,
    /// Audio tokens.
    pub audio_tokens: u64,
}

impl Usage {
    /// Builds usage from the four counts.
    pub fn new(in_text: u64, in_audio: u64, out_text: u64, out_audio: u64) -> Self {
        let input = in_text + in_audio;
        let output = out_text + out_audio;
        Self {
            total_tokens: input + output,
            input_tokens: input,
            output_tokens: output,
            input_token_details: InputTokenDetails {
                text_tokens: in_text,
                audio_tokens: in_audio,
                ..Default::default()
            },
            output_token_details: OutputTokenDetails {
                text_tokens: out_text,
                audio_tokens: out_audio,
            },
        }
    }
}

/// `audio.output` of a response.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResponseAudioOutput {
    /// Output format.
    pub format: AudioFormat,
    /// Voice.
    pub voice: Value,
}

/// `audio` of a response.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResponseAudio {
    /// Output side.
    pub output: ResponseAudioOutput,
}

/// The `response` object.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Response {
    /// `resp_…`.
    pub id: String,
    /// `realtime.response`.
    pub object: &'static str,
    /// Lifecycle status.
    pub status: ResponseStatus,
    /// Why it ended; `null` while in progress.
    pub status_details: Option<StatusDetails>,
    /// Output items (without audio bytes).
    pub output: Vec<Item>,
    /// `conv_…`, or `null` for an out-of-band response.
    pub conversation_id: Option<String>,
    /// `["audio"]` or `["text"]`.
    pub output_modalities: Vec<Modality>,
    /// Effective limit.
    pub max_output_tokens: Value,
    /// Effective audio output.
    pub audio: ResponseAudio,
    /// Client metadata, omitted when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Token usage; `null` while in progress.
    pub usage: Option<Usage>,
}

/// `response.create.response`: per-response overrides.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseParams {
    /// `auto` (default conversation) or `none` (out of band).
    pub conversation: Option<String>,
    /// Explicit input items (or `{type:"item_reference", id}`) instead of the conversation.
    pub input: Option<Vec<Value>>,
    /// Instructions for this response.
    pub instructions: Option<String>,
    /// `["audio"]` or `["text"]`.
    pub output_modalities: Option<Vec<Modality>>,
    /// Audio output overrides.
    pub audio: Option<ResponseAudioParams>,
    /// Tools for this response.
    pub tools: Option<Vec<Value>>,
    /// Tool choice for this response.
    pub tool_choice: Option<Value>,
    /// 1..=4096 or `"inf"`.
    pub max_output_tokens: Option<Value>,
    /// Up to 16 string pairs, echoed in the response.
    pub metadata: Option<Value>,
    /// Prompt reference (accepted, ignored).
    pub prompt: Option<Value>,
    /// Accepted, ignored.
    pub reasoning: Option<Value>,
    /// Accepted, ignored.
    pub parallel_tool_calls: Option<bool>,
}

/// `response.create.response.audio`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseAudioParams {
    /// Output overrides.
    pub output: Option<ResponseAudioOutputParams>,
}

/// `response.create.response.audio.output`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseAudioOutputParams {
    /// Format for this response.
    pub format: Option<AudioFormat>,
    /// Voice for this response.
    pub voice: Option<Value>,
}
