//! Adding one key to a request's `params._meta`, in place, on bytes: the
//! only edit the proxy ever makes to a relayed message (the opt-in W3C
//! `traceparent`, `BIR_OTLP_TRACEPARENT=1`).
//!
//! The edit is an insertion: every byte of the host's line stays where it
//! was relative to its neighbours (key order, number spelling, escapes,
//! whitespace, the line end), and the new member goes first in its object,
//! so nothing the host wrote moves past it. When in doubt it does nothing:
//!
//! * the line is not an object, has no `params` object, or its `_meta` is
//!   not an object → untouched (JSON-RPC gives such a request no place
//!   for it, and the server answers the host's own bytes);
//! * `_meta` already has the key → untouched (the host's context wins);
//! * a key spelt with escapes (`"\u005fmeta"`) among the top level's or
//!   `params`' keys → untouched (it might be `_meta` in disguise, and a
//!   second `_meta` would shadow or be shadowed by it).
//!
//! Keys that appear twice are read as JavaScript reads them: the last one
//! counts.
//!
//! The input is a line the scanner already validated as JSON, so this
//! walker only has to find member boundaries; on anything unexpected it
//! gives up (returns `None`) rather than guess.

use std::ops::Range;

/// `line` with `"key":"value"` as the first member of `params._meta`
/// (`_meta` made as the first member of `params` when missing); `None`
/// when the line is left as it is (see the module's notes). `value` must
/// need no JSON escaping (bir's own text: a `traceparent`).
pub(crate) fn insert_in_params_meta(line: &[u8], key: &str, value: &str) -> Option<Vec<u8>> {
    debug_assert!(!value.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20));
    let top = skip_ws(line, 0);
    let params = last_member(line, top, b"params")?;
    if line.get(params.start) != Some(&b'{') {
        return None;
    }
    if any_escaped_key(line, params.start)? {
        return None;
    }
    let (at, text) = match last_member(line, params.start, b"_meta") {
        Some(meta) => {
            if line.get(meta.start) != Some(&b'{') {
                return None;
            }
            if has_member(line, meta.start, key.as_bytes())? {
                return None;
            }
            let comma = if is_empty_object(line, meta.start) {
                ""
            } else {
                ","
            };
            (meta.start + 1, format!("\"{key}\":\"{value}\"{comma}"))
        }
        None => {
            let comma = if is_empty_object(line, params.start) {
                ""
            } else {
                ","
            };
            (
                params.start + 1,
                format!("\"_meta\":{{\"{key}\":\"{value}\"}}{comma}"),
            )
        }
    };
    let mut out = Vec::with_capacity(line.len() + text.len());
    out.extend_from_slice(&line[..at]);
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&line[at..]);
    Some(out)
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    i
}

/// The index just past the string token starting at `start` (a `"`), if it
/// ends within `bytes` (which may be cut short: a clipped request's head).
pub(crate) fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The index just past the value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n')
            {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// Calls `each(key, value)` for the members of the object opening at
/// `open` (the key without its quotes, as written; the value's range).
fn members(b: &[u8], open: usize, mut each: impl FnMut(&[u8], Range<usize>)) -> Option<()> {
    if b.get(open) != Some(&b'{') {
        return None;
    }
    let mut i = skip_ws(b, open + 1);
    if b.get(i) == Some(&b'}') {
        return Some(());
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(b, i)?;
        let key = &b[i + 1..key_end - 1];
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(b, i + 1);
        let end = skip_value(b, start)?;
        each(key, start..end);
        i = skip_ws(b, end);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b'}' => return Some(()),
            _ => return None,
        }
    }
}

/// The value of the last member named `name` of the object at `open`;
/// `None` also when any key there is spelt with an escape (it might be
/// `name` in disguise: the edit is not made on a guess).
fn last_member(b: &[u8], open: usize, name: &[u8]) -> Option<Range<usize>> {
    let mut found = None;
    let mut escaped = false;
    members(b, open, |k, v| {
        escaped |= k.contains(&b'\\');
        if k == name {
            found = Some(v);
        }
    })?;
    if escaped {
        return None;
    }
    found
}

fn any_escaped_key(b: &[u8], open: usize) -> Option<bool> {
    let mut found = false;
    members(b, open, |k, _| found |= k.contains(&b'\\'))?;
    Some(found)
}

