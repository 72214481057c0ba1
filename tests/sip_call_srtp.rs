//! A phone call over SDES-SRTP: the caller offers `RTP/SAVP` with an
//! `AES_CM_128_HMAC_SHA1_80` key, Duet answers `RTP/SAVP` with a key of its own in the same
//! suite and tag, and the media both ways is SRTP: the caller's turn (protected with its
//! key) is heard and the echo's answer (protected with Duet's) decrypts to loud audio.

use crate::common;

use common::sip::{accept, sip_addr, sip_server, webhook_app};
use duet_client::sip::{sdp_crypto, Caller};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_srtp_call_is_heard_and_answered_both_ways_encrypted() {
    let _alone = common::exclusive().await; // real-time audio both ways
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let key = [0x5a; 30];
    let mut caller = Caller::invite_srtp(sip_addr(&server), "+15551230000", key)
        .await
        .unwrap();
    let call = app.next().await;
    accept(server.addr, &call.call_id).await;
    let ok = caller.answer(Duration::from_secs(5), |_| {}).await.unwrap();
    assert_eq!(ok.status, 200);
    assert!(ok.body.contains(" RTP/SAVP 0 101\r\n"), "{}", ok.body);
    assert!(
        ok.body
            .contains("a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:"),
        "{}",
        ok.body
    );
    let theirs = sdp_crypto(&ok.body).expect("Duet's key");
    assert_ne!(theirs, key, "each side sends with its own key");

    let mut turn: Vec<f32> = common::voiced(1.5).iter().step_by(3).copied().collect();
    turn.extend(vec![0.0; 8_000 * 3]);
    let heard = caller
        .talk_and_listen(&turn, Duration::from_secs(4))
        .await
        .unwrap();
    let loud = heard
        .iter()
        .filter(|(_, pcm)| duet_media::pcm::rms_dbfs(pcm) > -30.0)
        .count();
    assert!(heard.len() > 150, "{} packets decrypted", heard.len());
    assert!(loud >= 20, "{loud} loud frames of the answer heard");
    assert_eq!(caller.bye().await.unwrap(), 200);
}
