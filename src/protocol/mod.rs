//! The OpenAI Realtime event codec (GA contract): typed client and server events, the
//! session object, items, responses and errors. Pure data: no session logic, no I/O.

pub mod client;
pub mod error;
pub mod ids;
pub mod items;
mod nullable;
pub mod response;
pub mod server;
pub mod session;
pub mod strict;

#[cfg(test)]
mod tests;

pub use client::{decode, ClientEvent, Envelope, MAX_EVENT_BYTES};
pub use error::{codes, ErrorPayload, ErrorType};
pub use items::{Content, Item, ItemStatus, Part, Role};
pub use response::{Response, ResponseParams, ResponseStatus, StatusDetails, Usage};
pub use server::{ContentRef, ServerEvent, ServerEventBody};
pub use session::{AudioFormat, Modality, SessionConfig, SessionPatch, TurnDetection};
