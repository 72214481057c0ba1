//! A sideband socket ends with its call: when a durable call ends (here: it never
//! connects and times out) its session lives on, detached, but the sideband that watched
//! the call is closed (1000 `call ended`) instead of staying subscribed.

use crate::common;
use std::time::{Duration, Instant};

use common::*;
use duet_client::http::post_call;

#[tokio::test]
async fn a_sideband_is_closed_when_its_durable_call_ends() {
    let addr = server(&["--call-connect-secs", "1"]).await;
    let offer = include_str!("fixtures/chrome_offer.sdp");
    let (call_id, _) = post_call(addr, "?duplex=1", "application/sdp", offer, None)
        .await
        .expect("durable call");
    let mut side = Client::sideband(addr, &call_id)
        .await
        .expect("sideband joins");
    let started = Instant::now();
    let close = side.close_frame().await;
    assert_eq!(
        close,
        Some((1000, "call ended".to_string())),
        "closed when the call ended"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // The session itself outlives the call (detached, waiting for a resume).
    let (_, v) = get(addr, "/v1/pool", &[]).await;
    assert!(v.contains("\"detached\""), "{v}");
}
