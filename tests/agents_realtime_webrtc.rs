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

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use tokio::process::Command;

/// The script has its own 90 s limit; this leaves room for Node's and Chromium's start.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(150);

const HOW_TO_INSTALL: &str = "run ./scripts/test (it runs `npm ci --prefix tests/sdk-js`), or run \
     that command yourself; Node.js >= 20 must be on PATH or named by DUET_TEST_NODE, and \
     Chromium at /usr/bin/chromium (`apt-get install chromium`; .ci/run does it) or named by \
     DUET_CHROMIUM";

/// The browser to drive.
fn chromium() -> PathBuf {
    std::env::var_os("DUET_CHROMIUM")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"))
}

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
async fn agents_realtime_webrtc_in_chromium() {
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
    let browser = chromium();
    let mut probe = Command::new(&browser);
    probe.arg("--version");
    let out = run(probe, &format!("{}", browser.display())).await;
    assert!(
        out.status.success(),
        "{} --version failed: {HOW_TO_INSTALL}\n{}",
        browser.display(),
        text(&out.stderr)
    );
    let browser_version = text(&out.stdout).trim().to_string();

    let addr = common::server(&[]).await;
    let script = dir.join("realtime_webrtc.mjs");
    let mut cmd = Command::new(&node);
    cmd.arg(&script)
        .arg("--base-url")
        .arg(format!("http://{addr}"))
        .env("DUET_CHROMIUM", &browser)
        .current_dir(&dir);
    let started = Instant::now();
    let out = run(cmd, &format!("{} with {label}", script.display())).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "realtime_webrtc.mjs failed ({}) with node {node_version}, {browser_version}, {}\n\
         --- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status,
        packages.join(", ")
    );
    println!(
        "node {node_version} via {label}, {browser_version}, {}, {:.1} s\n{stdout}",
        packages.join(", "),
        started.elapsed().as_secs_f64()
    );
    if !stderr.trim().is_empty() {
        println!("--- stderr ---\n{stderr}");
    }
}
