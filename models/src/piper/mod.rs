//! Piper TTS (VITS, ONNX): a voice directory holds `<voice>.onnx`, `<voice>.onnx.json` and
//! the ONNX Runtime library (`libonnxruntime.so*`) that runs it, so the directory is
//! self-contained (`scripts/install-models` writes `piper-en_US-joe-medium`). Phonemes come
//! through the [`phonemes::Phonemizer`] port, which the server implements with the
//! `espeak-ng` program; the audio is resampled to the session's
//! 24 kHz.

pub mod phonemes;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use duet_media::StreamResampler;
use ort::session::Session;
use ort::value::Tensor;

use crate::{ModelError, MODEL_SAMPLE_RATE};

/// Silence after a sentence (Piper's own 0.2 s).
const SENTENCE_GAP_S: f32 = 0.2;
/// Peak level a sentence is normalised to.
const PEAK: f32 = 0.9;

/// The files of a voice directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoiceFiles {
    /// `<voice>.onnx`.
    pub model: PathBuf,
    /// `<voice>.onnx.json`.
    pub config: PathBuf,
    /// The ONNX Runtime shared library.
    pub runtime: PathBuf,
}

impl VoiceFiles {
    /// Finds a voice's files in `dir`; a missing one is an error naming what is expected.
    pub fn find(dir: &Path) -> Result<Self, ModelError> {
        let entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| ModelError::Failed(format!("{}: {e}", dir.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        let named = |f: &dyn Fn(&str) -> bool| {
            entries
                .iter()
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(f))
                .min()
                .cloned()
        };
        let model = named(&|n| n.ends_with(".onnx"));
        let runtime = named(&|n| n.starts_with("libonnxruntime.so"));
        match (model, runtime) {
            (Some(model), Some(runtime)) => {
                let config = PathBuf::from(format!("{}.json", model.display()));
                if !config.is_file() {
                    return Err(ModelError::Failed(format!(
                        "{}: the voice's config {} is missing",
                        dir.display(),
                        config.display()
                    )));
                }
                Ok(Self {
                    model,
                    config,
                    runtime,
                })
            }
            _ => Err(ModelError::Failed(format!(
                "{} is not a Piper voice directory: it needs <voice>.onnx, <voice>.onnx.json and \
                 libonnxruntime.so (scripts/install-models DIR writes DIR/piper-en_US-joe-medium)",
                dir.display()
            ))),
        }
    }
}

/// What a voice's `.onnx.json` says.
#[derive(Clone, Debug)]
struct VoiceConfig {
    rate: u32,
    espeak_voice: String,
    /// noise_scale, length_scale, noise_w.
    scales: [f32; 3],
    ids: HashMap<char, i64>,
}

impl VoiceConfig {
    fn read(path: &Path) -> Result<Self, ModelError> {
        let bad = |what: &str| ModelError::Failed(format!("{}: {what}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| bad(&e.to_string()))?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
        let rate = v["audio"]["sample_rate"]
            .as_u64()
            .filter(|r| (8_000..=48_000).contains(r))
            .ok_or_else(|| bad("no audio.sample_rate"))? as u32;
        let espeak_voice = v["espeak"]["voice"].as_str().unwrap_or("en-us").to_string();
        let scale = |k: &str, d: f64| v["inference"][k].as_f64().unwrap_or(d) as f32;
        let scales = [
            scale("noise_scale", 0.667),
            scale("length_scale", 1.0),
            scale("noise_w", 0.8),
        ];
        let map = v["phoneme_id_map"]
            .as_object()
            .ok_or_else(|| bad("no phoneme_id_map"))?;
        let mut ids = HashMap::new();
        for (k, ids_of) in map {
            let mut chars = k.chars();
            if let (Some(c), None, Some(id)) = (chars.next(), chars.next(), ids_of[0].as_i64()) {
                ids.insert(c, id);
            }
        }
        if !['^', '$', '_'].iter().all(|c| ids.contains_key(c)) {
            return Err(bad("phoneme_id_map lacks ^, $ or _"));
        }
        Ok(Self {
            rate,
            espeak_voice,
            scales,
            ids,
        })
    }
}

/// The process's ONNX Runtime (one per process; the first model's library loads it: the
/// Piper voice's or the turn model's).
pub(crate) fn runtime(lib: &Path) -> Result<ort::environment::Environment, ModelError> {
    static ENV: OnceLock<Result<ort::environment::Environment, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        ort::init_from(lib)
            .map_err(|e| format!("loading ONNX Runtime from {}: {e}", lib.display()))?
            .with_name("duet")
            .build()
            .map_err(|e| format!("starting ONNX Runtime: {e}"))
    })
    .clone()
    .map_err(ModelError::Failed)
}

/// A loaded Piper voice.
pub struct PiperVoice {
    name: String,
    session: Session,
    cfg: VoiceConfig,
    phonemizer: Box<dyn phonemes::Phonemizer>,
}

impl PiperVoice {
    /// Loads the voice in `dir` (about a second for a medium voice).
    /// Its phonemes come through `phonemizer` (the server's runs `espeak-ng`).
    pub fn load(dir: &Path, phonemizer: Box<dyn phonemes::Phonemizer>) -> Result<Self, ModelError> {
        let files = VoiceFiles::find(dir)?;
        let cfg = VoiceConfig::read(&files.config)?;
        let env = runtime(&files.runtime)?;
        let fail = |e: ort::Error| ModelError::Failed(format!("{}: {e}", files.model.display()));
        let session = Session::builder(&env)
            .map_err(fail)?
            .with_intra_threads(1)
            .map_err(|e| fail(e.into()))?
            .commit_from_file(&files.model)
            .map_err(fail)?;
        let name = files
            .model
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("piper")
            .to_string();
        Ok(Self {
            name,
            session,
            cfg,
            phonemizer,
        })
    }

