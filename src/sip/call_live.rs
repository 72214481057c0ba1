//! An accepted phone call, until it ends: the session's events (discarded: a phone has no
//! data channel, sidebands get their own), the media's end, the dialog's in-call requests
//! and the API's `/hangup` and `/refer`.

use std::time::{SystemTime, UNIX_EPOCH};

use duet_signaling::sip_call::{self, DialogEnd, Ending, LiveControl, Then};

use super::{media, media_end_reason, not_yet, session_input, Call, Control, Live, Media};
use crate::error::{ApiError, Code};
use crate::session::SessionInput;
use crate::sip::stack::{Dialog, DialogEvent, InDialog, ReferAnswer};

/// What ended the call, or nothing yet.
type Step = Option<Ending>;

impl Call {
    pub(super) async fn live(&mut self, mut live: Live) {
        let end = loop {
            let step = tokio::select! {
                ev = live.phone.events.recv() => match ev {
                    Some(_) => None,
                    None => Some(Ending::ours("session ended")),
                },
                end = media_ended(&mut live.media) => Some(Ending::ours(media_end_reason(end))),
                event = self.states.recv() => self.dialog_event(event, &mut live).await,
                ctrl = self.controls.recv() => self.control_live(ctrl),
            };
            if let Some(end) = step {
                break end;
            }
        };
        let reason = end.reason;
        tracing::info!(call = %self.id, reason, "SIP call ending");
        if let Media::Running(handle) = &mut live.media {
            handle.stop();
        }
        // The session ends with the call (an opted-in one too).
        live.signals.hung_up();
        live.signals.ended();
        if end.bye {
            self.dialog.bye();
        }
    }

    async fn dialog_event(&mut self, event: Option<DialogEvent>, live: &mut Live) -> Step {
        match event {
            None => Some(sip_call::dialog_ended(DialogEnd::Other)),
            Some(DialogEvent::Ended(end)) => Some(sip_call::dialog_ended(end)),
            Some(DialogEvent::Confirmed) => self.confirmed(live),
            Some(DialogEvent::Request(req)) => self.in_dialog(req, live).await,
            Some(DialogEvent::Other) => None,
        }
    }

    /// A request in the dialog, answered as the decisions say (a key press goes to the
    /// session first).
    async fn in_dialog(&self, req: InDialog, live: &mut Live) -> Step {
        let reply = sip_call::in_dialog(req.method, req.content_type.as_deref(), &req.body)?;
        if let Then::Key(key) = reply.then {
            let received_at = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let input = session_input(live.attachment, SessionInput::Dtmf { key, received_at });
            let _ = live.phone.inbox.try_send(input);
        }
        let sdp = reply.sdp.then_some(live.sdp.as_str());
        req.answer(reply.status, sdp).await;
        match reply.then {
            Then::End(end) => Some(end),
            _ => None,
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
        let answer = match sip_call::ack_answer(&self.dialog.ack_body()) {
            Ok(answer) => answer,
            Err(end) => {
                tracing::warn!(call = %self.id, "the ACK carried no usable answer to our offer");
                return Some(end);
            }
        };
        // Our late offer is plain RTP/AVP: its answer brings no key.
        let media = (live.attachment, &live.signals);
        let params = self.media_params(&answer, socket, &live.phone, media, None);
        match media::start(params, inbox) {
            Ok(handle) => {
                live.media = Media::Running(handle);
                None
            }
            Err(_) => Some(Ending::ours("media failed")),
        }
    }

    fn control_live(&mut self, ctrl: Option<Control>) -> Step {
        let (control, reply) = match ctrl {
            None => (LiveControl::Closed, None),
            Some(Control::Hangup { reply }) => (LiveControl::Hangup, Some(reply)),
            Some(Control::Refer { target, reply }) => {
                let d = self.dialog.clone();
                let id = self.id.clone();
                tokio::spawn(async move {
                    let _ = reply.send(refer(&d, &id, &target).await);
                });
                (LiveControl::Refer, None)
            }
            Some(Control::Accept { reply, .. }) => (LiveControl::Accept, Some(reply)),
            Some(Control::Reject { reply, .. }) => (LiveControl::Reject, Some(reply)),
        };
        let (answer, end) = sip_call::live_control(control);
        if let (Some(reply), Some(answer)) = (reply, answer) {
            let _ = reply.send(super::control_result(answer, None));
        }
        end
    }
}

/// Sends REFER and waits for its answer: `Ok` once the caller's side took it (2xx).
async fn refer(d: &Dialog, id: &str, target: &str) -> Result<(), ApiError> {
    match d.refer(target).await {
        ReferAnswer::Answered(status, _) if sip_call::refer_taken(status) => {
            tracing::info!(call = %id, %target, "REFER accepted");
            Ok(())
        }
        ReferAnswer::Answered(_, line) => {
            Err(refer_failed(format!("the caller's side answered {line}")))
        }
        ReferAnswer::BadTarget => Err(ApiError::new(Code::InvalidValue, "target_uri is not a URI")),
        ReferAnswer::NotEstablished => Err(not_yet("the call is not established yet")),
        ReferAnswer::Failed(e) => Err(refer_failed(e)),
    }
}

fn refer_failed(message: String) -> ApiError {
    ApiError::new(Code::ReferFailed, message)
}

pub(super) fn conflict(message: &str) -> ApiError {
    ApiError::new(Code::CallAlreadyAccepted, message)
}

/// Resolves when a running media task ends (never for media not running).
async fn media_ended(media: &mut Media) -> Result<media::MediaEnd, tokio::task::JoinError> {
    match media {
        Media::Running(h) => (&mut h.ended).await,
        _ => std::future::pending().await,
    }
}
