//! The official `@openai/agents-realtime` SDK (Node) over WebSocket against Duet: runs
//! `tests/sdk-js/realtime_ws.mjs` (a RealtimeAgent in a RealtimeSession on
//! `OpenAIRealtimeWebSocket({ url: 'ws://…/v1/realtime?model=gpt-realtime' })`: connect and
//! session.updated within 5 s, one spoken server-VAD turn answered as the SDK's `audio`
//! events, then `interrupt()` during a second answer: response.done cancelled, the SDK's
//! truncate and retrieve answered, then a backchannel over a third answer (no
//! `speech_started`, so the SDK does not cut its playback) and a real interruption over a
//! fourth (the SDK's `audio_interrupted`), no `error` event) against an in-process server.
//!
//! Node comes from `DUET_TEST_NODE`, else `node` on PATH; the packages from
//! `tests/sdk-js/node_modules` (`npm ci --prefix tests/sdk-js`, which `./scripts/test` runs).
//! Anything missing fails the test rather than skipping it.

use crate::common;

use common::external;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_realtime_websocket_session() {
    let addr = common::server(&[]).await;
    external::run_agents_node("realtime_ws.mjs", addr).await;
}
