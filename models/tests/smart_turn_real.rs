//! Smart Turn v3.2 with the real model (`smart-turn-v3.2-cpu.onnx` from pipecat-ai 1.14.0, on
//! the ONNX Runtime of the Piper voice's directory beside it): a finished question on
//! espeak-ng speech scores as finished, the same kind of sentence cut off with a hesitation
//! (", um") as unfinished, and several turns scored in one batch get the scores each gets
//! alone. The research note's measurements (turn-taking.md §2b) say why the unfinished case
//! carries a hesitation: on synthetic speech, bare unfinished prefixes often look finished
//! to the acoustic model.
//!
//! Needs `DUET_TEST_MODELS`, a directory made by `scripts/install-models DIR` (it holds
//! `smart-turn-v3.2/` and `piper-en_US-joe-medium/`), and `espeak-ng` on the PATH:
//!
//! ```text
//! DUET_TEST_MODELS=/tmp/duet-models cargo test -p duet-models --test real_models smart_turn_real:: -- --nocapture
//! ```
//!
//! Without them the test fails (it never passes silently).

use duet_client::speech::{espeak, models_dir, resample_linear, RATE};
use duet_models::smart_turn::{self, SmartTurn};

fn at_16k(text: &str) -> Vec<f32> {
    resample_linear(&espeak(text), RATE, smart_turn::RATE as u32)
}

#[test]
fn finished_and_hesitating_turns_score_apart() {
    let mut model = SmartTurn::load(&models_dir().join("smart-turn-v3.2")).expect("the model");
    let finished = at_16k("Can you tell me what time it is in London?");
    let hesitating = at_16k("I would like to book a table for, um");
    let alone: Vec<f32> = [&finished, &hesitating]
        .iter()
        .map(|t| model.score(&[t.as_slice()]).expect("score")[0])
        .collect();
    println!("finished {:.3}, hesitating {:.3}", alone[0], alone[1]);
    assert!(alone[0] > 0.6, "a finished question: {}", alone[0]);
    assert!(alone[1] < 0.2, "a hesitation: {}", alone[1]);
    let batch = model
        .score(&[&finished, &hesitating, &finished])
        .expect("batch");
    for (b, a) in batch.iter().zip(alone.iter().chain(&alone[..1])) {
        assert!((b - a).abs() < 1e-4, "batched {b} against alone {a}");
    }
    assert!(model.score(&[]).expect("nothing").is_empty());
}
