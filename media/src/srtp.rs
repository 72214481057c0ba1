//! SRTP (RFC 3711) for phone calls keyed by SDES (RFC 4568 `a=crypto`): the suites
//! `AES_CM_128_HMAC_SHA1_80` and `_32`, RTP only (a plain leg reads RTCP as a sign of life
//! and sends none). Each direction has its own master key: the offerer's protects what it
//! sends, the answerer's what it sends.
//!
//! - Session keys are derived once (§4.3.1; key derivation rate 0, so no re-keying).
//! - The payload is encrypted with AES-128 in counter mode from the packet's IV (§4.1.1:
//!   session salt, SSRC and 48-bit packet index), and the header and encrypted payload with
//!   the rollover counter are authenticated with HMAC-SHA1, truncated to 80 or 32 bits.
//! - Receiving guesses each SSRC's rollover counter from its highest sequence number
//!   (Appendix A) and updates it only once a packet authenticated; a packet whose tag is
//!   wrong is dropped, never decrypted. Replays within the last 64 indexes are dropped too.
//!
//! Sans-IO and allocation-free per packet after warm-up.

use aes::Aes128;
use cipher::{KeyIvInit, StreamCipher};
use hmac::{Hmac, Mac};
use sha1::Sha1;

use crate::rtp;

type Aes128Ctr = ctr::Ctr128BE<Aes128>;

/// Bytes of a master key followed by its master salt.
pub const MASTER_BYTES: usize = 30;

/// The SDES suites spoken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrtpSuite {
    /// `AES_CM_128_HMAC_SHA1_80`: an 80-bit tag.
    AesCm128HmacSha1_80,
    /// `AES_CM_128_HMAC_SHA1_32`: a 32-bit tag.
    AesCm128HmacSha1_32,
}

impl SrtpSuite {
    /// Bytes of the authentication tag.
    pub fn tag_len(self) -> usize {
        match self {
            SrtpSuite::AesCm128HmacSha1_80 => 10,
            SrtpSuite::AesCm128HmacSha1_32 => 4,
        }
    }
}

/// Why a packet was not unprotected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SrtpError {
    /// Not an RTP packet long enough for its header and tag.
    #[error("not an SRTP packet")]
    Malformed,
    /// The tag does not match (a wrong key, tampering, or noise).
    #[error("SRTP authentication failed")]
    Auth,
    /// An index seen already.
    #[error("SRTP replay")]
    Replay,
}

/// What a receiver keeps per SSRC.
#[derive(Clone, Copy, Debug)]
struct Stream {
    ssrc: u32,
    roc: u32,
    /// The highest sequence number authenticated.
    last: u16,
    /// Bit `k` set: index `highest - k` was seen.
    window: u64,
    /// The highest index authenticated.
    highest: u64,
}

/// Streams (SSRCs) a receiver tracks at once (the caller's audio and a DTMF source).
const STREAMS: usize = 4;

/// One direction's SRTP context.
pub struct Srtp {
    suite: SrtpSuite,
    key: [u8; 16],
    salt: [u8; 14],
    mac: Hmac<Sha1>,
    streams: Vec<Stream>,
    /// Sending: the rollover counter and the last sequence number sent.
    tx: Option<(u32, u16)>,
    tag: [u8; 20],
}

/// AES-CM keystream of `out.len()` bytes from `iv` (the PRF of §4.3.3).
fn keystream(key: &[u8; 16], iv: &[u8; 16], out: &mut [u8]) {
    out.fill(0);
    Aes128Ctr::new(key.into(), iv.into()).apply_keystream(out);
}

/// Session key `label` (§4.3.1 with a key derivation rate of 0).
fn derive(master_key: &[u8; 16], master_salt: &[u8; 14], label: u8, out: &mut [u8]) {
    let mut iv = [0u8; 16];
    iv[..14].copy_from_slice(master_salt);
    iv[7] ^= label;
    keystream(master_key, &iv, out);
}

impl Srtp {
    /// A context for the master key and salt `master` (as `a=crypto` carries them).
    pub fn new(suite: SrtpSuite, master: &[u8; MASTER_BYTES]) -> Self {
        let mut mk = [0u8; 16];
        let mut ms = [0u8; 14];
        mk.copy_from_slice(&master[..16]);
        ms.copy_from_slice(&master[16..]);
        let (mut key, mut auth, mut salt) = ([0u8; 16], [0u8; 20], [0u8; 14]);
        derive(&mk, &ms, 0, &mut key);
        derive(&mk, &ms, 1, &mut auth);
        derive(&mk, &ms, 2, &mut salt);
        // HMAC takes any key length: this cannot fail.
        let mac = <Hmac<Sha1> as Mac>::new_from_slice(&auth).unwrap_or_else(|_| unreachable!());
        Self {
            suite,
            key,
            salt,
            mac,
            streams: Vec::with_capacity(STREAMS),
            tx: None,
            tag: [0u8; 20],
        }
    }

