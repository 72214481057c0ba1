//! Wire tests: a snapshot of every server event, decoding of every client event (including
//! what the official SDKs send), and the error shapes for bad input.

use serde_json::{json, Value};

use super::items::*;
use super::response::*;
use super::server::*;
use super::session::*;
use super::*;

fn session() -> SessionConfig {
    SessionConfig::new("sess_test".into(), "echo".into(), 1_700_003_600)
}

fn at() -> ContentRef {
    ContentRef {
        response_id: "resp_test".into(),
        item_id: "item_asst".into(),
        output_index: 0,
        content_index: 0,
    }
}

fn user_item() -> Item {
    Item::Message {
        id: Some("item_user".into()),
        object: Some("realtime.item".into()),
        status: Some(ItemStatus::Completed),
        role: Role::User,
        content: vec![Content::InputAudio {
            audio: None,
            transcript: None,
        }],
    }
}

fn assistant_item(status: ItemStatus, transcript: &str) -> Item {
    Item::Message {
        id: Some("item_asst".into()),
        object: Some("realtime.item".into()),
        status: Some(status),
        role: Role::Assistant,
        content: vec![Content::OutputAudio {
            audio: None,
            transcript: Some(transcript.into()),
        }],
    }
}

fn response(status: ResponseStatus, done: bool) -> Response {
    let s = session();
    Response {
        id: "resp_test".into(),
        object: "realtime.response",
        status,
        status_details: done.then(|| StatusDetails {
            kind: status,
            reason: (status == ResponseStatus::Cancelled).then(|| "turn_detected".into()),
            error: None,
        }),
        output: if done {
            vec![assistant_item(ItemStatus::Incomplete, "echo of")]
        } else {
            vec![]
        },
        conversation_id: Some("conv_test".into()),
        output_modalities: vec![Modality::Audio],
        max_output_tokens: json!("inf"),
        audio: ResponseAudio {
            output: ResponseAudioOutput {
                format: s.audio.output.format,
                voice: s.audio.output.voice,
            },
        },
        metadata: None,
        usage: done.then(|| Usage::new(0, 70, 3, 70)),
    }
}

