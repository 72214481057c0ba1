//! `--model moshi` over WebRTC with the tiny random Moshi: the model's own speech reaches
//! the caller as RTP (Opus, 20 ms frames cut from its 80 ms steps), opened by
//! `response.speak`; `output_audio_buffer.clear` silences it at once and the assistant item
//! is truncated to what was played.

use crate::common;
use common::moshi::tiny_moshi_server;
use common::*;
use duet_client::rtc::{ClientOptions, RtcClient};
use serde_json::json;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(10);

#[tokio::test]
async fn tiny_moshi_over_webrtc() {
    let moshi = tiny_moshi_server("rtc").await;
    let addr = moshi.addr;
    let mut c = RtcClient::connect(addr, ClientOptions::default())
        .await
        .expect("call created");
    let (created, _) = c.until("session.created", T).await.unwrap();
    assert_eq!(created["session"]["model"], "moshi");
    c.speak(&voiced48(1.0));

    let (speak, skipped) = c.until("response.speak", T).await.unwrap();
    let resp = speak["response_id"].as_str().unwrap().to_string();
    assert!(duet_client::rtc::types(&skipped).contains(&"response.created".to_string()));
    let (started, _) = c.until("output_audio_buffer.started", T).await.unwrap();
    assert_eq!(started["response_id"], resp.as_str());
    tokio::time::sleep(Duration::from_millis(600)).await;
    let now = Instant::now();
    let s = c.stats();
    let frames = s.frames_between(now - Duration::from_millis(500), now);
    assert!(
        frames >= 23,
        "{frames} RTP frames in 500 ms while the model speaks"
    );
    let voiced = s
        .frames
        .iter()
        .filter(|(at, rms)| *at > now - Duration::from_millis(500) && *rms > 0.01)
        .count();
    assert!(voiced >= 20, "{voiced} frames carry the model's audio");

    c.send(json!({"type":"output_audio_buffer.clear"}));
    let (cleared, skipped) = c.until("output_audio_buffer.cleared", T).await.unwrap();
    assert_eq!(cleared["response_id"], resp.as_str());
    let done = skipped
        .iter()
        .find(|e| e["type"] == "response.done")
        .expect("response.done before cleared");
    assert_eq!(done["response"]["status"], "cancelled");
    let (trunc, _) = c.until("conversation.item.truncated", T).await.unwrap();
    let end_ms = trunc["audio_end_ms"].as_u64().unwrap();
    assert!(end_ms >= 400 && end_ms % 20 == 0, "played {end_ms} ms");

    let status = duet_client::http::hangup(addr, &c.call_id, None)
        .await
        .unwrap();
    assert_eq!(status, 200);
}
