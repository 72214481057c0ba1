//! A call that never connects (no ICE, no DTLS) cannot hold its slots: it is reaped after
//! `--call-connect-secs` (10 s), so offers that never follow up do not lock a model out.

use crate::common;

use std::time::{Duration, Instant};

use duet_client::http::request;

const OFFER: &str = include_str!("fixtures/chrome_offer.sdp");

async fn offer(addr: std::net::SocketAddr) -> (u16, String) {
    let r = request(
        addr,
        "POST",
        "/v1/realtime/calls",
        &[("Content-Type", "application/sdp")],
        OFFER,
    )
    .await
    .expect("post");
    (r.status, r.body)
}

#[tokio::test]
async fn unconnected_calls_are_reaped_and_free_their_model_slots() {
    let addr = common::server(&["--model-slots", "8"]).await;
    let start = Instant::now();
    for i in 0..8 {
        assert_eq!(offer(addr).await.0, 201, "offer {i}");
    }
    let (s, body) = offer(addr).await;
    assert_eq!(s, 503, "{body}");
    assert!(body.contains("model_slots_exhausted"), "{body}");
    // The media engine counts a call when its thread takes it, just after the 201.
    let mut ready = common::ready(addr).await.1;
    for _ in 0..100 {
        if ready["calls"] == 8 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        ready = common::ready(addr).await.1;
    }
    assert_eq!(ready["calls"], 8, "{ready}");
    tokio::time::sleep(Duration::from_secs(11).saturating_sub(start.elapsed())).await;
    let (s, body) = offer(addr).await;
    assert_eq!(s, 201, "a 9th offer 11 s later: {body}");
    // The eight were reaped: at most the new one is running.
    let (_, ready) = common::ready(addr).await;
    assert!(ready["calls"].as_u64() <= Some(1), "{ready}");
}
