//! Fuzzes the reader of a Whisper directory's `tokenizer.json` (the byte-level BPE decoder):
//! any text is parsed or refused, never a panic, and a parsed vocabulary decodes any ids.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(t) = duet_models::whisper::tokenizer::Tokenizer::from_json(text) {
        let n = t.id_count() as u32;
        let ids: Vec<u32> = (0..n.min(512) + 2).collect();
        let _ = t.decode(&ids);
        let _ = t.special_id("<|endoftext|>");
    }
});
