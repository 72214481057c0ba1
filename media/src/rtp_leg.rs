//! One phone call's plain RTP leg (RTP/AVP over UDP, no ICE or DTLS): which datagrams are
//! the caller's audio, its DTMF keys, where to send, when the call has gone silent, and the
//! RTP packets of the answer, one per 20 ms slot. The audio itself (jitter buffer, G.711 or
//! Opus, resampling, playback queue) is [`CallAudio`], as for WebRTC calls.
//!
//! Rules (from how trunks and NATs behave; see the SIP research notes):
//! - **Symmetric RTP with probation.** The leg sends to the address in the offer (the
//!   signalled address) and takes audio from it at once. Another source (a caller behind
//!   NAT whose SDP names a private address) is on probation: it latches, for both
//!   directions, only after [`RELATCH_PACKETS`] in-sequence packets of one SSRC; until then
//!   its packets are ignored and nothing is sent to it. The signalled address always takes
//!   the latch back at once. So one stray or spoofed packet, even the first, can neither
//!   hear the answer nor speak into the call.
//! - **Re-latching** (a NAT rebinding, a media server failing over) needs
//!   [`RELATCH_PACKETS`] in-sequence packets of one SSRC from the new source while the
//!   latched one has been quiet for [`RELATCH_QUIET`].
//! - **Resets.** A new audio SSRC restarts sequence unwrapping and the jitter buffer; a
//!   sequence jump in one SSRC is the jitter buffer's resync.
//! - **DTMF** is RFC 4733 `telephone-event` of the offerer's payload type, from any SSRC of
//!   the latched source ([`DtmfDetector`]).
//! - **Inactivity.** No RTP or RTCP for `first_packet_timeout` after the start, or for
//!   `inactivity` after the last packet, ends the call ([`RtpLeg::expired`]).
//!
//! Sans-IO: the driver hands over datagrams with their source and arrival time, asks for
//! the next packet at each 20 ms slot, and owns the socket and the clock.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::call_audio::{CallAudio, CallAudioError, CallCodec, OutFrame};
use crate::dtmf::DtmfDetector;
use crate::rtp::{self, RtpHeader};
use crate::rtp_time::SeqUnwrapper;
use crate::srtp::{Srtp, SrtpSuite, MASTER_BYTES};

/// In-sequence packets of one SSRC from a new source that move the latch there.
pub const RELATCH_PACKETS: u32 = 4;
/// How long the latched source must have been quiet before another may take its place.
pub const RELATCH_QUIET: Duration = Duration::from_secs(1);

/// A leg's negotiated parameters (from the SDP offer and answer).
#[derive(Clone, Debug)]
pub struct RtpLegConfig {
    /// The audio codec.
    pub codec: CallCodec,
    /// Its payload type, as the offer numbered it (used both ways).
    pub payload_type: u8,
    /// The offer's `telephone-event` payload type, if it offered one.
    pub telephone_event: Option<u8>,
    /// Where the offer asked for media, until a packet arrives (`None`: nowhere yet).
    pub remote: Option<SocketAddr>,
    /// The leg's own SSRC.
    pub ssrc: u32,
    /// The first outbound sequence number (random, RFC 3550 §5.1).
    pub first_seq: u16,
    /// The first outbound timestamp (random).
    pub first_timestamp: u32,
    /// How long the leg waits for its first packet.
    pub first_packet_timeout: Duration,
    /// How long the leg waits after the last packet.
    pub inactivity: Duration,
    /// SDES-SRTP (`RTP/SAVP`): the suite and each direction's master key and salt.
    pub srtp: Option<LegSrtp>,
}

/// A leg's SRTP keys (RFC 4568: each side's `a=crypto` key protects what that side sends).
#[derive(Clone)]
pub struct LegSrtp {
    /// The suite both sides use.
    pub suite: SrtpSuite,
    /// The caller's key (its offer's `a=crypto`): what arrives is protected with it.
    pub inbound: [u8; MASTER_BYTES],
    /// Duet's key (its answer's `a=crypto`): what leaves is protected with it.
    pub outbound: [u8; MASTER_BYTES],
}

impl std::fmt::Debug for LegSrtp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the keys: configurations end up in logs.
        f.debug_struct("LegSrtp")
            .field("suite", &self.suite)
            .finish_non_exhaustive()
    }
}

/// What an inbound datagram was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// Caller audio, queued in [`CallAudio`] (call [`CallAudio::arrival_frame`]).
    Audio,
    /// The first packet of a DTMF key press.
    Dtmf(char),
    /// A packet of a key press already reported, or a non-key event.
    DtmfContinued,
    /// RTCP from the latched source (a sign of life, nothing more).
    Rtcp,
    /// Not used; see the reason.
    Ignored(Ignored),
}

