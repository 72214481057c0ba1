//! Fuzzes the client event decoder: any text must decode or give an error with a code,
//! never panic, and every decoded event must survive the session's own validation paths;
//! the duplex extension's decoder (`decode_duplex`) likewise.
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
        // The duplex extension's decoder: the same, and a GA event decodes the same way.
        match duet_protocol::decode_duplex(text) {
            Ok(env) => {
                if let Ok(ga) = duet_protocol::decode(text) {
                    assert_eq!(format!("{:?}", ga.event), format!("{:?}", env.event));
                }
            }
            Err(e) => assert!(e.code.is_some()),
        }
    }
});
