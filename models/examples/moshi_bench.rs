//! Moshi step benchmark: per-step time (p50/p99/max) and memory for N concurrent sessions,
//! every session stepped once per 80 ms frame in one batch, as the model loop does.
//!
//! CPU, tiny architecture (no file needed):
//!   cargo run --release -p duet-models --example moshi_bench
//! GPU, full-size Moshiko with random bf16 weights (no file needed; `--features cuda`):
//!   moshi_bench --device cuda:0 --config moshiko --sessions 1,4,16,32,64
//!
//! Options: --device cpu|cuda:N, --config tiny|moshiko, --sessions 1,4,16,32,64,
//! --steps N (measured steps, after 5 warm-up steps), --context N (KV context in steps,
//! default: the architecture's), --depformer batched|per-session|both, --check (first
//! compare the batched path with the per-session one on this device: greedy sampling, 4
//! sessions, 12 steps, same weights; prints token agreement and the largest audio
//! difference), --churn (also measure each point with one session leaving and a new one
//! joining before every step, the join's slot reset counted in the step time: does a join
//! stall the others?).

use std::time::Instant;

mod common;
use common::{counts, gpu_column, kv_mib, or_exit, percentile, rss_mib};

use duet_models::moshi::{
    tiny, DeviceSpec, MoshiConfig, MoshiModel, MoshiOptions, PhaseTimes, FRAME_SAMPLES,
};
use duet_models::{DuplexModel, StepInput};

struct Args {
    device: String,
    config: String,
    sessions: Vec<usize>,
    steps: usize,
    context: Option<usize>,
    depformer: Vec<bool>,
    check: bool,
    churn: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        device: "cpu".into(),
        config: "tiny".into(),
        sessions: vec![1, 4, 16, 32, 64],
        steps: 40,
        context: None,
        depformer: vec![false],
        check: false,
        churn: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--device" => a.device = val()?,
            "--config" => a.config = val()?,
            "--sessions" => a.sessions = counts(&val()?)?,
            "--steps" => a.steps = val()?.parse().map_err(|_| "bad --steps")?,
            "--context" => a.context = Some(val()?.parse().map_err(|_| "bad --context")?),
            "--depformer" => {
                a.depformer = match val()?.as_str() {
                    "batched" => vec![false],
                    "per-session" => vec![true],
                    "both" => vec![false, true],
                    o => return Err(format!("bad --depformer {o}")),
                }
            }
            "--check" => a.check = true,
            "--churn" => a.churn = true,
            "--bench" => {} // passed by `cargo bench`
            o => return Err(format!("unknown option {o}")),
        }
    }
    Ok(a)
}

