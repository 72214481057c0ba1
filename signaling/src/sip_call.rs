//! A phone call's SIP decisions, sans-IO: what a new INVITE's body and headers give, what a
//! ringing call answers to the clock, its webhook, the caller's CANCEL and the app's
//! controls ([`Ringing`]), what an accepted call answers to each request inside its dialog
//! ([`in_dialog`]) and to the app's controls ([`live_control`]), how it ends, and the bodies
//! those requests carry (`application/dtmf-relay` key presses, `message/sipfrag` transfer
//! reports).
//!
//! No stack types, no sockets, no clocks: the driver (`src/sip/`) translates its SIP stack's
//! messages into [`Method`], [`Status`] and the events here, passes the time in, and sends
//! what the answer says.
//!
//! Rules:
//! - a ringing call answers `180 Ringing` at once and then once every [`RING_EVERY`] (RFC
//!   3261 §13.3.1.1: a proxy's Timer C runs on; no more often, as the source may be spoofed);
//! - it ends with `480` when the app has not decided in time or its webhook failed, `503`
//!   when the webhook pool was full, `486` when `/accept` found no session place, the app's
//!   status on `/reject`, `603` on `/hangup`; a CANCEL (the dialog ending) sends nothing
//!   (the stack answers it); `/refer` waits for the call to be accepted;
//! - in the dialog: INFO `200` (`application/dtmf-relay` hands its key on, `400` when it
//!   has none), a re-INVITE or UPDATE `200` with the same media (an SDP only when it carried
//!   one), NOTIFY `200` (a final 2xx `message/sipfrag` means the transfer is done, and the
//!   call ends), REFER from the caller `603`, OPTIONS and MESSAGE `200`, PUBLISH `405`.

use std::time::{Duration, Instant};

use crate::plain_sdp::{parse_offer, PlainOffer, PlainSdpError};

/// How often `180 Ringing` is repeated while the app decides: every minute.
pub const RING_EVERY: Duration = Duration::from_secs(60);
/// INVITE headers passed to the webhook at most.
pub const MAX_WEBHOOK_HEADERS: usize = 64;
/// The methods Duet answers (the `Allow` header).
pub const ALLOW: &str = "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO, UPDATE, REFER, NOTIFY";
/// Headers of an INVITE the webhook leaves out (routing), in lower case.
const ROUTING_HEADERS: [&str; 5] = [
    "via",
    "route",
    "record-route",
    "max-forwards",
    "content-length",
];

/// A SIP status code (RFC 3261 §21), with the ones Duet sends named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status(pub u16);

impl Status {
    /// `180 Ringing`.
    pub const RINGING: Self = Self(180);
    /// `200 OK`.
    pub const OK: Self = Self(200);
    /// `400 Bad Request`.
    pub const BAD_REQUEST: Self = Self(400);
    /// `403 Forbidden`.
    pub const FORBIDDEN: Self = Self(403);
    /// `405 Method Not Allowed`.
    pub const METHOD_NOT_ALLOWED: Self = Self(405);
    /// `480 Temporarily Unavailable`.
    pub const TEMPORARILY_UNAVAILABLE: Self = Self(480);
    /// `481 Call/Transaction Does Not Exist`.
    pub const NO_SUCH_CALL: Self = Self(481);
    /// `486 Busy Here`.
    pub const BUSY_HERE: Self = Self(486);
    /// `488 Not Acceptable Here`.
    pub const NOT_ACCEPTABLE_HERE: Self = Self(488);
    /// `491 Request Pending`.
    pub const REQUEST_PENDING: Self = Self(491);
    /// `503 Service Unavailable`.
    pub const SERVICE_UNAVAILABLE: Self = Self(503);
    /// `603 Decline`.
    pub const DECLINE: Self = Self(603);

    /// Its number.
    pub fn code(self) -> u16 {
        self.0
    }

    /// Whether it is a success (2xx).
    pub fn is_success(self) -> bool {
        (200..300).contains(&self.0)
    }

