//! A streaming Server-Sent Events reader with bounded memory.
//!
//! Each event's `data` is collected into one line: the data lines of an
//! event are joined with a space instead of `\n` (a JSON-RPC message carries
//! no raw newline inside its strings, so the result is the same JSON, ready
//! for the NDJSON relay). The data is scanned as it arrives, so an event over
//! the size limit is skipped without being buffered while its JSON-RPC id is
//! still learned.
//!
//! Invariants:
//! * Memory per stream is bounded by the limit (data) plus small fixed
//!   buffers (field names, `id`, `event`, `retry`).
//! * An event cut off by the end of the stream is discarded (as the SSE
//!   specification says).

use std::io::{self, BufRead};

use crate::jsonrpc::scan::{LineScanner, LineSummary};

/// The most bytes kept of a field name or of a non-`data` field's value.
const SMALL_FIELD: usize = 4096;

/// One dispatched event.
#[derive(Debug, Default)]
pub(crate) struct SseEvent {
    /// The `id` field, when the event carried one.
    pub id: Option<String>,
    /// The `event` field (`message` when absent).
    pub event: Option<String>,
    /// The joined data (empty for a priming event or when oversized).
    pub data: Vec<u8>,
    /// The data's envelope (id, method, ...), scanned as it arrived.
    pub summary: Option<LineSummary>,
    /// The data was over the limit: `data` is empty, `summary` still holds.
    pub oversized: bool,
    /// The `retry` field, in milliseconds.
    pub retry: Option<u64>,
}

impl SseEvent {
    pub(crate) fn data_len(&self) -> u64 {
        self.summary.as_ref().map_or(0, |s| s.len)
    }
}

/// Reads events from an SSE body.
pub(crate) struct SseReader<R> {
    inner: R,
    max: u64,
    /// The previous line ended with `\r`: a following `\n` belongs to it.
    skip_lf: bool,
}

/// The field of the line being read.
#[derive(PartialEq, Eq)]
enum Field {
    Unknown,
    Data,
    Id,
    Event,
    Retry,
    Ignored,
}

impl<R: BufRead> SseReader<R> {
    pub(crate) fn new(inner: R, max: u64) -> SseReader<R> {
        SseReader {
            inner,
            max,
            skip_lf: false,
        }
    }

