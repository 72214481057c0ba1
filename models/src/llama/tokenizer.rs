//! The byte-level BPE tokenizer of a GGUF chat model (`tokenizer.ggml.model = "gpt2"`),
//! rebuilt from the file's vocabulary and merges: the file's pre-tokenizer
//! (`tokenizer.ggml.pre`: Qwen's `qwen2`, or GPT-2's with digits split one by one, SmolLM2's
//! `smollm`, for any other), then the merges by rank. Control tokens
//! (`<|im_start|>`, …) are only ever produced by the chat template, never from text, so a
//! user who types `<|im_end|>` gets the characters, not the token.

use std::collections::HashMap;

/// Why a GGUF's tokenizer cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// A key is missing or has the wrong type.
    #[error("the GGUF tokenizer has no usable {0}")]
    Missing(&'static str),
    /// A tokenizer other than byte-level BPE.
    #[error("tokenizer.ggml.model is {0:?}; only byte-level BPE (\"gpt2\") is supported")]
    Unsupported(String),
    /// The vocabulary spells no bytes at all.
    #[error("the vocabulary has no byte-level tokens")]
    NoBytes,
}

/// See the module docs.
#[derive(Debug)]
pub struct Tokenizer {
    /// Each token's bytes.
    bytes: Vec<Vec<u8>>,
    /// Control tokens by text.
    control: HashMap<String, u32>,
    /// The token of each single byte (a few control bytes have none in some vocabularies:
    /// like the model's own tokenizer, encoding leaves them out).
    byte_token: [Option<u32>; 256],
    /// (left, right) → (rank, merged token).
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// The most bytes one token stands for.
    longest: usize,
    /// How text is cut into words before merging.
    pre: PreTokenizer,
    /// User-defined tokens (type 4: Qwen's `<tool_call>`, `<think>`…), longest first:
    /// found in text as whole tokens before the rest is merged, as the model's own
    /// tokenizer does with its added tokens.
    user_defined: Vec<(String, u32)>,
}

/// How text is cut into the words BPE merges within (`tokenizer.ggml.pre`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PreTokenizer {
    /// GPT-2's pattern with every digit on its own (SmolLM2's `smollm`; also what any name
    /// not listed here gets).
    #[default]
    Smollm,
    /// Qwen2's pattern (`qwen2`, Qwen2/2.5/3): case-insensitive contractions, one
    /// non-letter glued to the letters after it, single digits, newlines kept with the
    /// punctuation before them.
    Qwen2,
    /// GPT-2's own pattern, digits in runs (Whisper's tokenizer; no GGUF is given it).
    Gpt2,
}

impl PreTokenizer {
    /// The pre-tokenizer a GGUF names (`None`: the key is absent).
    pub fn named(name: Option<&str>) -> Self {
        match name {
            Some("qwen2" | "deepseek-r1-qwen") => Self::Qwen2,
            _ => Self::Smollm,
        }
    }

    /// Splits `text` into words.
    pub fn split(self, text: &str) -> Vec<&str> {
        match self {
            Self::Smollm => pre_tokenize(text),
            Self::Qwen2 => qwen2_split(text),
            Self::Gpt2 => {
                let mut out = Vec::new();
                gpt2_split(text, &mut out);
                out
            }
        }
    }
}

/// GPT-2's reversible map from bytes to printable characters (the vocabulary's spelling).
pub fn byte_chars() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable = (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
        out[b as usize] = if printable {
            char::from(b)
        } else {
            n += 1;
            char::from_u32(255 + n).unwrap_or('\0')
        };
    }
    out
}

/// The merges (`"left right"`, best first) as (left, right) → (rank, merged token), those
/// whose three tokens the vocabulary has.
fn merge_table(merges: &[String], ids: &HashMap<&str, u32>) -> HashMap<(u32, u32), (u32, u32)> {
    let mut table = HashMap::with_capacity(merges.len());
    for (rank, merge) in merges.iter().enumerate() {
        let Some((left, right)) = merge.split_once(' ') else {
            continue;
        };
        let joined = format!("{left}{right}");
        if let (Some(&l), Some(&r), Some(&m)) =
            (ids.get(left), ids.get(right), ids.get(joined.as_str()))
        {
            table.entry((l, r)).or_insert((rank as u32, m));
        }
    }
    table
}

