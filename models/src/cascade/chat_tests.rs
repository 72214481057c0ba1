use super::*;
use crate::{ToolCall, TurnInput};
use std::sync::Arc;

#[test]
fn the_conversation_becomes_chat_messages() {
    let items = vec![
        ContextItem::System("Answer in English.".into()),
        ContextItem::User(TurnInput::Transcribed {
            audio: Arc::from(vec![0.0; 10]),
            transcript: "what time is it".into(),
        }),
        ContextItem::User(TurnInput::Audio(Arc::from(vec![0.0; 10]))),
        ContextItem::Assistant("Let me look.".into()),
        ContextItem::ToolCall(ToolCall {
            call_id: "call_1".into(),
            name: "get_time".into(),
            arguments: "{}".into(),
        }),
        ContextItem::ToolCall(ToolCall {
            call_id: "call_2".into(),
            name: "get_date".into(),
            arguments: "{}".into(),
        }),
        ContextItem::ToolResult {
            call_id: "call_1".into(),
            output: "10:00".into(),
        },
    ];
    let m = serde_json::to_value(messages("You tell the time.", &items)).unwrap();
    assert_eq!(
        m,
        json!([
            {"role":"system","content":"You tell the time."},
            {"role":"system","content":"Answer in English."},
            {"role":"user","content":"what time is it"},
            {"role":"assistant","content":"Let me look.","tool_calls":[
                {"id":"call_1","type":"function","function":{"name":"get_time","arguments":"{}"}},
                {"id":"call_2","type":"function","function":{"name":"get_date","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"call_1","content":"10:00"}
        ])
    );
    // A call with nothing said before it opens its own assistant message.
    let m = serde_json::to_value(messages("", &items[4..5])).unwrap();
    assert_eq!(m[0]["content"], Value::Null);
    assert_eq!(m[0]["tool_calls"][0]["id"], "call_1");
}

#[test]
fn the_body_carries_tools_and_tool_choice_only_with_tools() {
    let tools = vec![Tool {
        name: "get_time".into(),
        description: "Now".into(),
        parameters: r#"{"type":"object","properties":{}}"#.into(),
    }];
    let r = ChatRequest::new("hi", &[], tools, ToolChoice::Function("get_time".into()));
    let b = r.body("smol", true);
    assert_eq!(b["model"], "smol");
    assert_eq!(b["stream"], true);
    assert_eq!(b["tools"][0]["function"]["parameters"]["type"], "object");
    assert_eq!(
        b["tool_choice"],
        json!({"type":"function","function":{"name":"get_time"}})
    );
    let plain = ChatRequest::new("hi", &[], vec![], ToolChoice::Auto).body("smol", false);
    assert!(plain.get("tools").is_none() && plain.get("tool_choice").is_none());
}

#[test]
fn streamed_chunks_become_text_and_call_pieces() {
    let mut r = ChunkReader::new();
    let mut out = Vec::new();
    for data in [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_time","arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"tz\":"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"name":"get_date","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ] {
        r.read(data, &mut out);
    }
    assert!(r.is_done());
    assert_eq!(out[0], LlmEvent::Text("Hel".into()));
    assert_eq!(out[1], LlmEvent::Text("lo".into()));
    let call = |e: &LlmEvent| match e {
        LlmEvent::ToolCall(d) => d.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (call(&out[2]).call_id.as_str(), call(&out[2]).name.as_str()),
        ("call_a", "get_time")
    );
    assert_eq!(
        call(&out[3]).call_id,
        "call_a",
        "later pieces keep the call's id"
    );
    assert_eq!(call(&out[3]).arguments, r#"{"tz":"#);
    let second = call(&out[4]);
    assert!(second.call_id.starts_with("call_") && second.call_id != "call_a");
    assert_eq!(out[5], LlmEvent::Done);
    assert_eq!(out.len(), 6, "nothing after the end: {out:?}");
}

#[test]
fn broken_chunks_and_stream_errors_fail_the_answer() {
    for data in ["{not json", r#"{"error":{"message":"overloaded"}}"#] {
        let mut r = ChunkReader::new();
        let mut out = Vec::new();
        r.read(data, &mut out);
        r.read(r#"{"choices":[{"delta":{"content":"late"}}]}"#, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        let LlmEvent::Failed(f) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(f.code, "llm_error");
    }
}
