//! `POST /v1/chat/completions` and `POST /v1/responses` on the server's own address and auth,
//! answered by the embedded LLM of `--llm-model-dir` (chat completions only, see
//! [`super::chat_local`]) or proxied to the LLM of `--llm-url`: the request's `model` is overwritten with
//! `--llm-model`, the upstream key stays here, streaming (SSE) passes through as it comes,
//! and each request is counted in `/v1/usage` (by outcome, 429 apart from the other 4xx, and
//! the tokens the upstream reports). Only the server key may use them: client secrets are
//! for realtime sessions.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use duet_models::cascade::SseDecoder;
use http_body_util::BodyExt;
use serde_json::Value;

use super::error::ApiError;
use super::secrets::{credential, Cred, Credential};
use super::usage::{LlmCall, UsageLedger};
use super::AppState;
use crate::llm::{read_up_to, LlmBackend, Upstream, UpstreamError};

/// The largest request body.
const MAX_REQUEST: usize = 4 << 20;
/// The largest non-streamed answer held to be counted and passed on.
const MAX_ANSWER: usize = 16 << 20;

/// `POST /v1/chat/completions`.
pub async fn completions(State(state): State<Arc<AppState>>, cred: Cred, req: Request) -> Response {
    proxy(&state, &credential(&cred), req, "/chat/completions")
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// `POST /v1/responses` (501 when the upstream has none).
pub async fn responses(State(state): State<Arc<AppState>>, cred: Cred, req: Request) -> Response {
    proxy(&state, &credential(&cred), req, "/responses")
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn proxy(
    state: &AppState,
    cred: &Credential,
    req: Request,
    path: &'static str,
) -> Result<Response, ApiError> {
    if !matches!(cred, Credential::Server) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
            "the LLM endpoints need the server's API key (client secrets open realtime sessions only)",
        ));
    }
    let Some(backend) = &state.llm else {
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "llm_not_configured",
            "no LLM is configured: start the server with --llm-url or --llm-model-dir",
        ));
    };
    let usage = Counted {
        ledger: state.usage.clone(),
        credential: cred.usage_id(),
    };
    let upstream = match backend {
        LlmBackend::Remote(upstream) => upstream,
        LlmBackend::Embedded(_) if path == "/responses" => {
            return Err(ApiError::new(
                StatusCode::NOT_IMPLEMENTED,
                "llm_responses_unsupported",
                "the embedded LLM serves /v1/chat/completions only",
            ))
        }
        LlmBackend::Embedded(embedded) => {
            let body = read_request(req).await?;
            return super::chat_local::serve(embedded, usage, body).await;
        }
    };
    let (body, stream) = request_body(req, upstream).await?;
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
            let status = match e {
                UpstreamError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
                UpstreamError::Unavailable(_) => StatusCode::BAD_GATEWAY,
            };
            return Err(ApiError::new(status, "llm_unavailable", e.to_string()));
        }
    };
    let status = resp.status();
    if path == "/responses" && matches!(status.as_u16(), 404 | 405) {
        usage.record(LlmCall {
            outcome: LlmCall::outcome_of(status.as_u16()),
            ..LlmCall::default()
        });
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "llm_responses_unsupported",
            "the upstream LLM server has no /v1/responses; use /v1/chat/completions",
        ));
    }
    let ctype = resp.headers().get(header::CONTENT_TYPE).cloned();
    let body = if stream && status.is_success() {
        Body::new(counted_stream(resp.into_body(), usage))
    } else {
        Body::from(answer_body(resp.into_body(), status.as_u16(), usage, upstream).await?)
    };
    let mut out = Response::new(body);
    *out.status_mut() = status;
    if let Some(ct) = ctype {
        out.headers_mut().insert(header::CONTENT_TYPE, ct);
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
        .map_err(|e| ApiError::bad_request("invalid_json", format!("the body is not JSON: {e}")))?;
    let Some(obj) = body.as_object_mut() else {
        return Err(ApiError::bad_request(
            "invalid_json",
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

/// Reads a whole (non-streamed, or error) answer and counts it.
async fn answer_body(
    mut body: hyper::body::Incoming,
    status: u16,
    usage: Counted,
    upstream: &Upstream,
) -> Result<Bytes, ApiError> {
    let unavailable = |code: &str, message: String| {
        usage.record(LlmCall {
            outcome: "unavailable",
            ..LlmCall::default()
        });
        ApiError::new(StatusCode::BAD_GATEWAY, code, message)
    };
    let buf = match read_up_to(&mut body, upstream.config().timeout, MAX_ANSWER).await {
        Ok((buf, true)) => buf,
        Ok((_, false)) => {
            let why = format!("the LLM's answer passed {MAX_ANSWER} bytes");
            return Err(unavailable("llm_error", why));
        }
        Err(e) => {
            return Err(unavailable(
                "llm_unavailable",
                format!("the LLM's answer {e}"),
            ))
        }
    };
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
/// the client asked `stream_options.include_usage`) are counted when the stream ends.
fn counted_stream(
    body: hyper::body::Incoming,
    usage: Counted,
) -> impl http_body::Body<Data = Bytes, Error = hyper::Error> {
    let mut scan = StreamScan {
        usage,
        sse: SseDecoder::new(),
        data: Vec::new(),
        tokens: (0, 0),
    };
    body.map_frame(move |frame| {
        if let Some(d) = frame.data_ref() {
            scan.feed(d);
        }
        frame
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
