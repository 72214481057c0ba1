//! Fuzzes the SDP offer checks that run on every `POST /v1/realtime/calls` body: any text
//! must be accepted or refused with a code, never panic, and an accepted summary must name
//! a supported codec.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match duet_signaling::check_offer(text) {
            Ok(summary) => assert!(summary.codec.clock_rate() >= 8_000),
            Err(e) => assert!(!e.code().is_empty()),
        }
    }
});