    /// Whether it is provisional (1xx): the request is not answered yet.
    pub fn is_provisional(self) -> bool {
        (100..200).contains(&self.0)
    }
}

/// A SIP request's method, as far as Duet tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// INVITE (inside a dialog: a re-INVITE).
    Invite,
    /// ACK.
    Ack,
    /// BYE.
    Bye,
    /// CANCEL.
    Cancel,
    /// OPTIONS.
    Options,
    /// INFO.
    Info,
    /// UPDATE.
    Update,
    /// REFER.
    Refer,
    /// NOTIFY.
    Notify,
    /// MESSAGE.
    Message,
    /// PUBLISH.
    Publish,
    /// Any other (SUBSCRIBE, PRACK, an extension).
    Other,
}

/// The answer to a request outside any dialog that no call took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The status.
    pub status: Status,
    /// Whether [`ALLOW`] goes with it.
    pub allow: bool,
    /// Whether `Accept: application/sdp` goes with it.
    pub accept_sdp: bool,
}

/// The answer to a request outside any dialog: OPTIONS `200` (with `Allow` and `Accept`), a
/// new INVITE (that found no ringing place) `503`, a request that belongs in a dialog `481`,
/// anything else `405` with `Allow`.
pub fn out_of_dialog(method: Method) -> Answer {
    let plain = |status| Answer {
        status,
        allow: false,
        accept_sdp: false,
    };
    match method {
        Method::Options => Answer {
            status: Status::OK,
            allow: true,
            accept_sdp: true,
        },
        Method::Invite => plain(Status::SERVICE_UNAVAILABLE),
        Method::Bye | Method::Info | Method::Update | Method::Notify | Method::Refer => {
            plain(Status::NO_SUCH_CALL)
        }
        _ => Answer {
            allow: true,
            ..plain(Status::METHOD_NOT_ALLOWED)
        },
    }
}

/// The offer in a new INVITE's body (`None`: a late offer, an empty body), or the outcome
/// refusing it: `400` for a body that is not SDP (not UTF-8, malformed, too large), `488`
/// for an offer with nothing Duet can answer.
pub fn read_offer(body: &[u8]) -> Result<Option<PlainOffer>, Outcome> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let refuse = |status| Outcome::end(Some(status), Some("not_acceptable"), None);
    let sdp = std::str::from_utf8(body).map_err(|_| refuse(Status::BAD_REQUEST))?;
    match parse_offer(sdp) {
        Ok(o) => Ok(Some(o)),
        Err(PlainSdpError::Malformed(_) | PlainSdpError::TooLarge(_)) => {
            Err(refuse(Status::BAD_REQUEST))
        }
        Err(_) => Err(refuse(Status::NOT_ACCEPTABLE_HERE)),
    }
}

/// An INVITE's headers (name, value) for the webhook: every one but the routing ones (Via,
/// Route, Record-Route, Max-Forwards, Content-Length), in order, at most
/// [`MAX_WEBHOOK_HEADERS`].
pub fn webhook_headers(
    headers: impl IntoIterator<Item = (String, String)>,
) -> Vec<(String, String)> {
    headers
        .into_iter()
        .filter(|(name, _)| !ROUTING_HEADERS.contains(&name.to_ascii_lowercase().as_str()))
        .take(MAX_WEBHOOK_HEADERS)
        .collect()
}

/// What the webhook announcing a call came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookResult {
    /// The app took it (2xx).
    Delivered,
    /// The webhook pool was full: it was never sent.
    Busy,
    /// Refused (4xx), out of attempts, or its task failed.
    Failed,
}

/// What happens to a ringing call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingEvent {
    /// The time [`Ringing::next_timeout`] named came.
    Timeout,
    /// The webhook's delivery ended.
    Webhook(WebhookResult),
    /// The dialog ended before an answer (the caller's CANCEL, or the stack gave up).
    Cancelled,
    /// The app's `/accept`.
    Accept,
    /// The session the accept asked for is open and `200 OK` sent.
    Opened,
    /// The session the accept asked for could not open (no place, draining, refused).
    OpenFailed,
    /// The app's `/reject`, with its status.
    Reject(u16),
    /// The app's `/hangup`.
    Hangup,
    /// The app's `/refer`.
    Refer,
    /// No control can come any more (the server stopped).
    ControlsClosed,
}

