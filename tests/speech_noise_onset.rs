//! A noise onset does not barge in: with the real Silero VAD (`scripts/install-models`), a
//! burst of noise that starts while the answer to a spoken sentence is on its way never
//! starts a second turn nor cancels the answer, on a WebSocket session and on a WebRTC
//! call, while a spoken "stop" over an answer still interrupts it.
//!
//! After speech, Silero's state makes the first chunk or two at a silence → noise edge score
//! about 0.5–0.64 (the following ones far lower): the levels, seeds and offsets below are
//! ones where a one-chunk onset (`--vad-min-speech-ms 0`) took the edge for speech.
//! `--vad-min-speech-ms` (100 by default: three chunks) keeps it from being speech.

use crate::common;
use common::*;
use duet_client::rtc::{ClientOptions, RtcClient};
use duet_client::speech::{espeak, noise, resample_linear};
use serde_json::{json, Value};
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

/// (white noise dBFS, seed, ms of extra silence before it).
const ONSETS: [(f32, u64, u32); 6] = [
    (-26.0, 1, 20),
    (-26.0, 7, 20),
    (-30.0, 9, 0),
    (-30.0, 9, 20),
    (-30.0, 9, 25),
    (-30.0, 9, 100),
];

/// A spoken sentence, 0.8 s (+ `lead_ms`) of silence (its turn ends and the answer
/// starts), then 1 s of white noise: 24 kHz.
fn sentence_then_noise((dbfs, seed, lead_ms): (f32, u64, u32)) -> Vec<f32> {
    let mut pcm = espeak("Please open the door for me.");
    pcm.extend(silence(0.8 + lead_ms as f32 / 1000.0));
    pcm.extend(noise(1.0, dbfs, seed));
    pcm
}

fn speech_starts(events: &[Value]) -> usize {
    events
        .iter()
        .filter(|e| e["type"] == "input_audio_buffer.speech_started")
        .count()
}

#[tokio::test]
async fn noise_after_a_spoken_turn_never_barges_in_over_a_websocket() {
    let addr = speech_server(true, &[]).await;
    for onset in ONSETS {
        // A fresh session each time, so each onset meets the same detector state.
        let mut c = Client::connect(addr).await;
        c.append(&sentence_then_noise(onset)).await;
        let done = c.until("response.done").await;
        c.drain(Duration::from_millis(300)).await;
        let starts = speech_starts(&c.log);
        eprintln!(
            "websocket, {onset:?}: {} speech start(s), answer {}",
            starts, done["response"]["status"]
        );
        assert_eq!(starts, 1, "{onset:?}: the noise started a turn");
        assert_eq!(done["response"]["status"], "completed", "{onset:?}");
    }
}

#[tokio::test]
async fn noise_after_a_spoken_turn_never_barges_in_on_a_call_and_stop_does() {
    let addr = speech_server(true, &[]).await;
    let at48 = |pcm: &[f32]| resample_linear(pcm, 24_000, 48_000);
    for onset in ONSETS.iter().step_by(2) {
        let mut c = RtcClient::connect(addr, ClientOptions::default())
            .await
            .expect("call");
        c.until("session.created", T).await.expect("created");
        c.speak(&at48(&sentence_then_noise(*onset)));
        let (done, mut seen) = c.until("response.done", T).await.expect("answer");
        seen.push(done.clone());
        tokio::time::sleep(Duration::from_millis(300)).await;
        while let Some(e) = c.next(Duration::from_millis(50)).await {
            seen.push(e);
        }
        let starts = speech_starts(&seen);
        eprintln!(
            "webrtc, {onset:?}: {starts} speech start(s), answer {}",
            done["response"]["status"]
        );
        assert_eq!(starts, 1, "{onset:?}: the noise started a turn");
        assert_eq!(done["response"]["status"], "completed", "{onset:?}");
        c.close();
    }
    // A voice over an answer still interrupts it.
    let mut c = RtcClient::connect(addr, ClientOptions::default())
        .await
        .expect("call");
    c.until("session.created", T).await.expect("created");
    c.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user",
        "content":[{"type":"input_text","text":
        "tell me a long story about the sea and the ships and the sailors who crossed it in the old days long ago"}]}}));
    c.send(json!({"type":"response.create"}));
    c.until("output_audio_buffer.started", T)
        .await
        .expect("playing");
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.speak(&at48(&espeak("Stop, wait a moment.")));
    let (done, seen) = c.until("response.done", T).await.expect("done");
    assert_eq!(speech_starts(&seen), 1, "a voice is speech");
    assert_eq!(done["response"]["status"], "cancelled");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );
}
