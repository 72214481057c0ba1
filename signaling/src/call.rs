//! One WebRTC call on str0m: answering the offer, feeding datagrams and time in, and turning
//! str0m's outputs into what Duet cares about (transmits, audio packets, `oai-events` text).

use core::net::SocketAddr;
use std::time::Instant;

use str0m::change::SdpOffer;
use str0m::channel::ChannelId;
use str0m::config::DtlsCert;
use str0m::format::Codec;
use str0m::media::{Frequency, MediaKind, MediaTime, Mid, Pt};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc, RtcConfig};

use crate::sdp::{AudioCodec, OfferSummary, SignalError};

/// The data channel label the Realtime API uses.
pub const EVENTS_LABEL: &str = "oai-events";

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

    /// Installs the crypto backend (once per process) and makes the shared certificate.
    pub fn new(candidates: Vec<SocketAddr>) -> Result<Self, SignalError> {
        let provider = str0m::crypto::from_feature_flags();
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
    /// The WebRTC stack panicked once; the call is dead.
    poisoned: bool,
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
    /// Answers a checked offer. Returns the call and the answer SDP.
    pub fn accept(
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
            .enable_pcma(true, false);
        let mut rtc = rtc_cfg.build(now);
        for addr in &cfg.candidates {
            let c = Candidate::host(*addr, "udp")
                .map_err(|e| SignalError::Rejected(format!("candidate {addr}: {e}")))?;
            rtc.add_local_candidate(c);
        }
        let offer =
            SdpOffer::from_sdp_string(offer).map_err(|e| SignalError::Malformed(e.to_string()))?;
        let answer = rtc
            .sdp_api()
            .accept_offer(offer)
            .map_err(|e| SignalError::Rejected(e.to_string()))?;
        let call = Self {
            rtc,
            codec: summary.codec,
            mid: None,
            pt: None,
            channel: None,
            rtp_time: 0,
            poisoned: false,
        };
        Ok((call, answer.to_sdp_string()))
    }

    /// The codec Duet sends.
    pub fn codec(&self) -> AudioCodec {
        self.codec
    }

    /// Whether this call owns a datagram from `source` to `destination`.
    pub fn accepts(
        &self,
        now: Instant,
        source: SocketAddr,
        destination: SocketAddr,
        contents: &[u8],
    ) -> bool {
        match input(now, source, destination, contents) {
            Some(i) => self.rtc.accepts(&i),
            None => false,
        }
    }

    /// Feeds a datagram.
    pub fn receive(
        &mut self,
        now: Instant,
        source: SocketAddr,
        destination: SocketAddr,
        contents: &[u8],
    ) -> Result<(), String> {
        let i = input(now, source, destination, contents).ok_or("not a WebRTC datagram")?;
        self.guard(|rtc| rtc.handle_input(i).map_err(|e| e.to_string()))
    }

    /// Runs `f` on the `Rtc`, containing a panic inside the WebRTC stack (e.g. on a crafted
    /// packet) to this call: it is marked dead and reaped, every other call goes on.
    fn guard<T>(&mut self, f: impl FnOnce(&mut Rtc) -> Result<T, String>) -> Result<T, String> {
        if self.poisoned {
            return Err("call failed earlier".into());
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut self.rtc))) {
            Ok(r) => r,
            Err(_) => {
                self.poisoned = true;
                Err("the WebRTC stack panicked; call ended".into())
            }
        }
    }

    /// Advances time.
    pub fn timeout(&mut self, now: Instant) -> Result<(), String> {
        self.guard(|rtc| {
            rtc.handle_input(Input::Timeout(now))
                .map_err(|e| e.to_string())
        })
    }

    /// Drains str0m's outputs; returns when the call next needs [`Call::timeout`].
    pub fn poll(
        &mut self,
        transmits: &mut Vec<Transmit>,
        events: &mut Vec<CallEvent>,
    ) -> Result<Instant, String> {
        loop {
            match self.guard(|rtc| rtc.poll_output().map_err(|e| e.to_string()))? {
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
                    events.push(CallEvent::Audio {
                        codec,
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

    /// Sends one 20 ms frame. `wallclock` is when it is due.
    pub fn send_audio(&mut self, wallclock: Instant, payload: &[u8]) -> Result<(), String> {
        let (Some(mid), Some(pt)) = (self.mid, self.pt) else {
            return Err("no audio track".into());
        };
        let (freq, step) = match self.codec {
            AudioCodec::Opus => (Frequency::FORTY_EIGHT_KHZ, 960),
            AudioCodec::Pcmu | AudioCodec::Pcma => (Frequency::EIGHT_KHZ, 160),
        };
        let time = MediaTime::new(self.rtp_time, freq);
        self.rtp_time += step;
        let writer = self.rtc.writer(mid).ok_or("no audio writer")?;
        writer
            .write(pt, wallclock, time, payload.to_vec())
            .map_err(|e| e.to_string())
    }

    /// Sends a text message on `oai-events`; false when the channel is not open or full.
    pub fn send_text(&mut self, text: &str) -> bool {
        let Some(id) = self.channel else { return false };
        match self.rtc.channel(id) {
            Some(mut ch) => ch.write(false, text.as_bytes()).unwrap_or(false),
            None => false,
        }
    }

    /// Whether `oai-events` is open.
    pub fn channel_open(&self) -> bool {
        self.channel.is_some()
    }

    /// False once the peer closed DTLS, ICE timed out, or [`Call::close`] ran.
    pub fn is_alive(&self) -> bool {
        !self.poisoned && self.rtc.is_alive()
    }

    /// Ends the call gracefully: RTCP BYE, SCTP shutdown and DTLS close_notify are queued
    /// for [`Call::poll`]; the call is dead once they drained.
    pub fn close(&mut self) {
        if self.rtc.close().is_err() {
            self.rtc.disconnect();
        }
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
