//! Micro-benchmarks of the per-frame media work: `cargo bench -p duet-media`.
//! Each iteration is one 20 ms frame unless the name says otherwise.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use duet_media::{
    decode_ulaw, encode_ulaw, Adpcm, CallAudio, CallCodec, Denoiser, FrameGrid, JitterBuffer,
    JitterConfig, OpusDecoder, OpusEncoder, PlaybackQueue, SampleRing, StreamResampler, Vad,
    VadConfig,
};

fn tone(n: usize, rate: f32) -> Vec<f32> {
    (0..n)
        .map(|i| 0.2 * (2.0 * std::f32::consts::PI * 220.0 * i as f32 / rate).sin())
        .collect()
}

fn opus(c: &mut Criterion) {
    let pcm = tone(960, 48_000.0);
    let mut enc = OpusEncoder::new().expect("encoder");
    c.bench_function("opus_encode_20ms_48k", |b| {
        b.iter(|| enc.encode(black_box(&pcm)).expect("encode"))
    });
    let packet = enc.encode(&pcm).expect("encode");
    let mut dec = OpusDecoder::new().expect("decoder");
    let mut out = Vec::with_capacity(960);
    c.bench_function("opus_decode_20ms_48k", |b| {
        b.iter(|| {
            out.clear();
            dec.decode(black_box(&packet), &mut out).expect("decode")
        })
    });
    c.bench_function("opus_conceal_20ms", |b| {
        b.iter(|| {
            out.clear();
            dec.conceal(960, &mut out)
        })
    });
    // What a call runs: the codec at the session's 24 kHz (no resampler either way).
    let pcm24 = tone(480, 24_000.0);
    let mut enc24 = OpusEncoder::with_rate(24_000).expect("encoder");
    let mut packet24 = Vec::new();
    c.bench_function("opus_encode_20ms_24k", |b| {
        b.iter(|| {
            enc24
                .encode_into(black_box(&pcm24), &mut packet24)
                .expect("encode")
        })
    });
    let mut dec24 = OpusDecoder::with_rate(24_000).expect("decoder");
    c.bench_function("opus_decode_20ms_24k", |b| {
        b.iter(|| {
            out.clear();
            dec24
                .decode(black_box(&packet24), &mut out)
                .expect("decode")
        })
    });
}

/// The deadline path against the work ahead of it: one call's tick takes a frame encoded
/// ahead (`call_tick_next_frame_ready`) where the old tick encoded it
/// (`call_tick_encode_inline`); `call_prepare_encode_ahead` is the encode, now off the tick.
fn call_audio(c: &mut Criterion) {
    let chunk = tone(480, 24_000.0);
    let mut call = CallAudio::new(CallCodec::Opus).expect("call");
    c.bench_function("call_tick_next_frame_ready", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                call.play(1, &chunk);
                let t = Instant::now();
                black_box(call.next_frame().expect("frame").payload.len());
                total += t.elapsed();
            }
            total
        })
    });
    let mut inline = CallAudio::new(CallCodec::Opus).expect("call");
    c.bench_function("call_tick_encode_inline", |b| {
        b.iter(|| {
            // Audio but nothing encoded ahead: the tick encodes (the old deadline path).
            inline.clear();
            let _ = inline.play(1, &chunk[..479]);
            let f = inline.next_frame().expect("frame");
            black_box(f.payload.len())
        })
    });
    let mut ahead = CallAudio::new(CallCodec::Opus).expect("call");
    c.bench_function("call_prepare_encode_ahead", |b| {
        b.iter(|| {
            ahead.play(1, black_box(&chunk));
            black_box(ahead.next_frame().expect("frame").payload.len())
        })
    });
}

fn resample(c: &mut Criterion) {
    for (from, to) in [
        (48_000u32, 24_000u32),
        (24_000, 48_000),
        (8_000, 24_000),
        (24_000, 8_000),
    ] {
        let input = tone(from as usize / 50, from as f32);
        let mut r = StreamResampler::new(from, to).expect("resampler");
        let mut out = Vec::with_capacity(to as usize / 50 + 64);
        c.bench_function(&format!("resample_{from}_to_{to}_20ms"), |b| {
            b.iter(|| {
                out.clear();
                r.process(black_box(&input), &mut out)
            })
        });
    }
}

fn g711(c: &mut Criterion) {
    let pcm = tone(160, 8_000.0);
    c.bench_function("ulaw_encode_decode_20ms", |b| {
        b.iter(|| decode_ulaw(&encode_ulaw(black_box(&pcm))))
    });
}

