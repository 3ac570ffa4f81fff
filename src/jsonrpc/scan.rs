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
//! * Keys are compared by the text a JSON parser reads: `"\u0069d"` is
//!   `id` (and `"d\u0061ta"` is `data`). A key holding an escape leaves the
//!   fast path anyway (the string skip stops at `\`), so decoding it costs
//!   nothing to keys without one.
//! * Duplicate top-level keys: the last one wins, as in serde_json and
//!   JavaScript, also when the last `id` is too long to capture (then the
//!   line has no id, not the earlier one's).
//! * The summary of a line does not depend on how the stream is cut into
//!   chunks.
//!
//! How it stays fast: the line's end is found first with SIMD, so the lexer
//! never checks for `\n`; the grammar state lives in a local while a chunk
//! lasts; tokens are read whole by tight loops (strings eight bytes at a
//! time), and keys and captured values that lie within one chunk are
//! compared and copied in place. The general, resumable states take over
//! only where a chunk ends mid-token. Tests hold it to the plain
//! byte-at-a-time scanner it replaced (`scan/reference.rs`) on generated,
//! damaged and arbitrarily cut input.

use super::inline_bytes::SmallBytes;

/// The longest object key we bother to remember when a chunk boundary cuts
/// it: `method`, the longest key of interest, is 6 characters, 36 bytes if
/// each is spelled as a `\uXXXX` escape.
const KEY_CAPTURE: usize = 36;
/// The longest decoded key of interest (`method`, `result`).
const KEY_TEXT: usize = 6;
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
    /// The (last) `id` or `method` value was longer than the capture limit
    /// ([`VALUE_CAPTURE`] for a streaming scanner): the line has no id or
    /// no method, though it sent one. A line read whole can be scanned
    /// again with [`LineScanner::capturing_whole`].
    pub capture_overflow: bool,
    /// A `"data"` or `"blob"` key (however spelled) occurs at some depth:
    /// where MCP puts base64 image, audio and blob contents.
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

/// Where the scanner is: between tokens, with what the grammar expects
/// next, or inside a token (after which the grammar's expectation follows
/// from the token: a key wants a colon, a value ends a value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
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
    /// Inside a string (an object key if `in_key`).
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
///
/// State kept between calls is only what a chunk boundary can cut: the
/// grammar state, the container stack, and the parts of a key or captured
/// value that lie in earlier chunks. Keys and values that lie within one
/// chunk (nearly all of them) are read in place, never copied.
#[derive(Debug)]
pub struct LineScanner {
    state: State,
    /// Open containers, innermost last: `b'{'` or `b'['`.
    stack: Vec<u8>,
    /// True while an object key (at any depth) is lexed by the general
    /// string states: it holds an escape or runs past the end of a chunk.
    /// A key read whole in place never sets it.
    in_key: bool,
    /// The top-level key whose value comes next (depth-1 objects only).
    top_key: TopKey,
    /// The raw bytes (escapes as sent, no quotes) of the object key being
    /// lexed that lie in earlier chunks.
    key_buf: [u8; KEY_CAPTURE],
    /// Bytes used in `key_buf`; `KEY_CAPTURE + 1` means the key is longer
    /// than any key of interest.
    key_len: usize,
    /// Capturing the raw value of the current top-level key.
    capturing: Option<TopKey>,
    /// The captured value's first byte has been seen (so a chunk boundary
    /// inside it must keep capturing from the next chunk's first byte).
    value_started: bool,
    /// The part of the captured value that lies in earlier chunks.
    value_buf: Vec<u8>,
    value_overflow: bool,
    /// The longest `id` / `method` value captured.
    value_cap: usize,
    /// The last `id` / `method` value was too long to capture.
    id_overflow: bool,
    method_overflow: bool,
    /// Bytes of the line so far. Kept apart from `summary` and added to it
    /// only at the end of the line: `end_line` moves the summary out right
    /// after the last `scan` wrote this count, and a move that rereads a
    /// field just stored stalls the CPU (store forwarding).
    len: u64,
    summary: LineSummary,
}

impl Default for LineScanner {
    fn default() -> Self {
        Self::new()
    }
}

impl LineScanner {
    pub fn new() -> Self {
        Self::with_value_cap(VALUE_CAPTURE)
    }

    /// A scanner for a line already held whole in memory (a batch element,
    /// a line whose id the streaming scanner could not capture): it
    /// captures `id` and `method` whatever their length, which the line's
    /// own size bounds.
    pub fn capturing_whole() -> Self {
        Self::with_value_cap(usize::MAX)
    }

