//! The config file's text as `duet serve` command-line tokens.
//!
//! Pure: text and a description of the flags in, tokens or one error out. The `duet` crate
//! describes its flags from clap, runs the tokens through clap's own parsers (so a bad
//! value is the same error as on the command line) and adds the file's name to errors. A
//! crate of its own, with `toml` as its only dependency, so that the `config_toml` fuzz
//! target runs this code without building the server.
//!
//! What a file may say:
//! - every key is a flag's name in snake case (`max_sessions`; `max-sessions` is accepted
//!   too, but not both), never `config`;
//! - a switch takes `true` or `false`;
//! - a one-value flag takes a string, an integer, a float or a boolean, never an array;
//! - a list flag (`cors_origins`) takes a non-empty array of such values, none of them an
//!   empty string or containing the flag's separator, or one string as on the command line
//!   (split at the separator, no piece empty).
//!
//! A syntax error reports its line and column and a reason that quotes nothing from the
//! file: the `toml` crate's own `Display` prints the offending line, which may hold the API
//! key.

use std::fmt;

#[cfg(test)]
mod tests;

/// How a flag takes its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A switch (`--insecure-no-auth`): `true` or `false`.
    Switch,
    /// One value.
    One,
    /// Several values (`--cors-origins a,b`); `delimiter` is the separator the flag splits
    /// each value at.
    List {
        /// The flag's value delimiter, if it has one.
        delimiter: Option<char>,
    },
}

/// One flag the file may set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flag {
    /// Its key: the flag's name in snake case (`max_sessions`).
    pub id: String,
    /// Its long name, without the dashes (`max-sessions`).
    pub long: String,
    /// How it takes its value.
    pub kind: Kind,
}

/// One command-line token from the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The flag's key ([`Flag::id`]).
    pub key: String,
    /// The token: `--long` for a switch, else `--long=value`.
    pub arg: String,
}

/// Why a file was refused. Its `Display` is the reason after the file's name
/// (`duet.toml: <reason>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// Not TOML: where (1-based line and column, in characters) when known, and a reason
    /// that quotes nothing from the file.
    Syntax {
        /// Line and column.
        at: Option<(usize, usize)>,
        /// What is wrong there.
        reason: String,
    },
    /// A key that is no flag (named: keys are not secret).
    UnknownKey(String),
    /// The key `config`.
    NestedConfig,
    /// A key's value has the wrong shape (the value is never quoted).
    Value {
        /// The flag's key.
        key: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Syntax {
                at: Some((line, column)),
                reason,
            } => write!(f, "not valid TOML at line {line}, column {column}: {reason}"),
            Error::Syntax { at: None, reason } => write!(f, "not valid TOML: {reason}"),
            Error::UnknownKey(key) => write!(
                f,
                "unknown key `{key}` (every key is a `duet serve` flag in snake case; see duet.example.toml)"
            ),
            Error::NestedConfig => write!(f, "`config` cannot name another file"),
            Error::Value { key, problem } => write!(f, "key `{key}` {problem}"),
        }
    }
}

impl std::error::Error for Error {}

/// The file's keys as command-line tokens, in the keys' sorted order, for the flags that
/// `overridden` says neither the command line nor the environment set (an overridden key
/// is checked only for being a flag; its value is not looked at).
pub fn tokens(
    text: &str,
    flags: &[Flag],
    overridden: impl Fn(&str) -> bool,
) -> Result<Vec<Token>, Error> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| Error::Syntax {
        at: e.span().map(|s| line_column(text, s.start)),
        reason: unquoted(e.message()),
    })?;
    let mut out = Vec::new();
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (key, value) in &table {
        let id = key.replace('-', "_");
        if id == "config" {
            return Err(Error::NestedConfig);
        }
        let Some(flag) = flags.iter().find(|f| f.id == id) else {
            return Err(Error::UnknownKey(key.clone()));
        };
        if let Some((_, first)) = seen.iter().find(|(i, _)| *i == flag.id) {
            return Err(Error::Value {
                key: flag.id.clone(),
                problem: format!("is given twice (as `{first}` and as `{key}`)"),
            });
        }
        seen.push((&flag.id, key));
        if overridden(&flag.id) {
            continue;
        }
        let args = flag_args(flag, value).map_err(|problem| Error::Value {
            key: flag.id.clone(),
            problem,
        })?;
        out.extend(args.into_iter().map(|arg| Token {
            key: flag.id.clone(),
            arg,
        }));
    }
    Ok(out)
}

