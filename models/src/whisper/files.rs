//! A Duet Whisper directory on disk: its `config.json` ([`DirConfig`]), the files it must
//! hold, and the checksums that say it is the one `scripts/install-models` wrote.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{CHECKSUM_FILE, CONFIG_FILE, HINT, TOKENIZER_FILE, WEIGHTS_FILE};
use crate::ModelError;

/// `config.json` of a Duet Whisper directory: the fields of candle's
/// `candle_transformers::models::whisper::Config` (Hugging Face's names; that struct reads
/// the file too) and a few more.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirConfig {
    /// Always `whisper`.
    #[serde(default)]
    pub model_type: String,
    /// Model name reported as the transcription `model` (`whisper-tiny.en`).
    #[serde(default)]
    pub name: String,
    /// Mel bins of the input.
    pub num_mel_bins: usize,
    /// Encoder positions (1500 = 30 s).
    pub max_source_positions: usize,
    /// Width.
    pub d_model: usize,
    /// Encoder heads.
    pub encoder_attention_heads: usize,
    /// Encoder layers.
    pub encoder_layers: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Decoder positions (448).
    pub max_target_positions: usize,
    /// Decoder heads.
    pub decoder_attention_heads: usize,
    /// Decoder layers.
    pub decoder_layers: usize,
    /// Token ids never produced.
    #[serde(default)]
    pub suppress_tokens: Vec<u32>,
    /// Token ids not produced first (a space, `<|endoftext|>`).
    #[serde(default)]
    pub begin_suppress_tokens: Vec<u32>,
}

impl DirConfig {
    /// OpenAI's name for these dimensions (`tiny.en` …), if they are one of its models.
    pub(super) fn openai_name(&self) -> Option<String> {
        let size = match (self.d_model, self.encoder_layers, self.decoder_layers) {
            (384, 4, 4) => "tiny",
            (512, 6, 6) => "base",
            (768, 12, 12) => "small",
            (1024, 24, 24) => "medium",
            (1280, 32, 32) => "large",
            (1280, 32, 4) => "large-v3-turbo",
            _ => return None,
        };
        let en = if self.vocab_size == 51864 { ".en" } else { "" };
        Some(format!("whisper-{size}{en}"))
    }
}

/// SHA-256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Checks `duet-whisper.sha256`: it lists the three files; the small two must match (a few
/// ms); the weights are checked for structure only (header, sizes, then every shape when
/// candle loads them), since hashing 150 MB at every start would cost more than the load.
pub(super) fn check_sums(dir: &Path) -> Result<(), ModelError> {
    let path = dir.join(CHECKSUM_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| ModelError::Failed(format!("cannot read {}: {e}; {HINT}", path.display())))?;
    let mut listed = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (hex, name) = line
            .split_once("  ")
            .filter(|(h, _)| h.len() == 64)
            .ok_or_else(|| {
                ModelError::Failed(format!("{}: bad line {line:?}; {HINT}", path.display()))
            })?;
        listed.push(name);
        if name != WEIGHTS_FILE {
            let file = dir.join(name);
            let got = sha256_file(&file).map_err(|e| {
                ModelError::Failed(format!("cannot read {}: {e}; {HINT}", file.display()))
            })?;
            if got != hex {
                return Err(ModelError::Failed(format!(
                    "{} does not match its checksum in {}; the directory was modified or \
                     damaged: {HINT}",
                    file.display(),
                    path.display()
                )));
            }
        }
    }
    for want in [WEIGHTS_FILE, CONFIG_FILE, TOKENIZER_FILE] {
        if !listed.contains(&want) {
            return Err(ModelError::Failed(format!(
                "{} does not list {want}; {HINT}",
                path.display()
            )));
        }
    }
    Ok(())
}

pub(super) fn bad(p: &Path, why: String) -> ModelError {
    ModelError::Failed(format!("{}: {why}; {HINT}", p.display()))
}

/// The weights, config and tokenizer files of `dir` (the checksum file is there and every
/// sum matches).
pub(super) fn required_files(dir: &Path) -> Result<[PathBuf; 3], ModelError> {
    if !dir.is_dir() {
        return Err(ModelError::Failed(format!(
            "Whisper model directory {} does not exist; {HINT}",
            dir.display()
        )));
    }
    let file = |name: &str| -> Result<PathBuf, ModelError> {
        let p = dir.join(name);
        if p.is_file() {
            Ok(p)
        } else {
            Err(ModelError::Failed(format!(
                "{} is missing {name} (expected {WEIGHTS_FILE}, {CONFIG_FILE}, \
                 {TOKENIZER_FILE}, {CHECKSUM_FILE}); {HINT}",
                dir.display()
            )))
        }
    };
    let files = [
        file(WEIGHTS_FILE)?,
        file(CONFIG_FILE)?,
        file(TOKENIZER_FILE)?,
    ];
    file(CHECKSUM_FILE)?;
    check_sums(dir)?;
    Ok(files)
}

/// The directory's configuration, named after the OpenAI model (or the directory).
pub(super) fn read_config(dir: &Path, config: &Path) -> Result<DirConfig, ModelError> {
    let text = std::fs::read_to_string(config).map_err(|e| bad(config, e.to_string()))?;
    let mut cfg: DirConfig = serde_json::from_str(&text).map_err(|e| bad(config, e.to_string()))?;
    if cfg.name.is_empty() {
        cfg.name = cfg.openai_name().unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "whisper".into())
        });
    }
    if cfg.d_model == 0 || cfg.max_source_positions == 0 || cfg.vocab_size == 0 {
        return Err(bad(config, "zero dimensions".into()));
    }
    Ok(cfg)
}
