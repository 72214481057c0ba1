//! Tiny-weight tests: generated weights, saved with the release's file names, loaded back
//! through the production loader, streamed.

use candle::{IndexOp, Tensor};
use moshi::lm_generate_multistream as upstream;

use super::tiny::{self, write_tiny_dir};
use super::*;
use crate::test_util::{input, TempDir};

const SEED: u64 = 42;

fn tiny_dir(tag: &str) -> TempDir {
    let d = TempDir::new(&format!("moshi-{tag}"));
    write_tiny_dir(&d.0, SEED, false).unwrap();
    d
}

fn opts(slots: usize) -> MoshiOptions {
    MoshiOptions {
        preset: "moshiko".into(),
        device: DeviceSpec::Cpu,
        max_slots: slots,
        seed: Some(7),
        per_session_depformer: false,
        batched_decode: None,
    }
}

/// Steps `slot` alone through `frames` frames of `voice`; returns outputs and the
/// (text, first generated codebook row) tokens after each step.
fn run(m: &mut MoshiModel, slot: usize, voice: u32, frames: usize) -> (Vec<StepOutput>, Vec<u32>) {
    let mut outs = Vec::new();
    let mut texts = Vec::new();
    for f in 0..frames {
        let pcm = input(voice, f);
        let mut out = Vec::new();
        m.step(&[StepInput { slot, pcm: &pcm }], &mut out);
        outs.push(out.pop().unwrap().unwrap());
        texts.push(m.slots[slot].as_ref().unwrap().last_text);
    }
    (outs, texts)
}

#[test]
fn tiny_dir_loads_through_the_production_loader_and_streams() {
    let dir = tiny_dir("stream");
    for f in [
        config::LM_SAFETENSORS,
        config::MIMI_FILE,
        config::TEXT_TOKENIZER,
        config::CONFIG_FILE,
    ] {
        assert!(dir.0.join(f).is_file(), "{f}");
    }
    let mut m = MoshiModel::load(&dir.0, &opts(2)).unwrap();
    assert_eq!(m.info().frame_samples, 1920);
    assert_eq!(m.info().frame_micros(), 80_000);
    assert!(m.info().autonomous);
    m.warmup().unwrap();
    let s = m.open_slot().unwrap();
    let (outs, texts) = run(&mut m, s, 1, 25);
    let delay = m.config().generation.acoustic_delay;
    for (i, o) in outs.iter().enumerate() {
        assert_eq!(o.audio.len(), FRAME_SAMPLES, "frame {i}");
        assert!(o.audio.iter().all(|v| v.is_finite()), "NaN in frame {i}");
        assert!(!o.end_of_turn);
        if i < delay {
            assert!(
                o.audio.iter().all(|&v| v == 0.0),
                "frame {i} precedes the acoustic delay"
            );
        }
    }
    let voiced = outs
        .iter()
        .skip(delay)
        .filter(|o| o.audio.iter().any(|&v| v != 0.0))
        .count();
    assert_eq!(
        voiced,
        25 - delay,
        "every step after the delay decodes audio"
    );
    assert!(texts
        .iter()
        .all(|&t| (t as usize) < m.config().lm.text_out_vocab_size));
    // Words of the tiny vocabulary reach the transcript.
    let text: String = outs.iter().map(|o| o.text.as_str()).collect();
    assert!(text.starts_with(' ') && text.len() > 10, "{text:?}");
    // Seeded weights + seeded sampling: the same tokens on every run and machine.
    assert_eq!(texts, GOLDEN_TEXT, "text tokens changed");
}

/// Text tokens of `tiny_dir_loads_through_the_production_loader_and_streams`.
const GOLDEN_TEXT: &[u32] = &[
    33, 39, 33, 46, 12, 29, 12, 12, 49, 55, 33, 29, 29, 58, 12, 12, 46, 24, 80, 33, 13, 29, 81, 39,
    29,
];

#[test]
fn loader_asks_for_exactly_upstreams_tensors() {
    let tiny = tiny::tiny_config();
    assert_eq!(
        tiny::loader_schema(&tiny).unwrap(),
        tiny::upstream_schema(&tiny).unwrap()
    );
}

