//! What a model is asked to answer from: the conversation in order, and the tools it may
//! call. The session builds it from its items (audio as transcripts where it has them,
//! assistant turns cut to what the user heard); a model takes what it can use and says in
//! [`crate::ModelInfo`] what it cannot.

use std::sync::Arc;

/// One turn of a user's input.
#[derive(Clone, Debug, PartialEq)]
pub enum TurnInput {
    /// The user's audio at [`crate::MODEL_SAMPLE_RATE`].
    Audio(Arc<[f32]>),
    /// The user's text.
    Text(String),
    /// The user's audio and what a transcriber heard in it.
    Transcribed {
        /// Audio at [`crate::MODEL_SAMPLE_RATE`].
        audio: Arc<[f32]>,
        /// Its transcript.
        transcript: String,
    },
}

impl TurnInput {
    /// Its words, where it has any (text, or a transcript).
    pub fn text(&self) -> Option<&str> {
        match self {
            TurnInput::Text(t) | TurnInput::Transcribed { transcript: t, .. } => Some(t),
            TurnInput::Audio(_) => None,
        }
    }
}

/// A call the model made to one of its tools.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolCall {
    /// The call's id (`call_…`), which its result names.
    pub call_id: String,
    /// The function called.
    pub name: String,
    /// Its arguments, JSON text.
    pub arguments: String,
}

/// One item of the conversation, oldest first.
#[derive(Clone, Debug, PartialEq)]
pub enum ContextItem {
    /// A system message.
    System(String),
    /// A user turn.
    User(TurnInput),
    /// What the assistant said, as far as the user heard it.
    Assistant(String),
    /// A tool call the assistant made.
    ToolCall(ToolCall),
    /// The result of a tool call.
    ToolResult {
        /// The call it answers.
        call_id: String,
        /// The tool's output (text, often JSON).
        output: String,
    },
}

impl ContextItem {
    /// The user turn, if it is one.
    pub fn user(&self) -> Option<&TurnInput> {
        match self {
            ContextItem::User(t) => Some(t),
            _ => None,
        }
    }
}

/// A function the model may call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tool {
    /// Its name (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its parameters, a JSON Schema as JSON text (`{}` when none were given).
    pub parameters: String,
}

/// Whether and which tool the model must call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool call.
    None,
    /// Some tool call.
    Required,
    /// A call of this function.
    Function(String),
}

/// A step's piece of a tool call: the first for a `call_id` names the function, the rest
/// add to its arguments. A call is complete when another call, speech or text starts, or
/// at the end of the turn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolCallDelta {
    /// The call's id.
    pub call_id: String,
    /// The function (on the call's first piece; may be empty after).
    pub name: String,
    /// Arguments text added by this piece.
    pub arguments: String,
}
