//! What keeps "nothing unredacted enters a record" a property of the types.
//!
//! Every model field that carries outside data is a `Redacted<T>`, whose
//! field is private to `src/record/payload.rs`: the compiler refuses a raw
//! value anywhere else. What the compiler cannot see is that guarantee
//! being taken apart in a later change, so it is read from the source:
//!
//! * the newtype's field stays private (no `pub` in its tuple);
//! * no file but `payload.rs` spells the constructor (`Redacted(`), and no
//!   file uses `transmute` (the one way around a private field);
//! * inside `payload.rs`, only the functions listed here build one, each of
//!   which redacts (or narrows what is already redacted); a new one must be
//!   added here, where a reviewer sees it;
//! * the test fixture that wraps a value unredacted is `#[cfg(test)]`;
//! * the model's outside-data fields keep the type.

use std::fs;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without `//` comments (doc comments may name the
/// constructor).
fn code_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let code = line.split("//").next().unwrap_or("");
            (i + 1, code.to_owned())
        })
        .collect()
}

/// Where `Redacted(` is spelled as a call or pattern (not `Redacted<`,
/// `Redacted::`).
fn spells_constructor(code: &str) -> bool {
    let mut rest = code;
    while let Some(at) = rest.find("Redacted") {
        let before = rest[..at].chars().last();
        let after = rest[at + "Redacted".len()..].trim_start();
        let word_start = !before.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if word_start && after.starts_with('(') {
            return true;
        }
        rest = &rest[at + "Redacted".len()..];
    }
    false
}

const PREPARE: &str = "record/payload.rs";

/// The functions of `payload.rs` that may build a `Redacted`: each one
/// redacts what it wraps, or narrows a value that is already redacted.
const BUILDERS: &[&str] = &[
    // narrowing a redacted value
    "part",
    "text_at",
    "elements",
    "from_text",
    // the redactor's entry points
    "whole",
    "whole_or_marker",
    "label",
    "redact_and_cap",
    "preview_only",
    "text",
    // `#[cfg(test)]` only
    "fixture",
];

#[test]
fn only_the_preparation_module_can_make_a_redacted_value() {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    let mut outside = Vec::new();
    let mut prepare = None;
    for file in &files {
        let text = fs::read_to_string(file).expect("read");
        let rel = file.strip_prefix(&root).expect("under src");
        let rel = rel.to_string_lossy().replace('\\', "/");
        for (n, code) in code_lines(&text) {
            assert!(
                !code.contains("transmute"),
                "{rel}:{n}: transmute can forge a Redacted value"
            );
            if rel != PREPARE && spells_constructor(&code) {
                outside.push(format!("{rel}:{n}: {}", code.trim()));
            }
        }
        if rel == PREPARE {
            prepare = Some(text);
        }
    }
    assert!(
        outside.is_empty(),
        "Redacted is built outside {PREPARE}:\n{}",
        outside.join("\n")
    );

    let prepare = prepare.expect("src/record/payload.rs exists");
    let lines = code_lines(&prepare);
    let declaration = lines
        .iter()
        .find(|(_, c)| c.contains("struct Redacted"))
        .map(|(_, c)| c.clone())
        .expect("the newtype is declared in payload.rs");
    let tuple = declaration
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(inside, _)| inside.to_owned())
        .expect("a tuple struct");
    assert!(
        !tuple.contains("pub"),
        "the field of Redacted must stay private: {declaration}"
    );

    // Every construction inside payload.rs sits in a listed function.
    let mut current_fn: Option<String> = None;
    let mut previous = String::new();
    let mut seen = Vec::new();
    for (n, code) in &lines {
        if let Some(at) = code.find("fn ") {
            let name: String = code[at + 3..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                if name == "fixture" {
                    assert!(
                        previous.trim() == "#[cfg(test)]",
                        "{PREPARE}:{n}: the fixture must be test-only"
                    );
                }
                current_fn = Some(name);
            }
        }
        if spells_constructor(code) && !code.contains("struct Redacted") {
            let in_fn = current_fn.clone().unwrap_or_default();
            assert!(
                BUILDERS.contains(&in_fn.as_str()),
                "{PREPARE}:{n}: `{in_fn}` builds a Redacted; only {BUILDERS:?} may \
                 (a new builder must redact, and be listed in this test)"
            );
            seen.push(in_fn);
        }
        if !code.trim().is_empty() {
            previous = code.clone();
        }
    }
    for builder in ["whole", "label", "text", "redact_and_cap", "part"] {
        assert!(
            seen.iter().any(|s| s == builder),
            "the reader missed `{builder}`: it no longer finds constructions"
        );
    }
}

