//! The scanner as it was before it was rewritten for speed: a state
//! machine that takes one byte per step, slow but plain. Tests run both on
//! the same inputs and require the same summaries (see
//! `tests::same_as_reference`).
//!
//! Fixes against the original: an empty container as a captured `id` or
//! `method` value (`"id":{}`) was captured as an empty value, or as `{`
//! when a chunk boundary fell inside it; both scanners now capture `{}`.
//! Keys are compared by their decoded text (here: decoded by serde_json,
//! an implementation independent of the scanner's), so `"\u0069d"` is `id`;
//! and the last duplicate `id` / `method` wins even when it overflows.

// The grammar's data types are shared; the logic below is this
// scanner's own, which is what makes it a reference.
use super::{LineSummary, Num, Shape, TopKey, VALUE_CAPTURE};
use crate::jsonrpc::inline_bytes::SmallBytes;

/// Every key of interest fits in 36 raw bytes (six `\uXXXX` escapes).
const KEY_CAPTURE: usize = 36;
const KEY_PROBE: usize = KEY_CAPTURE;

/// Where the lexer is inside the current token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// Between tokens, skipping whitespace.
    Between,
    /// Inside a string.
    Str,
    /// Just after a backslash inside a string.
    StrEscape,
    /// Inside `\uXXXX`, with this many hex digits still to read.
    StrUnicode(u8),
    Num(Num),
    /// Inside `true` / `false` / `null`: the literal and how far we are.
    Literal(&'static [u8], u8),
    /// The line is not JSON; skip to its end.
    Garbage,
}

/// What the grammar expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A value (top level, after `:` or after `,` in an array).
    Value,
    /// After `[`: a value or `]`.
    ValueOrClose,
    /// After `{`: a key or `}`.
    KeyOrClose,
    /// After `,` in an object: a key.
    Key,
    /// After a key.
    Colon,
    /// After a value inside a container.
    CommaOrClose,
    /// After the top-level value: only whitespace may follow.
    Done,
}

/// Incremental scanner for one direction of a newline-delimited stream.
#[derive(Debug)]
pub(super) struct LineScanner {
    lex: Lex,
    expect: Expect,
    /// Open containers, innermost last: `b'{'` or `b'['`.
    stack: Vec<u8>,
    /// True while the string being lexed is an object key.
    in_key: bool,
    /// The top-level key whose value comes next (depth-1 objects only).
    top_key: TopKey,
    key_buf: Vec<u8>,
    key_overflow: bool,
    /// Capturing the raw value of the current top-level key.
    capturing: Option<TopKey>,
    /// The captured value's first byte has been seen (so a chunk boundary
    /// inside it must keep capturing from the next chunk's first byte).
    value_started: bool,
    value_buf: Vec<u8>,
    value_overflow: bool,
    id_overflow: bool,
    method_overflow: bool,
    /// Where the object key being lexed (at any depth) continues in the
    /// current chunk.
    key_from: Option<usize>,
    /// The first bytes of that key, enough to tell `data` and `blob` from
    /// every other key; a length over [`KEY_PROBE`] means "longer".
    key_probe: [u8; KEY_PROBE],
    key_probe_len: usize,
    summary: LineSummary,
}

impl Default for LineScanner {
    fn default() -> Self {
        Self::new()
    }
}

impl LineScanner {
    pub(super) fn new() -> Self {
        LineScanner {
            lex: Lex::Between,
            expect: Expect::Value,
            stack: Vec::new(),
            in_key: false,
            top_key: TopKey::Other,
            key_buf: Vec::with_capacity(KEY_CAPTURE),
            key_overflow: false,
            capturing: None,
            value_started: false,
            value_buf: Vec::new(),
            value_overflow: false,
            id_overflow: false,
            method_overflow: false,
            key_from: None,
            key_probe: [0; KEY_PROBE],
            key_probe_len: 0,
            summary: LineSummary::default(),
        }
    }

