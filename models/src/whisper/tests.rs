//! Whisper tests without real weights: the CTranslate2 reader on hand-written files, the
//! converter and loader on a tiny seeded-random Whisper, the tokenizer, the mel front end and
//! the stream bookkeeping. `models/tests/whisper_real.rs` runs the real tiny.en.

use std::path::{Path, PathBuf};

use candle::Device;
use rand::{Rng, SeedableRng};

use super::ct2::{self, Ct2Model, Dtype};
use super::mel::{mel_filters, MelFrontend, N_FREQ};
use super::tokenizer::Tokenizer;
use super::*;
use crate::{TranscribeInput, TranscribeOutput, Transcriber};

fn f16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
        .collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A temporary directory, removed when dropped.
pub(super) struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(tag: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!(
        "duet-whisper-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

#[test]
fn ct2_round_trip() {
    let w = f16_bytes(&[1.0, -2.0, 0.5, 3.0, 0.25, -0.125]);
    let b = f32_bytes(&[7.5, -1.0]);
    let bf: Vec<u8> = [1.5f32, -4.0]
        .iter()
        .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
        .collect();
    let bytes = ct2::write(
        "WhisperSpec",
        3,
        &[
            ("a/weight", &[2, 3], Dtype::F16, &w),
            ("a/bias", &[2], Dtype::F32, &b),
            ("a/bf", &[2], Dtype::Bf16, &bf),
            ("heads", &[], Dtype::I16, &6i16.to_le_bytes()),
            ("flag", &[], Dtype::I8, &[1]),
        ],
        &[("proj", "a/weight")],
    );
    let m = Ct2Model::parse(bytes).unwrap();
    assert_eq!(m.version, ct2::VERSION);
    assert_eq!(m.spec, "WhisperSpec");
    assert_eq!(m.revision, 3);
    assert_eq!(m.variables.len(), 5);
    assert_eq!(
        m.aliases,
        vec![("proj".to_string(), "a/weight".to_string())]
    );
    let v = m.get("a/weight").unwrap();
    assert_eq!(v.dims, vec![2, 3]);
    assert_eq!(v.dtype, Dtype::F16);
    assert_eq!(
        m.floats(v).unwrap(),
        vec![1.0, -2.0, 0.5, 3.0, 0.25, -0.125]
    );
    assert_eq!(m.floats(m.get("a/bias").unwrap()).unwrap(), vec![7.5, -1.0]);
    assert_eq!(m.floats(m.get("a/bf").unwrap()).unwrap(), vec![1.5, -4.0]);
    assert_eq!(m.int_scalar("heads").unwrap(), 6);
    assert_eq!(m.int_scalar("flag").unwrap(), 1);
    assert!(m.floats(m.get("heads").unwrap()).is_err());
}

#[test]
fn ct2_rejects_damaged_files() {
    let w = f32_bytes(&[1.0, 2.0]);
    let good = ct2::write("WhisperSpec", 3, &[("w", &[2], Dtype::F32, &w)], &[]);
    assert!(Ct2Model::parse(good.clone()).is_ok());

    for cut in [3, 10, good.len() - 1] {
        let e = Ct2Model::parse(good[..cut].to_vec()).unwrap_err();
        assert!(e.contains("truncated"), "{cut}: {e}");
    }
    let mut trailing = good.clone();
    trailing.push(0);
    assert!(Ct2Model::parse(trailing)
        .unwrap_err()
        .contains("unexpected bytes"));

    let mut version = good.clone();
    version[..4].copy_from_slice(&5u32.to_le_bytes());
    assert!(Ct2Model::parse(version)
        .unwrap_err()
        .contains("binary version 5"));

    // Size that does not match the dimensions.
    let lying = ct2::write("WhisperSpec", 3, &[("w", &[3], Dtype::F32, &w)], &[]);
    let e = Ct2Model::parse(lying).unwrap_err();
    assert!(e.contains("w: 8 data bytes"), "{e}");

    // A huge count must fail before allocating.
    let mut huge = good.clone();
    let at = 4 + 2 + "WhisperSpec".len() + 1 + 4;
    huge[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(Ct2Model::parse(huge).unwrap_err().contains("truncated"));

    let dup = ct2::write(
        "WhisperSpec",
        3,
        &[("w", &[2], Dtype::F32, &w), ("w", &[2], Dtype::F32, &w)],
        &[],
    );
    assert!(Ct2Model::parse(dup).unwrap_err().contains("twice"));

    let bad_type = {
        let mut b = good.clone();
        // name "w": u16 2 + "w\0", then rank 1, one dim, then the type byte.
        let at = 4 + 2 + 12 + 4 + 4 + 4 + 1 + 4;
        b[at] = 9;
        b
    };
    assert!(Ct2Model::parse(bad_type)
        .unwrap_err()
        .contains("unknown data type 9"));
}

/// Dimensions of the tiny test Whisper.
const D: usize = 8;
const VOCAB: usize = 20;
const TEXT_CTX: usize = 32;
const AUDIO_CTX: usize = 1500;
const MELS: usize = 80;

/// A tokenizer.json for the tiny vocabulary: ids 0..14 text, then the specials.
fn tiny_tokenizer_json() -> String {
    let text = [
        "a", "b", "c", "Ġhello", "Ġworld", ".", "Ã©", "Ã", "©", "Ċ", "x", "y", "z", "!",
    ];
    let vocab: Vec<String> = text
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{t:?}: {i}"))
        .chain(std::iter::once("\"<|endoftext|>\": 14".to_string()))
        .collect();
    let specials = [
        (14, "<|endoftext|>"),
        (15, "<|startoftranscript|>"),
        (16, "<|notimestamps|>"),
        (17, "<|nocaptions|>"),
        (18, "<|transcribe|>"),
        (19, "<|startofprev|>"),
    ];
    let added: Vec<String> = specials
        .iter()
        .map(|(id, c)| format!(r#"{{"id": {id}, "content": "{c}", "special": true}}"#))
        .collect();
    format!(
        r#"{{"version": "1.0", "added_tokens": [{}], "decoder": {{"type": "ByteLevel"}},
            "model": {{"type": "BPE", "vocab": {{{}}}, "merges": []}}}}"#,
        added.join(", "),
        vocab.join(", ")
    )
}

/// The variables of a tiny CTranslate2 Whisper (1 + 1 layers, d 8, 2 heads).
fn tiny_ct2(seed: u64) -> Vec<(String, Vec<usize>, Dtype, Vec<u8>)> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut vars: Vec<(String, Vec<usize>, Dtype, Vec<u8>)> = Vec::new();
    let mut rand = |name: &str, dims: &[usize], scale: f32| {
        let n: usize = dims.iter().product();
        let v: Vec<f32> = (0..n).map(|_| rng.random_range(-scale..scale)).collect();
        (name.to_string(), dims.to_vec(), Dtype::F16, f16_bytes(&v))
    };
    let ones = |name: &str| (name.to_string(), vec![D], Dtype::F16, f16_bytes(&[1.0; D]));
    let zeros = |name: &str, n: usize| {
        (
            name.to_string(),
            vec![n],
            Dtype::F16,
            f16_bytes(&vec![0.0; n]),
        )
    };
    vars.push(rand("encoder/conv1/weight", &[D, MELS, 3], 0.1));
    vars.push(rand("encoder/conv1/bias", &[D], 0.1));
    vars.push(rand("encoder/conv2/weight", &[D, D, 3], 0.3));
    vars.push(rand("encoder/conv2/bias", &[D], 0.1));
    for side in ["encoder", "decoder"] {
        let l = format!("{side}/layer_0");
        vars.push(ones(&format!("{l}/self_attention/layer_norm/gamma")));
        vars.push(zeros(&format!("{l}/self_attention/layer_norm/beta"), D));
        vars.push(rand(
            &format!("{l}/self_attention/linear_0/weight"),
            &[3 * D, D],
            0.3,
        ));
        vars.push(rand(
            &format!("{l}/self_attention/linear_0/bias"),
            &[3 * D],
            0.1,
        ));
        vars.push(rand(
            &format!("{l}/self_attention/linear_1/weight"),
            &[D, D],
            0.3,
        ));
        vars.push(rand(
            &format!("{l}/self_attention/linear_1/bias"),
            &[D],
            0.1,
        ));
        if side == "decoder" {
            vars.push(ones(&format!("{l}/attention/layer_norm/gamma")));
            vars.push(zeros(&format!("{l}/attention/layer_norm/beta"), D));
            vars.push(rand(
                &format!("{l}/attention/linear_0/weight"),
                &[D, D],
                0.3,
            ));
            vars.push(rand(&format!("{l}/attention/linear_0/bias"), &[D], 0.1));
            vars.push(rand(
                &format!("{l}/attention/linear_1/weight"),
                &[2 * D, D],
                0.3,
            ));
            vars.push(rand(&format!("{l}/attention/linear_1/bias"), &[2 * D], 0.1));
            vars.push(rand(
                &format!("{l}/attention/linear_2/weight"),
                &[D, D],
                0.3,
            ));
            vars.push(rand(&format!("{l}/attention/linear_2/bias"), &[D], 0.1));
        }
        vars.push(ones(&format!("{l}/ffn/layer_norm/gamma")));
        vars.push(zeros(&format!("{l}/ffn/layer_norm/beta"), D));
        vars.push(rand(&format!("{l}/ffn/linear_0/weight"), &[4 * D, D], 0.3));
        vars.push(rand(&format!("{l}/ffn/linear_0/bias"), &[4 * D], 0.1));
        vars.push(rand(&format!("{l}/ffn/linear_1/weight"), &[D, 4 * D], 0.3));
        vars.push(rand(&format!("{l}/ffn/linear_1/bias"), &[D], 0.1));
        vars.push(ones(&format!("{side}/layer_norm/gamma")));
        vars.push(zeros(&format!("{side}/layer_norm/beta"), D));
        let heads = (
            format!("{side}/num_heads"),
            vec![],
            Dtype::I16,
            2i16.to_le_bytes().to_vec(),
        );
        vars.push(heads);
    }
    let pos: Vec<f32> = super::convert::tests_sinusoids(AUDIO_CTX, D);
    vars.push((
        "encoder/position_encodings/encodings".into(),
        vec![AUDIO_CTX, D],
        Dtype::F16,
        f16_bytes(&pos),
    ));
    vars.push(rand("decoder/embeddings/weight", &[VOCAB, D], 1.0));
    vars.push(rand(
        "decoder/position_encodings/encodings",
        &[TEXT_CTX, D],
        0.1,
    ));
    for (name, v) in [
        ("decoder/pre_norm", 1i8),
        ("decoder/activation", 3),
        ("decoder/alibi", 0),
        ("decoder/scale_embeddings", 0),
        ("decoder/start_from_zero_embedding", 0),
    ] {
        vars.push((name.into(), vec![], Dtype::I8, vec![v as u8]));
    }
    vars
}

fn write_ct2_dir(dir: &Path, vars: &[(String, Vec<usize>, Dtype, Vec<u8>)], spec: &str) {
    let refs: Vec<(&str, &[usize], Dtype, &[u8])> = vars
        .iter()
        .map(|(n, d, t, b)| (n.as_str(), d.as_slice(), *t, b.as_slice()))
        .collect();
    let bin = ct2::write(
        spec,
        3,
        &refs,
        &[("decoder/projection/weight", "decoder/embeddings/weight")],
    );
    std::fs::write(dir.join("model.bin"), bin).unwrap();
    std::fs::write(
        dir.join("config.json"),
        r#"{"suppress_ids": [1, 2], "suppress_ids_begin": [13, 14], "lang_ids": []}"#,
    )
    .unwrap();
    std::fs::write(dir.join("tokenizer.json"), tiny_tokenizer_json()).unwrap();
}

/// Converts a tiny random Whisper into `tag`'s temporary directory (`ct2/` the source,
/// `whisper/` the result); returns the directory and the result.
pub(super) fn tiny_model_dir(tag: &str) -> (TempDir, PathBuf) {
    let root = temp_dir(tag);
    let from = root.join("ct2");
    let out = root.join("whisper");
    std::fs::create_dir_all(&from).unwrap();
    write_ct2_dir(&from, &tiny_ct2(7), "WhisperSpec");
    let report = convert_ct2(&from, &out).unwrap();
    assert!(report.contains("f32 tensors"), "{report}");
    (root, out)
}

#[test]
fn converts_and_loads_a_tiny_whisper() {
    let (_root, out) = tiny_model_dir("convert");
    for f in [WEIGHTS_FILE, CONFIG_FILE, TOKENIZER_FILE, CHECKSUM_FILE] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let sums = std::fs::read_to_string(out.join(CHECKSUM_FILE)).unwrap();
    assert_eq!(sums.lines().count(), 3);
    for line in sums.lines() {
        let (hex, name) = line.split_once("  ").unwrap();
        assert_eq!(sha256_file(&out.join(name)).unwrap(), hex);
    }
    let tensors = candle::safetensors::load(out.join(WEIGHTS_FILE), &Device::Cpu).unwrap();
    // 4 conv + 15 per encoder layer + 2, 2 embeddings + 24 per decoder layer + 2.
    assert_eq!(tensors.len(), 4 + 15 + 2 + 2 + 24 + 2);
    assert!(!tensors.contains_key("model.encoder.layers.0.self_attn.k_proj.bias"));
    assert_eq!(
        tensors["model.decoder.layers.0.encoder_attn.v_proj.bias"].dims(),
        &[D]
    );
    let cfg: DirConfig =
        serde_json::from_str(&std::fs::read_to_string(out.join(CONFIG_FILE)).unwrap()).unwrap();
    assert_eq!(cfg.d_model, D);
    assert_eq!(cfg.vocab_size, VOCAB);
    assert_eq!(cfg.encoder_attention_heads, 2);
    assert_eq!(cfg.suppress_tokens, vec![1, 2]);
    assert_eq!(cfg.begin_suppress_tokens, vec![13, 14]);
    assert_eq!(cfg.name, "whisper");
    // Same input, same bytes (the checksums are reproducible).
    let again = out.with_file_name("again");
    convert_ct2(&out.with_file_name("ct2"), &again).unwrap();
    assert_eq!(
        std::fs::read_to_string(again.join(CHECKSUM_FILE)).unwrap(),
        sums
    );

    let t = WhisperTranscriber::load(&out, &Device::Cpu, 2).unwrap();
    assert_eq!(t.info().max_streams, 2);
    assert!(!t.info().streaming);
    assert_eq!(t.window(), EncoderWindow::Fit);
}

#[test]
fn converter_errors_name_the_problem() {
    let root = temp_dir("convert-errors");
    let from = root.join("ct2");
    std::fs::create_dir_all(&from).unwrap();
    let out = root.join("out");

    let e = convert_ct2(&from, &out).unwrap_err().to_string();
    assert!(e.contains("missing model.bin"), "{e}");

    write_ct2_dir(&from, &tiny_ct2(1), "TransformerSpec");
    let e = convert_ct2(&from, &out).unwrap_err().to_string();
    assert!(
        e.contains("\"TransformerSpec\"") && e.contains("model.bin"),
        "{e}"
    );

    let mut vars = tiny_ct2(1);
    let fc = vars
        .iter_mut()
        .find(|v| v.0 == "decoder/layer_0/ffn/linear_1/weight")
        .unwrap();
    fc.1 = vec![D, 3 * D];
    fc.3.truncate(D * 3 * D * 2);
    write_ct2_dir(&from, &vars, "WhisperSpec");
    let e = convert_ct2(&from, &out).unwrap_err().to_string();
    assert!(
        e.contains("decoder/layer_0/ffn/linear_1/weight has shape [8, 24]"),
        "{e}"
    );

    let mut vars = tiny_ct2(1);
    vars.retain(|v| v.0 != "encoder/layer_0/ffn/linear_0/bias");
    write_ct2_dir(&from, &vars, "WhisperSpec");
    let e = convert_ct2(&from, &out).unwrap_err().to_string();
    assert!(
        e.contains("missing variable encoder/layer_0/ffn/linear_0/bias"),
        "{e}"
    );

    let mut vars = tiny_ct2(1);
    vars.push((
        "decoder/extra".into(),
        vec![1],
        Dtype::F32,
        f32_bytes(&[0.0]),
    ));
    write_ct2_dir(&from, &vars, "WhisperSpec");
    let e = convert_ct2(&from, &out).unwrap_err().to_string();
    assert!(e.contains("unexpected variable decoder/extra"), "{e}");

    let mut vars = tiny_ct2(1);
    vars.iter_mut()
        .find(|v| v.0 == "decoder/pre_norm")
        .unwrap()
        .3 = vec![0];
    write_ct2_dir(&from, &vars, "WhisperSpec");
    let e = convert_ct2(&from, &out).unwrap_err().to_string();
    assert!(e.contains("decoder/pre_norm is 0"), "{e}");
    assert!(!out.join(WEIGHTS_FILE).exists());
}

#[test]
fn loader_errors_name_the_file_and_the_fix() {
    let root = temp_dir("load-errors");
    let missing = root.join("nope");
    let e = WhisperTranscriber::load(&missing, &Device::Cpu, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not exist"), "{e}");
    assert!(e.contains("scripts/install-models DIR"), "{e}");
    assert!(
        e.contains("--transcription-model-dir DIR/whisper-tiny.en"),
        "{e}"
    );

    let (_root, out) = tiny_model_dir("load-errors-model");
    std::fs::remove_file(out.join(TOKENIZER_FILE)).unwrap();
    let e = WhisperTranscriber::load(&out, &Device::Cpu, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing tokenizer.json"), "{e}");
    assert!(e.contains("scripts/install-models"), "{e}");

    let (_root, out) = tiny_model_dir("load-errors-sum");
    let cfg = out.join(CONFIG_FILE);
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replace("\"suppress_tokens\"", "\"suppress_tokens\" "),
    )
    .unwrap();
    let e = WhisperTranscriber::load(&out, &Device::Cpu, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("config.json does not match its checksum"), "{e}");

    // A tensor of the wrong shape (the weights are not hashed at load: candle's shape
    // checks catch it).
    let (_root, out) = tiny_model_dir("load-errors-shape");
    let path = out.join(WEIGHTS_FILE);
    let mut tensors = candle::safetensors::load(&path, &Device::Cpu).unwrap();
    tensors.insert(
        "model.decoder.layers.0.fc1.weight".into(),
        candle::Tensor::zeros((4 * D, D + 1), candle::DType::F32, &Device::Cpu).unwrap(),
    );
    candle::safetensors::save(&tensors, &path).unwrap();
    let e = WhisperTranscriber::load(&out, &Device::Cpu, 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("model.safetensors") && e.contains("does not match config.json"),
        "{e}"
    );
    assert!(e.contains("fc1"), "{e}");

    // A truncated weights file.
    let (_root, out) = tiny_model_dir("load-errors-cut");
    let path = out.join(WEIGHTS_FILE);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let e = WhisperTranscriber::load(&out, &Device::Cpu, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("model.safetensors"), "{e}");
}

#[test]
fn tokenizer_decodes_byte_level_tokens() {
    let t = Tokenizer::from_json(&tiny_tokenizer_json()).unwrap();
    assert_eq!(t.special_id("<|endoftext|>"), Some(14));
    assert_eq!(t.special_id("<|startoftranscript|>"), Some(15));
    assert!(t.is_special(15) && !t.is_special(3));
    assert_eq!(t.decode(&[3, 4, 5]), " hello world.");
    // "é" as one token and split over two tokens; the specials and unknown ids skipped.
    assert_eq!(t.decode(&[15, 16, 6, 7, 8, 14, 999]), "éé");
    assert_eq!(t.token_bytes(7), Some(&[0xc3][..]));
    assert_eq!(t.decode(&[9]), "\n");
    assert_eq!(t.decode(&[7]), "\u{fffd}");
    assert!(Tokenizer::from_json(r#"{"model": {"type": "WordPiece", "vocab": {}}}"#).is_err());
    assert!(
        Tokenizer::from_json(r#"{"model": {"type": "BPE", "vocab": {" a": 0}}}"#)
            .unwrap_err()
            .contains("byte-level alphabet")
    );
}

#[test]
fn mel_filters_are_slaney() {
    let f = mel_filters(80);
    assert_eq!(f.len(), 80 * N_FREQ);
    assert!(f.iter().all(|&x| x >= 0.0));
    // Filter 0 spans 0..74.5 Hz with its peak at 37.2 Hz: only bin 1 (40 Hz) is inside.
    assert!((f[1] - 0.024_863).abs() < 1e-5, "{}", f[1]);
    assert_eq!(f[0], 0.0);
    assert_eq!(f[2], 0.0);
    let mut last_peak = 0;
    for m in 0..80 {
        let row = &f[m * N_FREQ..(m + 1) * N_FREQ];
        let peak = (0..N_FREQ)
            .max_by(|&a, &b| row[a].total_cmp(&row[b]))
            .unwrap();
        assert!(row[peak] > 0.0, "filter {m} is empty");
        assert!(peak >= last_peak, "filter {m}");
        last_peak = peak;
        // Slaney normalisation: each triangle has unit area in Hz (the wide ones sampled
        // well enough every 40 Hz to show it).
        if m >= 60 {
            let area: f32 = row.iter().sum::<f32>() * 40.0;
            assert!((area - 1.0).abs() < 0.03, "filter {m}: area {area}");
        }
    }
}

#[test]
fn log_mel_of_a_tone_peaks_at_its_band() {
    let mel = MelFrontend::new(80, &Device::Cpu).unwrap();
    let pcm: Vec<f32> = (0..16_000)
        .map(|i| 0.5 * (2.0 * std::f32::consts::PI * 1000.0 * i as f32 / 16_000.0).sin())
        .collect();
    let t = mel.log_mel(&pcm, 200).unwrap();
    assert_eq!(t.dims(), &[1, 80, 200]);
    let v: Vec<Vec<f32>> = t.squeeze(0).unwrap().to_vec2().unwrap();
    let frame = 50;
    let band = (0..80)
        .max_by(|&a, &b| v[a][frame].total_cmp(&v[b][frame]))
        .unwrap();
    // 1 kHz = 15 mel; band m is centred on (m + 1) * 45.245 / 81 mel.
    assert!((25..=26).contains(&band), "{band}");
    // Whisper's scaling: the maximum is (log10(max) + 4) / 4 and nothing is more than
    // 2 (8 in log10 / 4) below it; the silent second half sits at that floor.
    let max = v.iter().flatten().copied().fold(f32::MIN, f32::max);
    let min = v.iter().flatten().copied().fold(f32::MAX, f32::min);
    assert!((max - min - 2.0).abs() < 1e-4, "{max} {min}");
    assert!((v[band][150] - min).abs() < 1e-6);
}

#[test]
fn encoder_window_sizes() {
    let (_root, out) = tiny_model_dir("window");
    let mut t = WhisperTranscriber::load(&out, &Device::Cpu, 1).unwrap();
    assert_eq!(t.frames_for(0), 100);
    assert_eq!(t.frames_for(48_000), 400);
    assert_eq!(t.frames_for(48_001), 500);
    assert_eq!(t.frames_for(30 * 16_000), 3000);
    t.set_window(EncoderWindow::Full);
    assert_eq!(t.frames_for(16_000), 3000);
}

#[test]
fn stream_resamples_and_counts() {
    let mut s = Stream::new().unwrap();
    let mut scratch = Vec::new();
    for _ in 0..50 {
        s.push(&[0.1; 480], &mut scratch);
    }
    let (pcm, seconds) = s.finish(&mut scratch);
    assert_eq!(pcm.len(), 16_000);
    assert!((seconds - 1.0).abs() < 1e-9);
    // The next utterance starts clean.
    s.push(&[0.1; 240], &mut scratch);
    let (pcm, seconds) = s.finish(&mut scratch);
    assert_eq!(pcm.len(), 160);
    assert!((seconds - 0.01).abs() < 1e-9);
    // Over 30 s: the last 30 s are kept.
    for _ in 0..3200 {
        s.push(&[0.0; 240], &mut scratch);
    }
    let (pcm, seconds) = s.finish(&mut scratch);
    assert_eq!(pcm.len(), 30 * 16_000);
    assert!((seconds - 32.0).abs() < 1e-9);
}

pub(super) fn one(
    t: &mut WhisperTranscriber,
    stream: usize,
    pcm: &[f32],
    end: bool,
    logprobs: bool,
) -> Result<TranscribeOutput, ModelError> {
    let mut out = Vec::new();
    t.step(
        &[TranscribeInput {
            stream,
            pcm,
            end,
            logprobs,
        }],
        &mut out,
    );
    assert_eq!(out.len(), 1);
    out.pop().unwrap()
}

#[test]
fn stream_bookkeeping() {
    let (_root, out) = tiny_model_dir("streams");
    let mut t = WhisperTranscriber::load(&out, &Device::Cpu, 2).unwrap();
    t.warmup().unwrap();
    let a = t.open_stream().unwrap();
    let b = t.open_stream().unwrap();
    assert_ne!(a, b);
    assert!(matches!(
        t.open_stream(),
        Err(ModelError::SlotsExhausted(2))
    ));

    let noise: Vec<f32> = {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        (0..24_000).map(|_| rng.random_range(-0.3..0.3)).collect()
    };
    assert_eq!(
        one(&mut t, a, &noise[..12_000], false, true).unwrap(),
        TranscribeOutput::NotYet
    );
    assert_eq!(
        one(&mut t, a, &[], false, true).unwrap(),
        TranscribeOutput::NotYet
    );
    match one(&mut t, a, &noise[12_000..], true, true).unwrap() {
        TranscribeOutput::Completed {
            text,
            logprobs,
            audio_seconds,
            language: None,
        } => {
            assert!((audio_seconds - 1.0).abs() < 1e-9);
            let joined: String = logprobs.iter().map(|l| l.token.as_str()).collect();
            assert_eq!(joined.trim(), text);
            assert!(logprobs.iter().all(|l| l.logprob <= 0.0));
            // The budget for 1 s of audio.
            assert!(logprobs.len() <= BASE_TOKENS + 8);
        }
        other => panic!("{other:?}"),
    }
    // Silence is empty text, not an error; so is an empty utterance.
    for pcm in [vec![0.0f32; 48_000], vec![]] {
        match one(&mut t, b, &pcm, true, false).unwrap() {
            TranscribeOutput::Completed {
                text,
                logprobs,
                audio_seconds,
                language: None,
            } => {
                assert_eq!(text, "");
                assert!(logprobs.is_empty());
                assert!((audio_seconds - pcm.len() as f64 / 24_000.0).abs() < 1e-9);
            }
            other => panic!("{other:?}"),
        }
    }
    // Batches answer in order, one result per input, unknown streams as errors.
    let mut outs = Vec::new();
    t.step(
        &[
            TranscribeInput {
                stream: b,
                pcm: &noise[..100],
                end: false,
                logprobs: false,
            },
            TranscribeInput {
                stream: 7,
                pcm: &[],
                end: true,
                logprobs: false,
            },
            TranscribeInput {
                stream: a,
                pcm: &noise,
                end: true,
                logprobs: false,
            },
        ],
        &mut outs,
    );
    assert_eq!(outs.len(), 3);
    assert_eq!(outs[0].as_ref().unwrap(), &TranscribeOutput::NotYet);
    assert!(matches!(outs[1], Err(ModelError::UnknownSlot(7))));
    assert!(matches!(outs[2], Ok(TranscribeOutput::Completed { .. })));

    // Close and reuse: the new stream starts with no audio of the old one.
    t.close_stream(b);
    assert!(matches!(
        one(&mut t, b, &[], false, false),
        Err(ModelError::UnknownSlot(_))
    ));
    let c = t.open_stream().unwrap();
    assert_eq!(c, b);
    match one(&mut t, c, &[], true, false).unwrap() {
        TranscribeOutput::Completed { audio_seconds, .. } => assert_eq!(audio_seconds, 0.0),
        other => panic!("{other:?}"),
    }
    t.close_stream(99);
}

#[test]
fn loops_are_cut_to_one_copy() {
    assert_eq!(loop_cut(&[1, 2, 3]), None);
    assert_eq!(loop_cut(&[5, 5, 5]), None);
    assert_eq!(loop_cut(&[9, 5, 5, 5, 5]), Some(2));
    assert_eq!(loop_cut(&[1, 2, 3, 4, 1, 2, 3]), None);
    assert_eq!(loop_cut(&[1, 2, 3, 4, 1, 2, 3, 4]), Some(4));
    assert_eq!(loop_cut(&[0, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4]), Some(5));
    assert_eq!(loop_cut(&[7, 8, 7, 8, 7, 8]), None);
    assert_eq!(loop_cut(&[7, 8, 7, 8, 7, 8, 7, 8]), Some(2));
}

#[test]
fn greedy_pick_respects_the_mask() {
    let logits = [1.0, 5.0, 3.0, f32::NAN];
    let (best, lp) = pick(&logits, &[false, true, false, false]);
    assert_eq!(best, Some(2));
    let want = 3.0 - (1f32.exp() + 3f32.exp()).ln();
    assert!((lp - want).abs() < 1e-6, "{lp} {want}");
    assert_eq!(pick(&logits, &[true, true, true, false]).0, None);
    assert!((softmax_at(&[0.0, 0.0], 1) - 0.5).abs() < 1e-6);
}

#[test]
fn config_reads_as_candles_whisper_config() {
    let (_root, out) = tiny_model_dir("candle-config");
    let text = std::fs::read_to_string(out.join(CONFIG_FILE)).unwrap();
    let c: candle_transformers::models::whisper::Config = serde_json::from_str(&text).unwrap();
    assert_eq!((c.d_model, c.vocab_size, c.decoder_layers), (D, VOCAB, 1));
    assert_eq!(c.suppress_tokens, vec![1, 2]);
}

#[test]
fn language_tokens_are_read_by_their_shape() {
    assert_eq!(language_code(b"<|fr|>").as_deref(), Some("fr"));
    assert_eq!(language_code(b"<|haw|>").as_deref(), Some("haw"));
    assert_eq!(language_code(b"<|transcribe|>"), None);
    assert_eq!(language_code(b"<|EN|>"), None);
    assert_eq!(language_code(b"fr"), None);
}
