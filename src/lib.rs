//! Duet: a WebRTC-first realtime speech server speaking the OpenAI Realtime API.
//!
//! Layout: [`protocol`] is the event codec; [`session`] the duplex session actor; the rest are
//! drivers (HTTP/WebSocket server, model loop thread, configuration).

pub mod config;
pub mod engine;
pub mod impair;
pub mod loadgen;
pub mod memory;
pub mod metrics;
pub mod model_loop;
pub mod net;
pub mod rtc_client;
pub mod server;
pub mod session;

/// The event codec (the `duet-protocol` crate).
pub use duet_protocol as protocol;
