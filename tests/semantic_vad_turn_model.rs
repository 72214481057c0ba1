//! `semantic_vad` with the real Smart Turn v3.2 (`--turn-model-dir`, from
//! `scripts/install-models`) and Silero VAD, on WebSocket sessions paced in real time:
//!
//! - a hesitation ("… a table for, um,") and a pause longer than the fixed silence stay one
//!   turn, where server VAD's 700 ms (what `semantic_vad` does without a model) cuts it in
//!   two. After a hesitation the model scores even the finished sentence as unfinished on
//!   this speech (0.02–0.74 on espeak-ng renderings), so the maximum pause (3 s for
//!   `medium`) ends that turn;
//! - a finished question ends its turn after the short pause (the model: 0.98), sooner than
//!   the fixed 700 ms.

use crate::common;
use common::*;
use duet_client::speech::{espeak, models_dir};
use serde_json::{json, Value};
use std::time::Duration;

async fn session(addr: std::net::SocketAddr, turn_detection: Value) -> Client {
    let mut c = Client::connect(addr).await;
    c.send(json!({"type":"session.update","session":{"type":"realtime","audio":{"input":{"turn_detection":turn_detection}}}})).await;
    c.until("session.updated").await;
    c
}

/// `audio_end_ms` of each `speech_stopped` after `audio` was appended in real time.
async fn stops(addr: std::net::SocketAddr, turn_detection: Value, audio: &[f32]) -> Vec<u64> {
    let mut c = session(addr, turn_detection).await;
    c.append_live(audio).await;
    c.drain(Duration::from_millis(500)).await;
    c.log
        .iter()
        .filter(|e| e["type"] == "input_audio_buffer.speech_stopped")
        .map(|e| e["audio_end_ms"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_hesitation_keeps_the_turn_and_a_finished_question_ends_it_soon() {
    let _turn = common::exclusive().await;
    let dir = models_dir().join("smart-turn-v3.2");
    let addr = speech_server(true, &["--turn-model-dir", &dir.display().to_string()]).await;
    let semantic = json!({"type":"semantic_vad","eagerness":"medium","create_response":false});
    let fixed = json!({"type":"server_vad","silence_duration_ms":700,"create_response":false});

    let mut hesitant = silence(0.3);
    hesitant.extend(espeak("I would like to book a table for, um,"));
    hesitant.extend(silence(1.2));
    hesitant.extend(espeak("four people."));
    let voice_end = hesitant.len() as u64 / 24;
    hesitant.extend(silence(3.5));
    let cut = stops(addr, fixed, &hesitant).await;
    assert_eq!(cut.len(), 2, "fixed silence cuts the turn in two: {cut:?}");
    let kept = stops(addr, semantic.clone(), &hesitant).await;
    eprintln!(
        "hesitation: voice ended at {voice_end} ms; fixed silence {cut:?}, the turn model {kept:?}"
    );
    assert_eq!(kept.len(), 1, "one turn: {kept:?}");
    assert!(
        (voice_end + 2_500..=voice_end + 3_300).contains(&kept[0]),
        "the maximum pause ended it: {kept:?}, the voice at {voice_end} ms"
    );

    let mut question = silence(0.3);
    question.extend(espeak("Tell me a story."));
    let voice_end = question.len() as u64 / 24;
    question.extend(silence(1.5));
    let soon = stops(addr, semantic, &question).await;
    eprintln!("question: voice ended at {voice_end} ms; the turn model {soon:?}");
    assert_eq!(soon.len(), 1, "{soon:?}");
    // espeak's clip ends with some silence of its own: the voice ends a little earlier.
    assert!(
        soon[0] < voice_end + 600,
        "ended at {} ms, the voice at {voice_end} ms",
        soon[0]
    );

    let (_, metrics) = get(addr, "/metrics", &[]).await;
    let count = |key: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    assert!(
        count("duet_turn_scores_total{outcome=\"ok\"}") >= 3,
        "{metrics}"
    );
    assert!(
        count("duet_turn_ends_total{by=\"max_pause\"}") >= 1,
        "{metrics}"
    );
    assert!(
        count("duet_turn_ends_total{by=\"immediate\"}") >= 1,
        "{metrics}"
    );
}
