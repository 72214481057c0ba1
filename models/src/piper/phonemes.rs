//! Text → Piper phoneme ids: clauses split the way espeak-ng splits them (its command line
//! drops punctuation, so the clause ends are kept here), IPA through the [`Phonemizer`] port
//! (the server implements it with the `espeak-ng` program: run, never linked, as it is GPL),
//! and each sentence as `^ _ p₁ _ p₂ _ … pₙ _ $`.

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;

use crate::ModelError;

const PUNCT: &[char] = &['.', '?', '!', ',', ':', ';', '\u{2026}'];
const CLOSERS: &[char] = &['"', '\'', ')', ']', '\u{201d}', '\u{2019}'];

/// The clauses of `text` (with their punctuation, not the quotes after it) and the
/// punctuation that ends each (`'\0'`: none). A run of clause
/// punctuation ends a clause when a space or the end follows (after closing quotes or
/// brackets); a `.` before a lowercase word does not (`a.m. on`); `...` and `…` count as
/// `,`; spaced dashes as `;`; clauses without a letter or digit are dropped.
pub fn split_clauses(text: &str) -> Vec<(String, char)> {
    let norm = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let norm = norm.replace(" \u{2013} ", "; ").replace(" \u{2014} ", "; ");
    let t: Vec<char> = norm.chars().collect();
    let (n, mut out, mut start, mut i) = (t.len(), Vec::new(), 0usize, 0usize);
    let alnum = |s: &[char]| s.iter().any(|c| c.is_alphanumeric());
    while i < n {
        if !PUNCT.contains(&t[i]) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < n && PUNCT.contains(&t[j]) {
            j += 1;
        }
        let mut k = j;
        while k < n && CLOSERS.contains(&t[k]) {
            k += 1;
        }
        if k == n || t[k] == ' ' {
            let mut term = t[i];
            if (j - i >= 2 && t[i] == '.') || term == '\u{2026}' {
                term = ',';
            }
            let next_lower = k + 1 < n && t[k + 1].is_lowercase();
            if !alnum(&t[start..i]) {
                start = k;
            } else if !(term == '.' && next_lower) {
                let clause: String = t[start..j].iter().collect();
                out.push((clause.trim().to_string(), term));
                start = k;
            }
        }
        i = j;
    }
    if start < n && alnum(&t[start..]) {
        let clause: String = t[start..].iter().collect();
        out.push((clause.trim().to_string(), '\0'));
    }
    out
}

/// The port that gives IPA: `espeak-ng -q --ipa -v VOICE` on `input` (one clause a line),
/// its output as text. The driver implements it (the server with the `espeak-ng` program);
/// any `FnMut(voice, input) -> Result<String, String>` is one.
pub trait Phonemizer: Send {
    /// espeak-ng's IPA for `input` with `voice`, or why it failed.
    fn ipa(&mut self, voice: &str, input: &str) -> Result<String, String>;
}

impl<F: FnMut(&str, &str) -> Result<String, String> + Send> Phonemizer for F {
    fn ipa(&mut self, voice: &str, input: &str) -> Result<String, String> {
        self(voice, input)
    }
}

/// IPA for each clause, one run for all of them (one line each); when espeak splits a
/// clause further, one run per clause.
fn espeak_lines(
    ipa: &mut dyn Phonemizer,
    voice: &str,
    clauses: &[String],
) -> Result<Vec<String>, ModelError> {
    let mut run = |input: String| -> Result<Vec<String>, ModelError> {
        let out = ipa.ipa(voice, &input).map_err(|e| {
            ModelError::Failed(format!(
                "espeak-ng (the Debian package espeak-ng) failed: {e}"
            ))
        })?;
        Ok(out.lines().map(|l| l.trim().to_string()).collect())
    };
    let out = run(clauses.join("\n") + "\n")?;
    if out.len() == clauses.len() {
        return Ok(out);
    }
    clauses
        .iter()
        .map(|c| Ok(run(c.clone() + "\n")?.join(" ")))
        .collect()
}

