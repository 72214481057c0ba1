//! Input buffer limits, WebRTC playback clears and VAD timeouts around full-duplex models.

use super::*;

#[test]
fn a_full_duplex_model_keeps_hearing_past_the_input_buffer_limit() {
    // No turn detection: nobody commits, the model listens all the time.
    let mut h = harness(Setup {
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":null}}}),
        max_input_ms: Some(1000),
        ..Setup::default()
    });
    let chunk = pcm16_b64(&voiced(0.5));
    for _ in 0..5 {
        h.send(json!({"type":"input_audio_buffer.append","audio":chunk}));
    }
    h.send(json!({"type":"input_audio_buffer.commit"}));
    let committed = h.until("conversation.item.added");
    assert_eq!(count(&committed, "error"), 0, "{committed:#?}");
    // The buffer kept the newest second.
    let bytes = h.retrieve_audio(&committed);
    assert_eq!(bytes.len(), 2 * 24_000);
}

#[test]
fn live_media_past_the_buffer_limit_is_reported_once_and_keeps_the_newest() {
    // A turn-based model on WebRTC with manual turns: the caller's audio cannot be refused.
    let mut h = harness(Setup {
        echo: true,
        webrtc: Some(SinkLog::default()),
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":null}}}),
        max_input_ms: Some(1000),
        ..Setup::default()
    });
    for _ in 0..100 {
        h.input(SessionInput::Media(vec![0.1; 480].into()));
    }
    let events = h.drain(Duration::from_millis(300));
    assert_eq!(types(&events), ["error"], "{events:#?}");
    assert_eq!(events[0]["error"]["code"], "input_audio_buffer_full");
    h.send(json!({"type":"input_audio_buffer.commit"}));
    h.until("input_audio_buffer.committed");
    // Under the limit again, a new overflow is a new report.
    for _ in 0..60 {
        h.input(SessionInput::Media(vec![0.1; 480].into()));
    }
    let again = h.drain(Duration::from_millis(300));
    assert_eq!(count(&again, "error"), 1, "{again:#?}");
}

