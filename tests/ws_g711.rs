//! G.711 in and out: μ-law input drives VAD and the answer comes back as 8 kHz A-law.

use crate::common;
use common::*;
use serde_json::json;

fn ulaw_b64(samples_24k: &[f32]) -> String {
    use base64::Engine;
    // Decimate 24 kHz -> 8 kHz (the test signal has nothing above 1.2 kHz) and encode μ-law.
    let bytes: Vec<u8> = samples_24k
        .iter()
        .step_by(3)
        .map(|s| duet_media::ulaw_encode((s * 32767.0) as i16))
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn ulaw_in_alaw_out() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    c.send(json!({"type":"session.update","session":{"audio":{"input":{"format":{"type":"audio/pcmu"}},"output":{"format":{"type":"audio/pcma"}}}}})).await;
    let up = c.until("session.updated").await;
    assert_eq!(
        up["session"]["audio"]["output"]["format"],
        json!({"type":"audio/pcma"})
    );
    let mut audio = silence(0.3);
    audio.extend(voiced(1.0));
    audio.extend(silence(0.7));
    for chunk in audio.chunks(2_400) {
        c.send(json!({"type":"input_audio_buffer.append","audio": ulaw_b64(chunk)}))
            .await;
    }
    c.until("input_audio_buffer.speech_started").await;
    let events = c.collect_until("response.done").await;
    let bytes: usize = events
        .iter()
        .filter(|e| e["type"] == "response.output_audio.delta")
        .map(|e| b64_len(e["delta"].as_str().unwrap()))
        .sum();
    // ~1.0 s at 8 kHz, one byte per sample.
    assert!((7_600..=8_400).contains(&bytes), "{bytes} bytes of A-law");
    assert_eq!(events.last().unwrap()["response"]["status"], "completed");
}
