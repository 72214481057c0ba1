//! The official `@openai/agents-realtime` SDK (Node) over WebSocket against the full-duplex
//! model: `duet moshi-tiny` writes tiny Moshi weights, the server runs `--model moshi`, and
//! `tests/sdk-js/realtime_ws_moshi.mjs` streams silence through a RealtimeSession. The model
//! speaks on its own: `response.speak` (outside the SDK's schema) causes no SDK error, the
//! speech plays as the SDK's `audio` events with its words in the SDK's history, and
//! `session.interrupt()` cancels and truncates it.
//!
//! Node and the packages as for `agents_realtime_ws.rs`; anything missing fails the test.

mod common;

use std::time::Duration;

use common::external;
use common::moshi::{moshi_flags, tiny_moshi_dir};

/// The script has its own 60 s limit; this leaves room for Node's start.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

const HOW_TO_INSTALL: &str = "run ./scripts/test (it runs `npm ci --prefix tests/sdk-js`), or run \
     that command yourself; Node.js >= 20 must be on PATH or named by DUET_TEST_NODE";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_realtime_on_a_full_duplex_model() {
    let dir = external::repo_path("tests/sdk-js");
    let node = external::node();
    external::require_version(&node, HOW_TO_INSTALL).await;
    external::require_node_packages(&dir, HOW_TO_INSTALL);

    let weights = tiny_moshi_dir("agents-js");
    let flags = moshi_flags(&weights);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let addr = common::server(&flags).await;
    let mut cmd = node.command();
    cmd.arg(dir.join("realtime_ws_moshi.mjs"))
        .arg("--base-url")
        .arg(format!("http://{addr}"))
        .current_dir(&dir);
    external::run_script(cmd, SCRIPT_TIMEOUT).await;
    let _ = std::fs::remove_dir_all(&weights);
}
