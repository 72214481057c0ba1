//! The clients that Duet's integration tests, examples and benchmarks use to drive a server
//! from the outside, as real callers would: a WebRTC caller ([`rtc`]), the load generator
//! that runs many of them on one thread ([`load`]), a UDP relay that loses and delays their
//! packets ([`impair`]), a minimal HTTP/1.1 client ([`http`]) and the `ppoll` waits they share
//! ([`poll`]), the WebSocket load generator ([`ws_load`]), a SIP caller ([`sip`]), scripted
//! upstreams ([`scripted_llm`]) and TLS fronts for them with test certificates ([`tls`]).
//!
//! This crate is a dev-dependency of `duet` only: the server binary never links it.
#![warn(missing_docs)]

pub mod http;
pub mod impair;
pub mod load;
pub mod poll;
pub mod rtc;
pub mod scripted_llm;
pub mod sip;
pub mod speech;
pub mod tls;
pub mod ws_load;
