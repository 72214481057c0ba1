//! SIP outside calls: OPTIONS pings get `200` with the methods Duet answers, over UDP and
//! TCP, and a source outside `--sip-allow` gets nothing: its datagrams are dropped before
//! parsing, its TCP connections closed at accept.

use crate::common;

use common::sip::{sip_addr, sip_server, webhook_app};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn options(to: SocketAddr, from: SocketAddr, transport: &str) -> String {
    format!(
        "OPTIONS sip:duet@{to} SIP/2.0\r\nVia: SIP/2.0/{transport} {from};branch=z9hG4bK-ping-{transport}\r\n\
         From: <sip:ping@{from}>;tag=ping1\r\nTo: <sip:duet@{to}>\r\nCall-ID: ping-{transport}@test\r\n\
         CSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
    )
}

async fn udp_ping(to: SocketAddr) -> String {
    udp_ping_within(to, Duration::from_secs(5))
        .await
        .expect("an answer within 5 s")
}

async fn udp_ping_within(to: SocketAddr, wait: Duration) -> Option<String> {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let from = sock.local_addr().unwrap();
    sock.send_to(options(to, from, "UDP").as_bytes(), to)
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let (n, _) = tokio::time::timeout(wait, sock.recv_from(&mut buf))
        .await
        .ok()?
        .ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_pings_are_answered_and_unknown_sources_refused() {
    let app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let sip = sip_addr(&server);
    let answer = udp_ping(sip).await;
    assert!(answer.starts_with("SIP/2.0 200"), "{answer}");
    assert!(
        answer.contains("INVITE, ACK, CANCEL, BYE, OPTIONS"),
        "{answer}"
    );

    let mut tcp = tokio::net::TcpStream::connect(sip).await.unwrap();
    let from = tcp.local_addr().unwrap();
    tcp.write_all(options(sip, from, "TCP").as_bytes())
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf))
        .await
        .expect("an answer within 5 s")
        .unwrap();
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(answer.starts_with("SIP/2.0 200"), "{answer}");

    let fenced = sip_server(&app, &["--sip-allow", "10.0.0.0/8,192.0.2.0/24"]).await;
    let answer = udp_ping_within(sip_addr(&fenced), Duration::from_secs(1)).await;
    assert_eq!(answer, None, "a refused source gets no answer");
    let mut tcp = tokio::net::TcpStream::connect(sip_addr(&fenced))
        .await
        .unwrap();
    let read = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "a refused TCP connection is closed at accept: {read:?}"
    );
}
