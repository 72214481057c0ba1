//! One phone call's life: the INVITE checked (source, SDP), `180 Ringing` every second and
//! the webhook while the app decides, then on `/accept` the session, its RTP leg and `200
//! OK`; in the call, SIP INFO keys, session refreshes (re-INVITE, UPDATE), `/refer` and
//! `/hangup`, until a BYE, the RTP going silent or the session ending.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use duet_media::rtp_leg::{LegSrtp, RtpLegConfig};
use duet_media::srtp::SrtpSuite;
use duet_media::CallCodec;
use duet_signaling::plain_sdp::{
    parse_offer, write_answer, write_offer, CryptoSuite, LocalMedia, PlainCodec, PlainOffer,
    PlainSdpError, SdesKey, SDES_KEY_BYTES,
};
use rand::Rng;
use rsipstack::dialog::dialog::{DialogState, TerminatedReason};
use rsipstack::dialog::invite_dialog::InviteDialog;
use rsipstack::sip::{Header, Request, StatusCode};
use rsipstack::transaction::Transaction;
use tokio::sync::{mpsc, watch};

use super::media::{self, MediaEnd, MediaHandle, MediaInbox, MediaParams};
use super::stack::Shared;
use super::webhook::Delivery;
use super::Control;
use crate::calls::{CallEntry, CallMedia, PhoneSession};
use crate::error::{ApiError, Code};
use crate::metrics::METRICS;
use crate::session::{AttachmentId, Inbound, MediaSignals, SessionInput, Transport};

/// How often `180 Ringing` is repeated while the app decides: every minute, as RFC 3261
/// §13.3.1.1 asks (so a proxy's Timer C runs on), and no more often: a caller's source may
/// be spoofed, and every repeat would be a datagram reflected to it.
const RING_EVERY: Duration = Duration::from_secs(60);
/// How long a final failure answer (4xx–6xx) is retransmitted while no ACK comes (Timer G
/// at 0.5 s, 1.5 s): then its transaction is dropped, a resent INVITE still gets the answer
/// once more and its ACK is absorbed. RFC 3261 would go on for 32 s, to a source that may
/// be spoofed (about ten datagrams for one INVITE).
const FINAL_RESENT_FOR: Duration = Duration::from_secs(2);
/// How long a leg waits for its first RTP packet.
const FIRST_PACKET: Duration = Duration::from_secs(30);
/// INVITE headers passed to the webhook at most (Via and Route stay behind).
const MAX_WEBHOOK_HEADERS: usize = 64;
/// Requests to a call's task waiting at once.
const CONTROLS: usize = 8;

/// A new INVITE (out of dialog) that got a ringing place.
pub(super) async fn invite(
    shared: Arc<Shared>,
    mut tx: Transaction,
    ring: super::limits::RingSlot,
) {
    let offer = match read_offer(&tx.original.body) {
        Ok(offer) => offer,
        Err(status) => {
            METRICS.sip_call("not_acceptable");
            refuse(&mut tx, status).await;
            return;
        }
    };
    let tcp = tx
        .connection
        .as_ref()
        .is_some_and(|c| c.transport() != rsipstack::sip::Transport::Udp);
    let contact = contact(&shared, tcp);
    let dialog =
        match shared
            .dialogs
            .get_or_create_server_invite(&tx, shared.states.clone(), None, contact)
        {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!(error = %e, "SIP INVITE without a dialog (no Contact?)");
                refuse(&mut tx, StatusCode::BadRequest).await;
                return;
            }
        };
    // 100 at once (the caller stops retransmitting), then 180 from the call.
    let _ = tx.send_trying().await;
    let headers = webhook_headers(&tx.original);
    let call = Call::new(shared, dialog, offer);
    let mut driver = call.dialog.clone();
    // The INVITE transaction: 100, the queued 180s and final answer, 2xx retransmissions
    // until the ACK, a CANCEL's 487.
    let mut driver = tokio::spawn(async move {
        if let Err(e) = driver.handle(&mut tx).await {
            tracing::debug!(error = %e, "SIP INVITE transaction ended");
        }
    });
    if !call.run(headers, ring).await {
        // Not answered 2xx: its final failure answer is resent for a short while only,
        // then the transaction goes (dropped with the task).
        let _ = tokio::time::timeout(FINAL_RESENT_FOR, &mut driver).await;
        driver.abort();
    }
}

/// A new INVITE with no ringing place: `503` at once.
pub(super) async fn ringing_full(mut tx: Transaction) {
    METRICS.sip_call("ringing_full");
    refuse(&mut tx, StatusCode::ServiceUnavailable).await;
}

/// A place for one more ringing call: fewer than `--sip-max-ringing` ring, and the ringing
/// and admitted calls together stay under `--max-calls`.
pub(super) fn ring_slot(shared: &Shared) -> Option<super::limits::RingSlot> {
    let room = shared.host.call_room();
    shared
        .calls
        .take_ring(shared.settings.max_ringing.min(room))
}

/// Answers an INVITE no dialog was made for, and absorbs its ACK (for a short while: see
/// [`FINAL_RESENT_FOR`]).
async fn refuse(tx: &mut Transaction, status: StatusCode) {
    if tx.reply(status).await.is_ok() {
        let _ = tokio::time::timeout(FINAL_RESENT_FOR, async {
            while tx.receive().await.is_some() {}
        })
        .await;
    }
}

