//! `POST /v1/chat/completions` and `POST /v1/responses` on the server's own address and auth,
//! answered by the embedded LLM of `--llm-model-dir` (chat completions only, see
//! [`super::chat_local`]) or proxied to the LLM of `--llm-url`: the request's `model` is overwritten with
//! `--llm-model`, the upstream key stays here, streaming (SSE) passes through as it comes,
//! and each request is counted in `/v1/usage` (by outcome, 429 apart from the other 4xx, and
//! the tokens the upstream reports). Only the server key may use them: client secrets are
//! for realtime sessions.
//!
//! Each request is admitted like a session (a `--max-sessions` slot and the `--max-per-ip`
//! count, held until its answer is sent), its body and a non-streamed answer are charged to
//! the memory budget while held, a streamed answer that goes quiet for `--llm-timeout-secs`
//! ends with an SSE `error` event, and an upstream's error answer is passed on as an
//! OpenAI-shaped error with the upstream's status and message (the upstream key redacted),
//! never its body or headers as they came.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use bytes::Bytes;
use duet_protocol::chat::{ChatError, ChatErrorEvent};
use duet_protocol::sse::SseDecoder;
use serde_json::Value;

use super::admission::Kind;
use super::secrets::{credential, Cred, Credential};
use super::AppState;
use crate::error::{ApiError, Code, LlmFault};
use crate::llm::{next_data, LlmBackend, Upstream, UpstreamError};
use crate::stores::usage::{LlmCall, UsageLedger};

/// The largest request body.
const MAX_REQUEST: usize = 4 << 20;
/// The largest non-streamed answer held to be counted and passed on.
const MAX_ANSWER: usize = 16 << 20;

/// The client's address, when the server's accept loop recorded it.
pub(super) type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

/// `POST /v1/chat/completions`.
pub async fn completions(
    State(state): State<Arc<AppState>>,
    peer: Peer,
    cred: Cred,
    req: Request,
) -> Response {
    serve(&state, &peer, &credential(&cred), req, "/chat/completions").await
}

/// `POST /v1/responses` (501 when the upstream has none).
pub async fn responses(
    State(state): State<Arc<AppState>>,
    peer: Peer,
    cred: Cred,
    req: Request,
) -> Response {
    serve(&state, &peer, &credential(&cred), req, "/responses").await
}

/// What an answer holds until it is sent: its admission and its memory charges.
pub(super) type Hold = Vec<Box<dyn Send + Sync>>;

async fn serve(
    state: &Arc<AppState>,
    peer: &Peer,
    cred: &Credential,
    req: Request,
    path: &'static str,
) -> Response {
    let mut hold: Hold = Vec::new();
    match admit(state, peer, cred, &req, MAX_REQUEST, &mut hold) {
        Ok(()) => match proxy(state, cred, req, path, &mut hold).await {
            Ok(resp) => held(resp, hold),
            Err(e) => e.into_response(),
        },
        Err(e) => e.into_response(),
    }
}

/// Admits a request: refused while draining, past `--max-sessions` or `--max-per-ip`, or
/// when the memory budget has no room for its body (as long as it says it is; `max` when
/// it does not say).
pub(super) fn admit(
    state: &Arc<AppState>,
    peer: &Peer,
    cred: &Credential,
    req: &Request,
    max: usize,
    hold: &mut Hold,
) -> Result<(), ApiError> {
    if !matches!(cred, Credential::Server) {
        return Ok(()); // refused by proxy, with nothing taken
    }
    if state.draining() {
        return Err(ApiError::draining());
    }
    let ip = peer.as_ref().map(|Extension(ConnectInfo(a))| a.ip());
    hold.push(Box::new(state.sessions.admissions.admit_as(
        Kind::Session,
        ip,
        None,
    )?));
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .map_or(max, |n| n.min(max));
    // The body, and its parsed and rewritten copies.
    hold.push(Box::new(charge(state, 3 * declared as u64)?));
    Ok(())
}

fn charge(state: &AppState, bytes: u64) -> Result<crate::memory::Charge, ApiError> {
    state
        .sessions
        .memory
        .charge(bytes)
        .map_err(|e| ApiError::new(Code::ServerMemoryExhausted, e.to_string()))
}

