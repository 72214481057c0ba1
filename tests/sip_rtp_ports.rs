//! `--sip-rtp-ports LOW-HIGH`: each accepted phone call's RTP leg takes a port of the range
//! (its SDP says which); with every port taken, `/accept` answers `503 rtp_port_unavailable`
//! and the caller gets `486 Busy Here`; a port comes back when its call ends.

use crate::common;

use common::sip::{answered_call, assert_refused, sip_addr, sip_server, webhook_app};
use duet_client::sip::Caller;
use serde_json::json;
use std::time::Duration;

/// Two consecutive free UDP ports on loopback.
fn two_free_ports() -> u16 {
    loop {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let low = a.local_addr().unwrap().port();
        if low < 65_535 && std::net::UdpSocket::bind(("127.0.0.1", low + 1)).is_ok() {
            return low;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rtp_legs_take_ports_of_the_range_and_a_full_range_is_busy() {
    let mut app = webhook_app().await;
    let low = two_free_ports();
    let range = format!("{low}-{}", low + 1);
    let server = sip_server(&app, &["--sip-rtp-ports", &range]).await;
    let sip = sip_addr(&server);
    let mut calls = Vec::new();
    for _ in 0..2 {
        let (caller, _) = answered_call(&server, &mut app).await;
        let port = caller.remote_rtp.unwrap().port();
        assert!(
            (low..=low + 1).contains(&port),
            "RTP port {port} outside {range}"
        );
        calls.push(caller);
    }
    assert_ne!(calls[0].remote_rtp, calls[1].remote_rtp);

    let mut third = Caller::invite(sip, "+15551230000").await.unwrap();
    let call = app.next().await;
    assert_refused(
        server.addr,
        &call.call_id,
        ("accept", json!({"type": "realtime"})),
        (503, "code", "rtp_port_unavailable"),
    )
    .await;
    assert_eq!(
        third
            .answer(Duration::from_secs(5), |_| {})
            .await
            .unwrap()
            .status,
        486
    );

    // The first call ends: its port serves the next one.
    assert_eq!(calls[0].bye().await.unwrap(), 200);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (fourth, _) = answered_call(&server, &mut app).await;
    assert_eq!(fourth.remote_rtp, calls[0].remote_rtp, "the freed port");
}
