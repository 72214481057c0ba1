//! The official `@openai/agents-realtime` SDK (Node) over WebSocket against Duet: runs
//! `tests/sdk-js/realtime_ws.mjs` (a RealtimeAgent in a RealtimeSession on
//! `OpenAIRealtimeWebSocket({ url: 'ws://…/v1/realtime?model=gpt-realtime' })`: connect and
//! session.updated within 5 s, one spoken server-VAD turn answered as the SDK's `audio`
//! events, then `interrupt()` during a second answer: response.done cancelled, the SDK's
//! truncate and retrieve answered, no `error` event) against an in-process server.
//!
//! Node comes from `DUET_TEST_NODE`, else `node` on PATH; the packages from
//! `tests/sdk-js/node_modules` (`npm ci --prefix tests/sdk-js`, which `./scripts/test` runs).
//! Anything missing fails the test rather than skipping it.

mod common;

use std::time::Duration;

use common::external;

/// The script has its own 60 s limit; this leaves room for Node's start.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

const HOW_TO_INSTALL: &str = "run ./scripts/test (it runs `npm ci --prefix tests/sdk-js`), or run \
     that command yourself; Node.js >= 20 must be on PATH or named by DUET_TEST_NODE";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_realtime_websocket_session() {
    let dir = external::repo_path("tests/sdk-js");
    let node = external::node();
    external::require_version(&node, HOW_TO_INSTALL).await;
    external::require_node_packages(&dir, HOW_TO_INSTALL);

    let addr = common::server(&[]).await;
    let mut cmd = node.command();
    cmd.arg(dir.join("realtime_ws.mjs"))
        .arg("--base-url")
        .arg(format!("http://{addr}"))
        .current_dir(&dir);
    external::run_script(cmd, SCRIPT_TIMEOUT).await;
}
