//! `POST /v1/audio/transcriptions`: OpenAI's speech-to-text endpoint on the server's own
//! address, key and admission, answered by whatever transcribes for sessions (the embedded
//! Whisper, or the server of `--stt-url`). Multipart in, as OpenAI's API takes it: `file` (a
//! WAV: 16-bit or float PCM, any rate and channel count), `model` (reported, not used),
//! `language`, `prompt`, `response_format` (`json`, `text`, `verbose_json`); `temperature`
//! and the rest are accepted and ignored. The audio's seconds count in `/v1/usage`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use duet_signaling::multipart;
use serde_json::json;

use super::chat::{admit, held, Hold, Peer};
use super::secrets::{credential, Cred, Credential};
use super::AppState;
use crate::error::{ApiError, Code};
use crate::session::{TranscriptionHints, UsageEvent};

/// The largest upload (OpenAI's limit).
const MAX_UPLOAD: usize = 25 << 20;
/// The longest audio taken, in seconds.
const MAX_SECONDS: usize = 600;
/// The session rate every transcriber takes.
const RATE: u32 = duet_media::SESSION_RATE;

/// `POST /v1/audio/transcriptions`.
pub async fn transcriptions(
    State(state): State<Arc<AppState>>,
    peer: Peer,
    cred: Cred,
    req: Request,
) -> Response {
    let cred = credential(&cred);
    serve(&state, &peer, &cred, req, MAX_UPLOAD, |req| async {
        let Some(stt) = state.backends.speech.transcriber.clone() else {
            return Err(ApiError::new(
                Code::TranscriptionNotConfigured,
                "no transcriber is configured: start the server with --transcription-model-dir or --stt-url",
            ));
        };
        let mut upload = Upload::read(req).await?;
        let samples = upload.pcm.len() as u64;
        let (text, language) = stt
            .transcribe_clip(std::mem::take(&mut upload.pcm), &upload.hints)
            .await
            .map_err(|e| ApiError::new(Code::TranscriptionFailed, e))?;
        let usage = state.credentials.usage.sink(&cred.usage_id());
        usage.record(UsageEvent::AudioIn(samples));
        Ok(upload.answer(&text, language.as_deref(), samples, stt.name()))
    })
    .await
}

/// Serves an audio request: the server key only, admitted like a session with room for a
/// `max`-byte body, answered by `answer` (holding its admission until the answer is sent).
async fn serve<F, Fut>(
    state: &Arc<AppState>,
    peer: &Peer,
    cred: &Credential,
    req: Request,
    max: usize,
    answer: F,
) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Result<Response, ApiError>>,
{
    if !matches!(cred, Credential::Server) {
        let why = "the audio endpoints need the server's API key (client secrets open realtime sessions only)";
        return ApiError::new(Code::InvalidApiKey, why).into_response();
    }
    let mut hold: Hold = Vec::new();
    if let Err(e) = admit(state, peer, cred, &req, max, &mut hold) {
        return e.into_response();
    }
    match answer(req).await {
        Ok(resp) => held(resp, hold),
        Err(e) => e.into_response(),
    }
}

/// A transcription request, read.
struct Upload {
    pcm: Vec<f32>,
    hints: TranscriptionHints,
    format: Format,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Text,
    VerboseJson,
}

impl Upload {
    async fn read(req: Request) -> Result<Self, ApiError> {
        let ctype = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = super::calls::read_body(req, MAX_UPLOAD, "upload").await?;
        let limits = multipart::Limits {
            max_parts: 32,
            ..multipart::Limits::default()
        };
        let parts = multipart::parse(&ctype, &body, limits)
            .map_err(|e| ApiError::new(Code::InvalidMultipart, e.to_string()))?;
        let text = |name: &str| {
            parts
                .iter()
                .find(|p| p.name == name)
                .map(|p| String::from_utf8_lossy(&p.data).trim().to_string())
                .filter(|s| !s.is_empty())
        };
        let format = match text("response_format").as_deref() {
            None | Some("json") => Format::Json,
            Some("text") => Format::Text,
            Some("verbose_json") => Format::VerboseJson,
            Some(other) => {
                return Err(ApiError::new(
                    Code::InvalidValue,
                    format!("response_format {other:?}: Duet answers json, text or verbose_json"),
                )
                .with_param("response_format"))
            }
        };
        let hints = TranscriptionHints {
            language: text("language"),
            prompt: text("prompt"),
        };
        let file = parts.iter().find(|p| p.name == "file").ok_or_else(|| {
            ApiError::new(
                Code::MissingRequiredParameter,
                "the upload has no file part",
            )
            .with_param("file")
        })?;
        let pcm = session_audio(&file.data)?;
        Ok(Self { pcm, hints, format })
    }

