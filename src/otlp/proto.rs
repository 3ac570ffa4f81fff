//! OTLP/HTTP protobuf (`application/x-protobuf`): a hand-written encoder
//! for the handful of messages bir sends, and a reader for the one answer.
//!
//! Why by hand and not `prost`: bir sends eight message types, all of
//! them plain (strings, bytes, varints, fixed64, nested messages). The
//! wire format for that is a few dozen lines; `prost` would add a proc-macro
//! build, `bytes`, and either `protoc` at build time or generated code to
//! keep in step with it, for no gain in what is sent. The field numbers
//! below are the contract (`opentelemetry/proto/{trace,common,resource,
//! collector/trace}/v1/*.proto`); the unit tests pin the bytes.
//!
//! Encoding rules kept here: fields in field-number order (the canonical
//! order, so the same spans always give the same bytes); default values
//! (empty strings, zero) are left out, as proto3 does; a nested message is
//! written as its length then its bytes.

use super::span::{Batch, Event, KeyValue, SCOPE_NAME, SCOPE_VERSION, Span, StatusCode, Value};

/// Wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

// ExportTraceServiceRequest
const REQUEST_RESOURCE_SPANS: u32 = 1;
// ResourceSpans
const RESOURCE_SPANS_RESOURCE: u32 = 1;
const RESOURCE_SPANS_SCOPE_SPANS: u32 = 2;
// Resource
const RESOURCE_ATTRIBUTES: u32 = 1;
// ScopeSpans
const SCOPE_SPANS_SCOPE: u32 = 1;
const SCOPE_SPANS_SPANS: u32 = 2;
// InstrumentationScope
const SCOPE_NAME_FIELD: u32 = 1;
const SCOPE_VERSION_FIELD: u32 = 2;
// Span
const SPAN_TRACE_ID: u32 = 1;
const SPAN_SPAN_ID: u32 = 2;
const SPAN_PARENT_SPAN_ID: u32 = 4;
const SPAN_NAME: u32 = 5;
const SPAN_KIND: u32 = 6;
const SPAN_START: u32 = 7;
const SPAN_END: u32 = 8;
const SPAN_ATTRIBUTES: u32 = 9;
const SPAN_EVENTS: u32 = 11;
const SPAN_STATUS: u32 = 15;
// Span.Event
const EVENT_TIME: u32 = 1;
const EVENT_NAME: u32 = 2;
const EVENT_ATTRIBUTES: u32 = 3;
// Status
const STATUS_MESSAGE: u32 = 2;
const STATUS_CODE: u32 = 3;
// KeyValue
const KV_KEY: u32 = 1;
const KV_VALUE: u32 = 2;
// AnyValue
const ANY_STRING: u32 = 1;
const ANY_BOOL: u32 = 2;
const ANY_INT: u32 = 3;
// ExportTraceServiceResponse / ExportTracePartialSuccess
const RESPONSE_PARTIAL_SUCCESS: u32 = 1;
const PARTIAL_REJECTED_SPANS: u32 = 1;
const PARTIAL_ERROR_MESSAGE: u32 = 2;

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    tag(out, field, LEN);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint_field(out: &mut Vec<u8>, field: u32, n: u64) {
    if n == 0 {
        return;
    }
    tag(out, field, VARINT);
    varint(out, n);
}

fn fixed64_field(out: &mut Vec<u8>, field: u32, n: u64) {
    if n == 0 {
        return;
    }
    tag(out, field, FIXED64);
    out.extend_from_slice(&n.to_le_bytes());
}

/// Writes a nested message: `body` fills a scratch buffer, which goes out
/// behind its length.
fn message(out: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    body(&mut inner);
    tag(out, field, LEN);
    varint(out, inner.len() as u64);
    out.extend_from_slice(&inner);
}

fn key_value(out: &mut Vec<u8>, field: u32, kv: &KeyValue) {
    message(out, field, |m| {
        bytes_field(m, KV_KEY, kv.key.as_bytes());
        // The value is always written, even when it is a default (an
        // empty string, `false`, 0): an absent `value` reads as "no value".
        tag(m, KV_VALUE, LEN);
        let mut any = Vec::new();
        match &kv.value {
            Value::Str(s) => {
                tag(&mut any, ANY_STRING, LEN);
                varint(&mut any, s.len() as u64);
                any.extend_from_slice(s.as_bytes());
            }
            Value::Bool(b) => {
                tag(&mut any, ANY_BOOL, VARINT);
                varint(&mut any, u64::from(*b));
            }
            Value::Int(n) => {
                tag(&mut any, ANY_INT, VARINT);
                // int64: two's complement, ten bytes when negative.
                varint(&mut any, *n as u64);
            }
        }
        varint(m, any.len() as u64);
        m.extend_from_slice(&any);
    });
}