fn has_member(b: &[u8], open: usize, name: &[u8]) -> Option<bool> {
    let mut found = false;
    members(b, open, |k, _| found |= k == name)?;
    Some(found)
}

fn is_empty_object(b: &[u8], open: usize) -> bool {
    b.get(skip_ws(b, open + 1)) == Some(&b'}')
}

#[cfg(test)]
mod tests {
    use super::insert_in_params_meta;

    const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn put(line: &str) -> Option<String> {
        insert_in_params_meta(line.as_bytes(), "traceparent", TP)
            .map(|b| String::from_utf8(b).expect("utf8"))
    }

    #[test]
    fn makes_meta_first_in_params_and_keeps_every_other_byte() {
        let line = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"n\":1.50}}}\n";
        let got = put(line).expect("inserted");
        assert_eq!(
            got,
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{{\"_meta\":{{\"traceparent\":\"{TP}\"}},\"name\":\"echo\",\"arguments\":{{\"n\":1.50}}}}}}\n"
            )
        );
        // Taking the insertion out gives the host's bytes back.
        let inserted = format!("\"_meta\":{{\"traceparent\":\"{TP}\"}},");
        assert_eq!(got.replacen(&inserted, "", 1), line);
    }

    #[test]
    fn adds_to_an_existing_meta_without_touching_its_keys() {
        let line = r#"{"id":1,"method":"tools/call","params":{ "_meta" : { "claudecode/toolUseId" : "toolu_1" } ,"name":"x"}}"#;
        let got = put(line).expect("inserted");
        assert_eq!(
            got,
            format!(
                r#"{{"id":1,"method":"tools/call","params":{{ "_meta" : {{"traceparent":"{TP}", "claudecode/toolUseId" : "toolu_1" }} ,"name":"x"}}}}"#
            )
        );
        let empty = r#"{"params":{"_meta":{},"name":"x"}}"#;
        assert_eq!(
            put(empty).expect("inserted"),
            format!(r#"{{"params":{{"_meta":{{"traceparent":"{TP}"}},"name":"x"}}}}"#)
        );
        let bare = r#"{"params":{ }}"#;
        assert_eq!(
            put(bare).expect("inserted"),
            format!(r#"{{"params":{{"_meta":{{"traceparent":"{TP}"}} }}}}"#)
        );
    }

    #[test]
    fn leaves_alone_what_it_must_not_change() {
        for line in [
            // The host's own context wins.
            r#"{"id":1,"method":"tools/call","params":{"_meta":{"traceparent":"00-aa-bb-01"},"name":"x"}}"#,
            // No params, params not an object, _meta not an object.
            r#"{"id":1,"method":"tools/call"}"#,
            r#"{"id":1,"method":"tools/call","params":[1,2]}"#,
            r#"{"id":1,"method":"tools/call","params":{"_meta":null,"name":"x"}}"#,
            // An escaped `_meta` is not recognised: no second one is made.
            r#"{"id":1,"params":{"\u005fmeta":{},"name":"x"}}"#,
            // Not an object; damaged.
            r#"[{"id":1,"params":{}}]"#,
            r#"{"id":1,"params":{"name":"x""#,
            r#"{"id":1,"\u0070arams":{"name":"x"}}"#,
        ] {
            assert_eq!(put(line), None, "{line}");
        }
    }

    #[test]
    fn strings_and_nesting_do_not_fool_it() {
        let line = r#"{"method":"tools/call","x":"\"params\":{","params":{"arguments":{"_meta":{"a":"}"}},"name":"_meta"}}"#;
        let got = put(line).expect("inserted");
        assert_eq!(
            got,
            format!(
                r#"{{"method":"tools/call","x":"\"params\":{{","params":{{"_meta":{{"traceparent":"{TP}"}},"arguments":{{"_meta":{{"a":"}}"}}}},"name":"_meta"}}}}"#
            )
        );
        // The last `params` counts, as for a JavaScript reader.
        let twice = r#"{"params":{"a":1},"params":{"b":2}}"#;
        assert_eq!(
            put(twice).expect("inserted"),
            format!(
                r#"{{"params":{{"a":1}},"params":{{"_meta":{{"traceparent":"{TP}"}},"b":2}}}}"#
            )
        );
    }
}
