//! The one HTTP error type (every module that answers HTTP, the server, SIP's call control
//! and the cluster's routes, shares it): OpenAI's JSON envelope `{"error":{message,type,code,param}}` with
//! the right status, and `Retry-After` where waiting helps.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::protocol::ErrorPayload;

/// Seconds a caller refused for load or shutdown should wait before retrying.
pub const RETRY_AFTER_SECS: u64 = 5;

/// An HTTP error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// Status code.
    pub status: StatusCode,
    /// Stable snake_case code.
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
    /// The offending parameter, if one.
    pub param: Option<String>,
    /// `Retry-After` in seconds.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.to_string(),
            message: message.into(),
            param: None,
            retry_after: None,
        }
    }

    /// 400 with `code`.
    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 404 with `code`.
    pub fn not_found(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    /// 503 with `code` and `Retry-After`.
    pub fn unavailable(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message).retry(RETRY_AFTER_SECS)
    }

    /// 503 `not_ready` while the model warms up (or after a thread died).
    pub fn not_ready(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", message)
    }

    /// 503 `server_draining`: the server is shutting down.
    pub fn draining() -> Self {
        Self::unavailable(
            crate::protocol::codes::SERVER_DRAINING,
            "the server is shutting down and accepts no new sessions; retry on another instance",
        )
    }

    /// A session-level error payload answered over HTTP (400).
    pub fn from_payload(e: ErrorPayload) -> Self {
        Self {
            param: e.param,
            ..Self::bad_request(e.code.as_deref().unwrap_or("invalid_value"), e.message)
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

    /// The `error.type` for this status.
    fn kind(&self) -> &'static str {
        if self.status.is_server_error() {
            "server_error"
        } else {
            "invalid_request_error"
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {
            "message": self.message,
            "type": self.kind(),
            "code": self.code,
            "param": self.param,
        }});
        let mut r = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if self.status == StatusCode::REQUEST_TIMEOUT {
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
        let r = ApiError::new(StatusCode::UNAUTHORIZED, "invalid_api_key", "no").into_response();
        assert_eq!(r.headers()[header::WWW_AUTHENTICATE], "Bearer");
        let e = ApiError::from_payload(
            ErrorPayload::invalid("invalid_value", "bad").with_param("session.x"),
        );
        assert_eq!(
            (e.status, e.code.as_str(), e.param.as_deref()),
            (StatusCode::BAD_REQUEST, "invalid_value", Some("session.x"))
        );
        assert_eq!(e.kind(), "invalid_request_error");
    }
}
