//! One WebRTC call on str0m: answering the offer, feeding datagrams and time in, and turning
//! str0m's outputs into what Duet cares about (transmits, audio packets, `oai-events` text).

use core::net::SocketAddr;
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use str0m::change::SdpOffer;
use str0m::channel::ChannelId;
use str0m::config::DtlsCert;
use str0m::error::SctpError;
use str0m::format::Codec;
use str0m::media::{Frequency, MediaKind, MediaTime, Mid, Pt, Rid};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc, RtcConfig, RtcError};

use crate::sdp::{AudioCodec, OfferSummary, SignalError};

/// The data channel label the Realtime API uses.
pub const EVENTS_LABEL: &str = "oai-events";

/// Data channel bytes str0m may hold until the peer acknowledges them (str0m's default is
/// 128 KiB). str0m never accepts a message larger than this, and one event can be big: a
/// retrieved audio item is base64 PCM16, about 64 KB per second of audio.
pub const SEND_BUFFER_BYTES: usize = 1024 * 1024;

/// Inbound audio packets str0m holds back waiting for a missing one (40 ms).
const REORDER_PACKETS: usize = 2;

/// Why a call operation failed.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum CallError {
    /// The datagram is not STUN, DTLS, RTP or RTCP.
    #[error("not a WebRTC datagram")]
    NotWebrtc,
    /// The WebRTC stack panicked just now; the call is dead.
    #[error("the WebRTC stack panicked ({0}); call ended")]
    StackPanicked(String),
    /// The WebRTC stack panicked earlier; the call is dead.
    #[error("the call failed earlier")]
    CallFailed,
    /// Audio was sent before an audio track was negotiated.
    #[error("no audio track")]
    NoAudioTrack,
    /// str0m reported an error (its message).
    #[error("{0}")]
    Rtc(String),
}

impl CallError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            CallError::NotWebrtc => "not_webrtc",
            CallError::StackPanicked(_) => "stack_panicked",
            CallError::CallFailed => "call_failed",
            CallError::NoAudioTrack => "no_audio_track",
            CallError::Rtc(_) => "rtc",
        }
    }
}

fn rtc_error(e: RtcError) -> CallError {
    CallError::Rtc(e.to_string())
}

/// Why a text message was not sent, so the sender knows whether to keep it.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum SendError {
    /// `oai-events` is not open (yet, or any more).
    #[error("the oai-events data channel is not open")]
    NotOpen,
    /// The send buffer has no room for it now; retry once the peer acknowledged data.
    #[error("the data channel send buffer is full")]
    Full,
    /// It can never be sent: over the peer's `a=max-message-size` or [`SEND_BUFFER_BYTES`].
    #[error("a message of {len} bytes exceeds the data channel limit of {max} bytes")]
    TooLarge {
        /// The message's size.
        len: usize,
        /// The largest message this call can send.
        max: usize,
    },
    /// The call failed.
    #[error(transparent)]
    Call(#[from] CallError),
}

impl SendError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            SendError::NotOpen => "channel_not_open",
            SendError::Full => "channel_full",
            SendError::TooLarge { .. } => "message_too_large",
            SendError::Call(e) => e.code(),
        }
    }
}

/// Process-wide call settings: one DTLS certificate and our host candidates.
#[derive(Clone)]
pub struct AnswerConfig {
    cert: DtlsCert,
    candidates: Vec<SocketAddr>,
}

impl AnswerConfig {
    /// The same certificate with other host candidates (one per media socket).
    pub fn for_candidates(&self, candidates: Vec<SocketAddr>) -> Self {
        Self {
            cert: self.cert.clone(),
            candidates,
        }
    }

    /// Our host candidates.
    pub fn candidates(&self) -> &[SocketAddr] {
        &self.candidates
    }

    /// Installs the crypto backend (once per process) and makes the shared certificate.
    pub fn new(candidates: Vec<SocketAddr>) -> Result<Self, SignalError> {
        let provider = crate::dtls::provider();
        let cert = provider
            .dtls_provider
            .generate_certificate()
            .ok_or_else(|| {
                SignalError::Rejected("the crypto backend cannot make a DTLS certificate".into())
            })?;
        provider.install_process_default();
        Ok(Self { cert, candidates })
    }
}

