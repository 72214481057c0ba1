//! A phone call end to end with sipp as the trunk: the INVITE is announced by a signed
//! `realtime.call.incoming` webhook carrying its SIP headers, the app accepts it over the
//! API, the call's sideband sees the caller's key press (sipp's own RFC 4733 capture of
//! the key 1) as `input_audio_buffer.dtmf_event_received`, and when the caller hangs up,
//! every slot is given back.

use crate::common;

use common::sip::{accept, sip_addr, sip_server, webhook_app, Sipp};
use common::Client;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_call_hears_the_callers_keys_and_frees_its_slots() {
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let sipp = Sipp::start(
        sip_addr(&server),
        "call_dtmf.xml",
        &[("HOLD_MS", "3000")],
        &[],
    );

    let call = app.next().await;
    assert!(call.call_id.starts_with("rtc_"), "{:?}", call.event);
    assert!(call.header("From").unwrap().contains("+15551230000"));
    assert!(call.header("To").unwrap().contains("sip:duet@"));
    assert!(call.header("Call-ID").is_some());
    assert_eq!(call.header("X-Duet-Test"), Some("dtmf"));
    assert!(call.header("Via").is_none(), "routing headers stay behind");

    accept(server.addr, &call.call_id).await;
    let mut sideband = Client::sideband(server.addr, &call.call_id)
        .await
        .expect("the sideband joins the call");
    let (_, pool) = common::get(server.addr, "/v1/pool", &[]).await;
    assert!(
        pool.contains("\"transport\":\"sip\""),
        "the pool names the phone call's session: {pool}"
    );
    let key = sideband
        .until("input_audio_buffer.dtmf_event_received")
        .await;
    assert_eq!(key["event"], "1", "{key}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(
        key["received_at"].as_u64().unwrap().abs_diff(now) < 30,
        "{key}"
    );

    sipp.success().await;
    // The caller's BYE ended the call and its session: nothing is held any more.
    common::sip::assert_idle(&server, "slots given back").await;
    assert!(server.state.calls.sip.as_ref().unwrap().is_empty());
    assert!(common::sip::sip_calls_total(server.addr, "accepted").await >= 1);
}
