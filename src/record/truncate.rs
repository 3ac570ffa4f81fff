//! Payload caps: what a stored step may weigh.
//!
//! Base64 image and audio data (and embedded-resource blobs) are replaced
//! by a stub with their size and sha256 — a recording is for reading and
//! replaying, not for archiving binaries. A payload still larger than the
//! cap is replaced by `{"truncated": true, "originalBytes": N, "preview":
//! "…"}`, the preview being the start of the already-redacted serialisation.

use serde_json::{Map, Value, json};

use crate::codec::sha256_hex;

/// Default cap per stored payload (`BIR_MAX_PAYLOAD_BYTES`).
pub(crate) const DEFAULT_CAP: usize = 64 * 1024;
/// How much of an oversized payload is kept as a preview.
pub(crate) const PREVIEW: usize = 1024;

/// Replaces binary content blocks with stubs, in place. Returns how many
/// bytes of base64 they held.
pub(crate) fn stub_binaries(v: &mut Value) -> usize {
    let mut stubbed = 0;
    let mut stack = vec![v];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                let kind = map.get("type").and_then(Value::as_str).unwrap_or("");
                if matches!(kind, "image" | "audio") {
                    stubbed += stub_field(map, "data");
                }
                if map.contains_key("blob") && map.contains_key("uri") {
                    stubbed += stub_field(map, "blob");
                }
                stack.extend(map.values_mut());
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
    stubbed
}

fn stub_field(map: &mut Map<String, Value>, field: &str) -> usize {
    match map.get(field) {
        Some(Value::String(data)) if data.len() > 64 => {
            let len = data.len();
            let stub = json!({
                "omitted": "binary",
                "base64Bytes": len,
                "sha256": sha256_hex(data.as_bytes()),
            });
            map.insert(field.to_owned(), stub);
            len
        }
        _ => 0,
    }
}

/// The start of `text`, at most `max` bytes, cut back to a delimiter so that
/// no token is split: a credential cut in half would no longer match its
/// shape and could slip past redaction.
pub(crate) fn token_safe_prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let is_delimiter = |c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '\'' | ',' | ':' | ';' | '{' | '}' | '[' | ']' | '(' | ')' | '<' | '>'
            )
    };
    let cut = text[..end].rfind(is_delimiter).map_or(0, |i| i + 1);
    &text[..cut]
}

/// The payload as stored: itself if it fits in `cap` bytes of JSON, else
/// the truncation marker. Returns whether it was truncated.
///
/// `text` is the value's compact rendering (`serde_json`'s, as
/// [`super::payload::canonical`] makes it), which the caller already holds
/// for the digest: the size is judged and the preview cut from it, so the
/// value is not rendered a second time.
pub(crate) fn cap_rendered(v: Value, text: &str, cap: usize) -> (Value, bool) {
    if text.len() <= cap {
        return (v, false);
    }
    let preview = token_safe_prefix(text, PREVIEW);
    (
        json!({"truncated": true, "originalBytes": text.len(), "preview": preview}),
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(v: Value, cap: usize) -> (Value, bool) {
        let text = serde_json::to_string(&v).expect("render");
        cap_rendered(v, &text, cap)
    }

    #[test]
    fn previews_never_split_a_token() {
        let text = format!("key: {} tail", "A".repeat(50));
        assert_eq!(token_safe_prefix(&text, 20), "key: ");
        assert_eq!(token_safe_prefix("short", 20), "short");
        assert_eq!(token_safe_prefix(&"x".repeat(40), 20), "");
    }

    #[test]
    fn images_become_stubs_and_big_payloads_markers() {
        let png = "iVBORw0KGgo".repeat(100);
        let mut v = json!({"content": [{"type": "image", "data": png, "mimeType": "image/png"},
                                        {"type": "resource", "resource": {"uri": "x:y", "blob": "QUJD".repeat(50)}},
                                        {"type": "text", "text": "hi"}]});
        assert_eq!(stub_binaries(&mut v), 1100 + 200);
        assert_eq!(v["content"][0]["data"]["omitted"], "binary");
        assert_eq!(v["content"][0]["mimeType"], "image/png");
        assert_eq!(v["content"][2]["text"], "hi");

        let (small, t) = cap(json!({"a": 1}), 100);
        assert!(!t);
        assert_eq!(small, json!({"a": 1}));
        let (big, t) = cap(json!({"text": "é".repeat(5000)}), 1000);
        assert!(t);
        assert_eq!(big["truncated"], true);
        assert_eq!(big["originalBytes"], 10011);
        assert!(big["preview"].as_str().is_some_and(|p| p.len() <= PREVIEW));
    }
}
