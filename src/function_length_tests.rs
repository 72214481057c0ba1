//! The function-length check: no function in the crates' own code is over 60 lines.
//!
//! It reads the sources of every crate of the workspace (not `vendor/`, `fuzz/`, tests,
//! examples or benchmarks), blanks comments and string and character literals, skips
//! `#[cfg(test)] mod` blocks and `*_tests.rs`, `tests.rs`, `testutil.rs` files, and measures
//! each `fn` from the line that names it to the line of its closing brace (a nested function
//! counts inside its parent and on its own). `docs/architecture.md` explains the rule.

use std::path::{Path, PathBuf};

/// The most lines a function may have.
const MAX_LINES: usize = 60;

/// The source folders checked, relative to the workspace root.
const ROOTS: &[&str] = &[
    "src",
    "protocol/src",
    "media/src",
    "signaling/src",
    "models/src",
    "client/src",
    "config-file/src",
];

/// Functions still over the limit, as `file:name`, each to be split (the list only shrinks:
/// a function listed here that is short now fails the test too, so it is taken off).
const NOT_YET_SPLIT: &[&str] = &[];

/// A function: its length in lines, file, first line and name.
#[derive(Debug)]
struct Function {
    lines: usize,
    file: String,
    line: usize,
    name: String,
}

#[test]
fn no_function_is_over_sixty_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut functions = Vec::new();
    for dir in ROOTS {
        for file in rust_files(&root.join(dir)) {
            let text = std::fs::read_to_string(&file).expect("read a source file");
            let name = file
                .strip_prefix(root)
                .unwrap_or(&file)
                .display()
                .to_string();
            functions.extend(measure(&name, &text));
        }
    }
    assert!(
        functions.len() > 1000,
        "found only {} functions",
        functions.len()
    );
    let key = |f: &Function| format!("{}:{}", f.file, f.name);
    let mut long: Vec<&Function> = functions
        .iter()
        .filter(|f| f.lines > MAX_LINES && !NOT_YET_SPLIT.contains(&key(f).as_str()))
        .collect();
    long.sort_by_key(|f| std::cmp::Reverse(f.lines));
    let split: Vec<&&str> = NOT_YET_SPLIT
        .iter()
        .filter(|k| {
            !functions
                .iter()
                .any(|f| f.lines > MAX_LINES && key(f) == **k)
        })
        .collect();
    assert!(
        split.is_empty(),
        "short now (or gone): take them off NOT_YET_SPLIT: {split:?}"
    );
    let list: Vec<String> = long
        .iter()
        .map(|f| format!("{:4} lines  {}:{}  {}", f.lines, f.file, f.line, f.name))
        .collect();
    assert!(
        long.is_empty(),
        "{} functions are over {MAX_LINES} lines:\n{}",
        long.len(),
        list.join("\n")
    );
}

/// The `.rs` files under `dir` that are not tests.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "tests" {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") && !is_test_file(&name) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn is_test_file(name: &str) -> bool {
    name.ends_with("_tests.rs") || matches!(name, "tests.rs" | "testutil.rs" | "test_util.rs")
}

