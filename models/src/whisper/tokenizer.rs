//! Decoding side of Whisper's byte-level BPE tokenizer, read from a Hugging Face
//! `tokenizer.json`: each vocabulary entry is a string over GPT-2's byte-to-unicode alphabet
//! (every byte mapped to a printable character), so a token's bytes are that mapping
//! reversed. Decoding needs no merges. Special tokens (`<|endoftext|>`, …) come from
//! `added_tokens`.

use std::collections::HashMap;

use serde::Deserialize;

#[derive(Deserialize)]
struct TokenizerJson {
    model: BpeJson,
    #[serde(default)]
    added_tokens: Vec<AddedJson>,
}

#[derive(Deserialize)]
struct BpeJson {
    #[serde(rename = "type")]
    kind: String,
    vocab: HashMap<String, u32>,
}

#[derive(Deserialize)]
struct AddedJson {
    id: u32,
    content: String,
    #[serde(default)]
    special: bool,
}

/// Highest token id accepted (Whisper's largest vocabulary is 51,866).
const MAX_ID: u32 = 1 << 20;

/// Token id → bytes, and the special tokens by name.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    bytes: Vec<Option<Vec<u8>>>,
    special: Vec<bool>,
    by_name: HashMap<String, u32>,
}

/// GPT-2's `bytes_to_unicode`: printable bytes map to themselves, the others to U+0100….
fn byte_alphabet() -> [char; 256] {
    let printable = |b: u32| {
        (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b)
    };
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..256u32 {
        let c = if printable(b) {
            b
        } else {
            next += 1;
            next - 1
        };
        table[b as usize] = char::from_u32(c).expect("below U+0200");
    }
    table
}

impl Tokenizer {
    /// Parses `tokenizer.json` text.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let json: TokenizerJson =
            serde_json::from_str(text).map_err(|e| format!("not a tokenizer.json: {e}"))?;
        if json.model.kind != "BPE" {
            return Err(format!("model type is {:?}, expected BPE", json.model.kind));
        }
        let alphabet = byte_alphabet();
        let inverse: HashMap<char, u8> = alphabet
            .iter()
            .enumerate()
            .map(|(b, &c)| (c, b as u8))
            .collect();
        let top = json
            .model
            .vocab
            .values()
            .chain(json.added_tokens.iter().map(|a| &a.id))
            .copied()
            .max()
            .unwrap_or(0);
        if top >= MAX_ID {
            return Err(format!("token id {top} is out of range"));
        }
        let mut bytes = vec![None; top as usize + 1];
        let mut special = vec![false; top as usize + 1];
        for (text, &id) in &json.model.vocab {
            let b = text
                .chars()
                .map(|c| inverse.get(&c).copied())
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| {
                    format!("vocabulary entry {text:?} is not in the byte-level alphabet")
                })?;
            bytes[id as usize] = Some(b);
        }
        let mut by_name = HashMap::new();
        for a in &json.added_tokens {
            bytes[a.id as usize] = Some(a.content.as_bytes().to_vec());
            special[a.id as usize] = a.special;
            by_name.insert(a.content.clone(), a.id);
        }
        Ok(Self {
            bytes,
            special,
            by_name,
        })
    }

    /// Id of an added (special) token such as `<|endoftext|>`.
    pub fn special_id(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// Ids known (the largest plus one).
    pub fn id_count(&self) -> usize {
        self.bytes.len()
    }

    /// A token's bytes (`None` for an id the file does not define, e.g. a timestamp).
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.bytes.get(id as usize)?.as_deref()
    }

    /// A special token (never part of the text).
    pub fn is_special(&self, id: u32) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }

    /// The text of `ids`, special and unknown ids skipped; invalid UTF-8 replaced.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut out = Vec::new();
        for &id in ids {
            if !self.is_special(id) {
                if let Some(b) = self.token_bytes(id) {
                    out.extend_from_slice(b);
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}
