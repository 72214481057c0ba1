//! The demo page in Debian's `chromium`, driven by `tests/browser/demo.mjs` (playwright-core).
//!
//! Needs `node`, `/usr/bin/chromium` (or `DUET_CHROMIUM`; node from `DUET_TEST_NODE`) and
//! `tests/browser/node_modules` (`npm ci`; `./scripts/test` runs it before the tests' network
//! namespace). Anything missing fails the test, with directions; it never skips.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Command;

use super::external;

/// The script bounds itself at 60 s; this leaves room for node and chromium to start.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);
/// `npm ci` of one package from the registry.
const NPM_TIMEOUT: Duration = Duration::from_secs(120);

const HOW_TO_INSTALL: &str = "run .ci/run (it installs chromium and nodejs), or \
     `apt-get install -y chromium nodejs npm`, then `./scripts/test` (it runs `npm ci` in \
     tests/browser)";

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
    .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    .current_dir(dir);
    let out = external::output(cmd, NPM_TIMEOUT)
        .await
        .unwrap_or_else(|e| {
            panic!("cannot start npm ci (in tests/browser): {e}; {HOW_TO_INSTALL}")
        });
    assert!(
        out.status.success(),
        "`npm ci` in tests/browser failed ({}); without network (the tests' namespace) it \
         must run beforehand: ./scripts/test does that, or run `npm ci` in tests/browser\n\
         --- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, now) = playwright_versions(dir);
    assert_eq!(
        now.as_deref(),
        Some(pinned.as_str()),
        "npm ci did not install playwright-core {pinned}"
    );
    pinned
}

/// Runs `demo.mjs --url http://{addr}/ --chromium … {extra}` and fails the test on its failure.
pub async fn run_demo(addr: SocketAddr, extra: &[&str]) {
    run_demo_at(&format!("http://{addr}/"), extra).await;
}

/// [`run_demo`] on the page at `url`.
pub async fn run_demo_at(url: &str, extra: &[&str]) {
    let _one = super::exclusive().await;
    let chromium = external::chromium("DUET_CHROMIUM");
    assert!(
        chromium.path.exists(),
        "no chromium at {}: {HOW_TO_INSTALL} (or set DUET_CHROMIUM to a Chromium binary)",
        chromium.path.display()
    );
    let node = external::node();
    external::require_version(&node, HOW_TO_INSTALL).await;

    let dir = external::repo_path("tests/browser");
    let playwright = ensure_node_modules(&dir).await;
    println!("playwright-core {playwright}");

    let mut cmd = node.command();
    cmd.arg(dir.join("demo.mjs"))
        .arg("--url")
        .arg(url)
        .arg("--chromium")
        .arg(&chromium.path)
        .args(extra)
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .current_dir(external::repo_path(""));
    external::run_script(cmd, SCRIPT_TIMEOUT).await;
}
