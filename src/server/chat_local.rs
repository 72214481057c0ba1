//! `POST /v1/chat/completions` answered by the embedded LLM (`--llm-model-dir`), in the
//! OpenAI chat-completions format: a `chat.completion`, or with `"stream": true` a stream of
//! `chat.completion.chunk` events ending with `data: [DONE]` (and a `usage` chunk when
//! `stream_options.include_usage` asks). Tools are offered to the model and its calls come
//! back as `tool_calls` (see `duet_models::llama::template`). The request's `model` is
//! ignored: the answer names the embedded model.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use duet_models::cascade::LLM_UNAVAILABLE;
use duet_models::cascade::{ChatRequest, LlmEvent, LlmStream};
use duet_models::llama::{
    Priority, QueueFull, CONTEXT_LENGTH_EXCEEDED, LLM_QUEUE_FULL, LLM_QUEUE_TIMEOUT,
};
use duet_models::AnswerFailure;
use duet_models::{Tool, ToolChoice};
use serde_json::{json, Value};

use super::chat::Counted;
use super::error::ApiError;
use super::usage::LlmCall;
use crate::llm::Embedded;

/// How often an answer in progress is looked at: at first, and after each event.
const POLL: Duration = Duration::from_millis(5);
/// How often at most while it waits (the wait backs off to this).
const POLL_SLOW: Duration = Duration::from_millis(50);
/// Beyond the engine's own wait deadline, the longest silence of an answer before it is
/// given up (the engine sends a token every step once an answer runs).
const QUIET_MARGIN: Duration = Duration::from_secs(30);

/// What the request asks, beside the conversation.
struct Asked {
    stream: bool,
    include_usage: bool,
}

/// Serves one chat completion from the embedded LLM.
pub(super) async fn serve(
    embedded: &Embedded,
    usage: Counted,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (request, asked) = parse(&body)?;
    let max_tokens = request.max_tokens;
    let stream = embedded
        .llm
        .submit(request, Priority::Batch)
        .map_err(|QueueFull(message)| {
            usage.record(LlmCall {
                outcome: "429",
                ..LlmCall::default()
            });
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, LLM_QUEUE_FULL, message)
                .retry(retry_after(embedded))
        })?;
    let mut answer = Answer {
        stream,
        quiet: embedded.llm.max_wait() + QUIET_MARGIN,
        id: format!("chatcmpl-{:016x}", rand::random::<u64>()),
        created: super::secrets::unix_now(),
        model: embedded.name.clone(),
        max_tokens,
        usage,
        events: Vec::new(),
        calls: 0,
        finished: false,
    };
    // The first event decides the status: a failure before any output is an error answer.
    let first = answer.next().await;
    if let LlmEvent::Failed(f) = &first {
        let (status, outcome) = match f.code.as_str() {
            CONTEXT_LENGTH_EXCEEDED => (StatusCode::BAD_REQUEST, "4xx"),
            LLM_QUEUE_TIMEOUT => (StatusCode::SERVICE_UNAVAILABLE, "5xx"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "5xx"),
        };
        answer.record(outcome, (0, 0));
        let mut e = ApiError::new(status, &f.code, f.message.clone());
        if f.code == LLM_QUEUE_TIMEOUT {
            e = e.retry(retry_after(embedded));
        }
        return Err(e);
    }
    answer.events.insert(0, first);
    if asked.stream {
        let mut out = Response::new(Body::from_stream(answer.chunks(asked.include_usage)));
        let h = out.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        Ok(out)
    } else {
        let body = answer.whole().await?;
        let mut out = Response::new(Body::from(body.to_string()));
        out.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Ok(out)
    }
}

/// `Retry-After` for a full or slow queue: a tenth of the wait deadline, 1..=30 s.
fn retry_after(embedded: &Embedded) -> u64 {
    (embedded.llm.max_wait().as_secs() / 10).clamp(1, 30)
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request("invalid_request_error", message)
}

