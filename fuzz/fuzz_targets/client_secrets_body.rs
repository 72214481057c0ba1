//! Fuzzes the body of `POST /v1/realtime/client_secrets` through the parser the server
//! uses: never a panic, and whatever parses has a lifetime in OpenAI's range.
#![no_main]

use duet_protocol::secrets::{MintRequest, MAX_SECS, MIN_SECS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match MintRequest::parse(data) {
        Ok(r) => assert!((MIN_SECS..=MAX_SECS).contains(&r.seconds)),
        Err(e) => assert!(e.code.is_some()),
    }
});
