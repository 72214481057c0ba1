//! An independent WebRTC implementation against Duet: runs `tests/python/aiortc_call.py`
//! (Python aiortc as the offerer, loopback-only ICE, the `oai-events` data channel and Opus
//! both ways) against an in-process server: connect, idle audio frames, a full server-VAD
//! turn with an audible pitch-shifted answer, `output_audio_buffer.clear`, barge-in with
//! truncation to what was played, a backchannel and a real interruption under `semantic_vad`
//! (adaptive interruption: the playout pauses and goes on, or is truncated where it paused),
//! hangup. Then the same call with its offer posted over
//! Duet's own TLS (`--tls-cert`/`--tls-key`, a test CA trusted through `SSL_CERT_FILE`).
//!
//! Python comes from `DUET_TEST_PYTHON`, else `.venv/bin/python` in the repository, else
//! `python3`. `aiortc` must be installed there (`./scripts/test` does it); a missing aiortc
//! fails the test rather than skipping it.

use crate::common;

use std::time::Duration;

use common::external;

/// The script has its own 60 s limit; this leaves room for interpreter start and imports.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `aiortc_call.py` against a server started with `flags`, its base URL `scheme://`,
/// trusting the CA in `ca` when given.
async fn call(scheme: &str, flags: &[&str], ca: Option<&std::path::Path>) {
    // aiortc (with its PyAV and aioice dependencies) must be importable; fail if not.
    let python = external::python();
    external::require_python_modules(
        &python,
        &["aiortc", "aioice", "av"],
        external::PYTHON_HOW_TO_INSTALL,
    )
    .await;
    // Real-time audio both ways: not beside a browser or a model that takes a core.
    let _one = common::exclusive().await;
    let addr = common::server(flags).await;
    let mut cmd = python.command();
    cmd.arg(external::repo_path("tests/python/aiortc_call.py"))
        .arg("--base-url")
        .arg(format!("{scheme}://{addr}"));
    if let Some(ca) = ca {
        cmd.env("SSL_CERT_FILE", ca).env("SSL_CERT_DIR", "");
    }
    external::run_script(cmd, SCRIPT_TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiortc_peer_full_call() {
    call("http", &[], None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiortc_call_with_its_offer_over_https() {
    let (dir, cert, key) = common::tls::server_certificate("aiortc-https");
    call(
        "https",
        &["--tls-cert", &cert, "--tls-key", &key],
        Some(&dir.join("ca.pem")),
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}