/// `text` as one phoneme string per sentence, in Piper's form (clause punctuation kept).
pub fn phonemize(
    ipa: &mut dyn Phonemizer,
    voice: &str,
    text: &str,
) -> Result<Vec<String>, ModelError> {
    let clauses = split_clauses(text);
    if clauses.is_empty() {
        return Ok(Vec::new());
    }
    let spoken: Vec<String> = clauses.iter().map(|(c, _)| c.clone()).collect();
    let lines = espeak_lines(ipa, voice, &spoken)?;
    let (mut sentences, mut cur) = (Vec::new(), String::new());
    for ((_, term), ph) in clauses.iter().zip(lines) {
        // NFD as piper-phonemize; "(en)"-style language switches dropped.
        let mut flag = false;
        for c in ph.nfd() {
            match c {
                '(' => flag = true,
                ')' => flag = false,
                _ if !flag => cur.push(c),
                _ => {}
            }
        }
        match term {
            '.' | '?' | '!' => {
                cur.push(*term);
                sentences.push(std::mem::take(&mut cur));
            }
            ',' | ':' | ';' => {
                cur.push(*term);
                cur.push(' ');
            }
            _ => cur.push(' '),
        }
    }
    if !cur.trim().is_empty() {
        sentences.push(cur.trim_end().to_string());
    }
    Ok(sentences)
}

/// The voice's phoneme ids for one sentence: `^ _ p₁ _ … pₙ _ $`; characters the voice does
/// not know are skipped.
pub fn to_ids(map: &HashMap<char, i64>, phonemes: &str) -> Vec<i64> {
    let id = |c: char| map.get(&c).copied().unwrap_or(0);
    let pad = id('_');
    let mut ids = vec![id('^'), pad];
    for c in phonemes.chars() {
        if let Some(&p) = map.get(&c) {
            ids.extend([p, pad]);
        }
    }
    ids.push(id('$'));
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clauses_end_where_espeak_ends_them() {
        let c = split_clauses("Hello, world! It's 9 a.m. on Monday... right?  \"Yes.\" OK");
        assert_eq!(
            c,
            vec![
                ("Hello,".to_string(), ','),
                ("world!".to_string(), '!'),
                ("It's 9 a.m. on Monday...".to_string(), ','),
                ("right?".to_string(), '?'),
                ("\"Yes.".to_string(), '.'),
                ("OK".to_string(), '\0'),
            ]
        );
        assert!(split_clauses(" ... !? ").is_empty());
        assert_eq!(
            split_clauses("a – b"),
            vec![("a;".into(), ';'), ("b".into(), '\0')]
        );
    }

    #[test]
    fn ids_pad_every_phoneme_and_skip_unknown_ones() {
        let map: HashMap<char, i64> = [('_', 0), ('^', 1), ('$', 2), ('a', 14), ('b', 15)].into();
        assert_eq!(to_ids(&map, "ab?a"), vec![1, 0, 14, 0, 15, 0, 14, 0, 2]);
    }

    #[test]
    fn each_clause_gets_its_line_and_its_punctuation_back() {
        let mut calls = Vec::new();
        // Like espeak-ng: a line per clause, its punctuation dropped, language marks kept.
        let mut fake = |voice: &str, input: &str| {
            calls.push((voice.to_string(), input.to_string()));
            Ok(input
                .lines()
                .map(|l| {
                    format!(
                        "(en){}",
                        l.trim_end_matches(|c: char| c.is_ascii_punctuation())
                            .to_lowercase()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"))
        };
        let s = phonemize(&mut fake, "en-us", "Hello, world. How are you?").unwrap();
        assert_eq!(s, ["hello, world.", "how are you?"]);
        assert_eq!(
            calls,
            [(
                "en-us".to_string(),
                "Hello,\nworld.\nHow are you?\n".to_string()
            )]
        );
        let mut failing = |_: &str, _: &str| Err("not installed".to_string());
        let e = phonemize(&mut failing, "en-us", "Hi.")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("espeak-ng") && e.contains("not installed"),
            "{e}"
        );
    }
}
