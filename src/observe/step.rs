//! Step reports: one per `tools/call`, built off the relay's path.
//!
//! The relay hands over the raw request and response lines; this module
//! parses its own copies into a [`StepReport`]. Arguments and results stay
//! raw JSON (`RawValue`), so a report holds the exact bytes the peers
//! exchanged, not a re-typed version of them.
//!
//! The fields are what later joins a step to the host's view
//! (`docs/agents.md`, "Joining MCP calls to the wire"): the request id, `_meta["claudecode/toolUseId"]`, and the session
//! id Claude Code puts in every server's environment.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::jsonrpc::inline_bytes::SmallBytes;
use crate::jsonrpc::lenient::{self, Repairs};
use serde_json::value::RawValue;

use crate::time;

/// How a `tools/call` ended, as far as the proxy could see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CallOutcome {
    /// The upstream answered (result or error).
    Answered,
    /// The host cancelled it; `response` holds the late answer, if any.
    /// Without one, the call ended when the host cancelled it (however
    /// the session went on: the upstream dying, the session ending).
    Cancelled,
    /// The answer exceeded the size limit; the host got an `isError` result
    /// from the proxy instead.
    TooLarge,
    /// The upstream died before answering; the host got an `isError` result
    /// from the proxy.
    UpstreamGone,
    /// The session ended (the host closed it or stopped the proxy) while
    /// the call was still running: nobody got an answer. Recorded so that
    /// a run shows every call that was made, not only the finished ones.
    SessionEnded,
}

/// Answers up to this size are copied whole for the recorder; larger ones
/// only as a head and a tail (the stored payload is capped far below this
/// anyway, and copying and parsing megabytes would cost the relay's CPU).
pub(crate) const OBSERVE_WHOLE: usize = 4 * 1024 * 1024;
const HEAD: usize = 64 * 1024;
const TAIL: usize = 1024;
/// Of a skimmed answer the recorder keeps a 1 KiB preview, cut where no
/// token is split; this much head leaves room to find the cut.
const ANSWER_HEAD: usize = 4 * 1024;
/// Answers larger than this are observed as head and tail (and never
/// parsed), unless they may hold binary blocks (see `of_answer`).
const SKIM_OVER: usize = 256 * 1024;

/// Requests up to this size are kept whole for the recorder (budget
/// permitting: see [`ObservedBody::of_request`]); the recorder's payload cap
/// (64 KiB by default) is far below it.
pub(crate) const REQUEST_WHOLE: usize = 256 * 1024;
/// Of a larger request, this much of its start is kept: room for the
/// envelope before the arguments (`id`, `method`, the tool's `name`) and for
/// the arguments' 1 KiB preview.
pub(crate) const REQUEST_HEAD: usize = 16 * 1024;
/// And this much of its end: the members after the arguments (a `name` or
/// `_meta` sent after them).
pub(crate) const REQUEST_TAIL: usize = 4 * 1024;

/// Whether an answer may hold a base64 image, audio or blob block.
pub(crate) fn has_binary_block(bytes: &[u8]) -> bool {
    memchr::memmem::find(bytes, b"\"data\"").is_some()
        || memchr::memmem::find(bytes, b"\"blob\"").is_some()
}

/// The upstream's answer as the relay handed it over.
#[derive(Debug)]
pub(crate) enum ObservedBody {
    Whole(Vec<u8>),
    /// A large answer: its first and last bytes, and its size.
    Clipped {
        head: Vec<u8>,
        tail: Vec<u8>,
        len: u64,
    },
}

impl ObservedBody {
    /// Copies `bytes` the way the recorder needs them.
    pub(crate) fn of(bytes: &[u8]) -> ObservedBody {
        if bytes.len() <= OBSERVE_WHOLE {
            return ObservedBody::Whole(bytes.to_vec());
        }
        ObservedBody::clipped(bytes, HEAD)
    }

    /// Copies a `tools/call` answer. A large one with no binary block in it
    /// (`maybe_binary` false: the relay's scanner saw no `data` or `blob`
    /// key) will be stored as a marker and a preview, so only its head and
    /// tail are copied: the relay's thread does not copy megabytes nobody
    /// will read.
    pub(crate) fn of_answer(bytes: &[u8], maybe_binary: bool) -> ObservedBody {
        if bytes.len() <= SKIM_OVER || (maybe_binary && bytes.len() <= OBSERVE_WHOLE) {
            return ObservedBody::Whole(bytes.to_vec());
        }
        ObservedBody::clipped(bytes, ANSWER_HEAD)
    }

