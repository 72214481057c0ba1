use std::collections::HashMap;
use std::path::PathBuf;

use candle::{Device, Tensor, D};

use super::*;

/// Deterministic test audio: two tones, a chirp and some noise, about -15 dBFS.
fn audio(n: usize, rate: f32, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let noise = (state as f32 / u32::MAX as f32) * 2.0 - 1.0;
            let t = i as f32 / rate;
            let tone = (2.0 * std::f32::consts::PI * (180.0 + 40.0 * seed as f32) * t).sin()
                + 0.5 * (2.0 * std::f32::consts::PI * (900.0 + 300.0 * t) * t).sin();
            let env = 0.5 + 0.5 * (2.0 * std::f32::consts::PI * 3.0 * t).sin();
            0.15 * env * tone + 0.03 * noise
        })
        .collect()
}

/// The network written op by op after the reference Python model (`tinygrad_model.py` in
/// the silero-vad package), with candle's convolutions.
fn reference(tensors: &HashMap<String, Tensor>, audio: &[f32]) -> Vec<f32> {
    let dev = Device::Cpu;
    let w = |n: &str| tensors[n].clone();
    let conv = |x: &Tensor, name: &str, stride: usize| {
        let b = w(&format!("{name}.bias"));
        let c = b.dims1().unwrap();
        x.conv1d(&w(&format!("{name}.weight")), 1, stride, 1, 1)
            .unwrap()
            .broadcast_add(&b.reshape((1, c, 1)).unwrap())
            .unwrap()
            .relu()
            .unwrap()
    };
    let mut context = vec![0.0f32; CONTEXT_SAMPLES];
    let mut h = Tensor::zeros((1, HIDDEN), candle::DType::F32, &dev).unwrap();
    let mut c = h.clone();
    let mut probs = Vec::new();
    for chunk in audio.chunks_exact(CHUNK_SAMPLES) {
        let mut x = context.clone();
        x.extend_from_slice(chunk);
        for i in 0..CONTEXT_SAMPLES {
            x.push(x[WINDOW - 2 - i]);
        }
        context = chunk[CHUNK_SAMPLES - CONTEXT_SAMPLES..].to_vec();
        let x = Tensor::from_vec(x, (1, 1, PADDED), &dev).unwrap();
        let x = x.conv1d(&w("stft_conv.weight"), 0, HOP, 1, 1).unwrap();
        let re = x.narrow(1, 0, BINS).unwrap();
        let im = x.narrow(1, BINS, BINS).unwrap();
        let x = (re.sqr().unwrap() + im.sqr().unwrap())
            .unwrap()
            .sqrt()
            .unwrap();
        let x = conv(&x, "conv1", 1);
        let x = conv(&x, "conv2", 2);
        let x = conv(&x, "conv3", 2);
        let x = conv(&x, "conv4", 1).squeeze(D::Minus1).unwrap();
        let gates = (x.matmul(&w("lstm_cell.weight_ih").t().unwrap()).unwrap()
            + h.matmul(&w("lstm_cell.weight_hh").t().unwrap()).unwrap())
        .unwrap()
        .broadcast_add(&w("lstm_cell.bias_ih"))
        .unwrap()
        .broadcast_add(&w("lstm_cell.bias_hh"))
        .unwrap();
        let g = gates.chunk(4, 1).unwrap();
        let sig = |t: &Tensor| candle_nn::ops::sigmoid(t).unwrap();
        c = ((sig(&g[1]) * &c).unwrap() + (sig(&g[0]) * g[2].tanh().unwrap()).unwrap()).unwrap();
        h = (sig(&g[3]) * c.tanh().unwrap()).unwrap();
        let y = h
            .unsqueeze(D::Minus1)
            .unwrap()
            .relu()
            .unwrap()
            .conv1d(&w("final_conv.weight"), 0, 1, 1, 1)
            .unwrap()
            .broadcast_add(&w("final_conv.bias").reshape((1, 1, 1)).unwrap())
            .unwrap();
        let p = sig(&y).mean(D::Minus1).unwrap().flatten_all().unwrap();
        probs.push(p.to_vec1::<f32>().unwrap()[0]);
    }
    probs
}

/// Runs `audio` (whole chunks, 16 kHz) through one fresh stream.
fn run(vad: &SileroVad, stream: &mut SileroStream, audio: &[f32]) -> Vec<f32> {
    audio
        .chunks_exact(CHUNK_SAMPLES)
        .map(|c| vad.forward(&mut [&mut *stream], &[c]).unwrap()[0])
        .collect()
}

fn assert_close(a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol, "item {i}: {x} vs {y}");
    }
}

