//! Sideband: a WebSocket joins a live WebRTC call with `?call_id=`, sees its events and can
//! drive it (server-side control).

use crate::common;
use common::*;
use duet_client::rtc::{ClientOptions, RtcClient};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn websocket_joins_a_call() {
    let addr = server(&[]).await;
    let mut call = RtcClient::connect(addr, ClientOptions::default())
        .await
        .expect("call");
    call.until("session.created", Duration::from_secs(10))
        .await
        .unwrap();
    let (mut ws, _) = tokio_tungstenite::connect_async(format!(
        "ws://{addr}/v1/realtime?call_id={}",
        call.call_id
    ))
    .await
    .expect("sideband joins");
    use futures_util::{SinkExt, StreamExt};
    let first = loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("event")
            .expect("open")
            .expect("ok");
        if let tokio_tungstenite::tungstenite::Message::Text(t) = m {
            break serde_json::from_str::<serde_json::Value>(t.as_str()).unwrap();
        }
    };
    assert_eq!(first["type"], "session.created");
    // The server side instructs the call; the caller sees the result on its data channel.
    let update = json!({"type":"session.update","session":{"instructions":"set by the sideband"}});
    ws.send(tokio_tungstenite::tungstenite::Message::Text(
        update.to_string().into(),
    ))
    .await
    .unwrap();
    let (ev, _) = call
        .until("session.updated", Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(ev["session"]["instructions"], "set by the sideband");
    // And the sideband sees what the caller does.
    call.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}));
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let tokio_tungstenite::tungstenite::Message::Text(t) = m {
            let v: serde_json::Value = serde_json::from_str(t.as_str()).unwrap();
            if v["type"] == "conversation.item.added" {
                assert_eq!(v["item"]["content"][0]["text"], "hi");
                break;
            }
        }
    }
    let err =
        tokio_tungstenite::connect_async(format!("ws://{addr}/v1/realtime?call_id=rtc_missing"))
            .await
            .unwrap_err();
    assert!(matches!(err, tokio_tungstenite::tungstenite::Error::Http(r) if r.status() == 404));
}
