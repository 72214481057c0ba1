//! Whisper tiny.en latency per utterance on this machine: the time from an utterance's end
//! (the `end` input of a committed item) to its `Completed` transcript, through the
//! `Transcriber` trait, for espeak-ng sentences; with the utterance-length encoder window
//! (the default) and the full 30 s one. Needs a directory from `scripts/install-models DIR`.
//!
//! ```text
//! cargo run --release -p duet-models --example whisper_bench -- DIR [--rounds 3]
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use duet_client::speech::{espeak, silence, word_errors, SENTENCES};
use duet_models::whisper::{EncoderWindow, WhisperTranscriber};
use duet_models::{TranscribeInput, TranscribeOutput, Transcriber};

fn quantile(sorted: &[Duration], q: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect("usage: whisper_bench DIR [--rounds N]"));
    let rounds: usize = match (args.next().as_deref(), args.next()) {
        (Some("--rounds"), Some(n)) => n.parse().expect("--rounds N"),
        _ => 3,
    };
    let utterances: Vec<Vec<f32>> = SENTENCES
        .iter()
        .map(|s| {
            let mut pcm = silence(0.3);
            pcm.extend(espeak(s));
            pcm.extend(silence(0.3));
            pcm
        })
        .collect();
    let started = Instant::now();
    let mut t = WhisperTranscriber::load(&dir.join("whisper-tiny.en"), &candle::Device::Cpu, 1)
        .expect("load (run scripts/install-models DIR first)");
    let load = started.elapsed();
    let started = Instant::now();
    t.warmup().expect("warmup");
    println!(
        "whisper-tiny.en on the CPU: load {:.0} ms, warmup {:.0} ms; {} sentences x {rounds} rounds",
        load.as_secs_f64() * 1000.0,
        started.elapsed().as_secs_f64() * 1000.0,
        SENTENCES.len()
    );
    println!("| window | latency p50 | p90 | max | real-time factor | WER |");
    println!("|---|---|---|---|---|---|");
    for window in [EncoderWindow::Fit, EncoderWindow::Full] {
        t.set_window(window);
        let stream = t.open_stream().expect("stream");
        let (mut latencies, mut audio_secs, mut busy) = (Vec::new(), 0.0, Duration::ZERO);
        let (mut errors, mut words) = (0, 0);
        for _ in 0..rounds {
            for (sentence, pcm) in SENTENCES.iter().zip(&utterances) {
                let mut out = Vec::new();
                let input = TranscribeInput {
                    stream,
                    pcm,
                    end: true,
                    logprobs: false,
                };
                let at = Instant::now();
                t.step(&[input], &mut out);
                let took = at.elapsed();
                let Some(Ok(TranscribeOutput::Completed {
                    text,
                    audio_seconds,
                    ..
                })) = out.pop()
                else {
                    panic!("no transcript for {sentence:?}");
                };
                let (e, n) = word_errors(sentence, &text);
                errors += e;
                words += n;
                latencies.push(took);
                busy += took;
                audio_secs += audio_seconds;
            }
        }
        t.close_stream(stream);
        latencies.sort();
        println!(
            "| {window:?} | {:.0} ms | {:.0} ms | {:.0} ms | {:.3} | {:.1} % |",
            quantile(&latencies, 0.5),
            quantile(&latencies, 0.9),
            quantile(&latencies, 1.0),
            busy.as_secs_f64() / audio_secs,
            100.0 * errors as f64 / words as f64
        );
    }
}