/// Why an inbound datagram was not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// Not an RTP or RTCP packet.
    Malformed,
    /// From a source other than the latched one (and not taking its place yet).
    ForeignSource,
    /// A payload type the answer did not negotiate (comfort noise, say).
    PayloadType(u8),
    /// SRTP that did not authenticate (a wrong key, tampering) or a replay.
    Srtp,
}

/// Counters of one leg.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtpLegStats {
    /// Audio packets received.
    pub audio_in: u64,
    /// Datagrams not used.
    pub ignored: u64,
    /// Audio SSRC changes.
    pub ssrc_changes: u64,
    /// Times the latch moved to another source.
    pub relatched: u64,
    /// Packets sent.
    pub packets_out: u64,
}

/// Where the leg sends, and the source that may take its place.
#[derive(Debug)]
struct Latch {
    /// Where packets go: the signalled address until a source latches.
    remote: Option<SocketAddr>,
    /// The offer's address: trusted at once, and it may always take the latch back.
    signalled: Option<SocketAddr>,
    latched: bool,
    /// When the latched source was last heard.
    heard: Option<Instant>,
    /// A new source's run: (address, SSRC, last sequence number, packets in sequence).
    candidate: Option<(SocketAddr, u32, u16, u32)>,
}

impl Latch {
    /// Whether a packet from `from` belongs to the call (latching or re-latching on it).
    fn admit(&mut self, now: Instant, from: SocketAddr, ssrc: u32, seq: u16) -> Admit {
        if self.latched && self.remote == Some(from) {
            self.heard = Some(now);
            return Admit::Yes;
        }
        if self.signalled == Some(from) {
            // The address the signalling named: no probation, and it wins the latch back.
            let moved = self.latched;
            self.take(now, from);
            return if moved { Admit::Relatched } else { Admit::Yes };
        }
        let run = match self.candidate {
            Some((a, s, last, n)) if a == from && s == ssrc && seq == last.wrapping_add(1) => n + 1,
            _ => 1,
        };
        self.candidate = Some((from, ssrc, seq, run));
        let quiet = !self.latched
            || self
                .heard
                .is_none_or(|t| now.saturating_duration_since(t) >= RELATCH_QUIET);
        if run < RELATCH_PACKETS || !quiet {
            return Admit::Foreign;
        }
        let moved = self.latched;
        self.take(now, from);
        if moved {
            Admit::Relatched
        } else {
            Admit::Yes
        }
    }

    fn take(&mut self, now: Instant, from: SocketAddr) {
        self.remote = Some(from);
        self.latched = true;
        self.candidate = None;
        self.heard = Some(now);
    }
}

enum Admit {
    Yes,
    Relatched,
    Foreign,
}

/// The outbound stream's position.
#[derive(Debug)]
struct Outbound {
    seq: u16,
    /// The timestamp of slot 0.
    timestamp: u32,
    /// Samples (RTP clock) per 20 ms packet.
    step: u32,
    /// Whether the last packet carried answer audio (the next one starting a talkspurt
    /// gets the marker bit).
    talking: bool,
}

/// One call's plain RTP leg. See the module docs.
pub struct RtpLeg {
    cfg: RtpLegConfig,
    audio: CallAudio,
    latch: Latch,
    in_ssrc: Option<u32>,
    seq: SeqUnwrapper,
    dtmf: DtmfDetector,
    out: Outbound,
    started: Instant,
    last_rx: Option<Instant>,
    stats: RtpLegStats,
    /// SRTP: what arrives (the caller's key) and what leaves (ours).
    srtp: Option<(Srtp, Srtp)>,
    /// An unprotected packet (reused).
    plain: Vec<u8>,
}

impl RtpLeg {
    /// A leg starting at `now`.
    pub fn new(cfg: RtpLegConfig, now: Instant) -> Result<Self, CallAudioError> {
        let out = Outbound {
            seq: cfg.first_seq,
            timestamp: cfg.first_timestamp,
            step: cfg.codec.clock_rate() / 50,
            talking: false,
        };
        let srtp = cfg.srtp.as_ref().map(|k| {
            (
                Srtp::new(k.suite, &k.inbound),
                Srtp::new(k.suite, &k.outbound),
            )
        });
        Ok(Self {
            srtp,
            plain: Vec::with_capacity(1500),
            audio: CallAudio::new(cfg.codec)?,
            latch: Latch {
                remote: cfg.remote,
                signalled: cfg.remote,
                latched: false,
                heard: None,
                candidate: None,
            },
            cfg,
            in_ssrc: None,
            seq: SeqUnwrapper::new(),
            dtmf: DtmfDetector::new(),
            out,
            started: now,
            last_rx: None,
            stats: RtpLegStats::default(),
        })
    }

