//! Fuzzes the multipart `resume` part of `POST /v1/realtime/calls?duplex=1`: the body goes
//! through the multipart parser, and every part (and the raw input) through the parser of
//! the resume JSON the server uses. Never a panic; what parses round-trips its fields.
#![no_main]

use duet_protocol::duplex::ResumeRequest;
use duet_signaling::multipart::{parse, Limits};
use libfuzzer_sys::fuzz_target;

fn check(text: &str) {
    if let Ok(r) = ResumeRequest::from_json(text) {
        let again = serde_json::json!({
            "session_id": r.session_id,
            "resume_token": r.resume_token,
            "last_received_server_event_seq": r.last_received_server_event_seq,
        });
        assert_eq!(ResumeRequest::from_json(&again.to_string()), Ok(r));
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        check(text);
    }
    let Ok(parts) = parse("multipart/form-data; boundary=b", data, Limits::default()) else {
        return;
    };
    for part in parts {
        if let Ok(text) = std::str::from_utf8(&part.data) {
            check(text);
        }
    }
});
