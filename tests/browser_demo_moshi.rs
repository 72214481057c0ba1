//! The demo page on the full-duplex model: `duet moshi-tiny` writes tiny Moshi weights, the
//! server runs `--model moshi` on them, and `tests/browser/demo.mjs --scenario moshi` drives
//! Debian's `chromium` over WebRTC with a fake microphone. The model speaks on its own
//! (`response.speak`: the page says "speaking", shows the model's text in its bubble and plays
//! its audio), the user's speech barges in (the response ends cancelled), and when the user
//! stops the page says "listening", not "thinking". It saves `tests/artifacts/demo-moshi.png`.
//! What it needs: [`common::browser`].

mod common;

use common::moshi::{moshi_flags, tiny_moshi_dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_page_on_moshi_in_chromium() {
    let dir = tiny_moshi_dir("browser");
    let flags = moshi_flags(&dir);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let addr = common::server(&flags).await;
    common::browser::run_demo(addr, &["--scenario", "moshi"]).await;
    let _ = std::fs::remove_dir_all(&dir);
}
