//! The official `@openai/agents-realtime` SDK (Node) over WebSocket against the full-duplex
//! model: `duet moshi-tiny` writes tiny Moshi weights, the server runs `--model moshi`, and
//! `tests/sdk-js/realtime_ws_moshi.mjs` streams silence through a RealtimeSession. The model
//! speaks on its own: `response.speak` (outside the SDK's schema) causes no SDK error, the
//! speech plays as the SDK's `audio` events with its words in the SDK's history, and
//! `session.interrupt()` cancels and truncates it.
//!
//! Node and the packages as for `agents_realtime_ws.rs`; anything missing fails the test.

use crate::common;

use common::external;
use common::moshi::tiny_moshi_server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_realtime_on_a_full_duplex_model() {
    let moshi = tiny_moshi_server("agents-js").await;
    let addr = moshi.addr;
    external::run_agents_node("realtime_ws_moshi.mjs", addr).await;
}
