//! One phone call's life: the INVITE checked (source, SDP), `180 Ringing` every minute and
//! the webhook while the app decides, then on `/accept` the session, its RTP leg and `200
//! OK`; in the call, SIP INFO keys, session refreshes (re-INVITE, UPDATE), `/refer` and
//! `/hangup`, until a BYE, the RTP going silent or the session ending.
//!
//! The decisions are `duet_signaling::sip_call`'s ([`Ringing`] while ringing,
//! `sip_call::in_dialog` and `sip_call::live_control` once live); this task and its
//! `live` half only move messages: the stack's news (in `stack.rs`'s types), the app's
//! controls, the webhook's delivery and the clock go in, and what the decisions answer goes
//! out.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use duet_media::rtp_leg::{LegSrtp, RtpLegConfig};
use duet_media::srtp::SrtpSuite;
use duet_media::CallCodec;
use duet_signaling::plain_sdp::{
    write_answer, write_offer, CryptoSuite, LocalMedia, PlainCodec, PlainOffer, SdesKey,
    SDES_KEY_BYTES,
};
use duet_signaling::sip_call::{
    self, ControlReply, Next, Outcome, RingEvent, Ringing, WebhookResult,
};
use rand::Rng;
use tokio::sync::{mpsc, oneshot, watch};

use super::media::{self, MediaEnd, MediaHandle, MediaInbox, MediaParams};
use super::stack::{Dialog, DialogEvent, Invite, Shared};
use super::webhook::Delivery;
use super::Control;
use crate::calls::{CallEntry, CallMedia, PhoneSession};
use crate::error::{ApiError, Code};
use crate::metrics::METRICS;
use crate::session::{AttachmentId, Inbound, MediaSignals, SessionInput, Transport};

/// How long a leg waits for its first RTP packet.
const FIRST_PACKET: Duration = Duration::from_secs(30);
/// Requests to a call's task waiting at once.
const CONTROLS: usize = 8;

/// A new INVITE (out of dialog) that got a ringing place.
pub(super) async fn invite(shared: Arc<Shared>, invite: Invite, ring: super::limits::RingSlot) {
    let offer = match sip_call::read_offer(invite.body()) {
        Ok(offer) => offer,
        Err(refused) => {
            count(&refused);
            if let Some(status) = refused.status {
                invite.refuse(status).await;
            }
            return;
        }
    };
    let headers = sip_call::webhook_headers(invite.headers());
    let Some((dialog, states, transaction)) = invite.open(&shared).await else {
        return;
    };
    let call = Call::new(shared, dialog, states, offer);
    let accepted = call.run(headers, ring).await;
    transaction.finish(accepted).await;
}

/// A place for one more ringing call: fewer than `--sip-max-ringing` ring, and the ringing
/// and admitted calls together stay under `--max-calls`.
pub(super) fn ring_slot(shared: &Shared) -> Option<super::limits::RingSlot> {
    let room = shared.host.call_room();
    shared
        .calls
        .take_ring(shared.settings.max_ringing.min(room))
}

/// Counts an outcome's call outcome, if it names one.
fn count(outcome: &Outcome) {
    if let Some(metric) = outcome.metric {
        METRICS.sip_call(metric);
    }
}

/// A call's state.
struct Call {
    shared: Arc<Shared>,
    id: String,
    dialog: Dialog,
    offer: Option<PlainOffer>,
    states: mpsc::UnboundedReceiver<DialogEvent>,
    controls: mpsc::Receiver<Control>,
    control: mpsc::Sender<Control>,
}

/// An accepted call's session and media.
struct Live {
    phone: PhoneSession,
    signals: Arc<MediaSignals>,
    attachment: AttachmentId,
    media: Media,
    /// The SDP we sent (answered again on a session refresh).
    sdp: String,
    /// Dropped when the call ends: its sidebands end with it.
    _ended: watch::Sender<()>,
}