/// The offer in an INVITE's body (`None`: a late offer), or the status refusing it.
fn read_offer(body: &[u8]) -> Result<Option<PlainOffer>, StatusCode> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let sdp = std::str::from_utf8(body).map_err(|_| StatusCode::BadRequest)?;
    match parse_offer(sdp) {
        Ok(o) => Ok(Some(o)),
        Err(PlainSdpError::Malformed(_) | PlainSdpError::TooLarge(_)) => {
            Err(StatusCode::BadRequest)
        }
        Err(_) => Err(StatusCode::NotAcceptableHere),
    }
}

/// Our Contact (the transport the call came in on, or the dialog would move to UDP).
fn contact(shared: &Shared, tcp: bool) -> Option<rsipstack::sip::Uri> {
    let addr = SocketAddr::new(shared.settings.public, shared.local.port());
    let uri = if tcp {
        format!("sip:duet@{addr};transport=tcp")
    } else {
        format!("sip:duet@{addr}")
    };
    uri.as_str().try_into().ok()
}

/// The INVITE's headers for the webhook: every one but the routing ones, in order.
fn webhook_headers(req: &Request) -> Vec<(String, String)> {
    req.headers
        .iter()
        .map(|h| (h.name().to_string(), h.value().to_string()))
        .filter(|(name, _)| {
            ![
                "via",
                "route",
                "record-route",
                "max-forwards",
                "content-length",
            ]
            .contains(&name.to_ascii_lowercase().as_str())
        })
        .take(MAX_WEBHOOK_HEADERS)
        .collect()
}

/// A call's state.
struct Call {
    shared: Arc<Shared>,
    id: String,
    dialog: InviteDialog,
    offer: Option<PlainOffer>,
    states: mpsc::UnboundedReceiver<DialogState>,
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
    fn new(shared: Arc<Shared>, dialog: InviteDialog, offer: Option<PlainOffer>) -> Self {
        let id = duet_signaling::call_id_on(shared.host.node_id());
        let (state_tx, states) = mpsc::unbounded_channel();
        if let Ok(mut r) = shared.routes.lock() {
            r.insert(dialog.id().to_string(), state_tx);
        }
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

    fn reject(&self, status: u16, outcome: &str) {
        METRICS.sip_call(outcome);
        let _ = self.dialog.reject(Some(StatusCode::from(status)), None);
    }

    /// Ringing until the app decides, the caller cancels, the webhook fails or time is up.
    async fn ring(&mut self, headers: Vec<(String, String)>) -> Option<Live> {
        let _ = self.dialog.ringing(None, None);
        let hook = self.shared.settings.webhook.clone();
        let id = self.id.clone();
        let mut webhook = AbortOnDrop(tokio::spawn(async move {
            hook.call_incoming(&id, &headers).await
        }));
        let deadline = tokio::time::sleep(self.shared.settings.decision);
        tokio::pin!(deadline);
        let mut ringing =
            tokio::time::interval_at(tokio::time::Instant::now() + RING_EVERY, RING_EVERY);
        let mut delivered = false;
        loop {
            tokio::select! {
                () = &mut deadline => {
                    self.reject(480, "timeout");
                    return None;
                }
                _ = ringing.tick() => {
                    let _ = self.dialog.ringing(None, None);
                }
                got = &mut webhook.0, if !delivered => {
                    delivered = true;
                    if matches!(got, Ok(Delivery::Busy)) {
                        self.reject(503, "webhook_busy");
                        return None;
                    }
                    if !matches!(got, Ok(Delivery::Delivered)) {
                        tracing::warn!(call = %self.id, outcome = ?got.ok(), "webhook not delivered; call refused");
                        self.reject(480, "webhook_failed");
                        return None;
                    }
                }
                state = self.states.recv() => {
                    if matches!(state, None | Some(DialogState::Terminated(..))) {
                        METRICS.sip_call("cancelled");
                        return None;
                    }
                }
                ctrl = self.controls.recv() => match self.decide(ctrl).await {
                    Decision::Wait => {}
                    Decision::Accepted(live) => return Some(*live),
                    Decision::Ended => return None,
                },
            }
        }
    }

    async fn decide(&mut self, ctrl: Option<Control>) -> Decision {
        match ctrl {
            Some(Control::Accept {
                patch,
                owner,
                reply,
            }) => match self.accept(*patch, owner).await {
                Ok(live) => {
                    let _ = reply.send(Ok(()));
                    Decision::Accepted(Box::new(live))
                }
                Err(e) => {
                    // No slot, the server draining or the configuration refused: busy.
                    self.reject(486, "busy");
                    let _ = reply.send(Err(e));
                    Decision::Ended
                }
            },
            Some(Control::Reject { status, reply }) => {
                self.reject(status, "rejected");
                let _ = reply.send(Ok(()));
                Decision::Ended
            }
            Some(Control::Hangup { reply }) => {
                self.reject(603, "rejected");
                let _ = reply.send(Ok(()));
                Decision::Ended
            }
            Some(Control::Refer { reply, .. }) => {
                let _ = reply.send(Err(not_yet("accept the call before transferring it")));
                Decision::Wait
            }
            None => Decision::Ended,
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
        // SDES: our own key for what we send, in the offer's suite and tag.
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
        let headers = vec![Header::ContentType("application/sdp".into())];
        let _ = self
            .dialog
            .accept(Some(headers), Some(sdp.clone().into_bytes()));
        let (ended_tx, ended) = watch::channel(());
        self.register(&phone, attachment, &signals, owner, ended);
        METRICS.sip_call("accepted");
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

/// A reason to end a live call, for logs and the BYE.
fn ended_by(reason: &TerminatedReason) -> &'static str {
    match reason {
        TerminatedReason::UacBye => "caller hung up",
        TerminatedReason::UasBye => "hung up",
        TerminatedReason::Timeout => "no ACK",
        _ => "dialog ended",
    }
}

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