#[test]
fn matches_the_reference_network() {
    for seed in [1, 2] {
        let tensors = SileroVad::random_tensors(seed);
        let vad = SileroVad::from_tensors(&tensors).unwrap();
        let pcm = audio(CHUNK_SAMPLES * 6, 16_000.0, seed as u32);
        let want = reference(&tensors, &pcm);
        let got = run(&vad, &mut vad.stream(), &pcm);
        assert_close(&got, &want, 1e-5);
        // Random weights still give probabilities that move with the input.
        assert!(want.iter().any(|&p| (p - want[0]).abs() > 1e-4), "{want:?}");
    }
}

#[test]
fn one_probability_per_stream_in_range() {
    let vad = SileroVad::random(3);
    let mut streams: Vec<SileroStream> = (0..5).map(|_| vad.stream()).collect();
    let pcm: Vec<Vec<f32>> = (0..5).map(|i| audio(CHUNK_SAMPLES, 16_000.0, i)).collect();
    let chunks: Vec<&[f32]> = pcm.iter().map(Vec::as_slice).collect();
    let mut refs: Vec<&mut SileroStream> = streams.iter_mut().collect();
    let probs = vad.forward(&mut refs, &chunks).unwrap();
    assert_eq!(probs.len(), 5);
    assert!(probs.iter().all(|p| (0.0..=1.0).contains(p)), "{probs:?}");
    assert!(vad.forward(&mut [], &[]).unwrap().is_empty());
    let mut out = vec![7.0];
    vad.forward_into(&mut refs[..2], &chunks[..2], &mut out)
        .unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(out[0], 7.0);
}

#[test]
fn batch_equals_single_forwards() {
    let vad = SileroVad::random(4);
    let n = 7;
    let pcm: Vec<Vec<f32>> = (0..n)
        .map(|i| audio(CHUNK_SAMPLES * 3, 16_000.0, i as u32))
        .collect();
    let single: Vec<Vec<f32>> = pcm
        .iter()
        .map(|a| run(&vad, &mut vad.stream(), a))
        .collect();
    let mut streams: Vec<SileroStream> = (0..n).map(|_| vad.stream()).collect();
    for k in 0..3 {
        let chunks: Vec<&[f32]> = pcm
            .iter()
            .map(|a| &a[k * CHUNK_SAMPLES..(k + 1) * CHUNK_SAMPLES])
            .collect();
        let mut refs: Vec<&mut SileroStream> = streams.iter_mut().collect();
        let probs = vad.forward(&mut refs, &chunks).unwrap();
        let want: Vec<f32> = single.iter().map(|s| s[k]).collect();
        assert_close(&probs, &want, 1e-5);
    }
}

#[test]
fn state_carries_across_chunks_and_reset_forgets_it() {
    let vad = SileroVad::random(5);
    let pcm = audio(CHUNK_SAMPLES * 4, 16_000.0, 9);
    let mut stream = vad.stream();
    let first = run(&vad, &mut stream, &pcm);
    // Same chunk again, fresh state each time: differs from the carried state.
    let fresh: Vec<f32> = pcm
        .chunks_exact(CHUNK_SAMPLES)
        .map(|c| vad.forward(&mut [&mut vad.stream()], &[c]).unwrap()[0])
        .collect();
    assert_eq!(first[0], fresh[0]);
    assert!(first[1..]
        .iter()
        .zip(&fresh[1..])
        .any(|(a, b)| (a - b).abs() > 1e-6));
    // After reset the stream replays exactly.
    assert_ne!(stream, vad.stream());
    stream.reset();
    assert_eq!(stream, vad.stream());
    assert_eq!(run(&vad, &mut stream, &pcm), first);
}

#[test]
fn deterministic() {
    let pcm = audio(CHUNK_SAMPLES * 3, 16_000.0, 2);
    let a = run(&SileroVad::random(6), &mut SileroStream::new(), &pcm);
    let b = run(&SileroVad::random(6), &mut SileroStream::new(), &pcm);
    let vad = SileroVad::random(6);
    let c = run(&vad.clone(), &mut vad.stream(), &pcm);
    assert_eq!(a, b);
    assert_eq!(a, c);
    let other = run(&SileroVad::random(7), &mut SileroStream::new(), &pcm);
    assert_ne!(a, other);
}