/// A call's media, running or waiting for a late offer's answer (in the ACK).
enum Media {
    Running(MediaHandle),
    Waiting(MediaInbox, tokio::net::UdpSocket),
    Gone,
}

impl Call {
    fn new(
        shared: Arc<Shared>,
        dialog: Dialog,
        states: mpsc::UnboundedReceiver<DialogEvent>,
        offer: Option<PlainOffer>,
    ) -> Self {
        let id = duet_signaling::call_id_on(shared.host.node_id());
        let (control, controls) = mpsc::channel(CONTROLS);
        shared.calls.insert(&id, control.clone());
        Self {
            shared,
            id,
            dialog,
            offer,
            states,
            controls,
            control,
        }
    }

    /// The call's life; whether it was accepted (answered `200 OK`).
    async fn run(mut self, headers: Vec<(String, String)>, ring: super::limits::RingSlot) -> bool {
        tracing::info!(call = %self.id, "SIP call ringing");
        let live = self.ring(headers).await;
        drop(ring);
        let accepted = live.is_some();
        if let Some(live) = live {
            self.live(live).await;
        }
        self.shared.calls.remove(&self.id);
        self.shared.host.calls().remove(&self.id);
        tracing::info!(call = %self.id, "SIP call ended");
        accepted
    }

    /// Sends what `outcome` says to send, counts it, answers its control; what comes next.
    fn settle(
        &self,
        outcome: Outcome,
        reply: Option<ControlAnswer>,
        error: Option<ApiError>,
    ) -> Next {
        count(&outcome);
        if let Some(status) = outcome.status {
            self.dialog.send(status);
        }
        if let (Some(reply), Some(answer)) = (reply, outcome.reply) {
            let _ = reply.send(control_result(answer, error));
        }
        outcome.next
    }

    /// Ringing until the app decides, the caller cancels, the webhook fails or time is up.
    async fn ring(&mut self, headers: Vec<(String, String)>) -> Option<Live> {
        let (mut ringing, first) = Ringing::start(Instant::now(), self.shared.settings.decision);
        self.settle(first, None, None);
        let hook = self.shared.settings.webhook.clone();
        let id = self.id.clone();
        let mut webhook = AbortOnDrop(tokio::spawn(async move {
            hook.call_incoming(&id, &headers).await
        }));
        loop {
            let wake = tokio::time::Instant::from_std(ringing.next_timeout());
            let event = tokio::select! {
                () = tokio::time::sleep_until(wake) => RingEvent::Timeout,
                got = &mut webhook.0, if ringing.awaits_webhook() => {
                    RingEvent::Webhook(self.delivered(got))
                }
                state = self.states.recv() => match state {
                    None | Some(DialogEvent::Ended(_)) => RingEvent::Cancelled,
                    Some(_) => continue,
                },
                ctrl = self.controls.recv() => match self.decide(&mut ringing, ctrl).await {
                    Decision::Wait => continue,
                    Decision::Accepted(live) => return Some(*live),
                    Decision::Ended => return None,
                },
            };
            let outcome = ringing.on(Instant::now(), event);
            if self.settle(outcome, None, None) == Next::End {
                return None;
            }
        }
    }

    /// The webhook's delivery, in the words of the decisions.
    fn delivered(&self, got: Result<Delivery, tokio::task::JoinError>) -> WebhookResult {
        match got {
            Ok(Delivery::Delivered) => WebhookResult::Delivered,
            Ok(Delivery::Busy) => WebhookResult::Busy,
            got => {
                tracing::warn!(call = %self.id, outcome = ?got.ok(), "webhook not delivered; call refused");
                WebhookResult::Failed
            }
        }
    }

