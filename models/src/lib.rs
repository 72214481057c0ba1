//! Duet's model seam: the [`DuplexModel`] plugin trait that every speech model implements,
//! and the models themselves. Models know nothing of RTP, Opus, WebRTC or sessions: they
//! step per-session slots one frame at a time, all active slots in one batch.

#![warn(missing_docs)]

pub mod cascade;
mod context;
mod echo;
pub mod kyutai_stt;
pub mod llama;
mod model;
pub mod moshi;
pub mod piper;
pub mod silero;
pub mod smart_turn;
#[cfg(test)]
mod test_util;
mod transcribe;
pub mod whisper;

use std::path::PathBuf;

pub use echo::EchoModel;
pub use model::*;
pub use transcribe::*;

/// Names accepted by [`load`].
pub const MODEL_NAMES: &[&str] = &["echo", "moshi", "cascade"];

/// What `--model`, `--model-dir`, `--device` … say.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Directory with the model's files (Moshi).
    pub model_dir: Option<PathBuf>,
    /// Moshi settings (preset, device, slots, seed).
    pub moshi: moshi::MoshiOptions,
    /// Slots of the echo model (default 1024).
    pub echo_slots: Option<usize>,
}

/// Builds a model by name.
pub fn load(name: &str, opts: &LoadOptions) -> Result<Box<dyn DuplexModel>, ModelError> {
    match name {
        "echo" => Ok(Box::new(match opts.echo_slots {
            Some(n) => EchoModel::with_slots(n),
            None => EchoModel::new(),
        })),
        "moshi" => {
            let dir = opts.model_dir.as_ref().ok_or_else(|| {
                ModelError::Failed(
                    "--model moshi needs --model-dir DIR (Kyutai's candle release, or a tiny \
                     test model from `duet moshi-tiny --out DIR`)"
                        .into(),
                )
            })?;
            Ok(Box::new(moshi::MoshiModel::load(dir, &opts.moshi)?))
        }
        "cascade" => Err(ModelError::Failed(
            "the cascade is built by the server, with the LLM client of --llm-url".into(),
        )),
        other => Err(ModelError::UnknownModel {
            name: other.to_string(),
            available: MODEL_NAMES.join(", "),
        }),
    }
}

/// The kinds of transcription model directory [`load_transcriber`] knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TranscriberKind {
    /// Whisper converted by `duet convert-whisper`.
    Whisper,
    /// Kyutai STT's candle release.
    KyutaiStt,
}

/// Which transcriber `dir` holds, from its files (nothing is loaded): Kyutai STT has
/// `tokenizer_en_fr_audio_8000.model`, a converted Whisper `tokenizer.json` and
/// `config.json`.
pub fn transcriber_kind(dir: &std::path::Path) -> Result<TranscriberKind, ModelError> {
    let hint = "make one with `scripts/install-models DIR` and pass DIR/whisper-tiny.en, or \
                pass a directory with Kyutai STT's candle release";
    if !dir.is_dir() {
        return Err(ModelError::Failed(format!(
            "--transcription-model-dir {}: not a directory ({hint})",
            dir.display()
        )));
    }
    if dir.join(kyutai_stt::config::TEXT_TOKENIZER).is_file() {
        return Ok(TranscriberKind::KyutaiStt);
    }
    if dir.join(whisper::TOKENIZER_FILE).is_file() || dir.join(whisper::CONFIG_FILE).is_file() {
        return Ok(TranscriberKind::Whisper);
    }
    Err(ModelError::Failed(format!(
        "--transcription-model-dir {}: neither a converted Whisper ({}, {}, {}) nor Kyutai STT ({}, {}, {}) ({hint})",
        dir.display(),
        whisper::WEIGHTS_FILE,
        whisper::CONFIG_FILE,
        whisper::TOKENIZER_FILE,
        kyutai_stt::config::LM_FILE,
        kyutai_stt::config::MIMI_FILE,
        kyutai_stt::config::TEXT_TOKENIZER,
    )))
}

/// Builds the transcriber whose files `dir` holds ([`transcriber_kind`]), with `max_streams`
/// streams on `device` (default: 256 for Whisper, 8 for Kyutai STT).
pub fn load_transcriber(
    dir: &std::path::Path,
    device: &moshi::DeviceSpec,
    max_streams: Option<usize>,
) -> Result<Box<dyn Transcriber>, ModelError> {
    let kind = transcriber_kind(dir)?;
    let default = match kind {
        TranscriberKind::Whisper => 256,
        TranscriberKind::KyutaiStt => 8,
    };
    let max_streams = max_streams.unwrap_or(default).max(1);
    Ok(match kind {
        TranscriberKind::Whisper => Box::new(whisper::WhisperTranscriber::load(
            dir,
            &device.open()?,
            max_streams,
        )?),
        TranscriberKind::KyutaiStt => Box::new(kyutai_stt::KyutaiStt::load(
            dir,
            &kyutai_stt::SttOptions {
                device: device.clone(),
                max_streams,
                ..kyutai_stt::SttOptions::default()
            },
        )?),
    })
}
