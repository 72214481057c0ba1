//! The memory budget is one account: under `--memory-budget-mib 320`, twelve hostile
//! WebSocket sessions one after another try to fill their per-session limits (800 s of
//! conversation audio, uncommitted input, a retrieve of a long item they never read: about
//! 65 MB each, 780 MB in all; what they keep once the transients are over is above 400 MiB,
//! so the budget is passed whatever the timing).
//! Their requests past the budget are refused with `server_memory_exhausted` (naming the
//! limit) while each session goes on; the server's resident memory stays under the budget
//! plus its baseline and 64 MiB (what the allocator keeps beyond what is charged); and a
//! WebRTC call that was already up completes a turn meanwhile.

use crate::common;

use std::time::Duration;

use base64::Engine;
use common::process::ServerProcess;
use common::{get, voiced48, Client};
use duet_client::rtc::{ClientOptions, RtcClient};
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(30);
const HOSTILE: usize = 12;
/// `--memory-budget-mib`.
const BUDGET_MIB: u64 = 320;

/// `secs` of 24 kHz PCM16 (a low hum) as base64.
fn pcm(secs: usize) -> String {
    let bytes: Vec<u8> = (0..secs * 24_000)
        .flat_map(|i| (((i % 48) as i16 - 24) * 40).to_le_bytes())
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Fills one session's limits; returns the `server_memory_exhausted` errors it got, and the
/// session (left unread). Once the budget is spent, the session is refused at open: `None`
/// with that error.
async fn hostile(addr: std::net::SocketAddr, n: usize) -> (Vec<Value>, Option<Client>) {
    let mut c = Client::open(&format!("ws://{addr}/v1/realtime"), &[])
        .await
        .expect("upgrade");
    let first = c.next().await;
    if first["type"] == "error" {
        assert_eq!(first["error"]["code"], "server_memory_exhausted", "{first}");
        return (vec![first], None);
    }
    assert_eq!(first["type"], "session.created", "{first}");
    c.send(
        json!({"type":"session.update","session":{"type":"realtime","audio":{"input":{
        "turn_detection":null}}}}),
    )
    .await;
    c.until("session.updated").await;
    // 4 items of 200 s (≈ 38 MB kept), each answered by `added` or an error.
    let item = pcm(200);
    for i in 0..4 {
        c.send(
            json!({"type":"conversation.item.create","event_id": format!("evt_item_{n}_{i}"),
            "item":{"id": format!("item_{n}_{i}"),"type":"message","role":"user",
            "content":[{"type":"input_audio","audio": item}]}}),
        )
        .await;
    }
    // Uncommitted input, 20 s a time.
    let chunk = pcm(20);
    for i in 0..2 {
        c.send(
            json!({"type":"input_audio_buffer.append","event_id": format!("evt_append_{n}_{i}"),
            "audio": chunk}),
        )
        .await;
    }
    // A marker: refused (a commit with manual turns and a buffer holding audio would be
    // answered too, but an empty one errs) — either way the last answer to wait for.
    c.send(json!({"type":"conversation.item.delete","event_id":"evt_marker","item_id":"none"}))
        .await;
    let mut refused = Vec::new();
    let mut kept = None;
    loop {
        let ev = c.next().await;
        if ev["type"] == "conversation.item.added" {
            kept = ev["item"]["id"].as_str().map(String::from);
        }
        if ev["type"] == "error" {
            if ev["error"]["code"] == "server_memory_exhausted" {
                refused.push(ev.clone());
            }
            if ev["error"]["event_id"] == "evt_marker" {
                break;
            }
        }
    }
    // A retrieve of an item (≈ 12.8 MB of base64, cached and queued) that it never reads.
    if let Some(item) = kept {
        c.send(json!({"type":"conversation.item.retrieve","item_id": item}))
            .await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    (refused, Some(c))
}

async fn used_bytes(addr: std::net::SocketAddr) -> (u64, u64) {
    let (_, text) = get(addr, "/metrics", &[]).await;
    let gauge = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics"))
    };
    (
        gauge("duet_memory_used_bytes"),
        gauge("duet_memory_budget_bytes"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_sessions_stay_under_the_budget_and_a_call_completes_a_turn() {
    let server = ServerProcess::spawn(&["--memory-budget-mib", &BUDGET_MIB.to_string()]);
    let addr = server.addr;
    // The well-behaved call is up before the flood.
    let mut call = RtcClient::connect(addr, ClientOptions::default())
        .await
        .expect("call");
    call.until("session.created", T).await.unwrap();
    call.send(
        json!({"type":"session.update","session":{"audio":{"input":{"turn_detection":null}}}}),
    );
    call.until("session.updated", T).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let baseline_mib = server.peak_kib() / 1024;

    let (mut refused, mut sessions, mut opens_refused) = (Vec::new(), Vec::new(), 0);
    for n in 0..HOSTILE {
        let (r, c) = hostile(addr, n).await;
        refused.extend(r);
        match c {
            Some(c) => sessions.push(c),
            None => opens_refused += 1,
        }
    }
    let peak_mib = server.peak_kib() / 1024;
    let (used, limit) = used_bytes(addr).await;
    eprintln!(
        "baseline {baseline_mib} MiB, peak {peak_mib} MiB, now {} MiB, charged {} MiB of {} MiB, {} refusals ({opens_refused} at open, {} sessions running)",
        server.rss_kib() / 1024,
        used >> 20,
        limit >> 20,
        refused.len(),
        sessions.len()
    );
    assert_eq!(limit, BUDGET_MIB << 20);
    assert!(!refused.is_empty(), "the flood passed the budget unrefused");
    for e in &refused {
        let msg = e["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains(&format!("--memory-budget-mib {BUDGET_MIB}")),
            "{e}"
        );
    }
    assert!(
        refused.iter().any(|e| e["error"]["event_id"].is_string()),
        "a refused request is named: {refused:?}"
    );
    assert!(
        peak_mib < baseline_mib + BUDGET_MIB + 64,
        "RSS peaked at {peak_mib} MiB, over the budget, the {baseline_mib} MiB baseline and 64 MiB"
    );

    // The call completes a turn while the flood holds what it could get.
    call.speak(&voiced48(1.0));
    while !call.done_speaking() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    call.send(json!({"type":"input_audio_buffer.commit"}));
    call.until("input_audio_buffer.committed", T).await.unwrap();
    call.send(json!({"type":"response.create"}));
    let (done, _) = call.until("response.done", T).await.unwrap();
    assert_eq!(done["response"]["status"], "completed", "{done}");

    // The flood ends: everything it held is given back (the call keeps its own share).
    drop(sessions);
    let start = std::time::Instant::now();
    loop {
        let (used, _) = used_bytes(addr).await;
        if used < 32 << 20 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{} MiB still charged after the hostile sessions closed",
            used >> 20
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
