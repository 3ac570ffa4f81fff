//! A lenient JSON reader for payloads serde_json refuses although every
//! peer reads them: invalid UTF-8 inside a string, a lone surrogate escape
//! (`"\ud800"`, valid for JavaScript's `JSON.parse`), nesting deeper than
//! serde_json's 128 levels. Refusing them would let a server hide any
//! result from the recording by adding one such detail; reading them
//! leniently records everything that can be recorded.
//!
//! Invariants:
//! * Iterative: an explicit stack, never recursion, whatever the depth.
//! * What could not be kept as it was is replaced, and counted in
//!   [`Repairs`]: an invalid UTF-8 sequence or a lone surrogate by U+FFFD,
//!   a container deeper than the depth limit by [`TOO_DEEP`] (its contents
//!   are skipped, not built: a tree that deep could not be stored, read
//!   back or dropped without recursion).
//! * Everything else is read as JSON (RFC 8259): a grammar error, a raw
//!   control character in a string (JavaScript's `JSON.parse` refuses it
//!   too), trailing bytes or a truncated text is not repaired (`None`).

use serde_json::{Map, Number, Value};

/// Replaces a container nested deeper than the limit (the redactor's
/// marker for the same cut is this one).
pub(crate) const TOO_DEEP: &str = "[REDACTED:too-deep]";

/// What reading changed, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Repairs {
    pub invalid_utf8: u32,
    pub lone_surrogates: u32,
    pub too_deep: u32,
}

impl Repairs {
    /// Both counts together.
    pub(crate) fn plus(self, other: Repairs) -> Repairs {
        Repairs {
            invalid_utf8: self.invalid_utf8 + other.invalid_utf8,
            lone_surrogates: self.lone_surrogates + other.lone_surrogates,
            too_deep: self.too_deep + other.too_deep,
        }
    }

    /// `invalid-utf8:2,lone-surrogate:1,too-deep:1` (kinds that occurred).
    pub(crate) fn describe(&self) -> Option<String> {
        let parts: Vec<String> = [
            ("invalid-utf8", self.invalid_utf8),
            ("lone-surrogate", self.lone_surrogates),
            ("too-deep", self.too_deep),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(kind, n)| format!("{kind}:{n}"))
        .collect();
        (!parts.is_empty()).then(|| parts.join(","))
    }
}

/// An open container on the stack.
enum Open {
    Array(Vec<Value>),
    /// The object so far and the key whose value comes next.
    Object(Map<String, Value>, Option<String>),
}

