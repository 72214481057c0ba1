//! `POST /v1/chat/completions` (and `/v1/responses`) proxied to `--llm-url`, driven by the
//! official OpenAI Python SDK (`tests/python/openai_chat.py`): plain and streamed, with
//! tools, upstream errors and timeouts; this test checks what the upstream received and what
//! `/v1/usage` counted. The server runs the echo model: the proxy needs only `--llm-url`.

use crate::common;

use common::external;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_through_the_official_python_client() {
    let completion = json!({"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"smol",
        "choices":[{"index":0,"message":{"role":"assistant","content":"Hello there."},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}});
    let chunk = |content: &str| {
        json!({"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"smol",
            "choices":[{"index":0,"delta":{"content":content},"finish_reason":null}]})
        .to_string()
    };
    let usage =
        json!({"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"smol",
        "choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}})
        .to_string();
    let llm = ScriptedLlm::start(vec![
        Reply::Status(200, completion.to_string()),
        Reply::Stream {
            data: vec![chunk("Hello "), chunk("streamed."), usage, "[DONE]".into()],
            gap: Duration::from_millis(5),
        },
        Reply::Status(
            429,
            r#"{"error":{"message":"slow down","type":"rate_limit"}}"#.into(),
        ),
        Reply::Hang,
        Reply::Status(404, r#"{"error":{"message":"no such route"}}"#.into()),
    ])
    .await;
    let addr = common::server(&[
        "--llm-url",
        &llm.url,
        "--llm-model",
        "smol",
        "--llm-api-key",
        "sk-upstream",
        "--llm-timeout-secs",
        "1",
    ])
    .await;
    external::run_openai_python("openai_chat.py", addr).await;

    let requests = llm.requests();
    assert_eq!(requests[0]["model"], "smol", "the model is the server's");
    assert_eq!(requests[0]["tools"][0]["function"]["name"], "get_time");
    assert_eq!(requests[1]["stream"], true);
    assert_eq!(requests[4]["input"], "hello", "/v1/responses proxied as is");
    assert!(llm
        .auth
        .lock()
        .unwrap()
        .iter()
        .all(|a| a.as_deref() == Some("Bearer sk-upstream")));

    let r = duet_client::http::request(addr, "GET", "/v1/usage", &[], "")
        .await
        .expect("usage");
    let (status, body) = (r.status, r.body);
    assert_eq!(status, 200);
    let usage: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {status} {body:?}"));
    let llm_usage = &usage["total"]["llm"];
    assert_eq!(
        llm_usage["requests"],
        json!({"2xx": 2, "429": 1, "4xx": 1, "unavailable": 1}),
        "{usage}"
    );
    assert_eq!(llm_usage["prompt_tokens"], 18);
    assert_eq!(llm_usage["completion_tokens"], 6);
}

#[tokio::test]
async fn without_an_llm_the_endpoints_say_so_and_client_secrets_may_not_use_them() {
    let addr = common::server(&["--api-key", "k"]).await;
    let post = |key: &'static str| async move {
        let auth = format!("Bearer {key}");
        let headers = [
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
        ];
        duet_client::http::request(
            addr,
            "POST",
            "/v1/chat/completions",
            &headers,
            r#"{"messages":[]}"#,
        )
        .await
        .expect("post")
    };
    let r = post("k").await;
    assert_eq!(r.status, 501, "{}", r.body);
    assert!(r.body.contains("llm_not_configured"), "{}", r.body);
    assert_eq!(post("wrong").await.status, 401);
}
