use super::*;
use crate::protocol::ItemStatus;

fn text_item(id: &str, text: &str) -> StoredItem {
    let mut item = Item::Message {
        id: Some(id.into()),
        object: None,
        status: None,
        role: Role::User,
        content: vec![Content::InputText { text: text.into() }],
    };
    item.stamp(|| unreachable!(), ItemStatus::Completed);
    StoredItem::plain(item)
}

fn ids(c: &Conversation) -> Vec<&str> {
    c.items.iter().map(|s| s.id()).collect()
}

#[test]
fn placement_end_root_after() {
    let mut c = Conversation::new(10, 1000);
    c.insert(Placement::End, text_item("a", "1")).unwrap();
    c.insert(Placement::Root, text_item("b", "2")).unwrap();
    c.insert(Placement::After("b".into()), text_item("c", "3"))
        .unwrap();
    assert_eq!(ids(&c), ["b", "c", "a"]);
    assert_eq!(c.previous_id("a").as_deref(), Some("c"));
    assert_eq!(c.previous_id("b"), None);
    let err = c
        .insert(Placement::After("zz".into()), text_item("d", "4"))
        .unwrap_err();
    assert_eq!(err.code.as_deref(), Some(codes::PREVIOUS_ITEM_NOT_FOUND));
    assert!(c.insert(Placement::End, text_item("a", "dup")).is_err());
    assert_eq!(c.items.len(), 3);
}

#[test]
fn evicts_oldest_beyond_limits() {
    let mut c = Conversation::new(2, 100);
    c.insert(Placement::End, text_item("a", "1")).unwrap();
    c.insert(Placement::End, text_item("b", "2")).unwrap();
    assert_eq!(
        c.insert(Placement::End, text_item("c", "3")).unwrap(),
        ["a"]
    );
    let big = StoredItem::with_audio(
        text_item("d", "4").item,
        Some(Arc::new(Adpcm::from_i16(&[0; 150]))),
    );
    assert_eq!(c.insert(Placement::End, big).unwrap(), ["b", "c"]);
    assert_eq!(ids(&c), ["d"]);
    c.remove("d");
    assert_eq!(c.audio_samples(), 0);
}

#[test]
fn pinned_items_outlive_eviction() {
    let mut c = Conversation::new(2, 1000);
    c.insert(Placement::End, text_item("a", "1")).unwrap();
    c.pin("a");
    c.insert(Placement::End, text_item("b", "2")).unwrap();
    assert_eq!(
        c.insert(Placement::End, text_item("c", "3")).unwrap(),
        ["b"]
    );
    assert_eq!(ids(&c), ["a", "c"]);
    c.unpin("a");
    assert_eq!(
        c.insert(Placement::End, text_item("d", "4")).unwrap(),
        ["a"]
    );
}

fn message(id: &str, role: Role, content: Vec<Content>) -> Item {
    Item::Message {
        id: Some(id.into()),
        object: None,
        status: None,
        role,
        content,
    }
}

fn user_audio(id: &str, transcript: Option<&str>) -> StoredItem {
    let item = message(
        id,
        Role::User,
        vec![Content::InputAudio {
            audio: None,
            transcript: transcript.map(str::to_string),
        }],
    );
    StoredItem::with_audio(item, Some(Arc::new(Adpcm::from_i16(&[100; 480]))))
}

#[test]
fn the_whole_conversation_is_context_in_order() {
    let mut c = Conversation::new(20, 100_000);
    let items = [
        StoredItem::plain(message(
            "s",
            Role::System,
            vec![Content::InputText {
                text: "Be brief.".into(),
            }],
        )),
        user_audio("u1", Some("what time is it")),
        StoredItem::plain(Item::FunctionCall {
            id: Some("f".into()),
            object: None,
            status: None,
            name: "get_time".into(),
            call_id: Some("call_1".into()),
            arguments: "{}".into(),
        }),
        StoredItem::plain(Item::FunctionCallOutput {
            id: Some("o".into()),
            object: None,
            status: None,
            call_id: "call_1".into(),
            output: r#"{"time":"10:00"}"#.into(),
        }),
        StoredItem::plain(message(
            "a",
            Role::Assistant,
            vec![Content::OutputAudio {
                audio: None,
                transcript: Some("It is ten".into()),
            }],
        )),
        user_audio("u2", None),
        user_audio("u3", Some("thanks")),
        text_item("t", "bye"),
    ];
    for item in items {
        c.insert(Placement::End, item).unwrap();
    }
    // The newest user audio item goes with its audio; older audio as its transcript, and
    // one with neither transcript nor audio is left out.
    let ctx = c.context(1);
    let audio: Arc<[f32]> = Arc::from(Adpcm::from_i16(&[100; 480]).to_f32());
    assert_eq!(
        ctx,
        vec![
            ContextItem::System("Be brief.".into()),
            ContextItem::User(TurnInput::Text("what time is it".into())),
            ContextItem::ToolCall(ToolCall {
                call_id: "call_1".into(),
                name: "get_time".into(),
                arguments: "{}".into()
            }),
            ContextItem::ToolResult {
                call_id: "call_1".into(),
                output: r#"{"time":"10:00"}"#.into()
            },
            ContextItem::Assistant("It is ten".into()),
            ContextItem::User(TurnInput::Transcribed {
                audio,
                transcript: "thanks".into()
            }),
            ContextItem::User(TurnInput::Text("bye".into())),
        ]
    );
    // With a wider window the untranscribed item comes with its audio.
    assert!(matches!(
        c.context(3)[5],
        ContextItem::User(TurnInput::Audio(_))
    ));
}

