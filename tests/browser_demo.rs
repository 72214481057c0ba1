//! The demo page in a real browser: runs `tests/browser/demo.mjs` (Debian's `chromium` driven
//! by `playwright-core`, a fake microphone that plays a synthetic utterance) against an
//! in-process server. It connects over WebRTC, waits for the echo answer (VAD events,
//! `response.done`, `output_audio_buffer.started/stopped`, audio energy on the remote track,
//! the transcript, the per-turn latency), interrupts a typed message's answer, hangs up, then
//! does a turn and an interrupt over the WebSocket fallback. It saves
//! `tests/artifacts/demo.png`. What it needs: [`common::browser`].

use crate::common;

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

/// A server with the real Silero VAD, Whisper tiny.en and Smart Turn
/// (`scripts/install-models`): the visitor picks `semantic_vad` with eagerness `high`; the
/// fake microphone says a sentence (espeak-ng); the page shows the turn model's score of the
/// pause (`turn.scored`, from the `?turn_events=1` extension) before the turn ends, the
/// user's own words as they are transcribed, the echo answer repeating them, and Silero's
/// probability on the Speech meter. Saves `tests/artifacts/demo-speech.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_page_shows_your_words() {
    use duet_client::speech::{espeak, models_dir, resample_linear, silence, wav};
    let turn = models_dir().join("smart-turn-v3.2").display().to_string();
    let addr = common::speech_server(true, &["--turn-model-dir", &turn]).await;
    let mut mic = silence(2.0);
    mic.extend(espeak("Please open the door for me."));
    mic.extend(silence(7.0));
    let path = std::env::temp_dir().join(format!("duet-demo-mic-{}.wav", std::process::id()));
    std::fs::write(&path, wav(&resample_linear(&mic, 24_000, 48_000), 48_000)).expect("write");
    let path_arg = path.display().to_string();
    common::browser::run_demo(
        addr,
        &[
            "--scenario",
            "speech",
            "--mic-wav",
            &path_arg,
            "--expect-words",
            "open door",
            "--semantic",
            "high",
        ],
    )
    .await;
    let _ = std::fs::remove_file(path);
}

/// The demo page as an assistant: `--model cascade` with the Piper voice and a scripted LLM
/// that calls the page's `get_time` tool; the page sends its instructions and tool, answers
/// the call with the browser's time through the tool loop, and shows the call and the
/// spoken answer. Saves `tests/artifacts/demo-assistant.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_page_runs_its_tool_for_the_cascade() {
    use duet_client::scripted_llm::{Reply, ScriptedLlm};
    let llm = ScriptedLlm::start(vec![
        Reply::call("call_page", "get_time", "{}", 1),
        Reply::text(&["It is ten ", "o'clock."]),
    ])
    .await;
    let addr = common::cascade_server(&llm.url, false).await;
    // A quiet microphone: the typed question is the only turn.
    let path = std::env::temp_dir().join(format!("duet-demo-quiet-{}.wav", std::process::id()));
    let quiet = duet_client::speech::silence(40.0);
    std::fs::write(&path, duet_client::speech::wav(&quiet, 24_000)).expect("write");
    let mic = path.display().to_string();
    common::browser::run_demo(addr, &["--scenario", "assistant", "--mic-wav", &mic]).await;
    let _ = std::fs::remove_file(path);
    let r = llm.requests();
    assert_eq!(r[0]["messages"][0]["content"], "You tell the time.");
    let last = r[1]["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "tool", "{last}");
    assert!(
        last["content"].as_str().unwrap().contains("time_zone"),
        "{last}"
    );
}