    /// An app's control of the ringing call.
    async fn decide(&mut self, ringing: &mut Ringing, ctrl: Option<Control>) -> Decision {
        let (event, reply) = match ctrl {
            Some(Control::Accept {
                patch,
                owner,
                reply,
            }) => return self.accept_control(ringing, *patch, owner, reply).await,
            Some(Control::Reject { status, reply }) => (RingEvent::Reject(status), Some(reply)),
            Some(Control::Hangup { reply }) => (RingEvent::Hangup, Some(reply)),
            Some(Control::Refer { reply, .. }) => (RingEvent::Refer, Some(reply)),
            None => (RingEvent::ControlsClosed, None),
        };
        match self.settle(ringing.on(Instant::now(), event), reply, None) {
            Next::End => Decision::Ended,
            _ => Decision::Wait,
        }
    }

    /// `/accept`: the session opened and `200 OK` sent, or `486` when it cannot open (no
    /// slot, the server draining, the configuration refused).
    async fn accept_control(
        &mut self,
        ringing: &mut Ringing,
        patch: crate::protocol::SessionPatch,
        owner: Option<String>,
        reply: ControlAnswer,
    ) -> Decision {
        let asked = ringing.on(Instant::now(), RingEvent::Accept);
        if asked.next != Next::Open {
            self.settle(asked, Some(reply), None);
            return Decision::Wait;
        }
        match self.accept(patch, owner).await {
            Ok(live) => {
                self.settle(
                    ringing.on(Instant::now(), RingEvent::Opened),
                    Some(reply),
                    None,
                );
                Decision::Accepted(Box::new(live))
            }
            Err(e) => {
                let failed = ringing.on(Instant::now(), RingEvent::OpenFailed);
                self.settle(failed, Some(reply), Some(e));
                Decision::Ended
            }
        }
    }

    /// Opens the session on a new RTP port and answers `200 OK` (the answer, or a late
    /// offer's offer).
    async fn accept(
        &mut self,
        patch: crate::protocol::SessionPatch,
        owner: Option<String>,
    ) -> Result<Live, ApiError> {
        let settings = &self.shared.settings;
        let socket = settings
            .rtp_socket(settings.listen.ip())
            .await
            .map_err(|e| ApiError::new(Code::RtpPortUnavailable, format!("no RTP port: {e}")))?;
        let port = socket.local_addr().map_or(0, |a| a.port());
        let signals = Arc::new(MediaSignals::default());
        let (sink, inbox) = media::channel();
        let transport = Transport::WebRtc {
            sink: Box::new(sink),
            signals: signals.clone(),
        };
        let phone = self
            .shared
            .host
            .open_phone_session(transport, patch, owner.clone())
            .await?;
        let attachment = AttachmentId::fresh();
        let (local, ours) = self.local_media(port);
        let (sdp, media) = match &self.offer {
            Some(offer) => {
                let ours = ours.map(|k| k.key_salt);
                let params = self.media_params(offer, socket, &phone, (attachment, &signals), ours);
                let handle = media::start(params, inbox)
                    .map_err(|e| ApiError::new(Code::RtpUnavailable, e.to_string()))?;
                (write_answer(offer, &local), Media::Running(handle))
            }
            None => (write_offer(&local), Media::Waiting(inbox, socket)),
        };
        self.dialog.accept(&sdp);
        let (ended_tx, ended) = watch::channel(());
        self.register(&phone, attachment, &signals, owner, ended);
        tracing::info!(call = %self.id, rtp_port = port, "SIP call accepted");
        Ok(Live {
            phone,
            signals,
            attachment,
            media,
            sdp,
            _ended: ended_tx,
        })
    }

    /// Our side of the media on RTP `port`, and (SDES) our own key for what we send, in the
    /// offer's suite and tag.
    fn local_media(&self, port: u16) -> (LocalMedia, Option<SdesKey>) {
        let ours = self
            .offer
            .as_ref()
            .and_then(|o| o.crypto.as_ref())
            .map(|theirs| SdesKey {
                key_salt: rand::rng().random::<[u8; SDES_KEY_BYTES]>(),
                ..theirs.clone()
            });
        let local = LocalMedia {
            addr: self.shared.settings.public,
            port,
            session_id: rand::rng().random_range(1..u64::from(u32::MAX)),
            crypto: ours.clone(),
        };
        (local, ours)
    }