/// A datagram to send.
#[derive(Debug)]
pub struct Transmit {
    /// Local address to send from.
    pub source: SocketAddr,
    /// Peer address.
    pub destination: SocketAddr,
    /// Bytes.
    pub contents: Vec<u8>,
}

/// What a call reports.
#[derive(Debug, PartialEq, Eq)]
pub enum CallEvent {
    /// ICE and DTLS are up.
    Connected,
    /// One inbound audio frame.
    Audio {
        /// Its codec.
        codec: AudioCodec,
        /// The sender's RTP SSRC: a new one restarts the sequence numbers.
        ssrc: u32,
        /// Extended (64-bit) RTP sequence number.
        seq: u64,
        /// Codec payload.
        payload: Vec<u8>,
    },
    /// `oai-events` opened.
    ChannelOpen,
    /// A text message on `oai-events`.
    Text(String),
    /// A binary message on `oai-events` (not part of the protocol).
    Binary(usize),
    /// `oai-events` closed.
    ChannelClosed,
}

/// One call's WebRTC state.
pub struct Call {
    rtc: Rtc,
    codec: AudioCodec,
    mid: Option<Mid>,
    pt: Option<Pt>,
    channel: Option<ChannelId>,
    rtp_time: u64,
    /// Our ICE ufrag (from the answer), for routing STUN by USERNAME.
    ufrag: String,
    /// The largest text message the peer and str0m both take.
    max_message: usize,
    /// The offer's shape (codec, data channel, media sections): a renegotiation must keep it.
    shape: (AudioCodec, bool, usize),
    /// The WebRTC stack panicked once; the call is dead. Atomic so that [`Call::accepts`]
    /// can set it through `&self` and `Call` stays `Sync`.
    poisoned: AtomicBool,
}

fn to_codec(c: Codec) -> Option<AudioCodec> {
    match c {
        Codec::Opus => Some(AudioCodec::Opus),
        Codec::PCMU => Some(AudioCodec::Pcmu),
        Codec::PCMA => Some(AudioCodec::Pcma),
        _ => None,
    }
}

impl Call {
    /// Answers a checked offer. Returns the call and the answer SDP. A panic in the WebRTC
    /// stack's SDP handling (the offer is the caller's) is a rejected offer.
    pub fn accept(
        offer: &str,
        summary: OfferSummary,
        cfg: &AnswerConfig,
        now: Instant,
    ) -> Result<(Self, String), SignalError> {
        catch_unwind(AssertUnwindSafe(|| Self::answer(offer, summary, cfg, now))).unwrap_or_else(
            |_| {
                Err(SignalError::Rejected(
                    "the WebRTC stack failed on this offer".into(),
                ))
            },
        )
    }

    fn answer(
        offer: &str,
        summary: OfferSummary,
        cfg: &AnswerConfig,
        now: Instant,
    ) -> Result<(Self, String), SignalError> {
        let opus = summary.codec == AudioCodec::Opus;
        let rtc_cfg = RtcConfig::new()
            .set_ice_lite(true)
            .set_dtls_cert(cfg.cert.clone())
            .clear_codecs()
            .enable_opus(opus, false)
            .enable_pcmu(true, false)
            .enable_pcma(true, false)
            .set_sctp_max_buffered_amount(SEND_BUFFER_BYTES)
            // Our jitter buffer reorders and conceals: str0m's default of holding 15 packets
            // (300 ms) after a loss only delayed the caller's audio and let it come in bursts.
            .set_reordering_size_audio(REORDER_PACKETS);
        let mut rtc = rtc_cfg.build(now);
        for addr in &cfg.candidates {
            let c = Candidate::host(*addr, "udp")
                .map_err(|e| SignalError::Rejected(format!("candidate {addr}: {e}")))?;
            rtc.add_local_candidate(c);
        }
        let offer_text = offer;
        let offer =
            SdpOffer::from_sdp_string(offer).map_err(|e| SignalError::Malformed(e.to_string()))?;
        let answer = rtc
            .sdp_api()
            .accept_offer(offer)
            .map_err(|e| SignalError::Rejected(e.to_string()))?;
        let ufrag = rtc.direct_api().local_ice_credentials().ufrag;
        let call = Self {
            rtc,
            codec: summary.codec,
            mid: None,
            pt: None,
            channel: None,
            rtp_time: 0,
            ufrag,
            max_message: send_limit(summary.max_message_size),
            shape: shape(offer_text, summary),
            poisoned: AtomicBool::new(false),
        };
        Ok((call, answer.to_sdp_string()))
    }

