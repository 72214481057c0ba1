//! A Qwen2 and a Qwen3 GGUF (tiny, generated here with random weights: no real Qwen GGUF
//! ships in a registry package) served by `--llm-model-dir`: `/v1/models` lists the LLM,
//! `/v1/chat/completions` answers with usage, a forced tool comes back as an OpenAI
//! `tool_calls` entry (the Hermes `<tool_call>` the template opens, parsed), and a realtime
//! session on the cascade answers in text. The logits themselves are checked against
//! candle's own Qwen2/Qwen3 in `models/src/llama/tests.rs`.

use crate::common;
use common::*;
use duet_models::llama::random::{write_random_gguf, RandomShape};
use duet_models::llama::Arch;
use serde_json::{json, Value};

async fn post(addr: std::net::SocketAddr, body: Value) -> Value {
    let r = duet_client::http::request(
        addr,
        "POST",
        "/v1/chat/completions",
        &[("content-type", "application/json")],
        &body.to_string(),
    )
    .await
    .expect("answered");
    assert_eq!(r.status, 200, "{}", r.body);
    serde_json::from_str(&r.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qwen2_and_qwen3_ggufs_answer_chat_tools_and_a_session() {
    for arch in [Arch::Qwen2, Arch::Qwen3] {
        let dir = std::env::temp_dir().join(format!("duet-tiny-{}-{}", arch.name(), unique()));
        std::fs::create_dir_all(&dir).unwrap();
        write_random_gguf(&dir, &RandomShape::tiny_of(arch), 7).unwrap();
        let llm = dir.display().to_string();
        let addr = server(&["--model", "cascade", "--llm-model-dir", &llm]).await;

        let models = duet_client::http::request(addr, "GET", "/v1/models", &[], "")
            .await
            .unwrap();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            models.body.contains(&format!("\"id\":\"{name}\"")),
            "{arch:?}: {}",
            models.body
        );

        let v = post(
            addr,
            json!({"messages":[{"role":"user","content":"hello"}], "max_tokens": 5}),
        )
        .await;
        assert_eq!(
            v["usage"]["completion_tokens"].as_u64().map(|n| n <= 5),
            Some(true),
            "{v}"
        );
        assert!(v["usage"]["prompt_tokens"].as_u64().unwrap_or(0) > 5, "{v}");

        let v = post(
            addr,
            json!({"messages":[{"role":"user","content":"What time is it?"}], "max_tokens": 24,
                "tools":[{"type":"function","function":{"name":"get_time","description":"now",
                    "parameters":{"type":"object","properties":{}}}}],
                "tool_choice":{"type":"function","function":{"name":"get_time"}}}),
        )
        .await;
        let choice = &v["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls", "{arch:?}: {v}");
        assert_eq!(
            choice["message"]["tool_calls"][0]["function"]["name"], "get_time",
            "{arch:?}: {v}"
        );

        let mut c = Client::connect_url(&format!("ws://{addr}/v1/realtime?model=cascade"), &[])
            .await
            .expect("connects");
        c.send(json!({"type":"session.update","session":{"type":"realtime",
            "output_modalities":["text"], "audio":{"input":{"turn_detection":null}}}}))
            .await;
        c.until("session.updated").await;
        c.send(
            json!({"type":"conversation.item.create","item":{"type":"message",
            "role":"user","content":[{"type":"input_text","text":"Say hi."}]}}),
        )
        .await;
        c.until("conversation.item.done").await;
        c.send(json!({"type":"response.create","response":{"max_output_tokens":4}}))
            .await;
        let done = c.until("response.done").await;
        let status = done["response"]["status"].as_str().unwrap_or_default();
        assert!(
            ["completed", "incomplete"].contains(&status),
            "{arch:?}: {done}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
