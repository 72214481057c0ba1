//! Sans-IO call setup for Duet: offer checks ([`sdp`]), offer bodies ([`multipart`]), answers
//! and per-call WebRTC state on str0m ([`call`]), STUN routing ([`stun`]), call ids, and for
//! phone calls the plain RTP leg's SDP ([`plain_sdp`]), the incoming-call webhook
//! ([`webhook`]) and the SIP decisions of a call, ringing and in its dialog ([`sip_call`]).
//! No sockets, no clocks: time is an argument.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod call;
pub mod dtls;
pub mod multipart;
pub mod plain_sdp;
pub mod sdp;
pub mod sip_call;
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
    call_id_on(None)
}

/// A new call id owned by cluster node `node` (`rtc_<node>_<32 hex>`; a node id is
/// [`is_node_id`]), or a plain one for `None`. Clients treat ids as opaque; other nodes read
/// the owner from it and route there with no lookup.
pub fn call_id_on(node: Option<&str>) -> String {
    let mut rng = rand::rng();
    let mut id = String::with_capacity(37 + node.map_or(0, str::len));
    id.push_str("rtc_");
    if let Some(node) = node {
        id.push_str(node);
        id.push('_');
    }
    for _ in 0..32 {
        id.push(char::from_digit(rng.random_range(0..16), 16).unwrap_or('0'));
    }
    id
}

/// Whether `id` has the shape of a call id (so unknown garbage is rejected before lookup):
/// `rtc_` + 32 hex digits, with a node id between them in cluster mode.
pub fn is_call_id(id: &str) -> bool {
    let Some(rest) = id.strip_prefix("rtc_") else {
        return false;
    };
    let hex = match rest.rsplit_once('_') {
        Some((node, hex)) if is_node_id(node) => hex,
        Some(_) => return false,
        None => rest,
    };
    hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The cluster node that owns call `id` (`None`: a plain id, or not a call id).
pub fn call_node(id: &str) -> Option<&str> {
    if !is_call_id(id) {
        return None;
    }
    id.strip_prefix("rtc_")?
        .rsplit_once('_')
        .map(|(node, _)| node)
}

/// Whether `node` can name a cluster node inside ids: 1 to 32 of `a-z`, `0-9` and `-`
/// (no `_`, which separates it from the random part).
pub fn is_node_id(node: &str) -> bool {
    (1..=32).contains(&node.len())
        && node
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
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

    #[test]
    fn call_ids_name_their_node() {
        let a = call_id_on(Some("node-b2"));
        assert!(is_call_id(&a), "{a}");
        assert_eq!(call_node(&a), Some("node-b2"));
        assert_eq!(call_node(&call_id()), None);
        let hex = "0123456789abcdef0123456789abcdef";
        assert!(!is_call_id(&format!("rtc_Node_{hex}")), "upper case");
        assert!(!is_call_id(&format!("rtc__{hex}")), "empty node");
        assert!(!is_call_id(&format!("rtc_a_b_{hex}")), "two separators");
        assert!(!is_call_id(&format!("rtc_{}_{hex}", "n".repeat(33))));
        assert_eq!(call_node(&format!("rtc_é_{hex}")), None);
        assert!(is_node_id("a") && is_node_id("duet-0") && !is_node_id("a_b"));
    }
}
