//! The chat-completions wire: a snapshot of every shape Duet writes, and the lenient reading
//! of what upstream servers send.

use super::*;
use serde_json::json;

fn chunk(delta: ChunkDelta, finish: Option<&str>) -> ChatCompletionChunk {
    ChatCompletionChunk {
        id: "chatcmpl-1".into(),
        object: "chat.completion.chunk".into(),
        created: 1_700_000_000,
        model: "smollm2".into(),
        choices: vec![ChunkChoice {
            index: 0,
            delta,
            logprobs: None,
            finish_reason: finish.map(String::from),
        }],
        ..ChatCompletionChunk::default()
    }
}

#[test]
fn snapshot_request() {
    let call = ChatToolCall {
        id: "call_1".into(),
        kind: "function".into(),
        function: FunctionCall {
            name: "get_time".into(),
            arguments: "{}".into(),
        },
    };
    let request = ChatCompletionRequest {
        model: Some("smollm2".into()),
        messages: vec![
            ChatMessage::text(ChatRole::System, "Be brief."),
            ChatMessage::text(ChatRole::User, "What time is it?"),
            ChatMessage {
                content: None,
                tool_calls: vec![call],
                ..ChatMessage::text(ChatRole::Assistant, "")
            },
            ChatMessage {
                tool_call_id: Some("call_1".into()),
                ..ChatMessage::text(ChatRole::Tool, "10:00")
            },
        ],
        stream: true,
        max_tokens: Some(64),
        tools: vec![ChatTool {
            kind: "function".into(),
            function: FunctionDef {
                name: "get_time".into(),
                description: "The time now".into(),
                parameters: Some(json!({"type": "object", "properties": {}})),
            },
        }],
        tool_choice: Some(ChatToolChoice::Named(NamedToolChoice {
            kind: "function".into(),
            function: FunctionName {
                name: "get_time".into(),
            },
        })),
        ..ChatCompletionRequest::default()
    };
    insta::assert_json_snapshot!("chat.request", request);
}

#[test]
fn snapshot_chunks_completion_and_error() {
    let head = ChunkDelta {
        role: Some(ChatRole::Assistant),
        content: Some(String::new()),
        ..ChunkDelta::default()
    };
    insta::assert_json_snapshot!("chat.chunk.head", chunk(head, None));
    let words = ChunkDelta {
        content: Some("It is ten.".into()),
        ..ChunkDelta::default()
    };
    insta::assert_json_snapshot!("chat.chunk.content", chunk(words, None));
    let call = ChunkDelta {
        tool_calls: vec![ToolCallChunk {
            index: Some(0),
            id: Some("call_1".into()),
            kind: Some("function".into()),
            function: Some(FunctionChunk {
                name: Some("get_time".into()),
                arguments: Some("{}".into()),
            }),
        }],
        ..ChunkDelta::default()
    };
    insta::assert_json_snapshot!("chat.chunk.tool_call", chunk(call, None));
    insta::assert_json_snapshot!(
        "chat.chunk.finish",
        chunk(ChunkDelta::default(), Some("stop"))
    );
    let mut usage = chunk(ChunkDelta::default(), None);
    usage.choices.clear();
    usage.usage = Some(ChatUsage::new(12, 3, 8));
    insta::assert_json_snapshot!("chat.chunk.usage", usage);
    let completion = ChatCompletion {
        id: "chatcmpl-1".into(),
        object: "chat.completion".into(),
        created: 1_700_000_000,
        model: "smollm2".into(),
        choices: vec![CompletionChoice {
            index: 0,
            message: ChatMessage::text(ChatRole::Assistant, "It is ten."),
            logprobs: None,
            finish_reason: Some("stop".into()),
        }],
        usage: Some(ChatUsage::new(12, 3, 0)),
    };
    insta::assert_json_snapshot!("chat.completion", completion);
    let error = ChatErrorEvent {
        error: ChatError {
            message: Some("the embedded LLM stopped".into()),
            kind: Some("server_error".into()),
            code: Some("llm_unavailable".into()),
        },
    };
    insta::assert_json_snapshot!("chat.error", error);
}

#[test]
fn what_upstream_servers_send_is_read_leniently() {
    // Missing ids, `null` tool calls and content, an object as arguments, extra fields.
    let c: ChatCompletionChunk = serde_json::from_value(json!({
        "choices": [{"delta": {"content": null, "tool_calls": null}, "finish_reason": null,
                     "extra": 1}],
        "system_fingerprint": "x"
    }))
    .unwrap();
    assert_eq!(c.choices[0].delta, ChunkDelta::default());
    let c: ChatCompletionChunk = serde_json::from_value(json!({
        "choices": [{"delta": {"tool_calls": [{"function": {"arguments": "{\"a\""}}]}}]
    }))
    .unwrap();
    let call = &c.choices[0].delta.tool_calls[0];
    assert_eq!(call.index, None);
    assert_eq!(
        call.function.as_ref().unwrap().arguments.as_deref(),
        Some("{\"a\"")
    );
    let e: ChatCompletionChunk =
        serde_json::from_value(json!({"error": {"message": "overloaded", "code": 529}})).unwrap();
    assert_eq!(e.error.unwrap().message.as_deref(), Some("overloaded"));
    let m: ChatMessage = serde_json::from_value(json!({
        "role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f",
            "arguments": {"city": "Paris"}}}]
    }))
    .unwrap();
    assert_eq!(m.content, None);
    assert_eq!(m.tool_calls[0].kind, "function");
    assert_eq!(m.tool_calls[0].function.arguments, r#"{"city":"Paris"}"#);
    let parts: ChatMessage = serde_json::from_value(json!({
        "role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url",
            "image_url": {"url": "x"}}, {"type": "text", "text": "b"}]
    }))
    .unwrap();
    assert_eq!(parts.content_text(), "ab");
    let r: ChatCompletionRequest = serde_json::from_value(json!({
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "n": 1,
        "tool_choice": "required", "stream_options": {"include_usage": true}
    }))
    .unwrap();
    assert_eq!(
        r.tool_choice,
        Some(ChatToolChoice::Mode(ToolChoiceMode::Required))
    );
    assert!(!r.stream && r.stream_options.unwrap().include_usage);
    for bad in [
        json!({"messages": [{"role": "robot", "content": "hi"}]}),
        json!({"messages": "hi"}),
        json!({"messages": [], "tool_choice": "sometimes"}),
    ] {
        assert!(
            serde_json::from_value::<ChatCompletionRequest>(bad.clone()).is_err(),
            "{bad}"
        );
    }
}
