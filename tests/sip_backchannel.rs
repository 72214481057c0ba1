//! Adaptive interruption on a phone call (a Rust caller on plain RTP, PCMU; the echo model,
//! no transcriber, so speech over an answer is judged by its length): `semantic_vad` set
//! from the sideband. 300 ms of voice one second into the answer pauses its playout and
//! then lets it go on where it paused (every frame of the answer is heard, with a gap where
//! it paused; no `speech_started`, the answer completes); 1.2 s of voice interrupts it: the
//! answer is cancelled (`turn_detected`) and truncated to what the caller heard.

use crate::common;

use common::sip::{answered_call, sip_server, webhook_app};
use common::Client;
use serde_json::{json, Value};
use std::time::Duration;

const RATE: usize = 8_000;
const LOUD_DBFS: f32 = -30.0;

/// `secs` of the synthetic voice at 8 kHz.
fn voice8k(secs: f32) -> Vec<f32> {
    common::voiced(secs).iter().step_by(3).copied().collect()
}

fn quiet(secs: f32) -> Vec<f32> {
    vec![0.0; (secs * RATE as f32) as usize]
}

/// A 2.5 s turn, 1.4 s of listening (the answer starts within it), `over` on top of the
/// answer, then 3.5 s of listening.
fn script(over: f32) -> Vec<f32> {
    let mut s = voice8k(2.5);
    s.extend(quiet(1.4));
    s.extend(voice8k(over));
    s
}

/// The answer as heard: for each frame after the caller's turn (2.5 s), whether it is loud.
fn answer_frames(heard: &[(Duration, Vec<f32>)]) -> Vec<(Duration, bool)> {
    heard
        .iter()
        .filter(|(at, _)| *at > Duration::from_millis(2_500))
        .map(|(at, pcm)| (*at, duet_media::pcm::rms_dbfs(pcm) > LOUD_DBFS))
        .collect()
}

/// The longest run of quiet frames between the first and the last loud one.
fn longest_gap(frames: &[(Duration, bool)]) -> usize {
    let first = frames.iter().position(|f| f.1).unwrap_or(0);
    let last = frames.iter().rposition(|f| f.1).unwrap_or(0);
    let (mut run, mut best) = (0, 0);
    for f in frames.get(first..=last).unwrap_or(&[]) {
        run = if f.1 { 0 } else { run + 1 };
        best = best.max(run);
    }
    best
}

/// Milliseconds from the first loud frame to the last one before 200 ms of quiet (the
/// interrupted answer; the interruption's own answer comes after).
fn played_before_a_pause(frames: &[(Duration, bool)]) -> u64 {
    let first = frames
        .iter()
        .position(|f| f.1)
        .expect("the answer is heard");
    let mut last = first;
    for (i, f) in frames.iter().enumerate().skip(first) {
        if f.1 {
            last = i;
        } else if i - last >= 10 {
            break;
        }
    }
    (last - first + 1) as u64 * 20
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

/// Sideband events until the first `response.done` (the turn's answer), and that event.
async fn answer_done(sideband: &mut Client) -> (Vec<Value>, Value) {
    let events = sideband.collect_until("response.done").await;
    let done = events.last().cloned().unwrap_or_default();
    (events, done)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backchannel_pauses_the_answer_and_lets_it_go_on_a_long_voice_interrupts_it() {
    let _alone = common::exclusive().await; // real-time audio both ways
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let (mut caller, call) = answered_call(&server, &mut app).await;
    let mut sideband = Client::sideband(server.addr, &call.call_id).await.unwrap();
    sideband
        .send(
            json!({"type":"session.update","session":{"type":"realtime","audio":{"input":
            {"turn_detection":{"type":"semantic_vad","eagerness":"high"}}}}}),
        )
        .await;
    let up = sideband.until("session.updated").await;
    let td = &up["session"]["audio"]["input"]["turn_detection"];
    assert_eq!(td["interruption"]["mode"], "adaptive", "{td}");

    // A backchannel: 300 ms of voice about a second into the 2.5 s answer.
    let heard = caller
        .talk_and_listen(&script(0.3), Duration::from_millis(7_700))
        .await
        .unwrap();
    let (events, done) = answer_done(&mut sideband).await;
    assert_eq!(done["response"]["status"], "completed", "{done}");
    assert_eq!(
        count(&events, "input_audio_buffer.speech_started"),
        1,
        "only the turn's own: {events:?}"
    );
    let frames = answer_frames(&heard);
    let loud = frames.iter().filter(|f| f.1).count();
    let gap = longest_gap(&frames);
    eprintln!("backchannel: {loud} loud frames of the 2.5 s answer, paused {gap} frames");
    // The whole answer is heard (125 frames less the echo's fades), not cut at one second.
    assert!(loud >= 110, "{loud} loud frames of the answer heard");
    assert!(
        (10..=60).contains(&gap),
        "the playout paused while the voice was judged, then went on: a gap of {gap} frames"
    );

    // An interruption: 1.2 s of voice about a second into the next answer.
    let heard = caller
        .talk_and_listen(&script(1.2), Duration::from_millis(7_700))
        .await
        .unwrap();
    let (events, done) = answer_done(&mut sideband).await;
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );
    assert_eq!(count(&events, "input_audio_buffer.speech_started"), 2);
    let trunc = sideband.until("conversation.item.truncated").await;
    let end_ms = trunc["audio_end_ms"].as_u64().unwrap();
    let heard_ms = played_before_a_pause(&answer_frames(&heard));
    eprintln!("interruption: truncated at {end_ms} ms, {heard_ms} ms of the answer heard");
    assert_eq!(end_ms % 20, 0, "whole 20 ms frames: {end_ms}");
    assert!(
        end_ms.abs_diff(heard_ms) <= 100,
        "truncated at {end_ms} ms where the caller heard {heard_ms} ms"
    );
    assert!(heard_ms < 2_000, "the answer stopped: {heard_ms} ms heard");

    assert_eq!(caller.bye().await.unwrap(), 200);
}