    fn clipped(bytes: &[u8], head: usize) -> ObservedBody {
        ObservedBody::Clipped {
            head: bytes[..head.min(bytes.len())].to_vec(),
            tail: bytes[bytes.len().saturating_sub(TAIL)..].to_vec(),
            len: bytes.len() as u64,
        }
    }

    /// Copies a request the recorder learns from, in at most `room` bytes
    /// (what the in-flight table's budget has left). A request of up to
    /// [`REQUEST_WHOLE`] that fits is kept whole; any other keeps only its
    /// head (at most [`REQUEST_HEAD`], less when `room` is short, possibly
    /// nothing) and its size: the recorder stores arguments that large as a
    /// truncation marker with a short preview anyway, and a host that sends
    /// many large requests nobody answers must not make the proxy hold them
    /// all (recording is best effort; the relay is never affected).
    pub(crate) fn of_request(bytes: &[u8], room: usize) -> ObservedBody {
        if bytes.len() <= REQUEST_WHOLE && bytes.len() <= room {
            return ObservedBody::Whole(bytes.to_vec());
        }
        // Never both more than the room nor overlapping (a request that
        // fits whole was kept whole above, unless over REQUEST_WHOLE).
        let head = REQUEST_HEAD.min(room).min(bytes.len());
        let tail = REQUEST_TAIL.min(room - head).min(bytes.len() - head);
        ObservedBody::Clipped {
            head: bytes[..head].to_vec(),
            tail: bytes[bytes.len() - tail..].to_vec(),
            len: bytes.len() as u64,
        }
    }

    /// The whole bytes, when they were kept whole (tests ask it).
    #[cfg(test)]
    pub(crate) fn whole(&self) -> Option<&[u8]> {
        match self {
            ObservedBody::Whole(b) => Some(b),
            ObservedBody::Clipped { .. } => None,
        }
    }

    pub(crate) fn weight(&self) -> usize {
        match self {
            ObservedBody::Whole(b) => b.len(),
            ObservedBody::Clipped { head, tail, .. } => head.len() + tail.len(),
        }
    }
}

/// A large result that was not parsed: its size and the start of its text.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClippedResult {
    pub original_bytes: u64,
    /// The first bytes of the raw answer (valid UTF-8 prefix), unredacted:
    /// the recorder redacts it before storing.
    #[serde(skip)]
    pub head: String,
}

/// What the relay observed of one `tools/call` (raw, unparsed).
#[derive(Debug)]
pub(crate) struct ToolCallObserved {
    pub server_name: Arc<str>,
    pub session_id: Option<Arc<str>>,
    /// When the proxy read the request (a monotonic instant: the relay
    /// reads no wall clock; the report derives one, off the relay's path).
    pub started: Instant,
    pub duration: Duration,
    /// The request line exactly as the host sent it, or for a large one
    /// (or one the in-flight budget had no room for) its head and size.
    pub request: ObservedBody,
    /// The request's id exactly as the host spelled it (the scanner's): what
    /// a clipped request's head may have lost.
    pub raw_id: SmallBytes,
    /// The response line as the upstream sent it (whole, or clipped when
    /// large), when it did.
    pub response: Option<ObservedBody>,
    pub outcome: CallOutcome,
    /// For `TooLarge`: the size of the answer that was not delivered.
    pub response_bytes: Option<u64>,
    /// Another request with the same id was in flight: `response` was
    /// paired first-in, first-out and may answer the other one.
    pub id_shared: bool,
    /// The `traceparent` the proxy added to the request's `params._meta`
    /// (`BIR_OTLP_TRACEPARENT=1`); `request` is still the host's line.
    pub traceparent: Option<Box<str>>,
    /// A remote upstream's session epoch when the answer was read
    /// ([`super::session`]); 0 for stdio.
    pub session_epoch: u64,
}

/// The wall-clock time of a past `instant`: now, less the time since. Exact
/// unless the wall clock is stepped in between (reading it here, not on the
/// relay's path, is the point).
pub(crate) fn wall_clock_at(instant: Instant) -> SystemTime {
    let now = SystemTime::now();
    now.checked_sub(instant.elapsed()).unwrap_or(now)
}

