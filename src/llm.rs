//! The cascade's remote LLM: any OpenAI-compatible server (vLLM, llama.cpp, Ollama, OpenAI,
//! Groq, OpenRouter, …) at `--llm-url` (`http://` or `https://`), asked with a streaming
//! `POST /chat/completions` on pooled connections (`crate::http_client`). Each answer runs as a task on the server's runtime and hands what
//! it reads to the model loop through a channel; dropping the answer aborts the task, which
//! closes the upstream request (a barge-in stops the LLM at once). The upstream key stays
//! here: it is never sent to a client.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use duet_models::cascade::{
    ChatRequest, ChunkReader, Llm, LlmEvent, LlmStream, SseDecoder, LLM_ERROR, LLM_UNAVAILABLE,
};
use duet_models::AnswerFailure;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use hyper::Uri;

use crate::http_client::{self, HttpClient, Pool};

/// The most an answer may hold (bytes of streamed text and arguments): a runaway upstream
/// fails its answer instead of filling memory.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;
/// The longest wait for the rest of a finished answer's body (its last chunk).
const DRAIN_WAIT: Duration = Duration::from_millis(200);
/// The most of an error body kept for the message.
const MAX_ERROR_BODY: usize = 2048;

/// Where and how to reach the LLM.
#[derive(Clone, Debug)]
pub struct LlmConfig {
    /// Base URL (`http://host:port/v1`); `/chat/completions` is appended.
    pub url: String,
    /// The `model` every request names.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    /// Longest wait for the response head, and between two pieces of the stream.
    pub timeout: Duration,
    /// Longest a cascade answer may take from its request to its end (`--llm-answer-secs`):
    /// an upstream that keeps sending pieces that say nothing cannot hold a response forever.
    pub answer_timeout: Duration,
}

/// The server's LLM: the remote one of `--llm-url`, or the embedded one of `--llm-model-dir`.
#[derive(Clone)]
pub enum LlmBackend {
    /// An OpenAI-compatible server.
    Remote(Upstream),
    /// A GGUF model run here (see `duet_models::llama`).
    Embedded(Embedded),
}

/// The embedded LLM and its name.
#[derive(Clone)]
pub struct Embedded {
    /// The engine (shared by the cascade and `/v1/chat/completions`).
    pub llm: Arc<duet_models::llama::EmbeddedLlm>,
    /// The model's name in answers (its directory's name).
    pub name: String,
    /// Its threads (for `/ready`).
    pub threads: crate::llm_loop::LlmLoop,
}

/// The upstream LLM server: one pooled HTTP client, shared by the cascade's answers and
/// the `/v1/chat/completions` proxy.
#[derive(Clone)]
pub struct Upstream {
    client: HttpClient,
    cfg: LlmConfig,
}

impl Upstream {
    /// A client for `cfg`. Refuses a URL it cannot use.
    pub fn new(cfg: LlmConfig) -> anyhow::Result<Self> {
        chat_endpoint(&cfg.url)?;
        let client = HttpClient::new(Pool {
            connect_timeout: cfg.timeout,
            idle_timeout: Duration::from_secs(90),
            max_idle_per_host: 64,
            upstream: "llm",
        });
        Ok(Self { client, cfg })
    }

    /// Its configuration.
    pub fn config(&self) -> &LlmConfig {
        &self.cfg
    }

    /// `POST {url}{path}` with a JSON `body` and the server's key, waiting at most the
    /// timeout for the response head.
    pub async fn post(
        &self,
        path: &str,
        body: Bytes,
        accept: &str,
    ) -> Result<hyper::Response<hyper::body::Incoming>, UpstreamError> {
        let uri: Uri = format!("{}{path}", self.cfg.url.trim_end_matches('/'))
            .parse()
            .map_err(|e| UpstreamError::Unavailable(format!("bad upstream URL: {e}")))?;
        let mut req = hyper::Request::post(uri)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept);
        if let Some(key) = &self.cfg.api_key {
            req = req.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| UpstreamError::Unavailable(format!("could not build the request: {e}")))?;
        match tokio::time::timeout(self.cfg.timeout, self.client.send(req)).await {
            Err(_) => Err(UpstreamError::Timeout(self.cfg.timeout)),
            Ok(Err(why)) => Err(UpstreamError::Unavailable(format!(
                "the LLM is unreachable: {why}"
            ))),
            Ok(Ok(r)) => Ok(r),
        }
    }
}

/// Why an upstream request got no response.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No response head within the timeout.
    #[error("the LLM did not answer within {} s", .0.as_secs_f32())]
    Timeout(Duration),
    /// Could not connect or send.
    #[error("{0}")]
    Unavailable(String),
}

/// A remote LLM for the cascade (see the module docs).
pub struct RemoteLlm {
    upstream: Upstream,
    runtime: tokio::runtime::Handle,
}

impl RemoteLlm {
    /// The cascade's LLM on `upstream`, running its requests on `runtime`.
    pub fn new(upstream: Upstream, runtime: tokio::runtime::Handle) -> Self {
        Self { upstream, runtime }
    }
}

