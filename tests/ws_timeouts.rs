//! No WebSocket holds a session forever: the server pings, a socket that sends no frame
//! (not even a pong) is closed, a writer blocked on a client that stopped reading is closed,
//! and a session with no client event and no audio closes with `session_idle`. Each frees
//! its model slot.

use crate::common;

use std::time::{Duration, Instant};

use base64::Engine;
use common::{wait_released, Client};
use futures_util::StreamExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

async fn raw_socket(
    addr: std::net::SocketAddr,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let url = format!("ws://{addr}/v1/realtime?model=echo");
    tokio_tungstenite::connect_async(url)
        .await
        .expect("connects")
        .0
}

#[tokio::test]
async fn a_silent_socket_is_closed_and_a_reading_one_is_pinged() {
    let addr = common::server(&["--ws-ping-secs", "1", "--ws-idle-secs", "3"]).await;
    // Never read, never write: no pong goes back.
    let silent = raw_socket(addr).await;
    // Reads (tungstenite answers the pings) but sends no event.
    let mut reading = raw_socket(addr).await;
    let start = Instant::now();
    let mut pings = 0;
    while start.elapsed() < Duration::from_secs(5) {
        match tokio::time::timeout(Duration::from_millis(200), reading.next()).await {
            Ok(Some(Ok(Message::Ping(_)))) => pings += 1,
            Ok(Some(Ok(Message::Close(c)))) => panic!("reading socket closed: {c:?}"),
            Ok(Some(Ok(_))) | Err(_) => {}
            Ok(other) => panic!("reading socket ended: {other:?}"),
        }
    }
    assert!(pings >= 3, "{pings} pings in 5 s");
    // The silent one was dropped after 3 s; its slot is free, the reading one's is held.
    wait_released(addr, 0, 1, Duration::from_secs(2)).await;
    drop(silent);
}

#[tokio::test]
async fn a_writer_blocked_on_a_client_that_stopped_reading_is_closed() {
    let addr = common::server(&["--ws-write-timeout-secs", "2", "--max-outbound-mib", "64"]).await;
    let mut c = Client::connect(addr).await;
    // 290 s of μ-law in one item, retrieved as PCM16: an ~18.6 MB event, more than the
    // socket buffers hold, and under the outbound budget.
    let fmt = |t: &str| json!({"type":"session.update","session":{"type":"realtime","audio":{"input":{"format":{"type":t}}}}});
    c.send(fmt("audio/pcmu")).await;
    c.until("session.updated").await;
    let audio = base64::engine::general_purpose::STANDARD.encode(vec![0xFFu8; 290 * 8_000]);
    c.send(json!({"type":"conversation.item.create","item":{"id":"item_a","type":"message","role":"user","content":[{"type":"input_audio","audio":audio}]}})).await;
    c.until("conversation.item.added").await;
    c.send(fmt("audio/pcm")).await;
    c.until("session.updated").await;
    c.send(json!({"type":"conversation.item.retrieve","item_id":"item_a"}))
        .await;
    let start = Instant::now();
    // The client reads nothing from now on; the write blocks and times out.
    wait_released(addr, 0, 0, Duration::from_secs(6)).await;
    eprintln!("blocked writer released after {:?}", start.elapsed());
    assert!(start.elapsed() >= Duration::from_millis(1500));
    drop(c);
}

#[tokio::test]
async fn a_session_without_client_activity_closes_as_idle() {
    let addr = common::server(&["--session-idle-secs", "2"]).await;
    let mut c = Client::connect(addr).await;
    let start = Instant::now();
    let err = c.until("error").await;
    assert_eq!(err["error"]["code"], "session_idle", "{err}");
    let idle = start.elapsed();
    assert!(
        (Duration::from_millis(1800)..Duration::from_secs(4)).contains(&idle),
        "{idle:?}"
    );
    wait_released(addr, 0, 0, Duration::from_secs(2)).await;
    // Activity keeps a session: an event every second for 3 s.
    let mut d = Client::connect(addr).await;
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        d.send(json!({"type":"input_audio_buffer.clear"})).await;
        d.until("input_audio_buffer.cleared").await;
    }
}
