//! The GA session object: the effective configuration ([`SessionConfig`]), its rendering in
//! `session.created` / `session.updated`, and partial updates ([`SessionPatch`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{codes, ErrorPayload};
use super::nullable::double_option;

mod turn_detection;
pub use turn_detection::*;

/// Sample rate of `audio/pcm` in the GA API.
pub const PCM_RATE: u32 = 24_000;

/// `audio.input.format` / `audio.output.format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum AudioFormat {
    /// 16-bit little-endian mono PCM at 24 kHz.
    #[serde(rename = "audio/pcm")]
    Pcm {
        /// Always 24000.
        #[serde(default = "pcm_rate")]
        rate: u32,
    },
    /// G.711 μ-law, 8 kHz.
    #[serde(rename = "audio/pcmu")]
    Pcmu,
    /// G.711 A-law, 8 kHz.
    #[serde(rename = "audio/pcma")]
    Pcma,
}

fn pcm_rate() -> u32 {
    PCM_RATE
}

impl Default for AudioFormat {
    fn default() -> Self {
        AudioFormat::Pcm { rate: PCM_RATE }
    }
}

impl AudioFormat {
    /// Samples per second of this format on the wire.
    pub fn sample_rate(self) -> u32 {
        match self {
            AudioFormat::Pcm { rate } => rate,
            AudioFormat::Pcmu | AudioFormat::Pcma => 8_000,
        }
    }

    /// Bytes per sample on the wire.
    pub fn bytes_per_sample(self) -> u32 {
        match self {
            AudioFormat::Pcm { .. } => 2,
            AudioFormat::Pcmu | AudioFormat::Pcma => 1,
        }
    }

    fn validate(self, param: &str) -> Result<(), ErrorPayload> {
        match self {
            AudioFormat::Pcm { rate } if rate != PCM_RATE => Err(ErrorPayload::invalid(
                codes::INVALID_VALUE,
                format!("audio/pcm supports only rate {PCM_RATE}, got {rate}"),
            )
            .with_param(format!("{param}.rate"))),
            _ => Ok(()),
        }
    }
}

/// `output_modalities` entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Modality {
    /// Speech (always with a transcript).
    Audio,
    /// Text only.
    Text,
}

/// Effective `audio.input`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AudioInput {
    /// Wire format of appended audio.
    pub format: AudioFormat,
    /// Input transcription settings (omitted when off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcription: Option<Value>,
    /// Noise reduction (omitted when off: strict clients' types make it optional, not
    /// nullable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise_reduction: Option<NoiseReduction>,
    /// `null` means manual turns (commit + `response.create`).
    pub turn_detection: Option<TurnDetection>,
}

/// `audio.input.noise_reduction`: which microphone the input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoiseReduction {
    /// `near_field` (a headset, a phone at the ear) or `far_field` (a laptop, a room).
    #[serde(rename = "type")]
    pub kind: NoiseReductionType,
}

/// The kinds of `audio.input.noise_reduction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoiseReductionType {
    /// A close microphone.
    NearField,
    /// A distant microphone (served by the same denoiser as `near_field`).
    FarField,
}

impl NoiseReduction {
    /// Reads a client's `noise_reduction` object, or says which field is wrong.
    fn parse(v: Value) -> Result<Self, ErrorPayload> {
        let param = "session.audio.input.noise_reduction";
        serde_json::from_value(v).map_err(|e| {
            ErrorPayload::invalid(
                codes::INVALID_VALUE,
                format!(
                    "noise_reduction must be null or {{\"type\": \"near_field\" | \"far_field\"}}: {e}"
                ),
            )
            .with_param(format!("{param}.type"))
        })
    }
}

/// Effective `audio.output`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AudioOutput {
    /// Wire format of audio deltas.
    pub format: AudioFormat,
    /// Voice name (or `{id}`); models may ignore it.
    pub voice: Value,
    /// Playback speed 0.25..=1.5.
    pub speed: f64,
}

/// Effective `audio`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AudioConfig {
    /// Input side.
    pub input: AudioInput,
    /// Output side.
    pub output: AudioOutput,
}

