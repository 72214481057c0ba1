//! Keys pressed on a real phone: baresip calls Duet, the app accepts, the phone sends
//! `1 2 3 #` (RFC 4733 telephone events, as baresip sends them) and the sideband gets one
//! `input_audio_buffer.dtmf_event_received` per key, in order; then the phone hangs up and
//! every slot comes back.

use crate::common;

use std::time::Duration;

use common::sip::{
    accepted_phone_call, baresip_command, baresip_config, phone_dir, sip_server, webhook_app,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_pressed_on_baresip_reach_the_sideband_in_order() {
    let _alone = common::exclusive().await;
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let dir = phone_dir("baresip-keys", &vec![0.0; 8_000 * 20]);
    let (_, ctrl) = baresip_config(&dir, &dir.join("rec"), "", &[]);
    let (mut phone, _, mut sideband) = accepted_phone_call(&server, &mut app, &dir).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    for key in ["1", "2", "3", "#"] {
        baresip_command(ctrl, "sndcode", key).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut got = Vec::new();
    while got.len() < 4 {
        let ev = sideband
            .until("input_audio_buffer.dtmf_event_received")
            .await;
        got.push(ev["event"].as_str().unwrap_or("?").to_string());
    }
    assert_eq!(got, ["1", "2", "3", "#"], "one event per key, in order");

    baresip_command(ctrl, "hangup", "").await;
    common::sip::assert_idle(&server, "the phone hung up").await;
    let _ = phone.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
}