    /// The voice's name (its file name, `en_US-joe-medium`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Speaks `text` at `speed` (1.0: the voice's own pace; 0.25–4): 24 kHz samples, each
    /// sentence followed by a short pause.
    pub fn speak(&mut self, text: &str, speed: f32) -> Result<Vec<f32>, ModelError> {
        let sentences =
            phonemes::phonemize(self.phonemizer.as_mut(), &self.cfg.espeak_voice, text)?;
        let mut native = Vec::new();
        for s in &sentences {
            let ids = phonemes::to_ids(&self.cfg.ids, s);
            if ids.len() <= 3 {
                continue;
            }
            let audio = self.infer(ids, speed)?;
            let peak = audio.iter().fold(0.01f32, |m, x| m.max(x.abs()));
            native.extend(audio.iter().map(|x| x * PEAK / peak));
            if s.ends_with(['.', '?', '!']) {
                let gap = (self.cfg.rate as f32 * SENTENCE_GAP_S) as usize;
                native.extend(std::iter::repeat_n(0.0, gap));
            }
        }
        self.resample(&native)
    }

    fn infer(&mut self, ids: Vec<i64>, speed: f32) -> Result<Vec<f32>, ModelError> {
        let fail = |e: ort::Error| ModelError::Failed(format!("piper: {e}"));
        let n = ids.len();
        let [noise, length, noise_w] = self.cfg.scales;
        let scales = vec![noise, length / speed.clamp(0.25, 4.0), noise_w];
        let outputs = self
            .session
            .run(ort::inputs![
                "input" => Tensor::from_array(([1usize, n], ids)).map_err(fail)?,
                "input_lengths" => Tensor::from_array(([1usize], vec![n as i64])).map_err(fail)?,
                "scales" => Tensor::from_array(([3usize], scales)).map_err(fail)?
            ])
            .map_err(fail)?;
        let (_, audio) = outputs["output"]
            .try_extract_tensor::<f32>()
            .map_err(fail)?;
        Ok(audio.to_vec())
    }

    fn resample(&self, native: &[f32]) -> Result<Vec<f32>, ModelError> {
        if self.cfg.rate == MODEL_SAMPLE_RATE || native.is_empty() {
            return Ok(native.to_vec());
        }
        let mut r = StreamResampler::new(self.cfg.rate, MODEL_SAMPLE_RATE)
            .map_err(|e| ModelError::Failed(format!("resampling the voice: {e}")))?;
        let mut out = Vec::with_capacity(native.len() * 12 / 11 + 1024);
        r.process(native, &mut out);
        r.flush(&mut out);
        let delay = r.delay_samples().min(out.len());
        out.drain(..delay);
        Ok(out)
    }
}
