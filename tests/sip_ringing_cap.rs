//! Ringing calls and webhooks are bounded: 600 INVITEs under `--max-calls 50` ring at most
//! 50 calls (the rest get `503` at once), so the app gets at most 60 webhooks; a webhook app
//! that never answers costs the server at most 64 more file descriptors for 300 ringing
//! calls (the webhook pool).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::sip_flood_kit::{counting_app, fds, send_invites, sip_process};

const CALLER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));

/// An app that accepts connections and never reads or answers (holds them all).
async fn hanging_app() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ringing_calls_are_capped_by_max_calls() {
    let (url, hits) = counting_app().await;
    let (server, sip) = sip_process(
        &url,
        &[
            "--max-calls",
            "50",
            "--sip-invite-rate",
            "1000",
            "--sip-decision-secs",
            "30",
        ],
    );
    let load = (600, 300, Duration::from_secs(10));
    let sent = tokio::task::spawn_blocking(move || send_invites(CALLER, sip, load))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let webhooks = hits.load(Ordering::Relaxed);
    eprintln!("{sent} INVITEs, {webhooks} webhooks");
    assert_eq!(sent, 600);
    assert!(
        webhooks <= 60,
        "{webhooks} webhooks for 600 INVITEs at --max-calls 50"
    );
    assert!(webhooks >= 40, "the calls under the cap ring: {webhooks}");
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_webhook_app_costs_a_bounded_number_of_connections() {
    let url = hanging_app().await;
    let (server, sip) = sip_process(
        &url,
        &[
            "--max-calls",
            "1000",
            "--sip-max-ringing",
            "1000",
            "--sip-invite-rate",
            "1000",
            "--sip-decision-secs",
            "30",
        ],
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let baseline = fds(server.pid());
    let load = (300, 150, Duration::from_secs(10));
    let sent = tokio::task::spawn_blocking(move || send_invites(CALLER, sip, load))
        .await
        .unwrap();
    let mut most = 0;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        most = most.max(fds(server.pid()).saturating_sub(baseline));
    }
    eprintln!("{sent} INVITEs; at most +{most} fds");
    assert_eq!(sent, 300);
    assert!(most <= 64, "+{most} fds for {sent} ringing calls");
}
