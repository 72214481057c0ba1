//! The embedded LLM cannot be monopolised by `/v1/chat/completions` (the review's
//! observation: 40 concurrent completions made a voice session's one-line answer wait 33.5 s
//! behind them, first come first served, with no bound on the queue). With 40 completions
//! of 200 tokens outstanding on a tiny model, a realtime session's text answer goes ahead of
//! them: it completes within 10 s and before most of them, and no completion waits past
//! `--llm-max-wait-secs` (each ends 200, `429 llm_queue_full` or `503 llm_queue_timeout`,
//! the refusals with `Retry-After`).

use crate::common;
use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_answer_is_not_behind_forty_completions() {
    let _one = exclusive().await;
    let dir = std::env::temp_dir().join(format!("duet-tiny-llm-{}", unique()));
    std::fs::create_dir_all(&dir).unwrap();
    duet_models::llama::random::write_random_gguf(
        &dir,
        &duet_models::llama::random::RandomShape::tiny(),
        7,
    )
    .unwrap();
    let llm = dir.display().to_string();
    let addr = server(&["--model", "cascade", "--llm-model-dir", &llm]).await;
    let body = json!({"messages":[{"role":"user","content":"Tell me a long story about the sea."}],
        "max_tokens": 200})
    .to_string();
    let started = Instant::now();
    let completions: Vec<_> = (0..40)
        .map(|_| {
            let body = body.clone();
            tokio::spawn(async move {
                let r = duet_client::http::request(
                    addr,
                    "POST",
                    "/v1/chat/completions",
                    &[("content-type", "application/json")],
                    &body,
                )
                .await
                .expect("answered");
                (r.status, r.body, r.head, started.elapsed())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut c = Client::connect_url(&format!("ws://{addr}/v1/realtime?model=cascade"), &[])
        .await
        .expect("connects");
    c.send(json!({"type":"session.update","session":{"type":"realtime",
        "instructions":"Be brief.","output_modalities":["text"],
        "audio":{"input":{"turn_detection":null}}}}))
        .await;
    c.until("session.updated").await;
    c.send(
        json!({"type":"conversation.item.create","item":{"type":"message","role":"user",
        "content":[{"type":"input_text","text":"Say hi."}]}}),
    )
    .await;
    c.until("conversation.item.done").await;
    let asked = Instant::now();
    c.send(json!({"type":"response.create","response":{"max_output_tokens":4}}))
        .await;
    let done = c.until("response.done").await;
    let voice = asked.elapsed();
    let voice_at = started.elapsed();
    // Completed, or cut at its max_output_tokens: an answer, not a failure.
    let status = done["response"]["status"].as_str().unwrap_or_default();
    assert!(["completed", "incomplete"].contains(&status), "{done}");

    let mut statuses = Vec::new();
    let mut slowest = Duration::ZERO;
    let mut finished_before_voice = 0;
    for task in completions {
        let (status, body, head, took) = task.await.unwrap();
        slowest = slowest.max(took);
        if took < voice_at {
            finished_before_voice += 1;
        }
        match status {
            200 => {}
            429 | 503 => {
                let v: Value = serde_json::from_str(&body).unwrap();
                let code = v["error"]["code"].as_str().unwrap_or_default().to_string();
                assert!(
                    ["llm_queue_full", "llm_queue_timeout"].contains(&code.as_str()),
                    "{body}"
                );
                assert!(head.to_ascii_lowercase().contains("retry-after:"), "{head}");
            }
            other => panic!("completion answered {other}: {body}"),
        }
        statuses.push(status);
    }
    println!(
        "voice answer: {} ms with 40 completions outstanding ({} of them had ended); \
         slowest completion {} ms; statuses {:?}",
        voice.as_millis(),
        finished_before_voice,
        slowest.as_millis(),
        {
            let mut s = statuses.clone();
            s.sort();
            s.dedup_by(|a, b| a == b);
            s
        }
    );
    assert!(
        voice < Duration::from_secs(10),
        "voice answer took {voice:?}"
    );
    assert!(
        finished_before_voice < 20,
        "the voice answer ended after {finished_before_voice} of 40 completions"
    );
    assert!(
        slowest < Duration::from_secs(20 + 10),
        "a completion waited {slowest:?}"
    );
}