/// `{url}/chat/completions`, for an `http://` base URL.
pub fn chat_endpoint(url: &str) -> anyhow::Result<Uri> {
    let base = url.trim_end_matches('/');
    let uri: Uri = format!("{base}/chat/completions")
        .parse()
        .map_err(|e| anyhow::anyhow!("--llm-url {url:?} is not a URL: {e}"))?;
    http_client::check_url(&uri).map_err(|why| anyhow::anyhow!("--llm-url {url:?} {why}"))?;
    Ok(uri)
}

impl Llm for RemoteLlm {
    fn start(&self, request: ChatRequest) -> Box<dyn LlmStream> {
        let (tx, rx) = duet_models::cascade::answer_channel();
        let body = request.body(&self.upstream.cfg.model, true).to_string();
        let call = Call {
            upstream: self.upstream.clone(),
            tx,
        };
        let task = self.runtime.spawn(call.run(body));
        Box::new(RemoteAnswer {
            rx,
            task: task.abort_handle(),
        })
    }
}

/// An answer's end of the channel; dropping it aborts the request.
struct RemoteAnswer {
    rx: duet_models::cascade::AnswerEvents,
    task: tokio::task::AbortHandle,
}

impl Drop for RemoteAnswer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LlmStream for RemoteAnswer {
    fn poll(&mut self, out: &mut Vec<LlmEvent>) {
        while let Ok(ev) = self.rx.try_recv() {
            out.push(ev);
        }
    }

    fn wake_on(&mut self, waker: &std::task::Waker) {
        self.rx.wake_on(waker);
    }
}

/// One request in flight.
struct Call {
    upstream: Upstream,
    tx: duet_models::cascade::AnswerSender,
}

fn failure(code: &str, message: String) -> LlmEvent {
    LlmEvent::Failed(AnswerFailure {
        code: code.into(),
        message,
    })
}

impl Call {
    async fn run(self, body: String) {
        let whole = self.upstream.cfg.answer_timeout;
        let answer = async {
            match self.open(body).await {
                Ok(answer) => self.forward(answer).await,
                Err(e) => Err(e),
            }
        };
        let outcome = tokio::time::timeout(whole, answer)
            .await
            .unwrap_or_else(|_| {
                Err(failure(
                    LLM_UNAVAILABLE,
                    format!(
                        "the LLM's answer did not end within {} s (--llm-answer-secs)",
                        whole.as_secs_f32()
                    ),
                ))
            });
        if let Err(ev) = outcome {
            let _ = self.tx.send(ev);
        }
    }

    /// Sends the request; the answer's body, or the failure to report.
    async fn open(&self, body: String) -> Result<Incoming, LlmEvent> {
        let timeout = self.upstream.cfg.timeout;
        let resp = self
            .upstream
            .post("/chat/completions", Bytes::from(body), "text/event-stream")
            .await
            .map_err(|e| failure(LLM_UNAVAILABLE, e.to_string()))?;
        let status = resp.status();
        let mut body = resp.into_body();
        if status.is_success() {
            return Ok(body);
        }
        let text = read_up_to(&mut body, timeout, MAX_ERROR_BODY)
            .await
            .map(|(bytes, _)| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        Err(failure(
            LLM_ERROR,
            format!(
                "the LLM answered HTTP {}: {}",
                status.as_u16(),
                error_message(&text, self.upstream.cfg.api_key.as_deref())
            ),
        ))
    }

    /// Reads the streamed answer and hands on what it says until its end; `Err` is the
    /// failure to report.
    async fn forward(&self, mut body: Incoming) -> Result<(), LlmEvent> {
        let timeout = self.upstream.cfg.timeout;
        let mut reading = Reading::default();
        let mut events = Vec::new();
        loop {
            let data = match next_data(&mut body, timeout).await {
                Ok(Some(data)) => data,
                Ok(None) if reading.chunks.is_done() => return Ok(()),
                Ok(None) => {
                    let closed = "the LLM closed the answer before its end";
                    return Err(failure(LLM_UNAVAILABLE, closed.into()));
                }
                Err(e) => return Err(failure(LLM_UNAVAILABLE, format!("the LLM's answer {e}"))),
            };
            reading.read(&data, &mut events)?;
            let done = reading.chunks.is_done();
            if done {
                // Read to the end of the body before the answer ends (its end drops this
                // task), so that the connection goes back to the pool.
                let _ = read_up_to(&mut body, DRAIN_WAIT.min(timeout), MAX_ERROR_BODY).await;
            }
            for ev in events.drain(..) {
                if self.tx.send(ev).is_err() {
                    return Ok(()); // the answer was dropped
                }
            }
            if done {
                return Ok(());
            }
        }
    }
}

/// A streamed answer being read: its events, their chunks, the bytes so far.
#[derive(Default)]
struct Reading {
    sse: SseDecoder,
    chunks: ChunkReader,
    datas: Vec<String>,
    bytes: usize,
}

impl Reading {
    /// Reads the body's next bytes into `events`.
    fn read(&mut self, data: &[u8], events: &mut Vec<LlmEvent>) -> Result<(), LlmEvent> {
        self.bytes += data.len();
        if self.bytes > MAX_ANSWER_BYTES {
            let why = format!("the LLM's answer passed {MAX_ANSWER_BYTES} bytes");
            return Err(failure(LLM_ERROR, why));
        }
        self.sse
            .push(data, &mut self.datas)
            .map_err(|e| failure(LLM_ERROR, e.to_string()))?;
        for d in self.datas.drain(..) {
            self.chunks.read(&d, events);
        }
        Ok(())
    }
}

/// Why a body's next bytes did not come.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Nothing within the timeout.
    #[error("went quiet for {} s", .0.as_secs_f32())]
    Quiet(Duration),
    /// The connection failed.
    #[error("broke off: {0}")]
    Broken(String),
}