#[test]
fn a_stored_audio_item_costs_half_a_byte_a_sample() {
    // 10 s at 24 kHz: 240 000 samples, 120 000 bytes as ADPCM (480 000 as PCM16).
    const SAMPLES: u64 = 10 * 24_000;
    let pcm: Vec<i16> = (0..SAMPLES).map(|i| (i % 65_536) as u16 as i16).collect();
    let audio = Arc::new(Adpcm::from_i16(&pcm));
    let item = Item::Message {
        id: Some("a".into()),
        object: None,
        status: None,
        role: Role::Assistant,
        content: vec![Content::OutputAudio {
            audio: None,
            transcript: None,
        }],
    };
    let mut stored = StoredItem::with_audio(item, Some(audio));
    stored.ledger = Some(PlaybackLedger::default());
    let mut c = Conversation::new(10, 900 * 24_000);
    c.insert(Placement::End, stored).unwrap();
    assert_eq!(c.audio_samples(), SAMPLES);
    assert_eq!(c.get("a").unwrap().audio_bytes(), 120_000);
    assert_eq!(c.audio_bytes(), 120_000);
    // Truncation counts samples: cut to 4 s, the item keeps 48 000 bytes.
    c.cut_audio("a", 0, 4 * 24_000).unwrap();
    assert_eq!(c.audio_samples(), 4 * 24_000);
    assert_eq!(c.audio_bytes(), 48_000);
    assert_eq!(c.held_bytes() - c.text_bytes(), 48_000);
    // The cached retrieve encoding counts until the item goes.
    c.audio_base64("a", AudioFormat::default(), |_| "x".repeat(1_000))
        .unwrap();
    assert_eq!(c.held_bytes() - c.text_bytes(), 49_000);
    c.insert(Placement::End, text_item("b", "1")).unwrap();
    assert_eq!(c.held_bytes() - c.text_bytes(), 49_000);
    c.remove("a").unwrap();
    assert_eq!(c.held_bytes(), c.text_bytes());
    c.remove("b").unwrap();
    assert_eq!(c.held_bytes(), 0);
}

#[test]
fn text_is_counted_and_bounded() {
    let item = |id: &str, n: usize| text_item(id, &"x".repeat(n));
    let one = item("a", 1_000).text_bytes();
    assert!(one > 1_000, "the text and the item around it: {one}");
    // Room for two such items: a third evicts the oldest.
    let mut c = Conversation::new(100, 1_000).with_max_text(2 * one + one / 2);
    assert!(c
        .insert(Placement::End, item("a", 1_000))
        .unwrap()
        .is_empty());
    assert!(c
        .insert(Placement::End, item("b", 1_000))
        .unwrap()
        .is_empty());
    assert_eq!(c.text_bytes(), 2 * one);
    assert_eq!(c.insert(Placement::End, item("c", 1_000)).unwrap(), ["a"]);
    assert_eq!(ids(&c), ["b", "c"]);
    assert_eq!(c.held_bytes(), 2 * one);
    // A transcript filled in later counts too (and is given back with its item).
    let mut audio_item = text_item("d", "");
    if let Item::Message { content, .. } = &mut audio_item.item {
        content[0] = Content::InputAudio {
            audio: None,
            transcript: None,
        };
    }
    c.insert(Placement::End, audio_item).unwrap();
    let before = c.text_bytes();
    assert!(c.set_transcript("d", &"w".repeat(500)));
    assert_eq!(c.text_bytes(), before + 500);
    assert!(!c.set_transcript("zz", "nothing"));
    c.remove("d").unwrap();
    assert_eq!(c.text_bytes(), 2 * one);
}
