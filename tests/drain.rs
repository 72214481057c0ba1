//! Graceful drain on SIGTERM: `/ready` turns 503 at once, new sessions get 503
//! `server_draining` with `Retry-After`, live sessions get a `server_draining` error at once
//! and are closed at the deadline (WebSocket 1001; the call's media stops), and the process
//! exits by the deadline plus 2 s although a half-sent request is still open.

use crate::common;

use std::time::{Duration, Instant};

use common::process::ServerProcess;
use common::{handshake_status, ready};
use duet_client::rtc::{ClientOptions, RtcClient};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::Message;

const T: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_sessions_and_exits_in_time() {
    let mut server = ServerProcess::spawn(&["--drain-secs", "2"]);
    let addr = server.addr;
    let url = format!("ws://{addr}/v1/realtime?model=echo");
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.expect("ws");
    let mut call = RtcClient::connect(addr, ClientOptions::default())
        .await
        .expect("call");
    call.until("session.created", T).await.unwrap();
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();

    server.signal(libc::SIGTERM);
    let signalled = Instant::now();
    while ready(addr).await.0 != 503 {
        assert!(
            signalled.elapsed() < Duration::from_millis(500),
            "/ready still 200"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, body) = ready(addr).await;
    assert_eq!(body["error"]["code"], "server_draining", "{body}");
    let refused = common::refused(tokio_tungstenite::connect_async(&url).await);
    assert_eq!(handshake_status(&refused), 503);
    if let tokio_tungstenite::tungstenite::Error::Http(r) = &refused {
        assert_eq!(r.headers()["retry-after"], "5");
        let text = String::from_utf8_lossy(r.body().as_deref().unwrap_or_default()).to_string();
        assert!(text.contains("server_draining"), "{text}");
    }

    // The live WebSocket: the error at once, close 1001 at the deadline.
    let mut told = None;
    let close = loop {
        let msg = tokio::time::timeout(T, ws.next())
            .await
            .expect("frame")
            .expect("open");
        match msg.expect("ok") {
            Message::Text(t) => {
                let v: serde_json::Value = serde_json::from_str(t.as_str()).unwrap();
                if v["type"] == "error" && v["error"]["code"] == "server_draining" {
                    told = Some(signalled.elapsed());
                }
            }
            Message::Close(frame) => break (frame, signalled.elapsed()),
            _ => {}
        }
    };
    let told = told.expect("a server_draining error before the close");
    assert!(told < Duration::from_secs(1), "told after {told:?}");
    assert_eq!(close.0.map(|f| u16::from(f.code)), Some(1001));
    assert!(
        close.1 >= Duration::from_millis(1800),
        "closed early: {:?}",
        close.1
    );

    // The call heard it on its data channel, and its media stops at the deadline.
    let (ev, _) = call.until("error", T).await.unwrap();
    assert_eq!(ev["error"]["code"], "server_draining");
    let exited = server
        .wait_exit(Duration::from_secs(5))
        .expect("the process exits");
    let total = signalled.elapsed();
    eprintln!(
        "told {told:?}, closed {:?}, exited {total:?} after SIGTERM",
        close.1
    );
    assert!(
        total <= Duration::from_millis(4_500),
        "exited {total:?} after SIGTERM ({exited:?})"
    );
    let frames = call.stats().frames;
    let last = frames.last().map(|(t, _)| *t).expect("frames arrived");
    assert!(
        last < signalled + Duration::from_millis(3_000),
        "media went on after the drain"
    );
    call.close();
    drop(slow);
}
