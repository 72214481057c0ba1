//! Silero VAD cost: `cargo bench -p duet-models --bench silero`.
//!
//! Random weights of the real shapes (the cost does not depend on the values), so no model
//! file is needed. `forward/bN` runs one 512-sample (32 ms at 16 kHz) chunk of N streams;
//! after the criterion runs, a summary prints the cost per session-chunk and per session
//! per 20 ms of audio (target: under 50 µs per session per 20 ms). `detector_push_20ms`
//! is one 20 ms frame (480 samples at 24 kHz) into a `SileroDetector`, resampling
//! included (a chunk completes on about 5 frames in 8).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use duet_models::silero::{SileroDetector, SileroStream, SileroVad, CHUNK_SAMPLES};

const BATCHES: [usize; 3] = [1, 16, 64];

fn audio(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let t = i as f32 / 16_000.0;
            0.1 * (2.0 * std::f32::consts::PI * (150.0 + 10.0 * seed as f32) * t).sin()
                + 0.02 * ((i * 7919 + seed * 104_729) % 1000) as f32 / 1000.0
        })
        .collect()
}

struct Batch {
    streams: Vec<SileroStream>,
    pcm: Vec<Vec<f32>>,
}

impl Batch {
    fn new(vad: &SileroVad, n: usize) -> Batch {
        Batch {
            streams: (0..n).map(|_| vad.stream()).collect(),
            pcm: (0..n).map(|i| audio(CHUNK_SAMPLES, i)).collect(),
        }
    }

    fn step(&mut self, vad: &SileroVad, out: &mut Vec<f32>) {
        let chunks: Vec<&[f32]> = self.pcm.iter().map(Vec::as_slice).collect();
        let mut refs: Vec<&mut SileroStream> = self.streams.iter_mut().collect();
        out.clear();
        vad.forward_into(&mut refs, &chunks, out).expect("forward");
    }
}

fn forward(c: &mut Criterion) {
    let vad = SileroVad::random(1);
    let mut group = c.benchmark_group("forward");
    let mut out = Vec::new();
    for n in BATCHES {
        let mut batch = Batch::new(&vad, n);
        group.bench_function(format!("b{n}"), |b| {
            b.iter(|| batch.step(black_box(&vad), &mut out))
        });
    }
    group.finish();
}

fn detector(c: &mut Criterion) {
    let vad = SileroVad::random(1);
    let mut det = SileroDetector::new(vad).expect("detector");
    let frame: Vec<f32> = audio(480, 3);
    let mut out = Vec::new();
    c.bench_function("detector_push_20ms", |b| {
        b.iter(|| {
            out.clear();
            det.push(black_box(&frame), &mut out).expect("push")
        })
    });
}

/// Prints per-session figures from a plain timing loop.
fn summary(_: &mut Criterion) {
    let vad = SileroVad::random(1);
    let mut out = Vec::new();
    println!("\nsilero summary (per session; a chunk is 32 ms, target < 50 µs per 20 ms):");
    for n in BATCHES {
        let mut batch = Batch::new(&vad, n);
        for _ in 0..20 {
            batch.step(&vad, &mut out);
        }
        let iters = (4000 / n).max(50);
        let start = Instant::now();
        for _ in 0..iters {
            batch.step(&vad, &mut out);
        }
        let per_chunk = start.elapsed().as_secs_f64() * 1e6 / (iters * n) as f64;
        println!(
            "  batch {n:>2}: {per_chunk:7.1} µs per session-chunk, {:6.1} µs per session-20ms",
            per_chunk * 20.0 / 32.0
        );
    }
    let mut det = SileroDetector::new(vad).expect("detector");
    let frame = audio(480, 3);
    let mut chunks = Vec::new();
    let iters = 4000;
    let start = Instant::now();
    for _ in 0..iters {
        det.push(&frame, &mut chunks).expect("push");
        chunks.clear();
    }
    let per_frame = start.elapsed().as_secs_f64() * 1e6 / f64::from(iters);
    println!("  detector: {per_frame:7.1} µs per 20 ms frame pushed (one session)");
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = forward, detector, summary
}
criterion_main!(benches);
