//! `@openai/agents-realtime` (Node) with a function tool and a handoff, against `--model
//! cascade` with the Piper voice and a scripted OpenAI-compatible LLM
//! (`tests/sdk-js/tools_ws.mjs`): the SDK runs the tool the LLM calls and its result reaches
//! the LLM as a `tool` message; the handoff tool switches the SDK to the second agent, whose
//! instructions reach the LLM. Needs `DUET_TEST_MODELS` (the voice) and the Node packages.

use crate::common;

use common::external;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_realtime_runs_a_tool_and_a_handoff() {
    let llm = ScriptedLlm::start(vec![
        Reply::call("call_t", "get_time", r#"{"tz":"UTC"}"#, 2),
        Reply::text(&["It is ten ", "o'clock."]),
        Reply::call("call_h", "transfer_to_Spanish", "{}", 1),
        Reply::text(&["Hola."]),
    ])
    .await;
    let addr = common::cascade_server(&llm.url, false).await;
    external::run_agents_node("tools_ws.mjs", addr).await;

    let r = llm.requests();
    assert_eq!(r.len(), 4, "{r:#?}");
    let messages = |i: usize| r[i]["messages"].as_array().cloned().unwrap_or_default();
    let tool_names = |i: usize| -> Vec<String> {
        r[i]["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(messages(0)[0]["content"]
        .as_str()
        .unwrap()
        .contains("You tell the time."));
    assert_eq!(tool_names(0), ["get_time", "transfer_to_Spanish"]);
    // The tool's result, as the SDK sent it, reached the LLM.
    let result: &Value = &messages(1).last().cloned().unwrap();
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], "call_t");
    assert!(
        result["content"].as_str().unwrap().contains("10:00"),
        "{result}"
    );
    // After the handoff: the Spanish agent's instructions and tools.
    assert!(
        messages(3)[0]["content"]
            .as_str()
            .unwrap()
            .contains("Habla solo español."),
        "{:?}",
        messages(3)[0]
    );
    assert!(
        !tool_names(3).contains(&"get_time".to_string()),
        "{:?}",
        tool_names(3)
    );
}
