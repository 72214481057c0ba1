//! The OpenAI chat-completions wire, typed: the request ([`ChatCompletionRequest`]), a
//! streamed answer's chunks ([`ChatCompletionChunk`]) and a whole one ([`ChatCompletion`]),
//! their [`ChatUsage`], and the error a stream ends with ([`ChatErrorEvent`]). Duet speaks it
//! both ways: the cascade asks an upstream LLM with it and reads its chunks, and
//! `/v1/chat/completions` answers with it from the embedded LLM. Reading is lenient, as
//! upstream servers differ (unknown fields are ignored, most fields may be absent); writing
//! gives OpenAI's shapes. The streams themselves are server-sent events ([`crate::sse`]).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Who a message is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatRole {
    /// Instructions.
    System,
    /// Instructions (OpenAI's newer name for them).
    Developer,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
    /// A function's result (the legacy name of `tool`).
    Function,
}

/// One message of the conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who it is from.
    pub role: ChatRole,
    /// What it says (`null` for an assistant message that only calls tools).
    #[serde(default)]
    pub content: Option<MessageContent>,
    /// The tools an assistant message calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ChatToolCall>,
    /// The call a `tool` message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// A participant's or function's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    /// A message of `role` saying `text`.
    pub fn text(role: ChatRole, text: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(MessageContent::Text(text.into())),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    /// Its text: the content, or its text parts joined (empty when it has none).
    pub fn content_text(&self) -> String {
        match &self.content {
            Some(MessageContent::Text(t)) => t.clone(),
            Some(MessageContent::Parts(parts)) => {
                parts.iter().filter_map(|p| p.text.as_deref()).collect()
            }
            None => String::new(),
        }
    }
}

/// A message's content: a string, or parts (of which Duet reads the text ones).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Content parts.
    Parts(Vec<ContentPart>),
}

/// One content part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContentPart {
    /// `text`, `image_url`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// A text part's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A tool call in an assistant message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatToolCall {
    /// The call's id (a `tool` message answers it).
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type", default = "function")]
    pub kind: String,
    /// The function and its arguments.
    pub function: FunctionCall,
}

/// A called function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// Its name.
    pub name: String,
    /// Its arguments as JSON text (an object given instead is read as its text).
    #[serde(deserialize_with = "json_text")]
    pub arguments: String,
}

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatTool {
    /// Always `function`.
    #[serde(rename = "type", default = "function")]
    pub kind: String,
    /// The function.
    pub function: FunctionDef,
}

/// A function offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionDef {
    /// Its name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Its parameters' JSON schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// Whether and which tool the model must call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ChatToolChoice {
    /// `auto`, `none` or `required`.
    Mode(ToolChoiceMode),
    /// `{"type": "function", "function": {"name": …}}`.
    Named(NamedToolChoice),
}

/// The tool choices that name no function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoiceMode {
    /// The model decides.
    Auto,
    /// No tool.
    None,
    /// Some tool.
    Required,
}

/// A tool choice naming the function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamedToolChoice {
    /// Always `function`.
    #[serde(rename = "type", default = "function")]
    pub kind: String,
    /// The function.
    pub function: FunctionName,
}

/// A function's name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionName {
    /// The name.
    pub name: String,
}

/// `stream_options`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Whether a last chunk carries the usage.
    #[serde(default)]
    pub include_usage: bool,
}

/// `POST /chat/completions`: what is asked. Fields Duet does not use are ignored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionRequest {
    /// The model (Duet's answers name the model that answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Whether the answer streams as chunks.
    #[serde(default)]
    pub stream: bool,
    /// Options of a streamed answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Longest answer in tokens (the older name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Longest answer in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u64>,
    /// Sampling temperature, 0 to 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ChatTool>,
    /// Whether and which tool it must call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ChatToolChoice>,
}

/// Token counts of an answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatUsage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Answer tokens.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Both.
    #[serde(default)]
    pub total_tokens: u64,
    /// Of the prompt tokens, those taken from a cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
}

impl ChatUsage {
    /// The usage of `prompt` and `completion` tokens, `cached` of the prompt's from a cache.
    pub fn new(prompt: u64, completion: u64, cached: u64) -> Self {
        Self {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            prompt_tokens_details: Some(PromptTokensDetails {
                cached_tokens: cached,
            }),
        }
    }
}

/// `usage.prompt_tokens_details`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens from a cache.
    #[serde(default)]
    pub cached_tokens: u64,
}

/// A whole answer (`"object": "chat.completion"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletion {
    /// `chatcmpl-…`.
    pub id: String,
    /// `chat.completion`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// The model that answered.
    pub model: String,
    /// The answer (one).
    pub choices: Vec<CompletionChoice>,
    /// Its token counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ChatUsage>,
}

/// One answer of a [`ChatCompletion`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompletionChoice {
    /// Its index.
    pub index: u32,
    /// The assistant message.
    pub message: ChatMessage,
    /// Always `null` here.
    #[serde(default)]
    pub logprobs: Option<Value>,
    /// `stop`, `length` or `tool_calls`.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// One piece of a streamed answer (`"object": "chat.completion.chunk"`), or, as a server
/// streams it, an `error` instead.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionChunk {
    /// `chatcmpl-…`, the same in every chunk of an answer.
    #[serde(default)]
    pub id: String,
    /// `chat.completion.chunk`.
    #[serde(default)]
    pub object: String,
    /// Unix seconds.
    #[serde(default)]
    pub created: u64,
    /// The model that answers.
    #[serde(default)]
    pub model: String,
    /// The pieces (none in a usage-only chunk).
    #[serde(default)]
    pub choices: Vec<ChunkChoice>,
    /// The token counts (the last chunk, when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ChatUsage>,
    /// An error the stream ends with (read only: Duet writes [`ChatErrorEvent`]).
    #[serde(default, skip_serializing)]
    pub error: Option<ChatError>,
}

/// One choice's piece in a chunk.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChunkChoice {
    /// Its index.
    #[serde(default)]
    pub index: u32,
    /// What it adds.
    #[serde(default)]
    pub delta: ChunkDelta,
    /// Always `null` here.
    #[serde(default)]
    pub logprobs: Option<Value>,
    /// Set in the choice's last chunk.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// What a chunk adds to the answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChunkDelta {
    /// `assistant`, in the first chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<ChatRole>,
    /// Words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Pieces of tool calls.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub tool_calls: Vec<ToolCallChunk>,
}

/// A piece of a tool call: the first names the call, later ones (by `index`) add arguments.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCallChunk {
    /// Which call of the answer (absent: the next one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    /// The call's id, in its first piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `function`, in its first piece.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The function's name and a piece of its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<FunctionChunk>,
}

/// A piece of a called function.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionChunk {
    /// Its name, in the first piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A piece of its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

/// The event a stream ends with when the answer failed: `{"error": {…}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatErrorEvent {
    /// The error.
    pub error: ChatError,
}

/// An error in OpenAI's shape.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatError {
    /// What went wrong.
    #[serde(default)]
    pub message: Option<String>,
    /// `server_error`, `invalid_request_error`, …
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The error's code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<Value>,
}

fn function() -> String {
    "function".into()
}

/// A string, or any other JSON value as its text (`"arguments": {"a": 1}`).
fn json_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => s,
        Value::Null => String::new(),
        v => v.to_string(),
    })
}

/// A list, `null` read as empty.
fn null_as_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
#[path = "chat_tests.rs"]
mod tests;
