//! Request bodies have a deadline: a client that sends a request head and then too little
//! of its body (by `Content-Length` or chunked, to any route that reads one) gets `408
//! request_timeout` after `--http-body-timeout-secs` and its connection is closed, so such
//! clients cannot hold the connection cap.

use crate::common;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const KEY: &str = "server-key";

/// Opens a connection and sends `head` (and `body_start`), never the rest.
async fn stall(addr: SocketAddr, head: &str, body_start: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(head.as_bytes()).await.expect("head");
    s.write_all(body_start.as_bytes())
        .await
        .expect("body start");
    s
}

/// Reads until the server closes the connection; what it sent.
async fn answer(mut s: TcpStream, limit: Duration) -> String {
    let mut buf = Vec::new();
    tokio::time::timeout(limit, s.read_to_end(&mut buf))
        .await
        .expect("the server answers and closes in time")
        .expect("read");
    String::from_utf8_lossy(&buf).into_owned()
}

fn head(path: &str, framing: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/sdp\r\n{framing}\r\n"
    )
}

#[tokio::test]
async fn stalled_bodies_get_408_and_free_their_connections() {
    let addr = server(&[
        "--api-key",
        KEY,
        "--http-body-timeout-secs",
        "1",
        "--max-connections",
        "16",
    ])
    .await;
    let started = Instant::now();
    let mut stalled = Vec::new();
    for i in 0..16 {
        let conn = match i % 3 {
            0 => {
                stall(
                    addr,
                    &head("/v1/realtime/calls", "Content-Length: 16000\r\n"),
                    "v=0\r\n",
                )
                .await
            }
            1 => {
                stall(
                    addr,
                    &head("/v1/realtime/calls", "Transfer-Encoding: chunked\r\n"),
                    "5\r\nv=0\r\n",
                )
                .await
            }
            _ => {
                stall(
                    addr,
                    &head("/v1/realtime/client_secrets", "Content-Length: 1000\r\n"),
                    "{",
                )
                .await
            }
        };
        stalled.push(conn);
    }
    for conn in stalled {
        let text = answer(conn, Duration::from_secs(5)).await;
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(text.contains("request_timeout"), "{text}");
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "answered at the deadline: {took:?}"
    );
    // Every place is free again.
    let (status, _) = get(addr, "/health", &[]).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_body_that_arrives_in_time_is_served() {
    let addr = server(&["--http-body-timeout-secs", "2"]).await;
    let offer = include_str!("fixtures/chrome_offer.sdp");
    let (first, rest) = offer.split_at(offer.len() / 2);
    let framing = format!("Content-Length: {}\r\n", offer.len());
    let mut s = stall(
        addr,
        &head("/v1/realtime/calls", &framing)
            .replace(&format!("Authorization: Bearer {KEY}\r\n"), ""),
        first,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    s.write_all(rest.as_bytes()).await.expect("rest");
    let mut buf = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .expect("answered")
        .expect("read");
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 201"), "{text}");
}
