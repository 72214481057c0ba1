//! Fuzzes the duplex extension's resume commands, `session.resume` and `session.event_ack`,
//! through `decode_duplex`. Two kinds of input, by the first byte:
//! - raw text: it must decode or give an error with a code, never panic, and a decoded
//!   resume or ack must decode the same again from its canonical JSON;
//! - a JSON envelope built from fuzzed fields (each absent, well-typed or of another JSON
//!   type, numbers also as odd literals, an unknown field, a fuzzed `event_id`): a
//!   well-formed command decodes to exactly its fields, anything else is an error with a
//!   code that carries the client's `event_id`, and the GA decoder never accepts either.
#![no_main]

use duet_protocol::duplex::ResumeRequest;
use duet_protocol::{codes, decode, decode_duplex, ClientEvent};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

/// A field of the envelope: absent, the right JSON type, or anything else (as JSON text).
enum Field<T> {
    Absent,
    Valid(T),
    Other(String),
}

/// JSON text of a string.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// JSON text that is not a string (for string fields).
fn not_a_string(u: &mut Unstructured) -> Result<String> {
    Ok(match u.int_in_range(0..=6u8)? {
        0 => "null".into(),
        1 => u.arbitrary::<bool>()?.to_string(),
        2 => u.arbitrary::<i64>()?.to_string(),
        3 => {
            let f = u.arbitrary::<f64>()?;
            format!("{:?}", if f.is_finite() { f } else { 0.5 })
        }
        4 => "[]".into(),
        5 => format!("[{}]", quoted(&u.arbitrary::<String>()?)),
        _ => format!("{{{}:1}}", quoted(&u.arbitrary::<String>()?)),
    })
}

/// Number literals at and past the edges of the integer types, as JSON text.
fn odd_number(u: &mut Unstructured) -> Result<String> {
    const LITERALS: &[&str] = &[
        "-1",
        "-0",
        "0.0",
        "1.5",
        "1e3",
        "1E-2",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "1e400",
        "\"7\"",
        "null",
        "true",
    ];
    Ok(match u.int_in_range(0..=2u8)? {
        0 => (*u.choose(LITERALS)?).into(),
        1 => format!("-{}", u.arbitrary::<u64>()?),
        _ => format!("{}.{}", u.arbitrary::<u32>()?, u.arbitrary::<u8>()?),
    })
}

fn string_field(u: &mut Unstructured) -> Result<Field<String>> {
    Ok(match u.int_in_range(0..=5u8)? {
        0 => Field::Absent,
        1 => Field::Other(not_a_string(u)?),
        _ => Field::Valid(u.arbitrary()?),
    })
}

/// An integer field of type `T`, or an odd literal (whose outcome only the decoder knows).
fn number_field<T>(u: &mut Unstructured) -> Result<Field<T>>
where
    T: for<'a> libfuzzer_sys::arbitrary::Arbitrary<'a>,
{
    Ok(match u.int_in_range(0..=5u8)? {
        0 => Field::Absent,
        1 => Field::Other(odd_number(u)?),
        2 => Field::Other(not_a_string(u)?),
        _ => Field::Valid(u.arbitrary()?),
    })
}

/// Adds `key` to the object's fields as JSON text, when present.
fn put<T>(fields: &mut Vec<(String, String)>, key: &str, f: &Field<T>, json: fn(&T) -> String) {
    match f {
        Field::Absent => {}
        Field::Valid(v) => fields.push((key.into(), json(v))),
        Field::Other(text) => fields.push((key.into(), text.clone())),
    }
}