/// One recorded tool call.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StepReport {
    pub server_name: String,
    pub tool_name: Option<String>,
    /// The host's rendering (`mcp__<server>__<tool>`, Claude Code's). Kept
    /// beside the parts, never instead of them.
    pub qualified_name: Option<String>,
    pub request_id: Option<Box<RawValue>>,
    pub tool_use_id: Option<String>,
    pub session_id: Option<String>,
    pub arguments: Option<Box<RawValue>>,
    /// The whole `CallToolResult`.
    pub result: Option<Box<RawValue>>,
    /// A JSON-RPC error answer, when the call failed at the protocol level.
    pub error: Option<Box<RawValue>>,
    /// Set instead of `result` when the answer was too large to parse.
    pub result_clipped: Option<ClippedResult>,
    /// Set instead of `arguments` when the request was kept clipped (see
    /// [`ObservedBody::of_request`]): its size and the start of the
    /// arguments' text, stored as a truncation marker. Left out of the
    /// report's form when absent (transcripts stay as they were).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments_clipped: Option<ClippedResult>,
    pub is_error: bool,
    pub outcome: CallOutcome,
    /// Set when the answer was too large to deliver.
    pub response_bytes: Option<u64>,
    pub started_at: String,
    pub duration_ms: f64,
    /// The request could not be parsed: its fields were left out.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub request_unparseable: bool,
    /// The answer could not be parsed (not JSON, invalid UTF-8, a lone
    /// surrogate escape…): `result` and `error` were left out. Told apart
    /// from the request's, so a call whose arguments were read is not
    /// marked as if they had not been.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub response_unparseable: bool,
    /// Another request with the same id was in flight: the answer was
    /// paired first-in, first-out and may be the other call's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub id_shared: bool,
    /// The `traceparent` the proxy added to the request (see
    /// [`ToolCallObserved::traceparent`]). Left out of the report's form
    /// when absent (transcripts stay as they were).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// See [`ToolCallObserved::session_epoch`]. Not part of the report's
    /// own form.
    #[serde(skip)]
    pub session_epoch: u64,
    /// What reading the request (or the answer) leniently replaced: it
    /// held what serde_json refuses and every peer reads (see
    /// `jsonrpc::lenient`). Not part of the report's own form.
    #[serde(skip)]
    pub request_repairs: Repairs,
    #[serde(skip)]
    pub response_repairs: Repairs,
}

#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    name: Option<String>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(rename = "_meta")]
    meta: Option<Meta>,
}

/// The call ids hosts put in a `tools/call`'s `_meta`, each equal to the
/// `tool_use_id` of that host's hooks: Claude Code's
/// `claudecode/toolUseId`, Codex CLI's `callId` (the model's call id; seen
/// on 0.169.0). A value that is not a string is ignored
/// (never a reason to lose the request's other fields).
#[derive(Deserialize)]
struct Meta {
    #[serde(
        rename = "claudecode/toolUseId",
        default,
        deserialize_with = "id_string"
    )]
    tool_use_id: Option<String>,
    #[serde(rename = "callId", default, deserialize_with = "id_string")]
    call_id: Option<String>,
}

impl Meta {
    /// The join key: Claude Code's id, else Codex's.
    fn call_key(self) -> Option<String> {
        self.tool_use_id
            .or(self.call_id)
            .filter(|id| !id.is_empty())
    }
}

/// A string, or nothing for any other JSON value.
fn id_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        Text(String),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Id::deserialize(d)? {
        Id::Text(s) => Some(s),
        Id::Other(_) => None,
    })
}

#[derive(Deserialize)]
struct Response<'a> {
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ResultFlags {
    #[serde(rename = "isError")]
    is_error: Option<bool>,
}

/// How deep a message read leniently is kept (deeper containers are
/// replaced): with the record around it, what is stored stays within the
/// 128 levels serde_json reads back.
const LENIENT_DEPTH: usize = 100;

