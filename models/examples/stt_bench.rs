//! Kyutai STT step benchmark: per-step time (p50/p99/max), real-time factor and memory for
//! N concurrent streams, every stream fed one 80 ms frame per step in one batch, as the
//! transcription loop does; then the cost of ending utterances (each end feeds the flush
//! silence inside its `step` call).
//!
//! CPU, tiny architecture written to a temporary directory and read back through the
//! production loader (no file needed):
//!   cargo run --release -p duet-models --example stt_bench -- --streams 1,16,64
//! A real release directory (`kyutai/stt-1b-en_fr-candle`; `--features cuda` for a GPU):
//!   stt_bench --model-dir DIR --device cuda --streams 1,16,64,128,256
//! Full-size stt-1b-en_fr with random weights made on the device (no file; bf16 on GPU):
//!   stt_bench --random-full-size --device cuda --streams 1,16,64,128,256,400
//!
//! Options: --streams LIST, --steps N (measured steps after 5 warm-up steps, default 40),
//! --device cpu|cuda|cuda:N, --model-dir DIR, --random-full-size, --context N (KV context
//! in steps; default the architecture's, 750 for the 1B).
//!
//! Real-time factor (RTF) = step time / 80 ms: under 1 keeps up with every stream live;
//! "streams at RTF 1" extrapolates N × 80 ms / step time.

use std::path::PathBuf;
use std::time::Instant;

mod common;
use common::{counts, gpu_column, kv_mib, or_exit, percentile, rss_mib};

use duet_models::kyutai_stt::{tiny, DeviceSpec, KyutaiStt, SttConfig, SttOptions, FRAME_SAMPLES};
use duet_models::{TranscribeInput, TranscribeOutput, Transcriber};

struct Args {
    streams: Vec<usize>,
    steps: usize,
    device: String,
    model_dir: Option<PathBuf>,
    full_size: bool,
    context: Option<usize>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        streams: vec![1, 16, 64],
        steps: 40,
        device: "cpu".into(),
        model_dir: None,
        full_size: false,
        context: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--streams" => a.streams = counts(&val()?)?,
            "--steps" => a.steps = val()?.parse().map_err(|_| "bad --steps")?,
            "--device" => a.device = val()?,
            "--model-dir" => a.model_dir = Some(PathBuf::from(val()?)),
            "--random-full-size" => a.full_size = true,
            "--context" => a.context = Some(val()?.parse().map_err(|_| "bad --context")?),
            "--bench" => {} // passed by `cargo bench`
            o => return Err(format!("unknown option {o}")),
        }
    }
    if a.full_size && a.model_dir.is_some() {
        return Err("--random-full-size and --model-dir exclude each other".into());
    }
    if a.streams.contains(&0) || a.steps == 0 {
        return Err("stream counts and --steps must be at least 1".into());
    }
    Ok(a)
}

/// Speech-like input: a gliding tone with a hiss, per voice and frame.
fn frame(voice: usize, f: usize) -> Vec<f32> {
    (0..FRAME_SAMPLES)
        .map(|i| {
            let t = (f * FRAME_SAMPLES + i) as f32 / 24_000.0;
            let hz = 150.0 + 60.0 * voice as f32 + 40.0 * (t * 2.0).sin();
            let hiss = (((i as u32).wrapping_mul(2_654_435_761) ^ voice as u32) % 1000) as f32;
            0.3 * (std::f32::consts::TAU * hz * t).sin() + hiss / 1e5
        })
        .collect()
}

/// Frames of `VOICES` voices, `CLIP` frames each, looped.
const VOICES: usize = 8;
const CLIP: usize = 50;

struct Audio(Vec<Vec<Vec<f32>>>);

impl Audio {
    fn new() -> Self {
        Self(
            (0..VOICES)
                .map(|v| (0..CLIP).map(|f| frame(v, f)).collect())
                .collect(),
        )
    }

    /// Stream `i`'s frame at step `t`.
    fn at(&self, i: usize, t: usize) -> &[f32] {
        &self.0[i % VOICES][(t + 7 * i) % CLIP]
    }
}

/// Where the model comes from.
enum Source {
    Dir(PathBuf),
    FullSize(Box<SttConfig>),
}

fn build(src: &Source, opts: &SttOptions) -> KyutaiStt {
    match src {
        Source::Dir(d) => KyutaiStt::load(d, opts),
        Source::FullSize(cfg) => tiny::random_model((**cfg).clone(), opts),
    }
    .unwrap_or_else(|e| panic!("{e}"))
}

