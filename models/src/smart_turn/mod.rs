//! Smart Turn v3.2 (Pipecat / Daily, BSD-2-Clause): an 8 M-parameter audio model (a
//! Whisper-tiny encoder and an attention-pooling head) that says whether a pause ends the
//! user's turn: the last ≤ 8 s of the turn in ([`features`]), the probability that the
//! turn is complete out. The CPU build (`smart-turn-v3.2-cpu.onnx`, int8) runs on the ONNX
//! Runtime that the Piper voice already uses. A model core: scored when asked, batched over
//! the pauses given together; the driver owns the thread.

pub mod features;

use std::path::{Path, PathBuf};

use ort::session::Session;
use ort::value::Tensor;

use crate::ModelError;
pub use features::{Features, FRAMES, MELS, RATE, WINDOW};

/// The model file in a turn model directory.
pub const MODEL_FILE: &str = "smart-turn-v3.2-cpu.onnx";

/// The files of a turn model directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnFiles {
    /// The ONNX model.
    pub model: PathBuf,
    /// The ONNX Runtime library: in the directory, or in a directory beside it (where
    /// `scripts/install-models DIR` puts it, with the Piper voice).
    pub runtime: PathBuf,
}

impl TurnFiles {
    /// Finds the model in `dir` and the ONNX Runtime in it or beside it.
    pub fn find(dir: &Path) -> Result<Self, ModelError> {
        let model = dir.join(MODEL_FILE);
        if !model.is_file() {
            return Err(ModelError::Failed(format!(
                "{} has no {MODEL_FILE} (scripts/install-models DIR writes DIR/smart-turn-v3.2)",
                dir.display()
            )));
        }
        let beside = dir.parent().map(Path::to_path_buf);
        let runtime = find_runtime(dir)
            .or_else(|| beside.as_deref().and_then(find_runtime_beside))
            .ok_or_else(|| {
                ModelError::Failed(format!(
                    "no ONNX Runtime (libonnxruntime.so) in {} or a directory beside it \
                     (scripts/install-models DIR writes one with the Piper voice)",
                    dir.display()
                ))
            })?;
        Ok(Self { model, runtime })
    }
}

fn find_runtime(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libonnxruntime.so"))
        })
        .min()
}

fn find_runtime_beside(parent: &Path) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(parent)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.iter().find_map(|d| find_runtime(d))
}

/// A loaded Smart Turn model.
pub struct SmartTurn {
    session: Session,
    features: Features,
    /// One pause's features, reused.
    scratch: Vec<f32>,
}

impl SmartTurn {
    /// Loads the model of `dir` (see [`TurnFiles`]).
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let files = TurnFiles::find(dir)?;
        let env = crate::piper::runtime(&files.runtime)?;
        let fail = |e: ort::Error| ModelError::Failed(format!("{}: {e}", files.model.display()));
        let session = Session::builder(&env)
            .map_err(fail)?
            .with_intra_threads(1)
            .map_err(|e| fail(e.into()))?
            .commit_from_file(&files.model)
            .map_err(fail)?;
        Ok(Self {
            session,
            features: Features::new(),
            scratch: Vec::new(),
        })
    }

    /// The probability that each turn is complete, for turns given as 16 kHz audio (the
    /// last 8 s of each count), in one run of the model.
    pub fn score(&mut self, turns: &[&[f32]]) -> Result<Vec<f32>, ModelError> {
        if turns.is_empty() {
            return Ok(Vec::new());
        }
        let fail = |e: ort::Error| ModelError::Failed(format!("smart turn: {e}"));
        let mut input = Vec::with_capacity(turns.len() * MELS * FRAMES);
        for turn in turns {
            self.features.compute(turn, &mut self.scratch);
            input.extend_from_slice(&self.scratch);
        }
        let shape = [turns.len(), MELS, FRAMES];
        let outputs = self
            .session
            .run(ort::inputs![
                "input_features" => Tensor::from_array((shape, input)).map_err(fail)?
            ])
            .map_err(fail)?;
        let (_, p) = outputs["logits"]
            .try_extract_tensor::<f32>()
            .map_err(fail)?;
        if p.len() != turns.len() {
            return Err(ModelError::Failed(format!(
                "smart turn: {} scores for {} turns",
                p.len(),
                turns.len()
            )));
        }
        Ok(p.to_vec())
    }
}
