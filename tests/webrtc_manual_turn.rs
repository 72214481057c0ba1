//! Manual turns over WebRTC: RTP audio feeds the same input buffer, so `commit` +
//! `response.create` on the data channel work (push-to-talk clients do this), while
//! `input_audio_buffer.append` is refused on this transport.

use crate::common;
use common::*;
use duet_client::rtc::{ClientOptions, RtcClient};
use serde_json::json;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

#[tokio::test]
async fn push_to_talk_over_webrtc() {
    let addr = server(&[]).await;
    let mut c = RtcClient::connect(addr, ClientOptions::default())
        .await
        .expect("call");
    c.until("session.created", T).await.unwrap();
    c.send(json!({"type":"input_audio_buffer.append","event_id":"evt_append","audio":"AAAA"}));
    let (err, _) = c.until("error", T).await.unwrap();
    assert_eq!(err["error"]["code"], "invalid_event_for_transport");
    assert_eq!(err["error"]["event_id"], "evt_append");

    c.send(json!({"type":"session.update","session":{"audio":{"input":{"turn_detection":null}}}}));
    c.until("session.updated", T).await.unwrap();
    c.send(json!({"type":"input_audio_buffer.clear"}));
    c.until("input_audio_buffer.cleared", T).await.unwrap();
    c.speak(&voiced48(1.0));
    while !c.done_speaking() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.send(json!({"type":"input_audio_buffer.commit"}));
    let (committed, skipped) = c.until("input_audio_buffer.committed", T).await.unwrap();
    assert!(
        !skipped
            .iter()
            .any(|e| e["type"] == "input_audio_buffer.speech_started"),
        "no VAD in manual mode"
    );
    assert!(committed["item_id"].as_str().is_some());
    c.send(json!({"type":"response.create"}));
    let (done, _) = c.until("response.done", T).await.unwrap();
    assert_eq!(done["response"]["status"], "completed");
    let transcript = done["response"]["output"][0]["content"][0]["transcript"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(transcript.starts_with("echo of 1."), "{transcript}");
    c.until("output_audio_buffer.stopped", T).await.unwrap();
}
