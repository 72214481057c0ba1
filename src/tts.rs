//! Text to speech from any OpenAI-compatible server (`--tts-url`: OpenAI, Kokoro-FastAPI,
//! speaches, LocalAI): the cascade's voice, one clause per request. Each clause is POSTed to
//! `{url}/audio/speech` as OpenAI's API takes it (`{model, input, voice, response_format:
//! "pcm", speed}`; `voice` is the session's `audio.output.voice`, unchanged) and its 24 kHz
//! PCM16 body is handed to the answer as it streams in, so playout starts with the first
//! bytes. An answer dropped mid-clause (a barge-in) closes the request at the next piece.
//!
//! It runs on the cascade's synthesis threads ([`REMOTE_SPEAKERS`] of them, each fetching a
//! clause), blocking each on the server's runtime.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use duet_models::cascade::Speaker;
use duet_models::ModelError;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use hyper::Uri;

use crate::http_client::{self, HttpClient, Pool};

/// Synthesis threads of a remote voice: clauses fetched at once, over every answer.
pub const REMOTE_SPEAKERS: usize = 8;
/// Longest wait for a clause's first bytes, and between two pieces of it.
pub const PIECE_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest clause audio taken (bytes of PCM16 at 24 kHz: 2 minutes).
pub const MAX_CLAUSE_BYTES: usize = 2 * 60 * 48_000;
/// Largest error body read.
const MAX_ERROR_BYTES: usize = 64 * 1024;

/// `{url}/audio/speech`, or why `url` cannot be a speech server's base URL.
pub fn endpoint(url: &str) -> anyhow::Result<Uri> {
    let endpoint: Uri = format!("{}/audio/speech", url.trim_end_matches('/'))
        .parse()
        .map_err(|e| anyhow::anyhow!("--tts-url {url:?} is not a URL: {e}"))?;
    http_client::check_url(&endpoint).map_err(|why| anyhow::anyhow!("--tts-url {url:?} {why}"))?;
    Ok(endpoint)
}

/// The server's voice: Piper (one instance, shared: a clause or a request at a time) or a
/// remote speech server.
#[derive(Clone)]
pub enum Voice {
    /// A voice run here, and its name.
    Embedded(Arc<Mutex<Box<dyn Speaker>>>, Arc<str>),
    /// An OpenAI-compatible speech server.
    Remote(RemoteVoice),
}

impl Voice {
    /// A voice run here, called `name`.
    pub fn embedded(speaker: Box<dyn Speaker>, name: &str) -> Self {
        Voice::Embedded(Arc::new(Mutex::new(speaker)), Arc::from(name))
    }

    /// The voice's name (`/v1/models`): the embedded voice's, or the remote `--tts-model`.
    pub fn name(&self) -> &str {
        match self {
            Voice::Embedded(_, name) => name,
            Voice::Remote(r) => &r.model,
        }
    }

    /// The cascade's speakers: the shared one, or [`REMOTE_SPEAKERS`] of a remote voice.
    pub fn speakers(&self) -> Vec<Box<dyn Speaker>> {
        match self {
            Voice::Embedded(shared, _) => vec![Box::new(Shared(shared.clone()))],
            Voice::Remote(r) => (0..REMOTE_SPEAKERS)
                .map(|_| Box::new(r.clone()) as Box<dyn Speaker>)
                .collect(),
        }
    }

    /// One speaker (for a request of `/v1/audio/speech`).
    pub fn speaker(&self) -> Box<dyn Speaker> {
        match self {
            Voice::Embedded(shared, _) => Box::new(Shared(shared.clone())),
            Voice::Remote(r) => Box::new(r.clone()),
        }
    }
}

/// The embedded voice, used under its lock.
struct Shared(Arc<Mutex<Box<dyn Speaker>>>);

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Box<dyn Speaker>> {
        // A voice that panicked mid-clause is still a voice.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Speaker for Shared {
    fn speak(&mut self, text: &str, speed: f32) -> Result<Vec<f32>, ModelError> {
        self.lock().speak(text, speed)
    }

    fn speak_streaming(
        &mut self,
        text: &str,
        speed: f32,
        voice: &str,
        out: &mut dyn FnMut(Vec<f32>) -> bool,
    ) -> Result<Vec<f32>, ModelError> {
        self.lock().speak_streaming(text, speed, voice, out)
    }
}

/// An OpenAI-compatible speech server.
#[derive(Clone)]
pub struct RemoteVoice {
    client: HttpClient,
    endpoint: Uri,
    model: String,
    key: Option<String>,
    runtime: tokio::runtime::Handle,
}

impl RemoteVoice {
    /// The server at base URL `url` (`{url}/audio/speech` is called), asked for `model`,
    /// with `key` as its bearer token; requests run on `runtime`.
    pub fn new(
        url: &str,
        model: &str,
        key: Option<String>,
        runtime: tokio::runtime::Handle,
    ) -> anyhow::Result<Self> {
        let endpoint = endpoint(url)?;
        let client = HttpClient::new(Pool {
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(90),
            max_idle_per_host: REMOTE_SPEAKERS,
            upstream: "tts",
        });
        Ok(Self {
            client,
            endpoint,
            model: model.to_string(),
            key: key.filter(|k| !k.is_empty()),
            runtime,
        })
    }