    /// The answer in the asked format.
    fn answer(&self, text: &str, language: Option<&str>, samples: u64, model: &str) -> Response {
        match self.format {
            Format::Json => axum::Json(json!({ "text": text })).into_response(),
            Format::Text => (
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                format!("{text}\n"),
            )
                .into_response(),
            Format::VerboseJson => {
                let duration = samples as f64 / f64::from(RATE);
                // A transcriber that detects no language (English-only Whisper) heard English.
                let language = language_name(language.unwrap_or("en"));
                axum::Json(json!({
                    "task": "transcribe",
                    "language": language,
                    "duration": duration,
                    "text": text,
                    "segments": [{"id": 0, "seek": 0, "start": 0.0, "end": duration, "text": text}],
                    "model": model,
                }))
                .into_response()
            }
        }
    }
}

/// A WAV file's audio at the session rate, mono.
fn session_audio(wav: &[u8]) -> Result<Vec<f32>, ApiError> {
    let (rate, pcm) = duet_media::parse_wav(wav)
        .map_err(|e| ApiError::new(Code::InvalidAudio, e.to_string()).with_param("file"))?;
    if pcm.len() > MAX_SECONDS * rate as usize {
        return Err(ApiError::new(
            Code::InvalidAudio,
            format!("the audio is over {MAX_SECONDS} s"),
        )
        .with_param("file"));
    }
    let mut resampler = duet_media::StreamResampler::new(rate, RATE)
        .map_err(|e| ApiError::new(Code::InvalidAudio, e.to_string()).with_param("file"))?;
    let mut out = Vec::with_capacity(pcm.len() * RATE as usize / rate as usize + 1024);
    resampler.process(&pcm, &mut out);
    let delay = resampler.delay_samples();
    resampler.flush(&mut out);
    out.drain(..delay.min(out.len()));
    Ok(out)
}

/// The longest `input` (OpenAI's limit), in characters.
const MAX_INPUT_CHARS: usize = 4096;
/// The largest `/v1/audio/speech` request body.
const MAX_SPEECH_REQUEST: usize = 64 << 10;
/// Pieces of audio waiting for a slow client (each a clause, or a piece of a remote one).
const SPEECH_QUEUE: usize = 16;

/// `POST /v1/audio/speech`: the server's voice (Piper, or `--tts-url`) speaks `input`,
/// streamed clause by clause as raw 24 kHz PCM16 (`pcm`) or a WAV (`wav`, the default here:
/// Duet encodes no compressed formats).
pub async fn speech(
    State(state): State<Arc<AppState>>,
    peer: Peer,
    cred: Cred,
    req: Request,
) -> Response {
    let cred = credential(&cred);
    serve(&state, &peer, &cred, req, MAX_SPEECH_REQUEST, |req| async {
        let Some(voice) = state.backends.speech.voice.clone() else {
            return Err(ApiError::new(
                Code::SpeechNotConfigured,
                "no voice is configured: start the server with --tts-model-dir or --tts-url",
            ));
        };
        let body = super::calls::read_body(req, MAX_SPEECH_REQUEST, "request").await?;
        let ask = SpeechRequest::parse(&body)?;
        let usage = state.credentials.usage.sink(&cred.usage_id());
        ask.stream(voice, usage).await
    })
    .await
}

/// A `/v1/audio/speech` request, checked.
struct SpeechRequest {
    input: String,
    voice: String,
    speed: f32,
    wav: bool,
}

