//! Conversation items and content parts (GA shapes).

use serde::{Deserialize, Serialize};

/// `status` of an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    /// Finished.
    Completed,
    /// Cut short (cancelled or interrupted response).
    Incomplete,
    /// Still being produced.
    InProgress,
}

/// `role` of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// System message.
    System,
    /// The caller.
    User,
    /// The model.
    Assistant,
}

/// A content part of a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Content {
    /// Text from the user or system.
    InputText {
        /// The text.
        text: String,
    },
    /// Audio from the user. `audio` is base64 in the session's input format.
    InputAudio {
        /// Audio bytes (only in `conversation.item.retrieved`; omitted elsewhere).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        audio: Option<String>,
        /// Transcript, `null` when none.
        #[serde(default)]
        transcript: Option<String>,
    },
    /// Text from the model (`text` is the beta name).
    #[serde(alias = "text")]
    OutputText {
        /// The text.
        text: String,
    },
    /// Audio from the model (`audio` is the beta name).
    #[serde(alias = "audio")]
    OutputAudio {
        /// Audio bytes (only in `conversation.item.retrieved`; omitted elsewhere).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        audio: Option<String>,
        /// Transcript of what was said (cut to what was heard after a truncation).
        #[serde(default)]
        transcript: Option<String>,
    },
}

/// A conversation item, as rendered to clients and as accepted in `conversation.item.create`.
///
/// `id`, `object` and `status` are optional when a client creates an item; the server always
/// fills them before rendering.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Item {
    /// A message with content parts.
    Message {
        /// `item_…`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// `realtime.item`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        object: Option<String>,
        /// Item status.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<ItemStatus>,
        /// Who speaks.
        role: Role,
        /// The parts.
        content: Vec<Content>,
    },
    /// A tool call made by the model.
    FunctionCall {
        /// `item_…`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// `realtime.item`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        object: Option<String>,
        /// Item status.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<ItemStatus>,
        /// Tool name.
        name: String,
        /// Call id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// JSON-encoded arguments.
        arguments: String,
    },
    /// The result of a tool call, sent by the client.
    FunctionCallOutput {
        /// `item_…`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// `realtime.item`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        object: Option<String>,
        /// Item status.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<ItemStatus>,
        /// The call this answers.
        call_id: String,
        /// The tool's output.
        output: String,
    },
}

impl Item {
    /// The item's id, if set.
    pub fn id(&self) -> Option<&str> {
        match self {
            Item::Message { id, .. }
            | Item::FunctionCall { id, .. }
            | Item::FunctionCallOutput { id, .. } => id.as_deref(),
        }
    }

    /// Fills `id` (when missing), `object` and `status`.
    pub fn stamp(&mut self, new_id: impl FnOnce() -> String, new_status: ItemStatus) {
        let (id, object, status) = match self {
            Item::Message {
                id, object, status, ..
            }
            | Item::FunctionCall {
                id, object, status, ..
            }
            | Item::FunctionCallOutput {
                id, object, status, ..
            } => (id, object, status),
        };
        if id.is_none() {
            *id = Some(new_id());
        }
        *object = Some("realtime.item".into());
        *status = Some(new_status);
    }

    /// Sets the status.
    pub fn set_status(&mut self, new_status: ItemStatus) {
        match self {
            Item::Message { status, .. }
            | Item::FunctionCall { status, .. }
            | Item::FunctionCallOutput { status, .. } => *status = Some(new_status),
        }
    }

    /// Bytes the item holds besides audio: its strings (text, transcripts, a call's name,
    /// arguments and output, ids) and its parts. What a session charges to the memory
    /// budget and counts against its conversation's text limit.
    pub fn text_bytes(&self) -> usize {
        let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        let strings = match self {
            Item::Message { id, content, .. } => {
                opt(id)
                    + content
                        .iter()
                        .map(|part| {
                            std::mem::size_of::<Content>()
                                + match part {
                                    Content::InputText { text } | Content::OutputText { text } => {
                                        text.len()
                                    }
                                    Content::InputAudio { transcript, .. }
                                    | Content::OutputAudio { transcript, .. } => opt(transcript),
                                }
                        })
                        .sum::<usize>()
            }
            Item::FunctionCall {
                id,
                name,
                call_id,
                arguments,
                ..
            } => opt(id) + name.len() + opt(call_id) + arguments.len(),
            Item::FunctionCallOutput {
                id,
                call_id,
                output,
                ..
            } => opt(id) + call_id.len() + output.len(),
        };
        std::mem::size_of::<Item>() + strings
    }
}

/// `part` of `response.content_part.added|done`: `audio` or `text` (not `output_*`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// An audio part; `transcript` grows with the response.
    Audio {
        /// Transcript so far.
        transcript: String,
    },
    /// A text part.
    Text {
        /// Text so far.
        text: String,
    },
}
