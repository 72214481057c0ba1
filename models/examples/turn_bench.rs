//! Smart Turn's cost per scored pause on this machine, and its score for WAV files.
//!
//!   cargo run --release -p duet-models --example turn_bench -- DIR/smart-turn-v3.2 [a.wav …]
//!
//! Prints the milliseconds a pause costs (features and model), alone and in batches of 4 and
//! 16 (several sessions' pauses scored together), then each WAV's probability that the turn
//! is complete (16 kHz mono PCM16; other rates are resampled linearly).

use std::path::Path;
use std::time::Instant;

use duet_models::smart_turn::{Features, SmartTurn, RATE};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = args
        .first()
        .expect("usage: turn_bench DIR/smart-turn-v3.2 [a.wav …]");
    let mut model = SmartTurn::load(Path::new(dir)).expect("the turn model");
    let speech: Vec<f32> = (0..6 * RATE)
        .map(|i| ((i as f32 * 0.013).sin() * (i as f32 * 0.0007).sin()) * 0.3)
        .collect();
    let features = Features::new();
    let mut out = Vec::new();
    let runs = 20;
    let t = Instant::now();
    for _ in 0..runs {
        features.compute(&speech, &mut out);
    }
    let feature_ms = t.elapsed().as_secs_f64() * 1e3 / runs as f64;
    println!("features: {feature_ms:.1} ms a pause");
    model.score(&[&speech]).expect("warm-up");
    for batch in [1usize, 4, 16] {
        let turns: Vec<&[f32]> = (0..batch).map(|_| speech.as_slice()).collect();
        let t = Instant::now();
        let rounds = (32 / batch).max(2);
        for _ in 0..rounds {
            model.score(&turns).expect("score");
        }
        let ms = t.elapsed().as_secs_f64() * 1e3 / (rounds * batch) as f64;
        println!("batch {batch:2}: {ms:.1} ms a pause (features and model)");
    }
    for wav in &args[1..] {
        let bytes = std::fs::read(wav).expect("a WAV file");
        let (rate, pcm) = duet_client::speech::parse_wav(&bytes).expect("mono PCM16");
        let pcm = duet_client::speech::resample_linear(&pcm, rate, RATE as u32);
        let p = model.score(&[&pcm]).expect("score")[0];
        println!("{wav}: {p:.4}");
    }
}
