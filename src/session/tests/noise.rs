//! `audio.input.noise_reduction`: the input is cleaned before anything hears or keeps it,
//! sample for sample, and `null` leaves it untouched.

use super::*;
use duet_media::pcm::rms_dbfs;

/// White noise at `dbfs` RMS (seeded, the same every run).
fn white(secs: f32, dbfs: f32) -> Vec<f32> {
    duet_client::speech::noise(secs, dbfs, 7)
}

/// Appends `pcm`, commits it and gives back what was stored, as f32.
fn stored(noise_reduction: Value, pcm: &[f32]) -> Vec<f32> {
    let mut h = harness(Setup {
        echo: true,
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":null,
            "noise_reduction": noise_reduction}}}),
        ..Setup::default()
    });
    for chunk in pcm.chunks(4_801) {
        h.send(json!({"type":"input_audio_buffer.append","audio":pcm16_b64(chunk)}));
    }
    h.send(json!({"type":"input_audio_buffer.commit"}));
    let committed = h.until("conversation.item.added");
    assert_eq!(count(&committed, "error"), 0, "{committed:#?}");
    h.retrieve_audio(&committed)
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32_768.0)
        .collect()
}

#[test]
fn near_field_takes_white_noise_down_by_more_than_ten_db_and_keeps_the_length() {
    let noise = white(2.0, -30.0);
    let plain = stored(Value::Null, &noise);
    let cleaned = stored(json!({"type":"near_field"}), &noise);
    assert_eq!(cleaned.len(), noise.len(), "as many samples as came in");
    let tail = 12_000..;
    let (was, now) = (rms_dbfs(&plain[tail.clone()]), rms_dbfs(&cleaned[tail]));
    assert!(
        (was + 30.0).abs() < 1.0,
        "null changes nothing: {was:.1} dBFS"
    );
    assert!(now < was - 10.0, "{was:.1} dBFS -> {now:.1} dBFS");
    // far_field is served by the same denoiser.
    assert_eq!(stored(json!({"type":"far_field"}), &noise), cleaned);
}

#[test]
fn the_session_object_shows_it_and_a_bad_kind_is_refused() {
    let mut h = harness(Setup::default());
    h.send(json!({"type":"session.update","session":{"type":"realtime",
        "audio":{"input":{"noise_reduction":{"type":"near_field"}}}}}));
    let updated = h.until("session.updated");
    let s = &last(&updated, "session.updated")["session"];
    assert_eq!(
        s["audio"]["input"]["noise_reduction"],
        json!({"type":"near_field"})
    );
    h.send(json!({"type":"session.update","session":{"type":"realtime",
        "audio":{"input":{"noise_reduction":{"type":"studio"}}}}}));
    let refused = h.until("error");
    let e = &last(&refused, "error")["error"];
    assert_eq!(e["code"], "invalid_value");
    assert_eq!(e["param"], "session.audio.input.noise_reduction.type");
    h.send(json!({"type":"session.update","session":{"type":"realtime",
        "audio":{"input":{"noise_reduction":null}}}}));
    let updated = h.until("session.updated");
    let s = &last(&updated, "session.updated")["session"];
    assert!(
        s["audio"]["input"].get("noise_reduction").is_none(),
        "off is omitted"
    );
}
