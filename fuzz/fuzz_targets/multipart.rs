//! Fuzzes the multipart/form-data parser that reads `POST /v1/realtime/calls` bodies. The
//! first byte picks the content type: a fixed valid one (so the body parser is reached most
//! of the time), or the input's first line. Never a panic, and results respect the limits.
#![no_main]

use duet_signaling::multipart::{parse, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (ctype, body) = if mode & 1 == 0 {
        ("multipart/form-data; boundary=b", rest)
    } else {
        let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let Ok(ctype) = std::str::from_utf8(&rest[..end]) else {
            return;
        };
        (ctype, rest.get(end + 1..).unwrap_or_default())
    };
    let limits = Limits::default();
    if let Ok(parts) = parse(ctype, body, limits) {
        assert!(parts.len() <= limits.max_parts);
        let total: usize = parts.iter().map(|p| p.data.len()).sum();
        assert!(total <= body.len());
    }
});
