//! Piper with the real voice (en_US-joe-medium, ONNX Runtime from the model directory):
//! sentences spoken by the voice are heard by Whisper tiny.en as their words (word error
//! rate at most 25 %), at a speed that makes streaming possible (printed: real-time factor).
//!
//! Needs `DUET_TEST_MODELS`, a directory made by `scripts/install-models DIR` (it holds
//! `piper-en_US-joe-medium/` and `whisper-tiny.en/`), and `espeak-ng` on the PATH:
//!
//! ```text
//! DUET_TEST_MODELS=/tmp/duet-models cargo test -p duet-models --test real_models piper_real:: -- --nocapture
//! ```
//!
//! Without them the test fails (it never passes silently).

use std::time::Instant;

use candle::Device;
use duet_client::speech::{models_dir, word_errors};
use duet_models::piper::PiperVoice;
use duet_models::whisper::WhisperTranscriber;
use duet_models::{transcribe_clip, MODEL_SAMPLE_RATE};

const SENTENCES: [&str; 4] = [
    "The quick brown fox jumps over the lazy dog.",
    "It is ten o'clock in the morning, and the sun is shining.",
    "Please open the door for me.",
    "Thank you very much for your help.",
];
const MAX_WER: f64 = 0.25;

#[test]
fn whisper_hears_what_the_piper_voice_says() {
    let dir = models_dir();
    let start = Instant::now();
    let mut voice = PiperVoice::load(
        &dir.join("piper-en_US-joe-medium"),
        Box::new(duet_client::speech::espeak_ipa),
    )
    .unwrap();
    println!(
        "{}: load {:.0} ms",
        voice.name(),
        start.elapsed().as_secs_f64() * 1e3
    );
    let mut whisper =
        WhisperTranscriber::load(&dir.join("whisper-tiny.en"), &Device::Cpu, 1).unwrap();
    let (mut errors, mut total, mut spoken, mut spent) = (0, 0, 0.0, 0.0);
    for sentence in SENTENCES {
        let start = Instant::now();
        let mut pcm = voice.speak(sentence, 1.0).unwrap();
        let took = start.elapsed().as_secs_f64();
        let secs = pcm.len() as f64 / f64::from(MODEL_SAMPLE_RATE);
        assert!((0.8..8.0).contains(&secs), "{sentence:?}: {secs} s");
        let peak = pcm.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        assert!((0.5..=1.0).contains(&peak), "peak {peak}");
        spoken += secs;
        spent += took;
        pcm.splice(0..0, vec![0.0; 7_200]);
        let heard = transcribe_clip(&mut whisper, &pcm).unwrap();
        let (e, n) = word_errors(sentence, &heard);
        errors += e;
        total += n;
        println!(
            "  {secs:4.2} s in {:4.0} ms  {e} errors  {sentence:?} -> {heard:?}",
            took * 1e3
        );
    }
    let wer = errors as f64 / total as f64;
    println!(
        "  WER {:.1} % ({errors}/{total}), real-time factor {:.3}",
        wer * 100.0,
        spent / spoken
    );
    assert!(wer <= MAX_WER, "WER {wer}");
    // Slower speech is longer.
    let normal = voice.speak("Please open the door.", 1.0).unwrap().len();
    let slow = voice.speak("Please open the door.", 0.5).unwrap().len();
    assert!(slow as f64 > normal as f64 * 1.5, "{slow} vs {normal}");
}
