//! The Realtime tool loop end to end on `--model cascade` over WebSocket, against a scripted
//! OpenAI-compatible LLM: the upstream gets the instructions, the tools and (next turn) the
//! tool result; the client gets the GA function-call sequence, then the answer; upstream
//! failures end the response `failed` with a clear error and the session goes on.

use crate::common;
use common::*;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use serde_json::{json, Value};
use std::time::Duration;

const TOOL: &str = r#"{"type":"function","name":"get_time","description":"The time now","parameters":{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"]}}"#;

async fn cascade(llm: &ScriptedLlm, extra: &[&str]) -> Client {
    let mut args = vec![
        "--model",
        "cascade",
        "--llm-url",
        &llm.url,
        "--llm-model",
        "smol",
    ];
    args.extend_from_slice(extra);
    let addr = server(&args).await;
    let mut c = Client::connect_url(&format!("ws://{addr}/v1/realtime?model=cascade"), &[])
        .await
        .expect("connects");
    let tool: Value = serde_json::from_str(TOOL).unwrap();
    c.send(json!({"type":"session.update","session":{"type":"realtime",
        "instructions":"You tell the time.","output_modalities":["text"],
        "audio":{"input":{"turn_detection":null}},"tools":[tool]}}))
        .await;
    c.until("session.updated").await;
    c
}

async fn ask(c: &mut Client, text: &str) {
    c.send(
        json!({"type":"conversation.item.create","item":{"type":"message","role":"user",
        "content":[{"type":"input_text","text":text}]}}),
    )
    .await;
    c.until("conversation.item.done").await;
}

fn types_from<'a>(events: &'a [Value], from: &str) -> Vec<&'a str> {
    let start = events
        .iter()
        .position(|e| e["type"] == from)
        .expect("start");
    events[start..]
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?"))
        .collect()
}

