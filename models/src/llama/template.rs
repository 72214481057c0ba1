//! The ChatML chat template (`<|im_start|>role\n…<|im_end|>\n`, SmolLM2's and Qwen's), with
//! tools offered and called in the Hermes format that ChatML models are tuned on: the
//! functions listed in the system message inside `<tools></tools>`, each call answered as
//! `<tool_call>{"name": …, "arguments": …}</tool_call>`, results given back in
//! `<tool_response>`. [`ToolCallParser`] turns the model's output back into text and calls.

use duet_protocol::chat::{ChatMessage, ChatRole};
use serde_json::{json, Value};

use super::tokenizer::Tokenizer;
use crate::cascade::LlmEvent;
use crate::{Tool, ToolCallDelta, ToolChoice};

const OPEN_CALL: &str = "<tool_call>";
const CLOSE_CALL: &str = "</tool_call>";
/// What Qwen3's template puts at the start of an answer when thinking is off.
const NO_THINK: &str = "<think>\n\n</think>\n\n";

/// The template's control tokens.
#[derive(Clone, Debug)]
pub struct ChatMl {
    start: u32,
    end: u32,
    /// The tokens that end an answer: `<|im_end|>`, and `<|endoftext|>` where the
    /// vocabulary has it (Qwen's base models end with it).
    stops: Vec<u32>,
    /// The system message the model's own template adds when a conversation has none.
    default_system: Option<String>,
    /// The template can think aloud (Qwen3's `enable_thinking`): the answer opens with an
    /// empty `<think>` block, as the template does with thinking off, because a voice
    /// answer must start speaking at once.
    no_think: bool,
}

/// A prompt ready to run.
#[derive(Debug, Default)]
pub struct Prompt {
    /// The prompt, ending with the opening of the assistant's turn.
    pub tokens: Vec<u32>,
    /// Text the template put at the start of the answer (a forced tool call's opening),
    /// which the parser reads before the model's own output.
    pub answer_prefix: String,
    /// Messages left out (the oldest) so that the prompt fits.
    pub dropped: usize,
}

impl ChatMl {
    /// The template of a tokenizer with `<|im_start|>` and `<|im_end|>`; `template` is the
    /// GGUF's `tokenizer.chat_template` (its default system message is kept).
    pub fn new(tokenizer: &Tokenizer, template: Option<&str>) -> Option<Self> {
        let start = tokenizer.control("<|im_start|>")?;
        let end = tokenizer.control("<|im_end|>")?;
        if template.is_some_and(|t| !t.contains("<|im_start|>")) {
            return None;
        }
        let default_system = template.and_then(|t| {
            let from = t.find("<|im_start|>system\n")? + "<|im_start|>system\n".len();
            let len = t[from..].find("<|im_end|>")?;
            let text = &t[from..from + len];
            // Only a literal (no template code inside).
            (!text.contains("{{") && !text.contains("{%") && !text.is_empty())
                .then(|| text.to_string())
        });
        let mut stops = vec![end];
        stops.extend(tokenizer.control("<|endoftext|>"));
        Some(Self {
            start,
            end,
            stops,
            default_system,
            no_think: template.is_some_and(|t| t.contains("enable_thinking")),
        })
    }

    /// The tokens that end an answer.
    pub fn stops(&self) -> &[u32] {
        &self.stops
    }

