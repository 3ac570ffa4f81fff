//! What a scanned line means to the relay, and the messages the proxy writes
//! on its own behalf.
//!
//! Invariant: everything here works from a [`LineSummary`] and small raw
//! captures; the relayed bytes themselves are never re-serialised.

use std::borrow::Cow;

use super::scan::{LineSummary, Shape};

/// A request id normalised for pairing a response with its request.
///
/// Peers re-serialise ids: a JavaScript server answers a request with id
/// `1.0` using id `1`, and rounds `18446744073709551617` to a double. So
/// numbers are compared by their value as an `f64`, strings by their decoded
/// text, and a number never equals a string (`1` and `"1"` are different
/// requests).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum IdKey {
    Str(String),
    Num(u64),
    /// Anything else (`null`, containers, undecodable): the raw bytes.
    Raw(Vec<u8>),
}

impl IdKey {
    pub(crate) fn from_raw(raw: &[u8]) -> IdKey {
        match raw.first() {
            Some(b'"') => match serde_json::from_slice::<String>(raw) {
                Ok(s) => IdKey::Str(s),
                Err(_) => IdKey::Raw(raw.to_vec()),
            },
            Some(b'-' | b'0'..=b'9') => match small_integer(raw).or_else(|| {
                std::str::from_utf8(raw)
                    .ok()
                    .and_then(|s| s.parse::<f64>().ok())
            }) {
                // `-0` and `0` pair, like in JavaScript (adding 0.0 turns
                // -0.0 into +0.0 and changes no other value).
                Some(f) => IdKey::Num((f + 0.0).to_bits()),
                None => IdKey::Raw(raw.to_vec()),
            },
            _ => IdKey::Raw(raw.to_vec()),
        }
    }

    /// A key for an id the proxy itself chose (always a string).
    pub(crate) fn own(id: &str) -> IdKey {
        IdKey::Str(id.to_owned())
    }
}

/// An integer of at most 15 digits, read directly: it is exact as an
/// `f64`, so this is the value the float parse would give, without it (ids
/// are read for every message).
fn small_integer(raw: &[u8]) -> Option<f64> {
    let (negative, digits) = match raw.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, raw),
    };
    if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    let f = n as f64;
    Some(if negative { -f } else { f })
}

/// The JSON-RPC role of one line. Borrows from the [`LineSummary`]: ids
/// and method names are not copied on the relay's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind<'a> {
    Request {
        id: &'a [u8],
        method: Cow<'a, str>,
    },
    Notification {
        method: Cow<'a, str>,
    },
    Response {
        id: &'a [u8],
        is_error: bool,
    },
    /// A top-level array (2025-03-26 batches): relayed whole; elements are
    /// looked at separately.
    Batch,
    /// Whitespace only.
    Blank,
    /// Not JSON at all.
    Invalid,
    /// JSON, but not a JSON-RPC message we can classify (a scalar, an object
    /// without method or id, an id too long to capture...).
    Unclassified,
}

impl<'a> Kind<'a> {
    pub(crate) fn of(summary: &'a LineSummary) -> Kind<'a> {
        match summary.shape {
            Shape::Blank => return Kind::Blank,
            Shape::Invalid => return Kind::Invalid,
            Shape::Array => return Kind::Batch,
            Shape::Scalar => return Kind::Unclassified,
            Shape::Object => {}
        }
        let method = summary.method_raw.as_deref().and_then(method_name);
        match (method, summary.id.as_deref()) {
            (Some(method), Some(id)) => Kind::Request { id, method },
            (Some(method), None) if !summary.capture_overflow => Kind::Notification { method },
            (None, Some(id)) if summary.has_result || summary.has_error => Kind::Response {
                id,
                is_error: summary.has_error,
            },
            _ => Kind::Unclassified,
        }
    }
}

/// The text of a raw JSON string token (`"tools/call"` → `tools/call`),
/// borrowed unless it contains escapes.
fn method_name(raw: &[u8]) -> Option<Cow<'_, str>> {
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if !inner.contains(&b'\\') {
        return std::str::from_utf8(inner).ok().map(Cow::Borrowed);
    }
    serde_json::from_slice::<String>(raw).ok().map(Cow::Owned)
}

