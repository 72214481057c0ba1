//! Tiny-weight tests: generated weights, saved with the release's file names, loaded back
//! through the production loader, streamed.

use super::tiny::{self, write_tiny_dir};
use super::*;
use crate::moshi::load_tokenizer;
use crate::test_util::{input, TempDir};

const SEED: u64 = 42;

fn tiny_dir(tag: &str) -> TempDir {
    let d = TempDir::new(&format!("stt-{tag}"));
    write_tiny_dir(&d.0, SEED).unwrap();
    d
}

fn opts(streams: usize) -> SttOptions {
    SttOptions {
        preset: "stt-1b-en_fr".into(),
        device: DeviceSpec::Cpu,
        max_streams: streams,
        seed: Some(7),
    }
}

fn one(
    m: &mut KyutaiStt,
    stream: usize,
    pcm: &[f32],
    end: bool,
) -> Result<TranscribeOutput, ModelError> {
    let mut out = Vec::new();
    m.step(
        &[TranscribeInput {
            stream,
            pcm,
            end,
            logprobs: false,
        }],
        &mut out,
    );
    assert_eq!(out.len(), 1);
    out.pop().unwrap()
}

/// What a stream said after one step, with the end-of-turn estimate then.
type Said = (TranscribeOutput, Option<f32>);

/// Steps `stream` alone through `frames` frames of `voice`, then ends the utterance.
fn utterance(m: &mut KyutaiStt, stream: usize, voice: u32, frames: usize) -> Vec<Said> {
    let mut said = Vec::new();
    for f in 0..frames {
        let o = one(m, stream, &input(voice, f), false).unwrap();
        said.push((o, m.end_of_turn(stream).probability));
    }
    let o = one(m, stream, &[], true).unwrap();
    said.push((o, m.end_of_turn(stream).probability));
    said
}

/// The deltas joined, and the completion's text.
fn texts(said: &[Said]) -> (String, String) {
    let mut joined = String::new();
    let mut done = String::new();
    for (o, _) in said {
        match o {
            TranscribeOutput::Delta { text, .. } => joined.push_str(text),
            TranscribeOutput::Completed { text, .. } => done = text.clone(),
            TranscribeOutput::NotYet => {}
        }
    }
    (joined, done)
}

#[test]
fn tiny_dir_loads_through_the_production_loader_and_streams() {
    let dir = tiny_dir("stream");
    for f in [
        config::LM_FILE,
        config::MIMI_FILE,
        config::TEXT_TOKENIZER,
        config::CONFIG_FILE,
    ] {
        assert!(dir.0.join(f).is_file(), "{f}");
    }
    let mut m = KyutaiStt::load(&dir.0, &opts(2)).unwrap();
    assert_eq!(
        m.info(),
        &TranscriberInfo {
            name: "kyutai-stt-1b-en_fr".into(),
            max_streams: 2,
            streaming: true,
        }
    );
    assert_eq!(m.config().asr.delay_tokens, 6);
    assert_eq!(m.flush_frames(), 8);
    m.warmup().unwrap();
    let warm = m.model_steps();
    assert_eq!(warm, 1 + 8, "warm-up: one frame and the flush");
    let s = m.open_stream().unwrap();
    assert_eq!(
        m.end_of_turn(s).probability,
        None,
        "no estimate before a step"
    );
    let frames = 40;
    let said = utterance(&mut m, s, 1, frames);
    assert_eq!(m.model_steps() - warm, (frames + 8) as u64);
    // Nothing can come out before the text delay.
    for (i, (o, p)) in said.iter().enumerate().take(6) {
        assert_eq!(
            o,
            &TranscribeOutput::NotYet,
            "frame {i} precedes the text delay"
        );
        assert!(p.is_some_and(|p| (0.0..=1.0).contains(&p)), "{p:?}");
    }
    let deltas = said
        .iter()
        .filter(|(o, _)| matches!(o, TranscribeOutput::Delta { .. }))
        .count();
    assert!(deltas >= 2, "words stream out as they come: {said:?}");
    let (joined, done) = texts(&said);
    assert!(done.starts_with(&joined), "{joined:?} / {done:?}");
    assert!(
        done.len() > joined.len(),
        "the end's flush brings out the words still delayed: {joined:?} / {done:?}"
    );
    assert!(!done.starts_with(' ') && !done.ends_with(' ') && !done.contains("  "));
    assert!(done.split(' ').count() >= 3, "{done:?}");
    match &said.last().unwrap().0 {
        TranscribeOutput::Completed {
            audio_seconds,
            logprobs,
            ..
        } => {
            assert!((audio_seconds - frames as f64 * 0.08).abs() < 1e-9);
            assert!(logprobs.is_empty(), "not asked for");
        }
        o => panic!("{o:?}"),
    }
    // The stream goes on with a fresh utterance; the end-of-turn estimate restarts.
    assert_eq!(m.end_of_turn(s).probability, None);
    // Seeded weights + greedy decoding: the same text on every run and machine.
    assert_eq!(done, GOLDEN_TEXT, "transcript changed");
}

