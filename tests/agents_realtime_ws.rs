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

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use tokio::process::Command;

/// The script has its own 60 s limit; this leaves room for Node's start.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

const HOW_TO_INSTALL: &str = "run ./scripts/test (it runs `npm ci --prefix tests/sdk-js`), or run \
     that command yourself; Node.js >= 20 must be on PATH or named by DUET_TEST_NODE";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Node binary and where the choice came from.
fn node() -> (PathBuf, &'static str) {
    match std::env::var_os("DUET_TEST_NODE").filter(|p| !p.is_empty()) {
        Some(p) => (PathBuf::from(p), "DUET_TEST_NODE"),
        None => (PathBuf::from("node"), "PATH"),
    }
}

/// Fails unless every dependency pinned in tests/sdk-js/package.json is installed at its
/// pinned version; returns "name@version" for each.
fn installed_packages(dir: &Path) -> Vec<String> {
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("package.json")).expect("tests/sdk-js/package.json"),
    )
    .expect("package.json is JSON");
    let deps = manifest["dependencies"].as_object().expect("dependencies");
    let mut out = Vec::new();
    for (name, want) in deps {
        let path = dir.join("node_modules").join(name).join("package.json");
        let have = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["version"].as_str().map(str::to_string));
        match have {
            Some(v) if Some(v.as_str()) == want.as_str() => out.push(format!("{name}@{v}")),
            Some(v) => panic!(
                "{name} {v} is installed in tests/sdk-js, but {want} is pinned: {HOW_TO_INSTALL}"
            ),
            None => {
                panic!("{name} is not installed in tests/sdk-js/node_modules: {HOW_TO_INSTALL}")
            }
        }
    }
    out
}

async fn run(mut cmd: Command, what: &str) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
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
async fn agents_realtime_websocket_session() {
    let dir = root().join("tests/sdk-js");
    let (node, source) = node();
    let label = format!("{} (from {source})", node.display());
    let mut probe = Command::new(&node);
    probe.arg("--version");
    let out = run(probe, &format!("node {label}")).await;
    assert!(
        out.status.success(),
        "{label} --version failed: {HOW_TO_INSTALL}\n{}",
        text(&out.stderr)
    );
    let node_version = text(&out.stdout).trim().to_string();
    let packages = installed_packages(&dir);

    let addr = common::server(&[]).await;
    let script = dir.join("realtime_ws.mjs");
    let mut cmd = Command::new(&node);
    cmd.arg(&script)
        .arg("--base-url")
        .arg(format!("http://{addr}"))
        .current_dir(&dir);
    let started = Instant::now();
    let out = run(cmd, &format!("{} with {label}", script.display())).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "realtime_ws.mjs failed ({}) with node {node_version}, {}\n\
         --- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status,
        packages.join(", ")
    );
    println!(
        "node {node_version} via {label}, {}, {:.1} s\n{stdout}",
        packages.join(", "),
        started.elapsed().as_secs_f64()
    );
    if !stderr.trim().is_empty() {
        println!("--- stderr ---\n{stderr}");
    }
}
