//! The plugin trait and its value types.

pub use crate::context::{ContextItem, Tool, ToolCall, ToolCallDelta, ToolChoice, TurnInput};

/// Sample rate every model consumes and produces (the Realtime API's PCM rate).
pub const MODEL_SAMPLE_RATE: u32 = duet_media::SESSION_RATE;

/// What a model declares about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelInfo {
    /// Name reported in `/v1/models` and `session.model`.
    pub name: String,
    /// Samples per step at [`MODEL_SAMPLE_RATE`] (echo: 480 = 20 ms; Moshi: 1920 = 80 ms).
    pub frame_samples: usize,
    /// How many sessions the model can step at once.
    pub max_slots: usize,
    /// The model decides on its own when to speak (full duplex, e.g. Moshi): its output
    /// arrives without a [`Request::Respond`], and [`StepOutput::speaking`] tells the session
    /// when a spoken turn starts and ends. `false` for request/response models (echo).
    pub autonomous: bool,
    /// The model can call tools ([`StepOutput::tool_call`]). A session refuses tools for a
    /// model that cannot, rather than accept them and never call one.
    pub tools: bool,
    /// The model reads user turns as words (the cascade): a session transcribes its user's
    /// audio for it whether or not the client asked for transcripts.
    pub reads_text: bool,
}

impl ModelInfo {
    /// Duration of one step in microseconds.
    pub fn frame_micros(&self) -> u64 {
        self.frame_samples as u64 * 1_000_000 / u64::from(MODEL_SAMPLE_RATE)
    }
}

/// A session's place in the model's batch.
pub type SlotId = usize;

/// What the answer should be made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputModality {
    /// Speech with a transcript.
    Audio,
    /// Text only.
    Text,
}

/// A control message for one slot, applied before its next step.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Answer now, from this context (oldest first; the last user turn matters most).
    Respond {
        /// Audio or text.
        modality: OutputModality,
        /// The session's (or response's) instructions.
        instructions: String,
        /// The conversation, oldest first.
        input: Vec<ContextItem>,
        /// Functions the model may call (empty: none).
        tools: Vec<Tool>,
        /// Whether it must call one.
        tool_choice: ToolChoice,
        /// The voice to speak with (`audio.output.voice`; models with one voice ignore it).
        voice: String,
        /// Speaking rate, 0.25–1.5 (`audio.output.speed`; 1: the voice's own).
        speed: f32,
    },
    /// Stop the current answer immediately; nothing more of it may be produced.
    Cancel,
}

/// One slot's input for a step: exactly `frame_samples` samples (silence when the caller
/// sent nothing).
#[derive(Debug)]
pub struct StepInput<'a> {
    /// Which slot.
    pub slot: SlotId,
    /// Input audio at [`MODEL_SAMPLE_RATE`].
    pub pcm: &'a [f32],
}

/// One slot's output for a step. For a turn-based model, empty `audio` and `text` mean it
/// has nothing to say; an autonomous one always returns a frame of audio (silence while it
/// listens) and says whether it is speaking in `speaking`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepOutput {
    /// Speech produced this step (at most `frame_samples`).
    pub audio: Vec<f32>,
    /// Text produced this step (transcript of the audio, or the text answer).
    pub text: String,
    /// A piece of a tool call made this step (models with [`ModelInfo::tools`]).
    pub tool_call: Option<ToolCallDelta>,
    /// The answer failed (the model's session goes on): the response ends `failed` with
    /// this error. Comes with `end_of_turn`.
    pub failed: Option<AnswerFailure>,
    /// The model finished its answer with this step.
    pub end_of_turn: bool,
    /// Autonomous models only: this frame belongs to the model's own speech. The plugin
    /// applies its own hysteresis, so a `false` after `true` means the model fell silent
    /// and is listening. Always `false` for request/response models.
    pub speaking: bool,
}

/// Why an answer failed, for the client: a stable code and a message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AnswerFailure {
    /// Stable snake_case code (`llm_unavailable`, `llm_error`, …).
    pub code: String,
    /// What happened, for a person.
    pub message: String,
}

impl StepOutput {
    /// Whether it carries nothing for a turn-based model's session: no audio, text or tool
    /// call, and not the end of the turn.
    pub fn is_empty(&self) -> bool {
        self.audio.is_empty()
            && self.text.is_empty()
            && self.tool_call.is_none()
            && self.failed.is_none()
            && !self.end_of_turn
    }
}

/// Model failures. A slot error ends that session only.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// `--model` names nothing known.
    #[error("unknown model {name:?}; available: {available}")]
    UnknownModel {
        /// Requested name.
        name: String,
        /// Known names.
        available: String,
    },
    /// Every slot is in use.
    #[error("all {0} model slots are in use")]
    SlotsExhausted(usize),
    /// A slot that is not open.
    #[error("slot {0} is not open")]
    UnknownSlot(SlotId),
    /// Input of the wrong size.
    #[error("step input has {got} samples, expected {expected}")]
    BadFrame {
        /// Samples given.
        got: usize,
        /// Samples expected.
        expected: usize,
    },
    /// Anything else inside the model.
    #[error("model failure: {0}")]
    Failed(String),
}

impl ModelError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            ModelError::UnknownModel { .. } => "unknown_model",
            ModelError::SlotsExhausted(_) => "model_slots_exhausted",
            ModelError::UnknownSlot(_) => "model_unknown_slot",
            ModelError::BadFrame { .. } => "model_bad_frame",
            ModelError::Failed(_) => "model_error",
        }
    }
}

/// A full-duplex speech model: listens and speaks at the same time, one frame per step.
///
/// The model loop thread owns the model, opens a slot per session, applies requests and
/// calls [`DuplexModel::step`] once per frame period with every active slot.
pub trait DuplexModel: Send {
    /// Static facts about the model.
    fn info(&self) -> &ModelInfo;
    /// Runs a throwaway step so the first real one is on time.
    fn warmup(&mut self) -> Result<(), ModelError>;
    /// Allocates fresh per-session state.
    fn open_slot(&mut self) -> Result<SlotId, ModelError>;
    /// Frees a slot; the id may be reused.
    fn close_slot(&mut self, slot: SlotId);
    /// Applies a control message to a slot.
    fn request(&mut self, slot: SlotId, request: Request) -> Result<(), ModelError>;
    /// Steps every slot in `batch` once; pushes exactly one result per input, in order.
    fn step(&mut self, batch: &[StepInput<'_>], out: &mut Vec<Result<StepOutput, ModelError>>);
}
