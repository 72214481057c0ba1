//! A scripted OpenAI-compatible server on loopback, for the cascade's tests and benches: each
//! request (`POST …/chat/completions` in OpenAI's chat shapes, or `…/audio/transcriptions`
//! answered with OpenAI's `{"text": …}`) takes the next scripted reply (streamed chat chunks,
//! a status and body, or silence) and is recorded (its JSON body, and its raw head and body).
//! Keep-alive, so pooled connections are exercised as a real server would.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A request as it came: its head (request line and headers) and its body.
pub type RawRequest = (String, Vec<u8>);

/// One scripted reply.
#[derive(Clone, Debug)]
pub enum Reply {
    /// `200` and these SSE `data` payloads, `gap` apart, then the end of the stream.
    Stream {
        /// The events' `data`.
        data: Vec<String>,
        /// The wait after each.
        gap: Duration,
    },
    /// This status and body.
    Status(u16, String),
    /// `200` with this content type and a chunked body of these pieces, `gap` apart (an
    /// `/audio/speech` answer streaming PCM, as OpenAI's does).
    Bytes {
        /// The `Content-Type`.
        content_type: String,
        /// The body's pieces.
        parts: Vec<Vec<u8>>,
        /// The wait after each.
        gap: Duration,
    },
    /// Reads the request and never answers.
    Hang,
}

impl Reply {
    /// A streamed text answer in `pieces`, then `[DONE]`.
    pub fn text(pieces: &[&str]) -> Self {
        let mut data: Vec<String> = pieces
            .iter()
            .map(|p| json!({"choices":[{"index":0,"delta":{"content":p}}]}).to_string())
            .collect();
        data.push(json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}).to_string());
        data.push("[DONE]".into());
        Self::Stream {
            data,
            gap: Duration::from_millis(5),
        }
    }

    /// A streamed call of `name` with `arguments` cut in `pieces` pieces, then `[DONE]`.
    pub fn call(call_id: &str, name: &str, arguments: &str, pieces: usize) -> Self {
        let mut data = vec![
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,
            "id":call_id,"type":"function","function":{"name":name,"arguments":""}}]}}]})
            .to_string(),
        ];
        let chars: Vec<char> = arguments.chars().collect();
        for part in chars.chunks(chars.len().div_ceil(pieces.max(1)).max(1)) {
            let part: String = part.iter().collect();
            data.push(
                json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,
                "function":{"arguments":part}}]}}]})
                .to_string(),
            );
        }
        data.push(
            json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}).to_string(),
        );
        data.push("[DONE]".into());
        Self::Stream {
            data,
            gap: Duration::from_millis(5),
        }
    }
}

/// The running server: its base URL, and what it received.
#[derive(Clone)]
pub struct ScriptedLlm {
    /// `http://127.0.0.1:PORT/v1`.
    pub url: String,
    /// Replies not yet given.
    pub replies: Arc<Mutex<VecDeque<Reply>>>,
    /// Request bodies, in order.
    pub requests: Arc<Mutex<Vec<Value>>>,
    /// `Authorization` headers, in order.
    pub auth: Arc<Mutex<Vec<Option<String>>>>,
    /// Connections accepted.
    pub connections: Arc<Mutex<usize>>,
    /// When a client closed a stream before its end.
    pub closed: Arc<Mutex<Vec<std::time::Instant>>>,
    /// When each request arrived (its body read).
    pub received: Arc<Mutex<Vec<std::time::Instant>>>,
    /// A reply for every request once the scripted ones are given (none: hang).
    pub default_reply: Arc<Mutex<Option<Reply>>>,
    /// Every request as it came: its head (request line and headers) and its body (what a
    /// multipart upload is checked on).
    pub raw: Arc<Mutex<Vec<RawRequest>>>,
}

