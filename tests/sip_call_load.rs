//! 100 phone calls at 5 calls a second (sipp, up to 20 at once), each accepted by the app
//! as its webhook arrives, hearing a key press and hung up by the caller after a second:
//! every call completes, and afterwards no call, session, admission or SIP call is left.

use crate::common;

use common::sip::{accept, sip_addr, sip_server, webhook_app, Sipp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_calls_complete_and_leave_nothing_behind() {
    let _alone = common::exclusive().await; // 20 calls' media at once: no real-time test beside
    let mut app = webhook_app().await;
    let server = sip_server(&app, &["--max-calls", "40", "--max-sessions", "40"]).await;
    let addr = server.addr;
    let accepting = tokio::spawn(async move {
        for _ in 0..100 {
            let call = app.next().await;
            tokio::spawn(async move { accept(addr, &call.call_id).await });
        }
    });
    let extra = ["-m", "100", "-r", "5", "-l", "20"];
    Sipp::start(
        sip_addr(&server),
        "call_dtmf.xml",
        &[("HOLD_MS", "1000")],
        &extra,
    )
    .success()
    .await;
    accepting.await.expect("every call was announced");

    common::sip::assert_idle(&server, "slots given back").await;
    assert!(
        server.state.calls.sip.as_ref().unwrap().is_empty(),
        "no SIP call left"
    );
    assert!(server.state.calls.is_empty(), "no call registered");
    assert!(common::sip::sip_calls_total(addr, "accepted").await >= 100);
}
