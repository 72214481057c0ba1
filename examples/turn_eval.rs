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

use duet::session::turn::{decide, unfinished, Preset, Score, Words};
use duet_client::speech::{espeak_as, resample_linear, silence};
use duet_client::turn_set::{BROKEN, FINISHED, VOICES};
use duet_models::smart_turn::{SmartTurn, RATE};
use duet_models::{TranscribeInput, TranscribeOutput};

/// A verdict: true when the turn ends after a short pause (not the maximum).
fn ends_early(preset: &Preset, p: Option<f32>, words: Option<&str>) -> bool {
    match (p, words) {
        (Some(p), w) => {
            let words = w.map_or(Words::Absent, Words::of);
            decide(preset, Score::Complete(p), words, preset.max_pause_ms - 1).is_some()
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
    let prefixes: Vec<&str> = BROKEN.iter().map(|(head, _)| *head).collect();
    let hesitating: Vec<String> = prefixes.iter().map(|p| format!("{p}, um,")).collect();
    let classes: [Vec<&str>; 3] = [
        FINISHED.to_vec(),
        prefixes,
        hesitating.iter().map(String::as_str).collect(),
    ];
    let mut cases = Vec::new();
    for (class, texts) in classes.iter().enumerate() {
        for text in texts {
            for &(voice, wpm) in VOICES {
                let mut pcm = silence(0.3);
                pcm.extend(espeak_as(voice, wpm, text));
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
