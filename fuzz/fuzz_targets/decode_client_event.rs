//! Fuzzes the client event decoder: any text must decode or give an error with a code,
//! never panic, and every decoded event must survive the session's own validation paths.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match duet_protocol::decode(text) {
            Ok(env) => {
                if let duet_protocol::ClientEvent::SessionUpdate { session } = env.event {
                    let mut cfg = duet_protocol::SessionConfig::new("sess_f".into(), "echo".into(), 0);
                    let _ = cfg.apply(*session);
                }
            }
            Err(e) => assert!(e.code.is_some()),
        }
    }
});
