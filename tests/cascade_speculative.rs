//! Speculative starts of the cascade, on the real speech models (Silero VAD, Whisper tiny.en,
//! the Piper voice) with a scripted LLM, the question streamed in real time: the LLM is asked
//! during the silence window, before `speech_stopped`, and the answer's audio follows
//! `speech_stopped` at once; when the user goes on speaking after a pause, the early answer
//! is cancelled and nothing of it reaches the client.

use crate::common;
use common::*;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use duet_client::speech::espeak;
use serde_json::json;
use std::time::Duration;

/// A silence window long enough for the speculation (Whisper and the LLM's first clause) to
/// finish inside it, even in the test build on a loaded machine.
async fn window(c: &mut Client, ms: u32) {
    c.send(
        json!({"type":"session.update","session":{"type":"realtime","audio":{"input":{
        "turn_detection":{"type":"server_vad","silence_duration_ms":ms}}}}}),
    )
    .await;
    c.until("session.updated").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_starts_before_the_turn_is_confirmed_and_plays_at_once() {
    let llm = ScriptedLlm::start(vec![Reply::text(&["It is ten o'clock."])]).await;
    let mut c = cascade_speech_client(&llm.url).await;
    window(&mut c, 3000).await;
    let mut question = silence(0.3);
    question.extend(espeak("What time is it?"));
    question.extend(silence(3.5));
    c.append_live(&question).await;
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "completed", "{done}");
    // One request, the question's words, sent before the turn was confirmed.
    let requests = llm.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let asked = requests[0]["messages"].to_string().to_lowercase();
    assert!(asked.contains("time"), "{asked}");
    let stopped = c.arrival_of("input_audio_buffer.speech_stopped").unwrap();
    let received = llm.received.lock().unwrap()[0];
    assert!(
        received < stopped,
        "the LLM was asked {:?} after speech_stopped",
        received.saturating_duration_since(stopped)
    );
    // The held answer plays as soon as the turn is confirmed.
    let first_audio = c.arrival_of("response.output_audio.delta").unwrap();
    let after = first_audio.saturating_duration_since(stopped);
    eprintln!(
        "LLM asked {} ms before speech_stopped; first audio {} ms after it",
        stopped.saturating_duration_since(received).as_millis(),
        after.as_millis()
    );
    assert!(after <= Duration::from_millis(100), "{after:?}");
    // The item has the transcript, and it is what the LLM heard.
    let transcript = c
        .log
        .iter()
        .find(|e| e["type"] == "conversation.item.input_audio_transcription.completed")
        .expect("the item's transcript")["transcript"]
        .as_str()
        .unwrap()
        .to_lowercase();
    assert!(
        asked.contains(transcript.trim_end_matches(['.', '?'])),
        "{transcript:?} vs {asked}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_mid_sentence_discards_the_early_answer() {
    let llm = ScriptedLlm::start(vec![
        Reply::Stream {
            data: ["WRONG ", "ANSWER ", "STILL ", "WRONG."]
                .iter()
                .map(|w| json!({"choices":[{"index":0,"delta":{"content":w}}]}).to_string())
                .chain(["[DONE]".to_string()])
                .collect(),
            // Still streaming when the voice comes back.
            gap: Duration::from_millis(700),
        },
        Reply::text(&["Here is a story about the sea."]),
    ])
    .await;
    let mut c = cascade_speech_client(&llm.url).await;
    window(&mut c, 3000).await;
    let mut speech = silence(0.3);
    speech.extend(espeak("Tell me"));
    speech.extend(silence(2.0)); // shorter than the window: the turn goes on
    speech.extend(espeak("a story about the sea."));
    speech.extend(silence(3.5));
    c.append_live(&speech).await;
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "completed", "{done}");
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let early = requests[0]["messages"].to_string().to_lowercase();
    assert!(
        early.contains("tell me") && !early.contains("story"),
        "{early}"
    );
    let whole = requests[1]["messages"].to_string().to_lowercase();
    assert!(whole.contains("story"), "{whole}");
    assert!(
        !llm.closed.lock().unwrap().is_empty(),
        "the early answer's stream was closed"
    );
    // Nothing of the early answer reached the client: one response, the right words.
    let log = serde_json::to_string(&c.log).unwrap();
    assert!(!log.contains("WRONG"), "the discarded answer leaked");
    let created = c
        .types()
        .iter()
        .filter(|t| *t == "response.created")
        .count();
    assert_eq!(created, 1);
    assert!(log.contains("story about the sea"));
}
