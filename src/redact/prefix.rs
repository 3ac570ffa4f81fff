//! The start of a JSON text that was cut short, made whole so that it can
//! be redacted as JSON.
//!
//! A payload too large to keep is stored as a preview of its first bytes,
//! and a string inside it may hold JSON cut at the same point. Read as mere
//! text, `{"auth":{"value":"…` names its secret in a key that no text rule
//! can tie to the value (and `["--token","…"]` is no `--flag value` pair).
//! Closed and parsed, the same start goes through the key and position
//! rules like any payload.
//!
//! The same holds for JSON that serde_json refuses for a detail inside a
//! string (a lone surrogate escape, a raw control character): read as text,
//! the secrets its keys name would go unseen, so it is parsed leniently.

use serde_json::Value;

/// The start of a JSON text made whole: `prefix` with its open string and
/// containers closed, a dangling `,` dropped and a missing value given as
/// `null`, parsed. `None` when the prefix is not the start of a JSON text
/// (or ends inside a number or literal, which a token-safe cut never does).
///
/// This is what lets a preview of a payload too large to parse still be
/// redacted as JSON, by key name and by position, instead of only as text:
/// `{"auth":{"value":"…` names its secret in a key that a text scan of the
/// raw bytes cannot tie to the value. Strings are read leniently (see
/// [`lenient_strings`]), so one odd character does not turn the whole
/// text back into mere text.
pub(crate) fn parse_json_prefix(prefix: &str) -> Option<Value> {
    /// What the scanner expects next inside the innermost container.
    #[derive(Clone, Copy, PartialEq)]
    enum Next {
        Value,
        Key,
        Colon,
        CommaOrClose,
    }
    let mut open: Vec<u8> = Vec::new();
    let mut next = Next::Value;
    let mut in_string = false;
    let mut string_is_key = false;
    let mut escaped = false;
    let mut bare_token = false;
    for &b in prefix.as_bytes() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
                next = if string_is_key {
                    Next::Colon
                } else {
                    Next::CommaOrClose
                };
            }
            continue;
        }
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => bare_token = false,
            b'"' => {
                string_is_key = next == Next::Key;
                in_string = true;
                bare_token = false;
            }
            b'{' | b'[' => {
                open.push(b);
                next = if b == b'{' { Next::Key } else { Next::Value };
                bare_token = false;
            }
            b'}' | b']' => {
                open.pop()?;
                next = Next::CommaOrClose;
                bare_token = false;
            }
            b':' => {
                next = Next::Value;
                bare_token = false;
            }
            b',' => {
                next = if open.last() == Some(&b'{') {
                    Next::Key
                } else {
                    Next::Value
                };
                bare_token = false;
            }
            _ => {
                // A number or a literal: complete only once a delimiter
                // follows it.
                bare_token = true;
                next = Next::CommaOrClose;
            }
        }
    }
    if bare_token || escaped {
        return None;
    }
    let mut whole = prefix.trim_end().to_owned();
    if in_string {
        whole.push('"');
        next = if string_is_key {
            Next::Colon
        } else {
            Next::CommaOrClose
        };
    }
    if whole.ends_with(',') {
        whole.pop();
    }
    match next {
        Next::Colon => whole.push_str(":null"),
        Next::Value if whole.ends_with(':') => whole.push_str("null"),
        _ => {}
    }
    for container in open.iter().rev() {
        whole.push(if *container == b'{' { '}' } else { ']' });
    }
    serde_json::from_str(&whole)
        .ok()
        .or_else(|| serde_json::from_str(&lenient_strings(&whole)?).ok())
}