fn event(out: &mut Vec<u8>, e: &Event) {
    message(out, SPAN_EVENTS, |m| {
        fixed64_field(m, EVENT_TIME, e.time_unix_nano);
        bytes_field(m, EVENT_NAME, e.name.as_bytes());
        for kv in &e.attributes {
            key_value(m, EVENT_ATTRIBUTES, kv);
        }
    });
}

fn span(out: &mut Vec<u8>, s: &Span) {
    message(out, SCOPE_SPANS_SPANS, |m| {
        bytes_field(m, SPAN_TRACE_ID, &s.trace_id);
        bytes_field(m, SPAN_SPAN_ID, &s.span_id);
        if let Some(parent) = &s.parent_span_id {
            bytes_field(m, SPAN_PARENT_SPAN_ID, parent);
        }
        bytes_field(m, SPAN_NAME, s.name.as_bytes());
        varint_field(m, SPAN_KIND, s.kind as u64);
        fixed64_field(m, SPAN_START, s.start_time_unix_nano);
        fixed64_field(m, SPAN_END, s.end_time_unix_nano);
        for kv in &s.attributes {
            key_value(m, SPAN_ATTRIBUTES, kv);
        }
        for e in &s.events {
            event(m, e);
        }
        if s.status != StatusCode::Unset {
            message(m, SPAN_STATUS, |st| {
                bytes_field(st, STATUS_MESSAGE, s.status_message.as_bytes());
                varint_field(st, STATUS_CODE, s.status as u64);
            });
        }
    });
}

/// The `ExportTraceServiceRequest` of `batch`.
pub(crate) fn encode(batch: Batch<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + batch.spans.len() * 512);
    message(&mut out, REQUEST_RESOURCE_SPANS, |rs| {
        message(rs, RESOURCE_SPANS_RESOURCE, |r| {
            for kv in batch.resource {
                key_value(r, RESOURCE_ATTRIBUTES, kv);
            }
        });
        message(rs, RESOURCE_SPANS_SCOPE_SPANS, |ss| {
            message(ss, SCOPE_SPANS_SCOPE, |sc| {
                bytes_field(sc, SCOPE_NAME_FIELD, SCOPE_NAME.as_bytes());
                bytes_field(sc, SCOPE_VERSION_FIELD, SCOPE_VERSION.as_bytes());
            });
            for s in batch.spans {
                span(ss, s);
            }
        });
    });
    out
}

/// What an `ExportTraceServiceResponse` said: spans rejected, and the
/// receiver's message. `None` when the answer is not a readable message.
pub(crate) fn partial_success(answer: &[u8]) -> Option<(i64, String)> {
    let mut rejected = 0;
    let mut message = String::new();
    for (field, value) in Fields(answer) {
        if let (RESPONSE_PARTIAL_SUCCESS, Field::Len(inner)) = (field, value?) {
            for (f, v) in Fields(inner) {
                match (f, v?) {
                    (PARTIAL_REJECTED_SPANS, Field::Varint(n)) => rejected = n as i64,
                    (PARTIAL_ERROR_MESSAGE, Field::Len(b)) => {
                        message = String::from_utf8_lossy(b).into_owned();
                    }
                    _ => {}
                }
            }
        }
    }
    Some((rejected, message))
}

enum Field<'a> {
    Varint(u64),
    Len(&'a [u8]),
    Fixed,
}

/// The fields of a message, in order; an `Err`-like `None` item for bytes
/// that are not protobuf (and then nothing more).
struct Fields<'a>(&'a [u8]);

fn read_varint(b: &mut &[u8]) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        n |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

