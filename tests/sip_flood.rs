//! A UDP INVITE flood from a source `--sip-allow` refuses (the review's 200 000 in 7–10 s,
//! scaled to 40 000 in about 5 s) leaves `/health` and a live WebSocket session answering
//! within 100 ms before, during and after it, past the stack's 32 s transaction cleanup;
//! an allowed source's OPTIONS is answered before, during and after, and the refused source
//! gets nothing.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use crate::common::Client;
use crate::sip_flood_kit::{health_ms, options_from, round_trip_ms, send_invites, sip_process};

const REFUSED: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const ALLOWED: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
/// The flood: INVITEs, a second's worth, and the longest it may take.
const FLOOD: (usize, usize, Duration) = (40_000, 8_000, Duration::from_secs(10));
/// Probing goes on this long after the flood starts (the stack's cleanup runs at 32 s).
const WATCH: Duration = Duration::from_secs(40);
/// Slowest answer allowed, each probe.
const SLOWEST_MS: u128 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_invite_flood_leaves_http_and_sessions_answering() {
    let (server, sip) = sip_process(
        "http://127.0.0.1:9/hook",
        &["--sip-allow", "127.0.0.2/32", "--session-idle-secs", "600"],
    );
    let mut ws = Client::connect(server.addr).await;
    let mut worst = (0u128, 0u128);
    let mut probe = |h: Option<u128>, r: Option<u128>, phase: &str| {
        let (h, r) = (
            h.unwrap_or_else(|| panic!("/health answered nothing {phase}")),
            r.unwrap_or_else(|| panic!("session.update came back not at all {phase}")),
        );
        assert!(h <= SLOWEST_MS, "/health took {h} ms {phase}");
        assert!(r <= SLOWEST_MS, "session.update took {r} ms {phase}");
        worst = (worst.0.max(h), worst.1.max(r));
    };
    for _ in 0..5 {
        probe(
            health_ms(server.addr).await,
            round_trip_ms(&mut ws).await,
            "before",
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        options_from(ALLOWED, sip, Duration::from_secs(5))
            .await
            .as_deref(),
        Some("SIP/2.0 200 OK")
    );

    let start = Instant::now();
    let flood = std::thread::spawn(move || send_invites(REFUSED, sip, FLOOD));
    let mut probes = 0;
    let mut options_during = None;
    while start.elapsed() < WATCH {
        if options_during.is_none() && start.elapsed() > Duration::from_secs(1) {
            let answer = options_from(ALLOWED, sip, Duration::from_secs(5)).await;
            options_during = Some((answer, flood.is_finished()));
        }
        let phase = if flood.is_finished() {
            "after"
        } else {
            "during"
        };
        let phase = format!("{phase} the flood, at {:?}", start.elapsed());
        probe(
            health_ms(server.addr).await,
            round_trip_ms(&mut ws).await,
            &phase,
        );
        probes += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let sent = flood.join().expect("the flood ran");
    eprintln!(
        "{sent} INVITEs; {probes} probes; slowest /health {} ms, session.update {} ms",
        worst.0, worst.1
    );
    assert!(sent >= FLOOD.0 / 2, "the flood sent {sent}");
    let (answer, flood_over) = options_during.expect("an OPTIONS during the flood");
    assert_eq!(
        answer.as_deref(),
        Some("SIP/2.0 200 OK"),
        "during the flood"
    );
    assert!(!flood_over, "the OPTIONS went out during the flood");

    let answer = options_from(ALLOWED, sip, Duration::from_secs(5)).await;
    assert_eq!(answer.as_deref(), Some("SIP/2.0 200 OK"), "after the flood");
    let refused = options_from(REFUSED, sip, Duration::from_secs(1)).await;
    assert_eq!(refused, None, "a refused source gets no answer");
}
