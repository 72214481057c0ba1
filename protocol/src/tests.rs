//! Wire tests: a snapshot of every server event and of the session objects (decoding is in
//! `decode_tests.rs`).

use serde_json::{json, Value};

use super::items::*;
use super::response::*;
use super::server::*;
use super::session::*;
use super::*;

pub(crate) fn session() -> SessionConfig {
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
