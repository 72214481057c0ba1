//! The OpenAI chat-completions wire for the cascade's LLM: the conversation as `messages`,
//! the tools as `tools`, and the streamed chunks back as text and tool-call pieces. Pure
//! JSON in and out; the HTTP is the server's.

use serde_json::{json, Map, Value};

use super::LlmEvent;
use crate::{AnswerFailure, ContextItem, Tool, ToolCallDelta, ToolChoice};

/// What the cascade asks its LLM.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// `messages`, in the OpenAI chat format.
    pub messages: Vec<Value>,
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

    /// The JSON body of `POST /chat/completions` for `model`, streaming or not.
    pub fn body(&self, model: &str, stream: bool) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(model));
        body.insert("messages".into(), Value::Array(self.messages.clone()));
        body.insert("stream".into(), json!(stream));
        if let Some(n) = self.max_tokens {
            body.insert("max_tokens".into(), json!(n));
        }
        if let Some(t) = self.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if !self.tools.is_empty() {
            let tools: Vec<Value> = self.tools.iter().map(tool_json).collect();
            body.insert("tools".into(), Value::Array(tools));
            body.insert("tool_choice".into(), tool_choice_json(&self.tool_choice));
        }
        Value::Object(body)
    }
}

fn tool_json(t: &Tool) -> Value {
    let parameters: Value =
        serde_json::from_str(&t.parameters).unwrap_or_else(|_| json!({"type": "object"}));
    json!({"type": "function", "function": {
        "name": t.name, "description": t.description, "parameters": parameters}})
}

fn tool_choice_json(c: &ToolChoice) -> Value {
    match c {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Function(name) => json!({"type": "function", "function": {"name": name}}),
    }
}

/// The conversation as chat `messages`: the instructions first (as the system message),
/// user turns as their words (audio nobody transcribed has none and is left out), the
/// assistant's calls as `tool_calls` of an assistant message, their results as `tool`
/// messages.
pub fn messages(instructions: &str, items: &[ContextItem]) -> Vec<Value> {
    let mut out = Vec::new();
    if !instructions.trim().is_empty() {
        out.push(json!({"role": "system", "content": instructions}));
    }
    for item in items {
        match item {
            ContextItem::System(text) => out.push(json!({"role": "system", "content": text})),
            ContextItem::User(turn) => match turn.text() {
                Some(text) if !text.trim().is_empty() => {
                    out.push(json!({"role": "user", "content": text}))
                }
                _ => {}
            },
            ContextItem::Assistant(text) => out.push(json!({"role": "assistant", "content": text})),
            ContextItem::ToolCall(call) => {
                let call = json!({"id": call.call_id, "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments}});
                match out.last_mut() {
                    Some(m) if m["role"] == "assistant" => {
                        let calls = m
                            .as_object_mut()
                            .map(|o| o.entry("tool_calls").or_insert_with(|| json!([])));
                        if let Some(Value::Array(calls)) = calls {
                            calls.push(call);
                        }
                    }
                    _ => out
                        .push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
                }
            }
            ContextItem::ToolResult { call_id, output } => {
                out.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}))
            }
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
        let chunk: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => return self.fail(out, format!("the LLM sent a chunk that is not JSON: {e}")),
        };
        if let Some(err) = chunk.get("error") {
            let message = err["message"]
                .as_str()
                .unwrap_or("an error with no message");
            return self.fail(out, format!("the LLM failed mid-answer: {message}"));
        }
        let Some(choice) = chunk["choices"].get(0) else {
            return; // usage-only or keep-alive chunks
        };
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            out.push(LlmEvent::Text(text.to_string()));
        }
        if let Some(calls) = delta["tool_calls"].as_array() {
            for call in calls {
                self.read_call(call, out);
            }
        }
        if choice["finish_reason"].is_string() {
            self.done = true;
            out.push(LlmEvent::Done);
        }
    }

    fn read_call(&mut self, call: &Value, out: &mut Vec<LlmEvent>) {
        let index = call["index"].as_u64().unwrap_or(self.call_ids.len() as u64) as usize;
        if index > self.call_ids.len() + 64 {
            return; // an index no real stream sends; refuse to grow for it
        }
        while self.call_ids.len() <= index {
            self.call_ids.push(String::new());
        }
        if let Some(id) = call["id"].as_str().filter(|s| !s.is_empty()) {
            self.call_ids[index] = id.to_string();
        }
        if self.call_ids[index].is_empty() {
            self.call_ids[index] = format!("call_{}{index}", rand::random::<u32>());
        }
        let function = &call["function"];
        out.push(LlmEvent::ToolCall(ToolCallDelta {
            call_id: self.call_ids[index].clone(),
            name: function["name"].as_str().unwrap_or_default().to_string(),
            arguments: function["arguments"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
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
