//! A server-VAD turn: speech start/stop on the input clock, auto-commit, auto-response.

use crate::common;
use common::*;

#[tokio::test]
async fn server_vad_detects_turn_and_answers() {
    let addr = server(&[]).await;
    let mut c = Client::connect(addr).await;
    let mut audio = silence(0.5);
    audio.extend(voiced(1.2));
    audio.extend(silence(0.8));
    c.append(&audio).await;

    let started = c.until("input_audio_buffer.speech_started").await;
    // Onset at 500 ms minus the default 300 ms prefix padding.
    let start_ms = started["audio_start_ms"].as_u64().unwrap();
    assert!((190..=210).contains(&start_ms), "audio_start_ms {start_ms}");
    let item_id = started["item_id"].as_str().unwrap().to_string();
    let stopped = c.until("input_audio_buffer.speech_stopped").await;
    assert_eq!(stopped["item_id"], item_id.as_str());
    let end_ms = stopped["audio_end_ms"].as_u64().unwrap();
    // Voice ends at 1700 ms; the default 500 ms of silence confirms it.
    assert!((2180..=2230).contains(&end_ms), "audio_end_ms {end_ms}");
    let committed = c.until("input_audio_buffer.committed").await;
    assert_eq!(committed["item_id"], item_id.as_str());
    let created = c.until("response.created").await;
    assert_eq!(created["response"]["status"], "in_progress");
    assert!(created["response"]["status_details"].is_null());
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(
        done["response"]["output"][0]["content"][0]["transcript"],
        "echo of 1.2 s"
    );

    // The committed user item holds the speech with its prefix padding: 200 ms .. 2200 ms.
    c.send(serde_json::json!({"type":"conversation.item.retrieve","item_id": item_id}))
        .await;
    let item = c.until("conversation.item.retrieved").await;
    let bytes = b64_len(item["item"]["content"][0]["audio"].as_str().unwrap());
    let ms = bytes / 48;
    assert!((1980..=2040).contains(&ms), "user item holds {ms} ms");
}