/// Parses `bytes` as `T`. What serde_json refuses while the peers read it
/// (a duplicate key, which serde's derived structs refuse while the peers
/// and the relay keep the last one; invalid UTF-8; a lone surrogate; deep
/// nesting) is read again leniently (`jsonrpc::lenient`: each duplicate
/// reduced to its last value, what cannot be kept replaced and counted in
/// `repairs`) and parsed from that. Only such messages pay for the second
/// parse (and get their object keys re-ordered); `keep` holds the bytes
/// `T` borrows from.
fn parse_leniently<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
    keep: &'a mut Vec<u8>,
    repairs: &mut Repairs,
) -> serde_json::Result<T> {
    match serde_json::from_slice::<T>(bytes) {
        Err(e) => match lenient::parse(bytes, LENIENT_DEPTH) {
            Some((value, found)) => {
                *keep = serde_json::to_vec(&value)?;
                *repairs = found;
                serde_json::from_slice::<T>(keep)
            }
            None => Err(e),
        },
        ok => ok,
    }
}

/// What the head of a clipped `tools/call` request tells (see
/// [`clipped_envelope`]).
#[derive(Debug, Default, PartialEq, Eq)]
struct ClippedEnvelope {
    name: Option<String>,
    tool_use_id: Option<String>,
    /// The text from where `params.arguments` starts to the end of the head.
    arguments_head: String,
    /// Where in the head `params.arguments` starts, when it does.
    arguments_at: Option<usize>,
    /// The arguments' size, when both their start and their end were found.
    arguments_bytes: Option<u64>,
}

/// Reads a clipped request from its head and its tail. Members of `params`
/// that come after the arguments (serde_json writes keys in order, so a
/// `name` sent after `arguments` is common) are in the tail: the request is
/// read again as the head up to the arguments, `null` in their place, and
/// the tail from just after them ([`after_arguments`]).
fn clipped_request(head: &[u8], tail: &[u8], len: u64) -> ClippedEnvelope {
    let mut found = clipped_envelope(head);
    let (Some(at), Some(from)) = (found.arguments_at, after_arguments(tail)) else {
        return found;
    };
    // The arguments are exactly what lies between.
    found.arguments_bytes = Some(len.saturating_sub((at + tail.len() - from) as u64));
    let mut skeleton = head[..at].to_vec();
    skeleton.extend_from_slice(b"null");
    skeleton.extend_from_slice(&tail[from..]);
    if let Ok(Request {
        params: Some(params),
        ..
    }) = serde_json::from_slice::<Request>(&skeleton)
    {
        found.name = params.name.or(found.name);
        found.tool_use_id = params.meta.and_then(Meta::call_key).or(found.tool_use_id);
    }
    found
}

/// Where, in the last bytes of a request whose `params.arguments` starts
/// before them, the text after the arguments begins: read backwards from
/// the end (outside any string there), it is the first `,` directly inside
/// `params` (the second object from the outside), or the `}` that closes
/// `params` when the arguments are its last member. `None` when the tail
/// does not reach back into the arguments (it then cannot tell where they
/// end). A `"` ends a string read backwards unless an odd number of
/// backslashes precede it.
fn after_arguments(tail: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut found = None;
    let mut i = tail.len();
    while i > 0 {
        i -= 1;
        let byte = tail[i];
        if byte == b'"' {
            let backslashes = tail[..i].iter().rev().take_while(|&&b| b == b'\\').count();
            if backslashes % 2 == 0 {
                in_string = !in_string;
            }
            continue;
        }
        if in_string {
            continue;
        }
        match byte {
            b'}' | b']' => {
                depth += 1;
                if depth == 2 && found.is_none() {
                    found = Some(i);
                }
            }
            b'{' | b'[' => {
                if depth <= 2 {
                    // Closed `params` (or the whole request) within the
                    // tail: the arguments are not where it was cut.
                    return None;
                }
                depth -= 1;
            }
            b',' if depth == 2 => found = Some(i),
            _ => {}
        }
    }
    // The tail ends inside the arguments: in a container of theirs, or in
    // a string (the arguments one long string, or a string within them).
    if depth >= 3 || (depth == 2 && in_string) {
        found
    } else {
        None
    }
}

/// One open container while reading a clipped request's head.
struct Open {
    object: bool,
    /// The key whose value is being read (objects only).
    key: Option<String>,
    expect_key: bool,
}