fn main() {
    let args = or_exit(parse(), "moshi_bench");
    let device = DeviceSpec::parse(&args.device).unwrap_or_else(|e| panic!("{e}"));
    let mut cfg = match args.config.as_str() {
        "tiny" => tiny::tiny_config(),
        preset => MoshiConfig::preset(preset).unwrap_or_else(|e| panic!("{e}")),
    };
    if let Some(c) = args.context {
        cfg.lm.transformer.context = c;
    }
    let t = &cfg.lm.transformer;
    let kv_mib = kv_mib(t.num_layers, t.context, t.d_model, &device);
    println!(
        "# moshi_bench: config {} (d_model {}, {} layers, context {} steps), device {}, {} steps per point",
        args.config, t.d_model, t.num_layers, t.context, args.device, args.steps
    );
    println!("# KV cache per session when full: {kv_mib:.1} MiB; step budget 80 ms");
    if args.check {
        check(&cfg, &device);
    }
    println!("| sessions | depformer | step p50 ms | p99 ms | max ms | on time | per session ms | mean ms: encode / LM / depformer / decode | RSS MiB (peak) | GPU MiB |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let pcm: Vec<Vec<f32>> = (0..8)
        .map(|v| {
            (0..FRAME_SAMPLES)
                .map(|i| 0.2 * ((i as f32) * (0.03 + v as f32 * 0.007)).sin())
                .collect()
        })
        .collect();
    for &per_session in &args.depformer {
        for &n in &args.sessions {
            let opts = MoshiOptions {
                preset: "moshiko".into(),
                device: device.clone(),
                max_slots: n,
                seed: Some(1),
                per_session_depformer: per_session,
                batched_decode: None,
            };
            let built = Instant::now();
            let mut m = tiny::random_model(cfg.clone(), &opts).unwrap_or_else(|e| panic!("{e}"));
            let build_s = built.elapsed().as_secs_f64();
            let origin = Instant::now();
            m.set_clock(Box::new(move || origin.elapsed()));
            let mut slots: Vec<usize> = (0..n).map(|_| m.open_slot().expect("slot")).collect();
            for churn in [false, true] {
                if churn && !args.churn {
                    continue;
                }
                let (times, ph, join_ms) = measure(&mut m, &mut slots, &pcm, args.steps, churn);
                let mean =
                    |d: std::time::Duration| d.as_secs_f64() * 1e3 / f64::from(ph.steps.max(1));
                let phases = format!(
                    "{:.2} / {:.2} / {:.2} / {:.2}",
                    mean(ph.encode),
                    mean(ph.lm),
                    mean(ph.depformer),
                    mean(ph.decode)
                );
                let on_time =
                    times.iter().filter(|&&t| t <= 80.0).count() as f64 / times.len() as f64;
                let (rss, peak) = rss_mib();
                let gpu = gpu_column(&device);
                let p50 = percentile(&times, 0.5);
                println!(
                    "| {n} | {}{} | {p50:.2} | {:.2} | {:.2} | {:.0} % | {:.3} | {phases} | {rss:.0} ({peak:.0}) | {gpu} |",
                    if per_session { "per-session" } else { "batched" },
                    if churn {
                        format!(", 1 leave + 1 join per step (join max {join_ms:.2} ms)")
                    } else {
                        String::new()
                    },
                    percentile(&times, 0.99),
                    times[times.len() - 1],
                    on_time * 100.0,
                    p50 / n as f64,
                );
            }
            eprintln!("  (built in {build_s:.1} s)");
            drop(m);
        }
    }
}

/// Steps the `slots` 5 warm-up times, then `steps` measured times; with `churn`, before every
/// step one session leaves and a new one takes its place (`close_slot` + `open_slot`, timed
/// with the step). The sorted step times in ms, the measured steps' phase times, and the
/// longest leave + join in ms.
fn measure(
    m: &mut MoshiModel,
    slots: &mut [usize],
    pcm: &[Vec<f32>],
    steps: usize,
    churn: bool,
) -> (Vec<f64>, PhaseTimes, f64) {
    let mut out = Vec::with_capacity(slots.len());
    let mut times = Vec::with_capacity(steps);
    let mut join_ms = 0f64;
    for step in 0..(5 + steps) {
        if step == 5 {
            m.take_phase_times();
        }
        let t0 = Instant::now();
        if churn {
            let i = step % slots.len();
            m.close_slot(slots[i]);
            slots[i] = m.open_slot().expect("a slot after a close");
            join_ms = join_ms.max(t0.elapsed().as_secs_f64() * 1e3);
        }
        let batch: Vec<StepInput> = slots
            .iter()
            .map(|&slot| StepInput {
                slot,
                pcm: &pcm[(slot + step) % pcm.len()],
            })
            .collect();
        out.clear();
        m.step(&batch, &mut out);
        let dt = t0.elapsed().as_secs_f64() * 1e3;
        if let Some(Err(e)) = out.iter().find(|r| r.is_err()) {
            panic!("step failed: {e}");
        }
        if step >= 5 {
            times.push(dt);
        }
    }
    times.sort_by(f64::total_cmp);
    (times, m.take_phase_times(), join_ms)
}

/// Batched LM + depformer + Mimi decode against per-session depformer and decode, same
/// weights, greedy sampling.
fn check(cfg: &MoshiConfig, device: &DeviceSpec) {
    let mut cfg = cfg.clone();
    let greedy = duet_models::moshi::Sampling {
        temperature: 0.0,
        top_k: 0,
    };
    cfg.generation.text = greedy;
    cfg.generation.audio = greedy;
    let n = 4;
    let opts = |per_session: bool| MoshiOptions {
        preset: "moshiko".into(),
        device: device.clone(),
        max_slots: n,
        seed: Some(1),
        per_session_depformer: per_session,
        batched_decode: Some(!per_session),
    };
    let mut models = tiny::random_models(cfg, &[opts(false), opts(true)]).expect("models");
    let mut outs: Vec<Vec<duet_models::StepOutput>> = vec![Vec::new(), Vec::new()];
    for (m, out) in models.iter_mut().zip(outs.iter_mut()) {
        let slots: Vec<usize> = (0..n).map(|_| m.open_slot().expect("slot")).collect();
        for step in 0..12 {
            let pcm: Vec<Vec<f32>> = slots
                .iter()
                .map(|&s| {
                    (0..FRAME_SAMPLES)
                        .map(|i| {
                            0.2 * ((i + step * FRAME_SAMPLES) as f32 * (0.01 + s as f32 * 0.004))
                                .sin()
                        })
                        .collect()
                })
                .collect();
            let batch: Vec<StepInput> = slots
                .iter()
                .zip(&pcm)
                .map(|(&slot, p)| StepInput { slot, pcm: p })
                .collect();
            let mut o = Vec::new();
            m.step(&batch, &mut o);
            out.extend(o.into_iter().map(|r| r.expect("step")));
        }
    }
    let same_text = outs[0]
        .iter()
        .zip(&outs[1])
        .filter(|(a, b)| a.text == b.text)
        .count();
    let max = outs[0]
        .iter()
        .zip(&outs[1])
        .flat_map(|(a, b)| a.audio.iter().zip(&b.audio).map(|(u, v)| (u - v).abs()))
        .fold(0f32, f32::max);
    let peak = outs[1]
        .iter()
        .flat_map(|o| o.audio.iter())
        .fold(0f32, |m, v| m.max(v.abs()));
    println!(
        "# check: batched vs per-session (depformer and Mimi decode), {n} sessions x 12 steps, greedy: \
         same text {same_text}/{}, max |audio diff| {max:.2e} (audio peak {peak:.2e})",
        outs[0].len()
    );
}
