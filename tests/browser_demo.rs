//! The demo page in a real browser: runs `tests/browser/demo.mjs` (Debian's `chromium` driven
//! by `playwright-core`, a fake microphone that plays a synthetic utterance) against an
//! in-process server. It connects over WebRTC, waits for the echo answer (VAD events,
//! `response.done`, `output_audio_buffer.started/stopped`, audio energy on the remote track,
//! the transcript, the per-turn latency), interrupts a typed message's answer, hangs up, then
//! does a turn and an interrupt over the WebSocket fallback. It saves
//! `tests/artifacts/demo.png`. What it needs: [`common::browser`].

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_page_in_chromium() {
    let addr = common::server(&[]).await;
    common::browser::run_demo(addr, &[]).await;
}

/// A server with an API key and `--demo-mint-secrets`: the page holds no key, mints a client
/// secret through `POST /demo/client_secret` and does everything with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_page_with_a_minted_client_secret() {
    let addr = common::server(&["--api-key", "server-key", "--demo-mint-secrets"]).await;
    common::browser::run_demo(addr, &["--expect-demo-secret"]).await;
}