impl Tokenizer {
    /// Builds the tokenizer from the vocabulary (`tokens`, in the byte-level spelling), each
    /// token's type (3 = control) and the merges (`"left right"`, best first).
    pub fn new(
        model: &str,
        tokens: &[String],
        types: &[i32],
        merges: &[String],
    ) -> Result<Self, TokenizerError> {
        if model != "gpt2" {
            return Err(TokenizerError::Unsupported(model.to_string()));
        }
        let chars = byte_chars();
        let byte_of: HashMap<char, u8> = (0..=255u8).map(|b| (chars[b as usize], b)).collect();
        let mut ids: HashMap<&str, u32> = HashMap::with_capacity(tokens.len());
        let mut control = HashMap::new();
        let mut user_defined = Vec::new();
        let mut bytes = Vec::with_capacity(tokens.len());
        for (id, token) in tokens.iter().enumerate() {
            let id = id as u32;
            ids.insert(token, id);
            if types.get(id as usize) == Some(&3) {
                control.insert(token.clone(), id);
                bytes.push(Vec::new()); // control tokens print nothing
            } else {
                if types.get(id as usize) == Some(&4) && !token.is_empty() {
                    user_defined.push((token.clone(), id));
                }
                bytes.push(
                    token
                        .chars()
                        .map(|c| byte_of.get(&c).copied().unwrap_or(b'?'))
                        .collect(),
                );
            }
        }
        let mut byte_token = [None; 256];
        for b in 0..=255u8 {
            let spelled = chars[b as usize].to_string();
            byte_token[b as usize] = ids.get(spelled.as_str()).copied();
        }
        if byte_token.iter().all(Option::is_none) {
            return Err(TokenizerError::NoBytes);
        }
        let longest = bytes.iter().map(Vec::len).max().unwrap_or(1).max(1);
        Ok(Self {
            bytes,
            control,
            byte_token,
            merges: merge_table(merges, &ids),
            longest,
            pre: PreTokenizer::default(),
            user_defined: {
                user_defined.sort_by_key(|(t, _)| std::cmp::Reverse(t.len()));
                user_defined
            },
        })
    }

    /// The same tokenizer cutting words with `pre`.
    pub fn with_pre_tokenizer(mut self, pre: PreTokenizer) -> Self {
        self.pre = pre;
        self
    }

    /// How it cuts words.
    pub fn pre_tokenizer(&self) -> PreTokenizer {
        self.pre
    }