/// The session types.
pub mod kinds {
    /// A conversation with responses (the default).
    pub const REALTIME: &str = "realtime";
    /// Audio in, transcription events out, no responses.
    pub const TRANSCRIPTION: &str = "transcription";
}

/// `include` entry asking for transcription log probabilities.
pub const INCLUDE_LOGPROBS: &str = "item.input_audio_transcription.logprobs";
/// `include` entry (Duet) asking for `input_audio_buffer.speech_probability` events.
pub const INCLUDE_SPEECH_PROBABILITY: &str = "input_audio_buffer.speech_probability";

/// The effective session, as reported in `session.created` / `session.updated`: the
/// realtime shape, or for `type: "transcription"` the transcription session's (no model,
/// responses or output audio).
#[derive(Clone, Debug, PartialEq)]
pub struct SessionConfig {
    /// `realtime` or `transcription` ([`kinds`]).
    pub kind: &'static str,
    /// `realtime.session` or `realtime.transcription_session`.
    pub object: &'static str,
    /// `sess_…`.
    pub id: String,
    /// The loaded model's name.
    pub model: String,
    /// `["audio"]` or `["text"]`.
    pub output_modalities: Vec<Modality>,
    /// System instructions.
    pub instructions: String,
    /// Audio formats and turn detection.
    pub audio: AudioConfig,
    /// Function tools (kept and echoed; the echo model never calls them).
    pub tools: Vec<Value>,
    /// `auto` unless set.
    pub tool_choice: Value,
    /// 1..=4096 or `"inf"`.
    pub max_output_tokens: Value,
    /// `auto`, `disabled` or a retention ratio object.
    pub truncation: Value,
    /// Tracing config as the client sent it; omitted until set.
    pub tracing: Option<Value>,
    /// Prompt reference as the client sent it; omitted until set.
    pub prompt: Option<Value>,
    /// `include` list; omitted until set.
    pub include: Option<Vec<String>>,
    /// Unix seconds when the session expires.
    pub expires_at: u64,
    /// Duplex extension (opted-in sessions): what the session supports.
    pub capabilities: Option<crate::duplex::Capabilities>,
}

/// `session` of a realtime session on the wire.
#[derive(Serialize)]
struct RealtimeView<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    object: &'a str,
    id: &'a str,
    model: &'a str,
    output_modalities: &'a [Modality],
    instructions: &'a str,
    audio: &'a AudioConfig,
    tools: &'a [Value],
    tool_choice: &'a Value,
    max_output_tokens: &'a Value,
    truncation: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    tracing: &'a Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: &'a Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    include: &'a Option<Vec<String>>,
    expires_at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    capabilities: &'a Option<crate::duplex::Capabilities>,
}

/// `session` of a transcription session on the wire (`RealtimeTranscriptionSessionCreateRequest`
/// with the response's `id`, `object` and `expires_at`).
#[derive(Serialize)]
struct TranscriptionView<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    object: &'a str,
    id: &'a str,
    audio: TranscriptionAudio<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    include: &'a Option<Vec<String>>,
    expires_at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    capabilities: &'a Option<crate::duplex::Capabilities>,
}

#[derive(Serialize)]
struct TranscriptionAudio<'a> {
    input: &'a AudioInput,
}

impl Serialize for SessionConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.is_transcription() {
            return TranscriptionView {
                kind: self.kind,
                object: self.object,
                id: &self.id,
                audio: TranscriptionAudio {
                    input: &self.audio.input,
                },
                include: &self.include,
                expires_at: self.expires_at,
                capabilities: &self.capabilities,
            }
            .serialize(s);
        }
        RealtimeView {
            kind: self.kind,
            object: self.object,
            id: &self.id,
            model: &self.model,
            output_modalities: &self.output_modalities,
            instructions: &self.instructions,
            audio: &self.audio,
            tools: &self.tools,
            tool_choice: &self.tool_choice,
            max_output_tokens: &self.max_output_tokens,
            truncation: &self.truncation,
            tracing: &self.tracing,
            prompt: &self.prompt,
            include: &self.include,
            expires_at: self.expires_at,
            capabilities: &self.capabilities,
        }
        .serialize(s)
    }
}

/// Default instructions reported in `session.created`.
pub const DEFAULT_INSTRUCTIONS: &str =
    "You are a helpful voice assistant. Keep answers short and natural.";

