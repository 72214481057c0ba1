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

/// The audio seconds `/v1/usage` counted: heard, spoken.
async fn usage_seconds(addr: std::net::SocketAddr) -> (f64, f64) {
    let r = duet_client::http::request(addr, "GET", "/v1/usage", &[], "")
        .await
        .expect("usage");
    let usage: serde_json::Value = serde_json::from_str(&r.body).expect("json");
    let secs = |key: &str| {
        usage["total"][key]
            .as_f64()
            .unwrap_or_else(|| panic!("{usage}"))
    };
    (secs("audio_in_seconds"), secs("audio_out_seconds"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_transcribes_with_the_embedded_whisper() {
    let (path, secs) = speech_wav();
    let voice = duet_client::speech::models_dir().join("piper-en_US-joe-medium");
    let voice = voice.display().to_string();
    let addr = common::speech_server(true, &["--tts-model-dir", &voice]).await;
    let wav = path.display().to_string();
    let env = [
        ("DUET_TEST_WAV", wav.as_str()),
        ("DUET_TEST_WORD", "door"),
        ("DUET_TEST_SPEECH", "1"),
    ];
    let out = external::run_openai_python_env("openai_audio.py", addr, &env).await;
    println!("{out}");
    let (heard, spoken) = usage_seconds(addr).await;
    // Three uploads, and the spoken WAV transcribed back; a WAV and a PCM spoken.
    assert!(
        heard > 3.0 * secs + 1.0,
        "usage: {heard} s heard for 3 × {secs} s and more"
    );
    assert!(spoken > 2.0, "usage: {spoken} s spoken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_transcribes_through_a_remote_server() {
    let (path, secs) = speech_wav();
    let said = json!({"text": "Please open the door for me."}).to_string();
    let stt = ScriptedLlm::start(vec![]).await;
    *stt.default_reply.lock().unwrap() = Some(Reply::Status(200, said));
    let tts = ScriptedLlm::start(vec![]).await;
    let pcm: Vec<u8> = (0..24_000i32)
        .flat_map(|i| ((i % 200 - 100) as i16 * 50).to_le_bytes())
        .collect();
    *tts.default_reply.lock().unwrap() = Some(Reply::Bytes {
        content_type: "audio/pcm".into(),
        parts: pcm.chunks(3_001).map(<[u8]>::to_vec).collect(),
        gap: std::time::Duration::from_millis(2),
    });
    let addr = common::server(&["--stt-url", &stt.url, "--tts-url", &tts.url]).await;
    let wav = path.display().to_string();
    let env = [
        ("DUET_TEST_WAV", wav.as_str()),
        ("DUET_TEST_WORD", "door"),
        ("DUET_TEST_SPEECH", "1"),
    ];
    external::run_openai_python_env("openai_audio.py", addr, &env).await;
    // The speech server was asked once a request, in OpenAI's shape, the voice passed on.
    let asked = tts.requests();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[0]["voice"], "alloy");
    assert_eq!(asked[0]["response_format"], "pcm");
    assert_eq!(asked[1]["speed"], 1.25);
    // Three uploads of the clip reached the transcription server (and the spoken WAV, 1 s).
    let raw = stt.raw.lock().unwrap().clone();
    assert_eq!(raw.len(), 4);
    let raw = &raw[..3];
    let want = (secs * 24_000.0).round() as i64;
    for (_, body) in raw {
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
