//! An independent WebRTC implementation against Duet: runs `tests/python/aiortc_call.py`
//! (Python aiortc as the offerer, loopback-only ICE, the `oai-events` data channel and Opus
//! both ways) against an in-process server: connect, idle audio frames, a full server-VAD
//! turn with an audible pitch-shifted answer, `output_audio_buffer.clear`, barge-in with
//! truncation to what was played, hangup.
//!
//! Python comes from `DUET_TEST_PYTHON`, else `.venv/bin/python` in the repository, else
//! `python3`. `aiortc` must be installed there (`./scripts/test` does it); a missing aiortc
//! fails the test rather than skipping it.

mod common;

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use tokio::process::Command;

/// The script has its own 60 s limit; this leaves room for interpreter start and imports.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

const HOW_TO_INSTALL: &str = "run ./scripts/test (it creates .venv with the test dependencies), \
     or pip install -r tests/python/requirements.txt into the Python named by DUET_TEST_PYTHON";

/// The interpreter to use and where the choice came from.
fn python() -> (PathBuf, &'static str) {
    if let Some(p) = std::env::var_os("DUET_TEST_PYTHON").filter(|p| !p.is_empty()) {
        return (PathBuf::from(p), "DUET_TEST_PYTHON");
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    if venv.exists() {
        return (venv, ".venv");
    }
    (PathBuf::from("python3"), "PATH")
}

async fn run(mut cmd: Command, what: &str) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .kill_on_drop(true);
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}; {HOW_TO_INSTALL}"));
    match tokio::time::timeout(SCRIPT_TIMEOUT, child.wait_with_output()).await {
        Ok(out) => out.unwrap_or_else(|e| panic!("{what}: {e}")),
        Err(_) => panic!("{what} did not finish within {SCRIPT_TIMEOUT:?} (killed)"),
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiortc_peer_full_call() {
    let (py, source) = python();
    let label = format!("{} (from {source})", py.display());

    // aiortc (with its PyAV and aioice dependencies) must be importable; fail if not.
    let mut probe = Command::new(&py);
    probe.args([
        "-c",
        "import aiortc, aioice, av; print(aiortc.__version__, aioice.__version__, av.__version__)",
    ]);
    let out = run(probe, &format!("python {label}")).await;
    assert!(
        out.status.success(),
        "the `aiortc` Python package is not importable by {label}: {HOW_TO_INSTALL}\n\
         --- stderr ---\n{}",
        text(&out.stderr)
    );
    let versions = text(&out.stdout).trim().to_string();

    let addr = common::server(&[]).await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/aiortc_call.py");
    let mut cmd = Command::new(&py);
    cmd.arg(&script)
        .arg("--base-url")
        .arg(format!("http://{addr}"));
    let started = Instant::now();
    let out = run(cmd, &format!("{} with {label}", script.display())).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "aiortc_call.py failed ({}) with {label}, aiortc/aioice/av {versions}\n\
         --- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status
    );
    println!(
        "aiortc/aioice/av {versions} via {label}, {:.1} s\n{stdout}",
        started.elapsed().as_secs_f64()
    );
    if !stderr.trim().is_empty() {
        println!("--- stderr ---\n{stderr}");
    }
}
