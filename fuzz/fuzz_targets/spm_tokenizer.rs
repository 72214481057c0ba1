//! Fuzzes the SentencePiece reader that parses a Moshi directory's
//! `tokenizer_spm_32k_3.model`: any bytes are parsed or refused, never a panic, and a parsed
//! vocabulary decodes any id.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = duet_models::moshi::TextDecoder::parse(data) {
        assert!(!d.is_empty());
        let (mut pending, mut out) = (Vec::new(), String::new());
        for id in 0..(d.len() as u32 + 2) {
            d.push(id, &mut pending, &mut out);
        }
    }
});
