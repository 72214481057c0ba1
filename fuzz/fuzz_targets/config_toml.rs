//! Fuzzes the config file's loader (`duet_config_file::tokens`: TOML text to `duet serve`
//! tokens) with flags of every kind: a switch, one-value flags, a list flag with a
//! separator (like `cors_origins` and `sip_allow`) and one without. Two kinds of input, by the first byte:
//! - raw text;
//! - a file built from fuzzed lines that put a secret in value positions (quoted,
//!   unquoted, in arrays, between fuzzed fragments), the way an API key sits in a file.
//!
//! It must never panic; an error never shows the secret unless it is an unknown key's name
//! (keys are named on purpose; values never are); a syntax error is one line and its line
//! and column lie in the text; every token is its flag's `--long` or `--long=value`, only
//! for keys not overridden, as many as the TOML value says, and no list value is empty or
//! has an empty piece between separators.
#![no_main]

use duet_config_file::{tokens, Error, Flag, Kind};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "sk-live-Zq8hX3";

/// `duet serve`'s kinds of flag (the real ones come from clap in the `duet` crate; `tags`
/// stands for a list flag without a separator, which `duet serve` does not have yet).
fn flags() -> Vec<Flag> {
    let flag = |id: &str, kind| Flag {
        id: id.into(),
        long: id.replace('_', "-"),
        kind,
    };
    vec![
        flag("insecure_no_auth", Kind::Switch),
        flag("api_key", Kind::One),
        flag("max_sessions", Kind::One),
        flag("host", Kind::One),
        flag(
            "cors_origins",
            Kind::List {
                delimiter: Some(','),
            },
        ),
        flag("tags", Kind::List { delimiter: None }),
    ]
}

/// One line of a file that holds the secret somewhere.
fn line(u: &mut Unstructured, flags: &[Flag]) -> Result<String> {
    let f = u.choose(flags)?;
    let key = match u.int_in_range(0..=4u8)? {
        0 => f.id.replace('_', "-"),
        1 => format!("\"{}\"", f.id),
        2 => u.arbitrary::<String>()?,
        _ => f.id.clone(),
    };
    let fragment = |u: &mut Unstructured| -> Result<String> {
        const BITS: &[&str] = &[
            "\"",
            "'",
            "\"\"\"",
            "'''",
            "[",
            "]",
            ",",
            "{",
            "}",
            "=",
            "\n",
            "#",
            "\\",
            " ",
            "\t",
            "\r\n",
            ".",
            "true",
            "1",
            "1979-05-27",
            "\\u00e9",
            "é",
        ];
        Ok(match u.int_in_range(0..=2u8)? {
            0 => String::new(),
            1 => (*u.choose(BITS)?).to_string(),
            _ => u.arbitrary::<String>()?,
        })
    };
    let value = match u.int_in_range(0..=7u8)? {
        0 => SECRET.to_string(),
        1 => format!("\"{SECRET}\""),
        2 => format!("\"{SECRET}"),
        3 => format!("[\"{SECRET}\", {SECRET}]"),
        4 => format!("[\"{SECRET},\", \"\"]"),
        5 => format!("'{SECRET}' {SECRET}"),
        6 => format!("{{ k = \"{SECRET}\" }}"),
        _ => format!("{}{SECRET}{}", fragment(u)?, fragment(u)?),
    };
    Ok(format!("{key} = {value}{}\n", fragment(u)?))
}

fn check(text: &str, flags: &[Flag], overridden_bits: u8) {
    let overridden = |id: &str| {
        flags
            .iter()
            .position(|f| f.id == id)
            .is_some_and(|i| overridden_bits & (1 << i) != 0)
    };
    match tokens(text, flags, overridden) {
        Err(e) => {
            let shown = e.to_string();
            if !matches!(e, Error::UnknownKey(_)) {
                assert!(!shown.contains(SECRET), "{text:?}: {shown}");
            }
            assert!(!shown.contains('\n'), "{text:?}: {shown}");
            if let Error::Syntax {
                at: Some((line, column)),
                ..
            } = e
            {
                let lines: Vec<&str> = text.split('\n').collect();
                assert!(line >= 1 && line <= lines.len(), "{text:?}: {shown}");
                let width = lines[line - 1].chars().count();
                assert!(column >= 1 && column <= width + 1, "{text:?}: {shown}");
            }
        }
        Ok(got) => {
            let table: toml::Table = text.parse().expect("the loader accepted it");
            for f in flags {
                let mine: Vec<&str> = got
                    .iter()
                    .filter(|t| t.key == f.id)
                    .map(|t| t.arg.as_str())
                    .collect();
                let value = table
                    .get(&f.id)
                    .or_else(|| table.get(&f.id.replace('_', "-")));
                if overridden(&f.id) || value.is_none() {
                    assert!(mine.is_empty(), "{text:?}: {mine:?}");
                    continue;
                }
                let value = value.expect("present");
                let long = format!("--{}", f.long);
                match f.kind {
                    Kind::Switch => {
                        let want: &[&str] = if value.as_bool() == Some(true) {
                            &[&long]
                        } else {
                            &[]
                        };
                        assert_eq!(mine, want, "{text:?}");
                    }
                    Kind::One => {
                        assert_eq!(mine.len(), 1, "{text:?}: {mine:?}");
                        assert!(!value.is_array(), "{text:?}");
                    }
                    Kind::List { delimiter } => {
                        let n = value.as_array().map_or(1, Vec::len);
                        assert_eq!(mine.len(), n, "{text:?}: {mine:?}");
                        for arg in &mine {
                            let v = arg.strip_prefix(&format!("{long}=")).expect("--long=");
                            assert!(!v.is_empty(), "{text:?}: {mine:?}");
                            if let Some(d) = delimiter {
                                assert!(v.split(d).all(|p| !p.is_empty()), "{text:?}: {mine:?}");
                            }
                        }
                    }
                }
                for arg in &mine {
                    assert!(
                        *arg == long || arg.starts_with(&format!("{long}=")),
                        "{text:?}: {arg}"
                    );
                }
            }
            assert!(
                got.iter().all(|t| flags.iter().any(|f| f.id == t.key)),
                "{text:?}"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let flags = flags();
    if mode & 1 == 0 {
        if let Ok(text) = std::str::from_utf8(rest) {
            check(text, &flags, mode >> 1);
        }
        return;
    }
    let mut u = Unstructured::new(rest);
    let mut text = String::new();
    while !u.is_empty() && text.len() < 4096 {
        match line(&mut u, &flags) {
            Ok(l) => text.push_str(&l),
            Err(_) => break,
        }
    }
    check(&text, &flags, mode >> 1);
});
