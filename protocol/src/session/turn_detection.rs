//! `audio.input.turn_detection`: what the client sends ([`TurnDetectionParam`]), the
//! effective setting ([`TurnDetection`]: server VAD, or semantic VAD and its eagerness), and
//! the adaptive-interruption extension ([`Interruption`]).

use serde::{Deserialize, Serialize};

use crate::error::{codes, ErrorPayload};
use crate::nullable::double_option;

/// `audio.input.turn_detection` as the client sends it (fields optional).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum TurnDetectionParam {
    /// Energy-based voice activity detection.
    ServerVad {
        /// Activation threshold, 0.0..=1.0; higher needs louder audio.
        threshold: Option<f64>,
        /// Milliseconds of audio kept before detected speech.
        prefix_padding_ms: Option<u32>,
        /// Milliseconds of silence that end a turn.
        silence_duration_ms: Option<u32>,
        /// Milliseconds without speech after a response before a timeout; `null` turns it off.
        #[serde(default, deserialize_with = "double_option")]
        idle_timeout_ms: Option<Option<u64>>,
        /// Whether the end of speech creates a response.
        create_response: Option<bool>,
        /// Whether speech start cancels the active response.
        interrupt_response: Option<bool>,
        /// Extension: how speech over an answer interrupts it.
        interruption: Option<InterruptionParam>,
    },
    /// The end of the turn judged by a turn model (with `--turn-model-dir`; else server VAD
    /// with a fixed silence by eagerness).
    SemanticVad {
        /// `low`, `medium`, `high` or `auto`; sets how soon a turn ends.
        eagerness: Option<String>,
        /// Whether the end of speech creates a response.
        create_response: Option<bool>,
        /// Whether speech start cancels the active response.
        interrupt_response: Option<bool>,
        /// Extension: how speech over an answer interrupts it.
        interruption: Option<InterruptionParam>,
    },
}

/// Extension: `turn_detection.interruption` as the client sends it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterruptionParam {
    /// `adaptive` or `immediate`.
    pub mode: Option<InterruptionMode>,
    /// Under `adaptive`: speech over an answer that lasts this long interrupts it whatever
    /// its words (100..=5000 ms).
    pub min_duration_ms: Option<u32>,
}

/// How speech over an answer interrupts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptionMode {
    /// Judged first: a backchannel ("mhm", "yeah") or a noise lets the answer go on; a long
    /// utterance or real words interrupt it (the default under `semantic_vad`).
    Adaptive,
    /// Any speech interrupts at once (the default under `server_vad`).
    Immediate,
}

/// Extension: the effective `turn_detection.interruption`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Interruption {
    /// `adaptive` or `immediate`.
    pub mode: InterruptionMode,
    /// Under `adaptive`: speech this long interrupts whatever its words.
    pub min_duration_ms: u32,
}

impl Interruption {
    /// The default `min_duration_ms`.
    pub const MIN_DURATION_MS: u32 = 600;

    /// The default for a turn detection type: adaptive under `semantic_vad`, immediate
    /// under `server_vad`.
    pub const fn default_for(semantic: bool) -> Self {
        Self {
            mode: if semantic {
                InterruptionMode::Adaptive
            } else {
                InterruptionMode::Immediate
            },
            min_duration_ms: Self::MIN_DURATION_MS,
        }
    }

    /// Whether it is server VAD's default (then omitted from the session object, which
    /// stays as OpenAI's).
    fn is_server_default(&self) -> bool {
        *self == Self::default_for(false)
    }

    /// `param`'s fields over `self`, checked.
    fn merge(self, param: Option<InterruptionParam>) -> Result<Self, ErrorPayload> {
        let Some(p) = param else { return Ok(self) };
        let min_duration_ms = p.min_duration_ms.unwrap_or(self.min_duration_ms);
        if !(100..=5_000).contains(&min_duration_ms) {
            return Err(invalid_td(
                "interruption.min_duration_ms",
                "must be 100..=5000",
            ));
        }
        Ok(Self {
            mode: p.mode.unwrap_or(self.mode),
            min_duration_ms,
        })
    }
}

