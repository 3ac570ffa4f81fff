//! The one place the command-line tool prints its reports.
//!
//! Stdout carries a command's result (a table, a JSON document). A closed
//! pipe (`bir runs | head`) is not an error: output stops quietly.

use std::io::Write;

/// Prints `text` and a newline to stdout.
pub fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|_| stdout.write_all(b"\n"))
        .and_then(|_| stdout.flush());
}