/// `resp` holding `hold` until its body is dropped (sent, or the client gone).
pub(super) fn held(resp: Response, hold: Hold) -> Response {
    let (parts, body) = resp.into_parts();
    Response::from_parts(parts, Body::new(Held { inner: body, hold }))
}

/// A body that holds what its answer costs until it is dropped.
struct Held {
    inner: Body,
    #[allow(dead_code)]
    hold: Hold,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Answers an LLM request: the embedded LLM's, or the upstream's passed through.
async fn proxy(
    state: &AppState,
    cred: &Credential,
    req: Request,
    path: &'static str,
    hold: &mut Hold,
) -> Result<Response, ApiError> {
    let (backend, usage) = llm_backend(state, cred)?;
    let upstream = match backend {
        LlmBackend::Remote(upstream) => upstream,
        LlmBackend::Embedded(_) if path == "/responses" => {
            return Err(ApiError::new(
                Code::LlmResponsesUnsupported,
                "the embedded LLM serves /v1/chat/completions only",
            ))
        }
        LlmBackend::Embedded(embedded) => {
            let body = read_request(req).await?;
            return super::chat_local::serve(embedded, usage, body).await;
        }
    };
    let (body, stream) = request_body(req, upstream).await?;
    let resp = post_upstream(upstream, path, body, stream, &usage).await?;
    relay(state, resp, stream, (usage, upstream), hold).await
}

/// The LLM that answers `cred` (the server key only), and where its use is counted.
fn llm_backend<'s>(
    state: &'s AppState,
    cred: &Credential,
) -> Result<(&'s LlmBackend, Counted), ApiError> {
    if !matches!(cred, Credential::Server) {
        return Err(ApiError::new(
            Code::InvalidApiKey,
            "the LLM endpoints need the server's API key (client secrets open realtime sessions only)",
        ));
    }
    let Some(backend) = &state.backends.llm else {
        return Err(ApiError::new(
            Code::LlmNotConfigured,
            "no LLM is configured: start the server with --llm-url or --llm-model-dir",
        ));
    };
    let usage = Counted {
        ledger: state.credentials.usage.clone(),
        credential: cred.usage_id(),
    };
    Ok((backend, usage))
}

/// POSTs the request upstream; an unreachable upstream, and one without `/responses`, are
/// counted and answered as errors.
async fn post_upstream(
    upstream: &Upstream,
    path: &str,
    body: Bytes,
    stream: bool,
    usage: &Counted,
) -> Result<hyper::Response<hyper::body::Incoming>, ApiError> {
    let accept = if stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    let resp = match upstream.post(path, body, accept).await {
        Ok(r) => r,
        Err(e) => {
            usage.record(LlmCall {
                outcome: "unavailable",
                ..LlmCall::default()
            });
            let fault = match e {
                UpstreamError::Timeout(_) => LlmFault::TimedOut,
                UpstreamError::Unavailable(_) => LlmFault::Upstream,
            };
            return Err(ApiError::new(Code::LlmUnavailable(fault), e.to_string()));
        }
    };
    let status = resp.status();
    if path == "/responses" && matches!(status.as_u16(), 404 | 405) {
        usage.record(LlmCall {
            outcome: LlmCall::outcome_of(status.as_u16()),
            ..LlmCall::default()
        });
        return Err(ApiError::new(
            Code::LlmResponsesUnsupported,
            "the upstream LLM server has no /v1/responses; use /v1/chat/completions",
        ));
    }
    Ok(resp)
}

