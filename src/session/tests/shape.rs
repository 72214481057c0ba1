//! The session's shape, counted from its source so that it cannot grow back unnoticed: the
//! fields of `struct Session` and the `fn` items of every `impl Session` block in
//! `src/session/*.rs` (test files and test modules excluded). The parts (the `Outbox`, the
//! answer side `Reply` with the `Cx` it borrows for a step, `InputState`, the
//! `Conversation`, `Transcripts`, the `Lease`, `Timers`, `Metering`) own their behaviour and
//! return what happened; `Session` keeps the dispatch and the fields that span them. Before
//! the parts took their behaviour (issue 31) it had 28 fields and 139 methods; the issue's
//! target was at most 15 and 40.
//!
//! The method: in each file, a block opens at a line `impl Session {` (or `impl
//! super::Session {`) in the first column and
//! closes at the next `}` in the first column; a method is a line in it, indented four
//! spaces, that starts with `fn `, `pub fn ` or `pub(...) fn `. A field is a line indented
//! four spaces inside `pub struct Session {` that starts with an identifier (or `pub...`)
//! followed by `:`. Run `cargo test -p duet --lib session::tests::shape -- --nocapture` to
//! see the figures per file.

use std::path::Path;

/// The most fields `struct Session` may have (lower it when a change removes some).
const MAX_FIELDS: usize = 11;
/// The most methods all `impl Session` blocks together may have (lower it likewise).
const MAX_METHODS: usize = 40;

/// The line, less four spaces of indent and any `pub`/`pub(..)`, when it is at depth one.
fn at_depth_one(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("    ")?;
    if rest.starts_with(' ') {
        return None;
    }
    let rest = match rest.strip_prefix("pub") {
        Some(r) if r.starts_with('(') => r.split_once(')').map_or(r, |(_, r)| r).trim_start(),
        Some(r) if r.starts_with(' ') => r.trim_start(),
        _ => rest,
    };
    Some(rest)
}

fn is_method(line: &str) -> bool {
    at_depth_one(line).is_some_and(|r| r.starts_with("fn ") || r.starts_with("async fn "))
}

fn is_field(line: &str) -> bool {
    at_depth_one(line).is_some_and(|r| {
        let name: String = r
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        !name.is_empty() && r[name.len()..].starts_with(':')
    })
}

/// Counts the lines matching `pred` inside the blocks opened by the line `open`.
fn count_in_blocks(text: &str, open: &str, pred: fn(&str) -> bool) -> usize {
    let mut inside = false;
    let mut n = 0;
    for line in text.lines() {
        if inside {
            if line.starts_with('}') {
                inside = false;
            } else if pred(line) {
                n += 1;
            }
        } else if line == open {
            inside = true;
        }
    }
    n
}

/// (file, fields, methods) for every source file of the session, sorted by name.
fn figures() -> Vec<(String, usize, usize)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/session");
    let mut rows = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("src/session is readable") {
        let path = entry.expect("a directory entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if !name.ends_with(".rs") || name.ends_with("_tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a source file is readable");
        let fields = count_in_blocks(&text, "pub struct Session {", is_field);
        let methods = count_in_blocks(&text, "impl Session {", is_method)
            + count_in_blocks(&text, "impl super::Session {", is_method);
        rows.push((name, fields, methods));
    }
    rows.sort();
    rows
}

#[test]
fn the_session_stays_small() {
    let rows = figures();
    for (name, fields, methods) in &rows {
        if *fields + *methods > 0 {
            println!("{name:16} fields {fields:3} methods {methods:3}");
        }
    }
    let fields: usize = rows.iter().map(|r| r.1).sum();
    let methods: usize = rows.iter().map(|r| r.2).sum();
    println!("total            fields {fields:3} methods {methods:3}");
    assert!(fields > 0 && methods > 0, "the counter found the session");
    assert!(
        fields <= MAX_FIELDS,
        "Session has {fields} fields (at most {MAX_FIELDS})"
    );
    assert!(
        methods <= MAX_METHODS,
        "Session has {methods} methods (at most {MAX_METHODS})"
    );
}

#[test]
fn the_counter_reads_fields_and_methods() {
    let src = "pub struct Session {\n    /// doc: x\n    pub(super) a: u8,\n    b: Option<u8>,\n}\nimpl Session {\n    pub fn x(&self) {\n        fn inner() {}\n    }\n    fn y(&self) {}\n    pub(super) async fn z(&self) {}\n}\nfn free() {}\n";
    assert_eq!(count_in_blocks(src, "pub struct Session {", is_field), 2);
    assert_eq!(count_in_blocks(src, "impl Session {", is_method), 3);
}
