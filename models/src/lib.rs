//! Duet's model seam: the [`DuplexModel`] plugin trait that every speech model implements,
//! and the models themselves. Models know nothing of RTP, Opus, WebRTC or sessions: they
//! step per-session slots one frame at a time, all active slots in one batch.

#![warn(missing_docs)]

mod echo;
mod model;
pub mod moshi;

use std::path::PathBuf;

pub use echo::EchoModel;
pub use model::*;

/// Names accepted by [`load`].
pub const MODEL_NAMES: &[&str] = &["echo", "moshi"];

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
        other => Err(ModelError::UnknownModel {
            name: other.to_string(),
            available: MODEL_NAMES.join(", "),
        }),
    }
}
