//! Smart Turn's cost per scored pause on this machine, and its score for WAV files.
//!
//!   cargo run --release -p duet-models --example turn_bench -- DIR/smart-turn-v3.2 [a.wav …]
//!
//! Prints the milliseconds a pause costs (features and model), alone and in batches of 4 and
//! 16 (several sessions' pauses scored together); the latency of one pause scored alone over
//! 200 runs, p50 / p90 / p99 / max, on a quiet machine, with one thread spinning beside it
//! and with one spinning on every core (the rest of a busy server: the media thread, the
//! other sessions, the LLM); then each WAV's
//! probability that the turn is complete (16 kHz mono PCM16; other rates are resampled
//! linearly).

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
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for busy in [0, 1, cores] {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spinners: Vec<_> = (0..busy)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 1.0f64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        for _ in 0..10_000 {
                            x = (x * 1.000_001).sin() + 1.0;
                        }
                    }
                    x
                })
            })
            .collect();
        let mut ms: Vec<f64> = (0..200)
            .map(|_| {
                let t = Instant::now();
                model.score(&[&speech]).expect("score");
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for s in spinners {
            let _ = s.join();
        }
        ms.sort_by(f64::total_cmp);
        let q = |f: f64| ms[((ms.len() - 1) as f64 * f).round() as usize];
        println!(
            "one pause, {busy} of {cores} cores spinning beside it: p50 {:.1} ms, p90 {:.1}, \
             p99 {:.1}, max {:.1} (200 runs)",
            q(0.5),
            q(0.9),
            q(0.99),
            q(1.0)
        );
    }
    for wav in &args[1..] {
        let bytes = std::fs::read(wav).expect("a WAV file");
        let (rate, pcm) = duet_client::speech::parse_wav(&bytes).expect("mono PCM16");
        let pcm = duet_client::speech::resample_linear(&pcm, rate, RATE as u32);
        let p = model.score(&[&pcm]).expect("score")[0];
        println!("{wav}: {p:.4}");
    }
}