    /// Tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.bytes.len()
    }

    /// The fewest tokens `text` can take (each token stands for at most the longest token's
    /// bytes): what a text is sure to cost without tokenizing it.
    pub fn at_least(&self, text: &str) -> usize {
        text.len().div_ceil(self.longest)
    }

    /// The control token spelled `text` (`<|im_start|>`), if the vocabulary has it.
    pub fn control(&self, text: &str) -> Option<u32> {
        self.control.get(text).copied()
    }

    /// The bytes a token stands for (none for control tokens).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.bytes.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// Encodes plain text (control tokens spelled in it stay text; user-defined ones
    /// become their token) onto `out`.
    pub fn encode_into(&self, text: &str, out: &mut Vec<u32>) {
        let mut rest = text;
        while !self.user_defined.is_empty() {
            // The earliest user-defined token in the rest (the longest where two start).
            let found = self
                .user_defined
                .iter()
                .filter_map(|(t, id)| rest.find(t.as_str()).map(|at| (at, t.len(), *id)))
                .min_by_key(|&(at, len, _)| (at, std::cmp::Reverse(len)));
            let Some((at, len, id)) = found else { break };
            self.encode_plain(&rest[..at], out);
            out.push(id);
            rest = &rest[at + len..];
        }
        self.encode_plain(rest, out);
    }

    /// Encodes text without looking for user-defined tokens.
    fn encode_plain(&self, text: &str, out: &mut Vec<u32>) {
        let mut word = Vec::new();
        for piece in self.pre.split(text) {
            word.clear();
            word.extend(piece.bytes().filter_map(|b| self.byte_token[b as usize]));
            self.merge(&mut word);
            out.extend_from_slice(&word);
        }
    }

    /// Encodes plain text.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        self.encode_into(text, &mut out);
        out
    }

    /// Applies the merges to one pre-tokenized word, best-ranked pair first (the leftmost of
    /// equal rank first), as GPT-2's BPE does. A heap of candidate pairs over a linked list
    /// of symbols: each merge costs O(log n), so a word of n bytes takes O(n log n) however
    /// long it is (rescanning the word per merge took O(n²) on a long word without spaces).
    /// Returns the heap entries looked at (a measure of the work, for tests).
    fn merge(&self, word: &mut Vec<u32>) -> usize {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        const NONE: usize = usize::MAX;
        let n = word.len();
        if n < 2 {
            return 0;
        }
        let mut next: Vec<usize> = (1..=n).map(|i| if i == n { NONE } else { i }).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        prev[0] = NONE;
        let mut alive = vec![true; n];
        // (rank, left position, right position): the lowest rank, then the leftmost.
        let mut heap: BinaryHeap<Reverse<(u32, usize, usize)>> = BinaryHeap::new();
        let rank = |w: &[u32], l: usize, r: usize| self.merges.get(&(w[l], w[r])).map(|m| m.0);
        for i in 0..n - 1 {
            if let Some(r) = rank(word, i, i + 1) {
                heap.push(Reverse((r, i, i + 1)));
            }
        }
        let mut looked = 0;
        while let Some(Reverse((r, left, right))) = heap.pop() {
            looked += 1;
            // A stale entry: one side merged away, or the pair is no longer this one.
            if !alive[left] || !alive[right] || next[left] != right {
                continue;
            }
            let Some(&(current, merged)) = self.merges.get(&(word[left], word[right])) else {
                continue;
            };
            if current != r {
                continue;
            }
            word[left] = merged;
            alive[right] = false;
            let after = next[right];
            next[left] = after;
            if after != NONE {
                prev[after] = left;
                if let Some(r) = rank(word, left, after) {
                    heap.push(Reverse((r, left, after)));
                }
            }
            let before = prev[left];
            if before != NONE {
                if let Some(r) = rank(word, before, left) {
                    heap.push(Reverse((r, before, left)));
                }
            }
        }
        let mut i = 0;
        word.retain(|_| {
            i += 1;
            alive[i - 1]
        });
        looked
    }

    /// Decodes tokens to text (invalid UTF-8 replaced).
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&id| self.token_bytes(id).iter().copied())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Turns a stream of tokens into text, holding back the bytes of a character that a later
/// token completes.
#[derive(Debug, Default)]
pub struct TextStream {
    pending: Vec<u8>,
}

impl TextStream {
    /// The text that `id` completes (possibly empty).
    pub fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> String {
        self.pending.extend_from_slice(tokenizer.token_bytes(id));
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(s) => s.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(), // a character still open
            Err(_) => {
                let s = String::from_utf8_lossy(&self.pending).into_owned();
                self.pending.clear();
                return s;
            }
        };
        let text = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
        self.pending.drain(..valid);
        text
    }
}

#[derive(Clone, Copy, PartialEq)]
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

