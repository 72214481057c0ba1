//! A SIP-gateway style call: PCMU-only offer, G.711 both ways, the echo answers.

use crate::common;
use common::*;
use duet_client::rtc::{ClientOptions, RtcClient};
use std::time::Duration;

#[tokio::test]
async fn pcmu_only_call_answers() {
    let addr = server(&[]).await;
    let mut c = RtcClient::connect(
        addr,
        ClientOptions {
            pcmu_only: true,
            ..Default::default()
        },
    )
    .await
    .expect("call");
    c.until("session.created", Duration::from_secs(10))
        .await
        .unwrap();
    let mut audio = voiced48(1.0);
    audio.extend(vec![0.0; 48_000 * 7 / 10]);
    c.speak(&audio);
    c.until("input_audio_buffer.speech_stopped", Duration::from_secs(10))
        .await
        .unwrap();
    let (done, _) = c
        .until("response.done", Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(done["response"]["status"], "completed");
    c.until("output_audio_buffer.stopped", Duration::from_secs(10))
        .await
        .unwrap();
    let loud = c.stats().frames.iter().filter(|(_, r)| *r > 0.02).count();
    assert!(loud >= 40, "{loud} loud G.711 frames");
}
