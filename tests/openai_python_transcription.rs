//! A transcription session through the official OpenAI Python SDK: runs
//! `tests/python/openai_transcription.py` (`intent=transcription`, `session.update` with
//! `type: "transcription"`, speech appended, the transcription events read through the SDK's
//! types) against a server with the real Silero VAD and Whisper tiny.en files.

use crate::common;

use common::external;
use duet_client::speech::{espeak, silence};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_python_sdk_transcription_session() {
    let addr = common::speech_server(true, &[]).await;
    let mut speech = silence(0.3);
    speech.extend(espeak("The train leaves from platform nine."));
    let pcm: Vec<u8> = speech
        .iter()
        .flat_map(|s| ((s.clamp(-1.0, 1.0) * 32767.0) as i16).to_le_bytes())
        .collect();
    let path = std::env::temp_dir().join(format!("duet-sdk-speech-{}.pcm", std::process::id()));
    std::fs::write(&path, pcm).expect("write the speech");
    let env = [
        (
            "DUET_TEST_SPEECH_PCM",
            path.to_str().expect("a UTF-8 temp path"),
        ),
        ("DUET_TEST_SPEECH_WORDS", "train platform"),
    ];
    external::run_openai_python_env("openai_transcription.py", addr, &env).await;
    let _ = std::fs::remove_file(path);
}
