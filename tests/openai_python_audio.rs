//! `POST /v1/audio/transcriptions` driven by the official OpenAI Python SDK
//! (`tests/python/openai_audio.py`: `json`, `text`, `verbose_json`, a file that is not a
//! WAV), on both backends: the embedded Whisper tiny.en hearing a sentence espeak-ng spoke
//! (a 16 kHz WAV, resampled by the server), and a remote `--stt-url` server (scripted in
//! OpenAI's shapes) that receives the audio at the session rate. The seconds count in
//! `/v1/usage`.

use crate::common;
use common::external;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use duet_client::speech::{espeak, resample_linear, wav};
use serde_json::json;

fn speech_wav() -> (std::path::PathBuf, f64) {
    let pcm = resample_linear(&espeak("Please open the door for me."), 24_000, 16_000);
    let path = std::env::temp_dir().join(format!("duet-audio-{}.wav", common::unique()));
    std::fs::write(&path, wav(&pcm, 16_000)).expect("wav");
    (path, pcm.len() as f64 / 16_000.0)
}

async fn usage_seconds(addr: std::net::SocketAddr) -> f64 {
    let r = duet_client::http::request(addr, "GET", "/v1/usage", &[], "")
        .await
        .expect("usage");
    let usage: serde_json::Value = serde_json::from_str(&r.body).expect("json");
    usage["total"]["audio_in_seconds"]
        .as_f64()
        .unwrap_or_else(|| panic!("{usage}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_transcribes_with_the_embedded_whisper() {
    let (path, secs) = speech_wav();
    let addr = common::speech_server(true, &[]).await;
    let wav = path.display().to_string();
    let env = [("DUET_TEST_WAV", wav.as_str()), ("DUET_TEST_WORD", "door")];
    let out = external::run_openai_python_env("openai_audio.py", addr, &env).await;
    println!("{out}");
    let counted = usage_seconds(addr).await;
    assert!(
        (counted - 3.0 * secs).abs() < 0.1,
        "usage {counted} s for 3 × {secs} s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_transcribes_through_a_remote_server() {
    let (path, secs) = speech_wav();
    let said = json!({"text": "Please open the door for me."}).to_string();
    let stt = ScriptedLlm::start(vec![]).await;
    *stt.default_reply.lock().unwrap() = Some(Reply::Status(200, said));
    let addr = common::server(&["--stt-url", &stt.url]).await;
    let wav = path.display().to_string();
    let env = [("DUET_TEST_WAV", wav.as_str()), ("DUET_TEST_WORD", "door")];
    external::run_openai_python_env("openai_audio.py", addr, &env).await;
    // Three uploads reached the upstream, each the whole clip at 24 kHz, 16-bit.
    let raw = stt.raw.lock().unwrap().clone();
    assert_eq!(raw.len(), 3);
    let want = (secs * 24_000.0).round() as i64;
    for (_, body) in &raw {
        let riff = body.windows(4).position(|w| w == b"RIFF").expect("a WAV");
        let len = u32::from_le_bytes(body[riff + 40..riff + 44].try_into().unwrap()) as usize;
        assert!(body.len() >= riff + 44 + len, "the whole WAV was sent");
        let samples = (len / 2) as i64;
        assert!(
            (samples - want).abs() <= 2,
            "{samples} samples, {want} expected"
        );
    }
}
