//! The duplex extension's own vocabulary: the `capabilities` object of an opted-in
//! session, and the client commands only opted-in sessions accept (`session.resume`,
//! `session.event_ack`, `session.heartbeat`, `session.close`, `barge_in`, `playback.ack`).
//! The server events are in [`crate::server`] beside the GA ones.

use serde::{Deserialize, Serialize};

/// `session.capabilities` of an opted-in session: clients branch on these, not on the
/// model's name.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Capabilities {
    /// A dropped transport can resume the session (`session.resume`).
    pub supports_session_resume: bool,
    /// The session has a lease (disconnect grace, idle TTL).
    pub supports_session_lease: bool,
    /// `barge_in` is accepted.
    pub supports_barge_in: bool,
    /// `playback.ack` is accepted.
    pub supports_playback_ack: bool,
    /// `conversation.item.truncate` cuts assistant audio to what was heard.
    pub supports_audio_truncate: bool,
    /// `input_audio_buffer.commit` seals a user turn.
    pub supports_client_commit: bool,
    /// `input_audio_buffer.append` feeds audio.
    pub supports_input_append: bool,
    /// Text-only turns (`conversation.item.create` with text) are answered.
    pub supports_text_only_turn: bool,
    /// Input and output flow at once (the model listens while it speaks).
    pub supports_independent_io_streams: bool,
    /// One server runs many sessions.
    pub supports_multi_session: bool,
    /// `model_native_duplex` (the model decides when to speak) or `turn_based_duplex`.
    pub implementation_level: &'static str,
    /// How input reaches the model: `["append_audio_chunk"]`.
    pub input_modes: Vec<&'static str>,
    /// The model's frame period in milliseconds.
    pub chunk_period_ms: u32,
}

impl Capabilities {
    /// What Duet supports for a model that speaks on its own (`autonomous`: full duplex) or
    /// takes turns, stepping in frames of `chunk_period_ms`.
    pub fn new(autonomous: bool, chunk_period_ms: u32) -> Self {
        Self {
            supports_session_resume: true,
            supports_session_lease: true,
            supports_barge_in: true,
            supports_playback_ack: true,
            supports_audio_truncate: true,
            supports_client_commit: true,
            supports_input_append: true,
            supports_text_only_turn: true,
            supports_independent_io_streams: autonomous,
            supports_multi_session: true,
            implementation_level: if autonomous {
                "model_native_duplex"
            } else {
                "turn_based_duplex"
            },
            input_modes: vec!["append_audio_chunk"],
            chunk_period_ms,
        }
    }
}

/// `session.resume`: the first message of a resume socket (or the `resume` part of a
/// WebRTC offer).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    /// The session to resume.
    pub session_id: String,
    /// Its current resume token.
    pub resume_token: String,
    /// The last `server_event_seq` the client received (0: none).
    #[serde(default)]
    pub last_received_server_event_seq: u64,
}

impl ResumeRequest {
    /// Parses the JSON of a multipart `resume` part (`POST /v1/realtime/calls?duplex=1`);
    /// the error says what is wrong, with its path.
    pub fn from_json(json: &str) -> Result<Self, String> {
        let de = &mut serde_json::Deserializer::from_str(json);
        serde_path_to_error::deserialize::<_, Self>(de).map_err(|e| {
            let path = e.path().to_string();
            if path == "." {
                e.inner().to_string()
            } else {
                format!("{path}: {}", e.inner())
            }
        })
    }
}

/// Wire shapes of the extension commands.
pub(crate) mod wire {
    use super::*;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct EventAck {
        pub server_event_seq: i64,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Close {
        pub reason: Option<String>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct PlaybackAck {
        pub played_ms: f64,
        pub committed_ms: Option<f64>,
        pub response_id: Option<String>,
        pub item_id: Option<String>,
        pub truncate: Option<bool>,
    }
}

/// Every extension client event type (accepted only by opted-in sessions).
pub const DUPLEX_CLIENT_EVENT_TYPES: &[&str] = &[
    "session.resume",
    "session.event_ack",
    "session.heartbeat",
    "session.close",
    "barge_in",
    "playback.ack",
];
