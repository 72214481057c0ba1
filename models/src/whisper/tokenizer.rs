//! Whisper's byte-level BPE tokenizer, read from a Hugging Face `tokenizer.json`: each
//! vocabulary entry is a string over GPT-2's byte-to-unicode alphabet (every byte mapped to a
//! printable character), so a token's bytes are that mapping reversed. Decoding needs no
//! merges; encoding (a prompt's text) is the embedded LLM's GPT-2 BPE
//! ([`crate::llama::tokenizer`]) over this vocabulary and the file's `merges`, with GPT-2's
//! own pre-tokenizer. Special tokens (`<|endoftext|>`, …) come from `added_tokens`.

use std::collections::HashMap;
use std::sync::Arc;

use crate::llama::tokenizer::PreTokenizer;

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
    /// `"a b"` strings (or `["a", "b"]` pairs in newer files), the first merged first.
    #[serde(default)]
    merges: Vec<MergeJson>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum MergeJson {
    Joined(String),
    Pair(String, String),
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
    /// The encoder (none when the vocabulary has no byte tokens to build one on).
    bpe: Option<Arc<crate::llama::tokenizer::Tokenizer>>,
}

/// The GPT-2 BPE encoder over a `tokenizer.json`'s vocabulary (`n` ids), added tokens (as
/// controls) and merges; none when it cannot be built (no byte tokens).
fn encoder(
    vocab: &HashMap<String, u32>,
    added: &[AddedJson],
    merges: Vec<MergeJson>,
    n: usize,
) -> Option<Arc<crate::llama::tokenizer::Tokenizer>> {
    let merges: Vec<String> = merges
        .into_iter()
        .map(|m| match m {
            MergeJson::Pair(a, b) => format!("{a} {b}"),
            MergeJson::Joined(s) => s,
        })
        .collect();
    // The vocabulary by id in its byte-level spelling; ids it lacks are empty controls.
    let mut spelled = vec![String::new(); n];
    let mut types = vec![3; n];
    for (text, &id) in vocab {
        spelled[id as usize].clone_from(text);
        types[id as usize] = 1;
    }
    for a in added {
        spelled[a.id as usize].clone_from(&a.content);
        types[a.id as usize] = 3;
    }
    crate::llama::tokenizer::Tokenizer::new("gpt2", &spelled, &types, &merges)
        .ok()
        .map(|t| Arc::new(t.with_pre_tokenizer(PreTokenizer::Gpt2)))
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
        let bpe = encoder(
            &json.model.vocab,
            &json.added_tokens,
            json.model.merges,
            bytes.len(),
        );
        Ok(Self {
            bytes,
            special,
            by_name,
            bpe,
        })
    }

    /// The ids of `text` (ordinary text: special tokens' names are not recognised); none
    /// when the vocabulary cannot encode.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.bpe.as_ref().map_or_else(Vec::new, |t| t.encode(text))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A vocabulary over GPT-2's alphabet ("Ġ" is the space) with merges.
    fn tiny() -> Tokenizer {
        let json = serde_json::json!({
            "model": {
                "type": "BPE",
                "vocab": {"Ġ": 0, "a": 1, "b": 2, "c": 3, "-": 4, "Ġa": 5, "Ġab": 6, "bc": 7,
                          "Ġabc": 8, "<|endoftext|>": 9},
                "merges": ["Ġ a", "Ġa b", ["b", "c"], "Ġab c"],
            },
            "added_tokens": [{"id": 9, "content": "<|endoftext|>", "special": true}],
        });
        Tokenizer::from_json(&json.to_string()).expect("parses")
    }

    #[test]
    fn encodes_by_merge_rank_and_decodes_back() {
        let t = tiny();
        // " abc": Ġ+a (rank 0), Ġa+b (1), Ġab+c (3); "bc" (2) never forms before Ġa+b.
        assert_eq!(t.encode(" abc"), [8]);
        assert_eq!(t.encode(" ab"), [6]);
        assert_eq!(t.encode("bc-a"), [7, 4, 1]);
        assert_eq!(t.decode(&t.encode(" abc bc-a")), " abc bc-a");
        assert!(t.encode("").is_empty());
    }
}