/// Text of `tiny_dir_loads_through_the_production_loader_and_streams`.
const GOLDEN_TEXT: &str = "word listens model model model word . model .";

#[test]
fn one_model_step_per_80_ms_of_audio_whatever_the_chunking() {
    let dir = tiny_dir("cadence");
    let mut m = KyutaiStt::load(&dir.0, &opts(1)).unwrap();
    let s = m.open_stream().unwrap();
    let audio: Vec<f32> = (0..7).flat_map(|f| input(2, f)).collect(); // 13440 samples
    let mut fed = 0;
    for chunk in audio.chunks(1000) {
        one(&mut m, s, chunk, false).unwrap();
        fed += chunk.len();
        assert_eq!(m.model_steps(), (fed / FRAME_SAMPLES) as u64, "after {fed}");
    }
    // More than a frame at once steps as many frames.
    let long: Vec<f32> = (7..12).flat_map(|f| input(2, f)).collect();
    one(&mut m, s, &long[..FRAME_SAMPLES * 3 + 5], false).unwrap();
    assert_eq!(m.model_steps(), 10);
    // The end pads the partial frame (5 samples) and flushes.
    let o = one(&mut m, s, &[0.1; 10], true).unwrap();
    assert_eq!(m.model_steps(), 10 + 1 + 8);
    match o {
        TranscribeOutput::Completed { audio_seconds, .. } => {
            let n = 13440 + FRAME_SAMPLES * 3 + 5 + 10;
            assert!((audio_seconds - n as f64 / 24_000.0).abs() < 1e-9);
        }
        o => panic!("{o:?}"),
    }
    // An utterance that heard nothing completes empty without a step.
    assert_eq!(
        one(&mut m, s, &[], true).unwrap(),
        TranscribeOutput::Completed {
            text: String::new(),
            logprobs: Vec::new(),
            audio_seconds: 0.0,
            language: None,
        }
    );
    assert_eq!(m.model_steps(), 19);
}

#[test]
fn same_seed_same_model_and_text_other_seed_other_model() {
    let (a, b, c) = (
        tiny_dir("det-a"),
        tiny_dir("det-b"),
        TempDir::new("stt-det-c"),
    );
    write_tiny_dir(&c.0, SEED + 1).unwrap();
    let read = |d: &TempDir| std::fs::read(d.0.join(config::LM_FILE)).unwrap();
    assert_eq!(read(&a), read(&b));
    assert_ne!(read(&a), read(&c));
    let run = |d: &TempDir| {
        let mut m = KyutaiStt::load(&d.0, &opts(1)).unwrap();
        let s = m.open_stream().unwrap();
        utterance(&mut m, s, 1, 30)
    };
    let (ra, rb, rc) = (run(&a), run(&b), run(&c));
    assert_eq!(ra, rb);
    assert_ne!(ra, rc);
}

#[test]
fn streams_are_isolated() {
    let dir = tiny_dir("isolated");
    let frames = 30;
    // A alone.
    let mut m1 = KyutaiStt::load(&dir.0, &opts(3)).unwrap();
    let a = m1.open_stream().unwrap();
    let alone = utterance(&mut m1, a, 1, frames);

    // A beside B (another voice) and C (steps every third frame): A is bit-identical.
    let mut m2 = KyutaiStt::load(&dir.0, &opts(3)).unwrap();
    let a = m2.open_stream().unwrap();
    let b = m2.open_stream().unwrap();
    let c = m2.open_stream().unwrap();
    let (mut beside, mut other) = (Vec::new(), Vec::new());
    for f in 0..=frames {
        let end = f == frames;
        let (pa, pb, pc) = if end {
            (Vec::new(), Vec::new(), Vec::new())
        } else {
            (input(1, f), input(3, f), input(5, f))
        };
        let mut batch = vec![
            TranscribeInput {
                stream: b,
                pcm: &pb,
                end: false,
                logprobs: false,
            },
            TranscribeInput {
                stream: a,
                pcm: &pa,
                end,
                logprobs: false,
            },
        ];
        if f % 3 == 0 {
            batch.push(TranscribeInput {
                stream: c,
                pcm: &pc,
                end: false,
                logprobs: true,
            });
        }
        let mut out = Vec::new();
        m2.step(&batch, &mut out);
        assert_eq!(out.len(), batch.len());
        let mut it = out.into_iter();
        other.push((it.next().unwrap().unwrap(), m2.end_of_turn(b).probability));
        beside.push((it.next().unwrap().unwrap(), m2.end_of_turn(a).probability));
    }
    assert_eq!(
        alone, beside,
        "stream A changed when others stepped beside it"
    );
    assert_ne!(
        other[..frames],
        beside[..frames],
        "B (another voice) said the same as A"
    );
}

