//! The clients that Duet's integration tests, examples and benchmarks use to drive a server
//! from the outside, as real callers would: a WebRTC caller ([`rtc`]), the load generator
//! that runs many of them on one thread ([`load`]), a UDP relay that loses and delays their
//! packets ([`impair`]), a minimal HTTP/1.1 client ([`http`]) and the `ppoll` waits they share
//! ([`poll`]), the WebSocket load generator ([`ws_load`]), one WebSocket session driven in
//! real time for the turn-taking benchmarks ([`live`]), a SIP caller ([`sip`]), scripted
//! upstreams ([`scripted_llm`]), TLS fronts for them with test certificates ([`tls`]), and the
//! generated turn-taking set ([`turn_set`]).
//!
//! This crate is a dev-dependency of `duet` only: the server binary never links it.
#![warn(missing_docs)]

pub mod http;
pub mod impair;
pub mod live;
pub mod load;
pub mod poll;
pub mod rtc;
pub mod scripted_llm;
pub mod sip;
pub mod speech;
pub mod tls;
pub mod turn_set;
pub mod ws_load;
