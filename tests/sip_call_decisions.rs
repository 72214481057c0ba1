//! How an INVITE ends before it is accepted, each against sipp: `/reject` with 486 and
//! with no body (603), `/hangup` while it rings (603), the caller's CANCEL (487; a later
//! `/accept` finds no call), the app not deciding within `--sip-decision-secs` (480), and an
//! offer with no codec Duet speaks (488, announced to no one). Nothing is held afterwards.

use crate::common;

use common::sip::{assert_refused, decide, sip_addr, sip_server, webhook_app, Sipp};
use serde_json::json;
use std::time::Duration;

/// The placeholders of `final.xml`: the final status expected and the offered codecs.
fn fill<'a>(status: &'a str, codecs: &'a str) -> [(&'static str, &'a str); 3] {
    [
        ("FINAL", status),
        ("CODECS", codecs),
        ("CALLER", "+15551230000"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_cancelled_unanswered_and_unacceptable_invites_end_as_sip_says() {
    let mut app = webhook_app().await;
    let server = sip_server(&app, &["--sip-decision-secs", "2"]).await;
    let sip = sip_addr(&server);

    // /reject {status_code: 486}.
    let v = fill("486", "0 8");
    let sipp = Sipp::start(sip, "final.xml", &v, &[]);
    let call = app.next().await;
    let (status, body) = decide(
        server.addr,
        &call.call_id,
        "reject",
        json!({"status_code": 486}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    sipp.success().await;

    // /reject with an empty body: 603 Decline.
    let v = fill("603", "0 8");
    let sipp = Sipp::start(sip, "final.xml", &v, &[]);
    let call = app.next().await;
    assert_eq!(
        decide(server.addr, &call.call_id, "reject", json!({}))
            .await
            .0,
        200
    );
    sipp.success().await;

    // /hangup while it rings declines it too.
    let sipp = Sipp::start(sip, "final.xml", &v, &[]);
    let call = app.next().await;
    let r = duet_client::http::request(
        server.addr,
        "POST",
        &format!("/v1/realtime/calls/{}/hangup", call.call_id),
        &[],
        "",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    sipp.success().await;

    // Bad decisions are refused without touching the call.
    let v = fill("480", "0 8");
    let sipp = Sipp::start(sip, "final.xml", &v, &[]);
    let call = app.next().await;
    assert_refused(
        server.addr,
        &call.call_id,
        ("reject", json!({"status_code": 200})),
        (400, "param", "status_code"),
    )
    .await;
    assert_refused(
        server.addr,
        &call.call_id,
        ("accept", json!({"instructions": "x"})),
        (400, "param", "type"),
    )
    .await;
    assert_refused(
        server.addr,
        &call.call_id,
        ("refer", json!({"target_uri": "sip:a@b"})),
        (409, "code", "call_not_accepted"),
    )
    .await;
    // ... and with no decision, the caller gets 480 after --sip-decision-secs.
    sipp.success().await;

    // The caller gives up while it rings: 487, and the call is gone.
    let v = fill("487", "0 8");
    let sipp = Sipp::start(sip, "cancel.xml", &v, &[]);
    let call = app.next().await;
    sipp.success().await;
    assert_refused(
        server.addr,
        &call.call_id,
        ("accept", json!({"type": "realtime"})),
        (404, "code", "call_not_found"),
    )
    .await;

    // G.729 only: 488 at once, no webhook.
    let v = fill("488", "18");
    Sipp::start(sip, "final.xml", &v, &[]).success().await;

    // (Counted for the whole test binary: at least these.)
    for (outcome, n) in [
        ("rejected", 3),
        ("timeout", 1),
        ("cancelled", 1),
        ("not_acceptable", 1),
    ] {
        let got = common::sip::sip_calls_total(server.addr, outcome).await;
        assert!(got >= n, "{outcome}: {got} < {n}");
    }
    common::sip::assert_idle(&server, "nothing held").await;
    assert!(server.state.calls.sip.as_ref().unwrap().is_empty());
    assert!(
        tokio::time::timeout(Duration::from_millis(300), app.next())
            .await
            .is_err(),
        "no webhook for the 488"
    );
}
