//! Fuzzes the RFC 4733 DTMF detector with arbitrary telephone-event packets (SSRC,
//! timestamp, payload). It must never panic, report only DTMF keys, and report a key press
//! (an SSRC and timestamp) at most once while it is remembered.
#![no_main]

use duet_media::dtmf::{DtmfDetector, TelephoneEvent};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut d = DtmfDetector::new();
    let mut reported: Vec<(u32, u32)> = Vec::new();
    for packet in data.chunks(10) {
        if packet.len() < 8 {
            break;
        }
        let ssrc = u32::from(packet[0] % 3);
        let ts = u32::from(packet[1] % 16);
        let payload = &packet[2..];
        let parsed = TelephoneEvent::parse(payload);
        if let Some(key) = d.push(ssrc, ts, payload) {
            assert!("0123456789*#ABCD".contains(key));
            assert!(parsed.is_some_and(|e| e.event < 16));
            // A press is reported again only after eight newer ones pushed it out.
            if let Some(pos) = reported.iter().rposition(|&p| p == (ssrc, ts)) {
                assert!(reported.len() - pos - 1 >= 8, "{reported:?} then {:?}", (ssrc, ts));
            }
            reported.push((ssrc, ts));
        }
    }
});
