//! The body of `POST /v1/realtime/client_secrets` (OpenAI's shape): an optional
//! `expires_after {anchor: "created_at", seconds}` and an optional `session` (a realtime or
//! a transcription session object). Parsed here, with its ranges, so that the server and the
//! fuzz target read it the same way.

use serde::Deserialize;
use serde_json::Value;

use crate::{ErrorPayload, SessionPatch};

/// Shortest lifetime a secret may be minted with, in seconds (OpenAI's range).
pub const MIN_SECS: u64 = 10;
/// Longest lifetime, in seconds.
pub const MAX_SECS: u64 = 7_200;
/// The lifetime when the body names none.
pub const DEFAULT_SECS: u64 = 600;

/// A checked mint request.
#[derive(Clone, Debug)]
pub struct MintRequest {
    /// The secret's lifetime, `MIN_SECS..=MAX_SECS`.
    pub seconds: u64,
    /// The starting configuration of the sessions it opens.
    pub session: Option<SessionPatch>,
    /// `session` as sent (what a shared secret store keeps).
    pub session_json: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    expires_after: Option<ExpiresAfter>,
    session: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpiresAfter {
    anchor: Anchor,
    seconds: Option<u64>,
}

#[derive(Deserialize)]
enum Anchor {
    #[serde(rename = "created_at")]
    CreatedAt,
}

impl MintRequest {
    /// Parses and checks a request body (empty or whitespace: the defaults). Errors are
    /// `invalid_value` with the offending `param` where there is one.
    pub fn parse(bytes: &[u8]) -> Result<Self, ErrorPayload> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self {
                seconds: DEFAULT_SECS,
                session: None,
                session_json: None,
            });
        }
        let de = &mut serde_json::Deserializer::from_slice(bytes);
        let body: Body = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let err =
                ErrorPayload::invalid("invalid_value", format!("invalid body: {}", e.inner()));
            if path == "." {
                err
            } else {
                err.with_param(path)
            }
        })?;
        let seconds = body.expires_after.map_or(DEFAULT_SECS, |e| {
            let Anchor::CreatedAt = e.anchor;
            e.seconds.unwrap_or(DEFAULT_SECS)
        });
        if !(MIN_SECS..=MAX_SECS).contains(&seconds) {
            return Err(ErrorPayload::invalid(
                "invalid_value",
                format!("expires_after.seconds must be between {MIN_SECS} and {MAX_SECS}, got {seconds}"),
            )
            .with_param("expires_after.seconds"));
        }
        let session_json = body.session.clone();
        let session = body.session.map(session_patch).transpose()?;
        Ok(Self {
            seconds,
            session,
            session_json,
        })
    }
}

/// The `session` of a mint request: a realtime or a transcription session object.
pub fn session_patch(v: Value) -> Result<SessionPatch, ErrorPayload> {
    match v.get("type").and_then(Value::as_str) {
        Some("realtime" | "transcription") | None => {}
        Some(_) => {
            return Err(ErrorPayload::invalid(
                "invalid_value",
                "session.type must be \"realtime\" or \"transcription\"",
            )
            .with_param("session.type"))
        }
    }
    serde_path_to_error::deserialize::<_, SessionPatch>(v).map_err(|e| {
        ErrorPayload::invalid("invalid_value", format!("invalid session: {}", e.inner()))
            .with_param(format!("session.{}", e.path()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_ranges_and_params() {
        let d = MintRequest::parse(b"  \n").unwrap();
        assert_eq!((d.seconds, d.session.is_none()), (DEFAULT_SECS, true));
        let r = MintRequest::parse(br#"{"expires_after":{"anchor":"created_at","seconds":10},"session":{"type":"realtime","instructions":"hi"}}"#).unwrap();
        assert_eq!(r.seconds, 10);
        assert!(r.session.is_some());
        let e = MintRequest::parse(br#"{"expires_after":{"anchor":"created_at","seconds":9}}"#)
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("expires_after.seconds"));
        let e = MintRequest::parse(br#"{"session":{"type":"other"}}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("session.type"));
        let e = MintRequest::parse(br#"{"nope":1}"#).unwrap_err();
        assert_eq!(e.code.as_deref(), Some("invalid_value"));
        assert!(MintRequest::parse(b"{").is_err());
    }
}
