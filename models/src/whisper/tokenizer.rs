//! Whisper's byte-level BPE tokenizer, read from a Hugging Face `tokenizer.json`: each
//! vocabulary entry is a string over GPT-2's byte-to-unicode alphabet (every byte mapped to a
//! printable character), so a token's bytes are that mapping reversed. Decoding needs no
//! merges; encoding (a prompt's text) splits the text as GPT-2's pre-tokenizer does and
//! applies the file's `merges` by rank. Special tokens (`<|endoftext|>`, …) come from
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
    /// Vocabulary entry (in the byte alphabet) → id, for encoding.
    vocab: HashMap<String, u32>,
    /// A pair of symbols → its merge's rank (lower merges first).
    ranks: HashMap<(String, String), usize>,
    alphabet: [char; 256],
}

/// The character classes of GPT-2's pre-tokenizer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Number,
    Space,
    Other,
}

fn class(c: char) -> Class {
    if c.is_alphabetic() {
        Class::Letter
    } else if c.is_numeric() {
        Class::Number
    } else if c.is_whitespace() {
        Class::Space
    } else {
        Class::Other
    }
}

/// GPT-2's pre-tokenizer (`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`):
/// English contractions, then runs of letters, of digits, or of other symbols, each with
/// one space before it, and runs of whitespace (leaving the last space to the word after).
fn pre_tokenize(text: &str) -> Vec<&str> {
    const CONTRACTIONS: [&str; 7] = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"];
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(k) = CONTRACTIONS.iter().find(|k| rest.starts_with(**k)) {
            out.push(&rest[..k.len()]);
            rest = &rest[k.len()..];
            continue;
        }
        let (lead, body) = match c {
            ' ' => (1, &rest[1..]),
            _ => (0, rest),
        };
        let kind = body.chars().next().map(class);
        let len = match kind {
            Some(k) if k != Class::Space => {
                let run: usize = body
                    .chars()
                    .take_while(|&c| class(c) == k)
                    .map(char::len_utf8)
                    .sum();
                lead + run
            }
            _ => {
                // Whitespace: the run, less its last character when a word follows it.
                let run: usize = rest
                    .chars()
                    .take_while(|c| c.is_whitespace())
                    .map(char::len_utf8)
                    .sum();
                let last = rest[..run].chars().last().map_or(0, char::len_utf8);
                if run < rest.len() && run > last {
                    run - last
                } else {
                    run
                }
            }
        };
        out.push(&rest[..len]);
        rest = &rest[len..];
    }
    out
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
        let mut ranks = HashMap::with_capacity(json.model.merges.len());
        for (rank, m) in json.model.merges.into_iter().enumerate() {
            let pair = match m {
                MergeJson::Pair(a, b) => (a, b),
                MergeJson::Joined(s) => match s.split_once(' ') {
                    Some((a, b)) => (a.to_string(), b.to_string()),
                    None => return Err(format!("merge {s:?} is not two symbols")),
                },
            };
            ranks.entry(pair).or_insert(rank);
        }
        Ok(Self {
            bytes,
            special,
            by_name,
            vocab: json.model.vocab,
            ranks,
            alphabet,
        })
    }

    /// The ids of `text` (ordinary text: special tokens' names are not recognised), split
    /// into words as GPT-2's pre-tokenizer does and each word merged by the file's ranks.
    /// A piece the vocabulary lacks (a file without merges) falls back to its bytes' ids.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        for word in pre_tokenize(text) {
            let mut symbols: Vec<String> = word
                .bytes()
                .map(|b| self.alphabet[b as usize].to_string())
                .collect();
            // Merge the lowest-ranked adjacent pair until none is in the merges.
            loop {
                let best = symbols
                    .windows(2)
                    .enumerate()
                    .filter_map(|(i, w)| {
                        self.ranks
                            .get(&(w[0].clone(), w[1].clone()))
                            .map(|&r| (r, i))
                    })
                    .min();
                let Some((_, i)) = best else { break };
                let right = symbols.remove(i + 1);
                symbols[i].push_str(&right);
            }
            for sym in symbols {
                match self.vocab.get(&sym) {
                    Some(&id) => ids.push(id),
                    None => ids.extend(
                        sym.chars()
                            .filter_map(|c| self.vocab.get(&c.to_string()).copied()),
                    ),
                }
            }
        }
        ids
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

    #[test]
    fn pre_tokenizes_as_gpt2() {
        assert_eq!(
            pre_tokenize("Mm-hmm. I'm here,  42 times!\n"),
            ["Mm", "-", "hmm", ".", " I", "'m", " here", ",", " ", " 42", " times", "!", "\n"]
        );
        assert_eq!(pre_tokenize("  a"), [" ", " a"]);
        assert_eq!(pre_tokenize("a  "), ["a", "  "]);
        assert!(pre_tokenize("").is_empty());
    }

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