/// Reads what it can of a request from its first bytes: `params.name` and
/// `params._meta["claudecode/toolUseId"]` when they come before the
/// arguments (they are lost otherwise: best effort, as the request was
/// clipped to bound the proxy's memory), and the start of
/// `params.arguments`. The head is cut anywhere, so it is walked token by
/// token (strings honour escapes; keys and the strings kept are decoded as
/// a JSON parser reads them) and reading stops at the arguments or where the
/// bytes end.
fn clipped_envelope(head: &[u8]) -> ClippedEnvelope {
    let mut found = ClippedEnvelope::default();
    let mut stack: Vec<Open> = Vec::new();
    let mut i = 0;
    let path_is = |stack: &[Open], keys: &[&str]| {
        stack.len() == keys.len()
            && stack
                .iter()
                .zip(keys)
                .all(|(open, key)| open.key.as_deref() == Some(*key))
    };
    while i < head.len() {
        let byte = head[i];
        if byte.is_ascii_whitespace() || byte == b':' {
            i += 1;
            continue;
        }
        let at_value = stack.last().is_some_and(|o| !o.object || !o.expect_key);
        if at_value && path_is(&stack, &["params", "arguments"]) {
            let text = String::from_utf8_lossy(&head[i..]);
            found.arguments_head = text.trim_end_matches('\u{fffd}').to_owned();
            found.arguments_at = Some(i);
            break;
        }
        match byte {
            b'{' | b'[' => {
                stack.push(Open {
                    object: byte == b'{',
                    key: None,
                    expect_key: byte == b'{',
                });
                i += 1;
            }
            b'}' | b']' => {
                stack.pop();
                i += 1;
            }
            b',' => {
                if let Some(open) = stack.last_mut().filter(|o| o.object) {
                    open.key = None;
                    open.expect_key = true;
                }
                i += 1;
            }
            b'"' => {
                let Some(end) = crate::jsonrpc::meta::string_end(head, i) else {
                    break;
                };
                let text = serde_json::from_slice::<String>(&head[i..end]).ok();
                i = end;
                let at_key = stack.last().is_some_and(|o| o.object && o.expect_key);
                if at_key {
                    if let Some(open) = stack.last_mut() {
                        open.key = text;
                        open.expect_key = false;
                    }
                } else if path_is(&stack, &["params", "name"]) {
                    found.name = text;
                } else if path_is(&stack, &["params", "_meta", "claudecode/toolUseId"])
                    || (path_is(&stack, &["params", "_meta", "callId"])
                        && found.tool_use_id.is_none())
                {
                    // Claude Code's id wins over Codex's `callId`.
                    found.tool_use_id = text;
                }
            }
            _ => {
                // A number or a literal: up to the next delimiter.
                while i < head.len()
                    && !matches!(head[i], b',' | b'}' | b']')
                    && !head[i].is_ascii_whitespace()
                {
                    i += 1;
                }
            }
        }
    }
    found
}