    fn with_value_cap(value_cap: usize) -> Self {
        LineScanner {
            state: State::Value,
            stack: Vec::new(),
            in_key: false,
            top_key: TopKey::Other,
            key_buf: [0; KEY_CAPTURE],
            key_len: 0,
            capturing: None,
            value_started: false,
            value_buf: Vec::new(),
            value_overflow: false,
            value_cap,
            id_overflow: false,
            method_overflow: false,
            len: 0,
            summary: LineSummary::default(),
        }
    }

    /// Scans bytes of the current line. Returns `Some(n)` when the line ended
    /// at `buf[n - 1]` (the `\n`); the caller then takes the summary with
    /// [`LineScanner::end_line`] and continues with `buf[n..]`. Returns `None`
    /// when all of `buf` belongs to the still-open line.
    pub fn scan(&mut self, buf: &[u8]) -> Option<usize> {
        // The line's end is found first (SIMD), so the lexer runs over bytes
        // that hold no `\n`: no state needs a per-byte newline check, and
        // the end of its input is either the end of the line or the end of
        // the chunk, handled alike (the state is kept; `end_line` judges it).
        let nl = memchr::memchr(b'\n', buf);
        let piece = buf.get(..nl.unwrap_or(buf.len())).unwrap_or(buf);
        if self.state != State::Garbage {
            self.lex_piece(piece);
        }
        self.len += piece.len() as u64;
        nl.map(|p| p + 1)
    }

