//! Speech to text for sessions: the embedded transcriber on its loop thread
//! (`--transcription-model-dir`), or any OpenAI-compatible server (`--stt-url`: OpenAI,
//! Groq, vLLM, speaches, LocalAI). Sessions see one [`TranscriberPort`] either way.
//!
//! The remote one is an utterance transcriber: each utterance that ends (a committed item, a
//! speculative start's audio, words over an answer) is POSTed whole to
//! `{url}/audio/transcriptions` as OpenAI's API takes it (multipart: `file` a 16-bit WAV of
//! the utterance, `model` = `--stt-model`, `response_format=json`, `language` and `prompt`
//! when the session set them) on a task of the server's runtime, at most [`IN_FLIGHT`] per
//! session at once; the answer's `text` comes back as the item's transcript. Each request is
//! bounded ([`REQUEST_TIMEOUT`], [`MAX_ANSWER_BYTES`]), its audio is charged to the
//! session's memory meter while it is out, and a session that ends aborts its requests.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use duet_models::{ModelError, TranscribeOutput};
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use hyper::Uri;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::AbortHandle;

use crate::http_client::{self, HttpClient, Pool};
use crate::memory::Meter;
use crate::session::{TranscriberPort, TranscriptEvent, TranscriptionHints};
use crate::transcribe_loop::{TranscribeLoop, MAX_QUEUED_SAMPLES, SESSION_CHANNEL};

/// Longest wait for one transcription's answer, connect to last byte.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for the embedded transcriber's answer to one clip.
pub const CLIP_TIMEOUT: Duration = Duration::from_secs(120);
/// Requests one session may have out at once; an utterance beyond them fails at once.
pub const IN_FLIGHT: usize = 4;
/// Largest answer read.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;
/// The rate of the WAV sent (the session rate).
const RATE: u32 = duet_media::SESSION_RATE;

/// The server's speech-to-text: embedded or remote.
#[derive(Clone)]
pub enum Stt {
    /// A transcriber on its loop thread.
    Embedded(TranscribeLoop),
    /// An OpenAI-compatible server.
    Remote(Arc<RemoteStt>),
}

/// A session's stream on the transcriber and the channel its answers come on.
pub type SttStream = (Box<dyn TranscriberPort>, mpsc::Receiver<TranscriptEvent>);

impl Stt {
    /// Opens a session's stream, its queued audio charged to `meter`.
    pub async fn open(&self, meter: Option<Arc<Meter>>) -> Result<SttStream, ModelError> {
        match self {
            Stt::Embedded(l) => {
                let (port, rx) = l.open(meter).await?;
                Ok((Box::new(port), rx))
            }
            Stt::Remote(r) => {
                let (port, rx) = r.open(meter);
                Ok((Box::new(port), rx))
            }
        }
    }

    /// False once an embedded transcriber's thread ended (a remote one is always alive:
    /// its failures fail utterances).
    pub fn is_alive(&self) -> bool {
        match self {
            Stt::Embedded(l) => l.is_alive(),
            Stt::Remote(_) => true,
        }
    }

    /// True once an embedded transcriber warmed up.
    pub fn is_ready(&self) -> bool {
        match self {
            Stt::Embedded(l) => l.is_ready(),
            Stt::Remote(_) => true,
        }
    }

    /// Transcribes one clip (24 kHz) on a stream of its own (`/v1/audio/transcriptions`):
    /// its text and the language it was heard in (when known), or why not.
    pub async fn transcribe_clip(
        &self,
        pcm: Vec<f32>,
        hints: &TranscriptionHints,
    ) -> Result<(String, Option<String>), String> {
        let loop_ = match self {
            Stt::Remote(r) => {
                let text = r.transcribe(&pcm, hints).await?;
                return Ok((text, hints.language.clone()));
            }
            Stt::Embedded(l) => l,
        };
        let (port, mut rx) = loop_.open(None).await.map_err(|e| e.to_string())?;
        port.hints(hints);
        port.send(Arc::from("clip"), Arc::from(pcm), true, false);
        let answer = async {
            while let Some(ev) = rx.recv().await {
                match ev.output {
                    Ok(TranscribeOutput::Completed { text, language, .. }) => {
                        let language = language.or_else(|| hints.language.clone());
                        return Ok((text.trim().to_string(), language));
                    }
                    Err(e) => return Err(e),
                    Ok(_) => {}
                }
            }
            Err("the transcriber stopped".to_string())
        };
        let secs = CLIP_TIMEOUT.as_secs();
        tokio::time::timeout(CLIP_TIMEOUT, answer)
            .await
            .map_err(|_| format!("the transcriber did not answer within {secs} s"))?
    }

