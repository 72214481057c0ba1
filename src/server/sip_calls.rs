//! The phone call routes of OpenAI's SIP connector: `POST /v1/realtime/calls/{id}/accept`
//! (the session configuration, `type: "realtime"`), `/reject` (`{status_code}`, default 603)
//! and `/refer` (`{target_uri}`); `/hangup` is the routes' shared one (calls.rs). Each is
//! handed to the call's task, which answers once the SIP side did it.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::sync::oneshot;

use super::secrets::{credential, Cred, Credential};
use super::AppState;
use crate::error::{ApiError, Code};
use crate::sip::Control;

/// Largest body of these routes (a session configuration with its tools and instructions).
const MAX_BODY_BYTES: usize = 256 * 1024;

fn no_call(id: &str) -> ApiError {
    ApiError::new(Code::CallNotFound, format!("no SIP call {id:?}"))
}

/// Hands `make(reply)` to call `id` and waits for its answer: `200 OK`, or the error.
async fn ask(
    state: &AppState,
    id: &str,
    cred: &Credential,
    make: impl FnOnce(oneshot::Sender<Result<(), ApiError>>) -> Control,
) -> Result<Response, ApiError> {
    let calls = state.calls.sip.as_ref().ok_or_else(|| no_call(id))?;
    let control = calls
        .control(id, |owner| cred.reaches(owner))
        .ok_or_else(|| no_call(id))?;
    let (reply, answer) = oneshot::channel();
    let request = make(reply);
    let hanging_up = matches!(request, Control::Hangup { .. });
    control.send(request).await.map_err(|_| no_call(id))?;
    match answer.await {
        Ok(done) => done?,
        // The call ended while the request waited (the caller hung up): for a hangup that
        // is done; anything else finds no call.
        Err(_) if hanging_up => {}
        Err(_) => return Err(no_call(id)),
    }
    Ok(StatusCode::OK.into_response())
}

fn respond(r: Result<Response, ApiError>) -> Response {
    r.unwrap_or_else(IntoResponse::into_response)
}

/// `POST /v1/realtime/calls/{id}/accept`.
pub async fn accept(
    State(state): State<Arc<AppState>>,
    cred: Cred,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let cred = credential(&cred);
    respond(accept_call(&state, &id, &cred, req).await)
}

async fn accept_call(
    state: &AppState,
    id: &str,
    cred: &Credential,
    req: Request,
) -> Result<Response, ApiError> {
    if cred.resume_only() {
        return Err(super::secrets::resume_only_refused());
    }
    let body = super::calls::read_body(req, MAX_BODY_BYTES, "accept body").await?;
    let text = std::str::from_utf8(&body)
        .map_err(|_| ApiError::new(Code::InvalidJson, "the body is not UTF-8"))?;
    let patch = super::calls::session_patch(Some(text))?
        .ok_or_else(|| ApiError::new(Code::InvalidJson, "no session configuration"))?;
    if patch.kind.as_deref() != Some("realtime") {
        return Err(ApiError::new(
            Code::MissingRequiredParameter,
            "accept a call with a realtime session configuration: {\"type\": \"realtime\", …}",
        )
        .with_param("type"));
    }
    let owner = cred.owner();
    ask(state, id, cred, |reply| Control::Accept {
        patch: Box::new(patch),
        owner,
        reply,
    })
    .await
}

/// `/reject`'s body.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RejectBody {
    status_code: Option<u16>,
}

/// `POST /v1/realtime/calls/{id}/reject`.
pub async fn reject(
    State(state): State<Arc<AppState>>,
    cred: Cred,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let cred = credential(&cred);
    respond(reject_call(&state, &id, &cred, req).await)
}

async fn reject_call(
    state: &AppState,
    id: &str,
    cred: &Credential,
    req: Request,
) -> Result<Response, ApiError> {
    let body: RejectBody = json_body(req, "reject body").await?;
    let status = body.status_code.unwrap_or(603);
    if !(400..=699).contains(&status) {
        return Err(ApiError::new(
            Code::InvalidValue,
            format!("status_code {status}: a SIP failure status (400 to 699)"),
        )
        .with_param("status_code"));
    }
    ask(state, id, cred, |reply| Control::Reject { status, reply }).await
}

/// `/refer`'s body.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReferBody {
    target_uri: String,
}

/// `POST /v1/realtime/calls/{id}/refer`.
pub async fn refer(
    State(state): State<Arc<AppState>>,
    cred: Cred,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let cred = credential(&cred);
    respond(refer_call(&state, &id, &cred, req).await)
}

async fn refer_call(
    state: &AppState,
    id: &str,
    cred: &Credential,
    req: Request,
) -> Result<Response, ApiError> {
    let body: ReferBody = json_body(req, "refer body").await?;
    let target = body.target_uri.trim().to_string();
    // Bytes, not a str slice: a multi-byte character at the cut must not panic.
    let scheme_ok = ["sip:", "sips:", "tel:"].iter().any(|s| {
        target.len() > s.len() && target.as_bytes()[..s.len()].eq_ignore_ascii_case(s.as_bytes())
    });
    if !scheme_ok || target.len() > 512 || target.chars().any(|c| c.is_control() || c == '>') {
        return Err(ApiError::new(
            Code::InvalidValue,
            "target_uri: a sip:, sips: or tel: URI (at most 512 characters)",
        )
        .with_param("target_uri"));
    }
    ask(state, id, cred, |reply| Control::Refer { target, reply }).await
}

/// `/hangup` of a phone call (pending: declined with 603; live: BYE).
pub async fn hangup(state: &AppState, id: &str, cred: &Credential) -> Response {
    respond(ask(state, id, cred, |reply| Control::Hangup { reply }).await)
}

/// A JSON body (an empty one is `{}`).
async fn json_body<T: serde::de::DeserializeOwned + Default>(
    req: Request,
    what: &str,
) -> Result<T, ApiError> {
    let body = super::calls::read_body(req, MAX_BODY_BYTES, what).await?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let de = &mut serde_json::Deserializer::from_slice(&body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        ApiError::new(Code::InvalidValue, format!("invalid {what}: {}", e.inner()))
            .with_param(e.path().to_string())
    })
}