/// What the driver does next with a ringing call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Go on ringing.
    Ring,
    /// Open the session and answer `200 OK`, then tell [`RingEvent::Opened`] or
    /// [`RingEvent::OpenFailed`].
    Open,
    /// The call is accepted: it goes live.
    Live,
    /// The call is over.
    End,
}

/// The answer to an app's control (the driver turns it into its HTTP answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlReply {
    /// Done.
    Done,
    /// The driver's own error (why the session did not open).
    Failed,
    /// Refused: the call is not accepted yet (`call_not_accepted`).
    NotAccepted(&'static str),
    /// Refused: the call was accepted already (`call_already_accepted`).
    AlreadyAccepted(&'static str),
}

/// What one event does to a ringing call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// What comes next.
    pub next: Next,
    /// What to send the INVITE now: `180 Ringing`, or a final failure.
    pub status: Option<Status>,
    /// The call outcome to count (`duet_sip_calls_total{outcome}`).
    pub metric: Option<&'static str>,
    /// The answer to the control that caused it.
    pub reply: Option<ControlReply>,
}

impl Outcome {
    fn next(next: Next) -> Self {
        Self {
            next,
            status: None,
            metric: None,
            reply: None,
        }
    }

    fn end(
        status: Option<Status>,
        metric: Option<&'static str>,
        reply: Option<ControlReply>,
    ) -> Self {
        Self {
            next: Next::End,
            status,
            metric,
            reply,
        }
    }

    fn replied(self, reply: ControlReply) -> Self {
        Self {
            reply: Some(reply),
            ..self
        }
    }
}

/// A ringing call: the app's decision deadline, the next `180`, whether the webhook is still
/// out, and whether it is over.
#[derive(Clone, Debug)]
pub struct Ringing {
    deadline: Instant,
    next_ring: Instant,
    webhook_out: bool,
    phase: Next,
}

impl Ringing {
    /// A call ringing from `now`, the app deciding within `decision`; the outcome sends the
    /// first `180 Ringing`.
    pub fn start(now: Instant, decision: Duration) -> (Self, Outcome) {
        let ringing = Self {
            deadline: now + decision,
            next_ring: now + RING_EVERY,
            webhook_out: true,
            phase: Next::Ring,
        };
        let first = Outcome {
            status: Some(Status::RINGING),
            ..Outcome::next(Next::Ring)
        };
        (ringing, first)
    }

    /// When [`RingEvent::Timeout`] is due: the decision deadline or the next `180`.
    pub fn next_timeout(&self) -> Instant {
        self.deadline.min(self.next_ring)
    }

    /// Whether the webhook's delivery is still awaited.
    pub fn awaits_webhook(&self) -> bool {
        self.webhook_out
    }

    /// What `event`, at `now`, does to the call.
    pub fn on(&mut self, now: Instant, event: RingEvent) -> Outcome {
        if matches!(self.phase, Next::Live | Next::End) {
            // Decided already: a late event changes nothing.
            return Outcome::next(self.phase);
        }
        let outcome = match event {
            RingEvent::Timeout => self.timeout(now),
            RingEvent::Webhook(result) => self.webhook(result),
            RingEvent::Cancelled => Outcome::end(None, Some("cancelled"), None),
            RingEvent::ControlsClosed => Outcome::end(None, None, None),
            _ => self.control(event),
        };
        self.phase = outcome.next;
        outcome
    }