/// One instance of every server event body, named by its type.
fn every_server_event() -> Vec<ServerEventBody> {
    use ServerEventBody as B;
    let mut manual = session();
    manual.audio.input.turn_detection = None;
    vec![
        B::Error {
            error: ErrorPayload::invalid(codes::UNKNOWN_EVENT_TYPE, "unknown event type \"x\"")
                .with_param("type")
                .with_event_id(Some("client_1".into())),
        },
        B::SessionCreated {
            session: Box::new(session()),
            resume_token: None,
            attachment_generation: None,
        },
        B::SessionUpdated {
            session: Box::new(manual),
        },
        B::ConversationItemAdded {
            previous_item_id: None,
            item: Box::new(user_item()),
        },
        B::ConversationItemDone {
            previous_item_id: Some("item_prev".into()),
            item: Box::new(user_item()),
        },
        B::ConversationItemRetrieved {
            item: Box::new(Item::Message {
                id: Some("item_user".into()),
                object: Some("realtime.item".into()),
                status: Some(ItemStatus::Completed),
                role: Role::User,
                content: vec![Content::InputAudio {
                    audio: Some("AAAA".into()),
                    transcript: None,
                }],
            }),
        },
        B::ConversationItemTruncated {
            item_id: "item_asst".into(),
            content_index: 0,
            audio_end_ms: 740,
        },
        B::ConversationItemDeleted {
            item_id: "item_user".into(),
        },
        B::InputAudioTranscriptionDelta {
            item_id: "item_user".into(),
            content_index: 0,
            delta: "hel".into(),
            logprobs: None,
        },
        B::InputAudioTranscriptionCompleted {
            item_id: "item_user".into(),
            content_index: 0,
            transcript: "hello".into(),
            usage: TranscriptionUsage::Duration { seconds: 1.4 },
            logprobs: Some(vec![LogProb {
                token: "hello".into(),
                logprob: -0.25,
                bytes: b"hello".to_vec(),
            }]),
        },
        B::InputAudioBufferSpeechProbability {
            audio_start_ms: 96,
            audio_end_ms: 192,
            probability: 0.75,
            detector: "silero",
        },
        B::InputAudioTranscriptionFailed {
            item_id: "item_user".into(),
            content_index: 0,
            error: TranscriptionError {
                kind: "server_error".into(),
                code: codes::TRANSCRIPTION_UNAVAILABLE.into(),
                message: "no ASR".into(),
            },
        },
        B::InputAudioBufferCommitted {
            previous_item_id: None,
            item_id: "item_user".into(),
        },
        B::InputAudioBufferCleared {},
        B::InputAudioBufferDtmfEventReceived {
            event: "#".into(),
            received_at: 1_764_000_000,
        },
        B::InputAudioBufferSpeechStarted {
            audio_start_ms: 200,
            item_id: "item_user".into(),
        },
        B::InputAudioBufferSpeechStopped {
            audio_end_ms: 1900,
            item_id: "item_user".into(),
        },
        B::InputAudioBufferTimeoutTriggered {
            audio_start_ms: 1900,
            audio_end_ms: 7900,
            item_id: "item_user".into(),
        },
        B::OutputAudioBufferStarted {
            response_id: "resp_test".into(),
        },
        B::OutputAudioBufferStopped {
            response_id: "resp_test".into(),
        },
        B::OutputAudioBufferCleared {
            response_id: "resp_test".into(),
        },
        B::ResponseCreated {
            response: Box::new(response(ResponseStatus::InProgress, false)),
        },
        B::ResponseDone {
            response: Box::new(response(ResponseStatus::Cancelled, true)),
        },
        B::ResponseOutputItemAdded {
            response_id: "resp_test".into(),
            output_index: 0,
            item: Box::new(Item::Message {
                id: Some("item_asst".into()),
                object: Some("realtime.item".into()),
                status: Some(ItemStatus::InProgress),
                role: Role::Assistant,
                content: vec![],
            }),
        },
        B::ResponseOutputItemDone {
            response_id: "resp_test".into(),
            output_index: 0,
            item: Box::new(assistant_item(ItemStatus::Completed, "echo of 1.4 s")),
        },
        B::ResponseContentPartAdded {
            at: at(),
            part: Part::Audio {
                transcript: String::new(),
            },
        },
        B::ResponseContentPartDone {
            at: at(),
            part: Part::Text {
                text: "You said: hi".into(),
            },
        },
        B::ResponseOutputAudioDelta {
            at: at(),
            delta: "AAAAAA==".into(),
        },
        B::ResponseOutputAudioDone { at: at() },
        B::ResponseOutputAudioTranscriptDelta {
            at: at(),
            delta: "echo".into(),
        },
        B::ResponseOutputAudioTranscriptDone {
            at: at(),
            transcript: "echo of 1.4 s".into(),
        },
        B::ResponseOutputTextDelta {
            at: at(),
            delta: "You".into(),
        },
        B::ResponseOutputTextDone {
            at: at(),
            text: "You said: hi".into(),
        },
        B::ResponseFunctionCallArgumentsDelta {
            response_id: "resp_test".into(),
            item_id: "item_fc".into(),
            output_index: 0,
            call_id: "call_1".into(),
            delta: "{\"a\"".into(),
        },
        B::ResponseFunctionCallArgumentsDone {
            response_id: "resp_test".into(),
            item_id: "item_fc".into(),
            output_index: 0,
            call_id: "call_1".into(),
            name: "f".into(),
            arguments: "{\"a\":1}".into(),
        },
        B::RateLimitsUpdated {
            rate_limits: vec![RateLimit {
                name: "requests".into(),
                limit: 100,
                remaining: 99,
                reset_seconds: 1.0,
            }],
        },
        B::ResponseSpeak {
            at: at(),
            metadata: SpeakMetadata {
                session_id: "sess_test".into(),
                epoch: 2,
                model_speak: true,
            },
        },
        B::model_listen("sess_test", 2, Some("resp_test".into())),
        B::SessionResumed {
            session_id: "sess_test".into(),
            session: Box::new(duplex_session()),
            attachment_generation: 2,
            resume_token: "tok_rotated".into(),
        },
        B::SessionReplaced {
            session_id: "sess_test".into(),
            attachment_generation: 1,
        },
        B::SessionResyncRequired {
            session_id: "sess_test".into(),
            reason: "journal_overflow",
        },
        B::SessionExpired {
            session_id: "sess_test".into(),
            reason: "disconnect_grace_expired",
        },
        B::SessionExpiring {
            session_id: "sess_test".into(),
            expires_at: 1_700_003_600,
            seconds_left: 60,
        },
        B::SessionHeartbeatAck {
            session_id: "sess_test".into(),
        },
        B::SessionClosed {
            session_id: "sess_test".into(),
            reason: "client_close".into(),
        },
        B::PlaybackAcknowledged {
            event: crate::server::PlaybackAckResult {
                kind: "playback.acknowledged",
                session_id: "sess_test".into(),
                epoch: 1,
                item_id: "item_test".into(),
                response_id: Some("resp_test".into()),
                played_ms: 1200,
                committed_ms: 1200,
                truncate: true,
            },
        },
        B::TurnScored {
            item_id: "item_test".into(),
            audio_end_ms: 2340,
            probability: Some(0.93),
            decision: "end",
            end_after_ms: 300,
            unfinished_words: false,
        },
        B::TurnOverlap {
            outcome: "backchannel",
            duration_ms: 380,
            transcript: Some("Mm-hmm.".into()),
        },
    ]
}