/// The upstream's answer to the client: an error as an OpenAI-shaped `llm_error`, a stream
/// passed through as it comes (counted at its end), a whole answer held (and charged)
/// until it is complete.
async fn relay(
    state: &AppState,
    resp: hyper::Response<hyper::body::Incoming>,
    stream: bool,
    (usage, upstream): (Counted, &Upstream),
    hold: &mut Hold,
) -> Result<Response, ApiError> {
    let status = resp.status();
    let ctype = resp.headers().get(header::CONTENT_TYPE).cloned();
    let mut length = None;
    if !status.is_success() {
        return Err(upstream_error(resp.into_body(), status, usage, upstream).await);
    }
    let body = if stream {
        Body::from_stream(counted_stream(
            resp.into_body(),
            usage,
            upstream.config().timeout,
        ))
    } else {
        let memory = &state.sessions.memory;
        let whole = answer_body(
            resp.into_body(),
            status.as_u16(),
            usage,
            upstream,
            memory,
            hold,
        )
        .await?;
        length = Some(whole.len());
        in_pieces(whole)
    };
    let mut out = Response::new(body);
    *out.status_mut() = status;
    if let Some(ct) = ctype {
        out.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    if let Some(n) = length {
        out.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    }
    if stream {
        out.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    Ok(out)
}

/// The request body, up to [`MAX_REQUEST`] bytes.
async fn read_request(req: Request) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(req.into_body(), MAX_REQUEST)
        .await
        .map_err(|e| ApiError::body(&e, MAX_REQUEST, "request body"))
}

/// The request body with `model` overwritten, and whether it asks for a stream.
async fn request_body(req: Request, upstream: &Upstream) -> Result<(Bytes, bool), ApiError> {
    let bytes = read_request(req).await?;
    let mut body: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::new(Code::InvalidJson, format!("the body is not JSON: {e}")))?;
    let Some(obj) = body.as_object_mut() else {
        return Err(ApiError::new(
            Code::InvalidJson,
            "the body is not a JSON object",
        ));
    };
    obj.insert(
        "model".into(),
        Value::String(upstream.config().model.clone()),
    );
    let stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
    Ok((Bytes::from(body.to_string()), stream))
}

/// Charged in steps of this many bytes while an answer is read.
const CHARGE_STEP: usize = 1 << 20;

/// Reads a whole (non-streamed) answer and counts it; what it holds is charged to the
/// memory budget (onto `hold`) as it grows.
async fn answer_body(
    mut body: hyper::body::Incoming,
    status: u16,
    usage: Counted,
    upstream: &Upstream,
    memory: &Arc<crate::memory::MemoryAccount>,
    hold: &mut Hold,
) -> Result<Bytes, ApiError> {
    let unavailable = |code: fn(LlmFault) -> Code, message: String| {
        usage.record(LlmCall {
            outcome: "unavailable",
            ..LlmCall::default()
        });
        ApiError::new(code(LlmFault::Upstream), message)
    };
    let mut buf = Vec::new();
    let mut charged = 0;
    loop {
        match next_data(&mut body, upstream.config().timeout).await {
            Ok(Some(data)) => buf.extend_from_slice(&data),
            Ok(None) => break,
            Err(e) => {
                return Err(unavailable(
                    Code::LlmUnavailable,
                    format!("the LLM's answer {e}"),
                ))
            }
        }
        if buf.len() > MAX_ANSWER {
            let why = format!("the LLM's answer passed {MAX_ANSWER} bytes");
            return Err(unavailable(Code::LlmError, why));
        }
        while charged < buf.len() {
            match memory.charge(CHARGE_STEP as u64) {
                Ok(c) => hold.push(Box::new(c)),
                Err(e) => {
                    usage.record(LlmCall {
                        outcome: "unavailable",
                        ..LlmCall::default()
                    });
                    return Err(ApiError::new(Code::ServerMemoryExhausted, e.to_string()));
                }
            }
            charged += CHARGE_STEP;
        }
    }
    let (prompt_tokens, completion_tokens) = serde_json::from_slice::<Value>(&buf)
        .map(|v| tokens(&v))
        .unwrap_or_default();
    usage.record(LlmCall {
        outcome: LlmCall::outcome_of(status),
        prompt_tokens,
        completion_tokens,
    });
    Ok(Bytes::from(buf))
}

/// A held answer sent in 64 KiB pieces: the server takes the next only as the client reads,
/// so the answer's charge (dropped with the body after its last piece) lasts as long as it
/// is held.
fn in_pieces(whole: Bytes) -> Body {
    const PIECE: usize = 64 << 10;
    let pieces: Vec<Result<Bytes, std::convert::Infallible>> = (0..whole.len())
        .step_by(PIECE)
        .map(|at| Ok(whole.slice(at..(at + PIECE).min(whole.len()))))
        .collect();
    Body::from_stream(futures_util::stream::iter(pieces))
}