#[test]
fn matches_upstream_reference_generation_greedy() {
    // Greedy sampling on both sides: Duet's batched LM + batched depformer must make the
    // same tokens as upstream's single-session `lm_generate_multistream::State`.
    let dir = tiny_dir("greedy");
    let greedy = Sampling {
        temperature: 0.0,
        top_k: 0,
    };
    let toml = format!(
        "{}\n",
        tiny::TINY_TOML
            .replace(
                "text = { temperature = 0.7, top_k = 25 }",
                "text = { temperature = 0.0, top_k = 0 }"
            )
            .replace(
                "audio = { temperature = 0.8, top_k = 250 }",
                "audio = { temperature = 0.0, top_k = 0 }"
            )
    );
    std::fs::write(dir.0.join(config::CONFIG_FILE), toml).unwrap();
    let mut m = MoshiModel::load(&dir.0, &opts(3)).unwrap();
    assert_eq!(m.config().generation.text, greedy);
    let cfg = m.config().clone();

    // Upstream reference, one model per voice.
    let reference = |voice: u32, frames: usize| {
        let files = ModelFiles::find(&dir.0).unwrap();
        let lm =
            moshi::lm::load_lm_model(cfg.lm.clone(), &files.lm, DType::F32, &Device::Cpu).unwrap();
        let mut mimi = moshi::mimi::Mimi::new(
            cfg.mimi.clone(),
            unsafe {
                candle_nn::VarBuilder::from_mmaped_safetensors(
                    &[&files.mimi],
                    DType::F32,
                    &Device::Cpu,
                )
            }
            .unwrap(),
        )
        .unwrap();
        let g = &cfg.generation;
        let gcfg = upstream::Config {
            generated_audio_codebooks: g.generated_audio_codebooks,
            input_audio_codebooks: g.input_audio_codebooks,
            audio_vocab_size: cfg.lm.audio_vocab_size,
            acoustic_delay: g.acoustic_delay,
            text_pad_token: g.text_pad_token,
            text_eop_token: g.text_eop_token,
            text_start_token: g.text_start_token,
        };
        let lp = || candle_transformers::generation::LogitsProcessor::new(0, None, None);
        let mut st = upstream::State::new(lm, frames + 10, lp(), lp(), None, None, None, gcfg);
        let mut text = g.text_start_token;
        let mut texts = Vec::new();
        let mut audio = Vec::new();
        for f in 0..frames {
            let pcm = input(voice, f);
            let x = Tensor::from_slice(&pcm, (1, 1, FRAME_SAMPLES), &Device::Cpu).unwrap();
            let codes = mimi.encode_step(&x.into(), &().into()).unwrap();
            let codes = codes
                .as_option()
                .unwrap()
                .i((0, ..g.input_audio_codebooks, 0))
                .unwrap();
            text = st
                .step_(
                    Some(text),
                    &codes.to_vec1::<u32>().unwrap(),
                    None,
                    None,
                    None,
                )
                .unwrap();
            texts.push(text);
            audio.push(st.last_audio_tokens());
        }
        (texts, audio)
    };

    let frames = 12;
    let (ref_a, ref_audio_a) = reference(1, frames);
    let (ref_b, _) = reference(2, frames);
    // Two sessions side by side in slots 0 and 2 (slot 1 idle), different voices.
    let a = m.open_slot().unwrap();
    let idle = m.open_slot().unwrap();
    let b = m.open_slot().unwrap();
    m.close_slot(idle);
    let (mut ta, mut tb, mut aa) = (Vec::new(), Vec::new(), Vec::new());
    for f in 0..frames {
        let (pa, pb) = (input(1, f), input(2, f));
        let mut out = Vec::new();
        m.step(
            &[
                StepInput { slot: b, pcm: &pb },
                StepInput { slot: a, pcm: &pa },
            ],
            &mut out,
        );
        assert!(out.iter().all(Result::is_ok));
        let sa = m.slots[a].as_ref().unwrap();
        ta.push(sa.last_text);
        let delay = cfg.generation.acoustic_delay;
        aa.push(
            (sa.step > delay)
                .then(|| sa.history.row(sa.step - delay - 1).to_vec())
                .filter(|r| {
                    r[..cfg.generation.generated_audio_codebooks]
                        .iter()
                        .all(|&t| t < m.lm.audio_pad_token())
                }),
        );
        tb.push(m.slots[b].as_ref().unwrap().last_text);
    }
    assert_eq!(ta, ref_a, "session A's text tokens differ from upstream");
    assert_eq!(tb, ref_b, "session B's text tokens differ from upstream");
    let gen = cfg.generation.generated_audio_codebooks;
    let ours: Vec<_> = aa
        .iter()
        .map(|r| r.as_ref().map(|r| r[..gen].to_vec()))
        .collect();
    let theirs: Vec<_> = ref_audio_a
        .iter()
        .map(|r| r.as_ref().map(|r| r[..gen].to_vec()))
        .collect();
    assert_eq!(
        ours, theirs,
        "session A's audio tokens differ from upstream"
    );
    let decoded = theirs.iter().filter(|r| r.is_some()).count();
    assert_eq!(
        decoded,
        frames - cfg.generation.acoustic_delay,
        "{theirs:?}"
    );
    let (_, ref_audio_b) = reference(2, frames);
    assert_ne!(
        ref_audio_a, ref_audio_b,
        "two voices gave the same audio tokens"
    );
}