/// Builds `{"jsonrpc":"2.0","id":<raw id>,"error":{"code":..,"message":..}}`.
/// The id is echoed with the exact bytes the peer used.
pub(crate) fn error_response(raw_id: &[u8], code: i64, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(80 + raw_id.len() + message.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(raw_id);
    out.extend_from_slice(br#","error":{"code":"#);
    out.extend_from_slice(code.to_string().as_bytes());
    out.extend_from_slice(br#","message":"#);
    out.extend_from_slice(json_string(message).as_bytes());
    out.extend_from_slice(b"}}\n");
    out
}

/// Builds a `tools/call` result that reports a failure to the model as a
/// tool error (`isError: true`), which it can react to, rather than a
/// protocol error.
pub(crate) fn tool_error_result(raw_id: &[u8], text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(100 + raw_id.len() + text.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(raw_id);
    out.extend_from_slice(br#","result":{"content":[{"type":"text","text":"#);
    out.extend_from_slice(json_string(text).as_bytes());
    out.extend_from_slice(br#"}],"isError":true}}"#);
    out.push(b'\n');
    out
}

/// The answer to a line from the host that is not JSON.
pub(crate) fn parse_error() -> Vec<u8> {
    br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#
        .iter()
        .copied()
        .chain(std::iter::once(b'\n'))
        .collect()
}

fn json_string(text: &str) -> String {
    // Serialising a &str cannot fail.
    serde_json::to_string(text).unwrap_or_else(|_| String::from("\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::scan::LineScanner;

    #[test]
    fn integer_ids_read_directly_equal_the_float_parse() {
        let mut raws: Vec<String> = vec!["0".into(), "-0".into(), "7".into(), "-7".into()];
        for digits in 1..=17 {
            let n = "9".repeat(digits);
            raws.push(n.clone());
            raws.push(format!("-{n}"));
            raws.push(format!("1{}", "0".repeat(digits - 1)));
        }
        raws.extend((0..2000u64).map(|i| (i * 7_919_113 + 12_345).to_string()));
        for raw in &raws {
            let float: f64 = raw.parse().expect("number");
            assert_eq!(
                IdKey::from_raw(raw.as_bytes()),
                IdKey::Num((float + 0.0).to_bits()),
                "{raw}"
            );
        }
        assert_eq!(IdKey::from_raw(b"1.0"), IdKey::from_raw(b"1"));
        assert_eq!(IdKey::from_raw(b"-0"), IdKey::from_raw(b"0"));
    }

    fn kind(line: &str) -> String {
        let mut s = LineScanner::new();
        let bytes = format!("{line}\n");
        assert!(s.scan(bytes.as_bytes()).is_some());
        let summary = s.end_line();
        format!("{:?}", Kind::of(&summary))
    }

    fn request(id: &[u8], method: &str) -> String {
        format!(
            "{:?}",
            Kind::Request {
                id,
                method: method.into()
            }
        )
    }

    #[test]
    fn classifies() {
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            request(b"1", "ping")
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            format!(
                "{:?}",
                Kind::Notification {
                    method: "notifications/initialized".into()
                }
            )
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"x"}}"#),
            format!(
                "{:?}",
                Kind::Response {
                    id: br#""a""#,
                    is_error: true
                }
            )
        );
        assert_eq!(kind(r#"[{"id":1}]"#), "Batch");
        assert_eq!(kind("{"), "Invalid");
        assert_eq!(kind("   "), "Blank");
        assert_eq!(kind(r#"{"id":1}"#), "Unclassified");
        assert_eq!(
            kind(r#"{"method":"tools\/call","id":2}"#),
            request(b"2", "tools/call")
        );
    }

    #[test]
    fn id_keys_pair_like_javascript() {
        assert_eq!(IdKey::from_raw(b"1"), IdKey::from_raw(b"1.0"));
        assert_eq!(IdKey::from_raw(b"0"), IdKey::from_raw(b"-0"));
        assert_eq!(
            IdKey::from_raw(b"18446744073709551617"),
            IdKey::from_raw(b"18446744073709552000")
        );
        assert_ne!(IdKey::from_raw(b"1"), IdKey::from_raw(br#""1""#));
        assert_eq!(IdKey::from_raw(br#""\u0061""#), IdKey::from_raw(br#""a""#));
    }

    #[test]
    fn built_messages_are_valid_json() {
        let e = error_response(
            b"18446744073709551617",
            -32000,
            "MCP server \"x\" is not available",
        );
        let v: serde_json::Value = serde_json::from_slice(&e).expect("valid");
        assert_eq!(v["error"]["code"], -32000);
        assert!(String::from_utf8_lossy(&e).contains("18446744073709551617"));
        let t = tool_error_result(br#""7""#, "too large");
        let v: serde_json::Value = serde_json::from_slice(&t).expect("valid");
        assert_eq!(v["result"]["isError"], true);
        let p: serde_json::Value = serde_json::from_slice(&parse_error()).expect("valid");
        assert_eq!(p["id"], serde_json::Value::Null);
    }
}