/// (struct, field) pairs of `src/record/model.rs` that carry data from the
/// server, the host or the user, and so must be `Redacted`.
const OUTSIDE_DATA: &[(&str, &str)] = &[
    ("RunHeader", "input"),
    ("RunMetadata", "server_info"),
    ("RunMetadata", "protocol_version"),
    ("RunMetadata", "model"),
    ("ServerSnapshot", "protocol_version"),
    ("ServerSnapshot", "server_info"),
    ("ServerSnapshot", "capabilities"),
    ("ServerSnapshot", "instructions"),
    ("ServerSnapshot", "client_capabilities"),
    ("ServerSnapshot", "tools"),
    ("ServerSnapshot", "tool_hashes"),
    ("Step", "qualified_name"),
    ("Step", "tool_name"),
    ("Step", "input"),
    ("Step", "output"),
    ("Step", "error"),
    ("Step", "request_id"),
    ("Step", "tool_use_id"),
    ("Step", "context"),
    ("Step", "permission"),
    ("Step", "agent_id"),
    ("Step", "agent_type"),
    ("Step", "parent_tool_use_id"),
    ("SessionEvent", "agent_id"),
    ("Turn", "prompt"),
    ("SessionEvent", "name"),
    ("SessionEvent", "data"),
    ("RunFinish", "output"),
    ("RunFinish", "model"),
];

#[test]
fn the_models_outside_data_fields_are_redacted_types() {
    let text = fs::read_to_string(src().join("record/model.rs")).expect("read model.rs");
    let mut current = String::new();
    let mut found = Vec::new();
    for (_, code) in code_lines(&text) {
        let code = code.trim();
        // Whatever the item's visibility says (`pub`, `pub(crate)`, …).
        let code = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|v| code.strip_prefix(v).map(|rest| ("pub ", rest)))
            .map_or(code.to_owned(), |(pub_, rest)| format!("{pub_}{rest}"));
        let code = code.as_str();
        if let Some(rest) = code.strip_prefix("pub struct ") {
            current = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            continue;
        }
        let Some(rest) = code.strip_prefix("pub ") else {
            continue;
        };
        let Some((field, ty)) = rest.split_once(':') else {
            continue;
        };
        let field = field.trim();
        if OUTSIDE_DATA.contains(&(current.as_str(), field)) {
            assert!(
                ty.contains("Redacted<"),
                "{current}.{field} holds outside data but is `{}`, not Redacted",
                ty.trim().trim_end_matches(',')
            );
            found.push((current.clone(), field.to_owned()));
        }
    }
    for (st, field) in OUTSIDE_DATA {
        assert!(
            found.iter().any(|(s, f)| s == st && f == field),
            "{st}.{field} is not in model.rs any more: update this list"
        );
    }
}

#[test]
fn the_reader_tells_a_construction_from_the_type_and_its_paths() {
    assert!(spells_constructor("Some(Redacted(value))"));
    assert!(spells_constructor("let Redacted (x) = y;"));
    assert!(!spells_constructor("Option<Redacted<Value>>"));
    assert!(!spells_constructor("Redacted::from_text(t)"));
    assert!(!spells_constructor("map(NotRedacted(x))"));
    assert!(!spells_constructor(&code_lines("x // Redacted(y)")[0].1));
}