#[test]
fn sessions_are_isolated_and_slots_reused_clean() {
    let dir = tiny_dir("isolated");
    // A alone.
    let mut m1 = MoshiModel::load(&dir.0, &opts(2)).unwrap();
    let a = m1.open_slot().unwrap();
    let (alone, _) = run(&mut m1, a, 1, 8);

    // A next to B: A's output is bit-identical.
    let mut m2 = MoshiModel::load(&dir.0, &opts(2)).unwrap();
    let a = m2.open_slot().unwrap();
    let b = m2.open_slot().unwrap();
    let (mut beside, mut other) = (Vec::new(), Vec::new());
    for f in 0..8 {
        let (pa, pb) = (input(1, f), input(3, f));
        let mut out = Vec::new();
        m2.step(
            &[
                StepInput { slot: a, pcm: &pa },
                StepInput { slot: b, pcm: &pb },
            ],
            &mut out,
        );
        let mut it = out.into_iter();
        beside.push(it.next().unwrap().unwrap());
        other.push(it.next().unwrap().unwrap());
    }
    assert!(
        alone == beside,
        "session A changed when B stepped beside it"
    );
    assert!(
        other.iter().zip(&beside).any(|(b, a)| b.audio != a.audio),
        "B is not A"
    );

    // A slot reused after a session of 10 frames behaves like a slot never used in a
    // running batch (whose state rows are zeros: the codec has heard silence).
    let mut used = MoshiModel::load(&dir.0, &opts(2)).unwrap();
    let s = used.open_slot().unwrap();
    run(&mut used, s, 2, 10);
    used.close_slot(s);
    assert_eq!(used.open_slot().unwrap(), s);
    let (after_reuse, _) = run(&mut used, s, 1, 8);
    let mut fresh = MoshiModel::load(&dir.0, &opts(2)).unwrap();
    let other = fresh.open_slot().unwrap();
    let s = fresh.open_slot().unwrap();
    run(&mut fresh, other, 2, 10);
    fresh.close_slot(other);
    let (fresh_out, _) = run(&mut fresh, s, 1, 8);
    assert!(
        after_reuse == fresh_out,
        "a reused slot kept state of its previous session"
    );
    used.open_slot().unwrap();
    assert!(matches!(
        used.open_slot(),
        Err(ModelError::SlotsExhausted(2))
    ));
}