/// The body as the engine's request.
fn parse(body: &[u8]) -> Result<(ChatRequest, Asked), ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request("invalid_json", format!("the body is not JSON: {e}")))?;
    let Some(messages) = v["messages"].as_array().filter(|m| !m.is_empty()) else {
        return Err(bad("messages: a non-empty array of messages is required"));
    };
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        if ![
            "system",
            "developer",
            "user",
            "assistant",
            "tool",
            "function",
        ]
        .contains(&role)
        {
            return Err(bad(format!(
                "messages[{i}].role: {role:?} is not a chat role"
            )));
        }
    }
    let mut tools = Vec::new();
    for (i, t) in v["tools"].as_array().into_iter().flatten().enumerate() {
        let f = &t["function"];
        let Some(name) = f["name"].as_str().filter(|n| !n.is_empty()) else {
            return Err(bad(format!("tools[{i}].function.name is required")));
        };
        tools.push(Tool {
            name: name.to_string(),
            description: f["description"].as_str().unwrap_or_default().to_string(),
            parameters: f
                .get("parameters")
                .map_or_else(|| "{}".into(), Value::to_string),
        });
    }
    let tool_choice = match &v["tool_choice"] {
        Value::Null => ToolChoice::Auto,
        Value::String(s) => match s.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => {
                return Err(bad(format!(
                    "tool_choice: {other:?} is not auto, none or required"
                )))
            }
        },
        c => match c["function"]["name"].as_str() {
            Some(name) if tools.iter().any(|t| t.name == name) => {
                ToolChoice::Function(name.to_string())
            }
            _ => return Err(bad("tool_choice: names no function of tools")),
        },
    };
    let max_tokens = v["max_completion_tokens"]
        .as_u64()
        .or_else(|| v["max_tokens"].as_u64())
        .map(|n| n.clamp(1, u64::from(u32::MAX)) as u32);
    let temperature = match &v["temperature"] {
        Value::Null => None,
        t => match t.as_f64() {
            Some(t) if (0.0..=2.0).contains(&t) => Some(t as f32),
            _ => return Err(bad("temperature: a number from 0 to 2")),
        },
    };
    let request = ChatRequest {
        messages: messages.clone(),
        tools,
        tool_choice,
        max_tokens,
        temperature,
    };
    let asked = Asked {
        stream: v["stream"].as_bool().unwrap_or(false),
        include_usage: v["stream_options"]["include_usage"]
            .as_bool()
            .unwrap_or(false),
    };
    Ok((request, asked))
}

/// An answer being read from the engine.
struct Answer {
    stream: Box<dyn LlmStream>,
    /// The longest wait for the next event.
    quiet: Duration,
    id: String,
    created: u64,
    model: String,
    max_tokens: Option<u32>,
    usage: Counted,
    events: Vec<LlmEvent>,
    calls: usize,
    finished: bool,
}

impl Answer {
    /// The next event (waits for it, at most `quiet`: then the answer fails).
    async fn next(&mut self) -> LlmEvent {
        let since = tokio::time::Instant::now();
        let mut poll = POLL;
        loop {
            if !self.events.is_empty() {
                return self.events.remove(0);
            }
            self.stream.poll(&mut self.events);
            if self.events.is_empty() {
                if since.elapsed() > self.quiet {
                    return LlmEvent::Failed(AnswerFailure {
                        code: LLM_UNAVAILABLE.into(),
                        message: format!(
                            "the embedded LLM said nothing for {} s",
                            self.quiet.as_secs()
                        ),
                    });
                }
                tokio::time::sleep(poll).await;
                poll = (poll * 2).min(POLL_SLOW);
            }
        }
    }

    fn record(&mut self, outcome: &'static str, tokens: (usize, usize)) {
        self.finished = true;
        self.usage.record(LlmCall {
            outcome,
            prompt_tokens: tokens.0 as u64,
            completion_tokens: tokens.1 as u64,
        });
    }

