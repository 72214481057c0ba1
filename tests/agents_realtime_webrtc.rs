//! The official `@openai/agents-realtime` SDK's WebRTC transport in a browser against Duet:
//! runs `tests/sdk-js/realtime_webrtc.mjs`, which bundles the SDK with esbuild, serves a page
//! from its own origin and drives Debian's headless Chromium with playwright-core (a fake
//! microphone playing a WAV): `OpenAIRealtimeWebRTC({ baseUrl: '…/v1/realtime/calls',
//! useInsecureApiKey: true })` connects cross-origin (CORS preflight, callId from
//! `Location`), session.updated within 5 s, one spoken turn answered on RTP
//! (output_audio_buffer.started/stopped, audible in the page), then `interrupt()` during a
//! second answer: output_audio_buffer.cleared, response.done cancelled, silence after.
//!
//! Node comes from `DUET_TEST_NODE`, else `node` on PATH; the packages from
//! `tests/sdk-js/node_modules` (`npm ci --prefix tests/sdk-js`, which `./scripts/test` runs);
//! Chromium from `DUET_CHROMIUM`, else `/usr/bin/chromium` (Debian's `chromium` package,
//! which `.ci/run` installs). Anything missing fails the test rather than skipping it.

use crate::common;

use std::time::Duration;

use common::external;

/// The script has its own 90 s limit; this leaves room for Node's and Chromium's start.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(150);

const HOW_TO_INSTALL: &str = "run ./scripts/test (it runs `npm ci --prefix tests/sdk-js`), or run \
     that command yourself; Node.js >= 20 must be on PATH or named by DUET_TEST_NODE, and \
     Chromium at /usr/bin/chromium (`apt-get install chromium`; .ci/run does it) or named by \
     DUET_CHROMIUM";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_realtime_webrtc_in_chromium() {
    run(&[], &[]).await;
}

/// The production path: a server with a key, a backend that mints an ephemeral client
/// secret (`POST /v1/realtime/client_secrets`), and the SDK in the browser using the `ek_`
/// key as its API key without `useInsecureApiKey`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_realtime_webrtc_in_chromium_with_a_client_secret() {
    run(
        &["--api-key", "server-key"],
        &["--server-key", "server-key"],
    )
    .await;
}

async fn run(server_flags: &[&str], script_flags: &[&str]) {
    let _one = common::exclusive().await; // one browser at a time
    let dir = external::repo_path("tests/sdk-js");
    let node = external::node();
    external::require_version(&node, HOW_TO_INSTALL).await;
    external::require_node_packages(&dir, HOW_TO_INSTALL);
    let browser = external::chromium("DUET_CHROMIUM");
    external::require_version(&browser, HOW_TO_INSTALL).await;

    let addr = common::server(server_flags).await;
    let mut cmd = node.command();
    cmd.arg(dir.join("realtime_webrtc.mjs"))
        .arg("--base-url")
        .arg(format!("http://{addr}"))
        .args(script_flags)
        .env("DUET_CHROMIUM", &browser.path)
        .current_dir(&dir);
    external::run_script(cmd, SCRIPT_TIMEOUT).await;
}
