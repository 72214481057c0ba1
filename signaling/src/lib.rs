//! Sans-IO call setup for Duet: offer checks ([`sdp`]), offer bodies ([`multipart`]), answers
//! and per-call WebRTC state on str0m ([`call`]), STUN routing ([`stun`]), call ids, and for
//! phone calls the plain RTP leg's SDP ([`plain_sdp`]) and the incoming-call webhook
//! ([`webhook`]). No sockets, no clocks: time is an argument.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod call;
pub mod dtls;
pub mod multipart;
pub mod plain_sdp;
pub mod sdp;
pub mod stun;
#[doc(hidden)]
pub mod testutil;
pub mod webhook;

pub use call::{AnswerConfig, Call, CallError, CallEvent, SendError, Transmit, SEND_BUFFER_BYTES};
pub use sdp::{
    check_offer, AudioCodec, OfferSummary, SignalError, DEFAULT_MAX_MESSAGE_SIZE, MAX_OFFER_BYTES,
};
pub use stun::{is_stun, stun_username_local};

use rand::Rng;

/// A new call id: `rtc_` and 32 lowercase hex digits (the shape OpenAI and Codex expect).
pub fn call_id() -> String {
    let mut rng = rand::rng();
    let mut id = String::with_capacity(36);
    id.push_str("rtc_");
    for _ in 0..32 {
        id.push(char::from_digit(rng.random_range(0..16), 16).unwrap_or('0'));
    }
    id
}

/// Whether `id` has the shape of a call id (so unknown garbage is rejected before lookup).
pub fn is_call_id(id: &str) -> bool {
    id.strip_prefix("rtc_")
        .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_ids() {
        let a = call_id();
        assert!(is_call_id(&a), "{a}");
        assert_ne!(a, call_id());
        assert!(!is_call_id("rtc_xyz"));
        assert!(!is_call_id("item_00000000000000000000000000000000"));
    }
}
