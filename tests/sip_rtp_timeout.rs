//! A phone call whose RTP stops (the caller's side vanished without a BYE) is hung up by
//! Duet after `--sip-rtp-timeout-secs`: the caller gets a BYE and every slot comes back.

use crate::common;

use common::sip::{answered_call, sip_server, webhook_app};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_rtp_stops_is_hung_up() {
    let mut app = webhook_app().await;
    let server = sip_server(&app, &["--sip-rtp-timeout-secs", "1"]).await;
    let (mut caller, _) = answered_call(&server, &mut app).await;
    // Half a second of RTP, then nothing.
    caller
        .talk_and_listen(&[], Duration::from_millis(500))
        .await
        .unwrap();
    let silent = Instant::now();
    caller
        .wait_bye(Duration::from_secs(5))
        .await
        .expect("Duet's BYE");
    let after = silent.elapsed();
    assert!(
        after >= Duration::from_millis(900),
        "BYE {after:?} after the RTP stopped"
    );
    common::sip::assert_idle(&server, "slots given back").await;
}
