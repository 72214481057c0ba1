//! Key presses on a phone call, as a phone sends them (RFC 4733: updates, then the end
//! packet three times, no marker bit needed): `1 2 3 #` reach the call's sideband as four
//! `input_audio_buffer.dtmf_event_received`, in order, one per press.

use crate::common;

use common::sip::{answered_call, sip_server, webhook_app};
use common::Client;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_arrive_once_each_in_order() {
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let (mut caller, call) = answered_call(&server, &mut app).await;
    let mut sideband = Client::sideband(server.addr, &call.call_id).await.unwrap();
    // Some audio first: the leg latches onto the caller.
    caller
        .talk_and_listen(&[], Duration::from_millis(200))
        .await
        .unwrap();
    caller.press("123#").await.unwrap();
    let mut keys = String::new();
    while keys.len() < 4 {
        let ev = sideband
            .until("input_audio_buffer.dtmf_event_received")
            .await;
        keys.push_str(ev["event"].as_str().unwrap());
    }
    assert_eq!(keys, "123#");
    // No fifth event: each press was reported once.
    caller.press("").await.unwrap();
    let extra = tokio::time::timeout(
        Duration::from_millis(500),
        sideband.until("input_audio_buffer.dtmf_event_received"),
    )
    .await;
    assert!(extra.is_err(), "a key reported twice: {extra:?}");
    assert_eq!(caller.bye().await.unwrap(), 200);
}
