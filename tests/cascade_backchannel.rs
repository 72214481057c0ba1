//! Adaptive interruption on the real cascade (Silero VAD, Whisper tiny.en, the Piper voice)
//! with a scripted LLM streaming a long answer, on a WebSocket session under
//! `semantic_vad` (adaptive by default): a spoken "Yeah." over the answer sends no
//! `speech_started`, cancels nothing, and the answer completes; a spoken "Stop, please."
//! over the next answer is judged by its words and interrupts it (`turn_detected`), its
//! `speech_started` naming the onset. Under `server_vad` (immediate) the same "Yeah."
//! cancels the answer, as every voice over an answer did before. (espeak-ng cannot say a
//! natural "mm-hmm": it spells it out, 840 ms long, which Whisper hears as words.)

use crate::common;
use common::*;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use duet_client::speech::espeak;
use serde_json::{json, Value};
use std::time::Duration;

fn story() -> Reply {
    let words = "Once upon a time there was a lighthouse keeper who lived alone on a rock far \
        out at sea. Every night he climbed the stairs and lit the lamp, and ships passed \
        safely in the dark.";
    let data = words
        .split_inclusive(' ')
        .map(|w| json!({"choices":[{"index":0,"delta":{"content":w}}]}).to_string())
        .chain(["[DONE]".to_string()])
        .collect();
    Reply::Stream {
        data,
        gap: Duration::from_millis(60),
    }
}

async fn client(llm: &str, turn_detection: Value) -> Client {
    let mut c = cascade_speech_client(llm).await;
    c.send(json!({"type":"session.update","session":{"type":"realtime","audio":{"input":{"turn_detection":turn_detection}}}})).await;
    c.until("session.updated").await;
    c
}

/// Asks for the story, waits for its first audio, then says `over` on top of it; returns
/// the story's `response.done` and the events from `over` on.
async fn say_over_the_story(c: &mut Client, over: &str) -> (Value, Vec<Value>) {
    let mut question = silence(0.3);
    question.extend(espeak("Tell me a story."));
    question.extend(silence(1.5));
    c.append(&question).await;
    c.until("response.output_audio.delta").await;
    let from = c.log.len();
    let mut voice = espeak(over);
    voice.extend(silence(1.0));
    c.append_live(&voice).await;
    let done = loop {
        let ev = c.next().await;
        if ev["type"] == "response.done" {
            break ev;
        }
    };
    (done, c.log[from..].to_vec())
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

#[tokio::test]
async fn a_backchannel_lets_the_answer_finish_and_words_interrupt_it() {
    let _turn = common::exclusive().await;
    let llm = ScriptedLlm::start(vec![story(), story(), Reply::text(&["Okay."])]).await;
    let semantic = json!({"type":"semantic_vad","eagerness":"high"});
    let mut c = client(&llm.url, semantic).await;
    let (done, after) = say_over_the_story(&mut c, "Yeah.").await;
    eprintln!(
        "backchannel: {:?}",
        after
            .iter()
            .map(|e| e["type"].as_str().unwrap_or(""))
            .filter(|t| t.starts_with("input"))
            .collect::<Vec<_>>()
    );
    assert_eq!(done["response"]["status"], "completed", "{done}");
    assert_eq!(count(&after, "input_audio_buffer.speech_started"), 0);
    assert_eq!(count(&after, "input_audio_buffer.committed"), 0, "no item");
    assert!(
        llm.closed.lock().unwrap().is_empty(),
        "the LLM was not stopped"
    );

    let (done, after) = say_over_the_story(&mut c, "Stop, please.").await;
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );
    assert_eq!(count(&after, "input_audio_buffer.speech_started"), 1);

    // Immediate (server VAD's default): the same backchannel stops the answer.
    let llm = ScriptedLlm::start(vec![story(), Reply::text(&["Okay."])]).await;
    let immediate = json!({"type":"server_vad","silence_duration_ms":500});
    let mut c = client(&llm.url, immediate).await;
    let (done, _) = say_over_the_story(&mut c, "Yeah.").await;
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
}