    /// Renders `messages` (OpenAI chat format) and the tools into a prompt of at most
    /// `limit` tokens, leaving out the oldest messages after the first system one when
    /// it would be longer. The last message is never left out: when it (or the system
    /// message with the tools) cannot fit, the prompt fails. Messages are tokenized newest
    /// first and only while they can fit, and a text whose bytes alone need more tokens than
    /// are left is never tokenized: a huge message costs its length in bytes, not in BPE.
    pub fn render(
        &self,
        tokenizer: &Tokenizer,
        messages: &[ChatMessage],
        tools: &[Tool],
        choice: &ToolChoice,
        limit: usize,
    ) -> Result<Prompt, String> {
        let offer = !tools.is_empty() && *choice != ToolChoice::None;
        let (system, rest) = self.system_text(messages, tools, offer);
        let too_long = |what: &str, need: usize| {
            format!(
                "{what} needs at least {need} tokens, more than the {limit} this model can take"
            )
        };
        let mut head = Vec::new();
        if let Some(text) = &system {
            let need = tokenizer.at_least(text);
            if need > limit {
                return Err(too_long("the system message", need));
            }
            self.message(tokenizer, "system", text, &mut head);
        }
        let answer_prefix = answer_prefix(choice, offer);
        let mut tail = vec![self.start];
        tokenizer.encode_into("assistant\n", &mut tail);
        if self.no_think {
            tokenizer.encode_into(NO_THINK, &mut tail);
        }
        tokenizer.encode_into(&answer_prefix, &mut tail);
        let fixed = head.len() + tail.len();
        if fixed > limit {
            return Err(too_long("the system message", fixed));
        }
        let bodies = self
            .newest_first(tokenizer, rest, limit - fixed)
            .map_err(|need| too_long("the last message", need + fixed))?;
        let dropped = rest.len() - bodies.len();
        let mut tokens = head;
        for body in bodies.iter().rev() {
            tokens.extend_from_slice(body);
        }
        tokens.extend_from_slice(&tail);
        Ok(Prompt {
            tokens,
            answer_prefix,
            dropped,
        })
    }

    /// The system message's text (the first message's, or the template's default), with the
    /// tools block when tools are offered, and the messages after it.
    fn system_text<'m>(
        &self,
        messages: &'m [ChatMessage],
        tools: &[Tool],
        offer: bool,
    ) -> (Option<String>, &'m [ChatMessage]) {
        let mut system: Option<String> = None;
        let mut rest = messages;
        if let Some(first) = messages.first().filter(|m| m.role == ChatRole::System) {
            system = Some(first.content_text());
            rest = &messages[1..];
        }
        let mut system = system.or_else(|| self.default_system.clone());
        if offer {
            let text = system.get_or_insert_with(String::new);
            text.push_str(&tools_block(tools));
        }
        (system, rest)
    }

    /// The messages' tokens, newest first, while they fit in `left` tokens; the tokens the
    /// last message needs when even it cannot fit.
    fn newest_first(
        &self,
        tokenizer: &Tokenizer,
        rest: &[ChatMessage],
        mut left: usize,
    ) -> Result<Vec<Vec<u32>>, usize> {
        let mut bodies: Vec<Vec<u32>> = Vec::new();
        for m in rest.iter().rev() {
            let (role, text) = message_text(m);
            let need = tokenizer.at_least(&text);
            let body = (need <= left).then(|| {
                let mut out = Vec::new();
                self.message(tokenizer, role, &text, &mut out);
                out
            });
            match body {
                Some(body) if body.len() <= left => {
                    left -= body.len();
                    bodies.push(body);
                }
                body => {
                    if bodies.is_empty() {
                        return Err(body.map_or(need, |b| b.len()));
                    }
                    break;
                }
            }
        }
        Ok(bodies)
    }

    fn message(&self, tokenizer: &Tokenizer, role: &str, text: &str, out: &mut Vec<u32>) {
        out.push(self.start);
        tokenizer.encode_into(role, out);
        tokenizer.encode_into("\n", out);
        tokenizer.encode_into(text, out);
        out.push(self.end);
        tokenizer.encode_into("\n", out);
    }
}

/// What the answer starts with when a tool call is forced: the opening of the call.
fn answer_prefix(choice: &ToolChoice, offer: bool) -> String {
    match choice {
        ToolChoice::Function(name) if offer => {
            format!("{OPEN_CALL}\n{{\"name\": {}, \"arguments\": ", json!(name))
        }
        ToolChoice::Required if offer => format!("{OPEN_CALL}\n{{\"name\": \""),
        _ => String::new(),
    }
}

