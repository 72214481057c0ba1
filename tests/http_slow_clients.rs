//! Connection-level limits: slow-header clients cannot hold the server (their sockets close
//! after the head timeout, and `/health` answers meanwhile), and `--max-connections` caps
//! open connections with a bare 503.

use crate::common;

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Opens a connection that sends part of a request head and never finishes it.
async fn slow_header(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .expect("partial head");
    s
}

/// Whether the server closed `s` (EOF or reset) within `limit`.
async fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 256];
    matches!(
        tokio::time::timeout(limit, s.read(&mut buf)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_header_sockets_do_not_hold_the_server() {
    common::raise_fd_limit();
    let addr = common::server(&[]).await;
    let mut slow = Vec::new();
    for _ in 0..500 {
        slow.push(slow_header(addr).await);
    }
    let opened = Instant::now();
    for _ in 0..5 {
        let t = Instant::now();
        let (status, _) = common::get(addr, "/health", &[]).await;
        let took = t.elapsed();
        assert_eq!(status, 200);
        assert!(took < Duration::from_millis(100), "/health took {took:?}");
    }
    // The head timeout is 10 s; all 500 are closed well within 15 s.
    let deadline = Duration::from_secs(15);
    for (i, s) in slow.iter_mut().enumerate() {
        let left = deadline.saturating_sub(opened.elapsed());
        assert!(closed_within(s, left).await, "slow socket {i} still open");
    }
    let took = opened.elapsed();
    eprintln!("500 slow-header sockets closed after {took:?}");
    assert!(took >= Duration::from_secs(9), "closed too early: {took:?}");
}

#[tokio::test]
async fn connections_over_the_cap_get_a_503() {
    let addr = common::server(&["--max-connections", "3"]).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(slow_header(addr).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut extra = TcpStream::connect(addr).await.expect("connect");
    let mut text = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), extra.read_to_string(&mut text)).await;
    assert!(text.starts_with("HTTP/1.1 503"), "{text:?}");
    assert!(text.contains("server_busy"), "{text}");
    drop(held);
    // Places free again once those connections closed.
    let start = Instant::now();
    loop {
        let (status, _) = common::get(addr, "/health", &[]).await;
        if status == 200 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "no place freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn one_address_holds_at_most_max_per_ip() {
    let addr = common::server(&["--max-per-ip", "2"]).await;
    let a = common::Client::connect(addr).await;
    let _b = common::Client::connect(addr).await;
    let third = common::refused(common::Client::connect_with(addr, &[]).await);
    assert_eq!(common::handshake_status(&third), 429);
    // Calls count against the same cap.
    let r = duet_client::http::request(
        addr,
        "POST",
        "/v1/realtime/calls",
        &[("Content-Type", "application/sdp")],
        include_str!("fixtures/chrome_offer.sdp"),
    )
    .await
    .unwrap();
    let body = r.body;
    assert_eq!(r.status, 429, "{body}");
    assert!(body.contains("too_many_sessions_from_ip"), "{body}");
    drop(a);
    let start = Instant::now();
    while common::Client::connect_with(addr, &[]).await.is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "the place was not given back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
