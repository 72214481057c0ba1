//! New INVITEs over `--sip-invite-rate` from one source are dropped before any transaction:
//! 200 at once at a rate of 10 ring about 10 calls (the burst), not 200, and the drops are
//! counted; another source has its own rate.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::sip_flood_kit::{counting_app, send_invites, sip_process};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invites_over_the_rate_of_their_source_are_dropped() {
    let (url, hits) = counting_app().await;
    let (server, sip) = sip_process(&url, &["--sip-invite-rate", "10"]);
    let first = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
    let load = (200, 2_000, Duration::from_secs(5));
    let sent = tokio::task::spawn_blocking(move || send_invites(first, sip, load))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let webhooks = hits.load(Ordering::Relaxed);
    let (_, metrics) = crate::common::get(server.addr, "/metrics", &[]).await;
    let dropped: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("duet_sip_dropped_total{reason=\"invite_rate\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    eprintln!("{sent} INVITEs: {webhooks} webhooks, {dropped} dropped");
    assert_eq!(sent, 200);
    assert!((10..=15).contains(&webhooks), "{webhooks} webhooks");
    assert!(dropped >= 180, "{dropped} dropped");

    let second = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    let load = (5, 100, Duration::from_secs(5));
    tokio::task::spawn_blocking(move || send_invites(second, sip, load))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let more = hits.load(Ordering::Relaxed) - webhooks;
    assert_eq!(more, 5, "another source's INVITEs ring");
}
