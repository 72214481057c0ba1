//! Adaptive interruption on the echo model over WebSocket, where no transcriber is loaded so
//! speech over an answer is judged by its length alone: 300 ms of voice over the answer is
//! a backchannel (no `speech_started`, no item, the answer completes), a second of voice is
//! an interruption (`speech_started` naming the onset, the answer cancelled with
//! `turn_detected`). The same 300 ms under `server_vad` (immediate) cancels the answer.

use crate::common;
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

async fn session(addr: std::net::SocketAddr, turn_detection: Value) -> Client {
    let mut c = Client::connect(addr).await;
    c.send(json!({"type":"session.update","session":{"type":"realtime",
        "audio":{"input":{"turn_detection":turn_detection}}}}))
        .await;
    let up = c.until("session.updated").await;
    assert_eq!(
        up["session"]["audio"]["input"]["turn_detection"]["type"],
        turn_detection["type"]
    );
    c
}

/// A 3 s turn; returns once its answer streams, with the answer's response id.
async fn ask(c: &mut Client) -> String {
    let mut turn = voiced(3.0);
    turn.extend(silence(0.6));
    c.append(&turn).await;
    let created = c.until("response.created").await;
    c.until("response.output_audio.delta").await;
    created["response"]["id"].as_str().unwrap().to_string()
}

/// Reads events until the `response.done` of `id`.
async fn until_done(c: &mut Client, id: &str) -> Value {
    loop {
        let ev = c.next().await;
        if ev["type"] == "response.done" && ev["response"]["id"] == id {
            return ev;
        }
    }
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

#[tokio::test]
async fn a_short_voice_over_the_answer_is_a_backchannel_and_a_long_one_interrupts() {
    let addr = server(&[]).await;
    let semantic = json!({"type":"semantic_vad","eagerness":"high"});
    let mut c = session(addr, semantic).await;

    let id = ask(&mut c).await;
    let from = c.log.len();
    let mut backchannel = voiced(0.3);
    backchannel.extend(silence(0.6));
    c.append(&backchannel).await;
    let done = until_done(&mut c, &id).await;
    let after = c.log[from..].to_vec();
    assert_eq!(done["response"]["status"], "completed", "{done}");
    assert_eq!(count(&after, "input_audio_buffer.speech_started"), 0);
    assert_eq!(count(&after, "input_audio_buffer.committed"), 0, "no item");
    // Nothing more comes of it: no turn, no response.
    let later = c.drain(Duration::from_millis(800)).await;
    assert_eq!(count(&later, "response.created"), 0, "{later:?}");

    // Turns so far: 3.6 s, the backchannel's 0.9 s, then 3.6 s: the voice starts at 8.1 s.
    let id = ask(&mut c).await;
    c.append(&voiced(1.0)).await;
    let started = c.until("input_audio_buffer.speech_started").await;
    let onset = started["audio_start_ms"].as_u64().unwrap();
    assert!(
        (7_700..=8_100).contains(&onset),
        "speech_started names the voice's onset (8100 ms less the padding): {onset}"
    );
    let done = until_done(&mut c, &id).await;
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );

    // Immediate (server VAD's default): the same short voice cancels the answer.
    let mut c = session(addr, json!({"type":"server_vad"})).await;
    let id = ask(&mut c).await;
    c.append(&backchannel).await;
    let done = until_done(&mut c, &id).await;
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
}
