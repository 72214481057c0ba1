//! The demo page in a real browser: runs `tests/browser/demo.mjs` (Debian's `chromium` driven
//! by `playwright-core`, a fake microphone that plays a synthetic utterance) against an
//! in-process server. It connects over WebRTC, waits for the echo answer (VAD events,
//! `response.done`, `output_audio_buffer.started/stopped`, audio energy on the remote track,
//! the transcript, the per-turn latency), interrupts a typed message's answer, hangs up, then
//! does a turn and an interrupt over the WebSocket fallback. It saves
//! `tests/artifacts/demo.png`.
//!
//! Needs `node`, `/usr/bin/chromium` (or `CHROMIUM`) and `tests/browser/node_modules`
//! (`npm ci`; `./scripts/test` runs it before the tests' network namespace). Anything missing
//! fails the test, with directions; it never skips.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use tokio::process::Command;

/// The script bounds itself at 60 s; this leaves room for node and chromium to start.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);
/// `npm ci` of one package from the registry.
const NPM_TIMEOUT: Duration = Duration::from_secs(120);

const HOW_TO_INSTALL: &str = "run .ci/run (it installs chromium and nodejs), or \
     `apt-get install -y chromium nodejs npm`, then `./scripts/test` (it runs `npm ci` in \
     tests/browser)";

fn browser_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

async fn run(mut cmd: Command, what: &str, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .kill_on_drop(true);
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}; {HOW_TO_INSTALL}"));
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(out) => out.unwrap_or_else(|e| panic!("{what}: {e}")),
        Err(_) => panic!("{what} did not finish within {limit:?} (killed)"),
    }
}

/// The version of `playwright-core` that package-lock.json pins, and the installed one.
fn playwright_versions(dir: &Path) -> (String, Option<String>) {
    let read = |p: PathBuf| -> Option<serde_json::Value> {
        serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
    };
    let lock = read(dir.join("package-lock.json")).expect("tests/browser/package-lock.json");
    let pinned = lock["packages"]["node_modules/playwright-core"]["version"]
        .as_str()
        .expect("package-lock.json pins playwright-core")
        .to_string();
    let installed = read(dir.join("node_modules/playwright-core/package.json"))
        .and_then(|v| v["version"].as_str().map(str::to_string));
    (pinned, installed)
}

/// Runs `npm ci` unless node_modules already holds the pinned playwright-core.
async fn ensure_node_modules(dir: &Path) -> String {
    let (pinned, installed) = playwright_versions(dir);
    if installed.as_deref() == Some(pinned.as_str()) {
        return pinned;
    }
    let mut cmd = Command::new("npm");
    // --prefer-offline installs from npm's cache without asking the registry when it can;
    // short retries make an offline run (the tests' namespace) fail in seconds, not minutes.
    cmd.args([
        "ci",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        "--ignore-scripts",
        "--prefer-offline",
        "--fetch-retries=1",
        "--fetch-retry-mintimeout=1000",
        "--fetch-retry-maxtimeout=3000",
    ])
    .current_dir(dir);
    let out = run(cmd, "npm ci (in tests/browser)", NPM_TIMEOUT).await;
    assert!(
        out.status.success(),
        "`npm ci` in tests/browser failed ({}); without network (the tests' namespace) it \
         must run beforehand: ./scripts/test does that, or run `npm ci` in tests/browser\n\
         --- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    let (_, now) = playwright_versions(dir);
    assert_eq!(
        now.as_deref(),
        Some(pinned.as_str()),
        "npm ci did not install playwright-core {pinned}"
    );
    pinned
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_page_in_chromium() {
    let chromium = std::env::var_os("CHROMIUM")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        chromium.exists(),
        "no chromium at {}: {HOW_TO_INSTALL} (or set CHROMIUM to a Chromium binary)",
        chromium.display()
    );
    let mut probe = Command::new("node");
    probe.arg("--version");
    let out = run(probe, "node --version", Duration::from_secs(20)).await;
    assert!(out.status.success(), "node does not run: {HOW_TO_INSTALL}");
    let node_version = text(&out.stdout).trim().to_string();

    let dir = browser_dir();
    let playwright = ensure_node_modules(&dir).await;

    let addr = common::server(&[]).await;
    let mut cmd = Command::new("node");
    cmd.arg(dir.join("demo.mjs"))
        .arg("--url")
        .arg(format!("http://{addr}/"))
        .arg("--chromium")
        .arg(&chromium)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    let started = Instant::now();
    let out = run(cmd, "node tests/browser/demo.mjs", SCRIPT_TIMEOUT).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "the demo page failed in chromium ({}); node {node_version}, playwright-core \
         {playwright}, {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status,
        chromium.display()
    );
    println!(
        "node {node_version}, playwright-core {playwright}, {}: {:.1} s\n{stdout}",
        chromium.display(),
        started.elapsed().as_secs_f64()
    );
    if !stderr.trim().is_empty() {
        println!("--- stderr ---\n{stderr}");
    }
}