/// Reads `bytes` as one JSON value, keeping containers up to `max_depth`
/// levels deep (deeper ones become [`TOO_DEEP`]). `None` if it is not JSON
/// even read leniently.
pub(crate) fn parse(bytes: &[u8], max_depth: usize) -> Option<(Value, Repairs)> {
    let mut p = Reader {
        b: bytes,
        i: 0,
        repairs: Repairs::default(),
    };
    let mut stack: Vec<Open> = Vec::new();
    let value = loop {
        // A value starts here (the grammar around it is handled below).
        p.ws();
        let mut done = match p.peek()? {
            b'{' | b'[' if stack.len() >= max_depth => {
                p.skip_container()?;
                p.repairs.too_deep += 1;
                Value::String(TOO_DEEP.to_owned())
            }
            b'{' => {
                p.i += 1;
                p.ws();
                if p.peek()? == b'}' {
                    p.i += 1;
                    Value::Object(Map::new())
                } else {
                    let key = p.key()?;
                    stack.push(Open::Object(Map::new(), Some(key)));
                    continue;
                }
            }
            b'[' => {
                p.i += 1;
                p.ws();
                if p.peek()? == b']' {
                    p.i += 1;
                    Value::Array(Vec::new())
                } else {
                    stack.push(Open::Array(Vec::new()));
                    continue;
                }
            }
            b'"' => Value::String(p.string()?),
            b't' => p.literal(b"true", Value::Bool(true))?,
            b'f' => p.literal(b"false", Value::Bool(false))?,
            b'n' => p.literal(b"null", Value::Null)?,
            _ => Value::Number(p.number()?),
        };
        // The value is complete: add it to its container, closing every
        // container that ends after it. `Some` when it was the top level.
        let finished = loop {
            match stack.last_mut() {
                None => break Some(done),
                Some(Open::Array(items)) => {
                    items.push(done);
                    p.ws();
                    match p.next()? {
                        b',' => break None,
                        b']' => match stack.pop() {
                            Some(Open::Array(items)) => done = Value::Array(items),
                            _ => return None,
                        },
                        _ => return None,
                    }
                }
                Some(Open::Object(map, key)) => {
                    map.insert(key.take()?, done);
                    p.ws();
                    match p.next()? {
                        b',' => {
                            *key = Some(p.key()?);
                            break None;
                        }
                        b'}' => match stack.pop() {
                            Some(Open::Object(map, _)) => done = Value::Object(map),
                            _ => return None,
                        },
                        _ => return None,
                    }
                }
            }
        };
        if let Some(value) = finished {
            break value;
        }
    };
    p.ws();
    (p.i == p.b.len()).then_some((value, p.repairs))
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
    repairs: Repairs,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// An object key and its colon.
    fn key(&mut self) -> Option<String> {
        self.ws();
        if self.peek()? != b'"' {
            return None;
        }
        let key = self.string()?;
        self.ws();
        (self.next()? == b':').then_some(key)
    }

    fn literal(&mut self, word: &[u8], value: Value) -> Option<Value> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| {
            self.i = end;
            value
        })
    }

    /// A number, kept as written (serde_json's `arbitrary_precision`).
    fn number(&mut self) -> Option<Number> {
        let start = self.i;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.i += 1;
        }
        let text = std::str::from_utf8(self.b.get(start..self.i)?).ok()?;
        serde_json::from_str::<Number>(text).ok()
    }

    /// A string token (at its opening quote), decoded; invalid UTF-8 and
    /// lone surrogates become U+FFFD (counted).
    fn string(&mut self) -> Option<String> {
        self.i += 1;
        let mut bytes: Vec<u8> = Vec::new();
        loop {
            let c = self.next()?;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = self.next()?;
                    let decoded = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return None,
                    };
                    let mut utf8 = [0u8; 4];
                    bytes.extend_from_slice(decoded.encode_utf8(&mut utf8).as_bytes());
                }
                // A raw control character: JSON forbids it, and so do
                // the peers' parsers (JavaScript's included); not repaired.
                0..=0x1f => return None,
                _ => bytes.push(c),
            }
        }
        let mut out = String::with_capacity(bytes.len());
        for chunk in bytes.utf8_chunks() {
            out.push_str(chunk.valid());
            if !chunk.invalid().is_empty() {
                out.push('\u{fffd}');
                self.repairs.invalid_utf8 += 1;
            }
        }
        Some(out)
    }

    /// After `\u`: the code point, pairing surrogates; a lone one is
    /// U+FFFD.
    fn unicode_escape(&mut self) -> Option<char> {
        let hi = self.hex4()?;
        if (0xD800..0xDC00).contains(&hi) {
            let pair = self.b.get(self.i..self.i + 2) == Some(b"\\u");
            if pair {
                let save = self.i;
                self.i += 2;
                let lo = self.hex4()?;
                if (0xDC00..0xE000).contains(&lo) {
                    let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    return char::from_u32(c);
                }
                self.i = save;
            }
            self.repairs.lone_surrogates += 1;
            return Some('\u{fffd}');
        }
        if (0xDC00..0xE000).contains(&hi) {
            self.repairs.lone_surrogates += 1;
            return Some('\u{fffd}');
        }
        char::from_u32(hi)
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = std::str::from_utf8(self.b.get(self.i..self.i + 4)?).ok()?;
        if !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        self.i += 4;
        u32::from_str_radix(digits, 16).ok()
    }

    /// Skips a whole container (at its opening bracket) without building
    /// it: brackets counted, strings stepped over.
    fn skip_container(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match self.next()? {
                b'"' => loop {
                    match self.next()? {
                        b'\\' => self.i += 1,
                        b'"' => break,
                        _ => {}
                    }
                },
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(());
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_serde_json_reads_the_same() {
        for text in [
            r#"{"a":[1,2.50,-0,1e400,{"b":null}],"c":"x\"\u00e9\ud83d\ude80","d":true,"e":{}}"#,
            "[]",
            r#""s""#,
            "12345678901234567890123",
            r#"{"k":"v","k":"w"}"#,
        ] {
            let (v, repairs) = parse(text.as_bytes(), 100).expect(text);
            assert_eq!(repairs, Repairs::default(), "{text}");
            if let Ok(want) = serde_json::from_str::<Value>(text) {
                assert_eq!(v, want, "{text}");
            }
        }
    }

    #[test]
    fn replaces_only_what_cannot_be_kept() {
        let (v, r) = parse(
            b"{\"a\":\"caf\xc3\xa9 \xff\xfe ok\",\"b\":\"\\ud800 and \\udc00x\"}",
            100,
        )
        .expect("lenient");
        assert_eq!(v["a"], "café \u{fffd}\u{fffd} ok", "as from_utf8_lossy");
        assert_eq!(v["b"], "\u{fffd} and \u{fffd}x");
        assert_eq!(
            r,
            Repairs {
                invalid_utf8: 2,
                lone_surrogates: 2,
                too_deep: 0
            }
        );
        assert_eq!(
            r.describe().as_deref(),
            Some("invalid-utf8:2,lone-surrogate:2")
        );
    }

    #[test]
    fn any_depth_without_recursion() {
        let n = 1_000_000;
        let text = format!("{{\"r\":{}1{}}}", "[".repeat(n), "]".repeat(n));
        let (v, r) = parse(text.as_bytes(), 10).expect("deep");
        assert_eq!(r.too_deep, 1);
        let mut at = &v["r"];
        for _ in 0..9 {
            at = &at[0];
        }
        assert_eq!(at, &Value::String(TOO_DEEP.to_owned()));
        let shallow = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let (_, r) = parse(shallow.as_bytes(), 300).expect("200 levels");
        assert_eq!(r, Repairs::default());
    }

    #[test]
    fn not_json_stays_not_json() {
        for text in [
            "{",
            "{\"a\":}",
            "[1,]",
            "{} x",
            "\"open",
            "[1 2]",
            "{\"a\" 1}",
            "\"raw \u{0} nul\"",
        ] {
            assert!(parse(text.as_bytes(), 100).is_none(), "{text}");
        }
    }
}
