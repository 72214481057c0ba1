//! The tool loop with the official OpenAI Python SDK (`tests/python/openai_tools.py`) against
//! `--model cascade` on a scripted OpenAI-compatible LLM: the script checks the client side
//! (the GA event order, every event valid for the SDK's own models); this test checks what
//! the upstream received (instructions, the tool, then the call and its result).

use crate::common;

use common::external;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_loop_through_the_official_python_client() {
    let llm = ScriptedLlm::start(vec![
        Reply::call("call_py", "get_time", r#"{"tz":"UTC"}"#, 4),
        Reply::text(&["It is ", "ten ", "o'clock."]),
    ])
    .await;
    let addr = common::server(&["--model", "cascade", "--llm-url", &llm.url]).await;
    external::run_openai_python("openai_tools.py", addr).await;
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert_eq!(
        requests[0]["messages"][0],
        json!({"role":"system","content":"You tell the time."})
    );
    assert_eq!(
        requests[0]["messages"][1],
        json!({"role":"user","content":"What time is it in UTC?"})
    );
    assert_eq!(requests[0]["tools"][0]["function"]["name"], "get_time");
    assert_eq!(
        requests[0]["tools"][0]["function"]["parameters"]["required"],
        json!(["tz"])
    );
    let last = requests[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last,
        json!({"role":"tool","tool_call_id":"call_py","content":"{\"time\": \"10:00\"}"})
    );
}
