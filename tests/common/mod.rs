//! Test harness: an in-process server on loopback, a WebSocket client speaking JSON events,
//! synthetic voiced audio, and HTTP GETs (on `duet_client::http`); [`external`] runs
//! external client scripts.
#![allow(dead_code)]

pub mod browser;
pub mod cluster;
pub mod external;
pub mod moshi;
pub mod process;
pub mod sip;
pub mod tls;

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine;
use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The test binary runs two tests at a time, from any files. Scenarios that play and hear
/// audio in real time while a browser or a model takes a whole core (Chromium, the embedded
/// LLM) hold this for their whole run, so that two of them never starve each other on two
/// cores (a clipped transcript, an answer heard late, a latency that measures the other
/// test). Never taken twice by one test: it is not reentrant.
static EXCLUSIVE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits until no other exclusive scenario runs; see [`EXCLUSIVE`].
pub async fn exclusive() -> tokio::sync::MutexGuard<'static, ()> {
    EXCLUSIVE.lock().await
}

/// A name unique in this test process (for temporary files and directories).
pub fn unique() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{n}", std::process::id())
}

/// How long to wait for an expected event.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

/// A server with the real speech models of `scripts/install-models` (`DUET_TEST_MODELS`):
/// Silero VAD when `silero`, and Whisper tiny.en, plus `extra` flags.
pub async fn speech_server(silero: bool, extra: &[&str]) -> SocketAddr {
    let mut args = duet_client::speech::serve_args(&duet_client::speech::models_dir());
    if !silero {
        args.drain(..2); // the energy detector
    }
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend_from_slice(extra);
    server(&args).await
}

/// A server on `--model cascade` with the Piper voice of [`duet_client::speech::models_dir`]
/// (and its Silero VAD and Whisper tiny.en when `speech`), its LLM at `llm_url`.
pub async fn cascade_server(llm_url: &str, speech: bool) -> SocketAddr {
    let voice = duet_client::speech::models_dir()
        .join("piper-en_US-joe-medium")
        .display()
        .to_string();
    let flags = [
        "--model",
        "cascade",
        "--llm-url",
        llm_url,
        "--tts-model-dir",
        &voice,
    ];
    if speech {
        speech_server(true, &flags).await
    } else {
        server(&flags).await
    }
}

/// A WebSocket session on [`cascade_server`] with the real speech models.
pub async fn cascade_speech_client(llm_url: &str) -> Client {
    let addr = cascade_server(llm_url, true).await;
    Client::connect_url(&format!("ws://{addr}/v1/realtime?model=cascade"), &[])
        .await
        .expect("connects")
}

/// Starts a server on 127.0.0.1 with a free port and extra `duet serve` flags.
pub async fn server(extra: &[&str]) -> SocketAddr {
    start(extra).await.addr
}

