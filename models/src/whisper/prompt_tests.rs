//! Whisper's prompt: the previous text read before an utterance, and the decoder feeding
//! tokens whose logits are not read in one pass.

use candle::Device;
use rand::{Rng, SeedableRng};

use super::tests::{one, tiny_model_dir};
use super::*;
use crate::{TranscribeOutput, Transcriber};

#[test]
fn a_prompt_is_read_before_each_utterance_of_its_stream() {
    let (_root, out) = tiny_model_dir("prompt");
    let mut t = WhisperTranscriber::load(&out, &Device::Cpu, 2).unwrap();
    // No merges in the tiny vocabulary: " abc" is its letters (the space has no token).
    assert_eq!(t.prompt_tokens(" abc "), [0, 1, 2]);
    assert!(t.prompt_tokens("  ").is_empty());
    let long = "a".repeat(MAX_PREVIOUS + 50);
    assert_eq!(
        t.prompt_tokens(&long).len(),
        MAX_PREVIOUS,
        "its last tokens"
    );
    let noise: Vec<f32> = {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        (0..24_000).map(|_| rng.random_range(-0.3..0.3)).collect()
    };
    let heard = |t: &mut WhisperTranscriber| match one(t, 0, &noise, true, true).unwrap() {
        TranscribeOutput::Completed { logprobs, .. } => logprobs
            .iter()
            .map(|l| (l.token.clone(), l.logprob))
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(t.open_stream().unwrap(), 0);
    let plain = heard(&mut t);
    t.set_prompt(0, Some("abc"));
    let prompted = heard(&mut t);
    assert_ne!(plain, prompted, "the decoder read the prompt first");
    assert_eq!(heard(&mut t), prompted, "it stays for the next utterance");
    t.set_prompt(0, None);
    assert_eq!(heard(&mut t), plain, "and goes when taken away");
    // A vocabulary without <|startofprev|> is never prompted.
    t.specials.previous = None;
    assert!(t.prompt_tokens("abc").is_empty());
}

#[test]
fn tokens_fed_together_leave_the_decoder_as_one_at_a_time_does() {
    let (_root, out) = tiny_model_dir("feed");
    let t = WhisperTranscriber::load(&out, &Device::Cpu, 1).unwrap();
    let mel = t
        .mel
        .log_mel(&vec![0.1f32; 16_000], t.frames_for(16_000))
        .unwrap();
    let features = t.net.encoder.forward(&mel).unwrap();
    let decoder = &t.net.decoder;
    let prompt = [19, 0, 1, 2, 15];
    let mut one = decoder.start(&features).unwrap();
    for &tok in &prompt {
        decoder.step(&mut one, tok).unwrap();
    }
    let mut together = decoder.start(&features).unwrap();
    decoder.feed(&mut together, &prompt[..3]).unwrap();
    decoder.feed(&mut together, &prompt[3..]).unwrap();
    let a: Vec<f32> = decoder.step(&mut one, 16).unwrap().to_vec1().unwrap();
    let b: Vec<f32> = decoder.step(&mut together, 16).unwrap().to_vec1().unwrap();
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(diff < 1e-4, "logits differ by {diff}");
    assert!(
        decoder.feed(&mut together, &vec![0; 10_000]).is_err(),
        "past the positions"
    );
}