#[test]
fn a_clear_only_covers_responses_started_before_it() {
    let sink = SinkLog::default();
    let mut h = harness(Setup {
        speech: vec![3..20, 30..36],
        webrtc: Some(sink.clone()),
        ..Setup::default()
    });
    let opening = h.until("response.speak");
    let old = opening[0]["response"]["id"].as_str().unwrap().to_string();
    h.send(json!({"type":"output_audio_buffer.clear"}));
    // Before the engine confirms the purge, the client asks for a new response.
    h.send(json!({"type":"response.create"}));
    let created = h.until("response.created");
    let new = last(&created, "response.created")["response"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(new, old);
    h.signals.cleared();
    h.media();
    let cleared = h.until("output_audio_buffer.cleared");
    assert_eq!(
        last(&cleared, "output_audio_buffer.cleared")["response_id"],
        old.as_str()
    );
    // The new response is still tracked: its audio starting on RTP is reported.
    let speak = h.until("response.speak");
    assert_eq!(last(&speak, "response.speak")["response_id"], new.as_str());
    let tag = 2;
    h.signals.played(&[(tag, 480)], &[]);
    h.media();
    let started = h.until("output_audio_buffer.started");
    assert_eq!(
        last(&started, "output_audio_buffer.started")["response_id"],
        new.as_str()
    );
    assert_eq!(count(&h.seen, "output_audio_buffer.cleared"), 1);
}

#[test]
fn no_idle_timeout_prompts_on_a_full_duplex_model() {
    let mut h = harness(Setup {
        speech: once(3..8),
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":{"type":"server_vad","idle_timeout_ms":5000}}}}),
        ..Setup::default()
    });
    h.until("response.listen");
    // Server VAD's idle timeout (5 s at least) would fire 5 s after that response, commit
    // an empty user item and prompt a model that decides itself when to speak.
    h.advance(Duration::from_millis(5600));
    let quiet = h.drain(Duration::from_millis(100));
    assert_eq!(types(&quiet), Vec::<String>::new(), "{quiet:#?}");
}

#[test]
fn a_client_append_past_the_limit_is_refused_whole() {
    let mut h = harness(Setup {
        echo: true,
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":null}}}),
        max_input_ms: Some(1000),
        ..Setup::default()
    });
    let chunk = pcm16_b64(&voiced(0.4));
    for _ in 0..3 {
        h.send(json!({"type":"input_audio_buffer.append","audio":chunk}));
    }
    let refused = h.until("error");
    assert_eq!(types(&refused), ["error"]);
    assert_eq!(refused[0]["error"]["code"], "input_audio_buffer_full");
    h.send(json!({"type":"input_audio_buffer.commit"}));
    let committed = h.until("conversation.item.added");
    let bytes = h.retrieve_audio(&committed);
    assert_eq!(bytes.len(), 2 * 2 * 9_600, "the first two appends, 0.8 s");
}

#[test]
fn an_item_still_playing_outlives_a_flood_of_items_until_its_truncation() {
    let mut h = harness(Setup {
        speech: once(3..40),
        webrtc: Some(SinkLog::default()),
        ..Setup::default()
    });
    let opening = h.until("response.speak");
    let item_id = opening[1]["item"]["id"].as_str().unwrap().to_string();
    h.until("response.content_part.added");
    h.signals.played(&[(1, 960)], &[]);
    h.media();
    h.until("output_audio_buffer.started");
    h.send(json!({"type":"output_audio_buffer.clear"}));
    // More items than the conversation keeps arrive before the engine confirms the purge:
    // the oldest go, but not the item whose truncation is pending.
    for i in 0..1_100 {
        h.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":format!("flood {i}")}]}}));
    }
    assert!(count(&h.seen, "conversation.item.deleted") >= 100);
    h.signals.cleared();
    h.media();
    let got = h.until("conversation.item.truncated");
    assert_eq!(
        last(&got, "conversation.item.truncated")["item_id"],
        item_id.as_str()
    );
    assert_eq!(
        last(&got, "conversation.item.truncated")["audio_end_ms"],
        40
    );
}

/// Every PCM16 value once, in a scrambled order (extremes included), as wire bytes.
fn every_pcm16_value() -> Vec<u8> {
    (0..65_536u32)
        .flat_map(|i| ((i * 40_503 % 65_536) as u16 as i16).to_le_bytes())
        .collect()
}

/// What a retrieve returns for stored `bytes` (PCM16): their ADPCM, decoded.
fn as_stored(bytes: &[u8]) -> Vec<u8> {
    let pcm: Vec<i16> = bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    duet_media::Adpcm::from_i16(&pcm)
        .samples()
        .flat_map(i16::to_le_bytes)
        .collect()
}

#[test]
fn appended_pcm16_comes_back_from_retrieve_as_stored() {
    let mut h = harness(Setup {
        echo: true,
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":null}}}),
        ..Setup::default()
    });
    let b64 = base64::engine::general_purpose::STANDARD;
    let bytes = every_pcm16_value();
    // In appends of odd sample counts, as a client might cut them.
    for chunk in bytes.chunks(2 * 4_801) {
        h.send(json!({"type":"input_audio_buffer.append","audio":b64.encode(chunk)}));
    }
    h.send(json!({"type":"input_audio_buffer.commit"}));
    let committed = h.until("conversation.item.added");
    assert_eq!(count(&committed, "error"), 0, "{committed:#?}");
    // Stored as ADPCM, encoded once whatever the appends' sizes: half a byte a sample.
    let stored = as_stored(&bytes);
    assert!(
        h.retrieve_audio(&committed) == stored,
        "append → commit → retrieve"
    );
    assert_eq!(h.session.conv.audio_bytes(), bytes.len() / 4);

    // An item created with the same audio comes back the same.
    h.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_audio","audio":b64.encode(&bytes)}]}}));
    let created = h.until("conversation.item.added");
    assert!(h.retrieve_audio(&created) == stored, "create → retrieve");
    assert_eq!(h.session.conv.audio_bytes(), 2 * bytes.len() / 4);
}

#[test]
fn retrieved_speech_keeps_twenty_five_db() {
    let mut h = harness(Setup {
        echo: true,
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":null}}}),
        ..Setup::default()
    });
    let speech = voiced(3.0);
    h.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_audio","audio":pcm16_b64(&speech)}]}}));
    let created = h.until("conversation.item.added");
    let back = h.retrieve_audio(&created);
    let sent: Vec<i16> = speech.iter().map(|&s| duet_media::f32_to_i16(s)).collect();
    let got: Vec<i16> = back
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    assert_eq!(got.len(), sent.len());
    let power = |x: &mut dyn Iterator<Item = f64>| x.map(|v| v * v).sum::<f64>();
    let signal = power(&mut sent.iter().map(|&s| f64::from(s)));
    let error = power(
        &mut sent
            .iter()
            .zip(&got)
            .map(|(&a, &b)| f64::from(a) - f64::from(b)),
    );
    let snr = 10.0 * (signal / error.max(1.0)).log10();
    assert!(snr > 25.0, "SNR {snr:.1} dB");
}

#[test]
fn a_committed_ten_second_item_holds_120_000_bytes_of_samples() {
    let mut h = harness(Setup {
        echo: true,
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":null}}}),
        ..Setup::default()
    });
    let chunk = pcm16_b64(&voiced(1.0));
    for _ in 0..10 {
        h.send(json!({"type":"input_audio_buffer.append","audio":chunk}));
    }
    // The uncommitted buffer holds PCM16 too.
    assert_eq!(h.session.input.buffered_bytes(), 480_000);
    h.send(json!({"type":"input_audio_buffer.commit"}));
    let committed = h.until("conversation.item.added");
    let id = last(&committed, "conversation.item.added")["item"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let stored = h.session.conv.get(&id).expect("stored");
    assert_eq!(stored.audio.as_ref().map(|a| a.len()), Some(240_000));
    assert_eq!(
        stored.audio_bytes(),
        120_000,
        "not PCM16's 480 000, nor f32's 960 000"
    );
}

#[test]
fn a_phone_key_press_is_an_event_with_its_arrival_time() {
    let mut h = harness(Setup::default());
    h.input(SessionInput::Dtmf {
        key: '#',
        received_at: 1_764_000_000,
    });
    let got = h.until("input_audio_buffer.dtmf_event_received");
    let ev = last(&got, "input_audio_buffer.dtmf_event_received");
    assert_eq!(ev["event"], "#");
    assert_eq!(ev["received_at"], 1_764_000_000);
}