impl ScriptedLlm {
    /// Starts on a free loopback port with `replies`.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("addr");
        let llm = Self {
            url: format!("http://{addr}/v1"),
            replies: Arc::new(Mutex::new(replies.into())),
            requests: Arc::default(),
            auth: Arc::default(),
            connections: Arc::default(),
            closed: Arc::default(),
            received: Arc::default(),
            default_reply: Arc::default(),
            raw: Arc::default(),
        };
        let server = llm.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                *server.connections.lock().unwrap() += 1;
                tokio::spawn(server.clone().serve(stream));
            }
        });
        llm
    }

    /// Adds replies.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.replies.lock().unwrap().extend(replies);
    }

    /// The request bodies so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    async fn serve(self, mut stream: TcpStream) {
        let mut buf = Vec::new();
        loop {
            let Some((head, body)) = read_request(&mut stream, &mut buf).await else {
                return;
            };
            let auth = head
                .lines()
                .find_map(|l| {
                    l.strip_prefix("authorization: ")
                        .or_else(|| l.strip_prefix("Authorization: "))
                })
                .map(str::to_string);
            self.auth.lock().unwrap().push(auth);
            self.received
                .lock()
                .unwrap()
                .push(std::time::Instant::now());
            self.requests
                .lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
            self.raw.lock().unwrap().push((head.clone(), body));
            let reply = self
                .replies
                .lock()
                .unwrap()
                .pop_front()
                .or_else(|| self.default_reply.lock().unwrap().clone());
            let ok = self.answer(&mut stream, reply).await;
            if !ok {
                return;
            }
        }
    }

    /// Sends `reply`; `false` when the connection is done with (the client went away, or a
    /// hanging reply ended).
    async fn answer(&self, stream: &mut TcpStream, reply: Option<Reply>) -> bool {
        let closed = |done: bool| {
            if !done {
                self.closed.lock().unwrap().push(std::time::Instant::now());
            }
            done
        };
        match reply {
            Some(Reply::Stream { data, gap }) => {
                let events: Vec<Vec<u8>> = data
                    .iter()
                    .map(|d| format!("data: {d}\n\n").into_bytes())
                    .collect();
                closed(stream_reply(stream, "text/event-stream", &events, gap).await)
            }
            Some(Reply::Bytes {
                content_type,
                parts,
                gap,
            }) => closed(stream_reply(stream, &content_type, &parts, gap).await),
            Some(Reply::Status(code, body)) => {
                let head = format!("HTTP/1.1 {code} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
                stream.write_all(head.as_bytes()).await.is_ok()
                    && stream.write_all(body.as_bytes()).await.is_ok()
            }
            Some(Reply::Hang) | None => {
                // Wait until the client gives up (or the test ends).
                let mut sink = [0u8; 64];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                false
            }
        }
    }
}

/// Reads one request: its head (lowercase-insensitive as sent) and its body.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0usize);
            while buf.len() < end + 4 + len {
                let mut chunk = [0u8; 8192];
                let n = stream.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            return Some((head, body));
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `200` with `data` as the chunks of a `content_type` body; `false` when the client went
/// away.
async fn stream_reply(
    stream: &mut TcpStream,
    content_type: &str,
    data: &[Vec<u8>],
    gap: Duration,
) -> bool {
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    if stream.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    for (i, d) in data.iter().enumerate() {
        let mut chunk = format!("{:x}\r\n", d.len()).into_bytes();
        chunk.extend_from_slice(d);
        chunk.extend_from_slice(b"\r\n");
        if stream.write_all(&chunk).await.is_err() {
            return false;
        }
        if i + 1 == data.len() {
            break; // the end follows the last event at once, as real servers send it
        }
        // Waits `gap`, noticing at once a client that closes the connection.
        let mut probe = [0u8; 64];
        tokio::select! {
            _ = tokio::time::sleep(gap) => {}
            n = stream.read(&mut probe) => if !matches!(n, Ok(n) if n > 0) {
                return false;
            },
        }
    }
    stream.write_all(b"0\r\n\r\n").await.is_ok()
}