/// Splits text into the words BPE merges within: digits one by one, then GPT-2's pattern
/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
pub fn pre_tokenize(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c.is_numeric() {
            if start < i {
                gpt2_split(&text[start..i], &mut out);
            }
            out.push(&text[i..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    if start < text.len() {
        gpt2_split(&text[start..], &mut out);
    }
    out
}

fn gpt2_split<'a>(text: &'a str, out: &mut Vec<&'a str>) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let at = |k: usize| chars.get(k).map(|&(_, c)| c);
    let offset = |k: usize| chars.get(k).map_or(text.len(), |&(i, _)| i);
    let run = |mut k: usize, cls: Class| {
        while at(k).is_some_and(|c| class(c) == cls) {
            k += 1;
        }
        k
    };
    let mut k = 0;
    while k < chars.len() {
        let c = chars[k].1;
        let end = if c == '\'' {
            let next: String = (1..=2).filter_map(|d| at(k + d)).collect();
            if ["re", "ve", "ll"].iter().any(|s| next.starts_with(s)) {
                Some(k + 3)
            } else if next.starts_with(['s', 't', 'm', 'd']) {
                Some(k + 2)
            } else {
                None
            }
        } else {
            None
        };
        let end = end.unwrap_or_else(|| {
            let (lead, first) = if c == ' ' {
                match at(k + 1) {
                    Some(n) if class(n) != Class::Space => (1, class(n)),
                    _ => (0, Class::Space),
                }
            } else {
                (0, class(c))
            };
            match first {
                Class::Space => {
                    let end = run(k, Class::Space);
                    // `\s+(?!\S)`: leave the last space to the word that follows.
                    if end < chars.len() && end - k > 1 {
                        end - 1
                    } else {
                        end
                    }
                }
                cls => run(k + lead, cls),
            }
        });
        out.push(&text[offset(k)..offset(end)]);
        k = end;
    }
}

/// Qwen2's pre-tokenizer, the pattern
/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
/// matched leftmost-first at each position, by hand (linear in the text).
pub fn qwen2_split(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let at = |k: usize| chars.get(k).map(|&(_, c)| c);
    let offset = |k: usize| chars.get(k).map_or(text.len(), |&(i, _)| i);
    let newline = |c: char| c == '\r' || c == '\n';
    let run = |mut k: usize, keep: &dyn Fn(char) -> bool| {
        while at(k).is_some_and(keep) {
            k += 1;
        }
        k
    };
    let mut out = Vec::new();
    let mut k = 0;
    while k < chars.len() {
        let c = chars[k].1;
        let next = at(k + 1);
        let contraction = (c == '\'').then(|| {
            let two: String = (1..=2)
                .filter_map(|d| at(k + d))
                .flat_map(char::to_lowercase)
                .collect();
            if ["re", "ve", "ll"].iter().any(|s| two.starts_with(s)) {
                Some(k + 3)
            } else if two.starts_with(['s', 't', 'm', 'd']) {
                Some(k + 2)
            } else {
                None
            }
        });
        let end = if let Some(Some(end)) = contraction {
            end
        } else if class(c) == Class::Letter {
            run(k, &|c| class(c) == Class::Letter)
        } else if !newline(c)
            && class(c) != Class::Number
            && next.is_some_and(|n| class(n) == Class::Letter)
        {
            run(k + 1, &|c| class(c) == Class::Letter)
        } else if class(c) == Class::Number {
            k + 1
        } else if class(c) == Class::Other
            || (c == ' ' && next.is_some_and(|n| class(n) == Class::Other))
        {
            let lead = usize::from(c == ' ');
            let end = run(k + lead, &|c| class(c) == Class::Other);
            run(end, &newline)
        } else {
            // Whitespace: up to its last newline, else all but the last space before a word.
            let end = run(k, &|c| class(c) == Class::Space);
            match (k..end).rev().find(|&j| at(j).is_some_and(newline)) {
                Some(j) => j + 1,
                None if end < chars.len() && end - k > 1 => end - 1,
                None => end,
            }
        };
        out.push(&text[offset(k)..offset(end)]);
        k = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen2_pre_tokenizer_splits_as_its_pattern() {
        let split = qwen2_split;
        assert_eq!(
            split("Hello world 123"),
            ["Hello", " world", " ", "1", "2", "3"]
        );
        assert_eq!(
            split("don't DON'T We'LL"),
            ["don", "'t", " DON", "'T", " We", "'LL"]
        );
        assert_eq!(split("(hello)\n\nbye"), ["(hello", ")\n\n", "bye"]);
        assert_eq!(split("x\n  y"), ["x", "\n", " ", " y"]);
        assert_eq!(split("a  b"), ["a", " ", " b"]);
        assert_eq!(split("a ?!b"), ["a", " ?!", "b"]);
        assert_eq!(split("((x"), ["((", "x"]);
        assert_eq!(split(" \t\n \n  end  "), [" \t\n \n", " ", " end", "  "]);
        assert_eq!(split("3.5km"), ["3", ".", "5", "km"]);
        assert_eq!(split("'x"), ["'x"]);
        assert_eq!(split("naïve café"), ["naïve", " café"]);
        // Whatever the text, the words cover it exactly.
        for text in ["", " ", "\n", "'", "''s", "a\r\nb", "!!\n\n", "٣٤ x"] {
            assert_eq!(split(text).concat(), text, "{text:?}");
        }
    }

    #[test]
    fn pre_tokenizer_splits_as_gpt2_with_single_digits() {
        assert_eq!(pre_tokenize("Hello, world!"), ["Hello", ",", " world", "!"]);
        assert_eq!(
            pre_tokenize("I have 1234 apples\n\n  and  two\tpears."),
            [
                "I", " have", " ", "1", "2", "3", "4", " apples", "\n\n ", " and", " ", " two",
                "\t", "pears", "."
            ]
        );
        assert_eq!(
            pre_tokenize("you'll we've I'm"),
            ["you", "'ll", " we", "'ve", " I", "'m"]
        );
        assert_eq!(pre_tokenize("  lead"), [" ", " lead"]);
        assert_eq!(pre_tokenize("trail   "), ["trail", "   "]);
        assert_eq!(pre_tokenize("a ?!b"), ["a", " ?!", "b"]);
    }

    #[test]
    fn byte_chars_are_a_bijection() {
        let chars = byte_chars();
        let set: std::collections::HashSet<char> = chars.iter().copied().collect();
        assert_eq!(set.len(), 256);
        assert_eq!(chars[b' ' as usize], 'Ġ');
        assert_eq!(chars[b'\n' as usize], 'Ċ');
    }

    /// A toy vocabulary: all bytes, then merges that build "hello" and " world".
    fn toy() -> Tokenizer {
        let chars = byte_chars();
        let mut tokens: Vec<String> = vec!["<|im_start|>".into()];
        tokens.extend((0..=255u8).map(|b| chars[b as usize].to_string()));
        let merges = [
            "h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "Ġwor l", "Ġworl d",
        ];
        for m in merges {
            tokens.push(m.replace(' ', ""));
        }
        let mut types = vec![1; tokens.len()];
        types[0] = 3;
        let merges: Vec<String> = merges.iter().map(|s| s.to_string()).collect();
        Tokenizer::new("gpt2", &tokens, &types, &merges).unwrap()
    }

    #[test]
    fn merges_apply_by_rank_and_decode_round_trips() {
        let t = toy();
        let ids = t.encode("hello world");
        assert_eq!(t.decode(&ids), "hello world");
        assert_eq!(ids.len(), 2, "{ids:?}");
        assert_eq!(t.control("<|im_start|>"), Some(0));
        // Spelled in text, a control token is just characters.
        let typed = t.encode("<|im_start|>");
        assert!(!typed.contains(&0));
        assert_eq!(t.decode(&typed), "<|im_start|>");
        assert_eq!(t.decode(&t.encode("Ünïcödé 東京 🙂")), "Ünïcödé 東京 🙂");
    }

    #[test]
    fn any_text_round_trips_and_pieces_cover_it() {
        let t = toy();
        let alphabet: Vec<char> = "ab Z9 0'sllve\n\t\r  .,!?-é東🙂\u{0}\u{7f}\u{a0}\u{2028}ʼ"
            .chars()
            .collect();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 24) as usize;
            let text: String = (0..len)
                .map(|i| alphabet[((seed >> (i % 8 * 8)) as usize + i * 7) % alphabet.len()])
                .collect();
            assert_eq!(pre_tokenize(&text).concat(), text, "{text:?}");
            assert_eq!(t.decode(&t.encode(&text)), text, "{text:?}");
        }
    }

    /// The merge as it was: rescans the word once per rule applied (O(n²) on a long word).
    fn merge_by_rescanning(t: &Tokenizer, word: &mut Vec<u32>) {
        while word.len() > 1 {
            let best = word
                .windows(2)
                .enumerate()
                .filter_map(|(i, w)| t.merges.get(&(w[0], w[1])).map(|&(r, m)| (r, i, m)))
                .min();
            let Some((_, at, merged)) = best else {
                return;
            };
            let (l, r) = (word[at], word[at + 1]);
            let mut i = 0;
            let mut next = Vec::with_capacity(word.len());
            while i < word.len() {
                if i + 1 < word.len() && word[i] == l && word[i + 1] == r {
                    next.push(merged);
                    i += 2;
                } else {
                    next.push(word[i]);
                    i += 1;
                }
            }
            *word = next;
        }
    }

    /// A vocabulary learned like BPE's own training (the most frequent pair of a corpus,
    /// round after round), so that its merges are ordered as real ones are.
    fn trained() -> Tokenizer {
        let chars = byte_chars();
        let spell = |bytes: &[u8]| -> String { bytes.iter().map(|&b| chars[b as usize]).collect() };
        let mut tokens: Vec<String> = (0..=255u8).map(|b| chars[b as usize].to_string()).collect();
        let corpus = "the quick brown fox jumps over the lazy dog; the other dogs sleep \
                      there then, and theirs is the best of the rest. aaaa abab baba";
        let mut words: Vec<Vec<Vec<u8>>> = pre_tokenize(corpus)
            .iter()
            .map(|w| w.bytes().map(|b| vec![b]).collect())
            .collect();
        let mut merges = Vec::new();
        for _ in 0..120 {
            let mut counts: HashMap<(Vec<u8>, Vec<u8>), usize> = HashMap::new();
            for w in &words {
                for p in w.windows(2) {
                    *counts.entry((p[0].clone(), p[1].clone())).or_default() += 1;
                }
            }
            let Some(((l, r), _)) = counts
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            else {
                break;
            };
            merges.push(format!("{} {}", spell(&l), spell(&r)));
            let joined: Vec<u8> = [l.clone(), r.clone()].concat();
            tokens.push(spell(&joined));
            for w in &mut words {
                let mut i = 0;
                while i + 1 < w.len() {
                    if w[i] == l && w[i + 1] == r {
                        w[i] = joined.clone();
                        w.remove(i + 1);
                    }
                    i += 1;
                }
            }
        }
        let types = vec![1; tokens.len()];
        Tokenizer::new("gpt2", &tokens, &types, &merges).unwrap()
    }

    fn random_text(seed: &mut u64, len: usize, alphabet: &[u8]) -> String {
        (0..len)
            .map(|_| {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 7;
                *seed ^= *seed << 17;
                char::from(alphabet[(*seed % alphabet.len() as u64) as usize])
            })
            .collect()
    }

    #[test]
    fn the_heap_merge_gives_the_tokens_of_the_rescanning_merge() {
        let t = trained();
        assert!(t.merges.len() >= 60, "{}", t.merges.len());
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let samples = [
            "the quick brown fox jumps over the lazy dog".to_string(),
            "There, then: theirs is the best of the rest!".into(),
            "aaaaaaaaaaaaaaaaaaaaaabababababababbbbbbaaa".into(),
        ];
        let random = (0..400).map(|i| random_text(&mut seed, 1 + i % 300, b"theabrosdg ,.aaa"));
        for text in samples.into_iter().chain(random) {
            for piece in pre_tokenize(&text) {
                let bytes: Vec<u32> = piece
                    .bytes()
                    .filter_map(|b| t.byte_token[b as usize])
                    .collect();
                let (mut heap, mut rescan) = (bytes.clone(), bytes);
                t.merge(&mut heap);
                merge_by_rescanning(&t, &mut rescan);
                assert_eq!(heap, rescan, "{piece:?}");
            }
        }
    }

    #[test]
    fn a_long_word_without_spaces_costs_work_linear_in_its_length() {
        let t = trained();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let letters: Vec<u8> = (b'a'..=b'z').collect();
        for len in [4_000usize, 40_000, 400_000] {
            let text = random_text(&mut seed, len, &letters);
            assert_eq!(pre_tokenize(&text).len(), 1, "one pre-token");
            let mut word: Vec<u32> = text
                .bytes()
                .filter_map(|b| t.byte_token[b as usize])
                .collect();
            let looked = t.merge(&mut word);
            // Each byte starts at most one candidate pair and each merge adds at most two.
            assert!(looked <= 3 * len, "{len} letters: {looked} heap entries");
            assert_eq!(t.decode(&word), text);
        }
        // Text of repeated pairs merges at every position: still bounded.
        let text = "ab".repeat(200_000);
        let mut word: Vec<u32> = text
            .bytes()
            .filter_map(|b| t.byte_token[b as usize])
            .collect();
        let looked = t.merge(&mut word);
        assert!(looked <= 3 * text.len(), "{looked}");
        assert_eq!(t.decode(&word), text);
    }

    #[test]
    fn text_stream_holds_back_a_split_character() {
        let t = toy();
        let ids = t.encode("é🙂");
        assert_eq!(ids.len(), 6); // byte tokens: 2 + 4
        let mut s = TextStream::default();
        let out: Vec<String> = ids.iter().map(|&id| s.push(&t, id)).collect();
        assert_eq!(out, ["", "é", "", "", "", "🙂"]);
    }
}