#[test]
fn a_slot_reused_after_close_or_after_an_utterance_starts_clean() {
    let dir = tiny_dir("reuse");
    let frames = 20;
    // Reference: a stream in a slot never used before, while another slot ran.
    let mut fresh = KyutaiStt::load(&dir.0, &opts(2)).unwrap();
    let other = fresh.open_stream().unwrap();
    let s = fresh.open_stream().unwrap();
    assert_ne!(other, s);
    for f in 0..10 {
        one(&mut fresh, other, &input(2, f), false).unwrap();
    }
    fresh.close_stream(other);
    let reference = utterance(&mut fresh, s, 1, frames);

    // The same slot after a closed stream that talked for 10 frames (no end).
    let mut used = KyutaiStt::load(&dir.0, &opts(2)).unwrap();
    let s = used.open_stream().unwrap();
    for f in 0..10 {
        one(&mut used, s, &input(2, f), false).unwrap();
    }
    used.close_stream(s);
    assert_eq!(used.open_stream().unwrap(), s, "the freed slot is reused");
    assert_eq!(utterance(&mut used, s, 1, frames), reference);
    // The same stream's next utterance starts clean too.
    assert_eq!(utterance(&mut used, s, 1, frames), reference);
    // Slots run out, and come back on close.
    let t = used.open_stream().unwrap();
    assert!(matches!(
        used.open_stream(),
        Err(ModelError::SlotsExhausted(2))
    ));
    used.close_stream(t);
    used.open_stream().unwrap();
}

