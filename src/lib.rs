//! Duet: a WebRTC-first realtime speech server speaking the OpenAI Realtime API.
//!
//! This library holds the server's drivers, and two pure cores that need the server's types
//! (the session machine and cluster placement): [`cluster`] (cluster mode on Redis),
//! [`config`] (the command line) and [`config_file`] (the config file, `check-config`),
//! [`cpu_share`] (which threads get a busy CPU first),
//! [`engine`] (the WebRTC media engine threads), [`espeak`] (the phonemes' program), [`llm`] (the cascade's LLM, remote or
//! embedded) and [`llm_loop`] (the embedded LLM's threads), [`memory`] (the memory budget),
//! [`metrics`] (Prometheus counters), [`model_loop`] (the model thread), [`server`] (HTTP,
//! WebSocket and call signaling), [`session`] (the duplex session actor), [`sip`] (phone
//! calls), [`speech_loop`] (the cascade's synthesis thread) and [`transcribe_loop`] (the
//! transcription thread), plus the event codec re-exported as [`protocol`]. The clients that
//! the tests, examples and benchmarks use live in the `duet-client` crate, which the server
//! never links. The layout rules are in `docs/architecture.md`.

#![warn(missing_docs)]

pub mod calls;
pub mod cidr;
pub mod cluster;
pub mod config;
pub mod config_file;
pub mod cpu_share;
pub mod engine;
pub mod error;
pub mod espeak;
pub mod http_client;
pub mod llm;
pub mod llm_loop;
pub mod memory;
pub mod metrics;
pub mod model_loop;
pub mod server;
pub mod session;
pub mod sip;
pub mod speech_loop;
pub mod stores;
pub mod stt;
pub mod transcribe_loop;
pub mod tts;
pub mod turn_loop;

/// The event codec (the `duet-protocol` crate).
pub use duet_protocol as protocol;

#[cfg(test)]
mod function_length_tests;

#[cfg(test)]
mod module_graph_tests;