/// Like [`server`], with the handle (state, fault injection).
pub async fn start(extra: &[&str]) -> duet::server::Server {
    // `DUET_TEST_LOG=duet=debug` shows the in-process servers' logs (with --nocapture).
    if let Ok(filter) = std::env::var("DUET_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
    let mut argv = vec!["serve", "--port", "0"];
    argv.extend_from_slice(extra);
    let args = duet::config::ServeArgs::parse_from(argv);
    let server = duet::server::start(&args).await.expect("server starts");
    for _ in 0..200 {
        if get(server.addr, "/ready", &[]).await.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server
}

/// `/ready`'s JSON body (or the error body).
pub async fn ready(addr: SocketAddr) -> (u16, Value) {
    let (status, text) = get(addr, "/ready", &[]).await;
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("{}");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Waits until `/ready` reports `calls` and `sessions` (model slots) at most as given.
pub async fn wait_released(addr: SocketAddr, calls: u64, sessions: u64, limit: Duration) {
    let start = std::time::Instant::now();
    loop {
        let (_, v) = ready(addr).await;
        let (c, s) = (v["calls"].as_u64(), v["sessions"].as_u64());
        if c.is_some_and(|c| c <= calls) && s.is_some_and(|s| s <= sessions) {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "not released within {limit:?}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Plain HTTP/1.1 GET (see [`duet_client::http::request`]); returns (status, headers+body
/// text).
pub async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let r = duet_client::http::request(addr, "GET", path, headers, "")
        .await
        .expect("GET");
    (r.status, r.text())
}

/// A WebSocket realtime client that keeps every event it received.
pub struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// Every event received so far, in order.
    pub log: Vec<Value>,
    /// When each event of `log` arrived.
    pub arrived: Vec<std::time::Instant>,
    /// Index of the next event `next` returns.
    cursor: usize,
}

impl Client {
    /// Connects to `/v1/realtime?model=echo`, reads `session.created`.
    pub async fn connect(addr: SocketAddr) -> Self {
        Self::connect_with(addr, &[])
            .await
            .expect("websocket connects")
    }

    /// Connects with extra request headers.
    pub async fn connect_with(
        addr: SocketAddr,
        headers: &[(&str, &str)],
    ) -> Result<Self, tokio_tungstenite::tungstenite::Error> {
        Self::connect_url(&format!("ws://{addr}/v1/realtime?model=echo"), headers).await
    }

    /// Connects to a call's sideband (`?call_id=`).
    pub async fn sideband(
        addr: SocketAddr,
        call_id: &str,
    ) -> Result<Self, tokio_tungstenite::tungstenite::Error> {
        Self::connect_url(&format!("ws://{addr}/v1/realtime?call_id={call_id}"), &[]).await
    }

    /// Connects to `url` with extra request headers; reads `session.created`.
    pub async fn connect_url(
        url: &str,
        headers: &[(&str, &str)],
    ) -> Result<Self, tokio_tungstenite::tungstenite::Error> {
        let mut c = Self::open(url, headers).await?;
        let first = c.next().await;
        assert_eq!(first["type"], "session.created", "{first}");
        Ok(c)
    }

    /// Connects to `url` with extra request headers and reads nothing.
    pub async fn open(
        url: &str,
        headers: &[(&str, &str)],
    ) -> Result<Self, tokio_tungstenite::tungstenite::Error> {
        let mut req = url.into_client_request()?;
        for (k, v) in headers {
            let name = tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(k.as_bytes())
                .expect("header name");
            req.headers_mut()
                .insert(name, v.parse().expect("header value"));
        }
        let (ws, _resp) = tokio_tungstenite::connect_async(req).await?;
        Ok(Self {
            ws,
            log: Vec::new(),
            arrived: Vec::new(),
            cursor: 0,
        })
    }

    /// Sends one event.
    pub async fn send(&mut self, event: Value) {
        self.ws
            .send(Message::Text(event.to_string().into()))
            .await
            .expect("send");
    }

    /// Sends raw text.
    pub async fn send_raw(&mut self, text: &str) {
        self.ws
            .send(Message::Text(text.to_string().into()))
            .await
            .expect("send");
    }

    /// Next event (waits up to [`EVENT_TIMEOUT`]).
    pub async fn next(&mut self) -> Value {
        if self.cursor < self.log.len() {
            self.cursor += 1;
            return self.log[self.cursor - 1].clone();
        }
        let v = self.recv(EVENT_TIMEOUT).await.unwrap_or_else(|| {
            panic!(
                "no event within {EVENT_TIMEOUT:?}; log: {:#?}",
                self.types()
            )
        });
        self.cursor += 1;
        v
    }

    /// The next event without a timeout panic: `None` when the socket closed.
    pub async fn next_raw(&mut self) -> Option<Value> {
        self.recv(Duration::from_secs(3600)).await
    }

    async fn recv(&mut self, timeout: Duration) -> Option<Value> {
        loop {
            let msg = tokio::time::timeout(timeout, self.ws.next()).await.ok()??;
            // A reset counts as the end of the stream (callers that expect more panic).
            let Ok(msg) = msg else { return None };
            match msg {
                Message::Text(t) => {
                    let v: Value = serde_json::from_str(t.as_str()).expect("server sends JSON");
                    assert!(
                        v["event_id"]
                            .as_str()
                            .is_some_and(|id| id.starts_with("event_")),
                        "event_id on {v}"
                    );
                    assert_nulls_allowed(&v);
                    self.log.push(v.clone());
                    self.arrived.push(std::time::Instant::now());
                    return Some(v);
                }
                Message::Close(_) => return None,
                _ => continue,
            }
        }
    }

    /// Reads to the end of the stream: the close frame's code and reason (`None`: the
    /// connection ended without one). Events on the way go to the log.
    pub async fn close_frame(&mut self) -> Option<(u16, String)> {
        loop {
            let msg = tokio::time::timeout(EVENT_TIMEOUT, self.ws.next())
                .await
                .expect("the server closes in time")?;
            match msg.ok()? {
                Message::Text(t) => {
                    let v: Value = serde_json::from_str(t.as_str()).expect("server sends JSON");
                    self.log.push(v);
                    self.arrived.push(std::time::Instant::now());
                }
                Message::Close(frame) => {
                    return frame.map(|f| (u16::from(f.code), f.reason.to_string()))
                }
                _ => continue,
            }
        }
    }

    /// Skips events until one of type `kind`, returns it.
    pub async fn until(&mut self, kind: &str) -> Value {
        loop {
            let ev = self.next().await;
            if ev["type"] == kind {
                return ev;
            }
        }
    }

    /// Collects events until (and including) one of type `kind`.
    pub async fn collect_until(&mut self, kind: &str) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let ev = self.next().await;
            let done = ev["type"] == kind;
            out.push(ev);
            if done {
                return out;
            }
        }
    }

    /// Reads everything arriving within `quiet` of silence.
    pub async fn drain(&mut self, quiet: Duration) -> Vec<Value> {
        let mut out: Vec<Value> = self.log[self.cursor..].to_vec();
        self.cursor = self.log.len();
        while let Some(v) = self.recv(quiet).await {
            self.cursor += 1;
            out.push(v);
        }
        out
    }

    /// Types of all events received so far.
    pub fn types(&self) -> Vec<String> {
        self.log
            .iter()
            .map(|e| e["type"].as_str().unwrap_or("?").to_string())
            .collect()
    }

    /// Appends 24 kHz samples as `audio/pcm`, in 100 ms events.
    pub async fn append(&mut self, samples: &[f32]) {
        for chunk in samples.chunks(2_400) {
            self.send(json!({"type": "input_audio_buffer.append", "audio": pcm_b64(chunk)}))
                .await;
        }
    }

    /// Appends 24 kHz samples in real time, as a microphone would: 20 ms events on an
    /// absolute 20 ms grid, reading the events that arrive meanwhile (into the log, for
    /// `next`, with their arrival times).
    pub async fn append_live(&mut self, samples: &[f32]) {
        let start = tokio::time::Instant::now();
        for (i, chunk) in samples.chunks(480).enumerate() {
            self.send(json!({"type": "input_audio_buffer.append", "audio": pcm_b64(chunk)}))
                .await;
            let due = start + Duration::from_millis(20 * (i as u64 + 1));
            loop {
                let now = tokio::time::Instant::now();
                if now >= due || self.recv(due - now).await.is_none() {
                    break;
                }
            }
        }
    }

    /// When the first event of type `kind` arrived.
    pub fn arrival_of(&self, kind: &str) -> Option<std::time::Instant> {
        let i = self.log.iter().position(|e| e["type"] == kind)?;
        self.arrived.get(i).copied()
    }

    /// Sets manual turns (`turn_detection: null`) and waits for `session.updated`.
    pub async fn manual_turns(&mut self) {
        self.send(json!({"type":"session.update","session":{"type":"realtime","audio":{"input":{"turn_detection":null}}}})).await;
        let up = self.until("session.updated").await;
        assert!(up["session"]["audio"]["input"]["turn_detection"].is_null());
    }
}

/// A spoken answer's audio (24 kHz) and its transcript deltas, from a session's event log:
/// those of `response` (its id), or of every response.
pub fn spoken_answer(log: &[Value], response: Option<&Value>) -> (Vec<f32>, String) {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut pcm = Vec::new();
    let mut transcript = String::new();
    for e in log
        .iter()
        .filter(|e| response.is_none_or(|id| &e["response_id"] == id))
    {
        match e["type"].as_str() {
            Some("response.output_audio.delta") => {
                let bytes = b64.decode(e["delta"].as_str().unwrap()).unwrap();
                pcm.extend(
                    bytes
                        .chunks_exact(2)
                        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0),
                );
            }
            Some("response.output_audio_transcript.delta") => {
                transcript.push_str(e["delta"].as_str().unwrap())
            }
            _ => {}
        }
    }
    (pcm, transcript)
}

/// 24 kHz f32 samples as base64 PCM16LE.
pub fn pcm_b64(samples: &[f32]) -> String {
    let bytes: Vec<u8> = samples
        .iter()
        .flat_map(|s| ((s.clamp(-1.0, 1.0) * 32767.0) as i16).to_le_bytes())
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes a base64 PCM16LE delta into its sample count.
pub fn b64_len(b64: &str) -> usize {
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64")
        .len()
}

/// Synthetic voiced audio at 24 kHz (see [`duet_media::pcm::synthetic_voice`]).
pub fn voiced(secs: f32) -> Vec<f32> {
    duet_media::pcm::synthetic_voice(secs)
}

/// Digital silence.
pub fn silence(secs: f32) -> Vec<f32> {
    vec![0.0; (secs * 24_000.0) as usize]
}

/// Asserts that `types` contains `expected` as a subsequence, in order.
pub fn assert_in_order(types: &[String], expected: &[&str]) {
    let mut it = types.iter();
    for want in expected {
        assert!(
            it.any(|t| t == want),
            "missing {want:?} in order; got {types:#?}"
        );
    }
}

/// Every received event is checked: no `null` where the GA types make a field optional but
/// not nullable (strict clients such as agents-js drop such events).
pub fn assert_nulls_allowed(v: &Value) {
    let bad = duet::protocol::strict::forbidden_nulls(v);
    assert!(
        bad.is_empty(),
        "null where the GA types forbid it: {bad:?} in {v}"
    );
}

/// Synthetic voiced audio at 48 kHz (the WebRTC clients' rate).
pub fn voiced48(secs: f32) -> Vec<f32> {
    voiced(secs).iter().flat_map(|s| [*s, *s]).collect()
}

/// The error of a WebSocket connect that must be refused.
pub fn refused<T>(
    r: Result<T, tokio_tungstenite::tungstenite::Error>,
) -> tokio_tungstenite::tungstenite::Error {
    match r {
        Ok(_) => panic!("the connection was accepted"),
        Err(e) => e,
    }
}

/// The HTTP status of a failed WebSocket handshake (0 if it failed otherwise).
pub fn handshake_status(e: &tokio_tungstenite::tungstenite::Error) -> u16 {
    match e {
        tokio_tungstenite::tungstenite::Error::Http(r) => r.status().as_u16(),
        _ => 0,
    }
}

/// POSTs the fixture offer (Chrome's); returns the call id. The call never connects.
pub async fn offer_call(addr: SocketAddr) -> String {
    let offer = include_str!("../fixtures/chrome_offer.sdp");
    let (id, _answer) = duet_client::http::post_offer(addr, offer, None)
        .await
        .expect("the offer is answered with 201");
    id
}

/// Raises this process's open-file limit to its hard limit (tests that open hundreds of
/// sockets, server and client side both in this process).
pub fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a valid rlimit struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
