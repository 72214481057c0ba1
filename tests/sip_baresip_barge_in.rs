//! Barge-in from a real phone: baresip says a turn, the echo answers, and baresip talks
//! over the answer; the answer is cancelled (`turn_detected`) and the assistant item
//! truncated to what was played, in whole 20 ms frames. Then the app hangs up (Duet's BYE
//! to the phone) and every slot comes back.

use crate::common;

use common::sip::{
    accepted_phone_call, baresip_config, decide, phone_dir, sip_server, webhook_app,
};
use serde_json::json;

/// 8 kHz voice for `secs` (the tests' voiced signal, decimated).
fn voice8k(secs: f32) -> Vec<f32> {
    common::voiced(secs).iter().step_by(3).copied().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baresip_talks_over_the_answer_and_it_is_truncated() {
    let _alone = common::exclusive().await;
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    // A 2.5 s turn, the silence that ends it (the answer starts), then 0.5 s of voice
    // over the answer, then quiet.
    let mut mic = voice8k(2.5);
    mic.extend(vec![0.0; 8_000 * 14 / 10]);
    mic.extend(voice8k(0.5));
    mic.extend(vec![0.0; 8_000 * 8]);
    let dir = phone_dir("baresip-barge", &mic);
    baresip_config(&dir, &dir.join("rec"), "", &[]);
    let (mut phone, call_id, mut sideband) = accepted_phone_call(&server, &mut app, &dir).await;

    sideband.until("output_audio_buffer.started").await;
    let done = sideband.until("response.done").await;
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );
    let trunc = sideband.until("conversation.item.truncated").await;
    let end_ms = trunc["audio_end_ms"].as_u64().expect("audio_end_ms");
    assert!(
        (100..2_500).contains(&end_ms),
        "played {end_ms} ms before the barge-in"
    );
    assert_eq!(end_ms % 20, 0, "whole 20 ms frames: {end_ms}");

    let (status, body) = decide(server.addr, &call_id, "hangup", json!({})).await;
    assert_eq!(status, 200, "{body}");
    common::sip::assert_idle(&server, "the app hung up").await;
    let _ = phone.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
}
