//! End of turn per mode on the generated turn-taking set (`duet_client::turn_set`: espeak-ng
//! voices and speeds; finished sentences, and unfinished ones broken by a hesitation pause,
//! bare, with ", um," or ", uh,", or with the last word drawn out), spoken in real time
//! over WebSocket to `--model cascade` (the real Silero VAD, Smart Turn v3.2, Whisper tiny.en and Piper; a scripted LLM on loopback), one
//! session per utterance, several at once. For each mode (`server_vad` 500 ms,
//! `semantic_vad` high / medium / low) it prints the false cut-off rate on the hesitations
//! per pause length (the first `speech_stopped` came before the sentence resumed) and the
//! end-of-turn latency on the finished sentences: the voice's end → `committed` arriving,
//! p50 / p90; at the end, the server's own record of the turn model's runs
//! (`duet_turn_batch_seconds`, `duet_turn_pause_seconds`, `duet_turn_wait_seconds`).
//! `--trace 1` prints, for each finished sentence, where the detector dated the pause, the
//! score and the decision (`turn.scored`) and when `committed` came, counted from the
//! voice's end.
//!
//! ```sh
//! scripts/install-models /tmp/duet-models
//! cargo run --release --example turn_end_bench -- --models /tmp/duet-models \
//!     [--parallel 4] [--pauses 600,800,1000] [--voices 2] [--modes server_vad,high,medium,low]
//!     [--hesitations bare,um,uh,drawn-out] [--trace 1]
//! ```

use std::time::{Duration, Instant};

use duet_client::live::LiveSession;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use duet_client::speech::silence;
use duet_client::turn_set::{clips, Clip, Hesitation, VOICES};
use futures_util::StreamExt;
use serde_json::{json, Value};

#[path = "support/cascade.rs"]
mod cascade;

struct Args {
    models: Option<std::path::PathBuf>,
    parallel: usize,
    pauses: Vec<u32>,
    voices: usize,
    modes: Vec<String>,
    hesitations: Vec<Hesitation>,
    /// Print where each finished sentence's time went (`--trace 1`).
    trace: bool,
}

