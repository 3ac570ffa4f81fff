//! The one place bir prints to a person: a command's report on stdout,
//! and on stderr its notes, progress and questions (and a personality's
//! few words about itself, like a proxy that cannot start its server).
//!
//! Stdout carries a command's result (a table, a JSON document). A closed
//! pipe (`bir runs | head`) is not an error: output stops quietly, on
//! either stream. Besides this module, only the one error path
//! (`error::report`) and logging write to stderr; `clippy::print_stderr`
//! is denied so that a stray `eprintln!` fails the lint.

use std::fmt::Write as _;
use std::io::Write;

/// Prints `text` and a newline to stdout.
pub fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|_| stdout.write_all(b"\n"))
        .and_then(|_| stdout.flush());
}

/// Prints `text` and a newline to stderr: a note beside the command's
/// report (a warning, progress, a run's id), never part of it.
pub fn note(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_all(text.as_bytes())
        .and_then(|_| stderr.write_all(b"\n"))
        .and_then(|_| stderr.flush());
}

/// Prints `text` to stderr without a newline: a question whose answer is
/// typed on the same line.
pub fn prompt(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_all(text.as_bytes())
        .and_then(|_| stderr.flush());
}

/// Control characters (C0, DEL, C1) are shown as `\u{…}` so recorded
/// content cannot move the cursor, change colours or retitle the terminal.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202e}' | '\u{200f}') {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}