    /// The name sessions report as their transcription model.
    pub fn name(&self) -> &str {
        match self {
            Stt::Embedded(l) => &l.info().name,
            Stt::Remote(r) => &r.model,
        }
    }
}

/// An OpenAI-compatible transcription server.
pub struct RemoteStt {
    client: HttpClient,
    endpoint: Uri,
    model: String,
    key: Option<String>,
}

impl RemoteStt {
    /// The server at base URL `url` (`{url}/audio/transcriptions` is called), asked for
    /// `model`, with `key` as its bearer token.
    pub fn new(url: &str, model: &str, key: Option<String>) -> anyhow::Result<Self> {
        let endpoint: Uri = format!("{}/audio/transcriptions", url.trim_end_matches('/'))
            .parse()
            .map_err(|e| anyhow::anyhow!("--stt-url {url:?} is not a URL: {e}"))?;
        http_client::check_url(&endpoint)
            .map_err(|why| anyhow::anyhow!("--stt-url {url:?} {why}"))?;
        let client = HttpClient::new(Pool {
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(90),
            max_idle_per_host: 64,
            upstream: "stt",
        });
        Ok(Self {
            client,
            endpoint,
            model: model.to_string(),
            key: key.filter(|k| !k.is_empty()),
        })
    }

    /// A session's stream.
    pub fn open(
        self: &Arc<Self>,
        meter: Option<Arc<Meter>>,
    ) -> (RemoteSttSession, mpsc::Receiver<TranscriptEvent>) {
        let (events, rx) = mpsc::channel(SESSION_CHANNEL);
        let session = RemoteSttSession {
            stt: self.clone(),
            events,
            hints: Mutex::default(),
            in_flight: Arc::new(Semaphore::new(IN_FLIGHT)),
            meter,
            tasks: Mutex::default(),
        };
        (session, rx)
    }

    /// Transcribes `pcm` (24 kHz): its text, or why not.
    pub async fn transcribe(
        &self,
        pcm: &[f32],
        hints: &TranscriptionHints,
    ) -> Result<String, String> {
        let req = self.request(pcm, hints)?;
        let answer = async {
            let resp = self
                .client
                .send(req)
                .await
                .map_err(|why| format!("the transcription server is unreachable: {why}"))?;
            self.text_of(resp).await
        };
        let secs = REQUEST_TIMEOUT.as_secs();
        tokio::time::timeout(REQUEST_TIMEOUT, answer)
            .await
            .map_err(|_| format!("the transcription server did not answer within {secs} s"))?
    }

