//! Fuzzes the embedded LLM's text path with what clients send it: any UTF-8 is cut into
//! words that cover it exactly by both pre-tokenizers (GPT-2's with single digits, Qwen2's),
//! and a byte-level vocabulary with user-defined tokens encodes and decodes it back, never
//! a panic.
#![no_main]

use duet_models::llama::tokenizer::{byte_chars, PreTokenizer, Tokenizer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for pre in [PreTokenizer::Smollm, PreTokenizer::Qwen2] {
        assert_eq!(pre.split(text).concat(), text);
    }
    // The 256 bytes, two merges and a user-defined tag, as a Qwen vocabulary spells them.
    let mut tokens: Vec<String> = byte_chars().iter().map(|c| c.to_string()).collect();
    tokens.extend(["he".into(), "Ġw".into(), "<tool_call>".into()]);
    let mut types = vec![1; tokens.len()];
    types[258] = 4;
    let merges = ["h e".to_string(), "Ġ w".to_string()];
    let tokenizer = Tokenizer::new("gpt2", &tokens, &types, &merges)
        .expect("a byte-level vocabulary")
        .with_pre_tokenizer(PreTokenizer::Qwen2);
    assert_eq!(tokenizer.decode(&tokenizer.encode(text)), text);
});