/// The most of an upstream's error body read.
const MAX_ERROR_BODY: usize = 16 << 10;

/// An upstream's error answer as an OpenAI-shaped error: its status, `llm_error`, and its
/// message (OpenAI's `error.message`, else the text, 300 characters at most) with the
/// upstream key redacted. Its body and headers are never passed on as they came (an
/// upstream may echo the key it was sent).
async fn upstream_error(
    mut body: hyper::body::Incoming,
    status: StatusCode,
    usage: Counted,
    upstream: &Upstream,
) -> ApiError {
    usage.record(LlmCall {
        outcome: LlmCall::outcome_of(status.as_u16()),
        ..LlmCall::default()
    });
    let text = crate::llm::read_up_to(&mut body, upstream.config().timeout, MAX_ERROR_BODY)
        .await
        .map(|(b, _)| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let said = crate::llm::error_message(&text, upstream.config().api_key.as_deref());
    ApiError::new(
        Code::LlmError(LlmFault::Answered(status)),
        format!("the LLM answered HTTP {}: {said}", status.as_u16()),
    )
}

/// `usage` of a chat completion or a response: (prompt, completion) tokens.
fn tokens(v: &Value) -> (u64, u64) {
    let u = &v["usage"];
    let get = |a: &str, b: &str| u[a].as_u64().or_else(|| u[b].as_u64()).unwrap_or(0);
    (
        get("prompt_tokens", "input_tokens"),
        get("completion_tokens", "output_tokens"),
    )
}

/// Where an LLM request is counted.
pub(super) struct Counted {
    ledger: Arc<dyn UsageLedger>,
    credential: String,
}

impl Counted {
    pub(super) fn record(&self, call: LlmCall) {
        self.ledger.llm(&self.credential, call);
    }
}

/// A streamed answer passed through as it comes; the tokens of a `usage` chunk (sent when
/// the client asked `stream_options.include_usage`) are counted when the stream ends. When
/// the upstream sends nothing for `quiet` (`--llm-timeout-secs`), or breaks off, the stream
/// ends with an SSE `error` event (`llm_unavailable`).
fn counted_stream(
    body: hyper::body::Incoming,
    usage: Counted,
    quiet: Duration,
) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> {
    let scan = StreamScan {
        usage,
        sse: SseDecoder::new(),
        data: Vec::new(),
        tokens: (0, 0),
    };
    futures_util::stream::unfold(Some((body, scan)), move |state| async move {
        let (mut body, mut scan) = state?;
        match next_data(&mut body, quiet).await {
            Ok(Some(data)) => {
                scan.feed(&data);
                Some((Ok(data), Some((body, scan))))
            }
            Ok(None) => None,
            Err(e) => {
                let err = ChatErrorEvent {
                    error: ChatError {
                        message: Some(format!("the LLM's answer {e}")),
                        kind: Some("server_error".into()),
                        code: Some(Code::LlmUnavailable(LlmFault::Upstream).as_str().into()),
                    },
                };
                let err = serde_json::to_string(&err).unwrap_or_default();
                Some((Ok(Bytes::from(format!("data: {err}\n\n"))), None))
            }
        }
    })
}

struct StreamScan {
    usage: Counted,
    sse: SseDecoder,
    data: Vec<String>,
    tokens: (u64, u64),
}

impl StreamScan {
    fn feed(&mut self, bytes: &[u8]) {
        if self.sse.push(bytes, &mut self.data).is_err() {
            self.sse = SseDecoder::new(); // an event too long to scan: count what follows
        }
        for d in self.data.drain(..) {
            if let Ok(v) = serde_json::from_str::<Value>(&d) {
                let (p, c) = tokens(&v);
                if p + c > 0 {
                    self.tokens = (p, c);
                }
            }
        }
    }
}

impl Drop for StreamScan {
    fn drop(&mut self) {
        self.usage.record(LlmCall {
            outcome: "2xx",
            prompt_tokens: self.tokens.0,
            completion_tokens: self.tokens.1,
        });
    }
}
