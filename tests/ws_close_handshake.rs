//! The WebSocket closing handshake (RFC 6455 §5.5.1, §7): a client's Close is answered with
//! a Close frame before the connection ends (Pipecat logs `ConnectionClosedError: sent 1000
//! (OK); no close frame received` at ERROR otherwise), and every close the server starts
//! sends a Close frame with the code docs/configuration.md lists: a silent socket (1001), an
//! event over the message limit (1009), an idle session (1000, after its `session_idle`
//! error).

use crate::common;

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn open(addr: std::net::SocketAddr) -> Ws {
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/v1/realtime"))
        .await
        .expect("connects");
    let first = ws.next().await.expect("an event").expect("a frame");
    assert!(
        first.to_text().unwrap().contains("session.created"),
        "{first:?}"
    );
    ws
}

/// Reads until the server's Close frame: its code and reason. Panics when the connection
/// ends without one, or nothing comes within `within`.
async fn server_close(ws: &mut Ws, within: Duration) -> (u16, String) {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let next = tokio::time::timeout(left, ws.next())
            .await
            .expect("the server closes in time");
        match next {
            Some(Ok(Message::Close(Some(frame)))) => {
                return (u16::from(frame.code), frame.reason.to_string())
            }
            Some(Ok(Message::Close(None))) => panic!("a Close frame without a code"),
            Some(Ok(_)) => continue,
            Some(Err(e)) => panic!("the connection ended without a Close frame: {e}"),
            None => panic!("the connection ended without a Close frame"),
        }
    }
}

#[tokio::test]
async fn a_clients_close_is_answered_with_a_close_frame() {
    let addr = common::server(&[]).await;
    for code in [CloseCode::Normal, CloseCode::Away] {
        let mut ws = open(addr).await;
        ws.send(Message::Close(Some(CloseFrame {
            code,
            reason: "bye".into(),
        })))
        .await
        .unwrap();
        let (echoed, _) = server_close(&mut ws, Duration::from_secs(5)).await;
        assert_eq!(echoed, u16::from(code));
        // Then the server ends the connection.
        let end = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("the connection ends");
        assert!(
            matches!(end, None | Some(Err(_))),
            "nothing after the close handshake: {end:?}"
        );
    }
    common::wait_released(addr, 0, 0, Duration::from_secs(3)).await;
}

#[tokio::test]
async fn the_server_closes_with_a_close_frame_and_the_documented_code() {
    let addr = common::server(&["--ws-idle-secs", "2", "--session-idle-secs", "3"]).await;

    // A socket that sends nothing (no pings come before the idle limit) is closed, 1001.
    let mut silent = open(addr).await;
    let (code, reason) = server_close(&mut silent, Duration::from_secs(6)).await;
    assert_eq!(code, 1001, "{reason}");

    // A message over the limit (16 MiB): 1009. Only the frame's head is written (a text
    // frame of 17 MiB, masked as a client's must be): the server refuses it from the head,
    // and nothing unread is left behind to turn its close into a reset.
    let mut big = open(addr).await;
    let mut head = vec![0x81u8, 0x80 | 127];
    head.extend_from_slice(&(17u64 << 20).to_be_bytes());
    head.extend_from_slice(&[1, 2, 3, 4]);
    match big.get_mut() {
        tokio_tungstenite::MaybeTlsStream::Plain(tcp) => tcp.write_all(&head).await.unwrap(),
        _ => unreachable!("plain TCP"),
    }
    let (code, reason) = server_close(&mut big, Duration::from_secs(5)).await;
    assert_eq!(code, 1009, "{reason}");

    // An idle session (pongs and frames do not count as activity; this socket keeps
    // its transport alive with pings): `session_idle`, then 1000.
    let mut idle = open(addr).await;
    let start = Instant::now();
    let mut saw_error = false;
    let (code, reason) = loop {
        let _ = idle.send(Message::Ping(Vec::new().into())).await;
        match tokio::time::timeout(Duration::from_millis(500), idle.next()).await {
            Err(_) => {}
            Ok(Some(Ok(Message::Text(t)))) => {
                saw_error |= t.as_str().contains("session_idle");
            }
            Ok(Some(Ok(Message::Close(Some(f))))) => {
                break (u16::from(f.code), f.reason.to_string())
            }
            Ok(Some(Ok(_))) => {}
            Ok(other) => panic!("ended without a Close frame: {other:?}"),
        }
        assert!(start.elapsed() < Duration::from_secs(8), "no close");
    };
    assert!(saw_error, "session_idle before the close");
    assert_eq!(code, 1000, "{reason}");
    common::wait_released(addr, 0, 0, Duration::from_secs(3)).await;
}