/// Every function of one file outside `#[cfg(test)] mod` blocks.
fn measure(file: &str, text: &str) -> Vec<Function> {
    let code = blank(text);
    let bytes = code.as_bytes();
    let line_of = |pos: usize| bytes[..pos].iter().filter(|&&b| b == b'\n').count() + 1;
    let excluded = test_modules(&code);
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(found) = code[at..].find("fn ") {
        let start = at + found;
        at = start + 3;
        if start > 0 && is_ident(bytes[start - 1]) {
            continue;
        }
        let name: String = code[at..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() || excluded.iter().any(|&(a, b)| a <= start && start <= b) {
            continue;
        }
        let Some(open) = body_start(bytes, at) else {
            continue;
        };
        let close = match_brace(bytes, open);
        out.push(Function {
            lines: line_of(close) - line_of(start) + 1,
            file: file.to_string(),
            line: line_of(start),
            name,
        });
    }
    out
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The `{` that opens the body of the function whose signature starts at `from`, or `None`
/// for a declaration without a body (`;` first, outside parentheses).
fn body_start(bytes: &[u8], from: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (i, &b) in bytes.iter().enumerate().skip(from) {
        match b {
            b'(' => depth += 1,
            b')' => depth -= 1,
            b';' if depth == 0 => return None,
            b'{' if depth == 0 => return Some(i),
            _ => {}
        }
    }
    None
}

/// The position of the brace that closes the one at `open`.
fn match_brace(bytes: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    bytes.len().saturating_sub(1)
}

/// The byte ranges of `#[cfg(test)] mod NAME { … }` blocks.
fn test_modules(code: &str) -> Vec<(usize, usize)> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(found) = code[at..].find("#[cfg(test)]") {
        let start = at + found;
        at = start + 1;
        let rest = code[start + "#[cfg(test)]".len()..].trim_start();
        let rest = rest.strip_prefix("pub(crate)").unwrap_or(rest).trim_start();
        let rest = rest.strip_prefix("pub(super)").unwrap_or(rest).trim_start();
        let rest = rest.strip_prefix("pub").unwrap_or(rest).trim_start();
        let Some(rest) = rest.strip_prefix("mod ") else {
            continue;
        };
        let after_name = rest
            .trim_start()
            .trim_start_matches(|c: char| c.is_alphanumeric() || c == '_');
        if !after_name.trim_start().starts_with('{') {
            continue; // `mod x;`: a file of its own, skipped by name or measured
        }
        let open = code.len() - after_name.trim_start().len();
        out.push((start, match_brace(bytes, open)));
    }
    out
}

/// `text` with comments and the contents of string and character literals replaced by
/// spaces (newlines kept), so braces in them do not count.
fn blank(text: &str) -> String {
    let src: Vec<char> = text.chars().collect();
    let n = src.len();
    let mut out = String::with_capacity(text.len());
    let blanked = |out: &mut String, chars: &[char]| {
        for &c in chars {
            out.push(if c == '\n' { '\n' } else { ' ' });
        }
    };
    let ident_before = |i: usize| i > 0 && (src[i - 1].is_alphanumeric() || src[i - 1] == '_');
    let mut i = 0;
    while i < n {
        let c = src[i];
        let next = src.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            let end = (i..n).find(|&j| src[j] == '\n').unwrap_or(n);
            blanked(&mut out, &src[i..end]);
            i = end;
        } else if c == '/' && next == Some('*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < n && depth > 0 {
                if src[j] == '/' && src.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if src[j] == '*' && src.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blanked(&mut out, &src[i..j.min(n)]);
            i = j.min(n);
        } else if let Some(end) = raw_string_end(&src, i).filter(|_| !ident_before(i)) {
            blanked(&mut out, &src[i..end]);
            i = end;
        } else if c == '"' || (c == 'b' && next == Some('"') && !ident_before(i)) {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            while j < n && src[j] != '"' {
                j += if src[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(n);
            blanked(&mut out, &src[i..end]);
            i = end;
        } else if c == '\'' {
            match char_literal_len(&src[i..]) {
                Some(len) => {
                    blanked(&mut out, &src[i..i + len]);
                    i += len;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Where a raw string literal (`r"…"`, `r#"…"#`, `br"…"`) starting at `i` ends.
fn raw_string_end(src: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if src.get(j) == Some(&'b') {
        j += 1;
    }
    if src.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = src[j..].iter().take_while(|&&c| c == '#').count();
    j += hashes;
    if src.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < src.len() {
        if src[j] == '"'
            && src[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(src.len())
}

/// The length of a character literal at the start of `s` (`'a'`, `'\n'`, `'\x7f'`,
/// `'\u{1F600}'`), or `None` for a lifetime.
fn char_literal_len(s: &[char]) -> Option<usize> {
    if s.len() >= 3 && s[1] != '\\' && s[2] == '\'' {
        return Some(3);
    }
    if s.len() >= 4 && s[1] == '\\' {
        let end = s.iter().skip(2).take(12).position(|&c| c == '\'')?;
        return Some(end + 3);
    }
    None
}

#[cfg(test)]
mod measure_tests {
    use super::*;

    #[test]
    fn measures_functions_and_ignores_braces_in_literals_comments_and_test_modules() {
        let text = "fn a() {\n    let s = \"}}}\";\n    // }\n    let c = '}';\n}\n\
                    fn b<'a>(x: &'a str) -> &'a str { x }\n\
                    trait T { fn decl(&self); }\n\
                    #[cfg(test)]\nmod tests {\n    fn hidden() {\n    }\n}\n\
                    fn r() { let _ = r#\"{\"#; }\n";
        let found = measure("x.rs", text);
        let names: Vec<(&str, usize)> = found.iter().map(|f| (f.name.as_str(), f.lines)).collect();
        assert_eq!(names, vec![("a", 5), ("b", 1), ("r", 1)]);
    }
}