    /// Scans bytes of the current line. Returns `Some(n)` when the line ended
    /// at `buf[n - 1]` (the `\n`); the caller then takes the summary with
    /// [`LineScanner::end_line`] and continues with `buf[n..]`. Returns `None`
    /// when all of `buf` belongs to the still-open line.
    pub(super) fn scan(&mut self, buf: &[u8]) -> Option<usize> {
        let mut i = 0;
        // Start of a pending capture inside `buf`, flushed at token ends and
        // at the end of the chunk.
        let mut cap_from: Option<usize> =
            if (self.capturing.is_some() && self.value_started) || self.in_key_capture() {
                Some(0)
            } else {
                None
            };
        while i < buf.len() {
            let b = buf[i];
            if b == b'\n' {
                self.flush_capture(buf, &mut cap_from, i);
                self.summary.len += i as u64;
                return Some(i + 1);
            }
            match self.lex {
                Lex::Garbage => {
                    // Fast skip to the newline.
                    match memchr::memchr(b'\n', &buf[i..]) {
                        Some(p) => i += p,
                        None => i = buf.len(),
                    }
                    continue;
                }
                Lex::Str => {
                    // Fast path over the bulk of a string: a short scalar
                    // look first (most JSON-RPC strings are short), then a
                    // SIMD search for long ones.
                    let rest = &buf[i..];
                    let is_stop = |c: &u8| matches!(*c, b'"' | b'\\' | b'\n');
                    let head = rest.len().min(16);
                    let stop = match rest[..head].iter().position(is_stop) {
                        Some(p) => p,
                        None => memchr::memchr3(b'"', b'\\', b'\n', &rest[head..])
                            .map_or(rest.len(), |p| head + p),
                    };
                    i += stop;
                    if i == buf.len() {
                        break;
                    }
                    let c = buf[i];
                    if c == b'"' {
                        self.lex = Lex::Between;
                        self.end_string(buf, &mut cap_from, i);
                    } else if c == b'\\' {
                        self.lex = Lex::StrEscape;
                    } else if c == b'\n' {
                        continue; // handled at the top of the loop
                    } else {
                        self.garbage(&mut cap_from);
                    }
                }
                Lex::StrEscape => {
                    self.lex = match b {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Lex::Str,
                        b'u' => Lex::StrUnicode(4),
                        _ => {
                            self.garbage(&mut cap_from);
                            continue;
                        }
                    };
                }
                Lex::StrUnicode(left) => {
                    if b.is_ascii_hexdigit() {
                        self.lex = if left == 1 {
                            Lex::Str
                        } else {
                            Lex::StrUnicode(left - 1)
                        };
                    } else {
                        self.garbage(&mut cap_from);
                        continue;
                    }
                }
                Lex::Num(n) => {
                    let next = match (n, b) {
                        (Num::Minus, b'0') => Some(Num::Zero),
                        (Num::Minus, b'1'..=b'9') => Some(Num::Int),
                        (Num::Int, b'0'..=b'9') => Some(Num::Int),
                        (Num::Zero | Num::Int, b'.') => Some(Num::Dot),
                        (Num::Dot | Num::Frac, b'0'..=b'9') => Some(Num::Frac),
                        (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Some(Num::Exp),
                        (Num::Exp, b'+' | b'-') => Some(Num::ExpSign),
                        (Num::Exp | Num::ExpSign | Num::ExpDigits, b'0'..=b'9') => {
                            Some(Num::ExpDigits)
                        }
                        _ => None,
                    };
                    match next {
                        Some(n) => self.lex = Lex::Num(n),
                        None if n.accepting() => {
                            // The number ended just before `b`; re-examine
                            // `b` as the next token.
                            self.lex = Lex::Between;
                            if self.stack.len() == 1 {
                                self.flush_capture(buf, &mut cap_from, i);
                            }
                            self.end_value();
                            continue;
                        }
                        None => {
                            self.garbage(&mut cap_from);
                            continue;
                        }
                    }
                }
                Lex::Literal(word, at) => {
                    if b == word[at as usize] {
                        if at as usize + 1 == word.len() {
                            self.lex = Lex::Between;
                            if self.stack.len() == 1 {
                                self.flush_capture(buf, &mut cap_from, i + 1);
                            }
                            self.end_value();
                        } else {
                            self.lex = Lex::Literal(word, at + 1);
                        }
                    } else {
                        self.garbage(&mut cap_from);
                        continue;
                    }
                }
                Lex::Between => {
                    if matches!(b, b' ' | b'\t' | b'\r') {
                        i += 1;
                        continue;
                    }
                    self.token_start(buf, b, i, &mut cap_from);
                }
            }
            i += 1;
        }
        self.flush_capture(buf, &mut cap_from, buf.len());
        self.summary.len += buf.len() as u64;
        if let Some(from) = self.key_from {
            // The chunk ended inside a key: keep its first bytes, go on
            // from the next chunk's start.
            self.probe_key(&buf[from.min(buf.len())..]);
            self.key_from = Some(0);
        }
        None
    }

    fn probe_key(&mut self, piece: &[u8]) {
        let n = self.key_probe_len;
        if n + piece.len() > KEY_PROBE {
            self.key_probe_len = KEY_PROBE + 1;
        } else {
            self.key_probe[n..n + piece.len()].copy_from_slice(piece);
            self.key_probe_len += piece.len();
        }
    }

    /// Finishes the current line (after `scan` reported its end, or at EOF
    /// for a final line without `\n`) and resets for the next one.
    pub(super) fn end_line(&mut self) -> LineSummary {
        let complete = match self.lex {
            Lex::Between => self.expect == Expect::Done,
            Lex::Num(n) => n.accepting() && self.stack.is_empty(),
            _ => false,
        };
        let mut summary = std::mem::take(&mut self.summary);
        summary.capture_overflow = self.id_overflow || self.method_overflow;
        if self.lex == Lex::Between && self.expect == Expect::Value && self.stack.is_empty() {
            summary.shape = Shape::Blank;
        } else if !complete {
            summary.shape = Shape::Invalid;
        } else if matches!(self.lex, Lex::Num(_)) {
            summary.shape = Shape::Scalar;
        }
        if summary.shape != Shape::Object {
            summary.id = None;
            summary.method_raw = None;
            summary.has_result = false;
            summary.has_error = false;
        }
        self.reset();
        summary
    }

    fn reset(&mut self) {
        self.lex = Lex::Between;
        self.expect = Expect::Value;
        self.stack.clear();
        self.in_key = false;
        self.top_key = TopKey::Other;
        self.key_buf.clear();
        self.key_overflow = false;
        self.capturing = None;
        self.value_started = false;
        self.value_buf.clear();
        self.value_overflow = false;
        self.id_overflow = false;
        self.method_overflow = false;
        self.key_from = None;
    }

    fn in_key_capture(&self) -> bool {
        self.in_key
            && self.stack.len() == 1
            && matches!(self.lex, Lex::Str | Lex::StrEscape | Lex::StrUnicode(_))
    }

    /// A token begins at `buf[i]` (not whitespace).
    fn token_start(&mut self, buf: &[u8], b: u8, i: usize, cap_from: &mut Option<usize>) {
        match self.expect {
            Expect::Done => return self.garbage(cap_from),
            Expect::Colon => {
                if b == b':' {
                    self.expect = Expect::Value;
                    if self.stack.len() == 1 {
                        if matches!(self.top_key, TopKey::Id | TopKey::Method) {
                            self.capturing = Some(self.top_key);
                            self.value_buf.clear();
                            self.value_overflow = false;
                        }
                        match self.top_key {
                            TopKey::Result => self.summary.has_result = true,
                            TopKey::Error => self.summary.has_error = true,
                            _ => {}
                        }
                    }
                } else {
                    self.garbage(cap_from);
                }
                return;
            }
            Expect::CommaOrClose => {
                match (b, self.stack.last()) {
                    (b',', Some(b'{')) => self.expect = Expect::Key,
                    (b',', Some(_)) => self.expect = Expect::Value,
                    (b'}', Some(b'{')) | (b']', Some(b'[')) => {
                        self.stack.pop();
                        if self.capturing.is_some() && self.stack.len() == 1 {
                            self.flush_capture(buf, cap_from, i + 1);
                        }
                        self.end_value();
                    }
                    _ => self.garbage(cap_from),
                }
                return;
            }
            Expect::KeyOrClose | Expect::Key => {
                if b == b'"' {
                    self.lex = Lex::Str;
                    self.in_key = true;
                    self.key_from = Some(i + 1);
                    self.key_probe_len = 0;
                    if self.stack.len() == 1 {
                        self.key_buf.clear();
                        self.key_overflow = false;
                        *cap_from = Some(i + 1);
                    }
                } else if b == b'}' && self.expect == Expect::KeyOrClose {
                    self.stack.pop();
                    // The fix: flush the captured value (it may be `{}`).
                    if self.capturing.is_some() && self.stack.len() == 1 {
                        self.flush_capture(buf, cap_from, i + 1);
                    }
                    self.end_value();
                } else {
                    self.garbage(cap_from);
                }
                return;
            }
            Expect::ValueOrClose if b == b']' => {
                self.stack.pop();
                // The fix: flush the captured value (it may be `[]`).
                if self.capturing.is_some() && self.stack.len() == 1 {
                    self.flush_capture(buf, cap_from, i + 1);
                }
                self.end_value();
                return;
            }
            Expect::Value | Expect::ValueOrClose => {}
        }
        // A value starts here.
        if self.capturing.is_some() && self.stack.len() == 1 && !self.value_started {
            self.value_started = true;
            *cap_from = Some(i);
        }
        if self.stack.is_empty() {
            self.summary.shape = match b {
                b'{' => Shape::Object,
                b'[' => Shape::Array,
                _ => Shape::Scalar,
            };
        }
        match b {
            b'{' => {
                self.stack.push(b'{');
                self.expect = Expect::KeyOrClose;
            }
            b'[' => {
                self.stack.push(b'[');
                self.expect = Expect::ValueOrClose;
            }
            b'"' => {
                self.lex = Lex::Str;
                self.in_key = false;
            }
            b'-' => self.lex = Lex::Num(Num::Minus),
            b'0' => self.lex = Lex::Num(Num::Zero),
            b'1'..=b'9' => self.lex = Lex::Num(Num::Int),
            b't' => self.lex = Lex::Literal(b"true", 1),
            b'f' => self.lex = Lex::Literal(b"false", 1),
            b'n' => self.lex = Lex::Literal(b"null", 1),
            _ => self.garbage(cap_from),
        }
    }

    /// The closing quote of a string is at `buf[i]`.
    fn end_string(&mut self, buf: &[u8], cap_from: &mut Option<usize>, i: usize) {
        if self.in_key {
            if let Some(from) = self.key_from.take() {
                self.probe_key(&buf[from.min(i)..i]);
            }
            let probed = self.key_probe.get(..self.key_probe_len).map(decoded);
            if matches!(probed.as_deref(), Some("data" | "blob")) {
                self.summary.maybe_binary = true;
            }
            if self.stack.len() == 1 {
                // Key bytes are captured without the quotes.
                self.flush_capture(buf, cap_from, i);
            }
            self.in_key = false;
            self.expect = Expect::Colon;
            if self.stack.len() == 1 {
                self.top_key = if self.key_overflow {
                    TopKey::Other
                } else {
                    match decoded(&self.key_buf).as_str() {
                        "id" => TopKey::Id,
                        "method" => TopKey::Method,
                        "result" => TopKey::Result,
                        "error" => TopKey::Error,
                        _ => TopKey::Other,
                    }
                };
                self.key_buf.clear();
            }
        } else {
            if self.capturing.is_some() && self.stack.len() == 1 {
                self.flush_capture(buf, cap_from, i + 1);
            }
            self.end_value();
        }
    }

    /// A complete value just ended (scalar or container).
    fn end_value(&mut self) {
        if self.stack.len() <= 1
            && let Some(which) = self.capturing.take()
        {
            self.value_started = false;
            let raw = (!self.value_overflow).then(|| SmallBytes::new(&self.value_buf));
            self.value_buf.clear();
            match which {
                TopKey::Id => {
                    self.id_overflow = raw.is_none();
                    self.summary.id = raw;
                }
                TopKey::Method => {
                    self.method_overflow = raw.is_none();
                    self.summary.method_raw = raw;
                }
                _ => {}
            }
        }
        self.expect = if self.stack.is_empty() {
            Expect::Done
        } else {
            Expect::CommaOrClose
        };
    }

    /// Appends `buf[from..to]` to whichever capture is open.
    fn flush_capture(&mut self, buf: &[u8], cap_from: &mut Option<usize>, to: usize) {
        let Some(from) = cap_from.take() else { return };
        if from >= to {
            return;
        }
        let piece = &buf[from..to];
        if self.in_key && self.stack.len() == 1 {
            if self.key_buf.len() + piece.len() > KEY_CAPTURE {
                self.key_overflow = true;
            } else {
                self.key_buf.extend_from_slice(piece);
            }
        } else if self.capturing.is_some() {
            if self.value_buf.len() + piece.len() > VALUE_CAPTURE {
                self.value_overflow = true;
            } else {
                self.value_buf.extend_from_slice(piece);
            }
        }
    }

    fn garbage(&mut self, cap_from: &mut Option<usize>) {
        self.lex = Lex::Garbage;
        self.capturing = None;
        self.value_started = false;
        self.key_from = None;
        *cap_from = None;
    }
}

/// The text of a raw key (escapes as sent, no quotes), as serde_json reads
/// it; a key it cannot read (a lone surrogate) is none of ours.
fn decoded(raw: &[u8]) -> String {
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    serde_json::from_slice::<String>(&quoted).unwrap_or_default()
}
