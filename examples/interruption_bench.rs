//! Adaptive interruption on this machine: over a long spoken answer of `--model cascade`
//! (the real Silero VAD, Whisper tiny.en and Piper voice; a scripted LLM on loopback that
//! streams a story at once), espeak-ng says a backchannel ("Mm-hmm", "Yeah.", "Okay.", …)
//! or a real interruption ("Stop, wait.", "No, that's wrong.", …) one second into the answer,
//! in real time over WebSocket (each round in another espeak-ng voice or speed), on
//! `semantic_vad` (adaptive by default). Prints the share of backchannels kept (no `speech_started`, the answer not cancelled), the share of
//! interruptions that cancelled the answer, and the time from the voice's onset to the
//! answer's `response.done` (cancelled), p50 / p90 / max.
//!
//! ```sh
//! scripts/install-models /tmp/duet-models
//! cargo run --release --example interruption_bench -- --models /tmp/duet-models \
//!     [--rounds 4] [--voices en-us:175,en-gb:175,en-us:140,en-gb:210]
//! ```

use std::time::Duration;

use duet_client::live::LiveSession;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use duet_client::speech::{espeak_as, silence};
use serde_json::json;

#[path = "support/cascade.rs"]
mod cascade;

/// Backchannels as espeak-ng is given them. "Mm-hmm" goes in as its phonemes, the two
/// hummed syllables a person says (/m̩ˈhm̩/): read as text, espeak-ng spells it out ("em em
/// hum", 510 ms of voice), which no listener says and Whisper hears as words ("and").
const BACKCHANNELS: [&str; 6] = [
    "[[m-'hm-]]",
    "Yeah.",
    "Okay.",
    "Uh-huh.",
    "I see.",
    "Right.",
];
const INTERRUPTIONS: [&str; 5] = [
    "Stop, wait.",
    "No, that's wrong.",
    "Hold on, I have a question.",
    "Wait, what did you say?",
    "Can you say that again?",
];

/// One per round, in turn (`--voices`): two accents at two speeds, so that four rounds say
/// every phrase four different ways; `voice:words a minute`.
const VOICES: &str = "en-us:175,en-gb:175,en-us:140,en-gb:210";

/// A long answer: many clauses, so it is still speaking whatever is said over it.
fn story() -> Reply {
    let text = "Once upon a time there was a lighthouse keeper. He lived alone on a rock far \
        out at sea. Every night he climbed the stairs. He trimmed the wick and lit the lamp. \
        Every morning he wrote in his log. He wrote what ships had passed. One winter a storm \
        came. It lasted nine days and nine nights. The waves climbed the rock. The wind broke \
        the windows. He kept the lamp burning all the same.";
    let pieces: Vec<&str> = text.split_inclusive(". ").collect();
    Reply::text(&pieces)
}

/// One trial's outcome: whether the answer was cancelled by the user's turn, and when (from
/// the voice's onset).
struct Outcome {
    interrupted: bool,
    onset_to_cancel: Option<Duration>,
    /// The `turn.overlap` verdict: outcome, words heard and length.
    verdict: Option<String>,
}