fn object(fields: &[(String, String)]) -> String {
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{v}", quoted(k)))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// What the decoder must answer.
enum Want {
    /// This event.
    Event(ClientEvent),
    /// An error.
    Error,
    /// Either, for a number given as this literal: accepted only as that integer.
    Literal(String),
}

fn envelope(u: &mut Unstructured) -> Result<()> {
    let resume = u.arbitrary::<bool>()?;
    let event_id = string_field(u)?;
    let mut fields = Vec::new();
    fields.push((
        "type".to_string(),
        quoted(if resume {
            "session.resume"
        } else {
            "session.event_ack"
        }),
    ));
    // `null` is no event_id, like an absent one.
    let event_id = match event_id {
        Field::Other(t) if t == "null" => {
            fields.push(("event_id".into(), t));
            Field::Absent
        }
        f => {
            put(&mut fields, "event_id", &f, |s: &String| quoted(s));
            f
        }
    };
    let mut want = if resume {
        let session_id = string_field(u)?;
        let token = string_field(u)?;
        let seq = number_field::<u64>(u)?;
        put(&mut fields, "session_id", &session_id, |s: &String| {
            quoted(s)
        });
        put(&mut fields, "resume_token", &token, |s: &String| quoted(s));
        put(
            &mut fields,
            "last_received_server_event_seq",
            &seq,
            u64::to_string,
        );
        match (session_id, token, seq) {
            (Field::Valid(session_id), Field::Valid(resume_token), Field::Valid(s)) => {
                Want::Event(ClientEvent::SessionResume(ResumeRequest {
                    session_id,
                    resume_token,
                    last_received_server_event_seq: s,
                }))
            }
            (Field::Valid(session_id), Field::Valid(resume_token), Field::Absent) => {
                Want::Event(ClientEvent::SessionResume(ResumeRequest {
                    session_id,
                    resume_token,
                    last_received_server_event_seq: 0,
                }))
            }
            (Field::Valid(_), Field::Valid(_), Field::Other(literal)) => Want::Literal(literal),
            _ => Want::Error,
        }
    } else {
        let seq = number_field::<i64>(u)?;
        put(&mut fields, "server_event_seq", &seq, i64::to_string);
        match seq {
            Field::Valid(s) => Want::Event(ClientEvent::SessionEventAck {
                server_event_seq: s,
            }),
            Field::Other(literal) => Want::Literal(literal),
            Field::Absent => Want::Error,
        }
    };
    if u.ratio(1, 4)? {
        let name: String = u.arbitrary()?;
        // Not `event_id` (a null one is none) nor a field already there.
        if name != "event_id" && !fields.iter().any(|(k, _)| *k == name) {
            fields.push((name, not_a_string(u)?));
            want = Want::Error;
        }
    }
    // Fields in any order (`type` first or not).
    let n = fields.len();
    fields.rotate_left(usize::from(u.arbitrary::<u8>()?) % n);
    if matches!(event_id, Field::Other(_)) {
        want = Want::Error;
    }
    let text = object(&fields);
    let got = decode_duplex(&text);
    // Odd literals (`1e400`) may make the text no JSON at all: then nothing else is read.
    if serde_json::from_str::<serde_json::Value>(&text).is_err() {
        let e = got.expect_err("not JSON");
        assert_eq!(e.code.as_deref(), Some(codes::INVALID_JSON), "{text}");
        return Ok(());
    }
    match (&want, &got) {
        (Want::Event(w), Ok(env)) => {
            assert_eq!(format!("{w:?}"), format!("{:?}", env.event), "{text}");
            match &event_id {
                Field::Valid(id) => assert_eq!(env.event_id.as_ref(), Some(id), "{text}"),
                _ => assert!(env.event_id.is_none(), "{text}"),
            }
        }
        (Want::Event(_), Err(e)) => panic!("{text}: refused: {e:?}"),
        (Want::Error, Ok(env)) => panic!("{text}: accepted: {env:?}"),
        (Want::Literal(literal), Ok(env)) => {
            let seq = match env.event {
                ClientEvent::SessionResume(ref r) => i128::from(r.last_received_server_event_seq),
                ClientEvent::SessionEventAck { server_event_seq } => i128::from(server_event_seq),
                ref other => panic!("{text}: {other:?}"),
            };
            assert_eq!(literal.parse::<i128>().ok(), Some(seq), "{text}");
        }
        (_, Err(e)) => {
            assert!(e.code.is_some() && !e.message.is_empty(), "{text}: {e:?}");
            match &event_id {
                Field::Valid(id) => assert_eq!(e.event_id.as_ref(), Some(id), "{text}: {e:?}"),
                Field::Other(_) => assert_eq!(e.param.as_deref(), Some("event_id"), "{text}"),
                Field::Absent => assert!(e.event_id.is_none(), "{text}"),
            }
        }
    }
    if let Ok(env) = &got {
        check_decoded(&text, &env.event);
    }
    // The GA decoder knows neither command.
    let ga = decode(&text).expect_err("GA refuses the extension's commands");
    if !matches!(event_id, Field::Other(_)) {
        assert_eq!(
            ga.code.as_deref(),
            Some(codes::UNKNOWN_EVENT_TYPE),
            "{text}"
        );
    }
    Ok(())
}

/// A decoded resume or ack decodes the same from its canonical JSON.
fn check_decoded(text: &str, event: &ClientEvent) {
    let canonical = match event {
        ClientEvent::SessionResume(r) => format!(
            "{{\"type\":\"session.resume\",\"session_id\":{},\"resume_token\":{},\"last_received_server_event_seq\":{}}}",
            quoted(&r.session_id),
            quoted(&r.resume_token),
            r.last_received_server_event_seq
        ),
        ClientEvent::SessionEventAck { server_event_seq } => format!(
            "{{\"type\":\"session.event_ack\",\"server_event_seq\":{server_event_seq}}}"
        ),
        _ => return,
    };
    let again =
        decode_duplex(&canonical).unwrap_or_else(|e| panic!("{text} -> {canonical}: {e:?}"));
    assert_eq!(format!("{event:?}"), format!("{:?}", again.event), "{text}");
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let text = String::from_utf8_lossy(rest);
        match decode_duplex(&text) {
            Ok(env) => check_decoded(&text, &env.event),
            Err(e) => assert!(e.code.is_some() && !e.message.is_empty(), "{text}: {e:?}"),
        }
    } else {
        let _ = envelope(&mut Unstructured::new(rest));
    }
});
