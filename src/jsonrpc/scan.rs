//! The incremental line scanner: frames a newline-delimited stream and reads
//! each line's JSON-RPC envelope in the same single pass.
//!
//! The relay must forward every byte unchanged, so it never parses messages
//! into trees on its hot path. Instead this scanner walks the bytes once, as
//! they arrive, and reports for each line: where it ends, whether it is
//! syntactically JSON, and the few top-level facts the relay needs (`id`,
//! `method`, whether `result` / `error` are present).
//!
//! Invariants:
//! * Constant memory: the scanner keeps a container stack (one byte per
//!   nesting level) and small capture buffers, never the line itself, so an
//!   oversized message can be skipped without buffering it.
//! * Every `\n` byte ends a line, wherever it occurs (stdio framing is
//!   newline-delimited; a raw newline inside a JSON string is invalid JSON
//!   anyway).
//! * Lenient where peers are lenient: bytes >= 0x80 inside strings are not
//!   checked for UTF-8 validity and `\u` escapes are not checked for surrogate
//!   pairing, because JavaScript peers accept both; raw control characters
//!   other than `\n` inside strings are not flagged either (checking them
//!   would cost the SIMD string skip). Everything else follows the JSON
//!   grammar (RFC 8259).
//! * Duplicate top-level keys: the last one wins, as in serde_json.

use super::small::SmallBytes;

/// The longest top-level key we bother to remember (`"method"` is 6 bytes).
const KEY_CAPTURE: usize = 16;
/// Keys of interest at any depth (`data`, `blob`) are this long.
const KEY_PROBE: usize = 4;
/// The longest raw `id` / `method` value we keep. Longer ones are reported as
/// absent-but-oversized: such a message cannot be correlated.
pub const VALUE_CAPTURE: usize = 1024;

/// What one line turned out to be.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineSummary {
    /// Bytes in the line, excluding the terminating `\n` (a `\r` before it
    /// is counted: it is part of what was sent).
    pub len: u64,
    pub shape: Shape,
    /// Raw bytes of the top-level `"id"` value, exactly as sent.
    pub id: Option<SmallBytes>,
    /// Raw bytes of the top-level `"method"` value (a JSON string token,
    /// quotes and escapes included).
    pub method_raw: Option<SmallBytes>,
    pub has_result: bool,
    pub has_error: bool,
    /// An `id` or `method` value was longer than [`VALUE_CAPTURE`].
    pub capture_overflow: bool,
    /// A `"data"` or `"blob"` key occurs at some depth: where MCP puts
    /// base64 image, audio and blob contents. (Spelled with escapes, such a
    /// key is not noticed; the recorder then keeps a preview, never more.)
    pub maybe_binary: bool,
}

/// The syntactic shape of a line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Shape {
    /// Only whitespace (or nothing).
    #[default]
    Blank,
    /// A complete JSON object.
    Object,
    /// A complete JSON array (a 2025-03-26 batch, or nonsense).
    Array,
    /// A complete JSON scalar (string, number, literal).
    Scalar,
    /// Not a single JSON value: truncated, garbage, or trailing bytes.
    Invalid,
}

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

/// States of the JSON number grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    /// After `-`: a digit must follow.
    Minus,
    /// After a leading `0`.
    Zero,
    /// In the integer digits.
    Int,
    /// After `.`: a digit must follow.
    Dot,
    Frac,
    /// After `e` / `E`: a sign or digit must follow.
    Exp,
    /// After the exponent's sign: a digit must follow.
    ExpSign,
    ExpDigits,
}

impl Num {
    fn accepting(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::ExpDigits)
    }
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

/// Which top-level key's value is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TopKey {
    Id,
    Method,
    Result,
    Error,
    Other,
}

