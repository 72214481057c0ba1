//! A full WebRTC call with the str0m client: connect, silence frames flowing, a spoken turn
//! answered by the echo model, `output_audio_buffer.clear`, barge-in with truncation to what
//! was played, hangup and resources freed.

use crate::common;
use common::*;
use duet_client::rtc::{ClientOptions, RtcClient};
use serde_json::json;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(10);

async fn speak_and_wait_answer(c: &mut RtcClient, secs: f32) -> serde_json::Value {
    let mut audio = voiced48(secs);
    audio.extend(vec![0.0; 48_000 * 7 / 10]);
    c.speak(&audio);
    c.until("input_audio_buffer.speech_started", T)
        .await
        .unwrap();
    c.until("response.created", T).await.unwrap().0
}

#[tokio::test]
async fn webrtc_call_end_to_end() {
    let addr = server(&[]).await;
    let mut c = RtcClient::connect(addr, ClientOptions::default())
        .await
        .expect("call created");
    assert!(
        c.call_id.starts_with("rtc_") && c.call_id.len() == 36,
        "{}",
        c.call_id
    );
    let (created, _) = c.until("session.created", T).await.unwrap();
    assert_eq!(
        created["session"]["audio"]["input"]["turn_detection"]["type"],
        "server_vad"
    );
    c.send(json!({"type":"session.update","session":{"type":"realtime","instructions":"hi"}}));
    c.until("session.updated", T).await.unwrap();

    // Idle: silence frames arrive on the 20 ms grid.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let from = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = c
        .stats()
        .frames_between(from, from + Duration::from_secs(2));
    assert!(idle >= 98, "{idle} frames in 2 s");
    let s = c.stats();
    eprintln!("connect: {:?}", s.connected.unwrap() - s.started.unwrap());

    // A spoken turn, answered.
    let created = speak_and_wait_answer(&mut c, 1.0).await;
    let resp = created["response"]["id"].as_str().unwrap().to_string();
    let (started, _) = c.until("output_audio_buffer.started", T).await.unwrap();
    assert_eq!(started["response_id"], resp.as_str());
    let (done, skipped) = c.until("response.done", T).await.unwrap();
    assert_eq!(done["response"]["status"], "completed");
    assert!(
        !skipped
            .iter()
            .any(|e| e["type"] == "response.output_audio.delta"),
        "no audio deltas on the data channel"
    );
    assert!(skipped
        .iter()
        .any(|e| e["type"] == "response.output_audio.done"));
    let (stopped, _) = c.until("output_audio_buffer.stopped", T).await.unwrap();
    assert_eq!(stopped["response_id"], resp.as_str());
    let loud = c.stats().frames.iter().filter(|(_, r)| *r > 0.02).count();
    assert!(loud >= 40, "{loud} loud frames of the 1 s echo");

    // output_audio_buffer.clear during an answer: silence from the next frame on.
    speak_and_wait_answer(&mut c, 2.0).await;
    c.until("output_audio_buffer.started", T).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.send(json!({"type":"output_audio_buffer.clear"}));
    let (cleared, skipped) = c.until("output_audio_buffer.cleared", T).await.unwrap();
    let cleared_at = Instant::now();
    assert!(
        skipped
            .iter()
            .any(|e| e["type"] == "response.done" && e["response"]["status"] == "cancelled"),
        "{:?}",
        duet_client::rtc::types(&skipped)
    );
    assert!(cleared["response_id"].as_str().is_some());
    tokio::time::sleep(Duration::from_millis(400)).await;
    let last_loud = c.stats().last_loud(0.02).unwrap();
    assert!(
        last_loud < cleared_at + Duration::from_millis(60),
        "audio {:?} after cleared",
        last_loud - cleared_at
    );

    // Barge-in: speak over the answer; the item is truncated to what was played.
    speak_and_wait_answer(&mut c, 2.5).await;
    c.until("output_audio_buffer.started", T).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    c.speak(&voiced48(0.4));
    let (done, _) = c.until("response.done", T).await.unwrap();
    assert_eq!(done["response"]["status"], "cancelled");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );
    let item_id = done["response"]["output"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.until("output_audio_buffer.cleared", T).await.unwrap();
    let (trunc, _) = c.until("conversation.item.truncated", T).await.unwrap();
    assert_eq!(trunc["item_id"], item_id.as_str());
    let end_ms = trunc["audio_end_ms"].as_u64().unwrap();
    assert!(
        (500..=1_200).contains(&end_ms),
        "played {end_ms} ms before the barge-in"
    );
    assert_eq!(end_ms % 20, 0, "whole 20 ms frames: {end_ms}");
    c.send(json!({"type":"conversation.item.retrieve","item_id": item_id}));
    let (item, _) = c.until("conversation.item.retrieved", T).await.unwrap();
    let transcript = item["item"]["content"][0]["transcript"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        "echo of 2.5 s".starts_with(&transcript) && !transcript.is_empty(),
        "{transcript:?}"
    );
    let audio_b64 = item["item"]["content"][0]["audio"].as_str().unwrap();
    assert_eq!(
        b64_len(audio_b64) as u64,
        end_ms * 48,
        "stored audio is what was played"
    );

    // Hangup frees the call.
    let status = duet_client::http::hangup(addr, &c.call_id, None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status = duet_client::http::hangup(addr, &c.call_id, None)
        .await
        .unwrap();
    assert_eq!(status, 404, "the call is gone");
    c.close();
}