#[tokio::test]
async fn a_tool_call_round_trip_reaches_the_upstream_and_the_client() {
    let llm = ScriptedLlm::start(vec![
        Reply::call("call_42", "get_time", r#"{"tz":"UTC"}"#, 3),
        Reply::text(&["It is ", "ten ", "o'clock."]),
    ])
    .await;
    let mut c = cascade(&llm, &["--llm-api-key", "sk-upstream"]).await;
    ask(&mut c, "What time is it?").await;
    c.send(json!({"type":"response.create"})).await;
    let done = c.until("response.done").await;
    // Pieces that arrive within one 20 ms step go out as one delta: the deltas are one run.
    let mut seen = types_from(&c.log, "response.created");
    seen.dedup();
    assert_eq!(
        seen,
        [
            "response.created",
            "response.output_item.added",
            "conversation.item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
        ]
    );
    assert_eq!(done["response"]["status"], "completed", "{done}");
    let deltas: String = c
        .log
        .iter()
        .filter(|e| e["type"] == "response.function_call_arguments.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, r#"{"tz":"UTC"}"#);
    let call = &done["response"]["output"][0];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["call_id"], "call_42");
    assert_eq!(call["arguments"], r#"{"tz":"UTC"}"#);

    // What the upstream got: the model name, the instructions, the question, the tool.
    let first = &llm.requests()[0];
    assert_eq!(first["model"], "smol");
    assert_eq!(first["stream"], true);
    assert_eq!(
        first["messages"][0],
        json!({"role":"system","content":"You tell the time."})
    );
    assert_eq!(
        first["messages"][1],
        json!({"role":"user","content":"What time is it?"})
    );
    assert_eq!(first["tools"][0]["function"]["name"], "get_time");
    assert_eq!(
        first["tools"][0]["function"]["parameters"]["required"][0],
        "tz"
    );
    assert_eq!(first["tool_choice"], "auto");
    assert_eq!(
        llm.auth.lock().unwrap()[0].as_deref(),
        Some("Bearer sk-upstream")
    );

    // The client runs the tool; its result and the call reach the upstream next turn.
    c.send(
        json!({"type":"conversation.item.create","item":{"type":"function_call_output",
        "call_id":"call_42","output":"{\"time\":\"10:00\"}"}}),
    )
    .await;
    c.until("conversation.item.done").await;
    c.send(json!({"type":"response.create"})).await;
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "completed", "{done}");
    assert_eq!(
        done["response"]["output"][0]["content"][0]["text"],
        "It is ten o'clock."
    );
    let second = &llm.requests()[1];
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(
        messages[2],
        json!({"role":"assistant","content":null,"tool_calls":[{"id":"call_42","type":"function",
            "function":{"name":"get_time","arguments":"{\"tz\":\"UTC\"}"}}]})
    );
    assert_eq!(
        messages[3],
        json!({"role":"tool","tool_call_id":"call_42","content":"{\"time\":\"10:00\"}"})
    );
    // Both answers on one pooled connection.
    assert_eq!(*llm.connections.lock().unwrap(), 1);
    // The upstream key never reaches the client.
    assert!(c.log.iter().all(|e| !e.to_string().contains("sk-upstream")));
}

#[tokio::test]
async fn upstream_failures_fail_the_response_and_the_session_goes_on() {
    let llm = ScriptedLlm::start(vec![
        Reply::Status(429, r#"{"error":{"message":"rate limited"}}"#.into()),
        Reply::Hang,
        Reply::text(&["fine"]),
    ])
    .await;
    let mut c = cascade(&llm, &["--llm-timeout-secs", "1"]).await;
    ask(&mut c, "hello").await;
    for (code, says) in [
        ("llm_error", "HTTP 429: rate limited"),
        ("llm_unavailable", "within 1 s"),
    ] {
        c.send(json!({"type":"response.create"})).await;
        let done = c.until("response.done").await;
        assert_eq!(done["response"]["status"], "failed", "{done}");
        assert_eq!(
            done["response"]["status_details"]["error"]["code"], code,
            "{done}"
        );
        let err = c.until("error").await;
        assert_eq!(err["error"]["code"], code);
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
    c.send(json!({"type":"response.create"})).await;
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "completed", "{done}");

    // An upstream nobody listens on.
    let gone = ScriptedLlm {
        url: "http://127.0.0.1:9/v1".into(),
        ..llm.clone()
    };
    let mut c = cascade(&gone, &[]).await;
    ask(&mut c, "hello").await;
    c.send(json!({"type":"response.create"})).await;
    let done = c.until("response.done").await;
    assert_eq!(
        done["response"]["status_details"]["error"]["code"], "llm_unavailable",
        "{done}"
    );
}

#[tokio::test]
async fn a_cancel_closes_the_upstream_stream() {
    let slow = Reply::Stream {
        data: (0..400)
            .map(|i| {
                json!({"choices":[{"index":0,"delta":{"content":format!("w{i} ")}}]}).to_string()
            })
            .collect(),
        gap: Duration::from_millis(20),
    };
    let llm = ScriptedLlm::start(vec![slow, Reply::text(&["again"])]).await;
    let mut c = cascade(&llm, &[]).await;
    ask(&mut c, "talk").await;
    c.send(json!({"type":"response.create"})).await;
    c.until("response.output_text.delta").await;
    c.send(json!({"type":"response.cancel"})).await;
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["status"], "cancelled");
    // The next answer opens a new connection: the cancelled one was closed, not pooled.
    c.send(json!({"type":"response.create"})).await;
    let done = c.until("response.done").await;
    assert_eq!(done["response"]["output"][0]["content"][0]["text"], "again");
    assert_eq!(*llm.connections.lock().unwrap(), 2);
}

#[tokio::test]
async fn audio_answers_are_refused_until_the_cascade_can_speak() {
    let llm = ScriptedLlm::start(vec![]).await;
    let mut c = cascade(&llm, &[]).await;
    ask(&mut c, "hello").await;
    c.send(json!({"type":"response.create","response":{"output_modalities":["audio"]}}))
        .await;
    let done = c.until("response.done").await;
    assert_eq!(
        done["response"]["status_details"]["error"]["code"], "tts_unavailable",
        "{done}"
    );
    assert!(llm.requests().is_empty());
}
