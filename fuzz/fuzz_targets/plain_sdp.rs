//! Fuzzes the plain RTP leg's SDP reader (trunk offers, and answers to Duet's late offers).
//! It must never panic, and an offer it reads must give an answer with one `m=` line per
//! offered section, that reads back as the same codec.
#![no_main]

use duet_signaling::plain_sdp::{parse_offer, write_answer, LocalMedia};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(sdp) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(offer) = parse_offer(sdp) else {
        return;
    };
    let local = LocalMedia {
        addr: [127, 0, 0, 1].into(),
        port: 40_000,
        session_id: 1,
        crypto: None,
    };
    let answer = write_answer(&offer, &local);
    let offered = sdp.lines().filter(|l| l.starts_with("m=")).count();
    let answered = answer.lines().filter(|l| l.starts_with("m=")).count();
    assert_eq!(offered, answered, "{answer}");
    if offer.crypto.is_none() {
        let back = parse_offer(&answer).expect("our answer reads back");
        assert_eq!((back.codec, back.payload_type), (offer.codec, offer.payload_type));
    }
});