/// Incremental scanner for one direction of a newline-delimited stream.
#[derive(Debug)]
pub struct LineScanner {
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
    pub fn new() -> Self {
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
    pub fn scan(&mut self, buf: &[u8]) -> Option<usize> {
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
    pub fn end_line(&mut self) -> LineSummary {
        let complete = match self.lex {
            Lex::Between => self.expect == Expect::Done,
            Lex::Num(n) => n.accepting() && self.stack.is_empty(),
            _ => false,
        };
        let mut summary = std::mem::take(&mut self.summary);
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
                    self.end_value();
                } else {
                    self.garbage(cap_from);
                }
                return;
            }
            Expect::ValueOrClose if b == b']' => {
                self.stack.pop();
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
            if self.key_probe_len == KEY_PROBE && matches!(&self.key_probe, b"data" | b"blob") {
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
                    match self.key_buf.as_slice() {
                        b"id" => TopKey::Id,
                        b"method" => TopKey::Method,
                        b"result" => TopKey::Result,
                        b"error" => TopKey::Error,
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
            if self.value_overflow {
                self.summary.capture_overflow = true;
            } else {
                let raw = SmallBytes::new(&self.value_buf);
                self.value_buf.clear();
                match which {
                    TopKey::Id => self.summary.id = Some(raw),
                    TopKey::Method => self.summary.method_raw = Some(raw),
                    _ => {}
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(input: &[u8]) -> Vec<LineSummary> {
        let mut s = LineScanner::new();
        let mut out = Vec::new();
        let mut rest = input;
        while let Some(n) = s.scan(rest) {
            out.push(s.end_line());
            rest = &rest[n..];
        }
        if !rest.is_empty() {
            out.push(s.end_line());
        }
        out
    }

    fn one(input: &str) -> LineSummary {
        let mut v = scan_all(format!("{input}\n").as_bytes());
        assert_eq!(v.len(), 1, "{input}");
        v.remove(0)
    }

    #[test]
    fn request_envelope() {
        let s =
            one(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","id":9}}"#);
        assert_eq!(s.shape, Shape::Object);
        assert_eq!(s.id.as_deref(), Some(&b"7"[..]));
        assert_eq!(s.method_raw.as_deref(), Some(&br#""tools/call""#[..]));
        assert!(!s.has_result && !s.has_error);
    }

    #[test]
    fn response_with_id_last_and_nested_ids_ignored() {
        let s = one(r#"{"result":{"id":1,"content":[{"id":"x"}]},"jsonrpc":"2.0","id":"abc"}"#);
        assert_eq!(s.id.as_deref(), Some(&br#""abc""#[..]));
        assert!(s.has_result);
        assert_eq!(s.method_raw, None);
    }

    #[test]
    fn binary_block_keys_are_noticed_at_any_depth() {
        let image = r#"{"id":1,"result":{"content":[{"type":"image","data":"iVBORw0","mimeType":"image/png"}]}}"#;
        let blob = r#"{"id":1,"result":{"contents":[{"uri":"a","blob":"AAAA"}]}}"#;
        let text = r#"{"id":1,"result":{"content":[{"type":"text","text":"data blob "data""}],"database":1}}"#;
        assert!(one(image).maybe_binary);
        assert!(one(blob).maybe_binary);
        assert!(
            !one(text).maybe_binary,
            "values and longer keys are not binary blocks"
        );
        // Cut at every byte: a key split by a read boundary is still seen.
        for (line, binary) in [(image, true), (blob, true), (text, false)] {
            for cut in 1..line.len() {
                let mut s = LineScanner::new();
                let line = format!("{line}\n");
                let (a, b) = line.as_bytes().split_at(cut);
                assert_eq!(s.scan(a), None);
                assert!(s.scan(b).is_some());
                assert_eq!(s.end_line().maybe_binary, binary, "{line} cut at {cut}");
            }
        }
    }

    #[test]
    fn raw_id_spelling_is_kept() {
        for id in [
            "18446744073709551617",
            "1.0",
            "-0",
            "1e400",
            r#""\u0031""#,
            "[1,2]",
        ] {
            let s = one(&format!(r#"{{"id" : {id} ,"error":{{"code":1}}}}"#));
            assert_eq!(s.id.as_deref(), Some(id.as_bytes()), "{id}");
            assert!(s.has_error);
        }
    }

    #[test]
    fn invalid_lines() {
        for bad in [
            r#"{"jsonrpc":"2.0","#,
            r#"{"a":1}{"b":2}"#,
            r#"{"a":tru}"#,
            r#"{"a":01}"#,
            r#"{"a":"\x"}"#,
            "not json",
            r#"{"a" 1}"#,
            r#"[1,]"#,
            r#"{"a":1,}"#,
            "\u{0}",
            "-",
            "1.",
        ] {
            assert_eq!(one(bad).shape, Shape::Invalid, "{bad}");
        }
    }

    #[test]
    fn valid_shapes() {
        assert_eq!(one("").shape, Shape::Blank);
        assert_eq!(one("  \r").shape, Shape::Blank);
        assert_eq!(one("[]").shape, Shape::Array);
        assert_eq!(one(r#"[{"id":1}]"#).id, None);
        assert_eq!(one("12").shape, Shape::Scalar);
        assert_eq!(one("-0.5e+3").shape, Shape::Scalar);
        assert_eq!(one("null").shape, Shape::Scalar);
        assert_eq!(
            one(r#"{"a":"\ud83d"}"#).shape,
            Shape::Object,
            "lone surrogate is lenient"
        );
        assert_eq!(one("{\"a\":\"\u{e9}\"}\r").shape, Shape::Object);
        assert_eq!(one(r#"{}"#).shape, Shape::Object);
        assert_eq!(
            one(r#"{"a":[[],{},[{"b":[true,false,null]}]]}"#).shape,
            Shape::Object
        );
    }

    #[test]
    fn lengths_and_no_trailing_newline() {
        let v = scan_all(b"{\"id\":1}\r\n\n{\"id\":2}");
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].len, 9);
        assert_eq!(v[1].shape, Shape::Blank);
        assert_eq!(v[2].id.as_deref(), Some(&b"2"[..]));
        assert_eq!(v[2].len, 8);
    }

    #[test]
    fn last_duplicate_id_wins() {
        let s = one(r#"{"id":1,"id":2,"method":"m"}"#);
        assert_eq!(s.id.as_deref(), Some(&b"2"[..]));
    }

    #[test]
    fn oversized_capture_is_flagged() {
        let long = "x".repeat(VALUE_CAPTURE + 10);
        let s = one(&format!(r#"{{"id":"{long}","method":"m"}}"#));
        assert_eq!(s.id, None);
        assert!(s.capture_overflow);
    }

    /// Splitting a stream at any boundaries gives the same summaries.
    #[test]
    fn split_anywhere_same_result() {
        let input: &[u8] = b"{\"result\":{\"t\":\"a\\\"b\\u00e9\"},\"jsonrpc\":\"2.0\",\"id\":123}\n{\"method\":\"notifications/x\",\"params\":[1.5e3,true]}\r\n[1,2]\ngarbage\n{\"id\":\"q\\\\\",\"method\":\"m\"}";
        let whole = scan_all(input);
        for step in 1..8 {
            let mut s = LineScanner::new();
            let mut got = Vec::new();
            let mut chunk_start = 0;
            while chunk_start < input.len() {
                let end = (chunk_start + step).min(input.len());
                let mut rest = &input[chunk_start..end];
                while let Some(n) = s.scan(rest) {
                    got.push(s.end_line());
                    rest = &rest[n..];
                }
                chunk_start = end;
            }
            got.push(s.end_line());
            assert_eq!(got, whole, "step {step}");
        }
    }
}
