//! A late offer and the app's hangup: sipp's INVITE has no SDP, the app accepts, Duet's
//! `200 OK` carries Duet's offer (PCMU, PCMA, Opus, telephone-event) and sipp's ACK the
//! answer (PCMA, or Opus); the app then hangs up over the API and sipp gets Duet's BYE.

use crate::common;

use common::sip::{accept, sip_addr, sip_server, webhook_app, Sipp};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_offer_call_is_answered_and_hung_up_by_the_app() {
    late_offer(&[("PT", "8"), ("CODEC", "PCMA/8000")]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_offer_answered_with_opus_is_a_live_call() {
    late_offer(&[("PT", "111"), ("CODEC", "opus/48000/2")]).await;
}

async fn late_offer(answer: &[(&str, &str)]) {
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let sipp = Sipp::start(sip_addr(&server), "late_offer.xml", answer, &[]);
    let call = app.next().await;
    accept(server.addr, &call.call_id).await;
    // The call is live (the ACK brought the answer): its sideband joins.
    let sideband = common::Client::sideband(server.addr, &call.call_id).await;
    assert!(sideband.is_ok(), "the sideband joins the live call");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let path = format!("/v1/realtime/calls/{}/hangup", call.call_id);
    let r = duet_client::http::request(server.addr, "POST", &path, &[], "")
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    sipp.success().await;
    common::sip::assert_idle(&server, "slots given back").await;
    // A call that ended is not found any more.
    let r = duet_client::http::request(server.addr, "POST", &path, &[], "")
        .await
        .unwrap();
    assert_eq!(r.status, 404, "{}", r.body);
}
