//! A refused WebRTC resume releases its call at once: a stale resume token gets `401
//! invalid_resume_token` and the call slot it briefly held is free before the answer (the
//! client has no call id to hang it up with).

use crate::common;
use common::*;
use duet_client::http::{multipart, post_call};
use serde_json::json;

#[tokio::test]
async fn stale_token_resumes_give_their_call_slots_back_at_once() {
    let addr = server(&["--max-calls", "2"]).await;
    let ws = Client::connect_url(&format!("ws://{addr}/v1/realtime?duplex=1"), &[])
        .await
        .expect("durable session");
    let created = &ws.log[0];
    let offer = include_str!("fixtures/chrome_offer.sdp");
    let part = json!({"session_id": created["session"]["id"],
        "resume_token": "c3RhbGUtdG9rZW4tc3RhbGUtdG9rZW4tc3RhbGUtdG9rZW4",
        "last_received_server_event_seq": 0})
    .to_string();
    for _ in 0..2 {
        let (ctype, body) = multipart(&[
            ("sdp", "application/sdp", offer),
            ("resume", "application/json", &part),
        ]);
        let err = post_call(addr, "?duplex=1", &ctype, &body, None)
            .await
            .expect_err("a stale token is refused")
            .to_string();
        assert!(
            err.contains("401") && err.contains("invalid_resume_token"),
            "{err}"
        );
    }
    // Both call slots are free now, not after --call-connect-secs.
    for _ in 0..2 {
        post_call(addr, "", "application/sdp", offer, None)
            .await
            .expect("a new call is admitted at once");
    }
    drop(ws);
}
