//! One client cannot take the server's memory: a long μ-law item retrieved as PCM 50 times
//! without reading closes that session (`event_queue_full`) while server RSS stays bounded
//! and other sessions are served; an item over the per-item audio cap is refused at
//! `conversation.item.create` and stores nothing.

use crate::common;

use std::time::{Duration, Instant};

use base64::Engine;
use common::process::ServerProcess;
use common::{ready, Client};
use serde_json::json;

fn format(kind: &str) -> serde_json::Value {
    json!({"type":"session.update","session":{"type":"realtime","audio":{"input":{"format":{"type": kind}}}}})
}

fn ulaw_item(id: &str, bytes: usize) -> serde_json::Value {
    // 0xFF is μ-law silence; any byte decodes to a sample.
    let audio = base64::engine::general_purpose::STANDARD.encode(vec![0xFFu8; bytes]);
    json!({"type":"conversation.item.create","item":{"id": id, "type":"message","role":"user",
        "content":[{"type":"input_audio","audio": audio}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_retrieves_of_a_long_item_close_only_that_session() {
    let server = ServerProcess::spawn(&[]);
    let addr = server.addr;
    let mut warm = Client::connect(addr).await;
    warm.send(format("audio/pcmu")).await;
    warm.until("session.updated").await;
    drop(warm);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (baseline, baseline_peak) = (server.rss_kib(), server.peak_kib());

    // 290 s of μ-law: under the 300 s item cap.
    let mut a = Client::connect(addr).await;
    a.send(format("audio/pcmu")).await;
    a.until("session.updated").await;
    a.send(ulaw_item("item_long", 290 * 8_000)).await;
    let added = a.until("conversation.item.added").await;
    assert_eq!(added["item"]["id"], "item_long");
    a.send(format("audio/pcm")).await;
    a.until("session.updated").await;
    // Each answer is ~18.6 MB of base64 PCM16; the client reads none of them.
    for _ in 0..50 {
        a.send(json!({"type":"conversation.item.retrieve","item_id":"item_long"}))
            .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let grown_mib = server.rss_kib().saturating_sub(baseline) / 1024;
    let peak_mib = server.peak_kib().saturating_sub(baseline_peak) / 1024;
    eprintln!("server RSS grew by {grown_mib} MiB (peak +{peak_mib} MiB)");
    assert!(grown_mib < 150, "server RSS grew by {grown_mib} MiB");
    assert!(
        peak_mib < 150,
        "server RSS peaked {peak_mib} MiB over the baseline"
    );
    // The flooding session was closed for not reading (its socket may hold a few of the
    // events it was sent before the close).
    let mut saw = Vec::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(10), a.next_raw())
        .await
        .ok()
        .flatten()
    {
        saw.push(ev["type"].as_str().unwrap_or("?").to_string());
        if ev["type"] == "error" {
            assert_eq!(ev["error"]["code"], "event_queue_full", "{ev}");
        }
    }
    assert!(saw.len() <= 3, "{saw:?}");

    // Other sessions are served, and the flooding one gave its model slot back.
    let mut b = Client::connect(addr).await;
    b.send(format("audio/pcma")).await;
    let up = b.until("session.updated").await;
    assert_eq!(
        up["session"]["audio"]["input"]["format"]["type"],
        "audio/pcma"
    );
    let start = Instant::now();
    loop {
        let (_, v) = ready(addr).await;
        if v["sessions"] == 1 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "{v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(a);
}

#[tokio::test]
async fn an_item_over_the_audio_cap_is_refused_and_stores_nothing() {
    let addr = common::server(&[]).await;
    let mut c = Client::connect(addr).await;
    c.send(format("audio/pcmu")).await;
    c.until("session.updated").await;
    // ~11.5 MB of μ-law (24 min), a 15 MiB event: just under the event size limit.
    let mut create = ulaw_item("item_big", 11_500_000);
    create["event_id"] = json!("evt_big");
    c.send(create).await;
    let err = c.until("error").await;
    assert_eq!(err["error"]["code"], "item_audio_too_long", "{err}");
    assert_eq!(err["error"]["event_id"], "evt_big");
    assert_eq!(err["error"]["param"], "item.content.audio");
    c.send(json!({"type":"conversation.item.retrieve","item_id":"item_big"}))
        .await;
    let err = c.until("error").await;
    assert_eq!(err["error"]["code"], "item_retrieve_invalid_item_id");
    // Just over the cap (301 s) is refused too; at the cap it is stored.
    c.send(ulaw_item("item_301", 301 * 8_000)).await;
    assert_eq!(
        c.until("error").await["error"]["code"],
        "item_audio_too_long"
    );
    c.send(ulaw_item("item_300", 299 * 8_000)).await;
    assert_eq!(
        c.until("conversation.item.added").await["item"]["id"],
        "item_300"
    );
}