#[test]
fn bad_input_is_an_error_and_leaves_streams_alone() {
    let vad = SileroVad::random(8);
    let mut s = vad.stream();
    let pcm = audio(CHUNK_SAMPLES, 16_000.0, 1);
    vad.forward(&mut [&mut s], &[&pcm]).unwrap();
    let before = s.clone();
    let short = vec![0.0; CHUNK_SAMPLES - 1];
    match vad.forward(&mut [&mut s], &[&short]) {
        Err(ModelError::BadFrame { got, expected }) => {
            assert_eq!((got, expected), (CHUNK_SAMPLES - 1, CHUNK_SAMPLES))
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        vad.forward(&mut [&mut s], &[&pcm, &pcm]),
        Err(ModelError::Failed(_))
    ));
    assert_eq!(s, before);
    // NaN and infinities count as silence.
    let mut bad = pcm.clone();
    bad[3] = f32::NAN;
    bad[500] = f32::INFINITY;
    let p = vad.forward(&mut [&mut s], &[&bad]).unwrap()[0];
    assert!(p.is_finite());
    assert!(s
        .h
        .iter()
        .chain(&s.c)
        .chain(&s.context)
        .all(|v| v.is_finite()));
}

#[test]
fn shareable() {
    fn check<T: Clone + Send + Sync + 'static>() {}
    check::<SileroVad>();
    check::<SileroStream>();
    fn send<T: Send>() {}
    send::<SileroDetector>();
    let vad = SileroVad::random(1);
    let pcm = audio(CHUNK_SAMPLES * 2, 16_000.0, 1);
    let want = run(&vad, &mut vad.stream(), &pcm);
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let vad = vad.clone();
            let pcm = pcm.clone();
            std::thread::spawn(move || run(&vad, &mut vad.stream(), &pcm))
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), want);
    }
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("duet-silero-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn load_err(dir: &Path) -> String {
    match SileroVad::load(dir) {
        Err(ModelError::Failed(msg)) => msg,
        Err(other) => panic!("unexpected error {other:?}"),
        Ok(_) => panic!("loaded from {}", dir.display()),
    }
}

#[test]
fn loads_a_weights_file() {
    let dir = TempDir::new("ok");
    let tensors = SileroVad::random_tensors(11);
    candle::safetensors::save(&tensors, dir.0.join(WEIGHTS_FILE)).unwrap();
    let loaded = SileroVad::load(&dir.0).unwrap();
    let pcm = audio(CHUNK_SAMPLES * 2, 16_000.0, 4);
    let want = run(&SileroVad::random(11), &mut SileroStream::new(), &pcm);
    assert_eq!(run(&loaded, &mut loaded.stream(), &pcm), want);
}

#[test]
fn load_errors_name_the_file_and_the_installer() {
    let dir = TempDir::new("errors");
    let missing_dir = dir.0.join("nope");
    let msg = load_err(&missing_dir);
    assert!(msg.contains("does not exist"), "{msg}");
    assert!(msg.contains(WEIGHTS_FILE), "{msg}");
    assert!(msg.contains("scripts/install-models DIR"), "{msg}");
    assert!(msg.contains("--vad-model-dir DIR/silero-vad"), "{msg}");

    let msg = load_err(&dir.0);
    assert!(
        msg.contains("not found") && msg.contains(WEIGHTS_FILE),
        "{msg}"
    );
    assert!(msg.contains("scripts/install-models DIR"), "{msg}");

    let file = dir.0.join(WEIGHTS_FILE);
    std::fs::write(&file, b"not a safetensors file").unwrap();
    let msg = load_err(&dir.0);
    assert!(
        msg.contains("unreadable") && msg.contains(WEIGHTS_FILE),
        "{msg}"
    );

    let mut tensors = SileroVad::random_tensors(1);
    tensors.insert(
        "conv2.weight".into(),
        Tensor::zeros((64, 128, 5), candle::DType::F32, &Device::Cpu).unwrap(),
    );
    candle::safetensors::save(&tensors, &file).unwrap();
    let msg = load_err(&dir.0);
    assert!(
        msg.contains("conv2.weight")
            && msg.contains("[64, 128, 5]")
            && msg.contains("[64, 128, 3]"),
        "{msg}"
    );
    assert!(
        msg.contains(WEIGHTS_FILE) && msg.contains("scripts/install-models DIR"),
        "{msg}"
    );

    let mut tensors = SileroVad::random_tensors(1);
    let w = tensors.remove("lstm_cell.weight_hh").unwrap();
    tensors.insert("lstm.weight_hh".into(), w);
    candle::safetensors::save(&tensors, &file).unwrap();
    let msg = load_err(&dir.0);
    assert!(
        msg.contains("lstm_cell.weight_hh") && msg.contains("missing"),
        "{msg}"
    );
}

#[test]
fn other_float_dtypes_are_converted() {
    let tensors: HashMap<String, Tensor> = SileroVad::random_tensors(2)
        .into_iter()
        .map(|(k, v)| (k, v.to_dtype(candle::DType::F64).unwrap()))
        .collect();
    let vad = SileroVad::from_tensors(&tensors).unwrap();
    let pcm = audio(CHUNK_SAMPLES, 16_000.0, 4);
    let want = run(&SileroVad::random(2), &mut SileroStream::new(), &pcm);
    assert_close(&run(&vad, &mut vad.stream(), &pcm), &want, 1e-6);

    let mut ints = SileroVad::random_tensors(2);
    ints.insert(
        "final_conv.bias".into(),
        Tensor::zeros(1, candle::DType::U32, &Device::Cpu).unwrap(),
    );
    assert!(SileroVad::from_tensors(&ints).is_err());
}

