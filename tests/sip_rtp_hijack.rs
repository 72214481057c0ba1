//! A stranger's RTP cannot take over a phone call's media (review D5): one packet to the
//! leg's port before the caller's first, then one every 0.5 s while the caller talks. The
//! caller hears the answer's packets, the stranger none, and the caller's audio is heard.

use crate::common;

use common::sip::{answered_call, sip_server, webhook_app};
use duet_media::rtp::{self, RtpHeader};
use std::time::Duration;

/// One PCMU packet of silence.
fn pcmu(seq: u16) -> Vec<u8> {
    let header = RtpHeader {
        marker: false,
        payload_type: 0,
        seq,
        timestamp: u32::from(seq) * 160,
        ssrc: 0x0bad_cafe,
    };
    let mut packet = Vec::new();
    rtp::write(&header, &[0xff; 160], &mut packet);
    packet
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_packet_before_the_callers_does_not_steal_the_call() {
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let (mut caller, _) = answered_call(&server, &mut app).await;
    let leg = caller.remote_rtp.expect("the answer's RTP address");

    let stranger = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    stranger.send_to(&pcmu(1), leg).await.unwrap();
    // The stranger keeps sending one packet every 0.5 s and counts what reaches it.
    let spray = tokio::spawn(async move {
        let mut got = 0u32;
        let mut buf = [0u8; 2048];
        let end = tokio::time::Instant::now() + Duration::from_millis(3_300);
        let mut seq = 2u16;
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(end) => break,
                _ = tick.tick() => {
                    let _ = stranger.send_to(&pcmu(seq), leg).await;
                    seq += 1;
                }
                r = stranger.recv_from(&mut buf) => {
                    if r.is_ok() {
                        got += 1;
                    }
                }
            }
        }
        got
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let heard = caller
        .talk_and_listen(&[], Duration::from_secs(3))
        .await
        .unwrap();
    let stranger_got = spray.await.unwrap();
    assert_eq!(stranger_got, 0, "the stranger heard the call");
    assert!(
        heard.len() > 100,
        "the caller heard {} packets in 3 s",
        heard.len()
    );
}