    /// The accepted call in the registry the sideband and `/hangup` look in.
    fn register(
        &self,
        phone: &PhoneSession,
        attachment: AttachmentId,
        signals: &Arc<MediaSignals>,
        owner: Option<String>,
        ended: watch::Receiver<()>,
    ) {
        self.shared.calls.set_owner(&self.id, owner.clone());
        let entry = CallEntry {
            media: CallMedia::Sip(self.control.clone()),
            session: phone.inbox.clone(),
            attachment,
            owner,
            sidebands: Arc::default(),
            signals: signals.clone(),
            ended,
        };
        self.shared.host.calls().insert(&self.id, entry);
    }

    /// The media of `offer` (a late offer's answer) on `socket`; `ours` is Duet's SDES key
    /// when the offer was `RTP/SAVP`.
    fn media_params(
        &self,
        offer: &PlainOffer,
        socket: tokio::net::UdpSocket,
        phone: &PhoneSession,
        (attachment, signals): (AttachmentId, &Arc<MediaSignals>),
        ours: Option<[u8; SDES_KEY_BYTES]>,
    ) -> MediaParams {
        let srtp = offer
            .crypto
            .as_ref()
            .zip(ours)
            .map(|(theirs, ours)| LegSrtp {
                suite: match theirs.suite {
                    CryptoSuite::AesCm128HmacSha1_80 => SrtpSuite::AesCm128HmacSha1_80,
                    CryptoSuite::AesCm128HmacSha1_32 => SrtpSuite::AesCm128HmacSha1_32,
                },
                inbound: theirs.key_salt,
                outbound: ours,
            });
        let mut rng = rand::rng();
        let leg = RtpLegConfig {
            codec: match offer.codec {
                PlainCodec::Pcmu => CallCodec::Pcmu,
                PlainCodec::Pcma => CallCodec::Pcma,
                PlainCodec::Opus => CallCodec::Opus,
            },
            payload_type: offer.payload_type,
            telephone_event: offer.telephone_event,
            remote: offer.addr.map(|ip| SocketAddr::new(ip, offer.port)),
            ssrc: rng.random(),
            first_seq: rng.random(),
            first_timestamp: rng.random(),
            first_packet_timeout: FIRST_PACKET,
            inactivity: self.shared.settings.rtp_timeout,
            srtp,
        };
        MediaParams {
            id: self.id.clone(),
            socket,
            leg,
            session: phone.inbox.clone(),
            attachment,
            signals: signals.clone(),
        }
    }
}

/// What a control did to a ringing call.
enum Decision {
    Wait,
    Accepted(Box<Live>),
    Ended,
}

/// The reply channel of an app's control.
type ControlAnswer = oneshot::Sender<Result<(), ApiError>>;

/// A control's answer for the HTTP API (`error`: the driver's own, for
/// [`ControlReply::Failed`]).
fn control_result(answer: ControlReply, error: Option<ApiError>) -> Result<(), ApiError> {
    match answer {
        ControlReply::Done => Ok(()),
        ControlReply::Failed => Err(error.unwrap_or_else(|| not_yet("the call was not accepted"))),
        ControlReply::NotAccepted(message) => Err(not_yet(message)),
        ControlReply::AlreadyAccepted(message) => Err(live::conflict(message)),
    }
}

fn not_yet(message: &str) -> ApiError {
    ApiError::new(Code::CallNotAccepted, message)
}

/// A task aborted when its owner drops it (the webhook of a call decided or cancelled).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[path = "call_live.rs"]
mod live;

fn session_input(attachment: AttachmentId, input: SessionInput) -> Inbound {
    Inbound {
        input,
        hold: None,
        from: attachment,
    }
}

fn media_end_reason(end: Result<MediaEnd, tokio::task::JoinError>) -> &'static str {
    end.map_or("media task failed", MediaEnd::as_str)
}