/// The effective turn detection.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TurnDetection {
    /// Server VAD with its effective parameters.
    ServerVad {
        /// Activation threshold, 0.0..=1.0; higher needs louder audio.
        threshold: f64,
        /// Milliseconds of audio kept before detected speech.
        prefix_padding_ms: u32,
        /// Milliseconds of silence that end a turn.
        silence_duration_ms: u32,
        /// Milliseconds without speech after a response before a timeout (omitted when off).
        #[serde(skip_serializing_if = "Option::is_none")]
        idle_timeout_ms: Option<u64>,
        /// Whether the end of speech creates a response.
        create_response: bool,
        /// Whether speech start cancels the active response.
        interrupt_response: bool,
        /// Extension: how speech over an answer interrupts it (omitted when immediate,
        /// server VAD's default).
        #[serde(skip_serializing_if = "Interruption::is_server_default")]
        interruption: Interruption,
    },
    /// Semantic VAD: a turn model judges the end of the turn (see [`TurnDetectionParam`]).
    SemanticVad {
        /// `low`, `medium`, `high` or `auto`; sets how soon a turn ends.
        eagerness: String,
        /// Whether the end of speech creates a response.
        create_response: bool,
        /// Whether speech start cancels the active response.
        interrupt_response: bool,
        /// Extension: how speech over an answer interrupts it.
        interruption: Interruption,
    },
}

impl Default for TurnDetection {
    fn default() -> Self {
        VadTiming::DEFAULT.server_vad(true, true)
    }
}

/// Server VAD's timing fields, merged apart from the response flags (which carry over
/// between VAD types).
#[derive(Clone, Copy)]
struct VadTiming {
    threshold: f64,
    prefix_padding_ms: u32,
    silence_duration_ms: u32,
    idle_timeout_ms: Option<u64>,
}

impl VadTiming {
    const DEFAULT: VadTiming = VadTiming {
        threshold: 0.5,
        prefix_padding_ms: 300,
        silence_duration_ms: 500,
        idle_timeout_ms: None,
    };

    /// What omitted fields keep: `td`'s timing when it is server VAD, else the defaults
    /// (semantic VAD's timing is derived, not set).
    fn kept(td: &TurnDetection) -> Self {
        match *td {
            TurnDetection::ServerVad {
                threshold,
                prefix_padding_ms,
                silence_duration_ms,
                idle_timeout_ms,
                ..
            } => VadTiming {
                threshold,
                prefix_padding_ms,
                silence_duration_ms,
                idle_timeout_ms,
            },
            TurnDetection::SemanticVad { .. } => Self::DEFAULT,
        }
    }

    /// Applies the client's fields over `self` and checks the result's ranges.
    fn merge(
        self,
        threshold: Option<f64>,
        prefix_padding_ms: Option<u32>,
        silence_duration_ms: Option<u32>,
        idle_timeout_ms: Option<Option<u64>>,
    ) -> Result<Self, ErrorPayload> {
        let threshold = threshold.unwrap_or(self.threshold);
        if !(0.0..=1.0).contains(&threshold) {
            return Err(invalid_td("threshold", "must be between 0.0 and 1.0"));
        }
        let silence_duration_ms = silence_duration_ms.unwrap_or(self.silence_duration_ms);
        if !(10..=10_000).contains(&silence_duration_ms) {
            return Err(invalid_td("silence_duration_ms", "must be 10..=10000"));
        }
        let prefix_padding_ms = prefix_padding_ms.unwrap_or(self.prefix_padding_ms);
        if prefix_padding_ms > 10_000 {
            return Err(invalid_td("prefix_padding_ms", "must be 0..=10000"));
        }
        let idle_timeout_ms = idle_timeout_ms.unwrap_or(self.idle_timeout_ms);
        if idle_timeout_ms.is_some_and(|ms| !(5_000..=30_000).contains(&ms)) {
            return Err(invalid_td("idle_timeout_ms", "must be 5000..=30000"));
        }
        Ok(VadTiming {
            threshold,
            prefix_padding_ms,
            silence_duration_ms,
            idle_timeout_ms,
        })
    }

    /// Server VAD with this timing and the given response flags.
    fn server_vad(self, create_response: bool, interrupt_response: bool) -> TurnDetection {
        TurnDetection::ServerVad {
            threshold: self.threshold,
            prefix_padding_ms: self.prefix_padding_ms,
            silence_duration_ms: self.silence_duration_ms,
            idle_timeout_ms: self.idle_timeout_ms,
            create_response,
            interrupt_response,
            interruption: Interruption::default_for(false),
        }
    }
}

