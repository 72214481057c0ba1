//! `POST /v1/chat/completions` answered by the embedded LLM (`--llm-model-dir`), in the
//! OpenAI chat-completions format: a `chat.completion`, or with `"stream": true` a stream of
//! `chat.completion.chunk` events ending with `data: [DONE]` (and a `usage` chunk when
//! `stream_options.include_usage` asks). Tools are offered to the model and its calls come
//! back as `tool_calls` (see `duet_models::llama::template`). The request's `model` is
//! ignored: the answer names the embedded model.

use std::collections::VecDeque;
use std::task::Poll;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use bytes::Bytes;
use duet_models::cascade::LLM_UNAVAILABLE;
use duet_models::cascade::{ChatRequest, LlmEvent, LlmStream};
use duet_models::llama::{Priority, QueueFull};
use duet_models::AnswerFailure;
use duet_models::{Tool, ToolChoice};
use duet_protocol::chat::{
    ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, ChatError, ChatErrorEvent,
    ChatMessage, ChatRole, ChatToolCall, ChatToolChoice, ChatUsage, ChunkChoice, ChunkDelta,
    CompletionChoice, FunctionCall, FunctionChunk, ToolCallChunk, ToolChoiceMode,
};
use serde::Serialize;

use super::chat::Counted;
use crate::error::{ApiError, Code, LlmFault};
use crate::llm::Embedded;
use crate::stores::usage::LlmCall;

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
            ApiError::new(Code::LlmQueueFull, message).retry(retry_after(embedded))
        })?;
    let mut answer = Answer {
        stream,
        quiet: embedded.llm.max_wait() + QUIET_MARGIN,
        id: format!("chatcmpl-{:016x}", rand::random::<u64>()),
        created: super::secrets::unix_now(),
        model: embedded.name.clone(),
        max_tokens,
        usage,
        events: VecDeque::new(),
        calls: 0,
        finished: false,
    };
    // The first event decides the status: a failure before any output is an error answer.
    let first = answer.next().await;
    if let LlmEvent::Failed(f) = &first {
        return Err(failed_before_output(&mut answer, f, embedded));
    }
    answer.events.push_front(first);
    respond(answer, asked).await
}

/// An answer that failed before any output: counted, and as the HTTP error to send.
fn failed_before_output(answer: &mut Answer, f: &AnswerFailure, embedded: &Embedded) -> ApiError {
    let e = failed(f);
    answer.record(
        if e.status().is_client_error() {
            "4xx"
        } else {
            "5xx"
        },
        (0, 0),
    );
    match e.code {
        Code::LlmQueueTimeout => e.retry(retry_after(embedded)),
        _ => e,
    }
}

