//! `/accept` when every model slot is taken: the app gets `503 model_slots_exhausted` (with
//! nothing held), the caller `486 Busy Here`; once a slot is free, the next call is
//! accepted.

use crate::common;

use std::time::Duration;

use common::sip::{accept, assert_refused, sip_addr, sip_server, webhook_app};
use duet_client::sip::Caller;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_without_a_model_slot_is_503_to_the_app_and_486_to_the_caller() {
    let mut app = webhook_app().await;
    let server = sip_server(&app, &["--model-slots", "1"]).await;
    // The one slot: a WebSocket session.
    let holder = common::Client::connect(server.addr).await;

    let mut caller = Caller::invite(sip_addr(&server), "+15551230000")
        .await
        .expect("INVITE");
    let call = app.next().await;
    assert_refused(
        server.addr,
        &call.call_id,
        ("accept", json!({"type": "realtime"})),
        (503, "code", "model_slots_exhausted"),
    )
    .await;
    let answer = caller
        .answer(Duration::from_secs(5), |_| {})
        .await
        .expect("final answer");
    assert_eq!(answer.status, 486, "the caller hears busy");
    assert_eq!(
        server.state.sessions.admissions.calls(),
        0,
        "no call slot kept"
    );
    assert_eq!(
        server.state.sessions.admissions.sessions(),
        1,
        "only the holder's session"
    );

    drop(holder);
    let mut caller = Caller::invite(sip_addr(&server), "+15551230001")
        .await
        .expect("INVITE");
    let call = app.next().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    accept(server.addr, &call.call_id).await;
    let ok = caller
        .answer(Duration::from_secs(5), |_| {})
        .await
        .expect("answer");
    assert_eq!(ok.status, 200);
    assert_eq!(caller.bye().await.expect("BYE"), 200);
    common::sip::assert_idle(&server, "the second call ended").await;
}