impl StepReport {
    pub(crate) fn from_observed(call: &ToolCallObserved) -> StepReport {
        let mut report = StepReport {
            server_name: call.server_name.to_string(),
            tool_name: None,
            qualified_name: None,
            request_id: None,
            tool_use_id: None,
            session_id: call.session_id.as_deref().map(str::to_owned),
            arguments: None,
            result: None,
            error: None,
            result_clipped: None,
            arguments_clipped: None,
            is_error: !matches!(
                call.outcome,
                CallOutcome::Answered | CallOutcome::Cancelled | CallOutcome::SessionEnded
            ),
            outcome: call.outcome,
            response_bytes: call.response_bytes,
            started_at: time::rfc3339(wall_clock_at(call.started)),
            duration_ms: call.duration.as_secs_f64() * 1000.0,
            request_unparseable: false,
            response_unparseable: false,
            id_shared: call.id_shared,
            traceparent: call.traceparent.as_deref().map(str::to_owned),
            session_epoch: call.session_epoch,
            request_repairs: Repairs::default(),
            response_repairs: Repairs::default(),
        };
        match &call.request {
            ObservedBody::Whole(request) => {
                let mut reread = Vec::new();
                match parse_leniently::<Request>(request, &mut reread, &mut report.request_repairs)
                {
                    Ok(req) => {
                        report.request_id = req.id.map(RawValue::to_owned);
                        if let Some(params) = req.params {
                            report.qualified_name = params
                                .name
                                .as_deref()
                                .map(|tool| format!("mcp__{}__{tool}", call.server_name));
                            report.tool_name = params.name;
                            report.arguments = params.arguments.map(RawValue::to_owned);
                            report.tool_use_id = params.meta.and_then(Meta::call_key);
                        }
                    }
                    Err(_) => report.request_unparseable = true,
                }
            }
            ObservedBody::Clipped { head, tail, len } => {
                report.request_id =
                    RawValue::from_string(String::from_utf8_lossy(&call.raw_id).into_owned()).ok();
                let envelope = clipped_request(head, tail, *len);
                report.qualified_name = envelope
                    .name
                    .as_deref()
                    .map(|tool| format!("mcp__{}__{tool}", call.server_name));
                report.tool_name = envelope.name;
                report.tool_use_id = envelope.tool_use_id;
                report.arguments_clipped = Some(ClippedResult {
                    // The request's size when the arguments' own is unknown.
                    original_bytes: envelope.arguments_bytes.unwrap_or(*len),
                    head: envelope.arguments_head,
                });
            }
        }
        // A large answer with no binary block in it arrives clipped (see
        // `of_answer`): it will be stored as a marker and a preview, so it is
        // read from its head and tail, never parsed. (Binary blocks may
        // shrink to fit once stubbed, so those answers come whole.)
        if let Some(ObservedBody::Clipped { head, tail, len }) = &call.response {
            let tail = String::from_utf8_lossy(tail);
            report.is_error =
                tail.contains("\"isError\":true") || tail.contains("\"isError\": true");
            let head = String::from_utf8_lossy(head);
            report.result_clipped = Some(ClippedResult {
                original_bytes: *len,
                head: head.trim_end_matches('\u{fffd}').to_owned(),
            });
        } else if let Some(ObservedBody::Whole(response)) = &call.response {
            let mut reread = Vec::new();
            match parse_leniently::<Response>(response, &mut reread, &mut report.response_repairs) {
                Ok(resp) => {
                    if let Some(result) = resp.result {
                        report.is_error = serde_json::from_str::<ResultFlags>(result.get())
                            .ok()
                            .and_then(|f| f.is_error)
                            .unwrap_or(false);
                        report.result = Some(result.to_owned());
                    }
                    if let Some(error) = resp.error {
                        report.is_error = true;
                        report.error = Some(error.to_owned());
                    }
                }
                Err(_) => report.response_unparseable = true,
            }
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(request: &str, response: Option<&str>) -> ToolCallObserved {
        ToolCallObserved {
            server_name: Arc::from("everything"),
            session_id: Some(Arc::from("sess-1")),
            started: Instant::now(),
            duration: Duration::from_micros(1500),
            request: ObservedBody::Whole(request.as_bytes().to_vec()),
            raw_id: SmallBytes::new(b"1"),
            // As the relay hands answers over.
            response: response
                .map(|r| ObservedBody::of_answer(r.as_bytes(), has_binary_block(r.as_bytes()))),
            outcome: CallOutcome::Answered,
            response_bytes: None,
            id_shared: false,
            traceparent: None,
            session_epoch: 0,
        }
    }

    #[test]
    fn builds_a_step_keeping_raw_json() {
        let r = StepReport::from_observed(&observed(
            r#"{"jsonrpc":"2.0","id":18446744073709551617,"method":"tools/call","params":{"name":"echo","arguments":{"n":1.50,"m":"hi"},"_meta":{"claudecode/toolUseId":"toolu_1","progressToken":4}}}"#,
            Some(
                r#"{"result":{"content":[{"type":"text","text":"hi"}],"isError":true},"jsonrpc":"2.0","id":18446744073709551617}"#,
            ),
        ));
        assert_eq!(r.tool_name.as_deref(), Some("echo"));
        assert_eq!(r.qualified_name.as_deref(), Some("mcp__everything__echo"));
        assert_eq!(r.tool_use_id.as_deref(), Some("toolu_1"));
        assert_eq!(
            r.request_id.as_ref().map(|v| v.get()),
            Some("18446744073709551617")
        );
        assert_eq!(
            r.arguments.as_ref().map(|v| v.get()),
            Some(r#"{"n":1.50,"m":"hi"}"#)
        );
        assert!(r.is_error);
        assert!((r.duration_ms - 1.5).abs() < 1e-9);
        let json = serde_json::to_string(&r).expect("serialises");
        assert!(json.contains(r#""arguments":{"n":1.50,"m":"hi"}"#));
    }

    /// Codex CLI 0.169.0's `tools/call` (observed): the model's call
    /// id in `_meta.callId`, beside `x-codex-turn-metadata`; it equals the
    /// hooks' `tool_use_id`, so it is the step's join key. A `callId` that
    /// is not a string is no key and loses nothing else.
    #[test]
    fn codex_call_ids_are_the_join_key() {
        let answer =
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}"#;
        let r = StepReport::from_observed(&observed(
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"_meta":{"progressToken":3,"callId":"call_echo_2","x-codex-turn-metadata":{"session_id":"019a","turn_id":"t1","codex_version":"0.169.0"}}}}"#,
            Some(answer),
        ));
        assert_eq!(r.tool_use_id.as_deref(), Some("call_echo_2"));
        assert_eq!(r.tool_name.as_deref(), Some("echo"));
        let r = StepReport::from_observed(&observed(
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"callId":7}}}"#,
            Some(answer),
        ));
        assert_eq!(r.tool_use_id, None);
        assert_eq!(r.tool_name.as_deref(), Some("echo"));
        // Claude Code's key wins where both are present.
        let r = StepReport::from_observed(&observed(
            r#"{"id":5,"method":"tools/call","params":{"name":"e","_meta":{"callId":"c","claudecode/toolUseId":"toolu_5"}}}"#,
            Some(answer),
        ));
        assert_eq!(r.tool_use_id.as_deref(), Some("toolu_5"));
    }

    #[test]
    fn large_text_answers_are_skimmed_but_binaries_are_parsed() {
        let big_text = format!(
            r#"{{"result":{{"content":[{{"type":"text","text":"{}"}}],"isError":true}},"jsonrpc":"2.0","id":1}}"#,
            "x".repeat(300 * 1024)
        );
        let r = StepReport::from_observed(&observed(
            r#"{"id":1,"method":"tools/call","params":{"name":"t"}}"#,
            Some(&big_text),
        ));
        assert!(r.result.is_none());
        assert!(r.is_error, "isError read from the tail");
        assert_eq!(
            r.result_clipped.as_ref().map(|c| c.original_bytes),
            Some(big_text.len() as u64)
        );

        let big_image = big_text.replace(
            r#""type":"text","text""#,
            r#""type":"image","mimeType":"image/png","data""#,
        );
        let r = StepReport::from_observed(&observed(
            r#"{"id":1,"method":"tools/call","params":{"name":"t"}}"#,
            Some(&big_image),
        ));
        assert!(
            r.result.is_some(),
            "binary blocks are parsed so they can be stubbed"
        );
        assert!(r.result_clipped.is_none());
    }

    #[test]
    fn protocol_errors_and_garbage() {
        let r = StepReport::from_observed(&observed(
            r#"{"id":1,"method":"tools/call","params":{"name":"nope"}}"#,
            Some(r#"{"id":1,"error":{"code":-32602,"message":"Unknown tool"}}"#),
        ));
        assert!(r.is_error);
        assert!(r.error.is_some());
        let r = StepReport::from_observed(&observed(
            r#"{"id":1,"method":"tools/call","params":{"name":"\ud800"}"#,
            None,
        ));
        assert!(r.request_unparseable && !r.response_unparseable);
        let r = StepReport::from_observed(&observed(
            r#"{"id":1,"method":"tools/call","params":{"name":"t"}}"#,
            Some("{\"id\":1,\"result\":{\"text\":\"a\u{0}b\"}}"),
        ));
        assert!(r.response_unparseable && !r.request_unparseable);
        assert_eq!(r.tool_name.as_deref(), Some("t"));
        assert!(r.result.is_none() && r.error.is_none());
    }

    #[test]
    fn a_clipped_request_keeps_its_envelope_and_marks_its_arguments() {
        let big = "y".repeat(2 * REQUEST_WHOLE);
        let request = format!(
            r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"n\u0061me":"write","_meta":{{"claudecode/toolUseId":"toolu_9"}},"arguments":{{"text":"{big}"}}}},"id":"r-7"}}"#
        );
        let kept = ObservedBody::of_request(request.as_bytes(), usize::MAX);
        assert_eq!(
            kept.weight(),
            REQUEST_HEAD + REQUEST_TAIL,
            "only the head and tail are copied"
        );
        let mut call = observed("{}", None);
        call.request = kept;
        call.raw_id = SmallBytes::new(br#""r-7""#);
        let r = StepReport::from_observed(&call);
        assert_eq!(r.tool_name.as_deref(), Some("write"));
        assert_eq!(r.tool_use_id.as_deref(), Some("toolu_9"));
        assert_eq!(r.request_id.as_ref().map(|v| v.get()), Some(r#""r-7""#));
        assert!(r.arguments.is_none() && !r.request_unparseable);
        let clipped = r.arguments_clipped.expect("marked clipped");
        let arguments = format!(r#"{{"text":"{big}"}}"#);
        assert_eq!(clipped.original_bytes, arguments.len() as u64);
        assert!(
            clipped.head.starts_with(r#"{"text":"yyy"#),
            "{}",
            &clipped.head[..20]
        );
    }

    #[test]
    fn requests_are_kept_whole_only_within_the_room_given() {
        let small = br#"{"id":1,"method":"tools/call","params":{"name":"t"}}"#;
        assert!(ObservedBody::of_request(small, 1 << 20).whole().is_some());
        let short = ObservedBody::of_request(small, 10);
        assert!(short.whole().is_none());
        assert_eq!(short.weight(), 10, "no more than the room left");
        let short = ObservedBody::of_request(small, small.len() - 1);
        assert_eq!(
            short.weight(),
            small.len() - 1,
            "head and tail never overlap"
        );
        assert_eq!(ObservedBody::of_request(small, 0).weight(), 0);
        // Nothing of the envelope survives an empty head, but the step
        // still has its id and its size.
        let mut call = observed("{}", None);
        call.request = ObservedBody::of_request(small, 0);
        let r = StepReport::from_observed(&call);
        assert_eq!(r.request_id.as_ref().map(|v| v.get()), Some("1"));
        assert_eq!(
            r.arguments_clipped.map(|c| c.original_bytes),
            Some(small.len() as u64)
        );
    }

    #[test]
    fn the_envelope_reader_survives_any_cut() {
        let request = br#"{"id":[1,{"a":"\"}"}],"params":{"name":"t\"x","arguments":{"k":[true,null,-1.5e3]}}}"#;
        for cut in 0..=request.len() {
            let found = clipped_envelope(&request[..cut]);
            if cut >= 55 {
                assert_eq!(found.name.as_deref(), Some("t\"x"), "cut at {cut}");
            }
            assert!(request[..cut].ends_with(found.arguments_head.as_bytes()));
        }
        let whole = clipped_envelope(request);
        assert_eq!(whole.arguments_head, r#"{"k":[true,null,-1.5e3]}}}"#);
    }

    #[test]
    fn members_after_the_arguments_are_read_from_the_tail() {
        let big = "q\\\"}".repeat(REQUEST_WHOLE);
        for arguments in [
            format!(r#"{{"a":["{big}",{{"b":1}}],"c":"}}"}}"#),
            format!(r#""{big}""#),
        ] {
            let request = format!(
                r#"{{"id":3,"params":{{"arguments":{arguments},"name":"late","_meta":{{"claudecode/toolUseId":"toolu_late"}}}},"method":"tools/call"}}"#
            );
            let mut call = observed("{}", None);
            call.request = ObservedBody::of_request(request.as_bytes(), usize::MAX);
            let r = StepReport::from_observed(&call);
            assert_eq!(r.tool_name.as_deref(), Some("late"), "{arguments:.40}");
            assert_eq!(r.tool_use_id.as_deref(), Some("toolu_late"));
            assert_eq!(
                r.arguments_clipped.map(|c| c.original_bytes),
                Some(arguments.len() as u64),
                "the arguments' own size"
            );
        }
        // Arguments last: the tail starts inside them, params closes after.
        assert_eq!(after_arguments(br#"x","y":[1]}},"id":1}"#), Some(11));
        // A tail that does not reach back into the arguments tells nothing.
        assert_eq!(after_arguments(br#"{"name":"t"}}"#), None);
    }
}