/// Feeds `pcm` in pieces of `split` samples.
fn detect(det: &mut SileroDetector, pcm: &[f32], split: usize) -> Vec<ChunkProbability> {
    let mut out = Vec::new();
    for piece in pcm.chunks(split) {
        det.push(piece, &mut out).unwrap();
    }
    out
}

#[test]
fn detector_positions_and_splits() {
    let vad = SileroVad::random(12);
    let pcm = audio(24_000 * 2, 24_000.0, 3);
    let mut det = SileroDetector::new(vad.clone()).unwrap();
    let a = detect(&mut det, &pcm, 480);
    assert_eq!(det.position(), pcm.len() as u64);
    // 2 s = 62.5 chunks; all but the last (delayed by the resampler) are out.
    assert!(a.len() == 61 || a.len() == 62, "{}", a.len());
    for (k, c) in a.iter().enumerate() {
        assert_eq!(c.start, k as u64 * DETECTOR_CHUNK);
        assert_eq!(c.len, DETECTOR_CHUNK);
        assert!((0.0..=1.0).contains(&c.probability));
    }
    for split in [1, 7, 333, 768, 5000, pcm.len()] {
        let mut det = SileroDetector::new(vad.clone()).unwrap();
        assert_eq!(detect(&mut det, &pcm, split), a, "split {split}");
    }
    // The detector equals the model run on the resampled audio, lead-in dropped.
    let mut r = StreamResampler::new(24_000, 16_000).unwrap();
    let mut pcm16 = Vec::new();
    r.process(&pcm, &mut pcm16);
    let pcm16 = &pcm16[r.delay_samples()..];
    let want = run(&vad, &mut vad.stream(), pcm16);
    let got: Vec<f32> = a.iter().map(|c| c.probability).collect();
    assert_eq!(got, want[..got.len()]);
}

#[test]
fn detector_reset_keeps_the_position() {
    let vad = SileroVad::random(13);
    let pcm = audio(24_000, 24_000.0, 5);
    let mut det = SileroDetector::new(vad.clone()).unwrap();
    let first = detect(&mut det, &pcm, 480);
    let mut out = Vec::new();
    det.push(&pcm[..1000], &mut out).unwrap();
    det.reset();
    assert_eq!(det.position(), 25_000);
    let again = detect(&mut det, &pcm, 480);
    assert_eq!(again.len(), first.len());
    for (a, b) in again.iter().zip(&first) {
        assert_eq!(a.start, b.start + 25_000);
        assert_eq!(a.probability, b.probability);
    }
    let empty = SileroDetector::new(vad).unwrap();
    assert_eq!(empty.position(), 0);
    assert!(format!("{empty:?}").contains("SileroDetector"));
}

#[test]
fn a_chunk_under_the_voice_floor_is_silence_whatever_the_network_says() {
    let vad = SileroVad::random(14);
    // Loud audio, then a stretch at -66 dBFS, then digital silence.
    let mut pcm = audio(24_000, 24_000.0, 7);
    let quiet: Vec<f32> = audio(24_000, 24_000.0, 8)
        .iter()
        .map(|s| s * 0.0005)
        .collect();
    pcm.extend(&quiet);
    pcm.extend(vec![0.0; 24_000]);
    let mut det = SileroDetector::new(vad.clone()).unwrap();
    let got = detect(&mut det, &pcm, 480);
    // The same network without the gate: what it says of every chunk.
    let mut r = StreamResampler::new(24_000, 16_000).unwrap();
    let mut pcm16 = Vec::new();
    r.process(&pcm, &mut pcm16);
    let pcm16 = &pcm16[r.delay_samples()..];
    let want = run(&vad, &mut vad.stream(), pcm16);
    let mut gated = 0;
    for (k, c) in got.iter().enumerate() {
        let chunk = &pcm16[k * 512..(k + 1) * 512];
        let rms = (chunk.iter().map(|s| s * s).sum::<f32>() / 512.0).sqrt();
        if rms < SILENT_RMS {
            assert_eq!(c.probability, 0.0, "chunk {k} at rms {rms}");
            gated += usize::from(want[k] > 0.0);
        } else {
            assert_eq!(c.probability, want[k], "chunk {k}: the network's own");
        }
    }
    assert!(
        gated > 20,
        "the network gave the quiet chunks a probability: {gated}"
    );
}
