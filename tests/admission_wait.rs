//! Admission that waits (`--admission-wait-ms`): at capacity a new call or WebSocket session
//! is held, oldest first, and admitted as a slot frees; past the wait it gets `503
//! server_busy` with a `Retry-After`.

use crate::common;
use std::time::{Duration, Instant};

use common::*;
use duet_client::http::{post_offer, request};

const OFFER: &str = include_str!("fixtures/chrome_offer.sdp");

#[tokio::test]
async fn a_waiting_call_is_admitted_when_a_slot_frees_and_one_past_the_wait_is_refused() {
    let addr = server(&["--max-calls", "2", "--admission-wait-ms", "3000"]).await;
    let first = offer_call(addr).await;
    let _second = offer_call(addr).await;
    let third = tokio::spawn(async move {
        let r = post_offer(addr, OFFER, None).await;
        (r, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!third.is_finished(), "the third call waits");
    let hung_up = Instant::now();
    assert_eq!(
        duet_client::http::hangup(addr, &first, None)
            .await
            .expect("hangup"),
        200
    );
    let (r, at) = third.await.expect("join");
    r.expect("the third call is answered");
    let waited = at - hung_up;
    eprintln!("admitted {waited:?} after the hangup");
    assert!(waited < Duration::from_millis(100), "{waited:?}");

    let t = Instant::now();
    let headers = [("Content-Type", "application/sdp")];
    let r = request(addr, "POST", "/v1/realtime/calls", &headers, OFFER)
        .await
        .expect("request");
    let held = t.elapsed();
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("server_busy"), "{}", r.body);
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("seconds");
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(
        held >= Duration::from_millis(2_900),
        "held {held:?} before the 503"
    );
}

#[tokio::test]
async fn a_waiting_websocket_session_opens_when_one_closes() {
    let addr = server(&["--max-sessions", "1", "--admission-wait-ms", "3000"]).await;
    let first = Client::connect(addr).await;
    let second = tokio::spawn(async move { (Client::connect(addr).await, Instant::now()) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "the second session waits");
    let closed = Instant::now();
    drop(first);
    let (c, at) = second.await.expect("join");
    assert_eq!(c.log[0]["type"], "session.created");
    assert!(at - closed < Duration::from_secs(1), "{:?}", at - closed);
}

#[tokio::test]
async fn without_a_wait_a_full_server_refuses_at_once() {
    let addr = server(&["--max-calls", "1"]).await;
    let _first = offer_call(addr).await;
    let t = Instant::now();
    let headers = [("Content-Type", "application/sdp")];
    let r = request(addr, "POST", "/v1/realtime/calls", &headers, OFFER)
        .await
        .expect("request");
    assert_eq!(r.status, 503);
    assert!(t.elapsed() < Duration::from_millis(500));
    assert!(r.header("retry-after").is_some());
}
