//! The whole cascade remote, on a WebRTC call (the str0m client): the caller's turn goes to
//! the `--stt-url` server as a WAV, its transcript to the `--llm-url` server, the answer to
//! the `--tts-url` server (scripted upstreams in the shapes of OpenAI's
//! `/v1/audio/transcriptions`, `/v1/chat/completions` and `/v1/audio/speech` with `pcm`), and
//! the PCM it streams back is what the caller hears, paced on the call's 20 ms grid.

use crate::common;
use common::*;
use duet_client::rtc::{ClientOptions, RtcClient};
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use serde_json::json;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_heard_answered_and_spoken_by_remote_stages() {
    let stt = ScriptedLlm::start(vec![Reply::Status(
        200,
        json!({"text": "What time is it?"}).to_string(),
    )])
    .await;
    let llm = ScriptedLlm::start(vec![Reply::text(&["It is ", "noon."])]).await;
    // 1.2 s of a loud 24 kHz tone, streamed in pieces.
    let pcm: Vec<u8> = (0..28_800)
        .map(|i| ((i as f32 * 0.06).sin() * 12_000.0) as i16)
        .flat_map(i16::to_le_bytes)
        .collect();
    let tts = ScriptedLlm::start(vec![Reply::Bytes {
        content_type: "audio/pcm".into(),
        parts: pcm.chunks(9_601).map(<[u8]>::to_vec).collect(),
        gap: Duration::from_millis(20),
    }])
    .await;
    let addr = server(&[
        "--model",
        "cascade",
        "--stt-url",
        &stt.url,
        "--llm-url",
        &llm.url,
        "--tts-url",
        &tts.url,
        "--tts-model",
        "kokoro",
    ])
    .await;
    let mut c = RtcClient::connect(addr, ClientOptions::default())
        .await
        .expect("call created");
    c.until("session.created", T).await.unwrap();
    c.send(json!({"type":"session.update","session":{"type":"realtime",
        "audio":{"input":{"turn_detection":{"type":"server_vad","silence_duration_ms":300}},
                 "output":{"voice":"af_bella"}}}}));
    c.until("session.updated", T).await.unwrap();
    let mut audio = voiced48(1.0);
    audio.extend(vec![0.0; 48_000 * 8 / 10]);
    c.speak(&audio);
    c.until("input_audio_buffer.speech_stopped", T)
        .await
        .unwrap();
    let (transcribed, _) = c
        .until("conversation.item.input_audio_transcription.completed", T)
        .await
        .unwrap();
    assert_eq!(transcribed["transcript"], "What time is it?");
    let from = Instant::now();
    c.until("output_audio_buffer.started", T).await.unwrap();
    let (done, _) = c.until("response.done", T).await.unwrap();
    assert_eq!(done["response"]["status"], "completed", "{done}");
    assert_eq!(
        done["response"]["output"][0]["content"][0]["transcript"],
        "It is noon."
    );
    c.until("output_audio_buffer.stopped", T).await.unwrap();
    // What each upstream was asked.
    let wav = &stt.raw.lock().unwrap()[0];
    assert!(
        wav.0.starts_with("POST /v1/audio/transcriptions "),
        "{}",
        wav.0
    );
    let asked = llm.requests()[0].to_string();
    assert!(asked.contains("What time is it?"), "{asked}");
    let spoken = tts.requests()[0].clone();
    assert_eq!(spoken["input"], "It is noon.", "{spoken}");
    assert_eq!(spoken["voice"], "af_bella", "{spoken}");
    assert_eq!(spoken["response_format"], "pcm", "{spoken}");
    // The caller heard the 1.2 s the voice streamed: about 60 loud frames.
    let loud = c
        .stats()
        .frames
        .iter()
        .filter(|(t, r)| *t >= from && *r > 0.05)
        .count();
    println!("{loud} loud frames of the 1.2 s answer");
    assert!((50..=66).contains(&loud), "{loud} loud frames");
    c.close();
}