    fn iv(&self, ssrc: u32, index: u64) -> [u8; 16] {
        let mut iv = [0u8; 16];
        iv[..14].copy_from_slice(&self.salt);
        for (b, s) in iv[4..8].iter_mut().zip(ssrc.to_be_bytes()) {
            *b ^= s;
        }
        for (b, s) in iv[8..14].iter_mut().zip(&index.to_be_bytes()[2..]) {
            *b ^= s;
        }
        iv
    }

    /// The full HMAC of `authenticated || roc` into `self.tag`.
    fn sign(&mut self, authenticated: &[u8], roc: u32) {
        let mut mac = self.mac.clone();
        mac.update(authenticated);
        mac.update(&roc.to_be_bytes());
        self.tag.copy_from_slice(&mac.finalize().into_bytes());
    }

    /// Protects the RTP packet in `packet` in place: encrypts its payload, appends the tag.
    pub fn protect(&mut self, packet: &mut Vec<u8>) -> Result<(), SrtpError> {
        let header = rtp::header_len(packet).map_err(|_| SrtpError::Malformed)?;
        let seq = u16::from_be_bytes([packet[2], packet[3]]);
        let ssrc = u32::from_be_bytes([packet[8], packet[9], packet[10], packet[11]]);
        let roc = match self.tx {
            // A sequence number far below the last one wrapped around.
            Some((roc, last)) if seq < last && last - seq > 0x8000 => roc.wrapping_add(1),
            Some((roc, _)) => roc,
            None => 0,
        };
        self.tx = Some((roc, seq));
        let index = (u64::from(roc) << 16) | u64::from(seq);
        let iv = self.iv(ssrc, index);
        Aes128Ctr::new((&self.key).into(), (&iv).into()).apply_keystream(&mut packet[header..]);
        self.sign(packet, roc);
        let n = self.suite.tag_len();
        packet.extend_from_slice(&self.tag[..n]);
        Ok(())
    }

    /// The rollover counter a packet of `ssrc` with `seq` most likely has (Appendix A).
    fn guess(&self, ssrc: u32, seq: u16) -> (u32, Option<usize>) {
        let Some(i) = self.streams.iter().position(|s| s.ssrc == ssrc) else {
            return (0, None);
        };
        let s = self.streams[i];
        let roc = if s.last < 0x8000 {
            if seq > s.last && seq - s.last > 0x8000 {
                s.roc.wrapping_sub(1)
            } else {
                s.roc
            }
        } else if s.last - 0x8000 > seq {
            s.roc.wrapping_add(1)
        } else {
            s.roc
        };
        (roc, Some(i))
    }

    /// Unprotects an SRTP packet into `out` (the plain RTP packet), or says why not.
    pub fn unprotect(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        let n = self.suite.tag_len();
        let header = rtp::header_len(packet).map_err(|_| SrtpError::Malformed)?;
        if packet.len() < header + n {
            return Err(SrtpError::Malformed);
        }
        let (body, tag) = packet.split_at(packet.len() - n);
        let seq = u16::from_be_bytes([body[2], body[3]]);
        let ssrc = u32::from_be_bytes([body[8], body[9], body[10], body[11]]);
        let (roc, stream) = self.guess(ssrc, seq);
        let index = (u64::from(roc) << 16) | u64::from(seq);
        if let Some(i) = stream {
            let s = &self.streams[i];
            let seen = index <= s.highest
                && (s.highest - index >= 64 || s.window & (1 << (s.highest - index)) != 0);
            if seen {
                return Err(SrtpError::Replay);
            }
        }
        self.sign(body, roc);
        if !constant_time_eq(&self.tag[..n], tag) {
            return Err(SrtpError::Auth);
        }
        self.remember(stream, ssrc, roc, seq, index);
        out.clear();
        out.extend_from_slice(body);
        let iv = self.iv(ssrc, index);
        Aes128Ctr::new((&self.key).into(), (&iv).into()).apply_keystream(&mut out[header..]);
        Ok(())
    }

    /// An authenticated packet moves its stream's rollover counter and replay window.
    fn remember(&mut self, stream: Option<usize>, ssrc: u32, roc: u32, seq: u16, index: u64) {
        let Some(i) = stream else {
            if self.streams.len() == STREAMS {
                self.streams.remove(0);
            }
            self.streams.push(Stream {
                ssrc,
                roc,
                last: seq,
                window: 1,
                highest: index,
            });
            return;
        };
        let s = &mut self.streams[i];
        if index > s.highest {
            let shift = index - s.highest;
            s.window = if shift >= 64 {
                1
            } else {
                (s.window << shift) | 1
            };
            s.highest = index;
            s.roc = roc;
            s.last = seq;
        } else {
            s.window |= 1 << (s.highest - index);
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
#[path = "srtp_tests.rs"]
mod tests;