    fn finish_reason(&self, completion: usize) -> &'static str {
        if self.calls > 0 {
            "tool_calls"
        } else if self.max_tokens.is_some_and(|m| completion >= m as usize) {
            "length"
        } else {
            "stop"
        }
    }

    fn usage_json(prompt: usize, completion: usize, cached: usize) -> Value {
        json!({"prompt_tokens": prompt, "completion_tokens": completion,
               "total_tokens": prompt + completion,
               "prompt_tokens_details": {"cached_tokens": cached}})
    }

    /// The whole answer as one `chat.completion`.
    async fn whole(mut self) -> Result<Value, ApiError> {
        let mut text = String::new();
        let mut calls: Vec<Value> = Vec::new();
        let mut tokens = (0, 0, 0);
        loop {
            match self.next().await {
                LlmEvent::Text(t) => text.push_str(&t),
                LlmEvent::ToolCall(c) => {
                    self.calls += 1;
                    calls.push(json!({"id": c.call_id, "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments}}));
                }
                LlmEvent::Usage {
                    prompt_tokens,
                    completion_tokens,
                    cached_tokens,
                } => tokens = (prompt_tokens, completion_tokens, cached_tokens),
                LlmEvent::Done => break,
                LlmEvent::Failed(f) => {
                    self.record("5xx", (0, 0));
                    return Err(ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        &f.code,
                        f.message,
                    ));
                }
            }
        }
        self.record("2xx", (tokens.0, tokens.1));
        let mut message = json!({"role": "assistant",
            "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) }});
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        Ok(json!({
            "id": self.id, "object": "chat.completion", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": null,
                         "finish_reason": self.finish_reason(tokens.1)}],
            "usage": Self::usage_json(tokens.0, tokens.1, tokens.2),
        }))
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        json!({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
               "model": self.model,
               "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    }

    /// The answer as SSE chunks, as they come.
    fn chunks(
        self,
        include_usage: bool,
    ) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> {
        let sse = |v: Value| Bytes::from(format!("data: {v}\n\n"));
        let state = (self, 0u8);
        futures_util::stream::unfold(state, move |(mut a, phase)| async move {
            match phase {
                0 => {
                    let first = a.chunk(json!({"role": "assistant", "content": ""}), None);
                    Some((Ok(sse(first)), (a, 1)))
                }
                1 => {
                    let out = match a.next().await {
                        LlmEvent::Text(t) => a.chunk(json!({"content": t}), None),
                        LlmEvent::ToolCall(c) => {
                            let index = a.calls;
                            a.calls += 1;
                            a.chunk(
                                json!({"tool_calls": [{"index": index, "id": c.call_id,
                                    "type": "function",
                                    "function": {"name": c.name, "arguments": c.arguments}}]}),
                                None,
                            )
                        }
                        LlmEvent::Usage {
                            prompt_tokens,
                            completion_tokens,
                            cached_tokens,
                        } => {
                            a.record("2xx", (prompt_tokens, completion_tokens));
                            let reason = a.finish_reason(completion_tokens);
                            let mut last = vec![sse(a.chunk(json!({}), Some(reason)))];
                            if include_usage {
                                let mut u = a.chunk(json!({}), None);
                                u["choices"] = json!([]);
                                u["usage"] = Self::usage_json(
                                    prompt_tokens,
                                    completion_tokens,
                                    cached_tokens,
                                );
                                last.push(sse(u));
                            }
                            return Some((Ok(Bytes::from(last.concat())), (a, 1)));
                        }
                        LlmEvent::Done => {
                            return Some((Ok(Bytes::from_static(b"data: [DONE]\n\n")), (a, 2)))
                        }
                        LlmEvent::Failed(f) => {
                            a.record("5xx", (0, 0));
                            let err = json!({"error": {"message": f.message, "type": "server_error",
                                "code": f.code}});
                            return Some((Ok(sse(err)), (a, 2)));
                        }
                    };
                    Some((Ok(sse(out)), (a, 1)))
                }
                _ => None,
            }
        })
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        if !self.finished {
            // The client went away mid-answer: the stream's drop cancels the engine's work.
            self.usage.record(LlmCall {
                outcome: "2xx",
                ..LlmCall::default()
            });
        }
    }
}
