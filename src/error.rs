//! The one HTTP error type (every module that answers HTTP, the server, SIP's call control
//! and the cluster's routes, shares it): OpenAI's JSON envelope `{"error":{message,type,code,param}}`,
//! with `Retry-After` where waiting helps.
//!
//! Every code an HTTP answer can carry is a variant of [`Code`]; its status, its
//! `error.type` and its `Retry-After` follow from it (call sites name the code and the
//! message, never a status). The codes the Realtime protocol shares with HTTP answers are
//! spelled by `duet_protocol::codes`, so the two never differ. `docs/api.md`'s error tables
//! list every code ([`Code::ALL`]; a docs test checks it).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::protocol::{codes, ErrorPayload};

/// Seconds a caller refused for load or shutdown should wait before retrying.
pub const RETRY_AFTER_SECS: u64 = 5;

/// Where an LLM failure was met: it decides the answer's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LlmFault {
    /// The embedded LLM failed (500).
    Embedded,
    /// The upstream LLM could not be reached, broke off, or answered what cannot be read
    /// (502).
    Upstream,
    /// The upstream LLM did not answer in time (504).
    TimedOut,
    /// The upstream LLM answered this error status, passed on.
    Answered(StatusCode),
}

impl LlmFault {
    fn status(self) -> StatusCode {
        match self {
            LlmFault::Embedded => StatusCode::INTERNAL_SERVER_ERROR,
            LlmFault::Upstream => StatusCode::BAD_GATEWAY,
            LlmFault::TimedOut => StatusCode::GATEWAY_TIMEOUT,
            LlmFault::Answered(s) => s,
        }
    }
}

/// Every error code an HTTP answer of the server can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    // 400: the request is wrong.
    /// The body is not JSON, not a JSON object, or not UTF-8.
    InvalidJson,
    /// A field has the wrong type or an out-of-range value (the chat completions' request
    /// checks included).
    InvalidValue,
    /// A required field or part is missing.
    MissingRequiredParameter,
    /// A field Duet does not know.
    UnknownParameter,
    /// A feature Duet does not offer.
    Unsupported,
    /// `tools` given to a model that cannot call them.
    ToolsUnsupported,
    /// A `multipart/form-data` offer that cannot be read.
    InvalidMultipart,
    /// Audio that cannot be read (`/v1/audio/transcriptions`: not a WAV Duet reads).
    InvalidAudio,
    /// A malformed `resume` part, or one without the duplex extension.
    InvalidSessionResume,
    /// The embedded LLM: the conversation does not fit its context.
    ContextLengthExceeded,
    /// The SDP offer cannot be parsed.
    InvalidSdp,
    /// The SDP offer has no audio.
    SdpNoAudio,
    /// The SDP offer has no codec Duet speaks.
    SdpNoSupportedCodec,
    /// The SDP offer has no ICE credentials.
    SdpMissingIceCredentials,
    /// The SDP offer has no DTLS fingerprint.
    SdpMissingFingerprint,
    /// The media stack refused the SDP offer.
    SdpRejected,
    // 401
    /// No key, a wrong one, or a client secret that does not open this.
    InvalidApiKey,
    /// A resume token that is not the session's current one.
    InvalidResumeToken,
    // 403
    /// The request's `Origin` is not allowed.
    OriginNotAllowed,
    // 404
    /// No such route (or cluster object).
    NotFound,
    /// No live call with that id.
    CallNotFound,
    /// No live session to resume with that id.
    SessionResumeExpired,
    // 408
    /// The body did not arrive within the request deadline.
    RequestTimeout,
    /// Plain HTTP on a port that speaks HTTPS (`--tls-cert`).
    TlsRequired,
    // 409
    /// A phone call accepted already.
    CallAlreadyAccepted,
    /// A phone call not accepted yet.
    CallNotAccepted,
    /// The call has all the sideband connections it may.
    SidebandLimit,
    /// A resume ahead of the journal's head.
    SessionResumeConflict,
    /// A resume behind what the journal still holds.
    JournalGap,
    // 413
    /// A request body over its limit.
    RequestTooLarge,
    /// An SDP offer over its limit.
    SdpTooLarge,
    // 415
    /// An offer of another content type.
    UnsupportedMediaType,
    // 429
    /// The credential holds all the sessions it may.
    TooManySessionsForKey,
    /// The address holds all the sessions it may.
    TooManySessionsFromIp,
    /// The address holds all the demo secrets it may.
    TooManyDemoSecretsFromIp,
    /// The embedded LLM's wait queue is full.
    LlmQueueFull,
    // 501
    /// No LLM is configured.
    LlmNotConfigured,
    /// `/v1/responses` where the LLM has none.
    LlmResponsesUnsupported,
    /// `/v1/audio/transcriptions` on a server without a transcriber.
    TranscriptionNotConfigured,
    /// `/v1/audio/speech` on a server without a voice.
    SpeechNotConfigured,
    // 502
    /// The caller's side refused a REFER, or it could not be sent.
    ReferFailed,
    /// The transcriber failed an audio file (`/v1/audio/transcriptions`).
    TranscriptionFailed,
    /// The voice failed a text (`/v1/audio/speech`).
    SpeechFailed,
    // 5xx by the fault
    /// The LLM could not be reached, timed out or broke off.
    LlmUnavailable(LlmFault),
    /// The LLM answered with an error.
    LlmError(LlmFault),
    // 503
    /// The model (or a device thread) is not ready.
    NotReady,
    /// The server is shutting down.
    ServerDraining,
    /// The server is at one of its limits.
    ServerBusy,
    /// The memory budget has no room.
    ServerMemoryExhausted,
    /// The cluster's shared store is unreachable.
    ClusterStoreUnavailable,
    /// No free RTP port for a phone call.
    RtpPortUnavailable,
    /// A phone call's RTP leg could not be started.
    RtpUnavailable,
    /// An embedded LLM answer found no place in time.
    LlmQueueTimeout,
    /// No model slot free.
    ModelSlotsExhausted,
    /// A model name the server does not have.
    UnknownModel,
    /// A model slot that is not open.
    ModelUnknownSlot,
    /// A frame the model cannot take.
    ModelBadFrame,
    /// The model failed.
    ModelError,
}