/// `text` with what serde_json refuses inside JSON strings, though peers
/// send it, made acceptable: a lone surrogate escape (`\ud83d`, which
/// JavaScript writes for a string cut in the middle of an emoji) becomes
/// `\ufffd`, and a raw control character becomes its `\u00XX` escape.
/// `None` when there is nothing to change. Only the redactor's copy is
/// changed: this decides how a secret is found, never what is relayed.
fn lenient_strings(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    // The code unit of a `\uXXXX` escape starting at `at`, if one does.
    let unit = |at: usize| -> Option<u16> {
        let hex = bytes.get(at..at + 6)?.strip_prefix(b"\\u")?;
        hex.iter().try_fold(0u16, |n, &d| {
            Some(n * 16 + u16::try_from(char::from(d).to_digit(16)?).ok()?)
        })
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut changed = false;
    let mut in_string = false;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if !in_string {
            in_string = b == b'"';
            out.push(b);
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                in_string = false;
                out.push(b);
                i += 1;
            }
            b'\\' => {
                let escape = match unit(i) {
                    Some(0xD800..=0xDBFF) if matches!(unit(i + 6), Some(0xDC00..=0xDFFF)) => 12,
                    Some(0xD800..=0xDFFF) => {
                        out.extend_from_slice(b"\\ufffd");
                        changed = true;
                        i += 6;
                        continue;
                    }
                    Some(_) => 6,
                    None => 2,
                };
                let end = (i + escape).min(bytes.len());
                out.extend_from_slice(&bytes[i..end]);
                i = end;
            }
            0x00..=0x1f => {
                out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
                changed = true;
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    if !changed {
        return None;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_prefixes_are_made_whole_wherever_they_were_cut() {
        let text = r#"{"id":7,"result":{"auth":{"value":"s3cr3t"},"argv":["--token","v"],"text":"a b\"c","n":[1,true,null]}}"#;
        let whole: Value = serde_json::from_str(text).expect("valid");
        // Cut everywhere a token-safe prefix may end (after a delimiter):
        // every cut parses, and what it holds is a prefix of the whole.
        let cuts: Vec<usize> = text
            .char_indices()
            .filter(|&(_, c)| c.is_whitespace() || "\"',:;{}[]()<>".contains(c))
            .map(|(i, _)| i + 1)
            .collect();
        for cut in cuts {
            let prefix = &text[..cut];
            let Some(value) = parse_json_prefix(prefix) else {
                panic!("{prefix:?} did not parse");
            };
            if cut == text.len() {
                assert_eq!(value, whole);
            }
            if cut > text.find("s3cr3t").unwrap_or(0) + 8 {
                assert_eq!(value["result"]["auth"]["value"], "s3cr3t", "{prefix:?}");
            }
        }
        assert_eq!(parse_json_prefix(r#"{"a":"x","#), Some(json!({"a": "x"})));
        assert_eq!(parse_json_prefix(r#"{"a":"#), Some(json!({"a": null})));
        assert_eq!(parse_json_prefix(r#"{"ke"#), Some(json!({"ke": null})));
        assert_eq!(
            parse_json_prefix(r#"["--token", "#),
            Some(json!(["--token"]))
        );
        // Not the start of a JSON text, or cut inside a number.
        for bad in ["not json", r#"{"a":12"#, "}{", r#"{"a":1]"#] {
            assert_eq!(parse_json_prefix(bad), None, "{bad}");
        }
    }

    #[test]
    fn strings_serde_json_refuses_are_read_leniently() {
        // A lone surrogate (high or low), a raw NUL and a raw tab, whole or
        // cut: the keys around them still parse.
        for odd in [r"\ud83d", r"\ude00", "\u{0}", "\t", r"\ud83d\u0041"] {
            let text = format!(r#"{{"note":"a{odd}b","auth":{{"value":"s3cr3t"}}}}"#);
            assert!(serde_json::from_str::<Value>(&text).is_err(), "{text:?}");
            let value = parse_json_prefix(&text).expect("parses leniently");
            assert_eq!(value["auth"]["value"], "s3cr3t", "{text:?}");
            let cut = &text[..text.len() - 2];
            let value = parse_json_prefix(cut).expect("a cut one too");
            assert_eq!(value["auth"]["value"], "s3cr3t", "{cut:?}");
        }
        // What is valid stays as it was: pairs, escapes, other characters.
        let valid = r#"{"s":"\ud83d\ude80 \u00e9 \\ud83d \" é"}"#;
        assert_eq!(lenient_strings(valid), None);
        assert_eq!(
            parse_json_prefix(r#"{"s":"x\ud83d"}"#),
            Some(json!({"s": "x\u{fffd}"}))
        );
        // A cut escape is left for the prefix rules to refuse.
        assert_eq!(parse_json_prefix(r#"{"s":"x\ud8"#), None);
    }
}