impl SessionConfig {
    /// A fresh session with defaults: audio out, PCM 24 kHz both ways, server VAD.
    pub fn new(id: String, model: String, expires_at: u64) -> Self {
        Self {
            kind: "realtime",
            object: "realtime.session",
            id,
            model,
            output_modalities: vec![Modality::Audio],
            instructions: DEFAULT_INSTRUCTIONS.to_string(),
            audio: AudioConfig {
                input: AudioInput {
                    format: AudioFormat::default(),
                    transcription: None,
                    noise_reduction: None,
                    turn_detection: Some(TurnDetection::default()),
                },
                output: AudioOutput {
                    format: AudioFormat::default(),
                    voice: Value::String("alloy".into()),
                    speed: 1.0,
                },
            },
            tools: Vec::new(),
            tool_choice: Value::String("auto".into()),
            max_output_tokens: Value::String("inf".into()),
            truncation: Value::String("auto".into()),
            tracing: None,
            prompt: None,
            include: None,
            expires_at,
            capabilities: None,
        }
    }

    /// Applies a patch atomically: on error nothing changes.
    pub fn apply(&mut self, patch: SessionPatch) -> Result<(), ErrorPayload> {
        let mut next = self.clone();
        next.apply_in_place(patch)?;
        *self = next;
        Ok(())
    }

    /// Whether this is a transcription session (no responses).
    pub fn is_transcription(&self) -> bool {
        self.kind == kinds::TRANSCRIPTION
    }

    /// Makes this a transcription session (`?intent=transcription`).
    pub fn set_transcription(&mut self) {
        self.kind = kinds::TRANSCRIPTION;
        self.object = "realtime.transcription_session";
    }

    /// Whether `include` asks for `entry`.
    pub fn includes(&self, entry: &str) -> bool {
        self.include
            .as_ref()
            .is_some_and(|l| l.iter().any(|e| e == entry))
    }

    fn apply_in_place(&mut self, p: SessionPatch) -> Result<(), ErrorPayload> {
        match p.kind.as_deref() {
            None => {}
            Some(kinds::REALTIME) => {
                self.kind = kinds::REALTIME;
                self.object = "realtime.session";
            }
            Some(kinds::TRANSCRIPTION) => self.set_transcription(),
            Some(kind) => {
                return Err(ErrorPayload::invalid(
                    codes::INVALID_VALUE,
                    format!(
                        "session type {kind:?} is not supported; use \"realtime\" or \"transcription\""
                    ),
                )
                .with_param("session.type"));
            }
        }
        // `model` may be sent on every update (agents-js does); the loaded model stays.
        if let Some(instructions) = p.instructions {
            self.instructions = instructions;
        }
        if let Some(m) = p.output_modalities {
            self.output_modalities = validate_modalities(m, "session.output_modalities")?;
        }
        if let Some(audio) = p.audio {
            self.apply_audio(audio)?;
        }
        if let Some(tools) = p.tools {
            self.tools = tools;
        }
        if let Some(tc) = p.tool_choice {
            self.tool_choice = tc;
        }
        if let Some(m) = p.max_output_tokens {
            self.max_output_tokens = validate_max_tokens(m, "session.max_output_tokens")?;
        }
        if let Some(t) = p.truncation {
            self.truncation = t;
        }
        if let Some(t) = p.tracing {
            self.tracing = t;
        }
        if let Some(pr) = p.prompt {
            self.prompt = pr;
        }
        if let Some(inc) = p.include {
            self.include = Some(inc);
        }
        Ok(())
    }

