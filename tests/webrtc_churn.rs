//! 50 calls opened and hung up leave file descriptors, threads and memory at baseline.

use crate::common;
use common::*;
use duet_client::rtc::{ClientOptions, RtcClient};
use std::time::Duration;

fn proc_status(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

async fn call_and_hang_up(addr: std::net::SocketAddr) {
    let mut c = RtcClient::connect(addr, ClientOptions::default())
        .await
        .expect("call");
    c.until("session.created", Duration::from_secs(10))
        .await
        .expect("events flow");
    let s = duet_client::http::hangup(addr, &c.call_id, None)
        .await
        .unwrap();
    assert_eq!(s, 200);
    c.close();
}

async fn wait_no_calls(addr: std::net::SocketAddr) {
    for _ in 0..100 {
        let (_, body) = get(addr, "/ready", &[]).await;
        if body.contains(r#""calls":0"#) && body.contains(r#""sessions":0"#) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("calls were not reaped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_calls_leave_no_residue() {
    let addr = server(&[]).await;
    // Warm up lazily created state (runtime threads, allocator arenas, crypto tables).
    for _ in 0..5 {
        call_and_hang_up(addr).await;
    }
    wait_no_calls(addr).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (fd0, th0, rss0) = (fds(), proc_status("Threads:"), proc_status("VmRSS:"));
    for _ in 0..5 {
        let batch: Vec<_> = (0..10)
            .map(|_| tokio::spawn(call_and_hang_up(addr)))
            .collect();
        for b in batch {
            b.await.unwrap();
        }
    }
    wait_no_calls(addr).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (fd1, th1, rss1) = (fds(), proc_status("Threads:"), proc_status("VmRSS:"));
    eprintln!("fds {fd0} -> {fd1}, threads {th0} -> {th1}, rss {rss0} KiB -> {rss1} KiB");
    assert!(fd1 <= fd0, "file descriptors leaked: {fd0} -> {fd1}");
    assert!(th1 <= th0 + 2, "threads leaked: {th0} -> {th1}");
    assert!(
        rss1 <= rss0 + 16 * 1024,
        "memory grew by {} KiB",
        rss1 - rss0
    );
}
