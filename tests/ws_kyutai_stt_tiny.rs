//! The streaming transcriber path end to end: a server with a tiny Kyutai STT (seeded random
//! weights in Kyutai's file names, loaded by the production loader) transcribes a WebSocket
//! session's turns as they are spoken: the speech goes to the transcriber from
//! `speech_started` on, word deltas arrive (random weights say little: what, depends on the
//! audio), and `.completed` begins with exactly the deltas' words once server VAD commits
//! the turn; the echo model answers with them.

use crate::common;
use common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_transcriber_sends_words_as_they_come_then_completes() {
    let dir = std::env::temp_dir().join(format!("duet-tiny-stt-{}", std::process::id()));
    duet_models::kyutai_stt::tiny::write_tiny_dir(&dir, 42).expect("tiny STT");
    let dir_arg = dir.display().to_string();
    let addr = server(&["--transcription-model-dir", &dir_arg]).await;
    let mut c = Client::connect(addr).await;
    c.send(json!({"type":"session.update","session":{"type":"realtime",
        "audio":{"input":{"transcription":{"model":"kyutai"}}}}}))
        .await;
    c.until("session.updated").await;
    for turn in 0..2 {
        let mut audio = voiced(2.0);
        audio.extend(silence(0.8));
        c.append(&audio).await;
        let started = c.until("input_audio_buffer.speech_started").await;
        let item = started["item_id"].as_str().unwrap().to_string();
        let mut deltas = String::new();
        let completed = loop {
            let ev = c.next().await;
            match ev["type"].as_str().unwrap() {
                "conversation.item.input_audio_transcription.delta" => {
                    assert_eq!(ev["item_id"], item.as_str());
                    deltas.push_str(ev["delta"].as_str().unwrap());
                }
                "conversation.item.input_audio_transcription.completed" => break ev,
                "conversation.item.input_audio_transcription.failed" => panic!("{ev}"),
                _ => {}
            }
        };
        assert_eq!(completed["item_id"], item.as_str());
        let text = completed["transcript"].as_str().unwrap();
        eprintln!("turn {turn}: deltas {deltas:?}, completed {text:?}");
        // Words said during the end-of-utterance flush come only with the completion.
        assert!(
            text.starts_with(deltas.trim()),
            "completed {text:?} begins with the deltas {deltas:?}"
        );
        assert!(completed["usage"]["seconds"].as_f64().unwrap() > 2.0);
        let done = c.until("response.done").await;
        let said = done["response"]["output"][0]["content"][0]["transcript"]
            .as_str()
            .unwrap()
            .to_string();
        if text.trim().is_empty() {
            assert!(said.starts_with("echo of"), "{said}");
        } else {
            assert_eq!(said, format!("You said: {}", text.trim()));
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
