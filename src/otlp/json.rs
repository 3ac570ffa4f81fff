//! OTLP/HTTP JSON (`application/json`), written by hand so the bytes are
//! fixed by the spans alone (golden-testable) and the OTLP rules that
//! differ from plain protobuf-JSON hold: ids are lower-case **hex**, enums
//! are **integers**, 64-bit integers are **decimal strings**, keys are
//! lowerCamelCase, `resourceSpans` is always present. One span per line,
//! so a golden file diffs span by span.

use std::fmt::Write as _;

use super::span::{Batch, KeyValue, SCOPE_NAME, SCOPE_VERSION, Span, StatusCode, Value};
use crate::codec::hex_lower;

fn string(out: &mut String, s: &str) {
    // serde_json's string escaping: valid JSON for any input.
    out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
}

fn attributes(out: &mut String, attrs: &[KeyValue]) {
    out.push('[');
    for (i, kv) in attrs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"key\":");
        string(out, &kv.key);
        out.push_str(",\"value\":");
        match &kv.value {
            Value::Str(s) => {
                out.push_str("{\"stringValue\":");
                string(out, s);
                out.push('}');
            }
            Value::Bool(b) => {
                let _ = write!(out, "{{\"boolValue\":{b}}}");
            }
            Value::Int(n) => {
                let _ = write!(out, "{{\"intValue\":\"{n}\"}}");
            }
        }
        out.push('}');
    }
    out.push(']');
}

fn span(out: &mut String, s: &Span) {
    let _ = write!(
        out,
        "{{\"traceId\":\"{}\",\"spanId\":\"{}\"",
        hex_lower(&s.trace_id),
        hex_lower(&s.span_id)
    );
    if let Some(parent) = &s.parent_span_id {
        let _ = write!(out, ",\"parentSpanId\":\"{}\"", hex_lower(parent));
    }
    out.push_str(",\"name\":");
    string(out, &s.name);
    let _ = write!(
        out,
        ",\"kind\":{},\"startTimeUnixNano\":\"{}\",\"endTimeUnixNano\":\"{}\",\"attributes\":",
        s.kind as u8, s.start_time_unix_nano, s.end_time_unix_nano
    );
    attributes(out, &s.attributes);
    if !s.events.is_empty() {
        out.push_str(",\"events\":[");
        for (i, e) in s.events.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{{\"timeUnixNano\":\"{}\",\"name\":", e.time_unix_nano);
            string(out, &e.name);
            out.push_str(",\"attributes\":");
            attributes(out, &e.attributes);
            out.push('}');
        }
        out.push(']');
    }
    if s.status != StatusCode::Unset {
        let _ = write!(out, ",\"status\":{{\"code\":{}", s.status as u8);
        if !s.status_message.is_empty() {
            out.push_str(",\"message\":");
            string(out, &s.status_message);
        }
        out.push('}');
    }
    out.push('}');
}

/// The `ExportTraceServiceRequest` of `batch` as OTLP/JSON.
pub(crate) fn encode(batch: Batch<'_>) -> Vec<u8> {
    let mut out = String::with_capacity(512 + batch.spans.len() * 1024);
    out.push_str("{\"resourceSpans\":[{\"resource\":{\"attributes\":");
    attributes(&mut out, batch.resource);
    out.push_str("},\"scopeSpans\":[{\"scope\":{\"name\":");
    string(&mut out, SCOPE_NAME);
    out.push_str(",\"version\":");
    string(&mut out, SCOPE_VERSION);
    out.push_str("},\"spans\":[");
    for (i, s) in batch.spans.iter().enumerate() {
        out.push_str(if i > 0 { ",\n" } else { "\n" });
        span(&mut out, s);
    }
    out.push_str("\n]}]}]}\n");
    out.into_bytes()
}

/// What an OTLP/JSON answer said: spans rejected and the message, read
/// leniently (an empty body, `{}`, a null `partialSuccess`, unknown keys
/// and otelite's own shape are all full success). `None`: not JSON.
pub(crate) fn partial_success(answer: &[u8]) -> Option<(i64, String)> {
    if answer.iter().all(u8::is_ascii_whitespace) {
        return Some((0, String::new()));
    }
    let v: serde_json::Value = serde_json::from_slice(answer).ok()?;
    let p = &v["partialSuccess"];
    let rejected = match &p["rejectedSpans"] {
        serde_json::Value::String(s) => s.parse().unwrap_or(0),
        n => n.as_i64().unwrap_or(0),
    };
    let message = p["errorMessage"].as_str().unwrap_or("").to_owned();
    Some((rejected, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::span::{Event, SpanKind, kv};

    #[test]
    fn follows_the_otlp_json_rules() {
        let spans = [Span {
            trace_id: [0xab; 16],
            span_id: [0x01; 8],
            parent_span_id: None,
            name: "tools/call \"echo\"".into(),
            kind: SpanKind::Client,
            start_time_unix_nano: 1_796_000_000_000_000_000,
            end_time_unix_nano: 1_796_000_000_500_000_000,
            attributes: vec![kv("n", -3i64), kv("ok", true)],
            events: vec![Event {
                time_unix_nano: 5,
                name: "e".into(),
                attributes: vec![],
            }],
            status: StatusCode::Error,
            status_message: "bad".into(),
        }];
        let resource = [kv("service.name", "bir")];
        let text = String::from_utf8(encode(Batch {
            resource: &resource,
            spans: &spans,
        }))
        .expect("utf8");
        let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let span = &v["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "abababababababababababababababab");
        assert_eq!(span["spanId"], "0101010101010101");
        assert!(span.get("parentSpanId").is_none());
        assert_eq!(span["kind"], 3, "an integer, never the enum's name");
        assert_eq!(span["startTimeUnixNano"], "1796000000000000000");
        assert_eq!(span["attributes"][0]["value"]["intValue"], "-3");
        assert_eq!(span["attributes"][1]["value"]["boolValue"], true);
        assert_eq!(span["status"]["code"], 2);
        assert_eq!(span["name"], "tools/call \"echo\"");
        assert_eq!(span["events"][0]["timeUnixNano"], "5");
        // No spans still sends resourceSpans.
        let empty = encode(Batch {
            resource: &resource,
            spans: &[],
        });
        let v: serde_json::Value = serde_json::from_slice(&empty).expect("json");
        assert!(v["resourceSpans"].is_array());
    }

    #[test]
    fn answers_are_read_leniently() {
        assert_eq!(partial_success(b""), Some((0, String::new())));
        assert_eq!(partial_success(b"{}"), Some((0, String::new())));
        assert_eq!(
            partial_success(b"{\"partialSuccess\":null}"),
            Some((0, String::new()))
        );
        assert_eq!(
            partial_success(b"{\"accepted_spans\":3,\"rejected_spans\":0,\"status\":\"success\"}"),
            Some((0, String::new()))
        );
        assert_eq!(
            partial_success(
                b"{\"partialSuccess\":{\"rejectedSpans\":\"2\",\"errorMessage\":\"x\"}}"
            ),
            Some((2, "x".into()))
        );
        assert_eq!(partial_success(b"<html>"), None);
    }
}
