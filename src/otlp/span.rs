//! The few OpenTelemetry trace types bir sends, independent of the wire
//! encoding: [`super::json`] and [`super::proto`] write the same values.
//!
//! Only what bir emits is modelled (no links, no trace state, no dropped
//! counts, scalar attribute values only): structured values go out as JSON
//! strings, which the conventions allow and which no backend can mangle.

/// `SpanKind` of `trace.proto` (integers on every wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpanKind {
    Internal = 1,
    Client = 3,
}

/// `Status.StatusCode`: bir leaves success UNSET, as the conventions ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusCode {
    Unset = 0,
    Error = 2,
}

/// A scalar attribute value (`AnyValue` without arrays, maps or bytes).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Str(String),
    Bool(bool),
    Int(i64),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeyValue {
    pub key: String,
    pub value: Value,
}

/// Builds a [`KeyValue`].
pub(crate) fn kv(key: &str, value: impl Into<Value>) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: value.into(),
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}
impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Int(n)
    }
}

/// A span event (`Span.Event`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub time_unix_nano: u64,
    pub name: String,
    pub attributes: Vec<KeyValue>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// `None` for the run's root span.
    pub parent_span_id: Option<[u8; 8]>,
    pub name: String,
    pub kind: SpanKind,
    pub start_time_unix_nano: u64,
    pub end_time_unix_nano: u64,
    pub attributes: Vec<KeyValue>,
    pub events: Vec<Event>,
    pub status: StatusCode,
    /// Only with [`StatusCode::Error`]; empty otherwise.
    pub status_message: String,
}

/// The instrumentation scope every span is sent under.
pub(crate) const SCOPE_NAME: &str = "bir";
pub(crate) const SCOPE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// One request's worth: one resource, one scope, some spans. (OTLP allows
/// several of each; bir never needs more than one.)
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batch<'a> {
    pub resource: &'a [KeyValue],
    pub spans: &'a [Span],
}