/// One key's value as the flag's command-line tokens, or what is wrong with it.
fn flag_args(flag: &Flag, value: &toml::Value) -> Result<Vec<String>, String> {
    let long = &flag.long;
    Ok(match (flag.kind, value) {
        (Kind::Switch, toml::Value::Boolean(true)) => vec![format!("--{long}")],
        (Kind::Switch, toml::Value::Boolean(false)) => Vec::new(),
        (Kind::Switch, _) => return Err("must be true or false".into()),
        (Kind::One, toml::Value::Array(_)) => return Err("takes one value, not a list".into()),
        (Kind::One, v) => vec![format!("--{long}={}", scalar(v)?)],
        (Kind::List { .. }, toml::Value::Array(items)) if items.is_empty() => {
            return Err(
                "is an empty list: give at least one value, or leave the key out for the default"
                    .into(),
            )
        }
        (Kind::List { delimiter }, toml::Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(n, item)| Ok(format!("--{long}={}", list_item(n + 1, item, delimiter)?)))
            .collect::<Result<_, String>>()?,
        (Kind::List { delimiter }, v) => {
            let v = scalar(v)?;
            let empty = match delimiter {
                Some(d) => v.split(d).any(str::is_empty),
                None => v.is_empty(),
            };
            if empty {
                return Err(
                    "has an empty value: give each value, or leave the key out for the default"
                        .into(),
                );
            }
            vec![format!("--{long}={v}")]
        }
    })
}

/// Element `n` (from 1) of a list flag's array.
fn list_item(n: usize, item: &toml::Value, delimiter: Option<char>) -> Result<String, String> {
    let v = match item {
        toml::Value::Array(_) | toml::Value::Table(_) | toml::Value::Datetime(_) => {
            return Err(format!(
                "has a list whose element {n} is {} {}, not a value",
                article(item.type_str()),
                item.type_str()
            ))
        }
        v => scalar(v)?,
    };
    if v.is_empty() {
        return Err(format!("has a list whose element {n} is an empty string"));
    }
    if let Some(d) = delimiter.filter(|d| v.contains(*d)) {
        return Err(format!(
            "has a list whose element {n} contains `{d}`, which separates values: give each value as an element of its own"
        ));
    }
    Ok(v)
}

/// A TOML scalar as a flag's value.
fn scalar(v: &toml::Value) -> Result<String, String> {
    Ok(match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        other => {
            let t = other.type_str();
            return Err(format!("is {} {t}, not a flag value", article(t)));
        }
    })
}

fn article(type_str: &str) -> &'static str {
    if type_str.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// The 1-based line and column (in characters) of byte offset `at`.
pub fn line_column(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[start..].chars().count() + 1,
    )
}

/// The parser's message on one line, with anything it quotes from the file masked: its own
/// words quote only the characters it expected (one or two, like `"` or `]]`), while a
/// duplicate key's message names the key (and its table) in backticks.
pub fn unquoted(message: &str) -> String {
    let mut out = String::new();
    let mut rest = message.trim();
    while let Some(i) = rest.find(['`', '"']) {
        out.push_str(&rest[..i]);
        let q = &rest[i..i + 1];
        let after = &rest[i + 1..];
        // A quoted segment ends at the next same quote: a `"` between backticks is inside.
        match after.find(q) {
            Some(j) if after[..j].chars().count() <= 2 => {
                out.push_str(&rest[i..i + 1 + j + 1]);
                rest = &after[j + 1..];
            }
            Some(j) => {
                out.push_str(q);
                out.push('…');
                out.push_str(q);
                rest = &after[j + 1..];
            }
            None => {
                out.push('…');
                rest = "";
            }
        }
    }
    out.push_str(rest);
    let lines: Vec<&str> = out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        "invalid TOML".into()
    } else {
        lines.join("; ")
    }
}
