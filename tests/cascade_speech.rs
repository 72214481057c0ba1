//! The cascade speaking, on the real models (`scripts/install-models`: Silero VAD, Whisper
//! tiny.en, the Piper voice) with a scripted OpenAI-compatible LLM: a question spoken by
//! espeak-ng is cut by server VAD, transcribed, and reaches the LLM as text; the LLM's
//! answer comes back as speech that Whisper hears as its words (WER ≤ 25 %), the transcript
//! deltas spelling the answer.

use crate::common;
use common::*;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use duet_client::speech::{espeak, models_dir, word_errors};
use duet_models::moshi::DeviceSpec;
use serde_json::json;

const ANSWER: [&str; 3] = ["It is ten ", "o'clock in the morning. ", "Have a nice day."];

/// What Whisper tiny.en hears in `pcm` (24 kHz).
fn hear(pcm: &[f32]) -> String {
    let dir = models_dir().join("whisper-tiny.en");
    let mut t = duet_models::load_transcriber(&dir, &DeviceSpec::Cpu, Some(1)).expect("whisper");
    duet_models::transcribe_clip(t.as_mut(), pcm).expect("a transcript")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoken_question_gets_a_spoken_answer() {
    let llm = ScriptedLlm::start(vec![Reply::text(&ANSWER)]).await;
    let mut c = cascade_speech_client(&llm.url).await;
    c.send(json!({"type":"session.update","session":{"type":"realtime",
        "instructions":"You tell the time.",
        "audio":{"input":{"transcription":{"model":"whisper-1"}}}}}))
        .await;
    c.until("session.updated").await;
    let mut question = silence(0.3);
    question.extend(espeak("What time is it?"));
    question.extend(silence(1.2));
    c.append(&question).await;
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "completed", "{done}");

    // The LLM got the question as its transcript.
    let asked = &llm.requests()[0]["messages"];
    assert_eq!(asked[0]["content"], "You tell the time.");
    let heard_question = asked[1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(heard_question.contains("time"), "{asked}");

    // The answer: audio deltas, and transcript deltas that spell the LLM's words.
    let (pcm, transcript) = spoken_answer(&c.log, None);
    let said: String = ANSWER.concat();
    assert_eq!(transcript, said.trim());
    let secs = pcm.len() as f64 / 24_000.0;
    assert!((2.0..10.0).contains(&secs), "{secs} s of answer");
    let heard = hear(&pcm);
    let (errors, words) = word_errors(&said, &heard);
    eprintln!("answer {secs:.2} s; Whisper heard {heard:?}: {errors}/{words} word errors");
    assert!(errors as f64 / words as f64 <= 0.25, "{heard:?}");
}
