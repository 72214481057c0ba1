//! Whisper tiny.en with the real weights: five sentences spoken by espeak-ng, transcribed
//! through the `Transcriber` trait; word error rate at most 15 % and every sentence's key
//! words heard.
//!
//! Needs `DUET_TEST_MODELS`, a directory made by `scripts/install-models DIR` (it holds
//! `whisper-tiny.en/`), and `espeak-ng` on the PATH:
//!
//! ```text
//! scripts/install-models /tmp/duet-models
//! DUET_TEST_MODELS=/tmp/duet-models cargo test -p duet-models --test real_models whisper_real:: -- --nocapture
//! ```
//!
//! Without them the test fails (it never passes silently).

use std::time::{Duration, Instant};

use candle::Device;
use duet_client::speech::{espeak, models_dir, silence, word_errors, words};
use duet_models::whisper::{EncoderWindow, WhisperTranscriber};
use duet_models::{TranscribeInput, TranscribeOutput, Transcriber, TRANSCRIBE_SAMPLE_RATE};

/// (sentence, words that must be heard). Plain sentences espeak-ng's default voice says
/// clearly enough for tiny.en in either encoder window, with 0.2 to 0.5 s of silence around
/// (others, such as "The weather is nice today", it hears as "But whether is ice today").
const SENTENCES: [(&str, &[&str]); 5] = [
    ("Please open the door for me.", &["open", "door"]),
    (
        "We are going to the park this afternoon.",
        &["park", "afternoon"],
    ),
    ("Thank you very much for your help.", &["thank", "help"]),
    ("I need to buy some bread and milk.", &["bread", "milk"]),
    (
        "Turn off the lights when you leave the room.",
        &["lights", "room"],
    ),
];
const MAX_WER: f64 = 0.15;

/// `text` spoken by espeak-ng at 24 kHz, with 0.3 s of silence around it (as a VAD cuts).
fn speak(text: &str) -> Vec<f32> {
    let mut out = silence(0.3);
    out.extend(espeak(text));
    out.extend(silence(0.3));
    out
}

struct Run {
    wer: f64,
    missing: Vec<String>,
    worst_latency: Duration,
}

/// Transcribes every sentence as the transcription loop would: 20 ms pushes, then `end`.
fn run(t: &mut WhisperTranscriber, audio: &[Vec<f32>]) -> Run {
    let (mut errors, mut total) = (0, 0);
    let mut missing = Vec::new();
    let mut worst = Duration::ZERO;
    println!("window {:?}:", t.window());
    for ((sentence, keys), pcm) in SENTENCES.iter().zip(audio) {
        let stream = t.open_stream().unwrap();
        let mut out = Vec::new();
        for chunk in pcm.chunks(480) {
            out.clear();
            t.step(
                &[TranscribeInput {
                    stream,
                    pcm: chunk,
                    end: false,
                    logprobs: true,
                }],
                &mut out,
            );
            assert_eq!(out.pop().unwrap().unwrap(), TranscribeOutput::NotYet);
        }
        let start = Instant::now();
        out.clear();
        t.step(
            &[TranscribeInput {
                stream,
                pcm: &[],
                end: true,
                logprobs: true,
            }],
            &mut out,
        );
        let latency = start.elapsed();
        worst = worst.max(latency);
        t.close_stream(stream);
        let TranscribeOutput::Completed {
            text,
            logprobs,
            audio_seconds,
            ..
        } = out.pop().unwrap().unwrap()
        else {
            panic!("no completion")
        };
        let expected_seconds = pcm.len() as f64 / f64::from(TRANSCRIBE_SAMPLE_RATE);
        assert!((audio_seconds - expected_seconds).abs() < 1e-6);
        let joined: String = logprobs.iter().map(|l| l.token.as_str()).collect();
        assert_eq!(joined.trim(), text, "logprobs tokens spell the text");
        let heard = words(&text);
        let (e, n) = word_errors(sentence, &text);
        errors += e;
        total += n;
        for k in *keys {
            if !heard.iter().any(|w| w == k) {
                missing.push(format!("{k:?} in {text:?}"));
            }
        }
        println!(
            "  {audio_seconds:4.2} s  {:6.0} ms  {e} errors  {sentence:?} -> {text:?}",
            latency.as_secs_f64() * 1000.0
        );
    }
    let wer = errors as f64 / total as f64;
    println!(
        "  WER {:.1} % ({errors}/{total} words), slowest {:.0} ms",
        wer * 100.0,
        worst.as_secs_f64() * 1000.0
    );
    Run {
        wer,
        missing,
        worst_latency: worst,
    }
}

#[test]
fn whisper_tiny_en_transcribes_espeak_sentences() {
    let dir = models_dir().join("whisper-tiny.en");
    let audio: Vec<Vec<f32>> = SENTENCES.iter().map(|(s, _)| speak(s)).collect();

    let start = Instant::now();
    let mut t = WhisperTranscriber::load(&dir, &Device::Cpu, 4).unwrap();
    let load = start.elapsed();
    let start = Instant::now();
    t.warmup().unwrap();
    println!(
        "{}: load {:.0} ms, warmup {:.0} ms",
        t.info().name,
        load.as_secs_f64() * 1000.0,
        start.elapsed().as_secs_f64() * 1000.0
    );
    assert_eq!(t.info().name, "whisper-tiny.en");

    // Silence is empty text.
    let s = t.open_stream().unwrap();
    let mut out = Vec::new();
    t.step(
        &[TranscribeInput {
            stream: s,
            pcm: &vec![0.0; 24_000],
            end: true,
            logprobs: false,
        }],
        &mut out,
    );
    t.close_stream(s);
    match out.pop().unwrap().unwrap() {
        TranscribeOutput::Completed { text, .. } => assert_eq!(text, ""),
        other => panic!("{other:?}"),
    }

    let fit = run(&mut t, &audio);
    t.set_window(EncoderWindow::Full);
    let full = run(&mut t, &audio);
    println!(
        "default window (fit): WER {:.1} %, slowest {:.0} ms; full 30 s window: WER {:.1} %, \
         slowest {:.0} ms",
        fit.wer * 100.0,
        fit.worst_latency.as_secs_f64() * 1000.0,
        full.wer * 100.0,
        full.worst_latency.as_secs_f64() * 1000.0
    );
    assert!(
        fit.wer <= MAX_WER,
        "WER {:.1} % with the default window",
        fit.wer * 100.0
    );
    assert!(
        fit.missing.is_empty(),
        "key words not heard: {:?}",
        fit.missing
    );
}