/// A message's role in the template and its text: assistant calls as `<tool_call>`
/// blocks, tool results as a user message with a `<tool_response>`.
fn message_text(m: &ChatMessage) -> (&'static str, String) {
    let text = m.content_text();
    match m.role {
        ChatRole::System | ChatRole::Developer => ("system", text),
        ChatRole::Assistant => {
            let mut text = text;
            for call in &m.tool_calls {
                let f = &call.function;
                let arguments: Value = serde_json::from_str(&f.arguments)
                    .unwrap_or_else(|_| Value::String(f.arguments.clone()));
                if !text.is_empty() {
                    text.push('\n');
                }
                let body = json!({"name": f.name, "arguments": arguments});
                text.push_str(&format!("{OPEN_CALL}\n{body}\n{CLOSE_CALL}"));
            }
            ("assistant", text)
        }
        ChatRole::Tool | ChatRole::Function => {
            ("user", format!("<tool_response>\n{text}\n</tool_response>"))
        }
        ChatRole::User => ("user", text),
    }
}

fn tools_block(tools: &[Tool]) -> String {
    let mut out = String::from(
        "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
         You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
    );
    for t in tools {
        let parameters: Value =
            serde_json::from_str(&t.parameters).unwrap_or_else(|_| json!({"type": "object"}));
        let f = json!({"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": parameters}});
        out.push('\n');
        out.push_str(&f.to_string());
    }
    out.push_str(
        "\n</tools>\n\nFor each function call, return a json object with function name and \
         arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n\
         {\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
    );
    out
}

/// Splits a model's streamed output into text and `<tool_call>` blocks. Text that might be
/// the start of a `<tool_call>` tag is held back until it is known not to be.
#[derive(Debug, Default)]
pub struct ToolCallParser {
    held: String,
    in_call: bool,
    calls: usize,
    /// A prefix for the call ids of this answer.
    id_prefix: String,
}

impl ToolCallParser {
    /// A parser whose calls are named `call_<id_prefix><n>`.
    pub fn new(id_prefix: String) -> Self {
        Self {
            id_prefix,
            ..Self::default()
        }
    }

    /// Reads more output.
    pub fn push(&mut self, text: &str, out: &mut Vec<LlmEvent>) -> Result<(), String> {
        self.held.push_str(text);
        loop {
            if self.in_call {
                let Some(at) = self.held.find(CLOSE_CALL) else {
                    return Ok(());
                };
                let body: String = self.held[..at].to_string();
                self.held.drain(..at + CLOSE_CALL.len());
                self.in_call = false;
                out.push(self.call(&body)?);
                // Whitespace between calls is not an answer.
                let trimmed = self.held.trim_start().len();
                self.held.drain(..self.held.len() - trimmed);
            } else if let Some(at) = self.held.find(OPEN_CALL) {
                if at > 0 {
                    out.push(LlmEvent::Text(self.held[..at].to_string()));
                }
                self.held.drain(..at + OPEN_CALL.len());
                self.in_call = true;
            } else {
                // Keep what could still become "<tool_call>".
                let keep = (1..OPEN_CALL.len())
                    .rev()
                    .find(|&n| self.held.ends_with(&OPEN_CALL[..n]))
                    .unwrap_or(0);
                let cut = self.held.len() - keep;
                if cut > 0 {
                    out.push(LlmEvent::Text(self.held[..cut].to_string()));
                    self.held.drain(..cut);
                }
                return Ok(());
            }
        }
    }

    /// The output ended: flushes held text, or reads a call the model left unclosed.
    pub fn finish(&mut self, out: &mut Vec<LlmEvent>) -> Result<(), String> {
        let held = std::mem::take(&mut self.held);
        if self.in_call {
            self.in_call = false;
            out.push(self.call(&held)?);
        } else if !held.is_empty() {
            out.push(LlmEvent::Text(held));
        }
        Ok(())
    }

