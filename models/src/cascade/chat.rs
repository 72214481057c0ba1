//! The OpenAI chat-completions wire for the cascade's LLM (its types are
//! `duet_protocol::chat`): the conversation as `messages`, the tools as `tools`, and the
//! streamed chunks back as text and tool-call pieces. The HTTP is the server's.

use duet_protocol::chat::{
    ChatCompletionChunk, ChatCompletionRequest, ChatMessage, ChatRole, ChatTool, ChatToolCall,
    ChatToolChoice, FunctionCall, FunctionDef, FunctionName, NamedToolChoice, ToolCallChunk,
    ToolChoiceMode,
};
use serde_json::{json, Value};

use super::LlmEvent;
use crate::{AnswerFailure, ContextItem, Tool, ToolCallDelta, ToolChoice};

/// What the cascade asks its LLM.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Functions the model may call.
    pub tools: Vec<Tool>,
    /// Whether it must call one.
    pub tool_choice: ToolChoice,
    /// Longest answer, in tokens (the LLM's default when unset).
    pub max_tokens: Option<u32>,
    /// Sampling temperature (the LLM's default when unset).
    pub temperature: Option<f32>,
}

impl ChatRequest {
    /// The request for an answer with `instructions` (the system prompt) to `items`.
    pub fn new(
        instructions: &str,
        items: &[ContextItem],
        tools: Vec<Tool>,
        tool_choice: ToolChoice,
    ) -> Self {
        Self {
            messages: messages(instructions, items),
            tools,
            tool_choice,
            max_tokens: None,
            temperature: None,
        }
    }

    /// The request of `POST /chat/completions` for `model`, streaming or not.
    pub fn wire(&self, model: &str, stream: bool) -> ChatCompletionRequest {
        let offer = !self.tools.is_empty();
        ChatCompletionRequest {
            model: Some(model.to_string()),
            messages: self.messages.clone(),
            stream,
            max_tokens: self.max_tokens.map(u64::from),
            temperature: self.temperature.map(f64::from),
            tools: self.tools.iter().map(tool_wire).collect(),
            tool_choice: offer.then(|| tool_choice_wire(&self.tool_choice)),
            ..ChatCompletionRequest::default()
        }
    }

    /// [`ChatRequest::wire`] as JSON.
    pub fn body(&self, model: &str, stream: bool) -> Value {
        serde_json::to_value(self.wire(model, stream)).unwrap_or(Value::Null)
    }
}

fn tool_wire(t: &Tool) -> ChatTool {
    let parameters: Value =
        serde_json::from_str(&t.parameters).unwrap_or_else(|_| json!({"type": "object"}));
    ChatTool {
        kind: "function".into(),
        function: FunctionDef {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: Some(parameters),
        },
    }
}

fn tool_choice_wire(c: &ToolChoice) -> ChatToolChoice {
    match c {
        ToolChoice::Auto => ChatToolChoice::Mode(ToolChoiceMode::Auto),
        ToolChoice::None => ChatToolChoice::Mode(ToolChoiceMode::None),
        ToolChoice::Required => ChatToolChoice::Mode(ToolChoiceMode::Required),
        ToolChoice::Function(name) => ChatToolChoice::Named(NamedToolChoice {
            kind: "function".into(),
            function: FunctionName { name: name.clone() },
        }),
    }
}

/// The conversation as chat `messages`: the instructions first (as the system message),
/// user turns as their words (audio nobody transcribed has none and is left out), the
/// assistant's calls as `tool_calls` of an assistant message, their results as `tool`
/// messages.
pub fn messages(instructions: &str, items: &[ContextItem]) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    if !instructions.trim().is_empty() {
        out.push(ChatMessage::text(ChatRole::System, instructions));
    }
    for item in items {
        match item {
            ContextItem::System(text) => out.push(ChatMessage::text(ChatRole::System, text)),
            ContextItem::User(turn) => match turn.text() {
                Some(text) if !text.trim().is_empty() => {
                    out.push(ChatMessage::text(ChatRole::User, text))
                }
                _ => {}
            },
            ContextItem::Assistant(text) => out.push(ChatMessage::text(ChatRole::Assistant, text)),
            ContextItem::ToolCall(call) => {
                let call = ChatToolCall {
                    id: call.call_id.clone(),
                    kind: "function".into(),
                    function: FunctionCall {
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                    },
                };
                match out.last_mut() {
                    Some(m) if m.role == ChatRole::Assistant => m.tool_calls.push(call),
                    _ => out.push(ChatMessage {
                        content: None,
                        tool_calls: vec![call],
                        ..ChatMessage::text(ChatRole::Assistant, "")
                    }),
                }
            }
            ContextItem::ToolResult { call_id, output } => out.push(ChatMessage {
                tool_call_id: Some(call_id.clone()),
                ..ChatMessage::text(ChatRole::Tool, output)
            }),
        }
    }
    out
}

/// Reads a streamed chat-completions response: each SSE `data` in, the answer's pieces out.
/// Tool-call pieces name their call by index after the first; this keeps their ids.
#[derive(Debug, Default)]
pub struct ChunkReader {
    call_ids: Vec<String>,
    done: bool,
}

impl ChunkReader {
    /// A reader at the start of a response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the answer ended (`[DONE]`, a finish reason, or an error).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// One event's `data`: pushes what it carries onto `out`.
    pub fn read(&mut self, data: &str, out: &mut Vec<LlmEvent>) {
        if self.done {
            return;
        }
        if data.trim() == "[DONE]" {
            self.done = true;
            out.push(LlmEvent::Done);
            return;
        }
        let chunk: ChatCompletionChunk = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                return self.fail(
                    out,
                    format!("the LLM sent a chunk that is not a chat completion chunk: {e}"),
                )
            }
        };
        if let Some(err) = chunk.error {
            let message = err.message.as_deref().unwrap_or("an error with no message");
            return self.fail(out, format!("the LLM failed mid-answer: {message}"));
        }
        let Some(choice) = chunk.choices.into_iter().next() else {
            return; // usage-only or keep-alive chunks
        };
        if let Some(text) = choice.delta.content.filter(|t| !t.is_empty()) {
            out.push(LlmEvent::Text(text));
        }
        for call in choice.delta.tool_calls {
            self.read_call(call, out);
        }
        if choice.finish_reason.is_some() {
            self.done = true;
            out.push(LlmEvent::Done);
        }
    }

    fn read_call(&mut self, call: ToolCallChunk, out: &mut Vec<LlmEvent>) {
        let index = call.index.unwrap_or(self.call_ids.len() as u64) as usize;
        if index > self.call_ids.len() + 64 {
            return; // an index no real stream sends; refuse to grow for it
        }
        while self.call_ids.len() <= index {
            self.call_ids.push(String::new());
        }
        if let Some(id) = call.id.filter(|s| !s.is_empty()) {
            self.call_ids[index] = id;
        }
        if self.call_ids[index].is_empty() {
            self.call_ids[index] = format!("call_{}{index}", rand::random::<u32>());
        }
        let function = call.function.unwrap_or_default();
        out.push(LlmEvent::ToolCall(ToolCallDelta {
            call_id: self.call_ids[index].clone(),
            name: function.name.unwrap_or_default(),
            arguments: function.arguments.unwrap_or_default(),
        }));
    }

    fn fail(&mut self, out: &mut Vec<LlmEvent>, message: String) {
        self.done = true;
        out.push(LlmEvent::Failed(AnswerFailure {
            code: super::LLM_ERROR.into(),
            message,
        }));
    }
}

#[cfg(test)]
#[path = "chat_tests.rs"]
mod tests;
