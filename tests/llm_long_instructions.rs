//! One session's long instructions cannot stall another's answer on the embedded LLM (the
//! review's observation: 200 000 random letters without a space as one session's
//! `instructions` made another session's one-line answer wait 13 s, on every turn, as the
//! tokenizer was superlinear on a long word and ran on the LLM's one thread). On the real
//! SmolLM2-135M-Instruct: while session A asks for answers with 200 000 unspaced letters of
//! instructions (each fails with `context_length_exceeded`), session B's answer arrives
//! within 5 s (about 2 s here; 13 s before).
//!
//! Needs `DUET_TEST_MODELS` (see `scripts/install-models`).

use crate::common;
use common::*;
use duet_client::speech::models_dir;
use serde_json::json;
use std::time::{Duration, Instant};

async fn session(addr: std::net::SocketAddr, instructions: &str) -> Client {
    let mut c = Client::connect_url(&format!("ws://{addr}/v1/realtime?model=cascade"), &[])
        .await
        .expect("connects");
    c.send(json!({"type":"session.update","session":{"type":"realtime",
        "instructions": instructions, "output_modalities":["text"],
        "audio":{"input":{"turn_detection":null}}}}))
        .await;
    c.until("session.updated").await;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_instructions_do_not_stall_another_sessions_answer() {
    let _one = exclusive().await;
    let llm = models_dir()
        .join("smollm2-135m-instruct")
        .display()
        .to_string();
    let addr = server(&["--model", "cascade", "--llm-model-dir", &llm]).await;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let letters: String = (0..200_000)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            char::from(b'a' + (seed % 26) as u8)
        })
        .collect();
    let mut a = session(addr, &letters).await;
    let mut b = session(addr, "Be brief.").await;
    for turn in 0..2 {
        a.send(json!({"type":"response.create"})).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        b.send(
            json!({"type":"conversation.item.create","item":{"type":"message","role":"user",
            "content":[{"type":"input_text","text":"Say hi."}]}}),
        )
        .await;
        b.until("conversation.item.done").await;
        let asked = Instant::now();
        b.send(json!({"type":"response.create","response":{"max_output_tokens":8}}))
            .await;
        let done = b.until("response.done").await;
        let took = asked.elapsed();
        println!("turn {turn}: B's answer in {} ms", took.as_millis());
        let status = done["response"]["status"].as_str().unwrap_or_default();
        assert!(["completed", "incomplete"].contains(&status), "{done}");
        // 3 s is the aim (the answer itself takes about 2 s on 2 busy cores); 5 s leaves
        // room for a loaded machine, and is well below the 13 s observed.
        assert!(took < Duration::from_secs(5), "B waited {took:?}");
        let failed = a.until("response.done").await;
        assert_eq!(
            failed["response"]["status_details"]["error"]["code"], "context_length_exceeded",
            "{failed}"
        );
    }
}
