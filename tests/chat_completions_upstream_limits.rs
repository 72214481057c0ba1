//! `/v1/chat/completions` proxied to `--llm-url` is bounded like the realtime path (the
//! review's observations): a stream whose upstream stalls after one chunk ends with an SSE
//! `error` event (`llm_unavailable`) after `--llm-timeout-secs` (it stayed open for as long
//! as the upstream did); an upstream error that echoes the upstream key is answered as an
//! OpenAI-shaped `llm_error` with the upstream's status and the key redacted (the body was
//! passed on verbatim); and unread 15 MiB answers are charged to the memory budget, so
//! past it a request gets `503 server_memory_exhausted` (forty took the server to 625 MiB
//! under `--memory-budget-mib 256`).

use crate::common;
use common::*;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

fn chunk(content: &str) -> String {
    json!({"id":"c","object":"chat.completion.chunk","created":1,"model":"smol",
        "choices":[{"index":0,"delta":{"content":content},"finish_reason":null}]})
    .to_string()
}

fn body(stream: bool) -> String {
    json!({"model":"x","stream":stream,"messages":[{"role":"user","content":"hi"}]}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_stream_ends_with_an_error_event() {
    let llm = ScriptedLlm::start(vec![Reply::Stream {
        data: vec![chunk("Hello"), chunk(" never")],
        gap: Duration::from_secs(40),
    }])
    .await;
    let addr = server(&["--llm-url", &llm.url, "--llm-timeout-secs", "2"]).await;
    let started = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(15),
        duet_client::http::request(addr, "POST", "/v1/chat/completions", &[], &body(true)),
    )
    .await
    .expect("the stream ended")
    .expect("answered");
    let took = started.elapsed();
    println!("stalled stream ended after {} ms", took.as_millis());
    assert_eq!(r.status, 200);
    assert!(r.body.contains("Hello"), "{}", r.body);
    assert!(
        r.body.contains(r#""code":"llm_unavailable""#) && r.body.contains("\"error\""),
        "{}",
        r.body
    );
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(8),
        "{took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_error_is_shaped_and_never_echoes_the_key() {
    let echo = r#"{"error":{"message":"invalid key, you sent: Authorization: Bearer sk-upstream-secret","type":"auth"},"debug":{"authorization":"Bearer sk-upstream-secret"}}"#;
    let llm = ScriptedLlm::start(vec![
        Reply::Status(401, echo.into()),
        Reply::Status(500, "<html>Bearer sk-upstream-secret</html>".into()),
    ])
    .await;
    let addr = server(&["--llm-url", &llm.url, "--llm-api-key", "sk-upstream-secret"]).await;
    for expected in [401, 500] {
        let r = duet_client::http::request(addr, "POST", "/v1/chat/completions", &[], &body(false))
            .await
            .expect("answered");
        assert_eq!(r.status, expected, "{}", r.body);
        assert!(
            !r.body.contains("sk-upstream-secret") && !r.head.contains("sk-upstream-secret"),
            "the key leaked: {} {}",
            r.head,
            r.body
        );
        let v: Value = serde_json::from_str(&r.body).expect("JSON");
        assert_eq!(v["error"]["code"], "llm_error", "{v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("HTTP {expected}")), "{message}");
        assert!(v.get("debug").is_none(), "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_answers_are_charged_to_the_memory_budget() {
    let big = json!({"id":"c","object":"chat.completion","created":1,"model":"smol",
        "choices":[{"index":0,"message":{"role":"assistant","content":"x".repeat(15 << 20)},
        "finish_reason":"stop"}]})
    .to_string();
    let llm = ScriptedLlm::start(vec![]).await;
    *llm.default_reply.lock().unwrap() = Some(Reply::Status(200, big));
    let addr = server(&["--llm-url", &llm.url, "--memory-budget-mib", "64"]).await;
    // Clients that post and never read: their answers stay held by the server.
    let mut held = Vec::new();
    let mut refused = None;
    for i in 0..10 {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let b = body(false);
        let req = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{b}",
            b.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        held.push(s);
        tokio::time::sleep(Duration::from_millis(400)).await;
        let r = duet_client::http::request(addr, "GET", "/metrics", &[], "")
            .await
            .unwrap();
        let used = r
            .body
            .lines()
            .find_map(|l| l.strip_prefix("duet_memory_used_bytes "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        println!(
            "{} unread answers: {:.0} MiB charged",
            i + 1,
            used / 1048576.0
        );
        let b = body(false);
        let probe = duet_client::http::request(addr, "POST", "/v1/chat/completions", &[], &b);
        // A request with a short timeout: refused at once past the budget.
        if let Ok(Ok(r)) = tokio::time::timeout(Duration::from_millis(1500), probe).await {
            if r.status == 503 {
                refused = Some((i + 1, r.body));
                break;
            }
        }
    }
    let (n, body) = refused.expect("a request past the budget was refused");
    assert!(body.contains("server_memory_exhausted"), "{body}");
    assert!(
        n <= 4,
        "refused only after {n} unread 15 MiB answers under 64 MiB"
    );
}
