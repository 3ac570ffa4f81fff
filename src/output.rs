//! The one place bir prints to a person: a command's report on stdout,
//! and on stderr its notes, progress and questions (and a personality's
//! few words about itself, like a proxy that cannot start its server).
//!
//! Stdout carries a command's result (a table, a JSON document). A closed
//! pipe (`bir runs | head`) is not an error: output stops quietly, on
//! either stream. Every line on either stream passes [`terminal_safe`]. Besides this module, only the one error path
//! (`error::report`) and logging write to stderr; `clippy::print_stderr`
//! is denied so that a stray `eprintln!` fails the lint.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write;

/// Prints `text` and a newline to stdout, [`terminal_safe`]: whatever
/// outside text a report carries (a session id, a cwd, a server's name or
/// stderr), no control character reaches the terminal.
pub(crate) fn out(text: &str) {
    let text = terminal_safe(text);
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|_| stdout.write_all(b"\n"))
        .and_then(|_| stdout.flush());
}

/// Prints `text` and a newline to stderr: a note beside the command's
/// report (a warning, progress, a run's id), never part of it.
/// [`terminal_safe`] like [`out`]: a note or an error quotes outside text
/// as often as a report does.
pub(crate) fn note(text: &str) {
    let text = terminal_safe(text);
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_all(text.as_bytes())
        .and_then(|_| stderr.write_all(b"\n"))
        .and_then(|_| stderr.flush());
}

/// Prints `text` to stderr without a newline: a question whose answer is
/// typed on the same line. [`terminal_safe`], as [`note`].
pub(crate) fn prompt(text: &str) {
    let text = terminal_safe(text);
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_all(text.as_bytes())
        .and_then(|_| stderr.flush());
}

/// Control characters (C0, DEL, C1) are shown as `\u{…}` so recorded
/// content cannot move the cursor, change colours or retitle the terminal.
pub(crate) fn escape(s: &str) -> String {
    escape_but_as(s, |_| false, Form::Rust)
}

/// A whole report's text as [`escape`] shows it, except for the line
/// breaks and tabs the report itself is laid out with: the last guard of
/// every line the CLI prints ([`out`], errors on stderr). Text already
/// escaped comes out unchanged, and so does text without a control
/// character (borrowed, not copied).
///
/// A JSON document or JSON line (`bir runs export`, `--json`) gets JSON's
/// own `\uXXXX` form instead: serde writes C1 controls and U+2028/9 raw,
/// and only inside strings, where `\uXXXX` means the same character, so
/// the output stays valid JSON with the same value and still reaches the
/// terminal inert.
pub(crate) fn terminal_safe(s: &str) -> Cow<'_, str> {
    let layout = |c: char| matches!(c, '\n' | '\t');
    if s.chars().all(|c| layout(c) || !needs_escape(c)) {
        return Cow::Borrowed(s);
    }
    if s.trim_start().starts_with(['{', '[']) {
        return Cow::Owned(escape_but_as(s, layout, Form::Json));
    }
    Cow::Owned(escape_but_as(s, layout, Form::Rust))
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202e}' | '\u{200f}')
}

/// How an escaped character is written.
#[derive(Clone, Copy)]
enum Form {
    /// `\u{9b}`: for people.
    Rust,
    /// `\u009b`: JSON's own (every character [`needs_escape`] names is in
    /// the Basic Multilingual Plane, so four digits always do).
    Json,
}

fn escape_but_as(s: &str, keep: impl Fn(char) -> bool, form: Form) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if needs_escape(c) && !keep(c) {
            let _ = match form {
                Form::Rust => write!(out, "\\u{{{:x}}}", c as u32),
                Form::Json => write!(out, "\\u{:04x}", c as u32),
            };
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_safe_keeps_the_layout_and_escapes_the_rest() {
        let text = "a\tb\nsession s\u{1b}]0;pwned\u{7} in /tmp/\u{1b}[2J\r\u{9b}x";
        let safe = terminal_safe(text);
        assert_eq!(
            safe,
            "a\tb\nsession s\\u{1b}]0;pwned\\u{7} in /tmp/\\u{1b}[2J\\u{d}\\u{9b}x"
        );
        assert_eq!(terminal_safe(&safe), safe, "escaped text stays as it is");
        assert!(matches!(terminal_safe("plain\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_stays_json_with_the_same_value() {
        let value = serde_json::json!({"text": "a\u{9b}b\u{2028}c\u{7f}\u{1b}"});
        for text in [
            serde_json::to_string(&value).expect("json"),
            serde_json::to_string_pretty(&value).expect("json"),
        ] {
            let safe = terminal_safe(&text);
            assert!(!safe.chars().any(needs_escape_outside_layout), "{safe}");
            let back: serde_json::Value = serde_json::from_str(&safe).expect("still JSON");
            assert_eq!(back, value);
        }
    }

    fn needs_escape_outside_layout(c: char) -> bool {
        needs_escape(c) && !matches!(c, '\n' | '\t')
    }
}
