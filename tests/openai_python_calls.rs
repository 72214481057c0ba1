//! The official OpenAI Python SDK's WebRTC call API against Duet: runs
//! `tests/python/openai_calls.py` against an in-process server. aiortc makes the offer;
//! `client.realtime.calls.create(sdp=..., session=...)` (multipart) creates the call and
//! returns the answer (201, `Location: /v1/realtime/calls/rtc_…`), the `session` part seeds
//! it; `client.realtime.connect(call_id=...)` joins it as a sideband that sees the call's
//! events and drives it; `client.realtime.calls.hangup(call_id)` ends it (the sideband is
//! closed, a second hangup is a 404).
//!
//! Python comes from `DUET_TEST_PYTHON`, else `.venv/bin/python` in the repository, else
//! `python3`. `openai` and `aiortc` must be installed there (`./scripts/test` does it); a
//! missing package fails the test rather than skipping it.

use crate::common;

use std::time::Duration;

use common::external;

/// The script has its own 60 s limit; this leaves room for interpreter start and imports.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_python_sdk_webrtc_call_with_sideband() {
    // The SDK (with its realtime extra) and aiortc must be importable; fail if not.
    let python = external::python();
    external::require_python_modules(
        &python,
        &[
            "openai",
            "websockets",
            "aiortc",
            "av",
            "openai.types.realtime:RealtimeServerEvent",
        ],
        external::PYTHON_HOW_TO_INSTALL,
    )
    .await;

    let addr = common::server(&[]).await;
    let mut cmd = python.command();
    cmd.arg(external::repo_path("tests/python/openai_calls.py"))
        .arg("--base-url")
        .arg(format!("http://{addr}/v1"));
    external::run_script(cmd, SCRIPT_TIMEOUT).await;
}
