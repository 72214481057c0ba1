//! The official OpenAI Python SDK against Duet: runs `tests/python/openai_realtime.py`
//! (session.update, error events, a full audio turn, a cancelled response) against an
//! in-process server.
//!
//! Python comes from `DUET_TEST_PYTHON`, else `.venv/bin/python` in the repository, else
//! `python3`. The `openai` package must be installed there (`./scripts/test` does it); a
//! missing SDK fails the test rather than skipping it.

mod common;

use std::time::Duration;

use common::external;

/// The script has its own 60 s limit; this leaves room for interpreter start and imports.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_python_sdk_realtime_session() {
    // The SDK (with its realtime extra) must be importable; fail with directions if not.
    let python = external::python();
    external::require_python_modules(
        &python,
        &[
            "openai",
            "websockets",
            "openai.types.realtime:RealtimeServerEvent",
        ],
        external::PYTHON_HOW_TO_INSTALL,
    )
    .await;

    let addr = common::server(&[]).await;
    let mut cmd = python.command();
    cmd.arg(external::repo_path("tests/python/openai_realtime.py"))
        .arg("--base-url")
        .arg(format!("http://{addr}/v1"));
    external::run_script(cmd, SCRIPT_TIMEOUT).await;
}
