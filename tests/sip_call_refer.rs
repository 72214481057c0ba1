//! In a call: a key sent by SIP INFO (`application/dtmf-relay`) reaches the sideband,
//! session refreshes (UPDATE, a re-INVITE with the same offer) are answered with the same
//! media, and `/refer` transfers the caller: Duet sends REFER with the target in `Refer-To`, answers
//! `200` once the caller's side accepted it (202), answers its NOTIFY, and hangs up (BYE)
//! when the NOTIFY reports the transfer done. sipp is the caller's side.

use crate::common;

use common::sip::{accept, decide, sip_addr, sip_server, webhook_app, Sipp};
use common::Client;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sip_info_key_arrives_and_refer_transfers_the_caller() {
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let sipp = Sipp::start(sip_addr(&server), "refer.xml", &[], &[]);
    let call = app.next().await;
    accept(server.addr, &call.call_id).await;
    let mut sideband = Client::sideband(server.addr, &call.call_id).await.unwrap();
    let key = sideband
        .until("input_audio_buffer.dtmf_event_received")
        .await;
    assert_eq!(key["event"], "5", "{key}");

    // Not a sip:/sips:/tel: URI (a multi-byte character where the scheme would end too).
    for bad in ["http://x", "abcé:x", "sipé:x"] {
        let (status, body) = decide(
            server.addr,
            &call.call_id,
            "refer",
            json!({ "target_uri": bad }),
        )
        .await;
        assert_eq!(
            (status, body["error"]["param"].as_str()),
            (400, Some("target_uri")),
            "{bad}: {body}"
        );
    }
    let (status, body) = decide(
        server.addr,
        &call.call_id,
        "refer",
        json!({"target_uri": "sip:agent@127.0.0.1:5999"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    sipp.success().await;

    common::sip::assert_idle(&server, "the transferred call ended").await;
}