    fn apply_audio(&mut self, audio: AudioPatch) -> Result<(), ErrorPayload> {
        if let Some(input) = audio.input {
            let cur = &mut self.audio.input;
            if let Some(f) = input.format {
                f.validate("session.audio.input.format")?;
                cur.format = f;
            }
            if let Some(t) = input.transcription {
                cur.transcription = t;
            }
            if let Some(n) = input.noise_reduction {
                cur.noise_reduction = n.map(NoiseReduction::parse).transpose()?;
            }
            if let Some(td) = input.turn_detection {
                cur.turn_detection = match td {
                    None => None,
                    Some(param) => Some(TurnDetection::merged(cur.turn_detection.as_ref(), param)?),
                };
            }
        }
        if let Some(output) = audio.output {
            let cur = &mut self.audio.output;
            if let Some(f) = output.format {
                f.validate("session.audio.output.format")?;
                cur.format = f;
            }
            if let Some(v) = output.voice {
                cur.voice = v;
            }
            if let Some(s) = output.speed {
                if !(0.25..=1.5).contains(&s) {
                    return Err(ErrorPayload::invalid(
                        codes::INVALID_VALUE,
                        "speed must be 0.25..=1.5",
                    )
                    .with_param("session.audio.output.speed"));
                }
                cur.speed = s;
            }
        }
        Ok(())
    }
}

/// Checks that exactly one modality is requested.
pub fn validate_modalities(m: Vec<Modality>, param: &str) -> Result<Vec<Modality>, ErrorPayload> {
    if m.len() != 1 {
        return Err(ErrorPayload::invalid(
            codes::INVALID_VALUE,
            "output_modalities must be [\"audio\"] or [\"text\"]",
        )
        .with_param(param));
    }
    Ok(m)
}

/// Checks `max_output_tokens`: an integer 1..=4096 or `"inf"`.
pub fn validate_max_tokens(v: Value, param: &str) -> Result<Value, ErrorPayload> {
    let ok = match &v {
        Value::String(s) => s == "inf",
        Value::Number(n) => n.as_u64().is_some_and(|n| (1..=4096).contains(&n)),
        _ => false,
    };
    if ok {
        Ok(v)
    } else {
        Err(ErrorPayload::invalid(
            codes::INVALID_VALUE,
            "max_output_tokens must be 1..=4096 or \"inf\"",
        )
        .with_param(param))
    }
}

/// A partial session as sent in `session.update` (or the `session` part of a call).
/// Present fields replace current values; `null` clears nullable ones.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionPatch {
    /// `realtime` or `transcription`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Accepted and ignored: the server runs one model.
    pub model: Option<String>,
    /// Replaces the instructions.
    pub instructions: Option<String>,
    /// `["audio"]` or `["text"]`.
    pub output_modalities: Option<Vec<Modality>>,
    /// Audio settings.
    pub audio: Option<AudioPatch>,
    /// Function tools.
    pub tools: Option<Vec<Value>>,
    /// Tool choice.
    pub tool_choice: Option<Value>,
    /// 1..=4096 or `"inf"`.
    pub max_output_tokens: Option<Value>,
    /// Truncation strategy.
    pub truncation: Option<Value>,
    /// `"auto"`, an object, or `null`.
    #[serde(default, deserialize_with = "double_option")]
    pub tracing: Option<Option<Value>>,
    /// Prompt reference or `null`.
    #[serde(default, deserialize_with = "double_option")]
    pub prompt: Option<Option<Value>>,
    /// Extra outputs to include.
    pub include: Option<Vec<String>>,
    /// Accepted for newer reasoning models; ignored.
    pub reasoning: Option<Value>,
    /// Accepted; ignored.
    pub parallel_tool_calls: Option<bool>,
}

/// Partial `audio`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AudioPatch {
    /// Partial `audio.input`.
    pub input: Option<AudioInputPatch>,
    /// Partial `audio.output`.
    pub output: Option<AudioOutputPatch>,
}

/// Partial `audio.input`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AudioInputPatch {
    /// Input format.
    pub format: Option<AudioFormat>,
    /// Transcription settings or `null`.
    #[serde(default, deserialize_with = "double_option")]
    pub transcription: Option<Option<Value>>,
    /// Noise reduction settings or `null`.
    #[serde(default, deserialize_with = "double_option")]
    pub noise_reduction: Option<Option<Value>>,
    /// Turn detection or `null` (manual).
    #[serde(default, deserialize_with = "double_option")]
    pub turn_detection: Option<Option<TurnDetectionParam>>,
}

/// Partial `audio.output`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AudioOutputPatch {
    /// Output format.
    pub format: Option<AudioFormat>,
    /// Voice.
    pub voice: Option<Value>,
    /// Speed.
    pub speed: Option<f64>,
}
