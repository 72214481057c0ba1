//! Client events and their decoding, with errors that keep the session alive.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::error::{codes, ErrorPayload};
use super::items::Item;
use super::response::ResponseParams;
use super::session::SessionPatch;

/// The largest client event Duet accepts (OpenAI's `input_audio_buffer.append` limit).
pub const MAX_EVENT_BYTES: usize = 15 * 1024 * 1024;

/// A decoded client event.
#[derive(Clone, Debug)]
pub enum ClientEvent {
    /// `session.update`: partial session update.
    SessionUpdate {
        /// The partial session.
        session: Box<SessionPatch>,
    },
    /// `input_audio_buffer.append`: audio in the session's input format, base64.
    InputAudioBufferAppend {
        /// Base64 audio.
        audio: String,
    },
    /// `input_audio_buffer.commit`: turn the buffer into a user item.
    InputAudioBufferCommit,
    /// `input_audio_buffer.clear`: drop the uncommitted input.
    InputAudioBufferClear,
    /// `output_audio_buffer.clear`: stop the audio being played (WebRTC).
    OutputAudioBufferClear,
    /// `conversation.item.create`: add an item.
    ConversationItemCreate {
        /// Insert after this item (`"root"` = at the start; omitted = at the end).
        previous_item_id: Option<String>,
        /// The item.
        item: Box<Item>,
    },
    /// `conversation.item.retrieve`: fetch an item with its audio.
    ConversationItemRetrieve {
        /// Item id.
        item_id: String,
    },
    /// `conversation.item.truncate`: cut an assistant audio item to what was heard.
    ConversationItemTruncate {
        /// Item id.
        item_id: String,
        /// Content part index (0).
        content_index: u32,
        /// Milliseconds of audio to keep.
        audio_end_ms: u64,
    },
    /// `conversation.item.delete`: remove an item.
    ConversationItemDelete {
        /// Item id.
        item_id: String,
    },
    /// `response.create`: start a response.
    ResponseCreate {
        /// Per-response overrides.
        response: Option<Box<ResponseParams>>,
    },
    /// `response.cancel`: cancel the active response.
    ResponseCancel {
        /// Which response (default: the active one).
        response_id: Option<String>,
    },
    /// Duplex extension: `session.resume` (valid only as a resume socket's first message).
    SessionResume(crate::duplex::ResumeRequest),
    /// Duplex extension: `session.event_ack`: the client has every event up to this seq.
    SessionEventAck {
        /// The seq acknowledged (checked by the session: negative or past the head is an error).
        server_event_seq: i64,
    },
    /// Duplex extension: `session.heartbeat`.
    SessionHeartbeat,
    /// Duplex extension: `session.close`.
    SessionClose {
        /// Why (default `client_close`).
        reason: Option<String>,
    },
    /// Duplex extension: `barge_in`, a hard interrupt.
    BargeIn,
    /// Duplex extension: `playback.ack`: how much of the assistant's audio the client played.
    PlaybackAck {
        /// Milliseconds of the item's audio played (cumulative).
        played_ms: f64,
        /// The response it belongs to (default: the latest one).
        response_id: Option<String>,
        /// The assistant item it belongs to (default: the response's).
        item_id: Option<String>,
        /// Truncate the item to what played.
        truncate: bool,
    },
}