    /// The call's audio both ways.
    pub fn audio(&mut self) -> &mut CallAudio {
        &mut self.audio
    }

    /// Where packets go now (`None` before the offer named an address or a packet came).
    pub fn remote(&self) -> Option<SocketAddr> {
        self.latch.remote
    }

    /// The leg's counters.
    pub fn stats(&self) -> RtpLegStats {
        self.stats
    }

    /// One datagram from `from`, arrived at `now`.
    pub fn receive(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) -> Received {
        let r = match &mut self.srtp {
            Some((inbound, _)) if !rtp::is_rtcp(datagram) => {
                let mut plain = std::mem::take(&mut self.plain);
                let r = match inbound.unprotect(datagram, &mut plain) {
                    Ok(()) => self.classify(now, from, &plain),
                    Err(_) => Received::Ignored(Ignored::Srtp),
                };
                self.plain = plain;
                r
            }
            _ => self.classify(now, from, datagram),
        };
        if matches!(r, Received::Ignored(_)) {
            self.stats.ignored += 1;
        } else {
            self.last_rx = Some(now);
        }
        r
    }

    fn classify(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) -> Received {
        if rtp::is_rtcp(datagram) {
            return if self.latch.remote == Some(from) {
                Received::Rtcp
            } else {
                Received::Ignored(Ignored::ForeignSource)
            };
        }
        let Ok(packet) = rtp::parse(datagram) else {
            return Received::Ignored(Ignored::Malformed);
        };
        let h = packet.header;
        let audio = h.payload_type == self.cfg.payload_type;
        if !audio && Some(h.payload_type) != self.cfg.telephone_event {
            return Received::Ignored(Ignored::PayloadType(h.payload_type));
        }
        match self.latch.admit(now, from, h.ssrc, h.seq) {
            Admit::Foreign => return Received::Ignored(Ignored::ForeignSource),
            Admit::Relatched => self.stats.relatched += 1,
            Admit::Yes => {}
        }
        if !audio {
            return match self.dtmf.push(h.ssrc, h.timestamp, packet.payload) {
                Some(key) => Received::Dtmf(key),
                None => Received::DtmfContinued,
            };
        }
        if self
            .in_ssrc
            .replace(h.ssrc)
            .is_some_and(|old| old != h.ssrc)
        {
            self.seq = SeqUnwrapper::new();
            self.stats.ssrc_changes += 1;
        }
        let seq = self.seq.unwrap(h.seq);
        self.audio
            .receive(h.ssrc, seq, packet.payload.to_vec(), now);
        self.stats.audio_in += 1;
        Received::Audio
    }

    /// The packet of 20 ms slot `slot` of the grid ([`crate::FrameGrid`]), written to `out`
    /// (silence when nothing plays), and the accounting of the answer audio it carries.
    /// Call once per served slot, after [`CallAudio::prepare`]; send `out` to
    /// [`Self::remote`]. The timestamp is the slot's place on the grid, so slots skipped
    /// after a stall leave a gap in time the receiver conceals, not a drift; sequence
    /// numbers count packets sent.
    pub fn next_packet(
        &mut self,
        slot: u64,
        out: &mut Vec<u8>,
    ) -> Result<OutFrame<'_>, CallAudioError> {
        let frame = self.audio.next_frame()?;
        let talking = !frame.played.is_empty();
        let offset = (slot as u32).wrapping_mul(self.out.step);
        let header = RtpHeader {
            marker: talking && !self.out.talking,
            payload_type: self.cfg.payload_type,
            seq: self.out.seq,
            timestamp: self.out.timestamp.wrapping_add(offset),
            ssrc: self.cfg.ssrc,
        };
        rtp::write(&header, frame.payload, out);
        if let Some((_, outbound)) = &mut self.srtp {
            // Our own packet always has a header to protect.
            let _ = outbound.protect(out);
        }
        self.out.talking = talking;
        self.out.seq = self.out.seq.wrapping_add(1);
        self.stats.packets_out += 1;
        Ok(frame)
    }

    /// Whether the call has gone silent: nothing for `first_packet_timeout` since the start,
    /// or for `inactivity` since the last packet.
    pub fn expired(&self, now: Instant) -> bool {
        match self.last_rx {
            None => now.saturating_duration_since(self.started) >= self.cfg.first_packet_timeout,
            Some(t) => now.saturating_duration_since(t) >= self.cfg.inactivity,
        }
    }

    /// When [`Self::expired`] becomes true if nothing arrives before.
    pub fn expires_at(&self) -> Instant {
        match self.last_rx {
            None => self.started + self.cfg.first_packet_timeout,
            Some(t) => t + self.cfg.inactivity,
        }
    }
}

#[cfg(test)]
#[path = "rtp_leg_tests.rs"]
mod tests;
