//! A phone call whose RTP stops (the caller's side vanished without a BYE) is hung up by
//! Duet after `--sip-rtp-timeout-secs`: the caller gets a BYE and every slot comes back.

use crate::common;

use common::sip::{accept, sip_addr, sip_server, webhook_app};
use duet_client::sip::Caller;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_rtp_stops_is_hung_up() {
    let mut app = webhook_app().await;
    let server = sip_server(&app, &["--sip-rtp-timeout-secs", "1"]).await;
    let mut caller = Caller::invite(sip_addr(&server), "+15551230000")
        .await
        .unwrap();
    let call = app.next().await;
    accept(server.addr, &call.call_id).await;
    assert_eq!(
        caller
            .answer(Duration::from_secs(5), |_| {})
            .await
            .unwrap()
            .status,
        200
    );
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
    let a = &server.state.admissions;
    for _ in 0..100 {
        if a.calls() == 0 && a.sessions() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!((a.calls(), a.sessions()), (0, 0), "slots given back");
}