/// The next bytes of `body` within `timeout` (`Ok(None)` at its end).
pub async fn next_data(body: &mut Incoming, timeout: Duration) -> Result<Option<Bytes>, BodyError> {
    loop {
        match tokio::time::timeout(timeout, body.frame()).await {
            Err(_) => return Err(BodyError::Quiet(timeout)),
            Ok(None) => return Ok(None),
            Ok(Some(Err(e))) => return Err(BodyError::Broken(e.to_string())),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    return Ok(Some(data));
                }
            }
        }
    }
}

/// Reads `body` to its end or until it holds `limit` bytes, each piece within `timeout`: the
/// bytes (at most `limit`) and whether they are the whole body.
pub async fn read_up_to(
    body: &mut Incoming,
    timeout: Duration,
    limit: usize,
) -> Result<(Vec<u8>, bool), BodyError> {
    let mut buf = Vec::new();
    while let Some(data) = next_data(body, timeout).await? {
        buf.extend_from_slice(&data);
        if buf.len() > limit {
            buf.truncate(limit);
            return Ok((buf, false));
        }
    }
    Ok((buf, true))
}

/// An error body's message: OpenAI's `{"error":{"message"}}`, else the text itself; 300
/// characters at most, with `secret` (the upstream key) redacted wherever it appears.
pub fn error_message(text: &str, secret: Option<&str>) -> String {
    let message = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| text.trim().to_string());
    let message = match secret.filter(|k| !k.is_empty()) {
        Some(k) => message.replace(k, "[redacted]"),
        None => message,
    };
    message.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_the_base_url_and_chat_completions() {
        assert_eq!(
            chat_endpoint("http://127.0.0.1:8000/v1/")
                .unwrap()
                .to_string(),
            "http://127.0.0.1:8000/v1/chat/completions"
        );
        assert_eq!(
            chat_endpoint("https://api.example/v1").unwrap().to_string(),
            "https://api.example/v1/chat/completions"
        );
        assert!(chat_endpoint("localhost:8000").is_err());
        assert!(chat_endpoint("not a url").is_err());
    }

    /// An upstream that sends an empty delta every 300 ms holds the answer no longer than
    /// `answer_timeout` (it held a response for as long as it dribbled).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dribbling_upstream_is_cut_off_at_the_answer_deadline() {
        use duet_client::scripted_llm::{Reply, ScriptedLlm};
        let empty = r#"{"choices":[{"index":0,"delta":{"content":""}}]}"#.to_string();
        let llm = ScriptedLlm::start(vec![Reply::Stream {
            data: vec![empty; 40],
            gap: Duration::from_millis(300),
        }])
        .await;
        let upstream = Upstream::new(LlmConfig {
            url: llm.url.clone(),
            model: "m".into(),
            api_key: None,
            timeout: Duration::from_secs(1),
            answer_timeout: Duration::from_secs(2),
        })
        .unwrap();
        let remote = RemoteLlm::new(upstream, tokio::runtime::Handle::current());
        let request = ChatRequest::new("hi", &[], Vec::new(), duet_models::ToolChoice::Auto);
        let started = std::time::Instant::now();
        let mut stream = remote.start(request);
        let mut out = Vec::new();
        while !matches!(out.last(), Some(LlmEvent::Done | LlmEvent::Failed(_))) {
            assert!(started.elapsed() < Duration::from_secs(10), "{out:?}");
            stream.poll(&mut out);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let took = started.elapsed();
        assert!(
            matches!(out.last(), Some(LlmEvent::Failed(f)) if f.code == LLM_UNAVAILABLE
                && f.message.contains("--llm-answer-secs")),
            "{out:?}"
        );
        assert!(
            took >= Duration::from_secs(2) && took < Duration::from_secs(4),
            "{took:?}"
        );
    }

    #[test]
    fn error_bodies_give_their_message() {
        assert_eq!(
            error_message(r#"{"error":{"message":"model not found"}}"#, None),
            "model not found"
        );
        assert_eq!(error_message("  Bad Gateway\n", None), "Bad Gateway");
        // An upstream that echoes the key it was sent does not hand it on.
        let echoed = r#"{"error":{"message":"bad key: Authorization: Bearer sk-upstream-123"}}"#;
        let said = error_message(echoed, Some("sk-upstream-123"));
        assert!(
            !said.contains("sk-upstream-123") && said.contains("[redacted]"),
            "{said}"
        );
    }
}
