//! The one place the command-line tool prints its reports.
//!
//! Stdout carries a command's result (a table, a JSON document). A closed
//! pipe (`bir runs | head`) is not an error: output stops quietly.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write;

/// Prints `text` and a newline to stdout, [`terminal_safe`]: whatever
/// outside text a report carries (a session id, a cwd, a server's name or
/// stderr), no control character reaches the terminal.
pub fn out(text: &str) {
    let text = terminal_safe(text);
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|_| stdout.write_all(b"\n"))
        .and_then(|_| stdout.flush());
}

/// Control characters (C0, DEL, C1) are shown as `\u{…}` so recorded
/// content cannot move the cursor, change colours or retitle the terminal.
pub fn escape(s: &str) -> String {
    escape_but(s, |_| false)
}

/// A whole report's text as [`escape`] shows it, except for the line
/// breaks and tabs the report itself is laid out with: the last guard of
/// every line the CLI prints ([`out`], errors on stderr). Text already
/// escaped comes out unchanged, and so does text without a control
/// character (borrowed, not copied).
pub fn terminal_safe(s: &str) -> Cow<'_, str> {
    let layout = |c: char| matches!(c, '\n' | '\t');
    if s.chars().all(|c| layout(c) || !needs_escape(c)) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(escape_but(s, layout))
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202e}' | '\u{200f}')
}

fn escape_but(s: &str, keep: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if needs_escape(c) && !keep(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
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
}