    fn timeout(&mut self, now: Instant) -> Outcome {
        if now >= self.deadline {
            return Outcome::end(Some(Status::TEMPORARILY_UNAVAILABLE), Some("timeout"), None);
        }
        if now < self.next_ring {
            return Outcome::next(Next::Ring);
        }
        self.next_ring += RING_EVERY;
        if self.next_ring <= now {
            // Late by more than a period: one 180 now, the next a period on.
            self.next_ring = now + RING_EVERY;
        }
        Outcome {
            status: Some(Status::RINGING),
            ..Outcome::next(Next::Ring)
        }
    }

    fn webhook(&mut self, result: WebhookResult) -> Outcome {
        self.webhook_out = false;
        match result {
            WebhookResult::Delivered => Outcome::next(Next::Ring),
            WebhookResult::Busy => Outcome::end(
                Some(Status::SERVICE_UNAVAILABLE),
                Some("webhook_busy"),
                None,
            ),
            WebhookResult::Failed => Outcome::end(
                Some(Status::TEMPORARILY_UNAVAILABLE),
                Some("webhook_failed"),
                None,
            ),
        }
    }

    fn control(&mut self, event: RingEvent) -> Outcome {
        let opening = self.phase == Next::Open;
        match event {
            RingEvent::Accept if !opening => Outcome::next(Next::Open),
            RingEvent::Opened if opening => Outcome {
                metric: Some("accepted"),
                ..Outcome::next(Next::Live)
            }
            .replied(ControlReply::Done),
            RingEvent::OpenFailed if opening => Outcome::end(
                Some(Status::BUSY_HERE),
                Some("busy"),
                Some(ControlReply::Failed),
            ),
            RingEvent::Reject(status) => Outcome::end(
                Some(Status(status)),
                Some("rejected"),
                Some(ControlReply::Done),
            ),
            RingEvent::Hangup => Outcome::end(
                Some(Status::DECLINE),
                Some("rejected"),
                Some(ControlReply::Done),
            ),
            RingEvent::Refer => Outcome::next(self.phase).replied(ControlReply::NotAccepted(
                "accept the call before transferring it",
            )),
            // An accept while one opens, or an open nobody asked for: nothing changes.
            _ => Outcome::next(self.phase),
        }
    }
}

/// How a live call ends, and why (for the log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ending {
    /// Why.
    pub reason: &'static str,
    /// Whether Duet ends it (a BYE goes out) rather than the dialog being over already.
    pub bye: bool,
}

impl Ending {
    /// Duet ends the call: a BYE goes out.
    pub fn ours(reason: &'static str) -> Self {
        Self { reason, bye: true }
    }
}

/// Why a dialog ended, as the stack tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DialogEnd {
    /// The caller's BYE.
    CallerBye,
    /// Duet's BYE.
    OurBye,
    /// No ACK came for the `200 OK`.
    NoAck,
    /// Anything else (a CANCEL, a failure answer, …).
    Other,
}

/// The end of a live call whose dialog is over: nothing more to send.
pub fn dialog_ended(end: DialogEnd) -> Ending {
    let reason = match end {
        DialogEnd::CallerBye => "caller hung up",
        DialogEnd::OurBye => "hung up",
        DialogEnd::NoAck => "no ACK",
        DialogEnd::Other => "dialog ended",
    };
    Ending { reason, bye: false }
}

/// What the call does after answering a request in its dialog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// Nothing.
    Nothing,
    /// The caller pressed a key (SIP INFO `application/dtmf-relay`).
    Key(char),
    /// The call ends.
    End(Ending),
}

/// The answer to a request in a live call's dialog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The status to answer.
    pub status: Status,
    /// Whether the call's SDP goes with it (`Content-Type: application/sdp`).
    pub sdp: bool,
    /// What the call does then.
    pub then: Then,
}

impl Reply {
    fn plain(status: Status) -> Self {
        Self {
            status,
            sdp: false,
            then: Then::Nothing,
        }
    }
}