/// The answer as the client asked for it: server-sent chunks, or one completion.
async fn respond(answer: Answer, asked: Asked) -> Result<Response, ApiError> {
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
        let mut out = Response::new(Body::from(serde_json::to_string(&body).unwrap_or_default()));
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

/// The embedded LLM's failure as an HTTP error: a context overflow is the request's fault
/// (400), a queue deadline the load's (503), anything else the engine's (500).
fn failed(f: &AnswerFailure) -> ApiError {
    let code = match Code::of(&f.code) {
        Some(
            c @ (Code::ContextLengthExceeded | Code::LlmQueueTimeout | Code::LlmUnavailable(_)),
        ) => c,
        _ => Code::LlmError(LlmFault::Embedded),
    };
    ApiError::new(code, f.message.clone())
}

/// A request the embedded LLM cannot take (400 `invalid_value`; it was
/// `invalid_request_error`, the `error.type`, before there was a code for it).
fn bad(message: impl Into<String>) -> ApiError {
    ApiError::new(Code::InvalidValue, message)
}

/// The body as the engine's request.
fn parse(body: &[u8]) -> Result<(ChatRequest, Asked), ApiError> {
    let v: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::new(Code::InvalidJson, format!("the body is not JSON: {e}")))?;
    let wire: ChatCompletionRequest = serde_path_to_error::deserialize(v)
        .map_err(|e| bad(format!("{}: {}", e.path(), e.inner())))?;
    if wire.messages.is_empty() {
        return Err(bad("messages: a non-empty array of messages is required"));
    }
    let mut tools = Vec::new();
    for (i, t) in wire.tools.iter().enumerate() {
        let f = &t.function;
        if f.name.is_empty() {
            return Err(bad(format!("tools[{i}].function.name is required")));
        }
        tools.push(Tool {
            name: f.name.clone(),
            description: f.description.clone(),
            parameters: f
                .parameters
                .as_ref()
                .map_or_else(|| "{}".into(), |p| p.to_string()),
        });
    }
    let tool_choice = match &wire.tool_choice {
        None | Some(ChatToolChoice::Mode(ToolChoiceMode::Auto)) => ToolChoice::Auto,
        Some(ChatToolChoice::Mode(ToolChoiceMode::None)) => ToolChoice::None,
        Some(ChatToolChoice::Mode(ToolChoiceMode::Required)) => ToolChoice::Required,
        Some(ChatToolChoice::Named(n)) if tools.iter().any(|t| t.name == n.function.name) => {
            ToolChoice::Function(n.function.name.clone())
        }
        Some(ChatToolChoice::Named(_)) => {
            return Err(bad("tool_choice: names no function of tools"))
        }
    };
    let temperature = match wire.temperature {
        None => None,
        Some(t) if (0.0..=2.0).contains(&t) => Some(t as f32),
        Some(_) => return Err(bad("temperature: a number from 0 to 2")),
    };
    let asked = Asked {
        stream: wire.stream,
        include_usage: wire.stream_options.is_some_and(|o| o.include_usage),
    };
    let request = ChatRequest {
        max_tokens: wire
            .max_completion_tokens
            .or(wire.max_tokens)
            .map(|n| n.clamp(1, u64::from(u32::MAX)) as u32),
        messages: wire.messages,
        tools,
        tool_choice,
        temperature,
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
    events: VecDeque<LlmEvent>,
    calls: usize,
    finished: bool,
}

/// Where a streamed answer is.
enum Phase {
    /// The first chunk (the assistant's role) is still to go.
    Head,
    /// The answer's pieces.
    Body,
    /// `[DONE]` or the error went out.
    Done,
}

/// One server-sent event carrying `v`.
fn sse(v: &impl Serialize) -> Bytes {
    Bytes::from(format!(
        "data: {}\n\n",
        serde_json::to_string(v).unwrap_or_default()
    ))
}

impl Answer {
    /// The next event (waits for it, woken by the engine, at most `quiet`: then the
    /// answer fails).
    async fn next(&mut self) -> LlmEvent {
        if let Some(ev) = self.events.pop_front() {
            return ev;
        }
        let mut got = Vec::new();
        let arrived = std::future::poll_fn(|cx| {
            self.stream.wake_on(cx.waker());
            self.stream.poll(&mut got);
            if got.is_empty() {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        });
        if tokio::time::timeout(self.quiet, arrived).await.is_err() {
            return LlmEvent::Failed(AnswerFailure {
                code: LLM_UNAVAILABLE.into(),
                message: format!(
                    "the embedded LLM said nothing for {} s",
                    self.quiet.as_secs()
                ),
            });
        }
        self.events.extend(got);
        self.events.pop_front().unwrap_or(LlmEvent::Done)
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

    /// The whole answer as one `chat.completion`.
    async fn whole(mut self) -> Result<ChatCompletion, ApiError> {
        let mut text = String::new();
        let mut calls: Vec<ChatToolCall> = Vec::new();
        let mut tokens = (0, 0, 0);
        loop {
            match self.next().await {
                LlmEvent::Text(t) => text.push_str(&t),
                LlmEvent::ToolCall(c) => {
                    self.calls += 1;
                    calls.push(ChatToolCall {
                        id: c.call_id,
                        kind: "function".into(),
                        function: FunctionCall {
                            name: c.name,
                            arguments: c.arguments,
                        },
                    });
                }
                LlmEvent::Usage {
                    prompt_tokens,
                    completion_tokens,
                    cached_tokens,
                } => tokens = (prompt_tokens, completion_tokens, cached_tokens),
                LlmEvent::Done => break,
                LlmEvent::Failed(f) => {
                    self.record("5xx", (0, 0));
                    return Err(failed(&f));
                }
            }
        }
        self.record("2xx", (tokens.0, tokens.1));
        let mut message = ChatMessage::text(ChatRole::Assistant, text);
        if !calls.is_empty() {
            if message.content_text().is_empty() {
                message.content = None;
            }
            message.tool_calls = calls;
        }
        Ok(ChatCompletion {
            id: self.id.clone(),
            object: "chat.completion".into(),
            created: self.created,
            model: self.model.clone(),
            choices: vec![CompletionChoice {
                index: 0,
                message,
                logprobs: None,
                finish_reason: Some(self.finish_reason(tokens.1).into()),
            }],
            usage: Some(usage(tokens)),
        })
    }

    fn chunk(&self, delta: ChunkDelta, finish: Option<&str>) -> ChatCompletionChunk {
        ChatCompletionChunk {
            id: self.id.clone(),
            object: "chat.completion.chunk".into(),
            created: self.created,
            model: self.model.clone(),
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                logprobs: None,
                finish_reason: finish.map(String::from),
            }],
            ..ChatCompletionChunk::default()
        }
    }

    /// The answer as SSE chunks, as they come.
    fn chunks(
        self,
        include_usage: bool,
    ) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> {
        futures_util::stream::unfold((self, Phase::Head), move |(mut a, phase)| async move {
            let (bytes, next) = match phase {
                Phase::Head => {
                    let delta = ChunkDelta {
                        role: Some(ChatRole::Assistant),
                        content: Some(String::new()),
                        ..ChunkDelta::default()
                    };
                    (sse(&a.chunk(delta, None)), Phase::Body)
                }
                Phase::Body => a.next_piece(include_usage).await,
                Phase::Done => return None,
            };
            Some((Ok(bytes), (a, next)))
        })
    }

    /// The SSE bytes of the answer's next event, and where the stream is after them.
    async fn next_piece(&mut self, include_usage: bool) -> (Bytes, Phase) {
        let delta = match self.next().await {
            LlmEvent::Text(t) => ChunkDelta {
                content: Some(t),
                ..ChunkDelta::default()
            },
            LlmEvent::ToolCall(c) => {
                let index = self.calls as u64;
                self.calls += 1;
                ChunkDelta {
                    tool_calls: vec![ToolCallChunk {
                        index: Some(index),
                        id: Some(c.call_id),
                        kind: Some("function".into()),
                        function: Some(FunctionChunk {
                            name: Some(c.name),
                            arguments: Some(c.arguments),
                        }),
                    }],
                    ..ChunkDelta::default()
                }
            }
            LlmEvent::Usage {
                prompt_tokens,
                completion_tokens,
                cached_tokens,
            } => {
                self.record("2xx", (prompt_tokens, completion_tokens));
                let reason = self.finish_reason(completion_tokens);
                let mut last = vec![sse(&self.chunk(ChunkDelta::default(), Some(reason)))];
                if include_usage {
                    let mut u = self.chunk(ChunkDelta::default(), None);
                    u.choices.clear();
                    u.usage = Some(usage((prompt_tokens, completion_tokens, cached_tokens)));
                    last.push(sse(&u));
                }
                return (Bytes::from(last.concat()), Phase::Body);
            }
            LlmEvent::Done => return (Bytes::from_static(b"data: [DONE]\n\n"), Phase::Done),
            LlmEvent::Failed(f) => {
                self.record("5xx", (0, 0));
                let err = ChatErrorEvent {
                    error: ChatError {
                        message: Some(f.message),
                        kind: Some("server_error".into()),
                        code: Some(f.code.into()),
                    },
                };
                return (sse(&err), Phase::Done);
            }
        };
        (sse(&self.chunk(delta, None)), Phase::Body)
    }
}

/// The usage of an answer: prompt, completion and cached tokens.
fn usage((prompt, completion, cached): (usize, usize, usize)) -> ChatUsage {
    ChatUsage::new(prompt as u64, completion as u64, cached as u64)
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
