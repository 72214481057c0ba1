//! Real speech understanding over WebSocket, with the real Silero VAD and Whisper tiny.en
//! files from `scripts/install-models`: espeak-ng speaks five plain sentences into a
//! realtime session with input transcription (server VAD cuts them; the word error rate over
//! the five is at most 15 %, and the echo model answers with the words), and into a
//! `?intent=transcription` session (transcription events, no responses).

use crate::common;
use common::*;
use duet_client::speech::{espeak, word_errors, SENTENCES};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Appends `text` spoken, then a second of silence; returns the time the last audio went.
async fn say(c: &mut Client, text: &str) -> Instant {
    let mut audio = silence(0.3);
    audio.extend(espeak(text));
    audio.extend(silence(1.0));
    c.append(&audio).await;
    Instant::now()
}

async fn completed_for(c: &mut Client, item: &str) -> (Value, Vec<Value>) {
    let mut seen = Vec::new();
    loop {
        let ev = c.next().await;
        seen.push(ev.clone());
        match ev["type"].as_str() {
            Some("conversation.item.input_audio_transcription.completed")
                if ev["item_id"] == item =>
            {
                return (ev, seen)
            }
            Some("conversation.item.input_audio_transcription.failed") => panic!("{ev}"),
            _ => {}
        }
    }
}

#[tokio::test]
async fn five_sentences_are_transcribed_and_answered_with_their_words() {
    let addr = speech_server(true, &[]).await;
    let mut c = Client::connect(addr).await;
    c.send(json!({"type":"session.update","session":{"type":"realtime",
        "audio":{"input":{"transcription":{"model":"whisper-1"}}}}}))
        .await;
    c.until("session.updated").await;
    let (mut errors, mut total) = (0, 0);
    for sentence in SENTENCES {
        say(&mut c, sentence).await;
        let stopped = c.until("input_audio_buffer.speech_stopped").await;
        let at = Instant::now();
        let item = stopped["item_id"].as_str().unwrap().to_string();
        let (done, seen) = completed_for(&mut c, &item).await;
        let latency = at.elapsed();
        let transcript = done["transcript"].as_str().unwrap();
        assert!(
            seen.iter()
                .any(|e| e["type"] == "conversation.item.input_audio_transcription.delta"),
            "a delta before the completion"
        );
        assert_eq!(done["usage"]["type"], "duration");
        let (e, n) = word_errors(sentence, transcript);
        eprintln!(
            "{sentence:?} -> {transcript:?}: {e}/{n} word errors, transcript {} ms after speech_stopped",
            latency.as_millis()
        );
        errors += e;
        total += n;
        // The echo model answers the words it was given.
        let answer = c.until("response.done").await;
        let said = answer["response"]["output"][0]["content"][0]["transcript"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(said, format!("You said: {}", transcript.trim()));
    }
    let wer = errors as f64 / total as f64;
    eprintln!(
        "WER over {} sentences: {:.1} % ({errors}/{total})",
        SENTENCES.len(),
        wer * 100.0
    );
    assert!(wer <= 0.15, "WER {:.1} %", wer * 100.0);
}

#[tokio::test]
async fn a_transcription_session_hears_a_sentence_and_never_responds() {
    let addr = speech_server(true, &[]).await;
    let url = format!("ws://{addr}/v1/realtime?intent=transcription");
    let mut c = Client::open(&url, &[]).await.expect("connects");
    let created = c.until("session.created").await;
    assert_eq!(created["session"]["type"], "transcription");
    assert_eq!(
        created["session"]["object"],
        "realtime.transcription_session"
    );
    c.send(
        json!({"type":"session.update","session":{"type":"transcription",
        "audio":{"input":{"transcription":{"model":"gpt-4o-transcribe"}}},
        "include":["item.input_audio_transcription.logprobs"]}}),
    )
    .await;
    c.until("session.updated").await;
    say(&mut c, SENTENCES[1]).await;
    let committed = c.until("input_audio_buffer.committed").await;
    let item = committed["item_id"].as_str().unwrap().to_string();
    let (done, seen) = completed_for(&mut c, &item).await;
    let transcript = done["transcript"].as_str().unwrap().to_lowercase();
    assert!(transcript.contains("park"), "{transcript}");
    let lp = done["logprobs"].as_array().expect("logprobs included");
    assert!(!lp.is_empty() && lp.iter().all(|t| t["logprob"].as_f64().unwrap() <= 0.0));
    let after = c.drain(Duration::from_secs(1)).await;
    for ev in seen.iter().chain(&after) {
        let t = ev["type"].as_str().unwrap();
        assert!(
            !t.starts_with("response."),
            "a transcription session answered: {t}"
        );
    }
}