impl<'a> Iterator for Fields<'a> {
    type Item = (u32, Option<Field<'a>>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let mut b = self.0;
        let parsed = (|| {
            let key = read_varint(&mut b)?;
            let field = (key >> 3) as u32;
            let value = match (key & 7) as u8 {
                VARINT => Field::Varint(read_varint(&mut b)?),
                FIXED64 => {
                    b = b.get(8..)?;
                    Field::Fixed
                }
                LEN => {
                    let n = usize::try_from(read_varint(&mut b)?).ok()?;
                    let (v, rest) = (b.get(..n)?, b.get(n..)?);
                    b = rest;
                    Field::Len(v)
                }
                5 => {
                    b = b.get(4..)?;
                    Field::Fixed
                }
                _ => return None,
            };
            Some((field, value))
        })();
        match parsed {
            Some((field, value)) => {
                self.0 = b;
                Some((field, Some(value)))
            }
            None => {
                self.0 = &[];
                Some((0, None))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::span::{SpanKind, kv};

    #[test]
    fn varints_match_the_spec_examples() {
        let enc = |n: u64| {
            let mut v = Vec::new();
            varint(&mut v, n);
            v
        };
        assert_eq!(enc(1), [0x01]);
        assert_eq!(enc(150), [0x96, 0x01]);
        assert_eq!(enc(300), [0xac, 0x02]);
        // int64 -1 is ten bytes.
        assert_eq!(enc(-1i64 as u64).len(), 10);
        for n in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let bytes = enc(n);
            assert_eq!(read_varint(&mut bytes.as_slice()), Some(n));
        }
    }

    #[test]
    fn key_values_encode_to_known_bytes() {
        let mut out = Vec::new();
        key_value(&mut out, 9, &kv("a", "b"));
        // field 9 LEN (0x4a), len 8: key "a" (0a 01 61), value (12 03) {string "b" (0a 01 62)}
        assert_eq!(
            out,
            [0x4a, 0x08, 0x0a, 0x01, b'a', 0x12, 0x03, 0x0a, 0x01, b'b']
        );
        let mut out = Vec::new();
        key_value(&mut out, 1, &kv("n", 150i64));
        assert_eq!(
            out,
            [0x0a, 0x08, 0x0a, 0x01, b'n', 0x12, 0x03, 0x18, 0x96, 0x01]
        );
        let mut out = Vec::new();
        key_value(&mut out, 1, &kv("f", false));
        // A false bool is still written (the value must be present).
        assert_eq!(out, [0x0a, 0x07, 0x0a, 0x01, b'f', 0x12, 0x02, 0x10, 0x00]);
    }

    fn tiny_span() -> Span {
        Span {
            trace_id: [0x11; 16],
            span_id: [0x22; 8],
            parent_span_id: Some([0x33; 8]),
            name: "x".into(),
            kind: SpanKind::Client,
            start_time_unix_nano: 1,
            end_time_unix_nano: 2,
            attributes: vec![],
            events: vec![],
            status: StatusCode::Error,
            status_message: String::new(),
        }
    }

    #[test]
    fn a_span_encodes_to_known_bytes() {
        let mut out = Vec::new();
        span(&mut out, &tiny_span());
        let mut want = vec![0x12, 0x41];
        want.extend([0x0a, 0x10]);
        want.extend([0x11; 16]);
        want.extend([0x12, 0x08]);
        want.extend([0x22; 8]);
        want.extend([0x22, 0x08]);
        want.extend([0x33; 8]);
        want.extend([0x2a, 0x01, b'x']);
        want.extend([0x30, 0x03]);
        want.extend([0x39, 1, 0, 0, 0, 0, 0, 0, 0]);
        want.extend([0x41, 2, 0, 0, 0, 0, 0, 0, 0]);
        // status {code: 2}: field 15 LEN = tag 0x7a
        want.extend([0x7a, 0x02, 0x18, 0x02]);
        assert_eq!(want[1] as usize, want.len() - 2, "length prefix");
        assert_eq!(out, want);
    }

    #[test]
    fn a_request_nests_resource_scope_and_spans() {
        let resource = [kv("service.name", "bir")];
        let spans = [tiny_span()];
        let bytes = encode(Batch {
            resource: &resource,
            spans: &spans,
        });
        // Walk it back: request → resource_spans → (resource, scope_spans).
        let top: Vec<_> = Fields(&bytes).collect();
        assert_eq!(top.len(), 1);
        let Some(Field::Len(rs)) = &top[0].1 else {
            panic!("resource_spans")
        };
        let fields: Vec<u32> = Fields(rs).map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            [RESOURCE_SPANS_RESOURCE, RESOURCE_SPANS_SCOPE_SPANS]
        );
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("service.name") && text.contains(SCOPE_VERSION));
    }

    #[test]
    fn partial_success_is_read_and_garbage_is_not() {
        // {partial_success: {rejected_spans: 3, error_message: "no"}}
        let answer = [0x0a, 0x06, 0x08, 0x03, 0x12, 0x02, b'n', b'o'];
        assert_eq!(partial_success(&answer), Some((3, "no".into())));
        assert_eq!(partial_success(&[]), Some((0, String::new())));
        assert_eq!(partial_success(&[0x0a, 0x09, 0x08]), None);
        assert_eq!(partial_success(b"{\"json\": true}"), None);
    }
}
