//! The in-process cascade server the turn-taking benchmarks run against: Silero VAD, Smart
//! Turn v3.2, Whisper tiny.en and the Piper voice from `scripts/install-models DIR`, and the
//! LLM at `llm_url` (a scripted upstream on loopback).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use clap::Parser;

/// Starts the server on a free loopback port and waits until it is ready.
pub async fn start(models: &Path, llm_url: &str) -> SocketAddr {
    let dir = |d: &str| models.join(d).display().to_string();
    let argv = [
        "serve".to_string(),
        "--port".into(),
        "0".into(),
        "--model".into(),
        "cascade".into(),
        "--llm-url".into(),
        llm_url.to_string(),
        "--vad-model-dir".into(),
        dir("silero-vad"),
        "--turn-model-dir".into(),
        dir("smart-turn-v3.2"),
        "--transcription-model-dir".into(),
        dir("whisper-tiny.en"),
        "--tts-model-dir".into(),
        dir("piper-en_US-joe-medium"),
    ];
    let server = duet::server::start(&duet::config::ServeArgs::parse_from(argv))
        .await
        .expect("server");
    for _ in 0..500 {
        let ready = duet_client::http::request(server.addr, "GET", "/ready", &[], "").await;
        if ready.is_ok_and(|r| r.status == 200) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.addr
}