    /// The next event; `None` at the end of the stream.
    pub(crate) fn next_event(&mut self) -> io::Result<Option<SseEvent>> {
        let mut event = SseEvent::default();
        let mut scanner = LineScanner::new();
        let mut data_lines = 0u64;
        let mut data_bytes = 0u64;
        let mut any_field = false;
        loop {
            // One line.
            let mut name: Vec<u8> = Vec::new();
            let mut seen_colon = false;
            let mut at_value_start = false;
            let mut field = Field::Unknown;
            let mut small: Vec<u8> = Vec::new();
            let mut line_len = 0usize;
            loop {
                let avail = match self.inner.fill_buf() {
                    Ok(a) => a,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                if avail.is_empty() {
                    return Ok(None);
                }
                if self.skip_lf {
                    self.skip_lf = false;
                    if avail[0] == b'\n' {
                        self.inner.consume(1);
                        continue;
                    }
                }
                let end = memchr::memchr2(b'\n', b'\r', avail);
                let chunk = &avail[..end.unwrap_or(avail.len())];
                line_len += chunk.len();
                let mut rest: &[u8] = chunk;
                if !seen_colon {
                    match memchr::memchr(b':', rest) {
                        Some(i) => {
                            push_small(&mut name, &rest[..i]);
                            seen_colon = true;
                            at_value_start = true;
                            rest = &rest[i + 1..];
                            field = field_of(&name, data_lines > 0);
                            if field == Field::Data {
                                data_lines += 1;
                                if data_lines > 1 {
                                    feed(&mut event, &mut scanner, &mut data_bytes, self.max, b" ");
                                }
                            }
                        }
                        None => {
                            push_small(&mut name, rest);
                            rest = &[];
                        }
                    }
                }
                if seen_colon && !rest.is_empty() {
                    if at_value_start {
                        at_value_start = false;
                        if rest[0] == b' ' {
                            rest = &rest[1..];
                        }
                    }
                    match field {
                        Field::Data => {
                            feed(&mut event, &mut scanner, &mut data_bytes, self.max, rest)
                        }
                        Field::Id | Field::Event | Field::Retry => push_small(&mut small, rest),
                        _ => {}
                    }
                }
                let consumed = chunk.len();
                if let Some(i) = end {
                    let cr = avail[i] == b'\r';
                    self.inner.consume(consumed + 1);
                    self.skip_lf = cr;
                    break;
                }
                self.inner.consume(consumed);
            }
            // The line is complete.
            if line_len == 0 {
                if any_field {
                    if data_lines > 0 {
                        event.summary = Some(scanner.end_line());
                    }
                    return Ok(Some(event));
                }
                continue;
            }
            if !seen_colon {
                // A field name alone: its value is empty.
                field = field_of(&name, data_lines > 0);
                if field == Field::Data {
                    data_lines += 1;
                    if data_lines > 1 {
                        feed(&mut event, &mut scanner, &mut data_bytes, self.max, b" ");
                    }
                }
            }
            if name.is_empty() && seen_colon {
                continue; // a comment
            }
            any_field = true;
            let text = || String::from_utf8_lossy(&small).into_owned();
            match field {
                Field::Id if !small.contains(&0) => event.id = Some(text()),
                Field::Event => event.event = Some(text()),
                Field::Retry => {
                    if let Ok(ms) = text().parse::<u64>() {
                        event.retry = Some(ms);
                    }
                }
                _ => {}
            }
        }
    }
}

fn field_of(name: &[u8], _after_data: bool) -> Field {
    match name {
        b"data" => Field::Data,
        b"id" => Field::Id,
        b"event" => Field::Event,
        b"retry" => Field::Retry,
        _ => Field::Ignored,
    }
}

fn push_small(buf: &mut Vec<u8>, bytes: &[u8]) {
    let room = SMALL_FIELD.saturating_sub(buf.len());
    buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

/// Adds data bytes: scanned always, kept while under the limit.
fn feed(event: &mut SseEvent, scanner: &mut LineScanner, total: &mut u64, max: u64, bytes: &[u8]) {
    // Raw newlines never reach here (lines are split on them).
    let _ = scanner.scan(bytes);
    *total += bytes.len() as u64;
    if event.oversized {
        return;
    }
    if *total > max {
        event.oversized = true;
        event.data = Vec::new();
        return;
    }
    event.data.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(input: &[u8], max: u64) -> Vec<SseEvent> {
        let mut r = SseReader::new(io::BufReader::with_capacity(3, input), max);
        let mut out = Vec::new();
        while let Some(e) = r.next_event().expect("read") {
            out.push(e);
        }
        out
    }

    #[test]
    fn parses_fields_and_joins_data() {
        let input = b": comment\r\nid: 7\r\nevent: message\r\ndata: {\"a\":\r\ndata:1}\r\n\r\nid: 8\ndata:\nretry: 1500\n\nid: 9\ndata: {\"x\"";
        let ev = events(input, 1000);
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].id.as_deref(), Some("7"));
        assert_eq!(ev[0].event.as_deref(), Some("message"));
        assert_eq!(ev[0].data, b"{\"a\": 1}");
        assert_eq!(ev[1].id.as_deref(), Some("8"));
        assert!(ev[1].data.is_empty());
        assert_eq!(ev[1].retry, Some(1500));
    }

    #[test]
    fn oversized_data_is_skipped_but_scanned() {
        let big = format!(
            "data: {{\"jsonrpc\":\"2.0\",\"id\":42,\"result\":{{\"t\":\"{}\"}}}}\n\n",
            "x".repeat(500)
        );
        let ev = events(big.as_bytes(), 100);
        assert_eq!(ev.len(), 1);
        assert!(ev[0].oversized);
        assert!(ev[0].data.is_empty());
        let summary = ev[0].summary.as_ref().expect("summary");
        assert_eq!(summary.id.as_deref(), Some(&b"42"[..]));
    }
}