    /// The upload of `pcm`, as OpenAI's API takes it.
    fn request(
        &self,
        pcm: &[f32],
        hints: &TranscriptionHints,
    ) -> Result<hyper::Request<Full<Bytes>>, String> {
        let wav = duet_media::pcm::wav_pcm16(pcm, RATE);
        let mut parts: Vec<duet_signaling::multipart::Field<'_>> = vec![
            ("file", Some("audio.wav"), Some("audio/wav"), &wav),
            ("model", None, None, self.model.as_bytes()),
            ("response_format", None, None, b"json"),
        ];
        if let Some(l) = &hints.language {
            parts.push(("language", None, None, l.as_bytes()));
        }
        if let Some(p) = &hints.prompt {
            parts.push(("prompt", None, None, p.as_bytes()));
        }
        let boundary = format!("duet-{:032x}", rand::random::<u128>());
        let (ctype, body) = duet_signaling::multipart::write(&boundary, &parts);
        let mut req = hyper::Request::post(self.endpoint.clone()).header(CONTENT_TYPE, ctype);
        if let Some(key) = &self.key {
            req = req.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        req.body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())
    }

    /// The `text` of a `json` answer, or the error it carries (the key redacted).
    async fn text_of(
        &self,
        resp: hyper::Response<hyper::body::Incoming>,
    ) -> Result<String, String> {
        let status = resp.status();
        let body = Limited::new(resp.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| format!("the transcription server's answer broke off: {e}"))?
            .to_bytes();
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            let message = crate::llm::error_message(&text, self.key.as_deref());
            let code = status.as_u16();
            return Err(format!(
                "the transcription server answered HTTP {code}: {message}"
            ));
        }
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("the transcription server's answer is not JSON: {e}"))?;
        v["text"]
            .as_str()
            .map(|t| t.trim().to_string())
            .ok_or_else(|| "the transcription server's answer has no text".to_string())
    }
}

/// A session's stream on a [`RemoteStt`].
pub struct RemoteSttSession {
    stt: Arc<RemoteStt>,
    events: mpsc::Sender<TranscriptEvent>,
    hints: Mutex<TranscriptionHints>,
    in_flight: Arc<Semaphore>,
    meter: Option<Arc<Meter>>,
    /// Requests out (aborted when the session ends).
    tasks: Mutex<Vec<AbortHandle>>,
}

impl RemoteSttSession {
    fn fail(&self, item_id: Arc<str>, why: String) {
        let _ = self.events.try_send(TranscriptEvent {
            item_id,
            output: Err(why),
        });
    }
}

impl TranscriberPort for RemoteSttSession {
    fn name(&self) -> &str {
        &self.stt.model
    }

    fn streaming(&self) -> bool {
        false
    }

    fn hints(&self, hints: &TranscriptionHints) {
        if let Ok(mut h) = self.hints.lock() {
            h.clone_from(hints);
        }
    }

    fn send(&self, item_id: Arc<str>, pcm: Arc<[f32]>, end: bool, _logprobs: bool) {
        if !end {
            return; // not streaming: utterances come whole, with their end
        }
        if pcm.len() > MAX_QUEUED_SAMPLES {
            let secs = MAX_QUEUED_SAMPLES / RATE as usize;
            return self.fail(item_id, format!("the utterance is over {secs} s"));
        }
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            let why =
                format!("{IN_FLIGHT} transcriptions are already out; this utterance was dropped");
            return self.fail(item_id, why);
        };
        let bytes = std::mem::size_of_val(&*pcm) as u64;
        let charge = match self.meter.as_ref().map(|m| m.charge(bytes)).transpose() {
            Ok(charge) => charge,
            Err(e) => return self.fail(item_id, format!("{e}; this utterance was dropped")),
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return self.fail(item_id, "no runtime to send the utterance on".into());
        };
        let hints = self.hints.lock().map(|h| h.clone()).unwrap_or_default();
        let (stt, events) = (self.stt.clone(), self.events.clone());
        let task = runtime.spawn(async move {
            let audio_seconds = pcm.len() as f64 / f64::from(RATE);
            let output =
                stt.transcribe(&pcm, &hints)
                    .await
                    .map(|text| TranscribeOutput::Completed {
                        text,
                        logprobs: Vec::new(),
                        audio_seconds,
                        language: None,
                    });
            drop((charge, permit));
            let _ = events.send(TranscriptEvent { item_id, output }).await;
        });
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.retain(|t| !t.is_finished());
            tasks.push(task.abort_handle());
        }
    }
}

impl Drop for RemoteSttSession {
    fn drop(&mut self) {
        if let Ok(tasks) = self.tasks.lock() {
            tasks.iter().for_each(AbortHandle::abort);
        }
    }
}