/// The session of an opted-in (duplex extension) session, with its capabilities.
fn duplex_session() -> SessionConfig {
    let mut s = session();
    s.capabilities = Some(crate::duplex::Capabilities::new(true, 80));
    s
}

#[test]
fn snapshot_duplex_session_created() {
    let json = render(ServerEventBody::SessionCreated {
        session: Box::new(duplex_session()),
        resume_token: Some("tok_first".into()),
        attachment_generation: Some(1),
    });
    insta::assert_json_snapshot!("session.created.duplex", json);
}

#[test]
fn snapshot_transcription_session_created() {
    let mut s = session();
    s.apply(
        serde_json::from_value(json!({
            "type": "transcription",
            "audio": {"input": {"transcription": {"model": "whisper-1"}}},
            "include": [INCLUDE_LOGPROBS],
        }))
        .expect("patch"),
    )
    .expect("valid");
    assert!(s.is_transcription() && s.includes(INCLUDE_LOGPROBS));
    let json = render(ServerEventBody::SessionCreated {
        session: Box::new(s),
        resume_token: None,
        attachment_generation: None,
    });
    assert!(json["session"].get("model").is_none());
    assert!(json["session"].get("instructions").is_none());
    insta::assert_json_snapshot!("session.created.transcription", json);
}

#[test]
fn an_unknown_session_type_is_refused_whole() {
    let mut s = session();
    let before = s.clone();
    let err = s
        .apply(serde_json::from_value(json!({"type": "translation", "instructions": "x"})).unwrap())
        .expect_err("refused");
    assert_eq!(err.param.as_deref(), Some("session.type"));
    assert_eq!(s, before);
}

fn render(body: ServerEventBody) -> Value {
    let ev = ServerEvent {
        event_id: "event_test".into(),
        body,
    };
    serde_json::from_str(&ev.to_json()).expect("valid JSON")
}

#[test]
fn snapshot_every_server_event() {
    let bodies = every_server_event();
    assert_eq!(bodies.len(), 48, "one instance of every server event");
    for body in bodies {
        let kind = body.kind();
        let json = render(body);
        assert_eq!(json["type"], kind);
        assert_eq!(json["event_id"], "event_test");
        insta::assert_json_snapshot!(kind, json);
    }
}

#[test]
fn no_null_in_optional_non_nullable_fields() {
    for body in every_server_event() {
        let kind = body.kind();
        let json = render(body);
        assert_eq!(
            super::strict::forbidden_nulls(&json),
            Vec::<String>::new(),
            "{kind}"
        );
    }
}

#[test]
fn response_listen_without_a_response_omits_its_ids() {
    let json = render(ServerEventBody::model_listen("sess_test", 0, None));
    assert_eq!(
        json,
        json!({
            "type": "response.listen",
            "event_id": "event_test",
            "session_id": "sess_test",
            "epoch": 0,
            "response": {
                "object": "realtime.response",
                "status": "listening",
                "metadata": {"reason": "model_listen"}
            }
        })
    );
    assert!(super::strict::forbidden_nulls(&json).is_empty());
}

#[test]
fn session_created_reports_vad_flags_explicitly() {
    let json = render(ServerEventBody::SessionCreated {
        session: Box::new(session()),
        resume_token: None,
        attachment_generation: None,
    });
    let td = &json["session"]["audio"]["input"]["turn_detection"];
    assert_eq!(td["interrupt_response"], true);
    assert_eq!(td["create_response"], true);
    assert_eq!(
        json["session"]["audio"]["input"]["format"],
        json!({"type":"audio/pcm","rate":24000})
    );
}

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
