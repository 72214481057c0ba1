//! `/ready`'s `calls` and the `duet_calls` gauge count live SIP calls (they counted only
//! WebRTC calls: an accepted phone call showed as 0).

use std::time::Duration;

use crate::common::sip::{answered_call, sip_server, webhook_app};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_and_metrics_count_live_sip_calls() {
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let (_caller, _call) = answered_call(&server, &mut app).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, ready) = crate::common::ready(server.addr).await;
    assert_eq!((status, ready["calls"].as_u64()), (200, Some(1)), "{ready}");
    let (_, metrics) = crate::common::get(server.addr, "/metrics", &[]).await;
    assert!(
        metrics.lines().any(|l| l == "duet_calls 1"),
        "duet_calls: {:?}",
        metrics.lines().find(|l| l.starts_with("duet_calls"))
    );
}
