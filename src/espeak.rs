//! The `espeak-ng` program as the Piper voice's [`Phonemizer`]: run once per clause batch
//! (never linked: it is GPL), its IPA read from standard output. The Debian package
//! `espeak-ng` provides it; `./scripts/serve` and the tests expect it on `PATH`.

use std::io::Write;
use std::process::{Command, Stdio};

use duet_models::piper::phonemes::Phonemizer;

/// Output read from one run at most (a clause batch's IPA is a few KiB).
const MAX_OUTPUT: usize = 1 << 20;

/// Runs `espeak-ng -q --ipa -v VOICE` with the clauses on standard input.
#[derive(Clone, Copy, Debug, Default)]
pub struct EspeakNg;

impl Phonemizer for EspeakNg {
    fn ipa(&mut self, voice: &str, input: &str) -> Result<String, String> {
        let mut child = Command::new("espeak-ng")
            .args(["-q", "--ipa", "-v", voice])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(input.as_bytes())
                .map_err(|e| e.to_string())?;
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(out.status.to_string());
        }
        let text = &out.stdout[..out.stdout.len().min(MAX_OUTPUT)];
        Ok(String::from_utf8_lossy(text).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use duet_models::piper::phonemes::phonemize;

    #[test]
    fn espeak_gives_ipa_with_the_clause_punctuation() {
        let s = phonemize(&mut EspeakNg, "en-us", "Hello, world. How are you?")
            .expect("espeak-ng on PATH");
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].contains(", ") && s[0].ends_with('.'), "{s:?}");
        assert!(s[1].ends_with('?'), "{s:?}");
        assert!(s[0].contains('ˈ'), "stress marks: {s:?}");
    }
}
