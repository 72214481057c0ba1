//! Text → Piper phoneme ids: clauses split the way espeak-ng splits them (its command line
//! drops punctuation, so the clause ends are kept here), IPA from the `espeak-ng` program
//! (run, never linked: it is GPL), and each sentence as `^ _ p₁ _ p₂ _ … pₙ _ $`.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};

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

/// IPA for each clause, one `espeak-ng -q --ipa -v VOICE` for all of them (one line each);
/// when espeak splits a clause further, one run per clause.
fn espeak_lines(voice: &str, clauses: &[String]) -> Result<Vec<String>, ModelError> {
    let run = |input: String| -> Result<Vec<String>, ModelError> {
        let fail = |e: &dyn std::fmt::Display| {
            ModelError::Failed(format!(
                "espeak-ng (the Debian package espeak-ng) failed: {e}"
            ))
        };
        let mut child = Command::new("espeak-ng")
            .args(["-q", "--ipa", "-v", voice])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| fail(&e))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(input.as_bytes()).map_err(|e| fail(&e))?;
        }
        let out = child.wait_with_output().map_err(|e| fail(&e))?;
        if !out.status.success() {
            return Err(fail(&out.status));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .collect())
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
pub fn phonemize(voice: &str, text: &str) -> Result<Vec<String>, ModelError> {
    let clauses = split_clauses(text);
    if clauses.is_empty() {
        return Ok(Vec::new());
    }
    let spoken: Vec<String> = clauses.iter().map(|(c, _)| c.clone()).collect();
    let ipa = espeak_lines(voice, &spoken)?;
    let (mut sentences, mut cur) = (Vec::new(), String::new());
    for ((_, term), ph) in clauses.iter().zip(ipa) {
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
    fn espeak_gives_ipa_with_the_clause_punctuation() {
        let s = phonemize("en-us", "Hello, world. How are you?").expect("espeak-ng on PATH");
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].contains(", ") && s[0].ends_with('.'), "{s:?}");
        assert!(s[1].ends_with('?'), "{s:?}");
        assert!(s[0].contains('ˈ'), "stress marks: {s:?}");
    }
}