/// The answer to `method` inside a live call's dialog, with its `Content-Type` (the first
/// one, if any) and body. `None`: a request the stack answers itself (BYE, ACK, CANCEL)
/// or none Duet has a word for.
pub fn in_dialog(method: Method, content_type: Option<&str>, body: &[u8]) -> Option<Reply> {
    let reply = match method {
        Method::Info => info(content_type, body),
        // A session refresh: the same media, answered again (a body is an offer to answer).
        Method::Invite | Method::Update => Reply {
            sdp: !body.is_empty(),
            ..Reply::plain(Status::OK)
        },
        Method::Notify => Reply {
            then: if transfer_done(body) {
                Then::End(Ending::ours("transferred"))
            } else {
                Then::Nothing
            },
            ..Reply::plain(Status::OK)
        },
        Method::Refer => Reply::plain(Status::DECLINE),
        Method::Options | Method::Message => Reply::plain(Status::OK),
        Method::Publish => Reply::plain(Status::METHOD_NOT_ALLOWED),
        Method::Ack | Method::Bye | Method::Cancel | Method::Other => return None,
    };
    Some(reply)
}

/// SIP INFO: an `application/dtmf-relay` body's key, `400` when it names none; any other
/// INFO `200`.
fn info(content_type: Option<&str>, body: &[u8]) -> Reply {
    let is_dtmf =
        content_type.is_some_and(|ct| ct.trim().eq_ignore_ascii_case("application/dtmf-relay"));
    if !is_dtmf {
        return Reply::plain(Status::OK);
    }
    match dtmf_relay_key(body) {
        Some(key) => Reply {
            then: Then::Key(key),
            ..Reply::plain(Status::OK)
        },
        None => Reply::plain(Status::BAD_REQUEST),
    }
}

/// The app's controls of a live call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveControl {
    /// `/hangup`.
    Hangup,
    /// `/refer`: the driver sends the REFER.
    Refer,
    /// `/accept` again.
    Accept,
    /// `/reject` after the accept.
    Reject,
    /// No control can come any more (the server stopped).
    Closed,
}

/// What a control does to a live call: its answer (`None` for [`LiveControl::Refer`],
/// answered when the REFER is, and for [`LiveControl::Closed`]) and whether the call ends.
pub fn live_control(control: LiveControl) -> (Option<ControlReply>, Option<Ending>) {
    const ACCEPTED: ControlReply = ControlReply::AlreadyAccepted("the call was accepted already");
    match control {
        LiveControl::Hangup => (Some(ControlReply::Done), Some(Ending::ours("hangup"))),
        LiveControl::Refer => (None, None),
        LiveControl::Accept | LiveControl::Reject => (Some(ACCEPTED), None),
        LiveControl::Closed => (None, Some(Ending::ours("server stopped"))),
    }
}

/// Whether a REFER was taken: the caller's side answered it 2xx.
pub fn refer_taken(status: Status) -> bool {
    status.is_success()
}

/// The answer to Duet's late offer, from the ACK's body; the call ends (with a BYE) when it
/// carries none Duet can use.
pub fn ack_answer(body: &[u8]) -> Result<PlainOffer, Ending> {
    std::str::from_utf8(body)
        .ok()
        .and_then(|sdp| parse_offer(sdp).ok())
        .ok_or(Ending::ours("no answer in the ACK"))
}

/// Whether a REFER's NOTIFY reports the transfer done: a `message/sipfrag` body whose
/// status line is a final 2xx (provisional ones, `100 Trying`, come first).
pub fn transfer_done(body: &[u8]) -> bool {
    sipfrag_status(body).is_some_and(Status::is_success)
}

/// The status of a `message/sipfrag` body's first line (`SIP/2.0 200 OK`).
pub fn sipfrag_status(body: &[u8]) -> Option<Status> {
    let frag = String::from_utf8_lossy(body);
    frag.lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .map(Status)
}

/// The key of an `application/dtmf-relay` body (`Signal=5`, `Signal=#`; `10` and `11` are
/// `*` and `#` for some senders).
pub fn dtmf_relay_key(body: &[u8]) -> Option<char> {
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

#[cfg(test)]
#[path = "sip_call_tests.rs"]
mod tests;