#[test]
fn same_words_as_upstreams_asr_state() {
    use candle::{DType, Device, Tensor};
    let dir = tiny_dir("upstream");
    let files = SttFiles::find(&dir.0).unwrap();
    let cfg = files.config("stt-1b-en_fr").unwrap();
    let vb = |p: &Path| {
        unsafe { candle_nn::VarBuilder::from_mmaped_safetensors(&[p], DType::F32, &Device::Cpu) }
            .unwrap()
    };
    let lm = LmModel::batched(2, &cfg.lm, MaybeQuantizedVarBuilder::Real(vb(&files.lm))).unwrap();
    let mimi = moshi::mimi::Mimi::batched(2, cfg.mimi.clone(), vb(&files.mimi)).unwrap();
    let mut up = moshi::asr::State::new(2, cfg.asr.delay_tokens, 0.0, mimi, lm).unwrap();
    let text = load_tokenizer(&files.tokenizer, cfg.lm.text_out_vocab_size).unwrap();

    let mut m = KyutaiStt::load(&dir.0, &opts(2)).unwrap();
    let (a, b) = (m.open_stream().unwrap(), m.open_stream().unwrap());
    let frames = 40;
    // Upstream's words per stream, and the end-of-turn estimates of both sides.
    let mut up_words: [Vec<String>; 2] = Default::default();
    let (mut ours, mut theirs) = (
        [String::new(), String::new()],
        [String::new(), String::new()],
    );
    for f in 0..frames {
        // B only hears every other frame (masked out in between).
        let b_steps = f % 2 == 0;
        let (pa, pb) = (input(1, f), input(4, f));
        let mut both = pa.clone();
        both.extend_from_slice(&if b_steps {
            pb.clone()
        } else {
            vec![0.0; FRAME_SAMPLES]
        });
        let pcm = Tensor::from_vec(both, (2, 1, FRAME_SAMPLES), &Device::Cpu).unwrap();
        let mask = StreamMask::new(vec![true, b_steps], &Device::Cpu).unwrap();
        let mut up_eot = [None, None];
        for msg in up.step_pcm(pcm, None, &mask, |_, _, _| ()).unwrap() {
            match msg {
                moshi::asr::AsrMsg::Word {
                    tokens, batch_idx, ..
                } => up_words[batch_idx].push(decode(&text, tokens.into_iter()).trim().into()),
                moshi::asr::AsrMsg::Step { prs, .. } => {
                    up_eot = [Some(prs[2][0]), b_steps.then_some(prs[2][1])];
                }
                moshi::asr::AsrMsg::EndWord { .. } => {}
            }
        }
        let mut batch = vec![TranscribeInput {
            stream: a,
            pcm: &pa,
            end: false,
            logprobs: false,
        }];
        if b_steps {
            batch.push(TranscribeInput {
                stream: b,
                pcm: &pb,
                end: false,
                logprobs: false,
            });
        }
        let mut out = Vec::new();
        m.step(&batch, &mut out);
        for (inp, o) in batch.iter().zip(out) {
            if let TranscribeOutput::Delta { text, .. } = o.unwrap() {
                ours[inp.stream].push_str(&text);
            }
        }
        assert_eq!(m.end_of_turn(a).probability, up_eot[0], "frame {f}");
        if b_steps {
            assert_eq!(m.end_of_turn(b).probability, up_eot[1], "frame {f}");
        }
    }
    for (i, w) in up_words.iter().enumerate() {
        theirs[i] = w
            .iter()
            .filter(|w| !w.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(" ");
    }
    assert_eq!(ours, theirs);
    assert!(
        ours.iter().all(|t| t.split(' ').count() >= 2),
        "too few words to compare: {ours:?}"
    );
    assert_ne!(ours[0], ours[1]);
}

#[test]
fn logprobs_come_with_the_words_when_asked() {
    let dir = tiny_dir("logprobs");
    let mut m = KyutaiStt::load(&dir.0, &opts(1)).unwrap();
    let s = m.open_stream().unwrap();
    let mut all = Vec::new();
    let mut out = Vec::new();
    for f in 0..=30 {
        let pcm = if f < 30 { input(1, f) } else { Vec::new() };
        out.clear();
        m.step(
            &[TranscribeInput {
                stream: s,
                pcm: &pcm,
                end: f == 30,
                logprobs: true,
            }],
            &mut out,
        );
        match out.pop().unwrap().unwrap() {
            TranscribeOutput::Delta { text, logprobs } => {
                assert!(!logprobs.is_empty());
                let joined: String = logprobs.iter().map(|l| l.token.as_str()).collect();
                assert_eq!(joined.trim(), text.trim());
                all.extend(logprobs);
            }
            TranscribeOutput::Completed { text, logprobs, .. } => {
                assert!(logprobs.len() >= all.len() && logprobs.starts_with(&all));
                let joined: String = logprobs.iter().map(|l| l.token.as_str()).collect();
                assert_eq!(joined.trim(), text);
                for l in &logprobs {
                    assert!(l.logprob <= 0.0 && l.logprob.is_finite(), "{l:?}");
                    assert_eq!(l.bytes, l.token.as_bytes());
                }
            }
            TranscribeOutput::NotYet => {}
        }
    }
}

#[test]
fn sampling_with_a_temperature_is_seeded() {
    let dir = tiny_dir("sampled");
    let toml = tiny::TINY_TOML.replace("temperature = 0.0", "temperature = 1.0");
    std::fs::write(dir.0.join(config::CONFIG_FILE), toml).unwrap();
    let run = |seed: u64| {
        let mut m = KyutaiStt::load(
            &dir.0,
            &SttOptions {
                seed: Some(seed),
                ..opts(1)
            },
        )
        .unwrap();
        assert_eq!(m.config().asr.temperature, 1.0);
        let s = m.open_stream().unwrap();
        texts(&utterance(&mut m, s, 1, 30)).1
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn bad_inputs_fail_their_own_stream_only() {
    let dir = tiny_dir("bad");
    let mut m = KyutaiStt::load(&dir.0, &opts(2)).unwrap();
    let a = m.open_stream().unwrap();
    let pcm = input(1, 0);
    let mut out = Vec::new();
    let inp = |stream| TranscribeInput {
        stream,
        pcm: &pcm,
        end: false,
        logprobs: false,
    };
    m.step(&[inp(9), inp(a), inp(a), inp(1)], &mut out);
    assert!(matches!(out[0], Err(ModelError::UnknownSlot(9))));
    assert_eq!(out[1].as_ref().unwrap(), &TranscribeOutput::NotYet);
    let e = out[2].as_ref().unwrap_err().to_string();
    assert!(e.contains("twice"), "{e}");
    assert!(matches!(out[3], Err(ModelError::UnknownSlot(1))));
    assert_eq!(m.model_steps(), 1);

    // NaN and inf samples count as silence.
    let mut bad = vec![0f32; FRAME_SAMPLES];
    bad[7] = f32::NAN;
    bad[9] = f32::INFINITY;
    bad[11] = f32::NEG_INFINITY;
    let b = m.open_stream().unwrap();
    let mut quiet = KyutaiStt::load(&dir.0, &opts(2)).unwrap();
    let (qa, qb) = (quiet.open_stream().unwrap(), quiet.open_stream().unwrap());
    one(&mut quiet, qa, &pcm, false).unwrap();
    for _ in 0..10 {
        let x = one(&mut m, b, &bad, false).unwrap();
        let y = one(&mut quiet, qb, &[0f32; FRAME_SAMPLES], false).unwrap();
        assert_eq!(x, y);
        assert_eq!(m.end_of_turn(b), quiet.end_of_turn(qb));
    }
}

#[test]
fn mismatched_or_missing_files_are_clear_errors() {
    let dir = tiny_dir("mismatch");
    let toml = tiny::TINY_TOML.replacen("d_model = 64", "d_model = 128", 1);
    std::fs::write(dir.0.join(config::CONFIG_FILE), toml).unwrap();
    let e = KyutaiStt::load(&dir.0, &opts(1)).err().unwrap().to_string();
    assert!(
        e.contains("model.safetensors")
            && e.contains("does not match")
            && e.contains("duet-stt.toml"),
        "{e}"
    );
    // Without `duet-stt.toml` the tiny files are checked against the full-size preset.
    std::fs::remove_file(dir.0.join(config::CONFIG_FILE)).unwrap();
    let e = KyutaiStt::load(&dir.0, &opts(1)).err().unwrap().to_string();
    assert!(
        e.contains("tokenizer_en_fr_audio_8000.model has 100 pieces")
            && e.contains("text vocabulary is 8000"),
        "{e}"
    );

    let dir = tiny_dir("tokenizer");
    std::fs::write(dir.0.join(config::TEXT_TOKENIZER), b"\xff\xff").unwrap();
    let e = KyutaiStt::load(&dir.0, &opts(1)).err().unwrap().to_string();
    assert!(e.contains("not a SentencePiece model"), "{e}");

    let dir = tiny_dir("truncated");
    std::fs::write(dir.0.join(config::MIMI_FILE), b"\x08\0\0\0\0\0\0\0{}").unwrap();
    let e = KyutaiStt::load(&dir.0, &opts(1)).err().unwrap().to_string();
    assert!(e.contains(config::MIMI_FILE), "{e}");

    let dir = tiny_dir("missing");
    std::fs::remove_file(dir.0.join(config::LM_FILE)).unwrap();
    let e = KyutaiStt::load(&dir.0, &opts(1)).err().unwrap().to_string();
    assert!(e.contains("missing model.safetensors;"), "{e}");

    let dir = tiny_dir("zero");
    let e = KyutaiStt::load(&dir.0, &opts(0)).err().unwrap().to_string();
    assert!(e.contains("max_streams"), "{e}");
    let e = KyutaiStt::load(
        &dir.0,
        &SttOptions {
            preset: "stt-9b".into(),
            ..opts(1)
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("unknown Kyutai STT preset"), "{e}");
    if !cfg!(feature = "cuda") {
        let e = KyutaiStt::load(
            &dir.0,
            &SttOptions {
                device: DeviceSpec::Cuda(0),
                ..opts(1)
            },
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("--features cuda"), "{e}");
    }
}

#[test]
fn the_files_hold_what_the_loader_asks_for_and_the_preset_is_the_release() {
    // Duet's loader reads a subset of upstream's files (no Mimi decoder).
    let t = tiny::tiny_config();
    let files = tiny::schema(&t).unwrap();
    let loader = tiny::loader_schema(&t).unwrap();
    assert!(loader.len() < files.len());
    for entry in &loader {
        assert!(files.contains(entry), "{entry:?} is not in the files");
    }
    // The full-size preset has the release's 135 LM tensors and 989,253,632 parameters
    // (counted from the published checkpoint's header).
    let full = tiny::schema(&SttConfig::stt_1b_en_fr()).unwrap();
    let lm: Vec<_> = full.iter().filter(|(n, _)| n.starts_with("lm:")).collect();
    assert_eq!(lm.len(), 135);
    let params: usize = lm.iter().map(|(_, s)| s.iter().product::<usize>()).sum();
    assert_eq!(params, 989_253_632);
    for head in 0..4 {
        assert!(lm
            .iter()
            .any(|(n, s)| n == &format!("lm:extra_heads.{head}.weight") && s == &[6, 2048]));
    }
}
