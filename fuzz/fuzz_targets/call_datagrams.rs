//! Fuzzes a connected call with datagrams from its peer's address: the input is split into
//! datagrams (2-byte big-endian length prefixes), each fed through `accepts` and `receive`,
//! with `poll` and `timeout` after each. Whatever str0m does with them, no panic may escape
//! the call: the per-call guard turns it into an error and a dead call.
#![no_main]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use duet_signaling::testutil::Pair;
use duet_signaling::AnswerConfig;
use libfuzzer_sys::fuzz_target;

/// One certificate for the process (making one per input would dominate the run time).
fn config() -> &'static AnswerConfig {
    static CFG: OnceLock<AnswerConfig> = OnceLock::new();
    CFG.get_or_init(|| AnswerConfig::new(vec!["127.0.0.1:6000".parse().unwrap()]).unwrap())
}

/// The input's datagrams: each a 2-byte length then that many bytes (the last may be short).
fn datagrams(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let [hi, lo, rest @ ..] = data {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(rest.len());
        out.push(&rest[..len]);
        data = &rest[len..];
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let mut p = Pair::new(config(), Instant::now(), |o| o).expect("a call");
    assert!(
        p.connect(400).expect("connecting"),
        "the call never connected"
    );
    let (src, dst) = (p.peer.addr, p.server);
    for d in datagrams(data).into_iter().take(64) {
        let now = p.now;
        let _ = p.call.accepts(now, src, dst, d);
        let _ = p.call.receive(now, src, dst, d);
        let _ = p.call.poll(&mut Vec::new(), &mut p.events);
        p.now += Duration::from_millis(1);
        let _ = p.call.timeout(p.now);
        let _ = p.call.poll(&mut Vec::new(), &mut p.events);
    }
    let _ = p.call.send_text("{}");
    p.call.close();
    let _ = p.call.poll(&mut Vec::new(), &mut p.events);
});
