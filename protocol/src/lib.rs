//! Duet's event codec: the OpenAI Realtime API's GA contract as typed client and server
//! events, the session object, items, responses and errors, plus the strictness real
//! clients need ([`strict`]); and the chat-completions wire ([`chat`], with the server-sent
//! events it streams as, [`sse`]). Pure data and serde: no session logic, no I/O, no runtime;
//! the server, the clients and the fuzz targets all depend on it alone.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod chat;
pub mod client;
pub mod duplex;
pub mod error;
pub mod ids;
pub mod items;
mod nullable;
pub mod response;
pub mod secrets;
pub mod server;
pub mod session;
pub mod sse;
pub mod strict;

#[cfg(test)]
mod decode_tests;
#[cfg(test)]
mod tests;

pub use client::{decode, decode_duplex, ClientEvent, Envelope, MAX_EVENT_BYTES};
pub use error::{codes, ErrorPayload, ErrorType};
pub use items::{Content, Item, ItemStatus, Part, Role};
pub use response::{Response, ResponseParams, ResponseStatus, StatusDetails, Usage};
pub use server::{ContentRef, ServerEvent, ServerEventBody};
pub use session::{
    AudioFormat, Interruption, InterruptionMode, Modality, SessionConfig, SessionPatch,
    TurnDetection,
};
