//! An accepted phone call, until it ends: the session's events (discarded: a phone has no
//! data channel, sidebands get their own), the media's end, the dialog's in-call requests
//! and the API's `/hangup` and `/refer`.

use std::time::{SystemTime, UNIX_EPOCH};

use duet_signaling::plain_sdp::parse_offer;
use rsipstack::dialog::dialog::DialogState;
use rsipstack::sip::{Header, Request, StatusCode};

use super::{
    ended_by, media, media_end_reason, not_yet, session_input, Call, Control, Live, Media,
};
use crate::error::{ApiError, Code};
use crate::session::SessionInput;

/// What ended the call, or nothing yet.
type Step = Option<End>;

/// How a live call ends, and why (for the log).
enum End {
    /// The dialog is over already (the caller's BYE, no ACK): nothing to send.
    Dialog(&'static str),
    /// Duet ends it: a BYE goes out.
    Ours(&'static str),
}

impl Call {
    pub(super) async fn live(&mut self, mut live: Live) {
        let end = loop {
            let step = tokio::select! {
                ev = live.phone.events.recv() => match ev {
                    Some(_) => None,
                    None => Some(End::Ours("session ended")),
                },
                end = media_ended(&mut live.media) => Some(End::Ours(media_end_reason(end))),
                state = self.states.recv() => self.dialog_state(state, &mut live).await,
                ctrl = self.controls.recv() => self.control_live(ctrl),
            };
            if let Some(end) = step {
                break end;
            }
        };
        let (End::Dialog(reason) | End::Ours(reason)) = end;
        tracing::info!(call = %self.id, reason, "SIP call ending");
        if let Media::Running(handle) = &mut live.media {
            handle.stop();
        }
        // The session ends with the call (an opted-in one too).
        live.signals.hung_up();
        live.signals.ended();
        if matches!(end, End::Ours(_)) {
            self.bye();
        }
    }

    /// BYE, on its own task (it waits for the answer, up to 32 s on UDP).
    fn bye(&self) {
        let d = self.dialog.clone();
        tokio::spawn(async move {
            let _ = d.bye().await;
        });
    }

    async fn dialog_state(&mut self, state: Option<DialogState>, live: &mut Live) -> Step {
        match state {
            None => Some(End::Dialog("dialog ended")),
            Some(DialogState::Terminated(_, reason)) => Some(End::Dialog(ended_by(&reason))),
            Some(DialogState::Confirmed(..)) => self.confirmed(live),
            Some(DialogState::Info(_, req, h)) => {
                let status = self.info(&req, live);
                let _ = h.reply(status).await;
                None
            }
            Some(DialogState::Updated(_, req, h)) => {
                // A session refresh (re-INVITE or UPDATE): the same media, answered again.
                let (headers, body) = if req.body.is_empty() {
                    (None, None)
                } else {
                    let ct = vec![Header::ContentType("application/sdp".into())];
                    (Some(ct), Some(live.sdp.clone().into_bytes()))
                };
                let _ = h.respond(StatusCode::OK, headers, body).await;
                None
            }
            Some(DialogState::Notify(_, req, h)) => {
                let _ = h.reply(StatusCode::OK).await;
                transfer_done(&req).then_some(End::Ours("transferred"))
            }
            Some(DialogState::Refer(_, _, h)) => {
                let _ = h.reply(StatusCode::Decline).await;
                None
            }
            Some(DialogState::Options(_, _, h) | DialogState::Message(_, _, h)) => {
                let _ = h.reply(StatusCode::OK).await;
                None
            }
            Some(DialogState::Publish(_, _, h)) => {
                let _ = h.reply(StatusCode::MethodNotAllowed).await;
                None
            }
            Some(_) => None,
        }
    }

    /// The ACK came: a late offer's answer is in it, and the media starts.
    fn confirmed(&mut self, live: &mut Live) -> Step {
        let Media::Waiting(..) = live.media else {
            return None;
        };
        let Media::Waiting(inbox, socket) = std::mem::replace(&mut live.media, Media::Gone) else {
            return None;
        };
        let ack = self
            .dialog
            .last_remote_ack()
            .map(|a| a.body)
            .unwrap_or_default();
        let answer = std::str::from_utf8(&ack).ok().map(parse_offer);
        let Some(Ok(answer)) = answer else {
            tracing::warn!(call = %self.id, "the ACK carried no usable answer to our offer");
            return Some(End::Ours("no answer in the ACK"));
        };
        // Our late offer is plain RTP/AVP: its answer brings no key.
        let media = (live.attachment, &live.signals);
        let params = self.media_params(&answer, socket, &live.phone, media, None);
        match media::start(params, inbox) {
            Ok(handle) => {
                live.media = Media::Running(handle);
                None
            }
            Err(_) => Some(End::Ours("media failed")),
        }
    }

    /// SIP INFO: an `application/dtmf-relay` key press goes to the session.
    fn info(&self, req: &Request, live: &Live) -> StatusCode {
        let is_dtmf = req.headers.iter().any(|h| {
            h.name().eq_ignore_ascii_case("content-type")
                && h.value()
                    .trim()
                    .eq_ignore_ascii_case("application/dtmf-relay")
        });
        if !is_dtmf {
            return StatusCode::OK;
        }
        let Some(key) = dtmf_relay_key(&req.body) else {
            return StatusCode::BadRequest;
        };
        let received_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let input = session_input(live.attachment, SessionInput::Dtmf { key, received_at });
        let _ = live.phone.inbox.try_send(input);
        StatusCode::OK
    }

    fn control_live(&mut self, ctrl: Option<Control>) -> Step {
        match ctrl {
            None => Some(End::Ours("server stopped")),
            Some(Control::Hangup { reply }) => {
                let _ = reply.send(Ok(()));
                Some(End::Ours("hangup"))
            }
            Some(Control::Refer { target, reply }) => {
                let d = self.dialog.clone();
                let id = self.id.clone();
                tokio::spawn(async move {
                    let _ = reply.send(refer(&d, &id, &target).await);
                });
                None
            }
            Some(Control::Accept { reply, .. }) => {
                let _ = reply.send(Err(conflict("the call was accepted already")));
                None
            }
            Some(Control::Reject { reply, .. }) => {
                let _ = reply.send(Err(conflict("the call was accepted already")));
                None
            }
        }
    }
}

/// Sends REFER and waits for its answer: `Ok` once the caller's side took it (2xx).
async fn refer(
    d: &rsipstack::dialog::invite_dialog::InviteDialog,
    id: &str,
    target: &str,
) -> Result<(), ApiError> {
    let uri: rsipstack::sip::Uri = target
        .try_into()
        .map_err(|_| ApiError::new(Code::InvalidValue, "target_uri is not a URI"))?;
    match d.refer(uri, None, None).await {
        Ok(Some(r)) if (200..300).contains(&u16::from(r.status_code.clone())) => {
            tracing::info!(call = %id, %target, "REFER accepted");
            Ok(())
        }
        Ok(Some(r)) => Err(refer_failed(format!(
            "the caller's side answered {}",
            r.status_code
        ))),
        Ok(None) => Err(not_yet("the call is not established yet")),
        Err(e) => Err(refer_failed(e.to_string())),
    }
}

fn refer_failed(message: String) -> ApiError {
    ApiError::new(Code::ReferFailed, message)
}

fn conflict(message: &str) -> ApiError {
    ApiError::new(Code::CallAlreadyAccepted, message)
}

/// Whether a REFER's NOTIFY reports the transfer done: a `message/sipfrag` body whose
/// status line is a final 2xx (provisional ones, `100 Trying`, come first).
fn transfer_done(req: &Request) -> bool {
    let frag = String::from_utf8_lossy(&req.body);
    let code = frag
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok());
    code.is_some_and(|c| (200..300).contains(&c))
}

/// The key of an `application/dtmf-relay` body (`Signal=5`, `Signal=#`; `10` and `11` are
/// `*` and `#` for some senders).
fn dtmf_relay_key(body: &[u8]) -> Option<char> {
    let text = std::str::from_utf8(body).ok()?;
    let signal = text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        k.trim().eq_ignore_ascii_case("signal").then(|| v.trim())
    })?;
    match signal {
        "10" => Some('*'),
        "11" => Some('#'),
        s if s.len() == 1 => s
            .chars()
            .next()
            .map(|c| c.to_ascii_uppercase())
            .filter(|c| "0123456789*#ABCD".contains(*c)),
        _ => None,
    }
}

/// Resolves when a running media task ends (never for media not running).
async fn media_ended(media: &mut Media) -> Result<media::MediaEnd, tokio::task::JoinError> {
    match media {
        Media::Running(h) => (&mut h.ended).await,
        _ => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtmf_relay_bodies_give_their_key() {
        assert_eq!(dtmf_relay_key(b"Signal=5\r\nDuration=160\r\n"), Some('5'));
        assert_eq!(dtmf_relay_key(b"Signal= #\r\n"), Some('#'));
        assert_eq!(dtmf_relay_key(b"signal=a"), Some('A'));
        assert_eq!(dtmf_relay_key(b"Signal=10"), Some('*'));
        assert_eq!(dtmf_relay_key(b"Signal=11"), Some('#'));
        assert_eq!(dtmf_relay_key(b"Signal=E"), None);
        assert_eq!(dtmf_relay_key(b"Duration=160"), None);
        assert_eq!(dtmf_relay_key(&[0xff, 0xfe]), None);
    }
}
