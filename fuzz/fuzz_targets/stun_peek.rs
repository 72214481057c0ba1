//! Fuzzes the STUN peek the engine runs on every datagram from an unknown address: never a
//! panic, and wherever str0m's own parser reads a USERNAME in a datagram of RFC 7983's STUN
//! range, the peek routes by the same ufrag.
#![no_main]

use duet_signaling::{is_stun, stun_username_local};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let local = stun_username_local(data);
    if let Some(ufrag) = local {
        assert!(is_stun(data));
        assert!(!ufrag.contains(':') && ufrag.len() < data.len());
    }
    // str0m's parser ignores the first two bits; its demultiplexer passes only STUN's range.
    let stun_range = data.first().is_some_and(|&b| b <= 3);
    let parsed = str0m::ice::StunMessage::parse(data)
        .ok()
        .filter(|_| stun_range);
    if let Some((expected, _)) = parsed.as_ref().and_then(|m| m.split_username()) {
        assert_eq!(local, Some(expected));
    }
});
