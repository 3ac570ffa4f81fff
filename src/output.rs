//! The one place the command-line tool prints its reports.
//!
//! Stdout carries a command's result (a table, a JSON document). A closed
//! pipe (`bir runs | head`) is not an error: output stops quietly.

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