/// VAD timing that [`TurnDetection::SemanticVad`] maps to, by eagerness.
pub fn semantic_silence_ms(eagerness: &str) -> u32 {
    match eagerness {
        "high" => 300,
        "low" => 1200,
        _ => 700,
    }
}

impl TurnDetection {
    /// `(threshold, prefix_padding_ms, silence_duration_ms)` for the detector.
    pub fn vad_timing(&self) -> (f64, u32, u32) {
        match self {
            TurnDetection::ServerVad {
                threshold,
                prefix_padding_ms,
                silence_duration_ms,
                ..
            } => (*threshold, *prefix_padding_ms, *silence_duration_ms),
            TurnDetection::SemanticVad { eagerness, .. } => {
                (0.5, 300, semantic_silence_ms(eagerness))
            }
        }
    }

    /// Whether the end of speech creates a response.
    pub fn create_response(&self) -> bool {
        match self {
            TurnDetection::ServerVad {
                create_response, ..
            }
            | TurnDetection::SemanticVad {
                create_response, ..
            } => *create_response,
        }
    }

    /// How speech over an answer interrupts it.
    pub fn interruption(&self) -> Interruption {
        match self {
            TurnDetection::ServerVad { interruption, .. }
            | TurnDetection::SemanticVad { interruption, .. } => *interruption,
        }
    }

    /// What omitted interruption fields keep under `param`: this one's while the type
    /// stays, the new type's default otherwise.
    fn interruption_kept(&self, param: &TurnDetectionParam) -> Interruption {
        match (self, param) {
            (TurnDetection::ServerVad { .. }, TurnDetectionParam::ServerVad { .. })
            | (TurnDetection::SemanticVad { .. }, TurnDetectionParam::SemanticVad { .. }) => {
                self.interruption()
            }
            (_, p) => {
                Interruption::default_for(matches!(p, TurnDetectionParam::SemanticVad { .. }))
            }
        }
    }

    /// Whether speech start cancels the active response.
    pub fn interrupt_response(&self) -> bool {
        match self {
            TurnDetection::ServerVad {
                interrupt_response, ..
            }
            | TurnDetection::SemanticVad {
                interrupt_response, ..
            } => *interrupt_response,
        }
    }

    /// Applies a client's turn detection over `current` (fields the client omits keep
    /// their value when the type stays the same, else take the defaults).
    pub(super) fn merged(
        current: Option<&TurnDetection>,
        param: TurnDetectionParam,
    ) -> Result<Self, ErrorPayload> {
        let base = current.cloned().unwrap_or_default();
        let (cur_create, cur_interrupt) = (base.create_response(), base.interrupt_response());
        let cur_interruption = base.interruption_kept(&param);
        match param {
            TurnDetectionParam::ServerVad {
                threshold,
                prefix_padding_ms,
                silence_duration_ms,
                idle_timeout_ms,
                create_response,
                interrupt_response,
                interruption,
            } => {
                let timing = VadTiming::kept(&base).merge(
                    threshold,
                    prefix_padding_ms,
                    silence_duration_ms,
                    idle_timeout_ms,
                )?;
                let mut td = timing.server_vad(
                    create_response.unwrap_or(cur_create),
                    interrupt_response.unwrap_or(cur_interrupt),
                );
                if let TurnDetection::ServerVad {
                    interruption: i, ..
                } = &mut td
                {
                    *i = cur_interruption.merge(interruption)?;
                }
                Ok(td)
            }
            TurnDetectionParam::SemanticVad {
                eagerness,
                create_response,
                interrupt_response,
                interruption,
            } => {
                let eagerness = eagerness.unwrap_or_else(|| "auto".into());
                if !["low", "medium", "high", "auto"].contains(&eagerness.as_str()) {
                    return Err(invalid_td("eagerness", "must be low, medium, high or auto"));
                }
                Ok(TurnDetection::SemanticVad {
                    eagerness,
                    create_response: create_response.unwrap_or(cur_create),
                    interrupt_response: interrupt_response.unwrap_or(cur_interrupt),
                    interruption: cur_interruption.merge(interruption)?,
                })
            }
        }
    }
}

fn invalid_td(field: &str, what: &str) -> ErrorPayload {
    ErrorPayload::invalid(
        codes::INVALID_VALUE,
        format!("turn_detection.{field} {what}"),
    )
    .with_param(format!("session.audio.input.turn_detection.{field}"))
}