#[test]
fn a_bad_frame_fails_only_its_session() {
    let dir = tiny_dir("badframe");
    let mut m = MoshiModel::load(&dir.0, &opts(2)).unwrap();
    let a = m.open_slot().unwrap();
    let b = m.open_slot().unwrap();
    let good = input(1, 0);
    let mut out = Vec::new();
    m.step(
        &[
            StepInput {
                slot: a,
                pcm: &good[..100],
            },
            StepInput {
                slot: b,
                pcm: &good,
            },
        ],
        &mut out,
    );
    assert!(matches!(
        out[0],
        Err(ModelError::BadFrame {
            got: 100,
            expected: 1920
        })
    ));
    assert_eq!(out[1].as_ref().unwrap().audio.len(), FRAME_SAMPLES);
    assert!(matches!(
        m.request(9, Request::Cancel),
        Err(ModelError::UnknownSlot(9))
    ));
}

#[test]
fn mismatched_files_are_clear_errors() {
    let dir = tiny_dir("mismatch");
    let toml = tiny::TINY_TOML.replacen("d_model = 64", "d_model = 128", 1);
    std::fs::write(dir.0.join(config::CONFIG_FILE), toml).unwrap();
    let e = MoshiModel::load(&dir.0, &opts(1))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("model.safetensors") && e.contains("does not match"),
        "{e}"
    );

    let dir = tiny_dir("tokenizer");
    std::fs::write(
        dir.0.join(config::TEXT_TOKENIZER),
        spm::write_model(&["a", "b"]),
    )
    .unwrap();
    let e = MoshiModel::load(&dir.0, &opts(1))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("2 pieces") && e.contains("text vocabulary is 100"),
        "{e}"
    );
    std::fs::write(dir.0.join(config::TEXT_TOKENIZER), b"\xff\xff").unwrap();
    let e = MoshiModel::load(&dir.0, &opts(1))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not a SentencePiece model"), "{e}");

    assert!(DeviceSpec::parse("cuda:1") == Ok(DeviceSpec::Cuda(1)));
    assert!(DeviceSpec::parse("gpu").is_err());
    // Without the `cuda` feature (CI), asking for CUDA is an error, not a crash.
    if !cfg!(feature = "cuda") {
        let e = DeviceSpec::Cuda(0).open().unwrap_err().to_string();
        assert!(e.contains("--features cuda"), "{e}");
    }
}

#[test]
fn batched_decoding_matches_per_session_decoding() {
    // The CUDA path decodes all sessions in one batched Mimi pass; the CPU path per session
    // (see `MimiDecode`). With one slot, candle's CPU kernels are exact for both, so the
    // batched code path itself is checked here; `moshi_bench --check` compares them with
    // many sessions on a GPU.
    let dir = tiny_dir("decode");
    let mut per_session = MoshiModel::load(&dir.0, &opts(1)).unwrap();
    let o = MoshiOptions {
        batched_decode: Some(true),
        ..opts(1)
    };
    let mut batched = MoshiModel::load(&dir.0, &o).unwrap();
    assert!(matches!(batched.mimi_decode, MimiDecode::Batched));
    assert!(matches!(
        per_session.mimi_decode,
        MimiDecode::PerSession { .. }
    ));
    let a = per_session.open_slot().unwrap();
    let b = batched.open_slot().unwrap();
    let (pa, ta) = run(&mut per_session, a, 1, 10);
    let (pb, tb) = run(&mut batched, b, 1, 10);
    assert_eq!(ta, tb);
    let max = pa
        .iter()
        .zip(&pb)
        .flat_map(|(x, y)| x.audio.iter().zip(&y.audio).map(|(u, v)| (u - v).abs()))
        .fold(0f32, f32::max);
    assert!(
        max < 1e-4,
        "batched and per-session decoding differ by {max}"
    );
    assert!(pb.iter().skip(2).all(|o| o.audio.iter().any(|&v| v != 0.0)));
}