/// Wire shapes of the events, one struct each, so that error paths name the field.
mod wire {
    use super::*;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SessionUpdate {
        pub session: Box<SessionPatch>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Append {
        pub audio: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Empty {}
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ItemCreate {
        pub previous_item_id: Option<String>,
        pub item: Box<Item>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ItemId {
        pub item_id: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Truncate {
        pub item_id: String,
        pub content_index: u32,
        pub audio_end_ms: u64,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ResponseCreate {
        pub response: Option<Box<ResponseParams>>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ResponseCancel {
        pub response_id: Option<String>,
    }
}

/// Every client event type Duet understands.
pub const CLIENT_EVENT_TYPES: &[&str] = &[
    "session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "output_audio_buffer.clear",
    "conversation.item.create",
    "conversation.item.retrieve",
    "conversation.item.truncate",
    "conversation.item.delete",
    "response.create",
    "response.cancel",
];

/// A client event with its optional client `event_id`.
#[derive(Clone, Debug)]
pub struct Envelope {
    /// The client's id, echoed in `error.event_id`.
    pub event_id: Option<String>,
    /// The event.
    pub event: ClientEvent,
}

/// Decodes one text message. On failure the error carries the client's `event_id`
/// when it could be read, and the session is expected to continue.
pub fn decode(text: &str) -> Result<Envelope, ErrorPayload> {
    decode_with(text, false)
}

/// [`decode`] for a session that opted into the duplex extension: its commands
/// ([`crate::duplex::DUPLEX_CLIENT_EVENT_TYPES`]) are events too.
pub fn decode_duplex(text: &str) -> Result<Envelope, ErrorPayload> {
    decode_with(text, true)
}

fn decode_with(text: &str, duplex: bool) -> Result<Envelope, ErrorPayload> {
    if text.len() > MAX_EVENT_BYTES {
        return Err(ErrorPayload::invalid(
            codes::EVENT_TOO_LARGE,
            format!(
                "event of {} bytes exceeds the limit of {MAX_EVENT_BYTES} bytes",
                text.len()
            ),
        ));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| ErrorPayload::invalid(codes::INVALID_JSON, format!("invalid JSON: {e}")))?;
    let Value::Object(mut map) = value else {
        return Err(ErrorPayload::invalid(
            codes::INVALID_JSON,
            "an event must be a JSON object",
        ));
    };
    let event_id = take_event_id(&mut map)?;
    check_type(&map, duplex).map_err(|e| e.with_event_id(event_id.clone()))?;
    let event = decode_typed(map).map_err(|e| e.with_event_id(event_id.clone()))?;
    Ok(Envelope { event_id, event })
}

fn take_event_id(map: &mut Map<String, Value>) -> Result<Option<String>, ErrorPayload> {
    match map.remove("event_id") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(
            ErrorPayload::invalid(codes::INVALID_VALUE, "event_id must be a string")
                .with_param("event_id"),
        ),
    }
}

fn check_type(map: &Map<String, Value>, duplex: bool) -> Result<(), ErrorPayload> {
    let known = |t: &str| {
        CLIENT_EVENT_TYPES.contains(&t)
            || (duplex && crate::duplex::DUPLEX_CLIENT_EVENT_TYPES.contains(&t))
    };
    match map.get("type") {
        None => Err(ErrorPayload::invalid(
            codes::MISSING_REQUIRED_PARAMETER,
            "missing required parameter: 'type'",
        )
        .with_param("type")),
        Some(Value::String(t)) if known(t) => Ok(()),
        Some(Value::String(t)) => Err(ErrorPayload::invalid(
            codes::UNKNOWN_EVENT_TYPE,
            format!("unknown event type {t:?}"),
        )
        .with_param("type")),
        Some(_) => Err(
            ErrorPayload::invalid(codes::INVALID_VALUE, "type must be a string").with_param("type"),
        ),
    }
}

/// Decodes the event's fields by its `type` ([`check_type`] has checked it is one).
fn decode_typed(mut map: Map<String, Value>) -> Result<ClientEvent, ErrorPayload> {
    let kind = match map.remove("type") {
        Some(Value::String(t)) => t,
        _ => {
            return Err(ErrorPayload::invalid(
                codes::INVALID_VALUE,
                "type must be a string",
            ))
        }
    };
    let v = Value::Object(map);
    let event = match kind.strip_prefix("conversation.item.") {
        Some(op) => decode_item_event(op, &v)?,
        None => decode_session_event(&kind, &v)?,
    };
    event.ok_or_else(|| {
        ErrorPayload::invalid(
            codes::UNKNOWN_EVENT_TYPE,
            format!("unknown event type {kind:?}"),
        )
        .with_param("type")
    })
}

/// Session, audio buffer and response events; `None` for another type.
fn decode_session_event(kind: &str, v: &Value) -> Result<Option<ClientEvent>, ErrorPayload> {
    use ClientEvent as E;
    let empty = |e: ClientEvent| typed::<wire::Empty>(v).map(|_| e);
    Ok(Some(match kind {
        "session.update" => E::SessionUpdate {
            session: typed::<wire::SessionUpdate>(v)?.session,
        },
        "input_audio_buffer.append" => E::InputAudioBufferAppend {
            audio: typed::<wire::Append>(v)?.audio,
        },
        "input_audio_buffer.commit" => empty(E::InputAudioBufferCommit)?,
        "input_audio_buffer.clear" => empty(E::InputAudioBufferClear)?,
        "output_audio_buffer.clear" => empty(E::OutputAudioBufferClear)?,
        "response.create" => E::ResponseCreate {
            response: typed::<wire::ResponseCreate>(v)?.response,
        },
        "response.cancel" => E::ResponseCancel {
            response_id: typed::<wire::ResponseCancel>(v)?.response_id,
        },
        _ => return decode_duplex_event(kind, v),
    }))
}

/// The duplex extension's commands ([`check_type`] let them through only when opted in);
/// `None` for another type.
fn decode_duplex_event(kind: &str, v: &Value) -> Result<Option<ClientEvent>, ErrorPayload> {
    use crate::duplex::wire;
    use ClientEvent as E;
    let empty = |e: ClientEvent| typed::<self::wire::Empty>(v).map(|_| e);
    Ok(Some(match kind {
        "session.resume" => E::SessionResume(typed(v)?),
        "session.event_ack" => E::SessionEventAck {
            server_event_seq: typed::<wire::EventAck>(v)?.server_event_seq,
        },
        "session.heartbeat" => empty(E::SessionHeartbeat)?,
        "session.close" => E::SessionClose {
            reason: typed::<wire::Close>(v)?.reason,
        },
        "barge_in" => empty(E::BargeIn)?,
        "playback.ack" => {
            let w: wire::PlaybackAck = typed(v)?;
            if !w.played_ms.is_finite() || w.played_ms < 0.0 {
                return Err(ErrorPayload::invalid(
                    codes::INVALID_VALUE,
                    "played_ms must be a number of milliseconds, 0 or more",
                )
                .with_param("played_ms"));
            }
            let _ = w.committed_ms;
            E::PlaybackAck {
                played_ms: w.played_ms,
                response_id: w.response_id,
                item_id: w.item_id,
                truncate: w.truncate.unwrap_or(false),
            }
        }
        _ => return Ok(None),
    }))
}

/// `conversation.item.<op>` events; `None` for another op.
fn decode_item_event(op: &str, v: &Value) -> Result<Option<ClientEvent>, ErrorPayload> {
    use ClientEvent as E;
    Ok(Some(match op {
        "create" => {
            let w: wire::ItemCreate = typed(v)?;
            E::ConversationItemCreate {
                previous_item_id: w.previous_item_id,
                item: w.item,
            }
        }
        "retrieve" => E::ConversationItemRetrieve {
            item_id: typed::<wire::ItemId>(v)?.item_id,
        },
        "truncate" => {
            let w: wire::Truncate = typed(v)?;
            E::ConversationItemTruncate {
                item_id: w.item_id,
                content_index: w.content_index,
                audio_end_ms: w.audio_end_ms,
            }
        }
        "delete" => E::ConversationItemDelete {
            item_id: typed::<wire::ItemId>(v)?.item_id,
        },
        _ => return Ok(None),
    }))
}

fn typed<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, ErrorPayload> {
    serde_path_to_error::deserialize::<_, T>(value).map_err(|err| {
        let path = err.path().to_string();
        let message = err.inner().to_string();
        let code = if message.starts_with("unknown field") {
            codes::UNKNOWN_PARAMETER
        } else if message.starts_with("missing field") {
            codes::MISSING_REQUIRED_PARAMETER
        } else {
            codes::INVALID_VALUE
        };
        let param = param_path(&path, &message);
        let mut e = ErrorPayload::invalid(code, message);
        if let Some(p) = param {
            e = e.with_param(p);
        }
        e
    })
}

/// The dotted path of the offending field: the error path, plus the field named by an
/// `unknown field`/`missing field` message.
fn param_path(path: &str, message: &str) -> Option<String> {
    let named = message
        .split('`')
        .nth(1)
        .filter(|_| message.starts_with("unknown field") || message.starts_with("missing field"));
    let base = if path == "." { "" } else { path };
    match (base, named) {
        ("", None) => None,
        ("", Some(n)) => Some(n.to_string()),
        (b, None) => Some(b.to_string()),
        (b, Some(n)) if b.ends_with(n) => Some(b.to_string()),
        (b, Some(n)) => Some(format!("{b}.{n}")),
    }
}