/// Asks for the story, says `phrase` one second into its audio, and watches what happens
/// for 3 s after the phrase ended; then cancels whatever is left.
async fn trial(addr: std::net::SocketAddr, phrase: &str, (voice, wpm): &(String, u32)) -> Outcome {
    // turn_events: the verdict comes with the words the transcriber heard.
    let url = format!("ws://{addr}/v1/realtime?model=cascade&turn_events=1");
    let mut session = LiveSession::connect(&url).await.expect("connects");
    for event in [
        json!({"type":"session.update","session":{"type":"realtime",
            "audio":{"input":{"turn_detection":{"type":"semantic_vad","eagerness":"medium"}}}}}),
        json!({"type":"conversation.item.create","item":{"type":"message",
            "role":"user","content":[{"type":"input_text","text":"Tell me a story."}]}}),
        json!({"type":"response.create"}),
    ] {
        session.send(event).await.expect("sends");
    }
    session
        .events_until(Duration::from_secs(15), |_, v| {
            v["type"] == "response.output_audio.delta"
        })
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The phrase, where its voice starts, then silence; appended in real time.
    let mut audio = silence(0.1);
    let spoken = espeak_as(voice, *wpm, phrase);
    let lead = spoken.iter().position(|s| s.abs() > 0.01).unwrap_or(0);
    audio.extend(&spoken);
    audio.extend(silence(3.0));
    let mut outcome = Outcome {
        interrupted: false,
        onset_to_cancel: None,
        verdict: None,
    };
    let mut events = Vec::new();
    let started = session
        .append_live(&audio, |at, v| events.push((at, v.clone())))
        .await
        .expect("appends");
    let onset = started + Duration::from_secs_f64((2_400 + lead) as f64 / 24_000.0);
    // The first verdict and the first cancel are the phrase's over the story: when the turn
    // model ends a phrase at a pause inside it ("Wait, … what did you say?"), its first
    // part is a turn of its own, answered, and the rest interrupts that answer in turn.
    for (at, v) in events {
        if v["type"] == "turn.overlap" && outcome.verdict.is_none() {
            outcome.verdict = Some(format!(
                "{} after {} ms, heard {}",
                v["outcome"].as_str().unwrap_or("?"),
                v["duration_ms"],
                v["transcript"]
            ));
        }
        if v["type"] == "response.done"
            && v["response"]["status_details"]["reason"] == "turn_detected"
            && outcome.onset_to_cancel.is_none()
        {
            outcome.interrupted = true;
            outcome.onset_to_cancel = Some(at.saturating_duration_since(onset));
        }
    }
    let _ = session.send(json!({"type":"response.cancel"})).await;
    session.close().await;
    outcome
}

/// `--models DIR`, `--rounds N`, `--voices VOICE:WPM,…` (one a round, in turn).
fn main_args() -> (std::path::PathBuf, usize, Vec<(String, u32)>) {
    let mut args = std::env::args().skip(1);
    let (mut models, mut rounds, mut voices) = (None, 4, VOICES.to_string());
    while let Some(flag) = args.next() {
        let value = args.next().expect("a value");
        match flag.as_str() {
            "--models" => models = Some(value.into()),
            "--rounds" => rounds = value.parse().expect("--rounds N"),
            "--voices" => voices = value,
            other => panic!("unknown flag {other}"),
        }
    }
    let voices = voices
        .split(',')
        .map(|v| {
            let (voice, wpm) = v.split_once(':').expect("--voices VOICE:WPM,…");
            (voice.to_string(), wpm.parse().expect("words a minute"))
        })
        .collect();
    (
        models.unwrap_or_else(duet_client::speech::models_dir),
        rounds,
        voices,
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (models, rounds, voices) = main_args();
    let llm = ScriptedLlm::start(Vec::new()).await;
    *llm.default_reply.lock().unwrap() = Some(story());
    let addr = cascade::start(&models, &llm.url).await;
    let (mut kept, mut bc_total) = (0, 0);
    let (mut cancelled, mut int_total, mut times) = (0, 0, Vec::new());
    for round in 0..rounds {
        let voice = &voices[round % voices.len()];
        println!("round {round}: espeak-ng -v {} -s {}", voice.0, voice.1);
        for phrase in BACKCHANNELS {
            let o = trial(addr, phrase, voice).await;
            bc_total += 1;
            kept += usize::from(!o.interrupted);
            println!(
                "backchannel {phrase:?}: {} ({})",
                if o.interrupted { "INTERRUPTED" } else { "kept" },
                o.verdict.as_deref().unwrap_or("no verdict")
            );
        }
        for phrase in INTERRUPTIONS {
            let o = trial(addr, phrase, voice).await;
            int_total += 1;
            cancelled += usize::from(o.interrupted);
            let ms = o.onset_to_cancel.map(|d| d.as_millis());
            println!(
                "interruption {phrase:?}: cancelled {} (onset → cancel {ms:?} ms; {})",
                o.interrupted,
                o.verdict.as_deref().unwrap_or("no verdict")
            );
            times.extend(o.onset_to_cancel);
        }
    }
    times.sort();
    let q = |f: f64| {
        times
            .get(((times.len().max(1) - 1) as f64 * f).round() as usize)
            .map_or(0, |d| d.as_millis())
    };
    println!();
    println!(
        "backchannels kept: {kept}/{bc_total} ({:.0} %); interruptions that cancelled: {cancelled}/{int_total} ({:.0} %); onset → cancel p50 {} ms, p90 {} ms, max {} ms",
        100.0 * kept as f64 / bc_total as f64,
        100.0 * cancelled as f64 / int_total as f64,
        q(0.5),
        q(0.9),
        q(1.0)
    );
}
