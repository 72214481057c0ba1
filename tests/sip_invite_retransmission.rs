//! A caller that resends its INVITE (as it does on UDP when the first answer is late) makes
//! one pending call and one webhook, not two; the one call is accepted and answered once.

use crate::common;

use common::sip::{accept, sip_addr, sip_server, webhook_app};
use duet_client::sip::Caller;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retransmitted_invite_fires_no_second_webhook() {
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let mut caller = Caller::invite(sip_addr(&server), "+15551230000")
        .await
        .unwrap();
    let call = app.next().await;
    for _ in 0..3 {
        caller.retransmit_invite().await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let second = tokio::time::timeout(Duration::from_millis(800), app.next()).await;
    assert!(second.is_err(), "a second webhook: {second:?}");
    assert_eq!(
        server.state.calls.sip.as_ref().unwrap().len(),
        1,
        "one pending call"
    );
    accept(server.addr, &call.call_id).await;
    let ok = caller.answer(Duration::from_secs(5), |_| {}).await.unwrap();
    assert_eq!(ok.status, 200);
    assert_eq!(caller.bye().await.unwrap(), 200);
}
