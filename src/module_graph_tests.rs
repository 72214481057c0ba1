//! The module-circle check: no two top-level modules of the server crate import each other,
//! directly or around a circle.
//!
//! It reads `src/` as text: for each top-level module (`src/X.rs`, or `src/X/` with all its
//! files, tests left out), the other top-level modules it names as `crate::Y` (comments and
//! string literals blanked), then looks for strongly connected components. A lower module
//! that needs a type of a higher one means the type sits in the wrong room: move it down
//! (`docs/architecture.md` has the layering).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module and the top-level modules it refers to.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(&src).expect("src/").flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            let mut texts = Vec::new();
            collect(&path, &mut texts);
            modules.insert(name, texts);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if is_test_file(&name) || matches!(stem, "lib" | "main") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            modules.entry(stem.to_string()).or_default().push(text);
        }
    }
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    modules
        .iter()
        .map(|(name, texts)| {
            let mut uses = BTreeSet::new();
            for text in texts {
                let code = strip_tests(&blank(text));
                for part in code.split("crate::").skip(1) {
                    let used: String = part
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if used != *name && names.contains(&used) {
                        uses.insert(used);
                    }
                }
                // `use crate::{a, b::C}` names several.
                for part in code.split("crate::{").skip(1) {
                    let inner = part.split('}').next().unwrap_or_default();
                    for item in inner.split(',') {
                        let used: String = item
                            .trim()
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        if used != *name && names.contains(&used) {
                            uses.insert(used);
                        }
                    }
                }
            }
            (name.clone(), uses)
        })
        .collect()
}

fn collect(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir)
        .expect("read a module folder")
        .flatten()
    {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" {
                collect(&path, out);
            }
        } else if name.ends_with(".rs") && !is_test_file(&name) {
            out.push(std::fs::read_to_string(&path).expect("read"));
        }
    }
}

fn is_test_file(name: &str) -> bool {
    name.ends_with("_tests.rs") || matches!(name, "tests.rs" | "testutil.rs")
}

/// `code` without its `#[cfg(test)]` items (a test may reach anywhere).
fn strip_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        // Skip to the end of the item: a `;` before any `{`, or the matching `}`.
        let open = after.find('{');
        let semi = after.find(';');
        let end = match (open, semi) {
            (_, Some(s)) if open.is_none_or(|o| s < o) => s + 1,
            (Some(o), _) => {
                let mut depth = 0usize;
                let mut end = after.len();
                for (i, b) in after.bytes().enumerate().skip(o) {
                    match b {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            _ => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// `text` with comments and the contents of string literals replaced by spaces.
fn blank(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if b[i] == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(if b[i] == '\n' { '\n' } else { ' ' });
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// The strongly connected components with more than one module (Tarjan's algorithm).
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low[v];
                s.low.insert(v, lv.min(lw));
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low[v];
                s.low.insert(v, lv.min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_two_top_level_modules_import_each_other() {
    let g = graph();
    assert!(g.len() >= 10, "found only {} modules", g.len());
    let found = circles(&g);
    let edges: Vec<String> = found
        .iter()
        .flatten()
        .flat_map(|m| {
            g[m].iter()
                .filter(|u| found.iter().any(|c| c.contains(m) && c.contains(u)))
                .map(move |u| format!("{m} -> {u}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "import circles between top-level modules: {found:?}\nthe edges inside them:\n{}",
        edges.join("\n")
    );
}

#[test]
fn the_check_sees_a_circle() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(circles(&g), vec![vec!["a", "b", "c"]]);
    let code =
        "use crate::x; // crate::y\nlet s = \"crate::z\";\n#[cfg(test)]\nmod t { use crate::w; }\n";
    let kept = strip_tests(&blank(code));
    assert!(kept.contains("crate::x") && !kept.contains("crate::y"));
    assert!(!kept.contains("crate::z") && !kept.contains("crate::w"));
}
