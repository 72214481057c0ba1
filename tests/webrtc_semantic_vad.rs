//! `semantic_vad` with the real Smart Turn v3.2 and Silero VAD on WebRTC calls (the str0m
//! client, Opus, real time), on utterances of the generated turn-taking set
//! (`duet_client::turn_set`, two espeak-ng voices and speeds), four calls at once:
//!
//! - sentences broken by a hesitation (", um," or ", uh," and a pause of 800 or 1200 ms, longer than
//!   the 700 ms fixed silence of `semantic_vad` without a model) stay one turn;
//! - finished questions end after a pause the model shortened: the turn is committed well
//!   before the maximum pause (3 s for `medium`).
//!
//! The turn is judged by the sound alone here (the echo model starts no speculative
//! transcript); `examples/turn_end_bench.rs` measures the whole set per mode. The finished
//! sentences are ones whose scores survive Opus: on espeak-ng's synthetic speech Smart
//! Turn's score moves with the codec and the noise floor ("Where is the nearest
//! station?", en-gb at 175 words a minute: 0.79 as PCM, 0.13 after an Opus round trip at
//! 48 kHz; "Tell me a story.": 0.98 and 0.97), so a call's finished sentence may wait for
//! the maximum pause where the same samples over WebSocket end at once (docs/benchmarks.md,
//! "Turn-taking").

use crate::common;
use common::*;
use duet_client::rtc::{ClientOptions, RtcClient};
use duet_client::speech::{models_dir, resample_linear};
use duet_client::turn_set::{Clip, Hesitation};
use serde_json::json;
use std::time::{Duration, Instant};

/// What a call heard of one utterance: the committed turns, and the first one's arrival
/// after the voice's end.
struct Heard {
    committed: usize,
    first_after_voice: Option<Duration>,
}

async fn speak(addr: std::net::SocketAddr, clip: &Clip) -> Heard {
    let session = json!({"type":"realtime","audio":{"input":{"turn_detection":
        {"type":"semantic_vad","eagerness":"medium","create_response":false}}}});
    let options = ClientOptions {
        session: Some(session),
        turn_events: true,
        ..ClientOptions::default()
    };
    let mut c = RtcClient::connect(addr, options).await.expect("call");
    let t = Duration::from_secs(10);
    c.until("session.created", t).await.unwrap();
    let mut audio = clip.audio.clone();
    audio.extend(silence(3.6));
    c.speak(&resample_linear(&audio, 24_000, 48_000));
    let voice_end = Instant::now() + Duration::from_millis(clip.voice_end_ms());
    let deadline = voice_end + Duration::from_millis(3_800);
    let mut heard = Heard {
        committed: 0,
        first_after_voice: None,
    };
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Some(ev) = c.next(left).await else { break };
        if ev["type"] == "turn.scored" {
            eprintln!(
                "{:?}: scored {} ({})",
                clip.text, ev["probability"], ev["decision"]
            );
        }
        if ev["type"] == "input_audio_buffer.committed" {
            heard.committed += 1;
            heard
                .first_after_voice
                .get_or_insert_with(|| Instant::now().saturating_duration_since(voice_end));
        }
    }
    heard
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hesitations_stay_one_turn_and_finished_questions_end_soon() {
    let _alone = common::exclusive().await; // real-time audio, four calls
    let dir = models_dir().join("smart-turn-v3.2");
    let addr = speech_server(true, &["--turn-model-dir", &dir.display().to_string()]).await;
    let clips = [
        Clip::broken(
            "I would like to book a table for",
            "four people.",
            Hesitation::Um,
            800,
            ("en-us", 175),
        ),
        Clip::broken(
            "So the problem with my order is that",
            "it never arrived.",
            Hesitation::Uh,
            1_200,
            ("en-gb", 150),
        ),
        Clip::finished("Tell me a story.", ("en-us", 175)),
        Clip::finished("Please call me back tomorrow morning.", ("en-gb", 175)),
    ];
    let heard = futures_util::future::join_all(clips.iter().map(|c| speak(addr, c))).await;
    for (clip, h) in clips.iter().zip(&heard) {
        eprintln!(
            "{:?}: {} turn(s), committed {:?} after the voice",
            clip.text, h.committed, h.first_after_voice
        );
    }
    for (clip, h) in clips.iter().zip(&heard) {
        assert_eq!(h.committed, 1, "{:?} is one turn", clip.text);
        if clip.resumes_at.is_none() {
            let after = h.first_after_voice.expect("committed");
            assert!(
                after < Duration::from_millis(1_500),
                "{:?} ended {after:?} after the voice: the model did not shorten the pause",
                clip.text
            );
        }
    }
}