impl Code {
    /// Every code, once (an LLM code with one of its faults standing for all).
    pub const ALL: &'static [Code] = &[
        Code::InvalidJson,
        Code::InvalidValue,
        Code::MissingRequiredParameter,
        Code::UnknownParameter,
        Code::Unsupported,
        Code::ToolsUnsupported,
        Code::InvalidMultipart,
        Code::InvalidAudio,
        Code::InvalidSessionResume,
        Code::ContextLengthExceeded,
        Code::InvalidSdp,
        Code::SdpNoAudio,
        Code::SdpNoSupportedCodec,
        Code::SdpMissingIceCredentials,
        Code::SdpMissingFingerprint,
        Code::SdpRejected,
        Code::InvalidApiKey,
        Code::InvalidResumeToken,
        Code::OriginNotAllowed,
        Code::NotFound,
        Code::CallNotFound,
        Code::SessionResumeExpired,
        Code::RequestTimeout,
        Code::TlsRequired,
        Code::CallAlreadyAccepted,
        Code::CallNotAccepted,
        Code::SidebandLimit,
        Code::SessionResumeConflict,
        Code::JournalGap,
        Code::RequestTooLarge,
        Code::SdpTooLarge,
        Code::UnsupportedMediaType,
        Code::TooManySessionsForKey,
        Code::TooManySessionsFromIp,
        Code::TooManyDemoSecretsFromIp,
        Code::LlmQueueFull,
        Code::LlmNotConfigured,
        Code::LlmResponsesUnsupported,
        Code::TranscriptionNotConfigured,
        Code::SpeechNotConfigured,
        Code::ReferFailed,
        Code::TranscriptionFailed,
        Code::SpeechFailed,
        Code::LlmUnavailable(LlmFault::Upstream),
        Code::LlmError(LlmFault::Embedded),
        Code::NotReady,
        Code::ServerDraining,
        Code::ServerBusy,
        Code::ServerMemoryExhausted,
        Code::ClusterStoreUnavailable,
        Code::RtpPortUnavailable,
        Code::RtpUnavailable,
        Code::LlmQueueTimeout,
        Code::ModelSlotsExhausted,
        Code::UnknownModel,
        Code::ModelUnknownSlot,
        Code::ModelBadFrame,
        Code::ModelError,
    ];

    /// The wire code (`error.code`).
    pub fn as_str(self) -> &'static str {
        use duet_models::llama::{CONTEXT_LENGTH_EXCEEDED, LLM_QUEUE_FULL};
        match self {
            Code::InvalidJson => codes::INVALID_JSON,
            Code::InvalidValue => codes::INVALID_VALUE,
            Code::MissingRequiredParameter => codes::MISSING_REQUIRED_PARAMETER,
            Code::UnknownParameter => codes::UNKNOWN_PARAMETER,
            Code::Unsupported => codes::UNSUPPORTED,
            Code::ToolsUnsupported => codes::TOOLS_UNSUPPORTED,
            Code::InvalidMultipart => "invalid_multipart",
            Code::InvalidAudio => codes::INVALID_AUDIO,
            Code::TranscriptionNotConfigured => "transcription_not_configured",
            Code::InvalidSessionResume => codes::INVALID_SESSION_RESUME,
            Code::ContextLengthExceeded => CONTEXT_LENGTH_EXCEEDED,
            Code::InvalidSdp => "invalid_sdp",
            Code::SdpNoAudio => "sdp_no_audio",
            Code::SdpNoSupportedCodec => "sdp_no_supported_codec",
            Code::SdpMissingIceCredentials => "sdp_missing_ice_credentials",
            Code::SdpMissingFingerprint => "sdp_missing_fingerprint",
            Code::SdpRejected => "sdp_rejected",
            Code::InvalidApiKey => "invalid_api_key",
            Code::InvalidResumeToken => codes::INVALID_RESUME_TOKEN,
            Code::OriginNotAllowed => "origin_not_allowed",
            Code::NotFound => "not_found",
            Code::CallNotFound => "call_not_found",
            Code::SessionResumeExpired => codes::SESSION_RESUME_EXPIRED,
            Code::RequestTimeout => "request_timeout",
            Code::TlsRequired => "tls_required",
            Code::CallAlreadyAccepted => "call_already_accepted",
            Code::CallNotAccepted => "call_not_accepted",
            Code::SidebandLimit => "sideband_limit",
            Code::SessionResumeConflict => codes::SESSION_RESUME_CONFLICT,
            Code::JournalGap => "journal_gap",
            Code::RequestTooLarge => "request_too_large",
            Code::SdpTooLarge => "sdp_too_large",
            Code::UnsupportedMediaType => "unsupported_media_type",
            Code::TooManySessionsForKey => "too_many_sessions_for_key",
            Code::TooManySessionsFromIp => "too_many_sessions_from_ip",
            Code::TooManyDemoSecretsFromIp => "too_many_demo_secrets_from_ip",
            Code::LlmQueueFull => LLM_QUEUE_FULL,
            Code::LlmNotConfigured => "llm_not_configured",
            Code::LlmResponsesUnsupported => "llm_responses_unsupported",
            server => server.server_side_str(),
        }
    }

    /// The wire code of the codes from `refer_failed` on (the 5xx ones), `as_str`'s second
    /// half (a client-side code never gets here).
    fn server_side_str(self) -> &'static str {
        use duet_models::cascade::{LLM_ERROR, LLM_UNAVAILABLE};
        use duet_models::llama::LLM_QUEUE_TIMEOUT;
        match self {
            Code::ReferFailed => "refer_failed",
            Code::TranscriptionFailed => "transcription_failed",
            Code::SpeechNotConfigured => "speech_not_configured",
            Code::SpeechFailed => "speech_failed",
            Code::LlmUnavailable(_) => LLM_UNAVAILABLE,
            Code::LlmError(_) => LLM_ERROR,
            Code::NotReady => "not_ready",
            Code::ServerDraining => codes::SERVER_DRAINING,
            Code::ServerBusy => "server_busy",
            Code::ServerMemoryExhausted => codes::SERVER_MEMORY_EXHAUSTED,
            Code::ClusterStoreUnavailable => "cluster_store_unavailable",
            Code::RtpPortUnavailable => "rtp_port_unavailable",
            Code::RtpUnavailable => "rtp_unavailable",
            Code::LlmQueueTimeout => LLM_QUEUE_TIMEOUT,
            Code::ModelSlotsExhausted => "model_slots_exhausted",
            Code::UnknownModel => "unknown_model",
            Code::ModelUnknownSlot => "model_unknown_slot",
            Code::ModelBadFrame => "model_bad_frame",
            Code::ModelError => codes::MODEL_ERROR,
            _ => "server_error",
        }
    }

    /// The HTTP status this code is answered with.
    pub fn status(self) -> StatusCode {
        match self {
            Code::InvalidJson
            | Code::InvalidValue
            | Code::MissingRequiredParameter
            | Code::UnknownParameter
            | Code::Unsupported
            | Code::ToolsUnsupported
            | Code::InvalidMultipart
            | Code::InvalidAudio
            | Code::InvalidSessionResume
            | Code::ContextLengthExceeded
            | Code::InvalidSdp
            | Code::SdpNoAudio
            | Code::SdpNoSupportedCodec
            | Code::SdpMissingIceCredentials
            | Code::SdpMissingFingerprint
            | Code::SdpRejected => StatusCode::BAD_REQUEST,
            Code::InvalidApiKey | Code::InvalidResumeToken => StatusCode::UNAUTHORIZED,
            Code::OriginNotAllowed => StatusCode::FORBIDDEN,
            Code::NotFound | Code::CallNotFound | Code::SessionResumeExpired => {
                StatusCode::NOT_FOUND
            }
            Code::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Code::TlsRequired => StatusCode::BAD_REQUEST,
            Code::CallAlreadyAccepted
            | Code::CallNotAccepted
            | Code::SidebandLimit
            | Code::SessionResumeConflict
            | Code::JournalGap => StatusCode::CONFLICT,
            Code::RequestTooLarge | Code::SdpTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Code::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Code::TooManySessionsForKey
            | Code::TooManySessionsFromIp
            | Code::TooManyDemoSecretsFromIp
            | Code::LlmQueueFull => StatusCode::TOO_MANY_REQUESTS,
            Code::LlmNotConfigured
            | Code::LlmResponsesUnsupported
            | Code::TranscriptionNotConfigured
            | Code::SpeechNotConfigured => StatusCode::NOT_IMPLEMENTED,
            Code::ReferFailed | Code::TranscriptionFailed | Code::SpeechFailed => {
                StatusCode::BAD_GATEWAY
            }
            Code::LlmUnavailable(fault) | Code::LlmError(fault) => fault.status(),
            Code::NotReady
            | Code::ServerDraining
            | Code::ServerBusy
            | Code::ServerMemoryExhausted
            | Code::ClusterStoreUnavailable
            | Code::RtpPortUnavailable
            | Code::RtpUnavailable
            | Code::LlmQueueTimeout
            | Code::ModelSlotsExhausted
            | Code::UnknownModel
            | Code::ModelUnknownSlot
            | Code::ModelBadFrame
            | Code::ModelError => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The `error.type`: `server_error` for a 5xx status, else `invalid_request_error`.
    pub fn kind(self) -> &'static str {
        if self.status().is_server_error() {
            "server_error"
        } else {
            "invalid_request_error"
        }
    }

    /// The `Retry-After` seconds this code is answered with, where waiting helps (a call
    /// site that knows better sets its own with [`ApiError::retry`]).
    pub fn retry_after(self) -> Option<u64> {
        match self {
            Code::NotReady
            | Code::LlmQueueTimeout
            | Code::LlmUnavailable(_)
            | Code::LlmError(LlmFault::Embedded | LlmFault::Upstream | LlmFault::TimedOut) => None,
            Code::LlmError(LlmFault::Answered(s)) => (s == StatusCode::TOO_MANY_REQUESTS
                || s == StatusCode::SERVICE_UNAVAILABLE)
                .then_some(RETRY_AFTER_SECS),
            c if c.status() == StatusCode::SERVICE_UNAVAILABLE => Some(RETRY_AFTER_SECS),
            _ => None,
        }
    }

    /// The code spelled `wire`, if it is one (an LLM code as met by the embedded LLM).
    pub fn of(wire: &str) -> Option<Code> {
        match Code::ALL.iter().find(|c| c.as_str() == wire)? {
            Code::LlmUnavailable(_) => Some(Code::LlmUnavailable(LlmFault::Embedded)),
            c => Some(*c),
        }
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&duet_signaling::SignalError> for Code {
    fn from(e: &duet_signaling::SignalError) -> Self {
        use duet_signaling::SignalError as E;
        match e {
            E::TooLarge(_) => Code::SdpTooLarge,
            E::Malformed(_) => Code::InvalidSdp,
            E::NoAudio => Code::SdpNoAudio,
            E::NoSupportedCodec => Code::SdpNoSupportedCodec,
            E::MissingIceCredentials => Code::SdpMissingIceCredentials,
            E::MissingFingerprint => Code::SdpMissingFingerprint,
            E::Rejected(_) => Code::SdpRejected,
        }
    }
}

impl From<&duet_models::ModelError> for Code {
    fn from(e: &duet_models::ModelError) -> Self {
        use duet_models::ModelError as E;
        match e {
            E::UnknownModel { .. } => Code::UnknownModel,
            E::SlotsExhausted(_) => Code::ModelSlotsExhausted,
            E::UnknownSlot(_) => Code::ModelUnknownSlot,
            E::BadFrame { .. } => Code::ModelBadFrame,
            E::Failed(_) => Code::ModelError,
        }
    }
}

/// An HTTP error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The code; the status and `error.type` follow from it.
    pub code: Code,
    /// Human-readable explanation.
    pub message: String,
    /// The offending parameter, if one.
    pub param: Option<String>,
    /// `Retry-After` in seconds.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with `code` and `message` (and the code's `Retry-After`).
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            param: None,
            retry_after: code.retry_after(),
        }
    }

    /// The status, from the code.
    pub fn status(&self) -> StatusCode {
        self.code.status()
    }

    /// The `error.type`, from the code.
    pub fn kind(&self) -> &'static str {
        self.code.kind()
    }

    /// 503 `server_draining`: the server is shutting down.
    pub fn draining() -> Self {
        Self::new(
            Code::ServerDraining,
            "the server is shutting down and accepts no new sessions; retry on another instance",
        )
    }

    /// A session-level error payload answered over HTTP: its code (400 `invalid_value`
    /// for one that is not an HTTP code), message and param.
    pub fn from_payload(e: ErrorPayload) -> Self {
        let code = e.code.as_deref().unwrap_or(codes::INVALID_VALUE);
        let code = Code::of(code)
            .filter(|c| c.status() == StatusCode::BAD_REQUEST)
            .unwrap_or_else(|| {
                tracing::warn!(
                    code,
                    "a session error's code answered over HTTP as invalid_value"
                );
                Code::InvalidValue
            });
        Self {
            param: e.param,
            ..Self::new(code, e.message)
        }
    }

    /// Sets `param`.
    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    /// Sets `Retry-After`.
    pub fn retry(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = json!({"error": {
            "message": self.message,
            "type": self.kind(),
            "code": self.code.as_str(),
            "param": self.param,
        }});
        let mut r = (status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if status == StatusCode::REQUEST_TIMEOUT {
            // The rest of the body may still come: the connection cannot carry another
            // request.
            r.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_status_and_headers() {
        let r = ApiError::draining().into_response();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[header::RETRY_AFTER], "5");
        let r = ApiError::new(Code::InvalidApiKey, "no").into_response();
        assert_eq!(r.headers()[header::WWW_AUTHENTICATE], "Bearer");
        let e = ApiError::from_payload(
            ErrorPayload::invalid("invalid_value", "bad").with_param("session.x"),
        );
        assert_eq!(
            (e.status(), e.code.as_str(), e.param.as_deref()),
            (StatusCode::BAD_REQUEST, "invalid_value", Some("session.x"))
        );
        assert_eq!(e.kind(), "invalid_request_error");
    }

    #[test]
    fn every_code_is_spelled_once_in_snake_case() {
        let mut seen = std::collections::BTreeSet::new();
        for c in Code::ALL {
            let s = c.as_str();
            assert!(
                s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{s}"
            );
            assert!(seen.insert(s), "{s} twice in Code::ALL");
            assert_ne!(s, "server_error", "{c:?} has no wire code");
            assert_eq!(Code::of(s).map(Code::as_str), Some(s));
            assert!(c.status().is_client_error() || c.status().is_server_error());
        }
    }

    #[test]
    fn the_codes_other_layers_spell_map_to_the_same_strings() {
        use duet_signaling::SignalError as S;
        for e in [
            S::TooLarge(1),
            S::Malformed(String::new()),
            S::NoAudio,
            S::NoSupportedCodec,
            S::MissingIceCredentials,
            S::MissingFingerprint,
            S::Rejected(String::new()),
        ] {
            assert_eq!(Code::from(&e).as_str(), e.code());
        }
        use duet_models::ModelError as M;
        for e in [
            M::SlotsExhausted(1),
            M::UnknownSlot(1),
            M::Failed(String::new()),
        ] {
            assert_eq!(Code::from(&e).as_str(), e.code());
        }
    }

    #[test]
    fn status_type_and_retry_follow_from_the_code() {
        let e = ApiError::new(Code::ServerMemoryExhausted, "full");
        assert_eq!(
            (e.status().as_u16(), e.kind(), e.retry_after),
            (503, "server_error", Some(5))
        );
        let e = ApiError::new(Code::NotReady, "warming");
        assert_eq!((e.status().as_u16(), e.retry_after), (503, None));
        let e = ApiError::new(Code::LlmQueueFull, "full");
        assert_eq!(
            (e.status().as_u16(), e.kind()),
            (429, "invalid_request_error")
        );
        let e = ApiError::new(
            Code::LlmError(LlmFault::Answered(StatusCode::TOO_MANY_REQUESTS)),
            "x",
        );
        assert_eq!((e.status().as_u16(), e.retry_after), (429, Some(5)));
        let e = ApiError::new(Code::LlmUnavailable(LlmFault::TimedOut), "x");
        assert_eq!(
            (e.status().as_u16(), e.code.as_str()),
            (504, "llm_unavailable")
        );
    }
}
