//! Real speech understanding on a WebRTC call (the str0m client), with the real Silero VAD
//! and Whisper tiny.en files from `scripts/install-models`: a spoken sentence comes back as
//! its input transcription, and over the echo model's answer a real voice barges in while a
//! 1 s burst of noise does not (the energy detector, for comparison, is fooled by it).

use crate::common;
use common::*;
use duet_client::rtc::{ClientOptions, RtcClient};
use duet_client::speech::{espeak, noise, resample_linear, word_errors};
use serde_json::json;
use std::time::Duration;

const T: Duration = Duration::from_secs(15);

fn at48(pcm: &[f32]) -> Vec<f32> {
    resample_linear(pcm, 24_000, 48_000)
}

/// A call on `addr`, its session created.
async fn call(addr: std::net::SocketAddr) -> RtcClient {
    let mut c = RtcClient::connect(addr, ClientOptions::default())
        .await
        .expect("call created");
    c.until("session.created", T).await.unwrap();
    c
}

#[tokio::test]
async fn a_spoken_sentence_on_a_call_comes_back_as_its_transcript() {
    let mut c = call(speech_server(true, &[]).await).await;
    c.send(json!({"type":"session.update","session":{"type":"realtime",
        "audio":{"input":{"transcription":{"model":"whisper-1"}}}}}));
    c.until("session.updated", T).await.unwrap();
    let sentence = "Please call me back this afternoon.";
    let mut audio = at48(&espeak(sentence));
    audio.extend(vec![0.0; 48_000]);
    c.speak(&audio);
    let (stopped, _) = c
        .until("input_audio_buffer.speech_stopped", T)
        .await
        .unwrap();
    let at = std::time::Instant::now();
    let (done, _) = c
        .until("conversation.item.input_audio_transcription.completed", T)
        .await
        .unwrap();
    assert_eq!(done["item_id"], stopped["item_id"]);
    let transcript = done["transcript"].as_str().unwrap();
    let (errors, words) = word_errors(sentence, transcript);
    eprintln!(
        "{sentence:?} -> {transcript:?} ({errors}/{words} word errors) {} ms after speech_stopped",
        at.elapsed().as_millis()
    );
    let lower = transcript.to_lowercase();
    assert!(
        lower.contains("call") && lower.contains("afternoon"),
        "{transcript}"
    );
    let (answer, _) = c.until("response.done", T).await.unwrap();
    assert_eq!(
        answer["response"]["output"][0]["content"][0]["transcript"],
        format!("You said: {}", transcript.trim())
    );
}

/// Asks for a long spoken answer (a text turn: the echo model speaks one tone burst per
/// word, several seconds), waits until it plays, then sends `over` (48 kHz); returns the
/// answer's `response.done` and whether speech was detected meanwhile (printed with `what`).
/// A text turn, so that no VAD turn of the caller's own comes before the test's.
async fn interrupt_with(c: &mut RtcClient, over: &[f32], what: &str) -> (serde_json::Value, bool) {
    c.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user",
        "content":[{"type":"input_text","text":
        "tell me a long story about the sea and the ships and the sailors who crossed it in the old days long ago"}]}}));
    c.send(json!({"type":"response.create"}));
    c.until("response.created", T).await.unwrap();
    c.until("output_audio_buffer.started", T).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.speak(over);
    let (done, seen) = c.until("response.done", T).await.unwrap();
    let barged = seen
        .iter()
        .chain(std::iter::once(&done))
        .any(|e| e["type"] == "input_audio_buffer.speech_started");
    eprintln!(
        "{what}: status {}, speech_started {barged}",
        done["response"]["status"]
    );
    (done, barged)
}

#[tokio::test]
async fn a_real_voice_barges_in_and_a_burst_of_noise_does_not() {
    let burst = at48(&noise(1.0, -26.0, 7));
    let voice = at48(&espeak("Stop, wait a moment."));

    let mut c = call(speech_server(true, &[]).await).await;
    let (done, barged) = interrupt_with(&mut c, &burst, "silero, noise over the answer").await;
    assert_eq!(
        done["response"]["status"], "completed",
        "noise must not cancel"
    );
    assert!(!barged);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (done, barged) = interrupt_with(&mut c, &voice, "silero, a voice over the answer").await;
    assert!(barged, "a voice is speech");
    assert_eq!(done["response"]["status"], "cancelled");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );
    c.close();

    // The energy detector on the same input: the burst is loud enough to barge in.
    let mut c = call(speech_server(false, &[]).await).await;
    let (done, barged) = interrupt_with(&mut c, &burst, "energy, noise over the answer").await;
    assert!(barged, "the energy detector takes loud noise for speech");
    assert_eq!(done["response"]["status"], "cancelled");
}

#[tokio::test]
async fn a_call_can_be_a_transcription_session() {
    let addr = speech_server(true, &[]).await;
    let opts = ClientOptions {
        session: Some(json!({"type": "transcription",
            "audio": {"input": {"transcription": {"model": "whisper-1"}}}})),
        ..ClientOptions::default()
    };
    let mut c = RtcClient::connect(addr, opts).await.expect("call created");
    let (created, _) = c.until("session.created", T).await.unwrap();
    assert_eq!(created["session"]["type"], "transcription", "{created}");
    let mut audio = at48(&espeak("Please open the door for me."));
    audio.extend(vec![0.0; 48_000]);
    c.speak(&audio);
    let (done, seen) = c
        .until("conversation.item.input_audio_transcription.completed", T)
        .await
        .unwrap();
    let text = done["transcript"].as_str().unwrap().to_lowercase();
    assert!(text.contains("open") && text.contains("door"), "{text}");
    let mut after = seen;
    while let Some(ev) = c.next(Duration::from_millis(1500)).await {
        after.push(ev);
    }
    assert!(
        !after
            .iter()
            .any(|e| e["type"].as_str().unwrap().starts_with("response.")),
        "a transcription session never responds"
    );
}
