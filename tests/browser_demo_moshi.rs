//! The demo page on the full-duplex model: `duet moshi-tiny` writes tiny Moshi weights, the
//! server runs `--model moshi` on them, and `tests/browser/demo.mjs --scenario moshi` drives
//! Debian's `chromium` over WebRTC with a fake microphone. The model speaks on its own
//! (`response.speak`: the page says "speaking", shows the model's text in its bubble and plays
//! its audio), the user's speech barges in (the response ends cancelled), and when the user
//! stops the page says "listening", not "thinking". It saves `tests/artifacts/demo-moshi.png`.
//! What it needs: [`common::browser`].

use crate::common;

use common::moshi::tiny_moshi_server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_page_on_moshi_in_chromium() {
    let moshi = tiny_moshi_server("browser").await;
    let addr = moshi.addr;
    common::browser::run_demo(addr, &["--scenario", "moshi"]).await;
}