fn args() -> Args {
    let mut a = Args {
        models: None,
        parallel: 4,
        pauses: vec![600, 800, 1000],
        voices: 2,
        modes: ["server_vad", "high", "medium", "low"]
            .map(String::from)
            .to_vec(),
        hesitations: vec![Hesitation::Bare, Hesitation::Um],
        trace: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().expect("a value");
        let list = || v.split(',').map(str::to_string).collect::<Vec<_>>();
        match flag.as_str() {
            "--models" => a.models = Some(v.clone().into()),
            "--parallel" => a.parallel = v.parse().expect("--parallel N"),
            "--pauses" => a.pauses = list().iter().map(|p| p.parse().expect("ms")).collect(),
            "--trace" => a.trace = v == "1",
            "--voices" => a.voices = v.parse().expect("--voices 1..4"),
            "--modes" => a.modes = list(),
            "--hesitations" => {
                a.hesitations = list()
                    .iter()
                    .map(|l| {
                        *Hesitation::ALL
                            .iter()
                            .find(|h| h.label() == l)
                            .expect("bare, um, uh or drawn-out")
                    })
                    .collect()
            }
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

/// A mode's `turn_detection` and the silence spoken after each utterance (its longest
/// pause and a margin).
fn mode(name: &str) -> (Value, f32) {
    match name {
        "server_vad" => (json!({"type":"server_vad","silence_duration_ms":500}), 1.5),
        "high" => (json!({"type":"semantic_vad","eagerness":"high"}), 2.6),
        "medium" => (json!({"type":"semantic_vad","eagerness":"medium"}), 3.6),
        "low" => (json!({"type":"semantic_vad","eagerness":"low"}), 5.6),
        other => panic!("unknown mode {other}"),
    }
}

/// What one utterance got.
struct Heard {
    /// `audio_end_ms` of every `speech_stopped`.
    stops: Vec<u64>,
    /// The voice's end → the first `committed` arriving.
    committed_after: Option<Duration>,
    /// `--trace`: one line on where the time went.
    trace: String,
}

async fn hear(addr: std::net::SocketAddr, turn_detection: &Value, tail: f32, clip: &Clip) -> Heard {
    let url = format!("ws://{addr}/v1/realtime?model=cascade&turn_events=1");
    let mut s = LiveSession::connect(&url).await.expect("connects");
    let update = json!({"type":"session.update","session":{"type":"realtime",
        "audio":{"input":{"turn_detection":turn_detection}}}});
    s.send(update).await.expect("sends");
    s.events_until(Duration::from_secs(5), |_, v| {
        v["type"] == "session.updated"
    })
    .await;
    let mut audio = clip.audio.clone();
    audio.extend(silence(tail));
    let (mut stops, mut committed) = (Vec::new(), None);
    let mut marks: Vec<(Instant, String)> = Vec::new();
    let mut on = |at: Instant, v: &Value| {
        match v["type"].as_str() {
            Some("turn.scored") => marks.push((
                at,
                format!(
                    "scored(pause at {} ms, p {:.2}, {} after {} ms)",
                    v["audio_end_ms"],
                    v["probability"].as_f64().unwrap_or(f64::NAN),
                    v["decision"].as_str().unwrap_or("?"),
                    v["end_after_ms"]
                ),
            )),
            Some("input_audio_buffer.speech_stopped") => {
                marks.push((at, format!("stopped(at {} ms)", v["audio_end_ms"])));
                stops.extend(v["audio_end_ms"].as_u64());
            }
            Some("input_audio_buffer.committed") => {
                committed.get_or_insert(at);
            }
            _ => {}
        }
        false
    };
    let started = s
        .append_live(&audio, |at, v| {
            on(at, v);
        })
        .await
        .expect("appends");
    s.events_until(Duration::from_millis(500), &mut on).await;
    s.close().await;
    let voice_end = started + Duration::from_millis(clip.voice_end_ms());
    let since = |at: Instant| {
        at.checked_duration_since(voice_end).map_or_else(
            || -(voice_end.duration_since(at).as_millis() as i64),
            |d| d.as_millis() as i64,
        )
    };
    let mut trace = format!("voice end {} ms:", clip.voice_end_ms());
    for (at, what) in &marks {
        trace.push_str(&format!(" {what} +{};", since(*at)));
    }
    Heard {
        stops,
        committed_after: committed.map(|at| at.saturating_duration_since(voice_end)),
        trace,
    }
}

fn quantile(sorted: &[u128], q: f64) -> String {
    if sorted.is_empty() {
        return "–".into();
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize].to_string()
}

/// One table row for `name`, and the utterances it got wrong.
fn row(name: &str, set: &[Clip], heard: &[Heard], pauses: &[u32]) -> (String, Vec<String>) {
    let mut wrong = Vec::new();
    let mut latency: Vec<u128> = Vec::new();
    let mut split = 0;
    let mut finished = 0;
    for (clip, h) in set.iter().zip(heard) {
        if clip.resumes_at.is_none() {
            finished += 1;
            latency.extend(h.committed_after.map(|d| d.as_millis()));
            if h.stops.len() > 1 {
                split += 1;
                wrong.push(format!("cut in two: {:?} {:?}", clip.text, h.stops));
            }
        }
    }
    latency.sort_unstable();
    let mut cells = vec![
        name.to_string(),
        format!("{} / {}", quantile(&latency, 0.5), quantile(&latency, 0.9)),
        format!("{split} of {finished}"),
    ];
    for &pause in pauses {
        let mut per_kind = Vec::new();
        let (mut cut_all, mut of_all) = (0, 0);
        for kind in Hesitation::ALL {
            let (mut cut, mut of) = (0, 0);
            for (clip, h) in set.iter().zip(heard) {
                if clip.hesitation != Some(kind) || clip.pause_ms != pause {
                    continue;
                }
                let resumes = clip.resumes_at_ms().unwrap_or(u64::MAX);
                of += 1;
                if h.stops.first().is_some_and(|&s| s < resumes) {
                    cut += 1;
                    wrong.push(format!("cut off: {:?} at {:?} ms", clip.text, h.stops));
                }
            }
            if of > 0 {
                per_kind.push(format!("{} {cut}/{of}", kind.label()));
            }
            (cut_all, of_all) = (cut_all + cut, of_all + of);
        }
        cells.push(format!(
            "{:.0} % ({})",
            100.0 * cut_all as f64 / of_all.max(1) as f64,
            per_kind.join(" · ")
        ));
    }
    (format!("| {} |", cells.join(" | ")), wrong)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let voices: Vec<(&str, u32)> = match a.voices {
        1 => vec![VOICES[0]],
        2 => vec![VOICES[0], VOICES[3]],
        _ => VOICES.to_vec(),
    };
    let set = clips(&voices, &a.pauses, &a.hesitations);
    let llm = ScriptedLlm::start(Vec::new()).await;
    *llm.default_reply.lock().unwrap() = Some(Reply::text(&["Okay."]));
    let models = a
        .models
        .clone()
        .unwrap_or_else(duet_client::speech::models_dir);
    let addr = cascade::start(&models, &llm.url).await;
    println!(
        "{} utterances ({} voices), {} at once, pauses {:?} ms",
        set.len(),
        voices.len(),
        a.parallel,
        a.pauses
    );
    let pauses: Vec<String> = a
        .pauses
        .iter()
        .map(|p| format!("cut off at {p} ms"))
        .collect();
    let header = format!(
        "| mode | finished: voice end → committed p50 / p90 ms | finished cut in two | {} |",
        pauses.join(" | ")
    );
    let mut rows = Vec::new();
    for name in &a.modes {
        let (td, tail) = mode(name);
        let t0 = Instant::now();
        let heard: Vec<Heard> = futures_util::stream::iter(set.iter())
            .map(|clip| hear(addr, &td, tail, clip))
            .buffered(a.parallel)
            .collect()
            .await;
        let (line, wrong) = row(name, &set, &heard, &a.pauses);
        if a.trace {
            for (clip, h) in set.iter().zip(&heard) {
                if clip.resumes_at.is_none() {
                    let after = h.committed_after.map(|d| d.as_millis());
                    println!("  {:?}: {} committed +{after:?}", clip.text, h.trace);
                }
            }
        }
        println!("{name}: {:.0} s", t0.elapsed().as_secs_f64());
        for w in &wrong {
            println!("  {w}");
        }
        rows.push(line);
    }
    // What scoring cost on these busy cores: the server's own record of the turn loop's runs.
    let metrics = duet_client::http::request(addr, "GET", "/metrics", &[], "")
        .await
        .expect("metrics");
    let text = &metrics.body;
    for (name, what) in [
        ("duet_turn_batch", "runs"),
        ("duet_turn_pause", "pauses, the model's time per pause"),
        ("duet_turn_wait", "pauses, handed over → score back"),
    ] {
        let q = |q: &str| {
            let key = format!("{name}_exact_seconds{{quantile=\"{q}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(key.as_str()))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map_or("–".into(), |s| format!("{:.1}", s * 1e3))
        };
        let key = format!("{name}_exact_seconds_count ");
        let count = text
            .lines()
            .find_map(|l| l.strip_prefix(key.as_str()))
            .unwrap_or("0");
        println!(
            "Smart Turn, {count} {what} ({name}_seconds): p50 {} / p90 {} / p99 {} / max {} ms",
            q("0.5"),
            q("0.9"),
            q("0.99"),
            q("1")
        );
    }
    println!();
    println!("{header}");
    println!("|{}", "---|".repeat(3 + a.pauses.len()));
    for r in rows {
        println!("{r}");
    }
}