/// Stored conversation audio: a 20 ms frame at 24 kHz into ADPCM and back.
fn adpcm(c: &mut Criterion) {
    let pcm = tone(480, 24_000.0);
    let mut stored = Adpcm::new();
    c.bench_function("adpcm_encode_20ms_24k", |b| {
        b.iter(|| {
            if stored.len() > 24_000 * 60 {
                stored = Adpcm::new();
            }
            stored.push_f32(black_box(&pcm))
        })
    });
    let mut one = Adpcm::new();
    one.push_f32(&pcm);
    c.bench_function("adpcm_decode_20ms_24k", |b| {
        b.iter(|| black_box(&one).to_i16())
    });
}

fn jitter(c: &mut Criterion) {
    let mut jb = JitterBuffer::new(JitterConfig::default());
    let mut seq = 0u64;
    let payload = vec![0u8; 100];
    c.bench_function("jitter_push_pop_reordered", |b| {
        b.iter(|| {
            // Pairs arrive swapped: n+1 before n.
            jb.push(seq + 1, payload.clone());
            jb.push(seq, payload.clone());
            seq += 2;
            black_box(jb.pop());
            black_box(jb.pop());
        })
    });
}

fn pacer(c: &mut Criterion) {
    let start = Instant::now();
    let mut grid = FrameGrid::new(start, Duration::from_millis(20));
    let mut now = start;
    c.bench_function("frame_grid_tick", |b| {
        b.iter(|| {
            now += Duration::from_millis(20);
            black_box(grid.tick(now))
        })
    });
}

fn playback(c: &mut Criterion) {
    let mut q = PlaybackQueue::new(960, 48_000 * 30);
    let audio = tone(960, 48_000.0);
    let (mut out, mut sent) = (Vec::with_capacity(960), Vec::new());
    c.bench_function("playback_push_pop_frame", |b| {
        b.iter(|| {
            q.push(1, black_box(&audio)).expect("room");
            q.pop_frame(&mut out, &mut sent)
        })
    });
}

fn vad(c: &mut Criterion) {
    let mut v = Vad::new(VadConfig::default(), 24_000);
    let frame = tone(480, 24_000.0);
    let mut events = Vec::new();
    c.bench_function("vad_push_20ms_24k", |b| {
        b.iter(|| {
            events.clear();
            v.push(black_box(&frame), &mut events)
        })
    });
}

/// `audio.input.noise_reduction`: RNNoise on one 20 ms frame of session audio (a tone in
/// noise, so the network runs: digital silence skips it).
fn denoise(c: &mut Criterion) {
    let mut d = Denoiser::new();
    let mut seed = 1u32;
    let frame: Vec<f32> = tone(480, 24_000.0)
        .into_iter()
        .map(|v| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            v + 0.01 * ((seed >> 8) as f32 / (1u32 << 23) as f32 - 1.0)
        })
        .collect();
    let mut out = Vec::with_capacity(480);
    c.bench_function("denoise_20ms_24k", |b| {
        b.iter(|| {
            out.clear();
            d.process(black_box(&frame), &mut out)
        })
    });
}

/// The `Vec` input buffer that [`SampleRing`] replaces: append, then drain
/// the oldest samples past `cap` from the front.
fn vec_drain_push(buf: &mut Vec<f32>, samples: &[f32], cap: usize) -> usize {
    buf.extend_from_slice(samples);
    let over = buf.len().saturating_sub(cap);
    buf.drain(..over);
    over
}

/// A session's input buffer while full (300 s at 24 kHz): one 20 ms push.
fn ring(c: &mut Criterion) {
    const FULL: usize = 300 * 24_000;
    let frame = tone(480, 24_000.0);
    let mut group = c.benchmark_group("ring");
    let mut ring = SampleRing::new(FULL);
    while ring.len() < FULL {
        ring.push(&frame);
    }
    group.bench_function("sample_ring_push_480_full_300s", |b| {
        b.iter(|| ring.push(black_box(&frame)))
    });
    drop(ring);
    let mut buf = vec![0.0f32; FULL];
    group.bench_function("vec_drain_push_480_full_300s", |b| {
        b.iter(|| vec_drain_push(&mut buf, black_box(&frame), FULL))
    });
    group.finish();
}

criterion_group!(
    benches, opus, call_audio, resample, g711, adpcm, jitter, pacer, playback, vad, denoise, ring
);
criterion_main!(benches);