#[test]
fn q8_gguf_release_layout_loads_and_streams() {
    let d = TempDir::new("moshi-q8");
    write_tiny_dir(&d.0, SEED, true).unwrap();
    assert!(d.0.join(config::LM_GGUF).is_file());
    assert!(!d.0.join(config::LM_SAFETENSORS).exists());
    let mut m = MoshiModel::load(&d.0, &opts(2)).unwrap();
    assert!(m.lm.is_quantized());
    let a = m.open_slot().unwrap();
    let b = m.open_slot().unwrap();
    for f in 0..6 {
        let (pa, pb) = (input(1, f), input(2, f));
        let mut out = Vec::new();
        m.step(
            &[
                StepInput { slot: a, pcm: &pa },
                StepInput { slot: b, pcm: &pb },
            ],
            &mut out,
        );
        for o in out {
            let o = o.unwrap();
            assert_eq!(o.audio.len(), FRAME_SAMPLES);
            assert!(o.audio.iter().all(|v| v.is_finite()));
            if f >= 2 {
                assert!(o.audio.iter().any(|&v| v != 0.0), "frame {f} decodes audio");
            }
        }
    }
}

#[test]
fn a_malformed_gguf_is_an_error_not_a_panic() {
    use candle::quantized::gguf_file;
    let d = TempDir::new("moshi-bad-gguf");
    std::fs::create_dir_all(&d.0).unwrap();
    let path = d.0.join("model.q8.gguf");
    let mut f = std::fs::File::create(&path).unwrap();
    gguf_file::write(
        &mut f,
        &[("general.alignment", &gguf_file::Value::U32(0))],
        &[],
    )
    .unwrap();
    drop(f);
    let err = super::candle_transformers_gguf(&path, &candle::Device::Cpu)
        .err()
        .expect("a zero alignment is refused");
    assert!(err.to_string().contains("malformed GGUF file"), "{err}");
}

#[test]
fn configs_that_would_panic_upstream_are_refused() {
    let base = tiny::tiny_config();
    base.validate().expect("the tiny config is valid");
    type Change = Box<dyn Fn(&mut MoshiConfig)>;
    let cases: Vec<(&str, Change)> = vec![
        ("num_heads", Box::new(|c| c.mimi.transformer.num_heads = 0)),
        ("kv_repeat", Box::new(|c| c.lm.transformer.kv_repeat = 0)),
        (
            "multiple of num_heads",
            Box::new(|c| c.lm.transformer.d_model += 1),
        ),
        ("context", Box::new(|c| c.lm.transformer.context = 1)),
        (
            "context",
            Box::new(|c| c.mimi.transformer.context = usize::MAX),
        ),
        (
            "acoustic_delay",
            Box::new(|c| c.generation.acoustic_delay = 1000),
        ),
        (
            "text_out_vocab_size",
            Box::new(|c| c.lm.text_out_vocab_size = c.lm.text_in_vocab_size + 1),
        ),
    ];
    for (what, change) in cases {
        let mut cfg = base.clone();
        change(&mut cfg);
        let err = cfg.validate().expect_err(what).to_string();
        assert!(err.contains(what), "{what}: {err}");
    }
}

#[test]
fn non_finite_input_is_heard_as_silence() {
    let d = tiny_dir("nan");
    let mut noisy = MoshiModel::load(&d.0, &opts(1)).unwrap();
    let mut quiet = MoshiModel::load(&d.0, &opts(1)).unwrap();
    let (a, b) = (noisy.open_slot().unwrap(), quiet.open_slot().unwrap());
    let mut bad = vec![0f32; FRAME_SAMPLES];
    bad[7] = f32::NAN;
    bad[9] = f32::INFINITY;
    bad[11] = f32::NEG_INFINITY;
    let silence = vec![0f32; FRAME_SAMPLES];
    for _ in 0..6 {
        let (mut x, mut y) = (Vec::new(), Vec::new());
        noisy.step(&[StepInput { slot: a, pcm: &bad }], &mut x);
        quiet.step(
            &[StepInput {
                slot: b,
                pcm: &silence,
            }],
            &mut y,
        );
        let (x, y) = (x.pop().unwrap().unwrap(), y.pop().unwrap().unwrap());
        assert!(x.audio.iter().all(|v| v.is_finite()));
        assert_eq!(x, y, "NaN and inf samples count as silence");
    }
}
