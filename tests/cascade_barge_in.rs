//! Barge-in over the cascade's spoken answer, on the real models (Silero VAD, Whisper
//! tiny.en, the Piper voice) with a scripted LLM that streams a long answer slowly: a voice
//! over the answer cancels it (`turn_detected`), the LLM's stream is closed before its end
//! (the delay after `speech_started` is printed: 0 ms on a quiet machine, the 100 ms
//! target), no audio of the answer follows, and the next request's context holds only the
//! part of the answer that went out. The client never asks for transcription: the
//! cascade's sessions transcribe for the LLM anyway.

use crate::common;
use common::*;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use duet_client::speech::espeak;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn long_answer() -> Reply {
    let words =
        "Once upon a time there was a lighthouse keeper who lived alone on a rock far out at sea. \
        Every night he climbed the stairs and lit the lamp. Ships passed safely in the dark. \
        One stormy winter the lamp went out and he had to find a way to light it again.";
    let data = words
        .split_inclusive(' ')
        .map(|w| json!({"choices":[{"index":0,"delta":{"content":w}}]}).to_string())
        .chain(["[DONE]".to_string()])
        .collect();
    // About 5 s of stream: still going when the voice comes over the answer, however
    // slowly a loaded machine gets there.
    Reply::Stream {
        data,
        gap: Duration::from_millis(120),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_over_the_answer_stops_it_and_the_llm() {
    let llm = ScriptedLlm::start(vec![long_answer(), Reply::text(&["Okay."])]).await;
    let mut c = cascade_speech_client(&llm.url).await;
    // No input transcription asked for: the cascade transcribes for its LLM all the same.
    let mut question = silence(0.3);
    question.extend(espeak("Tell me a story."));
    question.extend(silence(1.0));
    c.append(&question).await;
    // The answer is under way: a second of it, then a voice over it.
    c.until("response.output_audio.delta").await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let mut stop = espeak("Stop please.");
    stop.extend(silence(1.2));
    c.append(&stop).await;
    let started = loop {
        let ev = c.next().await;
        if ev["type"] == "input_audio_buffer.speech_started" {
            break Instant::now();
        }
    };
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );
    let cancelled = done["response"]["id"].clone();
    // The upstream stream was closed before its end (a stream read to its end is not in
    // `closed`), soon after speech_started: the target is 100 ms, met on a quiet machine; the
    // bound here (1 s, still before the story's last second would have streamed) leaves room
    // for a loaded one, where timing is not what this test checks.
    // (`response.done` and the close race each other: the close is looked for a while.)
    let mut closed = None;
    for _ in 0..100 {
        closed = llm.closed.lock().unwrap().first().copied();
        if closed.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let closed = closed.expect("the LLM stream was closed");
    let after = closed.saturating_duration_since(started);
    eprintln!(
        "LLM stream closed {} ms after speech_started reached the client",
        after.as_millis()
    );
    assert!(after <= Duration::from_secs(1), "{after:?}");
    // No audio of the cancelled answer after its response.done; the next turn answers.
    let next = c.until("response.done").await;
    let done_at = c
        .log
        .iter()
        .position(|e| e["type"] == "response.done" && e["response"]["id"] == cancelled)
        .unwrap();
    let late = c.log[done_at..]
        .iter()
        .filter(|e: &&Value| {
            e["type"] == "response.output_audio.delta" && e["response_id"] == cancelled
        })
        .count();
    assert_eq!(late, 0);
    assert_eq!(next["response"]["status"], "completed", "{next}");
    // The question reached the LLM as words, though the client asked for no transcripts.
    let first = llm.requests()[0]["messages"].to_string().to_lowercase();
    assert!(first.contains("story"), "{first}");
    // The next request's context: the story only as far as it went out.
    let second = &llm.requests()[1]["messages"];
    let said = second
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .expect("the heard part of the answer");
    eprintln!("heard part: {said:?}");
    assert!(said.starts_with("Once upon a time"), "{said:?}");
    assert!(
        !said.contains("stormy winter"),
        "the unheard end reached the LLM: {said:?}"
    );
}