    /// Lexes `s`, a piece of the current line that holds no `\n`.
    ///
    /// The state lives in a local while `s` lasts. Each arm reads a whole
    /// token when it can (a string without escapes, a number, a key and
    /// the colon after it) and names the next state by a constant, so the
    /// compiler can jump straight to that arm; the general states (`Str`,
    /// `Num`, ...) take over where a token goes on past the end of `s`.
    fn lex_piece(&mut self, s: &[u8]) {
        let mut i = 0;
        let mut st = self.state;
        // Where the open key and the captured value (if any) continue in
        // `s`: at 0 when they began in an earlier chunk. `key_from` is
        // meaningful while a key is being lexed, `val_from` while
        // `value_started`.
        let mut key_from = 0;
        let mut val_from = 0;
        'piece: loop {
            // The next byte that is not whitespace; at the end of `s`, out.
            macro_rules! next_token {
                () => {
                    loop {
                        let Some(&b) = s.get(i) else { break 'piece };
                        if !matches!(b, b' ' | b'\t' | b'\r') {
                            break b;
                        }
                        i += 1;
                    }
                };
            }
            match st {
                State::Value | State::ValueOrClose => {
                    let b = next_token!();
                    if b == b']' && st == State::ValueOrClose {
                        i += 1;
                        self.stack.pop();
                        st = self.value_end(s, val_from, i);
                        continue;
                    }
                    // A value starts at `b`.
                    if self.stack.is_empty() {
                        self.summary.shape = match b {
                            b'{' => Shape::Object,
                            b'[' => Shape::Array,
                            _ => Shape::Scalar,
                        };
                    }
                    if self.capturing.is_some() && !self.value_started && self.stack.len() == 1 {
                        self.value_started = true;
                        val_from = i;
                    }
                    i += 1;
                    st = match b {
                        b'"' => {
                            i = string_stop(s, i);
                            if s.get(i) == Some(&b'"') {
                                i += 1;
                                self.value_end(s, val_from, i)
                            } else {
                                State::Str
                            }
                        }
                        b'{' => {
                            self.stack.push(b'{');
                            State::KeyOrClose
                        }
                        b'[' => {
                            self.stack.push(b'[');
                            State::ValueOrClose
                        }
                        b'-' | b'0'..=b'9' => {
                            let num = match b {
                                b'-' => Num::Minus,
                                b'0' => Num::Zero,
                                _ => Num::Int,
                            };
                            match lex_number(s, &mut i, num) {
                                NumEnd::More(num) => State::Num(num),
                                NumEnd::Ended => self.value_end(s, val_from, i),
                                NumEnd::Bad => self.garbage(),
                            }
                        }
                        b't' => State::Literal(b"true", 1),
                        b'f' => State::Literal(b"false", 1),
                        b'n' => State::Literal(b"null", 1),
                        _ => self.garbage(),
                    };
                }
                State::KeyOrClose | State::Key => {
                    let b = next_token!();
                    if b == b'"' {
                        i += 1;
                        key_from = i;
                        i = string_stop(s, i);
                        if s.get(i) != Some(&b'"') {
                            // An escape, or the end of `s`: the general way.
                            self.in_key = true;
                            self.key_len = 0;
                            st = State::Str;
                            continue;
                        }
                        self.key_is(s.get(key_from..i).unwrap_or_default());
                        i += 1;
                        // The colon nearly always follows at once.
                        if s.get(i) == Some(&b':') {
                            i += 1;
                            if self.stack.len() == 1 {
                                self.top_colon();
                            }
                            st = State::Value;
                        } else {
                            st = State::Colon;
                        }
                    } else if b == b'}' && st == State::KeyOrClose {
                        i += 1;
                        self.stack.pop();
                        st = self.value_end(s, val_from, i);
                    } else {
                        st = self.garbage();
                    }
                }
                State::Colon => {
                    if next_token!() != b':' {
                        st = self.garbage();
                        continue;
                    }
                    i += 1;
                    if self.stack.len() == 1 {
                        self.top_colon();
                    }
                    st = State::Value;
                }
                State::CommaOrClose => {
                    let b = next_token!();
                    i += 1;
                    st = match (b, self.stack.last()) {
                        (b',', Some(b'{')) => State::Key,
                        (b',', Some(_)) => State::Value,
                        (b'}', Some(b'{')) | (b']', Some(b'[')) => {
                            self.stack.pop();
                            self.value_end(s, val_from, i)
                        }
                        _ => self.garbage(),
                    };
                }
                State::Done => {
                    next_token!();
                    st = self.garbage();
                }
                State::Str => {
                    i = string_stop(s, i);
                    let Some(&c) = s.get(i) else { break 'piece };
                    i += 1;
                    st = if c == b'\\' {
                        State::StrEscape
                    } else if self.in_key {
                        self.in_key = false;
                        self.key_end(s.get(key_from..i - 1).unwrap_or_default());
                        State::Colon
                    } else {
                        self.value_end(s, val_from, i)
                    };
                }
                State::StrEscape => {
                    let Some(&c) = s.get(i) else { break 'piece };
                    i += 1;
                    st = match c {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => State::Str,
                        b'u' => State::StrUnicode(4),
                        _ => self.garbage(),
                    };
                }
                State::StrUnicode(left) => {
                    let Some(&c) = s.get(i) else { break 'piece };
                    i += 1;
                    st = if !c.is_ascii_hexdigit() {
                        self.garbage()
                    } else if left == 1 {
                        State::Str
                    } else {
                        State::StrUnicode(left - 1)
                    };
                }
                State::Num(num) => match lex_number(s, &mut i, num) {
                    NumEnd::More(num) => {
                        st = State::Num(num);
                        break 'piece;
                    }
                    // The number ended just before `s[i]`, which is
                    // examined next as a token of its own.
                    NumEnd::Ended => st = self.value_end(s, val_from, i),
                    NumEnd::Bad => st = self.garbage(),
                },
                State::Literal(word, mut at) => {
                    // At most four bytes: a plain loop beats a `memcmp`.
                    while let Some(&want) = word.get(at as usize) {
                        let Some(&c) = s.get(i) else {
                            st = State::Literal(word, at);
                            break 'piece;
                        };
                        if c != want {
                            st = self.garbage();
                            continue 'piece;
                        }
                        i += 1;
                        at += 1;
                    }
                    st = self.value_end(s, val_from, i);
                }
                State::Garbage => break 'piece,
            }
        }
        // `s` ran out: keep what the next chunk needs.
        self.state = st;
        if self.in_key {
            self.append_key(s.get(key_from..).unwrap_or_default());
        }
        if self.value_started {
            self.append_value(s.get(val_from..).unwrap_or_default());
        }
    }

    /// Finishes the current line (after `scan` reported its end, or at EOF
    /// for a final line without `\n`) and resets for the next one.
    pub fn end_line(&mut self) -> LineSummary {
        let complete = match self.state {
            State::Done => true,
            State::Num(n) => n.accepting() && self.stack.is_empty(),
            _ => false,
        };
        let mut summary = std::mem::take(&mut self.summary);
        summary.len = std::mem::take(&mut self.len);
        summary.capture_overflow = self.id_overflow || self.method_overflow;
        if self.state == State::Value && self.stack.is_empty() {
            summary.shape = Shape::Blank;
        } else if !complete {
            summary.shape = Shape::Invalid;
        } else if matches!(self.state, State::Num(_)) {
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
        self.state = State::Value;
        self.stack.clear();
        self.in_key = false;
        self.top_key = TopKey::Other;
        self.key_len = 0;
        self.capturing = None;
        self.value_started = false;
        self.value_buf.clear();
        self.value_overflow = false;
        self.id_overflow = false;
        self.method_overflow = false;
    }

    /// A `:` after a top-level key.
    fn top_colon(&mut self) {
        match self.top_key {
            TopKey::Id | TopKey::Method => {
                self.capturing = Some(self.top_key);
                self.value_buf.clear();
                self.value_overflow = false;
            }
            TopKey::Result => self.summary.has_result = true,
            TopKey::Error => self.summary.has_error = true,
            TopKey::Other => {}
        }
    }

    /// An object key that `in_key` followed across chunks ended; `tail` is
    /// its part in the current chunk, the rest is in `key_buf`.
    fn key_end(&mut self, tail: &[u8]) {
        if self.key_len == 0 {
            self.key_is_raw(tail);
        } else {
            self.append_key(tail);
            let buf = self.key_buf;
            self.key_is_raw(buf.get(..self.key_len).unwrap_or_default());
        }
    }

    /// Notes what the raw key `key` means, decoding its escapes first (this
    /// is the general path: every key holding an escape comes here).
    fn key_is_raw(&mut self, key: &[u8]) {
        if memchr::memchr(b'\\', key).is_none() {
            return self.key_is(key);
        }
        let mut text = [0u8; KEY_TEXT];
        let len = unescape_key(key, &mut text).unwrap_or(0);
        self.key_is(text.get(..len).unwrap_or_default());
    }

    /// Notes what the raw key `key` means (a key too long to be of interest
    /// arrives empty, which means nothing either).
    #[inline(always)]
    fn key_is(&mut self, key: &[u8]) {
        if key == b"data" || key == b"blob" {
            self.summary.maybe_binary = true;
        }
        if self.stack.len() == 1 {
            self.top_key = match key {
                b"id" => TopKey::Id,
                b"method" => TopKey::Method,
                b"result" => TopKey::Result,
                b"error" => TopKey::Error,
                _ => TopKey::Other,
            };
        }
    }

    fn append_key(&mut self, piece: &[u8]) {
        let n = self.key_len;
        match self.key_buf.get_mut(n..n + piece.len()) {
            Some(room) => {
                room.copy_from_slice(piece);
                self.key_len += piece.len();
            }
            None => self.key_len = KEY_CAPTURE + 1,
        }
    }

    /// A complete value (scalar or container) just ended at `s[end - 1]`;
    /// the captured value, if this was it, began at `s[val_from]` (or in an
    /// earlier chunk). Returns what the grammar expects next.
    #[inline(always)]
    fn value_end(&mut self, s: &[u8], val_from: usize, end: usize) -> State {
        if self.stack.len() <= 1 && self.value_started {
            self.end_capture(s.get(val_from..end).unwrap_or_default());
        }
        if self.stack.is_empty() {
            State::Done
        } else {
            State::CommaOrClose
        }
    }

    /// The captured value ended; `tail` is its part in the current chunk.
    #[inline(never)]
    fn end_capture(&mut self, tail: &[u8]) {
        self.value_started = false;
        let which = self.capturing.take();
        let raw = if self.value_buf.is_empty() && !self.value_overflow {
            tail
        } else {
            self.append_value(tail);
            &self.value_buf
        };
        let overflow = self.value_overflow || raw.len() > self.value_cap;
        // The last duplicate wins, captured or not.
        let (slot, flag) = match which {
            Some(TopKey::Id) => (&mut self.summary.id, &mut self.id_overflow),
            Some(TopKey::Method) => (&mut self.summary.method_raw, &mut self.method_overflow),
            _ => return,
        };
        *flag = overflow;
        if overflow {
            *slot = None;
        } else {
            SmallBytes::store(slot, raw);
        }
    }

    fn append_value(&mut self, piece: &[u8]) {
        if self.value_buf.len() + piece.len() > self.value_cap {
            self.value_overflow = true;
        } else {
            self.value_buf.extend_from_slice(piece);
        }
    }

    /// The line is not JSON: nothing more of it is looked at.
    #[cold]
    fn garbage(&mut self) -> State {
        self.capturing = None;
        self.value_started = false;
        self.in_key = false;
        State::Garbage
    }
}

/// Decodes the raw text of an object key (between its quotes, escapes as
/// sent) the way a JSON parser does, into `out`, if the result is ASCII and
/// fits: every key of interest is. `None` otherwise (such a key matches no
/// key of interest). Only keys holding an escape come here.
#[cold]
fn unescape_key(raw: &[u8], out: &mut [u8; KEY_TEXT]) -> Option<usize> {
    let mut len = 0;
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        i += 1;
        let c = if b != b'\\' {
            b
        } else {
            let e = *raw.get(i)?;
            i += 1;
            match e {
                b'"' | b'\\' | b'/' => e,
                b'b' => 0x08,
                b'f' => 0x0c,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'u' => {
                    let hex = std::str::from_utf8(raw.get(i..i + 4)?).ok()?;
                    i += 4;
                    let unit = u16::from_str_radix(hex, 16).ok()?;
                    // A code unit above ASCII (or half of a surrogate pair)
                    // makes a key that is none of ours.
                    u8::try_from(unit).ok().filter(u8::is_ascii)?
                }
                _ => return None,
            }
        };
        *out.get_mut(len)? = c;
        len += 1;
    }
    Some(len)
}

/// The index of the first `"` or `\` in `s[i..]`, or `s.len()` if none.
///
/// Most JSON-RPC strings are short, so eight bytes are tested at a time
/// (SWAR) before a long string is handed to `memchr2`.
#[inline(always)]
fn string_stop(s: &[u8], mut i: usize) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let start = i;
    while let Some(word) = s.get(i..).and_then(|rest| rest.first_chunk::<8>()) {
        let w = u64::from_le_bytes(*word);
        let quote = w ^ (LO * b'"' as u64);
        let slash = w ^ (LO * b'\\' as u64);
        // A byte of `quote` / `slash` is zero where `w` holds that byte.
        // The lowest flagged bit marks the first zero byte exactly (false
        // flags, from borrows, only ever sit above a true one).
        let hits = ((quote.wrapping_sub(LO) & !quote) | (slash.wrapping_sub(LO) & !slash)) & HI;
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
        if i - start >= 32 {
            let rest = s.get(i..).unwrap_or_default();
            return memchr::memchr2(b'"', b'\\', rest).map_or(s.len(), |p| i + p);
        }
    }
    while let Some(&c) = s.get(i) {
        if c == b'"' || c == b'\\' {
            break;
        }
        i += 1;
    }
    i
}

/// How a number continued over a piece of input.
enum NumEnd {
    /// The input ran out in this state.
    More(Num),
    /// The number ended just before `s[i]`.
    Ended,
    /// Not a number.
    Bad,
}

/// Runs the number grammar from `state` over `s[*i..]`.
#[inline(always)]
fn lex_number(s: &[u8], i: &mut usize, mut state: Num) -> NumEnd {
    loop {
        if matches!(state, Num::Int | Num::Frac | Num::ExpDigits) {
            while let Some(b'0'..=b'9') = s.get(*i) {
                *i += 1;
            }
        }
        let Some(&b) = s.get(*i) else {
            return NumEnd::More(state);
        };
        state = match (state, b) {
            (Num::Minus, b'0') => Num::Zero,
            (Num::Minus, b'1'..=b'9') => Num::Int,
            (Num::Zero | Num::Int, b'.') => Num::Dot,
            (Num::Dot, b'0'..=b'9') => Num::Frac,
            (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Num::Exp,
            (Num::Exp, b'+' | b'-') => Num::ExpSign,
            (Num::Exp | Num::ExpSign, b'0'..=b'9') => Num::ExpDigits,
            _ if state.accepting() => return NumEnd::Ended,
            _ => return NumEnd::Bad,
        };
        *i += 1;
    }
}

/// The envelope of one complete JSON value (no newline inside), scanned
/// on its own: for the few places (a message the proxy made, an HTTP body,
/// a batch element, a line whose id overflowed the streaming capture) that
/// hold a whole message rather than a stream. Its `id` and `method` are
/// captured whatever their length (the message's own size bounds them).
pub(crate) fn summarize(bytes: &[u8]) -> LineSummary {
    let mut scanner = LineScanner::capturing_whole();
    let _ = scanner.scan(bytes);
    scanner.end_line()
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests;
