//! The 2026-07-28 (stateless) HTTP era: which host requests belong to it
//! and the request headers that must mirror their bodies.
//!
//! A request is modern when its `params._meta` carries
//! `io.modelcontextprotocol/protocolVersion` (every modern request must).
//! Its POST then carries `MCP-Protocol-Version` (that value), `Mcp-Method`,
//! `Mcp-Name` (`params.name`, or `params.uri` for `resources/read`) and one
//! `Mcp-Param-<token>` per argument annotated `x-mcp-header` in the tool's
//! input schema (learned from `tools/list` answers as they pass). Values
//! that would not survive an HTTP field are sent as `=?base64?…?=`.
//!
//! Pure: no I/O; the transport calls in with bytes.

use std::collections::HashMap;

use serde_json::{Map, Value};

pub(crate) const VERSION_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// Tool name → (argument path, header token).
pub(crate) type ParamHeaders = HashMap<String, Vec<(Vec<String>, String)>>;

/// The headers for a host request line, or `None` when it is not a
/// 2026-07-28 request.
pub(crate) fn headers_for(line: &[u8], params: &ParamHeaders) -> Option<Vec<(String, String)>> {
    // Cheap test first: a legacy request (often large) is never parsed.
    memchr::memmem::find(line, VERSION_META_KEY.as_bytes())?;
    let msg: Map<String, Value> = serde_json::from_slice(line).ok()?;
    let method = msg.get("method")?.as_str()?;
    let p = msg.get("params")?.as_object()?;
    let version = p
        .get("_meta")?
        .as_object()?
        .get(VERSION_META_KEY)?
        .as_str()?;
    let mut out = vec![
        ("MCP-Protocol-Version".to_string(), encode(version)),
        ("Mcp-Method".to_string(), encode(method)),
    ];
    let name_key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(name) = name_key.and_then(|k| p.get(k)).and_then(Value::as_str) {
        out.push(("Mcp-Name".to_string(), encode(name)));
        if method == "tools/call"
            && let Some(annotated) = params.get(name)
            && let Some(args) = p.get("arguments").and_then(Value::as_object)
        {
            for (path, token) in annotated {
                if let Some(value) = value_at(args, path).and_then(render) {
                    out.push((format!("Mcp-Param-{token}"), encode(&value)));
                }
            }
        }
    }
    Some(out)
}

/// The `requestId` of a `notifications/cancelled` line (raw JSON).
pub(crate) fn cancelled_request(line: &[u8]) -> Option<Vec<u8>> {
    let msg: Map<String, Value> = serde_json::from_slice(line).ok()?;
    let id = msg.get("params")?.get("requestId")?;
    serde_json::to_vec(id).ok()
}

/// The `x-mcp-header` annotations of every tool in a `tools/list` answer.
pub(crate) fn param_headers_of(answer: &[u8]) -> ParamHeaders {
    let mut out = ParamHeaders::new();
    let Ok(msg) = serde_json::from_slice::<Value>(answer) else {
        return out;
    };
    let Some(tools) = msg["result"]["tools"].as_array() else {
        return out;
    };
    for tool in tools {
        let Some(name) = tool["name"].as_str() else {
            continue;
        };
        let mut found = Vec::new();
        walk(&tool["inputSchema"], &mut Vec::new(), &mut found);
        if !found.is_empty() {
            out.insert(name.to_string(), found);
        }
    }
    out
}

fn walk(schema: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, sub) in props {
        path.push(key.clone());
        if let Some(token) = sub.get("x-mcp-header").and_then(Value::as_str)
            && is_token(token)
        {
            out.push((path.clone(), token.to_string()));
        }
        walk(sub, path, out);
        path.pop();
    }
}

/// An RFC 9110 token (what a header name may contain).
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn value_at<'a>(args: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut v = args.get(first)?;
    for key in rest {
        v = v.as_object()?.get(key)?;
    }
    Some(v)
}

/// A scalar as the header carries it; `None` for null and non-scalars.
fn render(v: &Value) -> Option<String> {
    match v {
        Value::Bool(b) => Some(if *b { "true" } else { "false" }.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// The value itself when it survives an HTTP field unchanged, else the
/// `=?base64?…?=` sentinel form.
pub(crate) fn encode(value: &str) -> String {
    let safe = value.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && value == value.trim()
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if safe {
        return value.to_string();
    }
    format!(
        "=?base64?{}?=",
        crate::codec::base64_encode(value.as_bytes(), false, true)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn legacy_requests_get_no_headers() {
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;
        assert!(headers_for(line, &ParamHeaders::new()).is_none());
    }

    #[test]
    fn modern_requests_mirror_their_body() {
        let list = json!({"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"route","inputSchema":{"type":"object","properties":{
            "region":{"type":"string","x-mcp-header":"Region"},
            "opts":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}},
            "plain":{"type":"string"}}}}]}});
        let params = param_headers_of(&serde_json::to_vec(&list).expect("json"));
        let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"route","arguments":{"region":"eu west ü","opts":{"n":7},"plain":"x"},
            "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}});
        let h = headers_for(&serde_json::to_vec(&call).expect("json"), &params).expect("modern");
        let get = |k: &str| h.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("MCP-Protocol-Version"), Some("2026-07-28"));
        assert_eq!(get("Mcp-Method"), Some("tools/call"));
        assert_eq!(get("Mcp-Name"), Some("route"));
        assert_eq!(get("Mcp-Param-N"), Some("7"));
        assert_eq!(get("Mcp-Param-Region"), Some("=?base64?ZXUgd2VzdCDDvA==?="));
        assert_eq!(h.len(), 5);
    }

    #[test]
    fn encoding_follows_the_sentinel_rules() {
        assert_eq!(encode("plain value"), "plain value");
        assert_eq!(encode(" lead"), "=?base64?IGxlYWQ=?=");
        assert_eq!(encode("=?base64?x?="), "=?base64?PT9iYXNlNjQ/eD89?=");
        assert_eq!(crate::codec::base64_encode(b"ab", false, true), "YWI=");
        assert_eq!(crate::codec::base64_encode(b"abc", false, true), "YWJj");
    }
}
