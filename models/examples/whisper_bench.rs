//! Whisper latency per utterance on this machine: the time from an utterance's end (the
//! `end` input of a committed item) to its `Completed` transcript, through the `Transcriber`
//! trait, for espeak-ng sentences; with the utterance-length encoder window (the default)
//! and the full 30 s one. `--model whisper-base` (the multilingual one) adds French, Spanish
//! and German sentences (espeak-ng's voices), the language given, each language its own row
//! with the default window. Needs a directory from `scripts/install-models DIR`.
//!
//! ```text
//! cargo run --release -p duet-models --example whisper_bench -- DIR [--rounds 3] [--model whisper-base]
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use duet_client::speech::{
    espeak, espeak_voice, silence, word_errors, MULTILINGUAL_SENTENCES, SENTENCES,
};
use duet_models::whisper::{EncoderWindow, WhisperTranscriber};
use duet_models::{TranscribeInput, TranscribeOutput, Transcriber};

fn quantile(sorted: &[Duration], q: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// Transcribes each (sentence, audio) `rounds` times on `stream`: latencies, the real-time
/// factor and the word error rate.
fn run(
    t: &mut WhisperTranscriber,
    stream: duet_models::StreamId,
    set: &[(&str, Vec<f32>)],
    rounds: usize,
) -> (Vec<Duration>, f64, f64) {
    let (mut latencies, mut audio_secs, mut busy) = (Vec::new(), 0.0, Duration::ZERO);
    let (mut errors, mut words) = (0, 0);
    for _ in 0..rounds {
        for (sentence, pcm) in set {
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
    latencies.sort();
    let wer = 100.0 * errors as f64 / words as f64;
    (latencies, busy.as_secs_f64() / audio_secs, wer)
}

fn row(what: &str, (latencies, rtf, wer): (Vec<Duration>, f64, f64)) {
    println!(
        "| {what} | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms | {rtf:.3} | {wer:.1} % |",
        quantile(&latencies, 0.5),
        quantile(&latencies, 0.9),
        quantile(&latencies, 0.99),
        quantile(&latencies, 1.0),
    );
}

fn padded(pcm: Vec<f32>) -> Vec<f32> {
    let mut out = silence(0.3);
    out.extend(pcm);
    out.extend(silence(0.3));
    out
}

fn main() {
    const USAGE: &str =
        "usage: whisper_bench DIR [--rounds N] [--model whisper-tiny.en|whisper-base]";
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect(USAGE));
    let (mut rounds, mut model) = (3usize, "whisper-tiny.en".to_string());
    while let Some(flag) = args.next() {
        let value = args.next().expect(USAGE);
        match flag.as_str() {
            "--rounds" => rounds = value.parse().expect(USAGE),
            "--model" => model = value,
            _ => panic!("{USAGE}"),
        }
    }
    let english: Vec<(&str, Vec<f32>)> =
        SENTENCES.iter().map(|s| (*s, padded(espeak(s)))).collect();
    let started = Instant::now();
    let mut t = WhisperTranscriber::load(&dir.join(&model), &candle::Device::Cpu, 1)
        .expect("load (run scripts/install-models DIR first)");
    let load = started.elapsed();
    let started = Instant::now();
    t.warmup().expect("warmup");
    println!(
        "{model} on the CPU: load {:.0} ms, warmup {:.0} ms; {} English sentences x {rounds} rounds",
        load.as_secs_f64() * 1000.0,
        started.elapsed().as_secs_f64() * 1000.0,
        SENTENCES.len()
    );
    println!("| set, encoder window | latency p50 | p90 | p99 | max | real-time factor | WER |");
    println!("|---|---|---|---|---|---|---|");
    let stream = t.open_stream().expect("stream");
    if model != "whisper-tiny.en" {
        t.set_language(stream, Some("en"));
    }
    for window in [EncoderWindow::Fit, EncoderWindow::Full] {
        t.set_window(window);
        row(
            &format!("English, {window:?}"),
            run(&mut t, stream, &english, rounds),
        );
    }
    t.set_window(EncoderWindow::Fit);
    if model != "whisper-tiny.en" {
        for code in ["fr", "es", "de"] {
            let set: Vec<(&str, Vec<f32>)> = MULTILINGUAL_SENTENCES
                .iter()
                .filter(|(c, _, _)| *c == code)
                .map(|(c, _, s)| (*s, padded(espeak_voice(c, s))))
                .collect();
            t.set_language(stream, Some(code));
            row(
                &format!("{code} (given), Fit"),
                run(&mut t, stream, &set, rounds),
            );
        }
    }
    t.close_stream(stream);
}