    /// Answers a new offer on the live call: an ICE restart (a browser's `restartIce()`:
    /// new ICE credentials, the same media sections) gets new local credentials in the
    /// answer and ICE runs again on the new path while DTLS, the data channel and media go
    /// on. The offer must keep the call's shape (codec, data channel, media sections). A
    /// failure half-way (the WebRTC stack may have restarted ICE already) leaves the call
    /// unusable: the caller hangs up. Returns the answer SDP; [`Call::local_ufrag`] then
    /// names the new credentials.
    pub fn renegotiate(
        &mut self,
        offer: &str,
        summary: OfferSummary,
    ) -> Result<String, SignalError> {
        if shape(offer, summary) != self.shape {
            return Err(SignalError::Rejected(
                "a new offer on a live call must keep its codec, data channel and media sections (only an ICE restart is supported)".into(),
            ));
        }
        let parsed =
            SdpOffer::from_sdp_string(offer).map_err(|e| SignalError::Malformed(e.to_string()))?;
        let result = self.guard(|call| {
            let answer = match call.rtc.sdp_api().accept_offer(parsed) {
                Ok(a) => a,
                Err(e) => {
                    // ICE may have restarted with credentials nobody was told: dead call.
                    *call.poisoned.get_mut() = true;
                    return Err(SignalError::Rejected(e.to_string()));
                }
            };
            call.ufrag = call.rtc.direct_api().local_ice_credentials().ufrag;
            call.max_message = send_limit(summary.max_message_size);
            Ok(answer.to_sdp_string())
        });
        result.unwrap_or_else(|_| {
            Err(SignalError::Rejected(
                "the WebRTC stack failed on this offer".into(),
            ))
        })
    }

    /// Whether the call failed for good (the WebRTC stack panicked, or a renegotiation broke
    /// half-way); its owner ends it.
    pub fn is_failed(&self) -> bool {
        self.poisoned.load(Ordering::Relaxed)
    }

    /// The codec Duet sends.
    pub fn codec(&self) -> AudioCodec {
        self.codec
    }

    /// Our ICE ufrag, as in the answer's `a=ice-ufrag`: the first half of the USERNAME in
    /// every ICE check the peer sends us (see [`crate::stun_username_local`]). It changes
    /// only with an ICE restart ([`Call::renegotiate`]).
    pub fn local_ufrag(&self) -> &str {
        &self.ufrag
    }

    /// The largest text [`Call::send_text`] takes: the peer's `a=max-message-size` or
    /// [`SEND_BUFFER_BYTES`], whichever is lower.
    pub fn max_message_size(&self) -> usize {
        self.max_message
    }

    /// Whether this call owns a datagram from `source` to `destination`. False for a dead
    /// call; a panic in the stack kills this call only.
    pub fn accepts(
        &self,
        now: Instant,
        source: SocketAddr,
        destination: SocketAddr,
        contents: &[u8],
    ) -> bool {
        if self.poisoned.load(Ordering::Relaxed) {
            return false;
        }
        let check =
            || input(now, source, destination, contents).is_some_and(|i| self.rtc.accepts(&i));
        catch_unwind(AssertUnwindSafe(check)).unwrap_or_else(|_| {
            self.poisoned.store(true, Ordering::Relaxed);
            false
        })
    }

    /// Feeds a datagram.
    pub fn receive(
        &mut self,
        now: Instant,
        source: SocketAddr,
        destination: SocketAddr,
        contents: &[u8],
    ) -> Result<(), CallError> {
        self.guard(|call| {
            let i = input(now, source, destination, contents).ok_or(CallError::NotWebrtc)?;
            call.rtc.handle_input(i).map_err(rtc_error)
        })?
    }

    /// Runs `f` on this call, containing a panic inside the WebRTC stack (e.g. on a crafted
    /// packet) to this call: it is marked dead and reaped, every other call goes on.
    fn guard<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> Result<T, CallError> {
        if *self.poisoned.get_mut() {
            return Err(CallError::CallFailed);
        }
        catch_unwind(AssertUnwindSafe(|| f(self))).map_err(|panic| {
            *self.poisoned.get_mut() = true;
            CallError::StackPanicked(panic_message(panic.as_ref()))
        })
    }