/// One `step` call with every stream's frame of step `t`; `end`: which streams end.
fn step_all(
    m: &mut KyutaiStt,
    streams: &[usize],
    audio: &Audio,
    t: usize,
    end: impl Fn(usize) -> bool,
) -> (f64, usize) {
    let batch: Vec<TranscribeInput> = streams
        .iter()
        .enumerate()
        .map(|(i, &s)| TranscribeInput {
            stream: s,
            pcm: audio.at(i, t),
            end: end(i),
            logprobs: false,
        })
        .collect();
    let mut out = Vec::with_capacity(batch.len());
    let t = Instant::now();
    m.step(&batch, &mut out);
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let mut words = 0;
    for o in out {
        match o.unwrap_or_else(|e| panic!("step failed: {e}")) {
            TranscribeOutput::Delta { text, .. } => words += text.split_whitespace().count(),
            TranscribeOutput::Completed { .. } | TranscribeOutput::NotYet => {}
        }
    }
    (ms, words)
}

fn main() {
    let args = or_exit(parse(), "stt_bench");
    let device = or_exit(DeviceSpec::parse(&args.device), "stt_bench");
    let _tmp;
    let (src, label) = match (&args.model_dir, args.full_size) {
        (Some(d), _) => (Source::Dir(d.clone()), format!("{}", d.display())),
        (None, true) => {
            let mut cfg = SttConfig::stt_1b_en_fr();
            if let Some(c) = args.context {
                cfg.lm.transformer.context = c;
            }
            (
                Source::FullSize(Box::new(cfg)),
                "stt-1b-en_fr, random weights".into(),
            )
        }
        (None, false) => {
            let dir = std::env::temp_dir().join(format!("duet-stt-bench-{}", std::process::id()));
            tiny::write_tiny_dir(&dir, 42).unwrap_or_else(|e| panic!("{e}"));
            if let Some(c) = args.context {
                let toml = std::fs::read_to_string(dir.join("duet-stt.toml")).unwrap();
                let toml = toml.replace("context = 100", &format!("context = {c}"));
                std::fs::write(dir.join("duet-stt.toml"), toml).unwrap();
            }
            _tmp = TempDir(dir.clone());
            (Source::Dir(dir), "tiny, seeded random weights".into())
        }
    };
    let audio = Audio::new();
    let mut header = false;
    for &n in &args.streams {
        let opts = SttOptions {
            device: device.clone(),
            max_streams: n,
            seed: Some(1),
            ..SttOptions::default()
        };
        let built = Instant::now();
        let mut m = build(&src, &opts);
        let build_s = built.elapsed().as_secs_f64();
        if !header {
            let t = &m.config().lm.transformer;
            let kv_mib = kv_mib(t.num_layers, t.context, t.d_model, &device);
            println!(
                "# stt_bench: {label} (d_model {}, {} layers, context {} steps, delay {} steps, \
                 flush {} frames), device {}, {} steps per point",
                t.d_model,
                t.num_layers,
                t.context,
                m.config().asr.delay_tokens,
                m.flush_frames(),
                args.device,
                args.steps
            );
            println!("# KV cache per stream: {kv_mib:.1} MiB; step budget 80 ms");
            println!("| streams | step p50 ms | p99 ms | max ms | RTF (p50 / 80 ms) | per stream ms | streams at RTF 1 | 1 end (flush) ms | all end ms | words | RSS MiB (peak) | GPU MiB |");
            println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
            header = true;
        }
        let warm = Instant::now();
        m.warmup().unwrap_or_else(|e| panic!("warm-up: {e}"));
        let warm_s = warm.elapsed().as_secs_f64();
        let streams: Vec<usize> = (0..n).map(|_| m.open_stream().expect("stream")).collect();
        let mut t = 0;
        for _ in 0..5 {
            step_all(&mut m, &streams, &audio, t, |_| false);
            t += 1;
        }
        let steps_before = m.model_steps();
        let mut times = Vec::with_capacity(args.steps);
        let mut words = 0;
        for _ in 0..args.steps {
            let (ms, w) = step_all(&mut m, &streams, &audio, t, |_| false);
            t += 1;
            times.push(ms);
            words += w;
        }
        assert_eq!(
            m.model_steps() - steps_before,
            args.steps as u64,
            "one model step per 80 ms frame"
        );
        // One stream ends its utterance while the others stream on; then all end at once.
        let (one_end, _) = step_all(&mut m, &streams, &audio, t, |i| i == 0);
        let (all_end, _) = step_all(&mut m, &streams, &audio, t + 1, |_| true);
        times.sort_by(f64::total_cmp);
        let p50 = percentile(&times, 0.5);
        let (rss, peak) = rss_mib();
        let gpu = gpu_column(&device);
        println!(
            "| {n} | {p50:.2} | {:.2} | {:.2} | {:.3} | {:.3} | {:.1} | {one_end:.1} | {all_end:.1} | {words} | {rss:.0} ({peak:.0}) | {gpu} |",
            percentile(&times, 0.99),
            times[times.len() - 1],
            p50 / 80.0,
            p50 / n as f64,
            n as f64 * 80.0 / p50,
        );
        eprintln!("  ({n} streams: built in {build_s:.1} s, warm-up {warm_s:.1} s)");
    }
}

/// Removes the generated tiny directory at exit.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
