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
    let mut hold: Hold = Vec::new();
    let answer = async {
        if !matches!(cred, Credential::Server) {
            return Err(ApiError::new(
                Code::InvalidApiKey,
                "the audio endpoints need the server's API key (client secrets open realtime sessions only)",
            ));
        }
        admit(&state, &peer, &cred, &req, MAX_UPLOAD, &mut hold)?;
        let Some(stt) = state.backends.speech.transcriber.clone() else {
            return Err(ApiError::new(
                Code::TranscriptionNotConfigured,
                "no transcriber is configured: start the server with --transcription-model-dir or --stt-url",
            ));
        };
        let mut upload = Upload::read(req).await?;
        let samples = upload.pcm.len() as u64;
        let text = stt
            .transcribe_clip(std::mem::take(&mut upload.pcm), &upload.hints)
            .await
            .map_err(|e| ApiError::new(Code::TranscriptionFailed, e))?;
        let usage = state.credentials.usage.sink(&cred.usage_id());
        usage.record(UsageEvent::AudioIn(samples));
        Ok(upload.answer(&text, samples, stt.name()))
    };
    match answer.await {
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
    fn answer(&self, text: &str, samples: u64, model: &str) -> Response {
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
                let language = self
                    .hints
                    .language
                    .clone()
                    .unwrap_or_else(|| "english".into());
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