    /// Advances time.
    pub fn timeout(&mut self, now: Instant) -> Result<(), CallError> {
        self.guard(|call| {
            call.rtc
                .handle_input(Input::Timeout(now))
                .map_err(rtc_error)
        })?
    }

    /// Drains str0m's outputs; returns when the call next needs [`Call::timeout`].
    pub fn poll(
        &mut self,
        transmits: &mut Vec<Transmit>,
        events: &mut Vec<CallEvent>,
    ) -> Result<Instant, CallError> {
        self.guard(|call| call.drain(transmits, events))?
    }

    fn drain(
        &mut self,
        transmits: &mut Vec<Transmit>,
        events: &mut Vec<CallEvent>,
    ) -> Result<Instant, CallError> {
        loop {
            match self.rtc.poll_output().map_err(rtc_error)? {
                Output::Timeout(at) => return Ok(at),
                Output::Transmit(t) => transmits.push(Transmit {
                    source: t.source,
                    destination: t.destination,
                    contents: t.contents.to_vec(),
                }),
                Output::Event(e) => self.event(e, events),
            }
        }
    }

    fn event(&mut self, e: Event, events: &mut Vec<CallEvent>) {
        match e {
            Event::Connected => events.push(CallEvent::Connected),
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) => {
                self.rtc.disconnect()
            }
            Event::MediaAdded(m) if m.kind == MediaKind::Audio && self.mid.is_none() => {
                self.mid = Some(m.mid);
                self.pt = self.pick_pt(m.mid);
            }
            Event::MediaData(d) => {
                if let Some(codec) = to_codec(d.params.spec().codec) {
                    let ssrc = self.rx_ssrc(d.mid, d.rid);
                    events.push(CallEvent::Audio {
                        codec,
                        ssrc,
                        seq: **d.seq_range.start(),
                        payload: d.data.to_vec(),
                    });
                }
            }
            Event::ChannelOpen(id, label) if label == EVENTS_LABEL => {
                self.channel = Some(id);
                events.push(CallEvent::ChannelOpen);
            }
            Event::ChannelData(d) if Some(d.id) == self.channel => {
                match (d.binary, String::from_utf8(d.data)) {
                    (false, Ok(text)) => events.push(CallEvent::Text(text)),
                    (_, Ok(t)) => events.push(CallEvent::Binary(t.len())),
                    (_, Err(e)) => events.push(CallEvent::Binary(e.into_bytes().len())),
                }
            }
            Event::ChannelClose(id) if Some(id) == self.channel => {
                self.channel = None;
                events.push(CallEvent::ChannelClosed);
            }
            _ => {}
        }
    }

    /// The SSRC str0m currently receives on `mid` (it follows SSRC changes in place, and
    /// drops frames buffered from the old SSRC, so this is the frame's sender).
    fn rx_ssrc(&mut self, mid: Mid, rid: Option<Rid>) -> u32 {
        let mut api = self.rtc.direct_api();
        api.stream_rx_by_mid(mid, rid).map_or(0, |s| *s.ssrc())
    }

    fn pick_pt(&mut self, mid: Mid) -> Option<Pt> {
        let codec = self.codec;
        let writer = self.rtc.writer(mid)?;
        let pt = writer
            .payload_params()
            .find(|p| to_codec(p.spec().codec) == Some(codec))
            .map(|p| p.pt());
        pt
    }

    /// Whether audio can be sent (the audio track is negotiated and up).
    pub fn can_send_audio(&self) -> bool {
        self.mid.is_some() && self.pt.is_some() && self.rtc.is_connected()
    }

    /// The RTP clock rate and one 20 ms frame on it.
    fn frame_clock(&self) -> (Frequency, u64) {
        match self.codec {
            AudioCodec::Opus => (Frequency::FORTY_EIGHT_KHZ, 960),
            AudioCodec::Pcmu | AudioCodec::Pcma => (Frequency::EIGHT_KHZ, 160),
        }
    }

    /// `frames` 20 ms slots passed without a frame (the sender skipped them after a stall):
    /// the RTP clock moves on with the wall clock, so the receiver sees a gap, not a stream
    /// that lags real time by a frame for every stall.
    pub fn skip_audio_frames(&mut self, frames: u64) {
        self.rtp_time += frames * self.frame_clock().1;
    }

    /// Sends one 20 ms frame. `wallclock` is when it is due.
    pub fn send_audio(&mut self, wallclock: Instant, payload: &[u8]) -> Result<(), CallError> {
        let (Some(mid), Some(pt)) = (self.mid, self.pt) else {
            return Err(CallError::NoAudioTrack);
        };
        let (freq, step) = self.frame_clock();
        let time = MediaTime::new(self.rtp_time, freq);
        self.rtp_time += step;
        self.guard(|call| {
            let writer = call.rtc.writer(mid).ok_or(CallError::NoAudioTrack)?;
            let payload = payload.to_vec();
            writer
                .write(pt, wallclock, time, payload)
                .map_err(rtc_error)
        })?
    }

    /// Sends a text message on `oai-events`. On [`SendError::Full`] keep it (and what
    /// follows, for order) and retry after the next [`Call::poll`]s; other errors are final.
    pub fn send_text(&mut self, text: &str) -> Result<(), SendError> {
        let Some(id) = self.channel else {
            return Err(SendError::NotOpen);
        };
        let max = self.max_message;
        if text.len() > max {
            return Err(SendError::TooLarge {
                len: text.len(),
                max,
            });
        }
        let written = self.guard(|call| match call.rtc.channel(id) {
            Some(mut ch) => ch.write(false, text.as_bytes()),
            None => Err(RtcError::Sctp(SctpError::WriteBeforeEstablished)),
        })?;
        match written {
            Ok(true) => Ok(()),
            Ok(false) => Err(SendError::Full),
            Err(RtcError::Sctp(SctpError::WriteBeforeEstablished)) => Err(SendError::NotOpen),
            Err(e) => Err(SendError::Call(rtc_error(e))),
        }
    }

    /// Bytes written to `oai-events` that the peer has not acknowledged yet (0 when closed).
    pub fn buffered_amount(&mut self) -> usize {
        let Some(id) = self.channel else { return 0 };
        let amount = self.guard(|call| {
            call.rtc
                .channel(id)
                .map_or(0, |mut ch| ch.buffered_amount())
        });
        amount.unwrap_or(0)
    }

    /// Whether `oai-events` is open.
    pub fn channel_open(&self) -> bool {
        self.channel.is_some()
    }

    /// False once the peer closed DTLS, ICE timed out, the stack panicked, or [`Call::close`]
    /// ran.
    pub fn is_alive(&self) -> bool {
        !self.poisoned.load(Ordering::Relaxed) && self.rtc.is_alive()
    }

    /// Ends the call gracefully: RTCP BYE, SCTP shutdown and DTLS close_notify are queued
    /// for [`Call::poll`]; the call is dead once they drained.
    pub fn close(&mut self) {
        let _ = self.guard(|call| {
            if call.rtc.close().is_err() {
                call.rtc.disconnect();
            }
        });
    }
}

/// The largest message both the peer (`None`: no limit) and our send buffer take.
/// What a renegotiation may not change: the codec, the data channel, the media sections.
fn shape(offer: &str, summary: OfferSummary) -> (AudioCodec, bool, usize) {
    let sections = offer.lines().filter(|l| l.starts_with("m=")).count();
    (summary.codec, summary.has_data_channel, sections)
}

fn send_limit(peer: Option<usize>) -> usize {
    peer.map_or(SEND_BUFFER_BYTES, |p| p.min(SEND_BUFFER_BYTES))
}

/// The text of a panic's payload.
fn panic_message(panic: &(dyn Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_string(),
        (_, Some(s)) => s.clone(),
        _ => "no message".into(),
    }
}

fn input(
    now: Instant,
    source: SocketAddr,
    destination: SocketAddr,
    contents: &[u8],
) -> Option<Input<'_>> {
    let contents = contents.try_into().ok()?;
    Some(Input::Receive(
        now,
        Receive {
            proto: Protocol::Udp,
            source,
            destination,
            contents,
        },
    ))
}

#[cfg(test)]
#[path = "call_tests.rs"]
mod tests;