impl SpeechRequest {
    fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let v: serde_json::Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::new(Code::InvalidJson, format!("the body is not JSON: {e}")))?;
        let invalid = |param: &str, what: String| {
            ApiError::new(Code::InvalidValue, what).with_param(param.to_string())
        };
        let input = v["input"].as_str().unwrap_or_default().trim().to_string();
        if input.is_empty() {
            return Err(
                ApiError::new(Code::MissingRequiredParameter, "input is required")
                    .with_param("input"),
            );
        }
        if input.chars().count() > MAX_INPUT_CHARS {
            return Err(invalid(
                "input",
                format!("input is over {MAX_INPUT_CHARS} characters"),
            ));
        }
        let voice = match &v["voice"] {
            serde_json::Value::String(s) => s.clone(),
            other => other["id"].as_str().unwrap_or("alloy").to_string(),
        };
        let speed = v["speed"].as_f64().unwrap_or(1.0);
        if !(0.25..=4.0).contains(&speed) {
            return Err(invalid(
                "speed",
                format!("speed {speed} is not in 0.25..=4"),
            ));
        }
        let wav = match v["response_format"].as_str() {
            None | Some("wav") => true,
            Some("pcm") => false,
            Some(other) => {
                let why = format!("response_format {other:?}: Duet answers pcm or wav");
                return Err(invalid("response_format", why));
            }
        };
        Ok(Self {
            input,
            voice,
            speed: speed as f32,
            wav,
        })
    }

    /// Speaks on a bulk thread of its own, clause by clause, into a streamed answer. A voice that
    /// fails before any audio answers `502 speech_failed`; later, the stream just ends.
    async fn stream(
        self,
        voice: crate::tts::Voice,
        usage: Arc<dyn crate::session::UsageSink>,
    ) -> Result<Response, ApiError> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, String>>(SPEECH_QUEUE);
        let wav = self.wav;
        let speak = move || {
            crate::cpu_share::enter(crate::cpu_share::Share::Bulk);
            self.speak(voice.speaker(), &tx, &*usage);
        };
        // A thread of its own: a bulk thread stays bulk, and the runtime's blocking threads
        // are not to be lowered for whatever runs on them next.
        if let Err(e) = std::thread::Builder::new()
            .name("duet-speech".into())
            .spawn(speak)
        {
            return Err(ApiError::new(
                Code::SpeechFailed,
                format!("no thread to speak on: {e}"),
            ));
        }
        let first = match rx.recv().await {
            Some(Ok(bytes)) => bytes,
            Some(Err(e)) => return Err(ApiError::new(Code::SpeechFailed, e)),
            None => return Err(ApiError::new(Code::SpeechFailed, "the voice said nothing")),
        };
        let mut head = if wav {
            streaming_wav_header()
        } else {
            Vec::new()
        };
        head.extend(first);
        let rest = futures_util::stream::unfold(rx, |mut rx| async move {
            match rx.recv().await {
                Some(Ok(bytes)) => Some((
                    Ok::<_, std::convert::Infallible>(bytes::Bytes::from(bytes)),
                    rx,
                )),
                _ => None,
            }
        });
        let body = futures_util::StreamExt::chain(
            futures_util::stream::once(async move { Ok(bytes::Bytes::from(head)) }),
            rest,
        );
        let ctype = if wav { "audio/wav" } else { "audio/pcm" };
        Ok((
            [(header::CONTENT_TYPE, ctype)],
            axum::body::Body::from_stream(body),
        )
            .into_response())
    }

    /// Speaks every clause of the input, sending PCM16 bytes as they come; stops when the
    /// client is gone. Counts the audio sent in the usage.
    fn speak(
        self,
        mut speaker: Box<dyn duet_models::cascade::Speaker>,
        tx: &tokio::sync::mpsc::Sender<Result<Vec<u8>, String>>,
        usage: &dyn crate::session::UsageSink,
    ) {
        let mut clauses = duet_models::cascade::Clauses::default();
        let mut all: Vec<String> = clauses.push(&self.input);
        all.extend(clauses.finish());
        let mut sent = 0u64;
        let mut send = |pcm: Vec<f32>| {
            sent += pcm.len() as u64;
            pcm.is_empty()
                || tx
                    .blocking_send(Ok(duet_media::f32_to_pcm16le(&pcm)))
                    .is_ok()
        };
        for clause in all {
            match speaker.speak_streaming(&clause, self.speed, &self.voice, &mut send) {
                Ok(rest) => {
                    if !send(rest) {
                        break; // the client is gone
                    }
                }
                Err(e) => {
                    let _ = tx.blocking_send(Err(e.to_string()));
                    break;
                }
            }
        }
        usage.record(UsageEvent::AudioOut(sent));
    }
}

/// The head of a WAV whose length is not known yet (24 kHz mono PCM16): its sizes say
/// "as long as it goes", as streamed WAVs do.
fn streaming_wav_header() -> Vec<u8> {
    let mut wav = duet_media::pcm::wav_pcm16(&[], RATE);
    wav[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    wav[40..44].copy_from_slice(&(u32::MAX - 36).to_le_bytes());
    wav
}

/// The English name OpenAI's `verbose_json` gives a language (`fr` → `french`); a code
/// without one here is given as it is.
fn language_name(code: &str) -> String {
    const NAMES: &[(&str, &str)] = &[
        ("en", "english"),
        ("fr", "french"),
        ("es", "spanish"),
        ("de", "german"),
        ("it", "italian"),
        ("pt", "portuguese"),
        ("nl", "dutch"),
        ("ru", "russian"),
        ("pl", "polish"),
        ("tr", "turkish"),
        ("sv", "swedish"),
        ("ja", "japanese"),
        ("zh", "chinese"),
        ("ko", "korean"),
        ("ar", "arabic"),
        ("hi", "hindi"),
    ];
    NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or_else(|| code.to_string(), |(_, name)| (*name).to_string())
}