    /// The request for `text` in `voice` at `speed`.
    fn request(
        &self,
        text: &str,
        speed: f32,
        voice: &str,
    ) -> Result<hyper::Request<Full<Bytes>>, ModelError> {
        let body = serde_json::json!({
            "model": self.model,
            "input": text,
            "voice": voice,
            "response_format": "pcm",
            "speed": speed,
        });
        let mut req =
            hyper::Request::post(self.endpoint.clone()).header(CONTENT_TYPE, "application/json");
        if let Some(key) = &self.key {
            req = req.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        req.body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| ModelError::Failed(e.to_string()))
    }

    /// Fetches `text`, handing samples to `out` as they come (until it answers `false`).
    /// Each wait runs on the runtime; `out` runs on the calling thread, outside it (it may
    /// block on a slow consumer).
    fn fetch(
        &self,
        text: &str,
        speed: f32,
        voice: &str,
        out: &mut dyn FnMut(Vec<f32>) -> bool,
    ) -> Result<(), String> {
        let mut body = self.runtime.block_on(self.open(text, speed, voice))?;
        let secs = PIECE_TIMEOUT.as_secs();
        let mut pcm = Pcm16::default();
        loop {
            let next = async { tokio::time::timeout(PIECE_TIMEOUT, body.frame()).await };
            let frame = self
                .runtime
                .block_on(next)
                .map_err(|_| format!("the speech server went quiet for {secs} s"))?;
            let Some(frame) = frame else { return Ok(()) };
            let frame = frame.map_err(|e| format!("the speech server's audio broke off: {e}"))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let samples = pcm.push(&data).map_err(|()| {
                let most = MAX_CLAUSE_BYTES / 48_000;
                format!("the speech server sent over {most} s of audio for one clause")
            })?;
            // Dropping the body closes the request: nobody wants the rest.
            if !samples.is_empty() && !out(samples) {
                return Ok(());
            }
        }
    }

    /// Asks for `text` and waits for the answer's head: its body, or why it failed (an
    /// error answer's message, the key redacted).
    async fn open(&self, text: &str, speed: f32, voice: &str) -> Result<Incoming, String> {
        let req = self
            .request(text, speed, voice)
            .map_err(|e| e.to_string())?;
        let secs = PIECE_TIMEOUT.as_secs();
        let resp = tokio::time::timeout(PIECE_TIMEOUT, self.client.send(req))
            .await
            .map_err(|_| format!("the speech server did not answer within {secs} s"))?
            .map_err(|why| format!("the speech server is unreachable: {why}"))?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp.into_body());
        }
        let bytes = Limited::new(resp.into_body(), MAX_ERROR_BYTES)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let message = crate::llm::error_message(&text, self.key.as_deref());
        let code = status.as_u16();
        Err(format!("the speech server answered HTTP {code}: {message}"))
    }
}

impl Speaker for RemoteVoice {
    fn speak(&mut self, text: &str, speed: f32) -> Result<Vec<f32>, ModelError> {
        let mut all = Vec::new();
        self.speak_streaming(text, speed, "alloy", &mut |s| {
            all.extend(s);
            true
        })?;
        Ok(all)
    }

    fn speak_streaming(
        &mut self,
        text: &str,
        speed: f32,
        voice: &str,
        out: &mut dyn FnMut(Vec<f32>) -> bool,
    ) -> Result<Vec<f32>, ModelError> {
        self.fetch(text, speed, voice, out)
            .map_err(ModelError::Failed)?;
        Ok(Vec::new())
    }
}

/// PCM16 little-endian bytes that arrive in pieces of any length, to samples.
#[derive(Default)]
struct Pcm16 {
    /// A byte of a sample cut between two pieces.
    odd: Option<u8>,
    total: usize,
}

impl Pcm16 {
    /// The whole samples of `data` (with a byte held from before); `Err` past the limit.
    fn push(&mut self, data: &[u8]) -> Result<Vec<f32>, ()> {
        self.total += data.len();
        if self.total > MAX_CLAUSE_BYTES {
            return Err(());
        }
        let mut bytes = data;
        let mut out = Vec::with_capacity(data.len() / 2 + 1);
        if let (Some(lo), Some((&hi, rest))) = (self.odd, bytes.split_first()) {
            out.push(duet_media::i16_to_f32(i16::from_le_bytes([lo, hi])));
            self.odd = None;
            bytes = rest;
        }
        let pairs = bytes.chunks_exact(2);
        if let [last] = pairs.remainder() {
            self.odd = Some(*last);
        }
        out.extend(pairs.map(|p| duet_media::i16_to_f32(i16::from_le_bytes([p[0], p[1]]))));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_cut_between_pieces_are_joined() {
        let samples: Vec<i16> = vec![0, 1000, -1000, i16::MAX, i16::MIN];
        let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
        for cut in [1, 3, 4, 7] {
            let mut pcm = Pcm16::default();
            let mut got = pcm.push(&bytes[..cut]).unwrap();
            got.extend(pcm.push(&bytes[cut..]).unwrap());
            let want: Vec<f32> = samples.iter().map(|&s| duet_media::i16_to_f32(s)).collect();
            assert_eq!(got, want, "cut at {cut}");
        }
    }

    #[test]
    fn a_runaway_clause_is_refused() {
        let mut pcm = Pcm16::default();
        assert!(pcm.push(&vec![0; MAX_CLAUSE_BYTES]).is_ok());
        assert!(pcm.push(&[0, 0]).is_err());
    }
}
