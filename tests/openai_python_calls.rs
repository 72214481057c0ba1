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
async fn openai_python_sdk_webrtc_call_with_sideband() {
    let (py, source) = python();
    let label = format!("{} (from {source})", py.display());

    // The SDK (with its realtime extra) and aiortc must be importable; fail if not.
    let mut probe = Command::new(&py);
    probe.args([
        "-c",
        "import openai, websockets, aiortc, av; \
         from openai.types.realtime import RealtimeServerEvent; \
         print('openai', openai.__version__, 'aiortc', aiortc.__version__)",
    ]);
    let out = run(probe, &format!("python {label}")).await;
    assert!(
        out.status.success(),
        "the `openai` (with the realtime extra) and `aiortc` Python packages are not importable \
         by {label}: {HOW_TO_INSTALL}\n--- stderr ---\n{}",
        text(&out.stderr)
    );
    let version = text(&out.stdout).trim().to_string();

    let addr = common::server(&[]).await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/openai_calls.py");
    let mut cmd = Command::new(&py);
    cmd.arg(&script)
        .arg("--base-url")
        .arg(format!("http://{addr}/v1"));
    let started = Instant::now();
    let out = run(cmd, &format!("{} with {label}", script.display())).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "openai_calls.py failed ({}) with {label}, {version}\n\
         --- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status
    );
    println!(
        "{version} via {label}, {:.1} s\n{stdout}",
        started.elapsed().as_secs_f64()
    );
    if !stderr.trim().is_empty() {
        println!("--- stderr ---\n{stderr}");
    }
}
