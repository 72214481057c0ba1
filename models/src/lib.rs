//! Duet's model seam: the [`DuplexModel`] plugin trait that every speech model implements,
//! and the models themselves. Models know nothing of RTP, Opus, WebRTC or sessions: they
//! step per-session slots one frame at a time, all active slots in one batch.

mod echo;
mod model;

pub use echo::EchoModel;
pub use model::*;

/// Names accepted by [`load`].
pub const MODEL_NAMES: &[&str] = &["echo"];

/// Builds a model by name.
pub fn load(name: &str) -> Result<Box<dyn DuplexModel>, ModelError> {
    match name {
        "echo" => Ok(Box::new(EchoModel::new())),
        other => Err(ModelError::UnknownModel {
            name: other.to_string(),
            available: MODEL_NAMES.join(", "),
        }),
    }
}
