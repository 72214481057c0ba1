//! A phone call's audio both ways, with a Rust caller on plain RTP (PCMU): the caller's
//! turn is heard and answered by the echo model over RTP, and speaking over the answer
//! (barge-in) cancels it and truncates the assistant item to what was played, on whole
//! 20 ms frames, as on a WebRTC call. The caller hangs up with BYE.

use crate::common;

use common::sip::{accept, sip_addr, sip_server, webhook_app};
use common::Client;
use duet_client::sip::Caller;
use std::time::Duration;

/// `secs` of the synthetic voice at 8 kHz.
fn voice8k(secs: f32) -> Vec<f32> {
    common::voiced(secs).iter().step_by(3).copied().collect()
}

fn loud_frames(heard: &[(Duration, Vec<f32>)]) -> usize {
    heard
        .iter()
        .filter(|(_, pcm)| duet_media::pcm::rms_dbfs(pcm) > -30.0)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_is_heard_answered_and_can_interrupt() {
    let _alone = common::exclusive().await; // real-time audio both ways
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let mut caller = Caller::invite(sip_addr(&server), "+15551230000")
        .await
        .unwrap();
    let call = app.next().await;
    accept(server.addr, &call.call_id).await;
    let mut ringing = 0;
    let ok = caller
        .answer(Duration::from_secs(5), |s| ringing += usize::from(s == 180))
        .await
        .unwrap();
    assert_eq!(ok.status, 200, "{ok:?}");
    assert!(ringing >= 1, "180 before the answer");
    assert!(caller.remote_rtp.is_some(), "an answer SDP: {}", ok.body);
    let mut sideband = Client::sideband(server.addr, &call.call_id).await.unwrap();

    // A 2.5 s turn and the silence that ends it; the answer starts within the listening.
    let mut turn = voice8k(2.5);
    turn.extend(vec![0.0; 8_000 * 9 / 10]);
    let heard = caller
        .talk_and_listen(&turn, Duration::from_millis(3_600))
        .await
        .unwrap();
    sideband.until("input_audio_buffer.speech_stopped").await;
    sideband.until("output_audio_buffer.started").await;
    // Talk over the answer half a second later.
    let mut barge = vec![0.0; 8_000 / 2];
    barge.extend(voice8k(0.5));
    let heard2 = caller
        .talk_and_listen(&barge, Duration::from_millis(2_500))
        .await
        .unwrap();
    let loud = loud_frames(&heard) + loud_frames(&heard2);
    assert!(loud >= 15, "{loud} loud frames of the answer heard");

    let done = sideband.until("response.done").await;
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );
    sideband.until("output_audio_buffer.cleared").await;
    let trunc = sideband.until("conversation.item.truncated").await;
    let end_ms = trunc["audio_end_ms"].as_u64().unwrap();
    assert!(
        (200..2_500).contains(&end_ms),
        "played {end_ms} ms before the barge-in"
    );
    assert_eq!(end_ms % 20, 0, "whole 20 ms frames: {end_ms}");

    assert_eq!(caller.bye().await.unwrap(), 200);
}
