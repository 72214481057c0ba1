//! `POST /v1/chat/completions` answered by the embedded LLM (`--llm-model-dir`, the real
//! SmolLM2-135M-Instruct), driven by the official OpenAI Python SDK
//! (`tests/python/openai_chat_embedded.py`): plain and streamed answers, a length cut, a
//! forced tool call and its result, a too-long conversation, and what `/v1/usage` counted.
//! Needs `DUET_TEST_MODELS` (scripts/install-models).

use crate::common;

use common::external;
use duet_client::speech::models_dir;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_on_the_embedded_llm_through_the_official_python_client() {
    let _llm = common::exclusive().await; // the LLM takes a core: no real-time test beside it
    let dir = models_dir().join("smollm2-135m-instruct");
    let addr = common::server(&["--llm-model-dir", dir.to_str().unwrap()]).await;
    external::run_openai_python("openai_chat_embedded.py", addr).await;

    let r = duet_client::http::request(addr, "GET", "/v1/usage", &[], "")
        .await
        .expect("usage");
    let usage: serde_json::Value = serde_json::from_str(&r.body).expect("usage JSON");
    let llm = &usage["total"]["llm"];
    // plain, streamed, cut, tool call, after the tool; the too-long one is a 4xx.
    assert_eq!(llm["requests"], json!({"2xx": 5, "4xx": 1}), "{usage}");
    assert!(llm["prompt_tokens"].as_u64().unwrap() > 100, "{usage}");
    assert!(llm["completion_tokens"].as_u64().unwrap() > 5, "{usage}");
}
