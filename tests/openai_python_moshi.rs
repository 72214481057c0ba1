//! The official OpenAI Python SDK against the full-duplex model: `duet moshi-tiny` writes tiny
//! Moshi weights, the server runs `--model moshi` on them, and `tests/python/openai_moshi.py`
//! streams silence through `client.realtime.connect(model="moshi")`. The model speaks on its
//! own: the SDK receives the GA response lifecycle with Duet's `response.speak` (outside the
//! SDK's event union, still readable through it), the model's audio and words; then the SDK's
//! `response.cancel` fences it.
//!
//! Python and the `openai` package as for `openai_python.rs`; a missing SDK fails the test.

mod common;

use std::time::Duration;

use common::external;
use common::moshi::{moshi_flags, tiny_moshi_dir};

/// The script has its own 60 s limit; this leaves room for interpreter start and imports.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_python_sdk_on_a_full_duplex_model() {
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

    let dir = tiny_moshi_dir("openai-python");
    let flags = moshi_flags(&dir);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let addr = common::server(&flags).await;
    let mut cmd = python.command();
    cmd.arg(external::repo_path("tests/python/openai_moshi.py"))
        .arg("--base-url")
        .arg(format!("http://{addr}/v1"));
    external::run_script(cmd, SCRIPT_TIMEOUT).await;
    let _ = std::fs::remove_dir_all(&dir);
}
