//! What a `POST /v1/realtime/calls` carries, read and checked before anything is allocated:
//! the SDP offer (plain or multipart, bounded in bytes), the session object, and (duplex
//! extension) a resume of an existing session; the bounded body reader the other upload
//! routes share.

use axum::body::to_bytes;
use axum::extract::Request;
use axum::http::header;
use duet_signaling::{multipart, SignalError, MAX_OFFER_BYTES};

use crate::error::{ApiError, Code};
use crate::protocol::duplex::ResumeRequest;
use crate::protocol::{codes, ErrorPayload, SessionPatch};

/// Largest multipart body (SDP plus a session object).
const MAX_MULTIPART_BYTES: usize = 64 * 1024;
/// An offer as received: SDP, an optional session object, and (duplex extension) an
/// optional resume of an existing session.
pub(super) struct Offer {
    pub(super) sdp: String,
    pub(super) session: Option<String>,
    pub(super) resume: Option<String>,
}

/// Query of `POST /v1/realtime/calls`.
#[derive(Debug, serde::Deserialize)]
pub struct CallsQuery {
    /// Duplex extension: `1`, `true` or `on` opts in.
    pub duplex: Option<String>,
    /// Extension: `1`, `true` or `on` reports the turn detector's decisions on the data
    /// channel (`turn.scored`, `turn.overlap`; docs/turn-taking.md).
    pub turn_events: Option<String>,
}

pub(super) fn bad_offer(e: &SignalError) -> ApiError {
    ApiError::new(Code::from(e), e.to_string())
}

pub(super) fn too_large(limit: usize, what: &str) -> ApiError {
    ApiError::new(Code::RequestTooLarge, format!("{what} over {limit} bytes"))
}

/// Reads at most `limit` bytes of body; refuses at once when `Content-Length` says more.
pub(super) async fn read_body(req: Request, limit: usize, what: &str) -> Result<Vec<u8>, ApiError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large(limit, what));
    }
    let bytes = to_bytes(req.into_body(), limit)
        .await
        .map_err(|e| ApiError::body(&e, limit, what))?;
    Ok(bytes.to_vec())
}

pub(super) async fn read_offer(req: Request) -> Result<Offer, ApiError> {
    let ctype = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let lower = ctype.to_ascii_lowercase();
    if lower.starts_with("application/sdp") {
        let bytes = read_body(req, MAX_OFFER_BYTES, "SDP offer")
            .await
            .map_err(|e| match e.code {
                Code::RequestTooLarge => bad_offer(&SignalError::TooLarge(MAX_OFFER_BYTES + 1)),
                _ => e,
            })?;
        let sdp = String::from_utf8(bytes)
            .map_err(|_| bad_offer(&SignalError::Malformed("the offer is not UTF-8".into())))?;
        return Ok(Offer {
            sdp,
            session: None,
            resume: None,
        });
    }
    if lower.starts_with("multipart/form-data") {
        let body = read_body(req, MAX_MULTIPART_BYTES, "multipart body").await?;
        return parse_multipart(&ctype, &body);
    }
    Err(ApiError::new(
        Code::UnsupportedMediaType,
        "send the offer as application/sdp, or multipart/form-data with parts sdp and session",
    ))
}

pub(super) fn parse_multipart(ctype: &str, body: &[u8]) -> Result<Offer, ApiError> {
    let parts = multipart::parse(ctype, body, multipart::Limits::default())
        .map_err(|e| ApiError::new(Code::InvalidMultipart, e.to_string()))?;
    let (mut sdp, mut session, mut resume) = (None, None, None);
    for part in parts {
        let text = String::from_utf8(part.data).map_err(|_| {
            ApiError::new(
                Code::InvalidMultipart,
                format!("part {:?} is not UTF-8", part.name),
            )
        })?;
        match part.name.as_str() {
            "sdp" => sdp = Some(text),
            "session" => session = Some(text),
            "resume" => resume = Some(text),
            _ => {}
        }
    }
    let sdp = sdp.ok_or_else(|| {
        ApiError::new(
            Code::MissingRequiredParameter,
            "multipart offer without an sdp part",
        )
    })?;
    Ok(Offer {
        sdp,
        session,
        resume,
    })
}

/// The multipart `resume` part: `{session_id, resume_token, last_received_server_event_seq}`.
pub(super) fn resume_request(
    json: Option<&str>,
    duplex: bool,
) -> Result<Option<ResumeRequest>, ApiError> {
    let Some(json) = json else { return Ok(None) };
    if !duplex {
        return Err(ApiError::new(
            Code::InvalidSessionResume,
            "a resume part needs the duplex extension: POST /v1/realtime/calls?duplex=1",
        ));
    }
    ResumeRequest::from_json(json)
        .map(Some)
        .map_err(|e| ApiError::new(Code::InvalidSessionResume, format!("invalid resume: {e}")))
}

/// A refused resume as an HTTP error.
pub(super) fn resume_refused(e: &ErrorPayload) -> ApiError {
    let code = e.code.as_deref().unwrap_or(codes::SESSION_RESUME_EXPIRED);
    match Code::of(code) {
        Some(
            code @ (Code::InvalidResumeToken
            | Code::SessionResumeConflict
            | Code::JournalGap
            | Code::SessionResumeExpired),
        ) => ApiError::new(code, e.message.clone()),
        _ => ApiError::from_payload(e.clone()),
    }
}

pub(super) fn resume_expired() -> ApiError {
    crate::metrics::METRICS.resume(codes::SESSION_RESUME_EXPIRED);
    ApiError::new(
        Code::SessionResumeExpired,
        "no live session with this id: it ended, expired or never existed",
    )
}

pub(super) fn session_patch(json: Option<&str>) -> Result<Option<SessionPatch>, ApiError> {
    let Some(json) = json else { return Ok(None) };
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize::<_, SessionPatch>(de)
        .map(Some)
        .map_err(|e| {
            ApiError::new(
                Code::InvalidValue,
                format!("invalid session: {}", e.inner()),
            )
            .with_param(format!("session.{}", e.path()))
        })
}