    fn call(&mut self, body: &str) -> Result<LlmEvent, String> {
        let body = body.trim();
        // Small models close their JSON badly: read the first value after each key.
        let v: Value = serde_json::from_str(body).unwrap_or_else(|_| {
            json!({"name": value_after(body, "\"name\""),
                   "arguments": value_after(body, "\"arguments\"")})
        });
        let name = v["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("the model wrote a tool call without a name: {body:?}"))?;
        let arguments = match &v["arguments"] {
            Value::String(s) => s.clone(),
            Value::Null => "{}".into(),
            other => other.to_string(),
        };
        self.calls += 1;
        Ok(LlmEvent::ToolCall(ToolCallDelta {
            call_id: format!("call_{}{}", self.id_prefix, self.calls),
            name: name.to_string(),
            arguments,
        }))
    }
}

/// The first JSON value after `key:` in `text` (Null when there is none).
fn value_after(text: &str, key: &str) -> Value {
    let Some(at) = text.find(key) else {
        return Value::Null;
    };
    let rest = text[at + key.len()..].trim_start();
    let Some(rest) = rest.strip_prefix(':') else {
        return Value::Null;
    };
    serde_json::Deserializer::from_str(rest)
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok)
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(parts: &[&str]) -> Result<Vec<LlmEvent>, String> {
        let mut p = ToolCallParser::new("t".into());
        let mut out = Vec::new();
        for part in parts {
            p.push(part, &mut out)?;
        }
        p.finish(&mut out)?;
        Ok(out)
    }

    fn text(events: &[LlmEvent]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                LlmEvent::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn plain_text_passes_through_and_a_lone_angle_bracket_is_released() {
        let out = run(&["It is ", "3 < 4", " and <tool", "s> too"]).unwrap();
        assert_eq!(text(&out), "It is 3 < 4 and <tools> too");
    }

    #[test]
    fn a_call_split_over_pieces_becomes_one_tool_call() {
        let out = run(&[
            "Let me check. <tool",
            "_call>\n{\"name\": \"get_time\", ",
            "\"arguments\": {\"tz\": \"UTC\"}}\n</tool_",
            "call>",
        ])
        .unwrap();
        assert_eq!(text(&out), "Let me check. ");
        let calls: Vec<&ToolCallDelta> = out
            .iter()
            .filter_map(|e| match e {
                LlmEvent::ToolCall(c) => Some(c),
                _ => None,
            })
            .collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "get_time");
        assert_eq!(calls[0].arguments, r#"{"tz":"UTC"}"#);
        assert_eq!(calls[0].call_id, "call_t1");
    }

    #[test]
    fn an_unclosed_call_at_the_end_still_counts_and_garbage_fails() {
        let out = run(&["<tool_call>{\"name\": \"f\", \"arguments\": {}}"]).unwrap();
        assert!(matches!(&out[0], LlmEvent::ToolCall(c) if c.name == "f" && c.arguments == "{}"));
        assert!(run(&["<tool_call>not json</tool_call>"]).is_err());
        // A call whose JSON is closed badly still gives its name and arguments.
        let out =
            run(&["<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1} \"x\"</tool_call>"])
                .unwrap();
        assert!(
            matches!(&out[0], LlmEvent::ToolCall(c) if c.name == "f" && c.arguments == r#"{"a":1}"#),
            "{out:?}"
        );
    }

    #[test]
    fn messages_render_as_chatml_with_tools_and_results() {
        let m = [
            json!({"role": "user", "content": "What time is it?"}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "get_time", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "12:00"}),
        ];
        let m: Vec<ChatMessage> = m
            .iter()
            .map(|v| serde_json::from_value(v.clone()).unwrap())
            .collect();
        let rendered: Vec<(&str, String)> = m.iter().map(message_text).collect();
        assert_eq!(rendered[0], ("user", "What time is it?".to_string()));
        assert_eq!(
            rendered[1],
            (
                "assistant",
                "<tool_call>\n{\"arguments\":{},\"name\":\"get_time\"}\n</tool_call>".to_string()
            )
        );
        assert_eq!(
            rendered[2],
            (
                "user",
                "<tool_response>\n12:00\n</tool_response>".to_string()
            )
        );
        let block = tools_block(&[Tool {
            name: "get_time".into(),
            description: "The time".into(),
            parameters: "{}".into(),
        }]);
        assert!(block.contains("<tools>\n{\"function\":{\"description\":\"The time\""));
    }
}
