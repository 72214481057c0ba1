//! Conversation text is charged to the memory budget (the review's observation: forty
//! 12 MiB text items took a server under `--memory-budget-mib 256` to 519 MiB while the
//! account said 20 MiB). Under that budget, with `--max-conversation-text-mib 64`, five
//! sessions that each try to keep 96 MiB of text (more than a conversation keeps: the
//! oldest items are evicted) are refused past the budget with `server_memory_exhausted`
//! (naming the event) and go on, while the server's resident memory stays under the budget
//! plus its baseline and 64 MiB. (`item_text_too_long`, one item over the conversation's
//! text, is shown on the session itself: `src/session/tests/memory.rs`.)

use crate::common;

use common::process::ServerProcess;
use common::Client;
use serde_json::{json, Value};

const MIB: usize = 1 << 20;

fn text_item(id: &str, bytes: usize) -> Value {
    json!({"type":"conversation.item.create","event_id": format!("evt_{id}"),
        "item":{"id": id,"type":"message","role":"user",
        "content":[{"type":"input_text","text": "t".repeat(bytes)}]}})
}

/// Sends `item` and waits for its answer: `Ok(())` when added, the error otherwise
/// (evictions on the way are skipped).
async fn create(c: &mut Client, item: Value) -> Result<(), Value> {
    c.send(item).await;
    loop {
        let ev = c.next().await;
        match ev["type"].as_str() {
            Some("conversation.item.added") => return Ok(()),
            Some("error") => return Err(ev),
            _ => {}
        }
    }
}

async fn charged(addr: std::net::SocketAddr) -> u64 {
    let (_, text) = common::get(addr, "/metrics", &[]).await;
    text.lines()
        .find_map(|l| l.strip_prefix("duet_memory_used_bytes "))
        .and_then(|v| v.trim().parse().ok())
        .expect("duet_memory_used_bytes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversation_text_is_capped_and_charged() {
    let server = ServerProcess::spawn(&[
        "--memory-budget-mib",
        "256",
        "--max-conversation-text-mib",
        "64",
    ]);
    let addr = server.addr;
    let probe = Client::connect(addr).await;
    let baseline_mib = server.peak_kib() / 1024;
    drop(probe);

    let (mut refused, mut sessions) = (Vec::new(), Vec::new());
    for s in 0..5 {
        let mut c = Client::connect(addr).await;
        // Eight 12 MiB items: 96 MiB, more than the 64 MiB a conversation keeps.
        for i in 0..8 {
            if let Err(e) = create(&mut c, text_item(&format!("item_{s}_{i}"), 12 * MIB)).await {
                assert_eq!(e["error"]["code"], "server_memory_exhausted", "{e}");
                assert_eq!(e["error"]["event_id"], format!("evt_item_{s}_{i}"), "{e}");
                refused.push(e);
            }
        }
        sessions.push(c);
    }
    let peak_mib = server.peak_kib() / 1024;
    let used = charged(addr).await;
    eprintln!(
        "baseline {baseline_mib} MiB, peak {peak_mib} MiB, charged {} MiB, {} refusals",
        used >> 20,
        refused.len()
    );
    assert!(
        !refused.is_empty(),
        "480 MiB of text passed a 256 MiB budget"
    );
    assert!(used <= 256 << 20, "charged {used} bytes");
    assert!(
        peak_mib < baseline_mib + 256 + 64,
        "RSS peaked at {peak_mib} MiB (baseline {baseline_mib} MiB, budget 256 MiB)"
    );
    // Every session goes on: a short item is stored in each.
    for (s, c) in sessions.iter_mut().enumerate() {
        create(c, text_item(&format!("item_short_{s}"), 100))
            .await
            .unwrap();
    }
}
