//! What each signal of `semantic_vad`'s judge contributes, on generated speech: espeak-ng
//! renderings (two voices, two speeds) of finished sentences, bare unfinished prefixes, and
//! the prefixes with a hesitation (", um"), each followed by the candidate pause. For each
//! rendering Smart Turn scores the turn (the acoustic signal) and Whisper tiny.en
//! transcribes it (the words signal, as the speculative start hears them); the judge's
//! policy (`duet::session::turn::decide`, `medium`) then says whether the turn ends after a
//! short pause or waits for the maximum, with each signal alone and both together.
//!
//!   cargo run --example turn_eval -- DIR        (DIR made by scripts/install-models)
//!
//! Needs the `espeak-ng` program. Prints a table (docs/benchmarks.md "Turn-taking").

use std::path::PathBuf;
use std::process::Command;

use duet::session::turn::{decide, unfinished, Preset, Score};
use duet_client::speech::{parse_wav, resample_linear, silence};
use duet_models::smart_turn::{SmartTurn, RATE};
use duet_models::{TranscribeInput, TranscribeOutput};

const FINISHED: &[&str] = &[
    "Tell me a story.",
    "What time is it?",
    "Book a table for four people.",
    "Can you help me with my order?",
    "Thanks, that's all.",
    "Please call me back tomorrow morning.",
    "How is the weather in Paris?",
    "Set an alarm for seven.",
    "Where is the nearest station?",
    "I would like to book a table for four people tonight.",
];
const PREFIXES: &[&str] = &[
    "I would like to book a table for",
    "So the problem with my order is that",
    "Could you please remind me to",
    "I need a room with",
    "My name is John and",
    "The thing I wanted to ask about is the",
];
const VOICES: &[(&str, u32)] = &[
    ("en-us", 150),
    ("en-us", 175),
    ("en-gb", 150),
    ("en-gb", 175),
];

/// `text` spoken by espeak-ng with `voice` at `wpm`, at 24 kHz.
fn speak(text: &str, (voice, wpm): (&str, u32)) -> Vec<f32> {
    let path = std::env::temp_dir().join(format!("duet-turn-eval-{}.wav", std::process::id()));
    let ok = Command::new("espeak-ng")
        .args(["-v", voice, "-s", &wpm.to_string(), "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "espeak-ng did not run");
    let (rate, pcm) = parse_wav(&std::fs::read(&path).expect("wav")).expect("PCM16");
    let _ = std::fs::remove_file(&path);
    resample_linear(&pcm, rate, 24_000)
}

/// A verdict: true when the turn ends after a short pause (not the maximum).
fn ends_early(preset: &Preset, p: Option<f32>, words: Option<&str>) -> bool {
    match (p, words) {
        (Some(p), w) => {
            let open = w.is_some_and(unfinished);
            decide(preset, Score::Complete(p), open, preset.max_pause_ms - 1).is_some()
        }
        // Words alone: a turn whose words do not leave a sentence open ends.
        (None, Some(w)) => !unfinished(w),
        (None, None) => false,
    }
}

struct Case {
    class: usize,
    score: f32,
    words: String,
}

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).expect("usage: turn_eval DIR"));
    let mut turn = SmartTurn::load(&dir.join("smart-turn-v3.2")).expect("the turn model");
    let device = duet_models::moshi::DeviceSpec::parse("cpu").expect("cpu");
    let mut stt = duet_models::load_transcriber(&dir.join("whisper-tiny.en"), &device, Some(1))
        .expect("whisper-tiny.en");
    stt.warmup().expect("warmup");
    let stream = stt.open_stream().expect("stream");
    let hesitating: Vec<String> = PREFIXES.iter().map(|p| format!("{p}, um,")).collect();
    let classes: [Vec<&str>; 3] = [
        FINISHED.to_vec(),
        PREFIXES.to_vec(),
        hesitating.iter().map(String::as_str).collect(),
    ];
    let mut cases = Vec::new();
    for (class, texts) in classes.iter().enumerate() {
        for text in texts {
            for &voice in VOICES {
                let mut pcm = silence(0.3);
                pcm.extend(speak(text, voice));
                pcm.extend(silence(0.16)); // the candidate pause
                let at16k = resample_linear(&pcm, 24_000, RATE as u32);
                let score = turn.score(&[&at16k]).expect("score")[0];
                let mut out = Vec::new();
                let input = TranscribeInput {
                    stream,
                    pcm: &pcm,
                    end: true,
                    logprobs: false,
                };
                stt.step(&[input], &mut out);
                let words = match out.pop() {
                    Some(Ok(TranscribeOutput::Completed { text, .. })) => text,
                    _ => String::new(),
                };
                cases.push(Case {
                    class,
                    score,
                    words,
                });
            }
        }
    }
    let preset = Preset::of("medium");
    println!("{} renderings; policy `medium` ({preset:?})", cases.len());
    println!("| signal | finished: ended after a short pause | unfinished: cut off | hesitating: cut off |");
    println!("|---|---|---|---|");
    let signals: [(&str, bool, bool); 3] = [
        ("Smart Turn alone", true, false),
        ("words alone (Whisper tiny.en)", false, true),
        ("Smart Turn, words veto (Duet)", true, true),
    ];
    for (name, acoustic, words) in signals {
        let rate = |class: usize| {
            let of: Vec<&Case> = cases.iter().filter(|c| c.class == class).collect();
            let early = of
                .iter()
                .filter(|c| {
                    ends_early(
                        &preset,
                        acoustic.then_some(c.score),
                        words.then_some(c.words.as_str()),
                    )
                })
                .count();
            format!(
                "{early} of {} ({:.0} %)",
                of.len(),
                100.0 * early as f64 / of.len() as f64
            )
        };
        println!("| {name} | {} | {} | {} |", rate(0), rate(1), rate(2));
    }
    for c in cases
        .iter()
        .filter(|c| c.class > 0 && c.score >= preset.confident)
    {
        println!("  cut by the score: {:.2} {:?}", c.score, c.words);
    }
}
