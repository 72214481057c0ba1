//! The Realtime tool loop on the sans-IO core: a model that calls a tool gets the GA event
//! sequence for its call, the call and a `function_call_output` reach the next request, and
//! a model that cannot call tools refuses them.

use super::*;
use duet_models::{ContextItem, OutputModality, ToolCallDelta, ToolChoice, TurnInput};

/// A turn-based model that calls `get_time` (arguments in two pieces) when it has tools and
/// the conversation ends with a user turn, and answers "It is <output>" in speech (three
/// frames, a word each) when it ends with a tool result. It records its requests.
pub(super) struct ToolScript {
    info: ModelInfo,
    requests: Requests,
    script: Vec<Option<VecDeque<StepOutput>>>,
}

impl ToolScript {
    pub(super) fn new(requests: Requests) -> Self {
        Self {
            info: ModelInfo {
                name: "tool-script".into(),
                frame_samples: FRAME,
                max_slots: 1,
                autonomous: false,
                tools: true,
                reads_text: false,
            },
            requests,
            script: Vec::new(),
        }
    }

    fn call() -> VecDeque<StepOutput> {
        let piece = |name: &str, arguments: &str| StepOutput {
            tool_call: Some(ToolCallDelta {
                call_id: "call_7".into(),
                name: name.into(),
                arguments: arguments.into(),
            }),
            ..StepOutput::default()
        };
        VecDeque::from([
            piece("get_time", r#"{"tz":"#),
            piece("", r#""UTC"}"#),
            StepOutput {
                end_of_turn: true,
                ..StepOutput::default()
            },
        ])
    }

    fn speak(output: &str, modality: OutputModality) -> VecDeque<StepOutput> {
        let words = ["It ".to_string(), "is ".to_string(), output.to_string()];
        let mut steps: VecDeque<StepOutput> = words
            .into_iter()
            .map(|text| StepOutput {
                audio: match modality {
                    OutputModality::Audio => vec![LEVEL; FRAME],
                    OutputModality::Text => Vec::new(),
                },
                text,
                ..StepOutput::default()
            })
            .collect();
        if let Some(last) = steps.back_mut() {
            last.end_of_turn = true;
        }
        steps
    }
}

impl DuplexModel for ToolScript {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn warmup(&mut self) -> Result<(), ModelError> {
        Ok(())
    }

    fn open_slot(&mut self) -> Result<SlotId, ModelError> {
        self.script.push(None);
        Ok(self.script.len() - 1)
    }

    fn close_slot(&mut self, slot: SlotId) {
        self.script[slot] = None;
    }

    fn request(&mut self, slot: SlotId, request: Request) -> Result<(), ModelError> {
        self.requests.lock().unwrap().push(request.clone());
        self.script[slot] = match request {
            Request::Respond {
                modality,
                input,
                tools,
                tool_choice,
                ..
            } => Some(match input.last() {
                Some(ContextItem::ToolResult { output, .. }) => Self::speak(output, modality),
                _ if !tools.is_empty() && tool_choice != ToolChoice::None => Self::call(),
                _ => Self::speak("nothing", modality),
            }),
            Request::Cancel => None,
        };
        Ok(())
    }

    fn step(&mut self, batch: &[StepInput<'_>], out: &mut Vec<Result<StepOutput, ModelError>>) {
        for input in batch {
            let next = self.script[input.slot]
                .as_mut()
                .and_then(VecDeque::pop_front);
            out.push(Ok(next.unwrap_or_default()));
        }
    }
}

const TOOLS: &str = r#"[{"type":"function","name":"get_time","description":"The time now","parameters":{"type":"object","properties":{"tz":{"type":"string"}}}}]"#;

fn tool_session() -> Harness {
    let tools: Value = serde_json::from_str(TOOLS).unwrap();
    let mut h = harness(Setup {
        tool_model: true,
        session: json!({"type":"realtime","instructions":"You tell the time.",
            "audio":{"input":{"turn_detection":null}},"tools":tools}),
        ..Setup::default()
    });
    h.drain(Duration::from_millis(50));
    h
}

fn ask(h: &mut Harness, text: &str) {
    h.send(
        json!({"type":"conversation.item.create","item":{"type":"message","role":"user",
        "content":[{"type":"input_text","text":text}]}}),
    );
    h.until("conversation.item.done");
}

#[test]
fn a_tool_call_goes_out_in_the_ga_sequence_and_its_result_continues_the_loop() {
    let mut h = tool_session();
    ask(&mut h, "What time is it?");
    h.send(json!({"type":"response.create"}));
    let events = h.until("response.done");
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.output_item.added",
            "conversation.item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
        ]
    );
    let added = &events[1];
    assert_eq!(added["output_index"], 0);
    assert_eq!(added["item"]["type"], "function_call");
    assert_eq!(added["item"]["status"], "in_progress");
    assert_eq!(added["item"]["call_id"], "call_7");
    assert_eq!(added["item"]["name"], "get_time");
    let item_id = added["item"]["id"].as_str().unwrap().to_string();
    assert_eq!(events[3]["delta"], r#"{"tz":"#);
    assert_eq!(events[3]["item_id"], item_id.as_str());
    let done = &events[5];
    assert_eq!(
        (done["call_id"].as_str(), done["name"].as_str()),
        (Some("call_7"), Some("get_time"))
    );
    assert_eq!(done["arguments"], r#"{"tz":"UTC"}"#);
    assert_eq!(events[6]["item"]["status"], "completed");
    assert_eq!(events[7]["item"]["arguments"], r#"{"tz":"UTC"}"#);
    let response = &last(&events, "response.done")["response"];
    assert_eq!(response["status"], "completed");
    assert_eq!(
        response["output"].as_array().unwrap().len(),
        1,
        "{response}"
    );
    assert_eq!(response["output"][0]["id"], item_id.as_str());
    assert_eq!(response["output"][0]["type"], "function_call");

    // What the model was asked: the instructions, the tools, the conversation.
    let Request::Respond {
        instructions,
        input,
        tools,
        tool_choice,
        ..
    } = h.requests()[0].clone()
    else {
        panic!("a respond request");
    };
    assert_eq!(instructions, "You tell the time.");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "get_time");
    assert!(tools[0].parameters.contains("\"tz\""));
    assert_eq!(tool_choice, ToolChoice::Auto);
    assert_eq!(
        input,
        vec![ContextItem::User(TurnInput::Text(
            "What time is it?".into()
        ))]
    );

    // The client runs the tool and sends its output; the next response speaks from it.
    h.send(
        json!({"type":"conversation.item.create","item":{"type":"function_call_output",
        "call_id":"call_7","output":"10:00 UTC"}}),
    );
    h.until("conversation.item.done");
    h.send(json!({"type":"response.create"}));
    let events = h.until("response.done");
    let response = &last(&events, "response.done")["response"];
    assert_eq!(response["output"][0]["type"], "message");
    assert_eq!(
        response["output"][0]["content"][0]["transcript"],
        "It is 10:00 UTC"
    );
    assert_eq!(
        last(&events, "response.output_item.added")["output_index"],
        0
    );
    let Request::Respond { input, .. } = h.requests()[1].clone() else {
        panic!("a respond request");
    };
    assert_eq!(
        input[1..],
        [
            ContextItem::ToolCall(duet_models::ToolCall {
                call_id: "call_7".into(),
                name: "get_time".into(),
                arguments: r#"{"tz":"UTC"}"#.into(),
            }),
            ContextItem::ToolResult {
                call_id: "call_7".into(),
                output: "10:00 UTC".into(),
            },
        ]
    );
}

#[test]
fn per_response_tools_instructions_and_input_override_the_session() {
    let mut h = tool_session();
    ask(&mut h, "Hello");
    // tool_choice none: no call, and the message opens with the response as always.
    h.send(
        json!({"type":"response.create","response":{"tool_choice":"none",
        "instructions":"Just talk."}}),
    );
    let events = h.until("response.done");
    assert_eq!(count(&events, "response.function_call_arguments.delta"), 0);
    assert_eq!(types(&events)[1], "response.output_item.added");
    let Request::Respond {
        instructions,
        tool_choice,
        ..
    } = h.requests()[0].clone()
    else {
        panic!();
    };
    assert_eq!(
        (instructions.as_str(), tool_choice),
        ("Just talk.", ToolChoice::None)
    );
    // An out-of-band response on its own input calls the tool without touching the
    // conversation.
    h.send(
        json!({"type":"response.create","response":{"conversation":"none",
        "input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"time?"}]}],
        "tool_choice":{"type":"function","name":"get_time"}}}),
    );
    let events = h.until("response.done");
    assert_eq!(
        count(&events, "conversation.item.added"),
        0,
        "{:?}",
        types(&events)
    );
    assert_eq!(count(&events, "response.function_call_arguments.done"), 1);
    let Request::Respond {
        input, tool_choice, ..
    } = h.requests()[1].clone()
    else {
        panic!();
    };
    assert_eq!(
        input,
        vec![ContextItem::User(TurnInput::Text("time?".into()))]
    );
    assert_eq!(tool_choice, ToolChoice::Function("get_time".into()));
    // A named function that is not a tool is refused.
    h.send(
        json!({"type":"response.create","event_id":"evt_bad","response":{
        "tool_choice":{"type":"function","name":"nope"}}}),
    );
    let err = last(&h.until("error"), "error").clone();
    assert_eq!(err["error"]["param"], "response.tool_choice.name", "{err}");
    assert_eq!(err["error"]["event_id"], "evt_bad");
}

#[test]
fn a_cancelled_call_ends_incomplete() {
    let mut h = tool_session();
    ask(&mut h, "What time is it?");
    h.send(json!({"type":"response.create"}));
    h.until("response.function_call_arguments.delta");
    h.send(json!({"type":"response.cancel"}));
    let events = h.until("response.done");
    assert_eq!(
        last(&events, "response.function_call_arguments.done")["arguments"],
        r#"{"tz":"#
    );
    assert_eq!(
        last(&events, "response.output_item.done")["item"]["status"],
        "incomplete"
    );
    let response = &last(&events, "response.done")["response"];
    assert_eq!(response["status"], "cancelled");
    assert_eq!(response["output"][0]["status"], "incomplete");
}

#[test]
fn a_model_that_cannot_call_tools_refuses_them() {
    let mut h = harness(Setup {
        echo: true,
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":null}}}),
        ..Setup::default()
    });
    let tools: Value = serde_json::from_str(TOOLS).unwrap();
    h.send(
        json!({"type":"session.update","event_id":"evt_tools","session":{"type":"realtime",
        "instructions":"x","tools":tools}}),
    );
    let events = h.until("error");
    let err = last(&events, "error");
    assert_eq!(err["error"]["code"], "tools_unsupported", "{err}");
    assert_eq!(err["error"]["param"], "session.tools");
    assert_eq!(err["error"]["event_id"], "evt_tools");
    assert_eq!(
        count(&h.drain(Duration::from_millis(20)), "session.updated"),
        0
    );
    // The update is refused whole: the instructions did not change either.
    assert_ne!(h.session.cfg.instructions, "x");
    h.send(json!({"type":"response.create","response":{"tools":tools}}));
    let err = last(&h.until("error"), "error").clone();
    assert_eq!(err["error"]["param"], "response.tools");
    // No tools is fine.
    h.send(json!({"type":"session.update","session":{"type":"realtime","tools":[],"tool_choice":"auto"}}));
    h.until("session.updated");
}
