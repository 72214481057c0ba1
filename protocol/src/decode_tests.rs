//! Wire tests: decoding of every client event (including what the official SDKs send), the
//! session updates they carry, and the error shapes for bad input.

use serde_json::{json, Value};

use super::session::*;
use super::*;
use crate::tests::session;

fn decode_ok(v: Value) -> Envelope {
    decode(&v.to_string()).unwrap_or_else(|e| panic!("{v} should decode: {e:?}"))
}

fn decode_err(text: &str) -> ErrorPayload {
    match decode(text) {
        Ok(e) => panic!("{text} should fail, got {e:?}"),
        Err(e) => e,
    }
}

#[test]
fn decodes_every_client_event() {
    let cases = [
        json!({"type":"session.update","session":{"type":"realtime","instructions":"hi"}}),
        json!({"type":"input_audio_buffer.append","audio":"AAAA"}),
        json!({"type":"input_audio_buffer.commit"}),
        json!({"type":"input_audio_buffer.clear"}),
        json!({"type":"output_audio_buffer.clear"}),
        json!({"type":"conversation.item.create","previous_item_id":"root","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}),
        json!({"type":"conversation.item.retrieve","item_id":"item_1"}),
        json!({"type":"conversation.item.truncate","item_id":"item_1","content_index":0,"audio_end_ms":300}),
        json!({"type":"conversation.item.delete","item_id":"item_1"}),
        json!({"type":"response.create","response":{"conversation":"none","output_modalities":["text"],"metadata":{"k":"v"},"input":[{"type":"item_reference","id":"item_1"}]}}),
        json!({"type":"response.create"}),
        json!({"type":"response.cancel"}),
        json!({"type":"response.cancel","response_id":"resp_1"}),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for (i, c) in cases.into_iter().enumerate() {
        let mut c = c;
        c["event_id"] = json!(format!("c{i}"));
        let env = decode_ok(c);
        assert_eq!(env.event_id.as_deref(), Some(format!("c{i}").as_str()));
        seen.insert(
            format!("{:?}", env.event)
                .split([' ', '{'])
                .next()
                .unwrap_or_default()
                .to_string(),
        );
    }
    assert_eq!(seen.len(), client::CLIENT_EVENT_TYPES.len(), "{seen:?}");
}

#[test]
fn decodes_what_agents_js_sends() {
    let env = decode_ok(json!({
        "type":"session.update",
        "session":{
            "type":"realtime","model":"gpt-realtime","instructions":"",
            "output_modalities":["audio"],"tracing":"auto",
            "audio":{
                "input":{"format":{"type":"audio/pcm","rate":24000},
                         "transcription":{"model":"gpt-4o-mini-transcribe"},
                         "turn_detection":{"type":"semantic_vad"},
                         "noise_reduction":null},
                "output":{"format":{"type":"audio/pcm","rate":24000},"speed":1,"voice":"alloy"}
            },
            "tools":[],"tool_choice":"auto"
        }
    }));
    let ClientEvent::SessionUpdate { session: patch } = env.event else {
        panic!("not an update")
    };
    let mut s = session();
    s.apply(*patch).expect("applies");
    assert_eq!(s.tracing, Some(json!("auto")));
    assert!(matches!(
        s.audio.input.turn_detection,
        Some(TurnDetection::SemanticVad {
            interrupt_response: true,
            create_response: true,
            ..
        })
    ));
    assert_eq!(
        s.audio.input.transcription,
        Some(json!({"model":"gpt-4o-mini-transcribe"}))
    );
    assert_eq!(s.audio.input.noise_reduction, None);
    assert_eq!(s.instructions, "");
}

#[test]
fn session_update_merges_and_clears() {
    let mut s = session();
    let patch: SessionPatch = serde_json::from_value(json!({"audio":{"input":{"turn_detection":{"type":"server_vad","silence_duration_ms":200}}}})).unwrap();
    s.apply(patch).unwrap();
    let Some(TurnDetection::ServerVad {
        silence_duration_ms,
        threshold,
        ..
    }) = &s.audio.input.turn_detection
    else {
        panic!()
    };
    assert_eq!((*silence_duration_ms, *threshold), (200, 0.5));
    let patch: SessionPatch = serde_json::from_value(
        json!({"audio":{"input":{"turn_detection":null,"format":{"type":"audio/pcmu"}}}}),
    )
    .unwrap();
    s.apply(patch).unwrap();
    assert_eq!(s.audio.input.turn_detection, None);
    assert_eq!(s.audio.input.format, AudioFormat::Pcmu);
    assert_eq!(
        s.audio.output.format,
        AudioFormat::default(),
        "output untouched"
    );
}

#[test]
fn invalid_session_update_changes_nothing() {
    let mut s = session();
    let before = s.clone();
    let patch: SessionPatch =
        serde_json::from_value(json!({"instructions":"x","audio":{"output":{"speed":9.0}}}))
            .unwrap();
    let err = s.apply(patch).unwrap_err();
    assert_eq!(err.param.as_deref(), Some("session.audio.output.speed"));
    assert_eq!(s, before);
    let patch: SessionPatch = serde_json::from_value(
        json!({"audio":{"input":{"format":{"type":"audio/pcm","rate":16000}}}}),
    )
    .unwrap();
    assert_eq!(
        s.apply(patch).unwrap_err().code.as_deref(),
        Some(codes::INVALID_VALUE)
    );
    let patch: SessionPatch =
        serde_json::from_value(json!({"output_modalities":["audio","text"]})).unwrap();
    assert!(s.apply(patch).is_err());
}

#[test]
fn invalid_json_is_an_error_event() {
    let e = decode_err("{not json");
    assert_eq!(e.code.as_deref(), Some(codes::INVALID_JSON));
    assert_eq!(e.kind, ErrorType::InvalidRequestError);
    assert_eq!(
        decode_err("[1,2]").code.as_deref(),
        Some(codes::INVALID_JSON)
    );
}

#[test]
fn unknown_type_carries_client_event_id() {
    let e = decode_err(r#"{"type":"bogus.event","event_id":"evt_42"}"#);
    assert_eq!(e.code.as_deref(), Some(codes::UNKNOWN_EVENT_TYPE));
    assert_eq!(e.event_id.as_deref(), Some("evt_42"));
    assert_eq!(e.param.as_deref(), Some("type"));
    assert_eq!(
        decode_err(r#"{"event_id":"x"}"#).code.as_deref(),
        Some(codes::MISSING_REQUIRED_PARAMETER)
    );
}

#[test]
fn wrong_field_types_name_the_param() {
    let e = decode_err(
        r#"{"type":"conversation.item.truncate","event_id":"e1","item_id":"i","content_index":0,"audio_end_ms":"ten"}"#,
    );
    assert_eq!(e.code.as_deref(), Some(codes::INVALID_VALUE));
    assert_eq!(e.param.as_deref(), Some("audio_end_ms"));
    assert_eq!(e.event_id.as_deref(), Some("e1"));
    let e = decode_err(
        r#"{"type":"session.update","session":{"audio":{"input":{"turn_detection":{"type":"server_vad","threshold":"high"}}}}}"#,
    );
    assert_eq!(
        e.param.as_deref(),
        Some("session.audio.input.turn_detection")
    );
    let e = decode_err(r#"{"type":"conversation.item.retrieve"}"#);
    assert_eq!(e.code.as_deref(), Some(codes::MISSING_REQUIRED_PARAMETER));
    assert_eq!(e.param.as_deref(), Some("item_id"));
}

#[test]
fn beta_session_fields_are_unknown_parameters() {
    let e = decode_err(r#"{"type":"session.update","session":{"voice":"alloy"}}"#);
    assert_eq!(e.code.as_deref(), Some(codes::UNKNOWN_PARAMETER));
    assert_eq!(e.param.as_deref(), Some("session.voice"));
}

#[test]
fn oversize_event_is_rejected_before_parsing() {
    let big = format!(
        r#"{{"type":"input_audio_buffer.append","audio":"{}"}}"#,
        "A".repeat(MAX_EVENT_BYTES)
    );
    assert_eq!(
        decode_err(&big).code.as_deref(),
        Some(codes::EVENT_TOO_LARGE)
    );
}

#[test]
fn beta_content_names_are_accepted() {
    let env = decode_ok(
        json!({"type":"conversation.item.create","item":{"type":"message","role":"assistant","content":[{"type":"text","text":"hi"}]}}),
    );
    let ClientEvent::ConversationItemCreate { item, .. } = env.event else {
        panic!()
    };
    assert!(
        matches!(&*item, Item::Message { content, .. } if content == &vec![Content::OutputText { text: "hi".into() }])
    );
}

/// Deterministic mutation smoke test of the decoder (the fuzz target in `fuzz/` explores
/// further): thousands of corrupted events, none may panic, all errors carry a code.
#[test]
fn decode_survives_mutated_events() {
    let seeds = [
        r#"{"type":"session.update","event_id":"e","session":{"audio":{"input":{"turn_detection":{"type":"server_vad","threshold":0.4}}}}}"#,
        r#"{"type":"conversation.item.create","previous_item_id":"root","item":{"type":"message","role":"user","content":[{"type":"input_audio","audio":"AAAA"}]}}"#,
        r#"{"type":"response.create","response":{"conversation":"none","input":[{"type":"item_reference","id":"x"}],"max_output_tokens":5}}"#,
        r#"{"type":"conversation.item.truncate","item_id":"i","content_index":0,"audio_end_ms":10}"#,
    ];
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut rand = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    for _ in 0..20_000 {
        let mut bytes = seeds[rand(seeds.len())].as_bytes().to_vec();
        for _ in 0..=rand(4) {
            let at = rand(bytes.len());
            match rand(4) {
                0 => bytes[at] = b"{}[]\":,0a-9.enul \\"[rand(17)],
                1 => {
                    let end = (at + rand(8)).min(bytes.len());
                    bytes.drain(at..end);
                }
                2 => bytes.insert(at, rand(256) as u8),
                _ => bytes.truncate(at),
            }
            if bytes.is_empty() {
                break;
            }
        }
        if let Err(e) = decode(&String::from_utf8_lossy(&bytes)) {
            assert!(e.code.is_some() && !e.message.is_empty());
        }
    }
}

#[test]
fn duplex_commands_decode_only_when_opted_in() {
    use crate::duplex::ResumeRequest;
    let cases = [
        (
            json!({"type":"session.resume","session_id":"sess_a","resume_token":"t","last_received_server_event_seq":7}),
            ClientEvent::SessionResume(ResumeRequest {
                session_id: "sess_a".into(),
                resume_token: "t".into(),
                last_received_server_event_seq: 7,
            }),
        ),
        (
            json!({"type":"session.event_ack","server_event_seq":-3}),
            ClientEvent::SessionEventAck {
                server_event_seq: -3,
            },
        ),
        (
            json!({"type":"session.heartbeat"}),
            ClientEvent::SessionHeartbeat,
        ),
        (
            json!({"type":"session.close"}),
            ClientEvent::SessionClose { reason: None },
        ),
        (
            json!({"type":"barge_in","event_id":"b1"}),
            ClientEvent::BargeIn,
        ),
        (
            json!({"type":"playback.ack","played_ms":250.5,"item_id":"item_a","truncate":true}),
            ClientEvent::PlaybackAck {
                played_ms: 250.5,
                response_id: None,
                item_id: Some("item_a".into()),
                truncate: true,
            },
        ),
    ];
    for (v, want) in cases {
        let got = crate::decode_duplex(&v.to_string()).expect("decodes");
        assert_eq!(format!("{:?}", got.event), format!("{want:?}"), "{v}");
        let ga = decode(&v.to_string()).expect_err("GA refuses");
        assert_eq!(ga.code.as_deref(), Some(codes::UNKNOWN_EVENT_TYPE), "{v}");
    }
    let bad = [
        json!({"type":"session.resume","resume_token":"t"}),
        json!({"type":"session.heartbeat","x":1}),
        json!({"type":"playback.ack","played_ms":-1}),
        json!({"type":"playback.ack"}),
        json!({"type":"session.event_ack","server_event_seq":"1"}),
    ];
    for v in bad {
        let e = crate::decode_duplex(&v.to_string()).expect_err("refused");
        assert_ne!(
            e.code.as_deref(),
            Some(codes::UNKNOWN_EVENT_TYPE),
            "{v}: {e:?}"
        );
    }
}

#[test]
fn interruption_defaults_by_type_carries_over_and_is_checked() {
    use crate::session::{Interruption, InterruptionMode};
    let mut s = session();
    let apply = |s: &mut SessionConfig, td: serde_json::Value| {
        let patch: SessionPatch =
            serde_json::from_value(json!({"audio":{"input":{"turn_detection":td}}})).unwrap();
        s.apply(patch)
    };
    let get = |s: &SessionConfig| {
        s.audio
            .input
            .turn_detection
            .as_ref()
            .unwrap()
            .interruption()
    };
    // Server VAD: immediate, and omitted from the session object (OpenAI's shape).
    assert_eq!(get(&s).mode, InterruptionMode::Immediate);
    let wire = serde_json::to_value(&s).unwrap();
    assert!(wire["audio"]["input"]["turn_detection"]
        .get("interruption")
        .is_none());
    // Semantic VAD: adaptive, shown.
    apply(&mut s, json!({"type":"semantic_vad"})).unwrap();
    assert_eq!(get(&s), Interruption::default_for(true));
    let wire = serde_json::to_value(&s).unwrap();
    assert_eq!(
        wire["audio"]["input"]["turn_detection"]["interruption"],
        json!({"mode":"adaptive","min_duration_ms":600})
    );
    // Fields carry over within a type; a new type starts from its default.
    apply(
        &mut s,
        json!({"type":"semantic_vad","interruption":{"min_duration_ms":900}}),
    )
    .unwrap();
    apply(&mut s, json!({"type":"semantic_vad","eagerness":"high"})).unwrap();
    assert_eq!(get(&s).min_duration_ms, 900);
    apply(&mut s, json!({"type":"server_vad"})).unwrap();
    assert_eq!(get(&s), Interruption::default_for(false));
    apply(
        &mut s,
        json!({"type":"server_vad","interruption":{"mode":"adaptive"}}),
    )
    .unwrap();
    let wire = serde_json::to_value(&s).unwrap();
    assert_eq!(
        wire["audio"]["input"]["turn_detection"]["interruption"]["mode"],
        "adaptive"
    );
    // Checked: a range and the known fields.
    let before = s.clone();
    let e = apply(
        &mut s,
        json!({"type":"server_vad","interruption":{"min_duration_ms":50}}),
    )
    .unwrap_err();
    assert_eq!(
        e.param.as_deref(),
        Some("session.audio.input.turn_detection.interruption.min_duration_ms")
    );
    assert_eq!(s, before);
    let bad: Result<SessionPatch, _> = serde_json::from_value(
        json!({"audio":{"input":{"turn_detection":{"type":"semantic_vad","interruption":{"mode":"sometimes"}}}}}),
    );
    assert!(bad.is_err());
}

#[test]
fn noise_reduction_is_typed_and_checked() {
    let mut s = session();
    let patch = |v: Value| -> SessionPatch {
        serde_json::from_value(json!({"audio":{"input":{"noise_reduction": v}}})).unwrap()
    };
    s.apply(patch(json!({"type": "near_field"}))).unwrap();
    assert_eq!(
        s.audio.input.noise_reduction,
        Some(NoiseReduction {
            kind: NoiseReductionType::NearField
        })
    );
    let shown = serde_json::to_value(&s.audio.input).unwrap();
    assert_eq!(shown["noise_reduction"], json!({"type": "near_field"}));
    s.apply(patch(json!({"type": "far_field"}))).unwrap();
    assert_eq!(
        s.audio.input.noise_reduction.map(|n| n.kind),
        Some(NoiseReductionType::FarField)
    );
    // A bad kind or field is refused, naming the field, and changes nothing.
    for bad in [
        json!({"type": "studio"}),
        json!({}),
        json!({"type": "near_field", "x": 1}),
        json!("near_field"),
    ] {
        let e = s.apply(patch(bad.clone())).unwrap_err();
        assert_eq!(e.code.as_deref(), Some(codes::INVALID_VALUE), "{bad}");
        assert_eq!(
            e.param.as_deref(),
            Some("session.audio.input.noise_reduction.type")
        );
        assert_eq!(
            s.audio.input.noise_reduction.map(|n| n.kind),
            Some(NoiseReductionType::FarField)
        );
    }
    s.apply(patch(Value::Null)).unwrap();
    assert_eq!(s.audio.input.noise_reduction, None);
    let shown = serde_json::to_value(&s.audio.input).unwrap();
    assert!(shown.get("noise_reduction").is_none(), "off is omitted");
}
