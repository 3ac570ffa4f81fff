//! The two relay pumps: host → upstream and upstream → host.
//!
//! Each pump is one thread doing blocking reads and writes: read a chunk,
//! cut it into lines with the [`Framer`], decide per line (relay, or answer
//! it itself), write the relayed lines in one go, then hand observations to
//! the [`Observer`]. That is the shape of a plain byte pump with a scan in
//! the middle, which keeps the proxy's added latency close to the floor.
//!
//! Invariants:
//! * Relayed bytes are the bytes read: ranges of the framer's buffer are
//!   written as they are, never re-serialised.
//! * Only the writers here write to stdout ([`HostOut`]), a whole message at
//!   a time under its lock, so proxy-made messages never split a relayed one.
//! * Observations are produced after the bytes they describe were written.

use std::fs::File;
use std::io::{self, Write};
use std::mem::ManuallyDrop;
use std::ops::Range;
use std::os::fd::FromRawFd;
use std::process::ChildStdin;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::Event;
use super::config::ProxyConfig;
use super::inflight::{Admission, HostRequest, InFlight};
use crate::jsonrpc::framer::{Frame, Framer};
use crate::jsonrpc::message::{self, Kind};
use crate::jsonrpc::scan::{LineScanner, LineSummary};
use crate::observe::step::{CallOutcome, OBSERVE_WHOLE, ObservedBody, ToolCallObserved};
use crate::observe::{Direction, Observer};

/// State shared by the pumps and the lifecycle loop.
pub struct Shared {
    pub cfg: ProxyConfig,
    pub host_out: Mutex<HostOut>,
    /// The current upstream's stdin; `None` once closed (host EOF) or dead.
    pub upstream_in: Mutex<Option<ChildStdin>>,
    pub inflight: Mutex<InFlight>,
    /// The host's handshake, replayed to a restarted upstream.
    pub handshake: Mutex<Handshake>,
    pub observer: Observer,
}

/// The host's `initialize` request and `notifications/initialized`, as sent.
#[derive(Debug, Default)]
pub struct Handshake {
    pub initialize: Option<Vec<u8>>,
    pub initialized: Option<Vec<u8>>,
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it:
/// every structure here stays consistent between statements.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The proxy's stdout: the host's side of the protocol.
pub struct HostOut {
    out: ManuallyDrop<File>,
    broken: bool,
}

impl HostOut {
    /// Takes over file descriptor 1. Only one `HostOut` may exist.
    pub fn stdout() -> HostOut {
        // SAFETY: fd 1 is open for the life of the process; ManuallyDrop
        // keeps this File from closing it.
        let out = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
        HostOut { out, broken: false }
    }

    /// Writes whole messages. Once the host has gone away, further writes
    /// are dropped (and reported once, by the caller).
    pub fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "host output closed",
            ));
        }
        let result = self.out.write_all(bytes);
        if result.is_err() {
            self.broken = true;
        }
        result
    }
}

impl Shared {
    pub fn new(cfg: ProxyConfig, observer: Observer) -> Shared {
        Shared {
            cfg,
            host_out: Mutex::new(HostOut::stdout()),
            upstream_in: Mutex::new(None),
            inflight: Mutex::new(InFlight::new()),
            handshake: Mutex::new(Handshake::default()),
            observer,
        }
    }

    /// Writes a message the proxy made to the host.
    pub fn write_to_host(&self, bytes: &[u8], events: &Sender<Event>) {
        if lock(&self.host_out).write_all(bytes).is_err() {
            let _ = events.send(Event::HostGone);
        }
        self.observer.message(Direction::ProxyToHost, bytes);
    }

    /// Writes to the upstream's stdin. A failure means the upstream is
    /// gone; the lifecycle loop learns that from the process itself.
    pub fn write_to_upstream(&self, bytes: &[u8]) -> bool {
        let mut guard = lock(&self.upstream_in);
        let Some(stdin) = guard.as_mut() else {
            return false;
        };
        if let Err(err) = stdin.write_all(bytes) {
            log::debug!("writing to the server failed: {err}");
            *guard = None;
            return false;
        }
        true
    }

    /// The answer the proxy gives in place of an upstream that is gone.
    pub fn unavailable_answer(&self, request: &HostRequest) -> Vec<u8> {
        let text = self.cfg.unavailable_text();
        if request.method == "tools/call" {
            message::tool_error_result(&request.raw_id, &text)
        } else {
            message::error_response(&request.raw_id, -32000, &text)
        }
    }

    /// Reports a `tools/call` the proxy had to answer itself.
    pub fn observe_unanswered_call(
        &self,
        request: HostRequest,
        outcome: CallOutcome,
        size: Option<u64>,
    ) {
        if request.method != "tools/call" {
            return;
        }
        if let Some(kept_request) = request.kept_request {
            self.observer.tool_call(ToolCallObserved {
                server_name: Arc::clone(&self.cfg.server_name),
                session_id: self.cfg.session_id.clone(),
                started_at: request.started_at,
                duration: request.started.elapsed(),
                request: kept_request,
                response: None,
                outcome,
                response_bytes: size,
            });
        }
    }
}

/// What happens to a line once the pump has looked at it.
enum Verdict {
    Relay,
    /// The proxy dealt with it (answered or dropped it): not relayed.
    Consumed,
}

/// Work to do once the relayed bytes are written.
enum After {
    /// A relayed line, for transcript sinks.
    Message(Range<usize>),
    /// A `tools/call` answer (the line at this range) to report.
    Step(Range<usize>, HostRequest),
    /// A `tools/call` answered inside a batch (the element's bytes).
    StepOwned(Vec<u8>, HostRequest),
}

/// Lines waiting to be written in one go, and what to do after.
struct Outbox {
    run: Option<Range<usize>>,
    after: Vec<After>,
}

impl Outbox {
    fn new() -> Outbox {
        Outbox {
            run: None,
            after: Vec::new(),
        }
    }

    /// Queues `range` for writing; returns false if it is not contiguous with
    /// what is queued (the caller flushes first).
    fn push(&mut self, range: Range<usize>) -> bool {
        match &mut self.run {
            None => {
                self.run = Some(range);
                true
            }
            Some(run) if run.end == range.start => {
                run.end = range.end;
                true
            }
            Some(_) => false,
        }
    }
}

// ---------------------------------------------------------------------------
// Host → upstream
// ---------------------------------------------------------------------------

/// Relays the host's stdin to the upstream until end of input.
pub fn pump_host(shared: &Shared, events: &Sender<Event>) {
    // SAFETY: fd 0 is open for the life of the process; ManuallyDrop keeps
    // this File from closing it.
    let mut input = ManuallyDrop::new(unsafe { File::from_raw_fd(0) });
    let mut framer = Framer::new(shared.cfg.max_message_bytes);
    let mut outbox = Outbox::new();
    loop {
        let eof = match framer.fill(&mut *input) {
            Ok(0) => true,
            Ok(_) => false,
            Err(err) => {
                log::debug!("reading from the host failed: {err}");
                true
            }
        };
        while let Some(frame) = framer.next_frame() {
            on_host_frame(shared, events, &framer, frame, &mut outbox);
        }
        if eof && let Some(frame) = framer.finish() {
            on_host_frame(shared, events, &framer, frame, &mut outbox);
        }
        flush_to_upstream(shared, &framer, &mut outbox);
        if eof {
            let _ = events.send(Event::HostEof);
            return;
        }
    }
}

fn on_host_frame(
    shared: &Shared,
    events: &Sender<Event>,
    framer: &Framer,
    frame: Frame,
    outbox: &mut Outbox,
) {
    match frame {
        Frame::Line { range, summary } => {
            let bytes = framer.bytes(range.clone());
            if let Verdict::Relay = host_line(shared, events, bytes, &summary) {
                if !outbox.push(range.clone()) {
                    flush_to_upstream(shared, framer, outbox);
                    outbox.push(range.clone());
                }
                if shared.observer.wants_messages() {
                    outbox.after.push(After::Message(range));
                }
            }
        }
        Frame::Oversized { summary } => {
            flush_to_upstream(shared, framer, outbox);
            let limit = shared.cfg.max_message_bytes;
            match Kind::of(&summary) {
                Kind::Request { id, .. } => {
                    let text = format!(
                        "request too large for bir-proxy ({} bytes; the limit is {limit} bytes)",
                        summary.len
                    );
                    shared.write_to_host(&message::error_response(&id, -32600, &text), events);
                }
                _ => log::warn!(
                    "dropped a {}-byte message from the host: over the {limit}-byte limit",
                    summary.len
                ),
            }
        }
    }
}

/// Decides what to do with one line from the host, updating the in-flight
/// table.
fn host_line(
    shared: &Shared,
    events: &Sender<Event>,
    bytes: &[u8],
    summary: &LineSummary,
) -> Verdict {
    match Kind::of(summary) {
        Kind::Invalid => {
            // Not JSON: JSON-RPC says answer -32700 with a null id.
            log::debug!(
                "answered a line from the host that is not JSON ({} bytes)",
                summary.len
            );
            shared.write_to_host(&message::parse_error(), events);
            Verdict::Consumed
        }
        Kind::Request { id, method } => host_request(shared, events, bytes, &id, &method),
        Kind::Notification { method } => {
            if !lock(&shared.inflight).upstream_alive() {
                return Verdict::Consumed;
            }
            host_notification(shared, bytes, &method);
            Verdict::Relay
        }
        Kind::Response { id, .. } => {
            let mut inflight = lock(&shared.inflight);
            inflight.answer_server(&id);
            if inflight.upstream_alive() {
                Verdict::Relay
            } else {
                Verdict::Consumed
            }
        }
        Kind::Batch => host_batch(shared, events, bytes),
        Kind::Blank | Kind::Unclassified => Verdict::Relay,
    }
}

fn host_request(
    shared: &Shared,
    events: &Sender<Event>,
    bytes: &[u8],
    id: &[u8],
    method: &str,
) -> Verdict {
    let keep = shared.observer.enabled()
        && matches!(
            method,
            "tools/call" | "initialize" | "server/discover" | "tools/list"
        );
    let admission = lock(&shared.inflight).insert_host(id, method, keep.then(|| bytes.to_vec()));
    match admission {
        Admission::Relay => {
            if method == "initialize" && shared.cfg.restart {
                lock(&shared.handshake).initialize = Some(bytes.to_vec());
            }
            Verdict::Relay
        }
        Admission::AnswerUnavailable => {
            let text = shared.cfg.unavailable_text();
            let answer = if method == "tools/call" {
                message::tool_error_result(id, &text)
            } else {
                message::error_response(id, -32000, &text)
            };
            shared.write_to_host(&answer, events);
            Verdict::Consumed
        }
    }
}

#[derive(Deserialize)]
struct CancelledParams<'a> {
    #[serde(rename = "requestId", borrow)]
    request_id: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct NotificationEnvelope<'a> {
    #[serde(borrow)]
    params: Option<CancelledParams<'a>>,
}

fn host_notification(shared: &Shared, bytes: &[u8], method: &str) {
    match method {
        "notifications/initialized" if shared.cfg.restart => {
            lock(&shared.handshake).initialized = Some(bytes.to_vec());
        }
        "notifications/cancelled" => {
            if let Ok(env) = serde_json::from_slice::<NotificationEnvelope>(bytes)
                && let Some(id) = env.params.and_then(|p| p.request_id)
            {
                lock(&shared.inflight).cancel_host(id.get().as_bytes());
            }
        }
        _ => {}
    }
}

/// A 2025-03-26 batch: relayed whole; each element is tracked.
fn host_batch(shared: &Shared, events: &Sender<Event>, bytes: &[u8]) -> Verdict {
    let alive = lock(&shared.inflight).upstream_alive();
    for element in batch_elements(bytes) {
        let summary = summarize(element.get().as_bytes());
        match Kind::of(&summary) {
            Kind::Request { id, method } => {
                // A dead upstream: each request gets its own answer.
                host_request(shared, events, element.get().as_bytes(), &id, &method);
            }
            Kind::Notification { method } if alive => {
                host_notification(shared, element.get().as_bytes(), &method);
            }
            Kind::Response { id, .. } => {
                lock(&shared.inflight).answer_server(&id);
            }
            _ => {}
        }
    }
    if alive {
        Verdict::Relay
    } else {
        Verdict::Consumed
    }
}

fn flush_to_upstream(shared: &Shared, framer: &Framer, outbox: &mut Outbox) {
    if let Some(run) = outbox.run.take() {
        shared.write_to_upstream(framer.bytes(run));
    }
    for after in outbox.after.drain(..) {
        if let After::Message(range) = after {
            shared
                .observer
                .message(Direction::HostToServer, framer.bytes(range));
        }
    }
}

// ---------------------------------------------------------------------------
// Upstream → host
// ---------------------------------------------------------------------------

/// Relays one upstream's stdout to the host until it closes.
pub fn pump_upstream(
    shared: &Shared,
    events: &Sender<Event>,
    mut from: impl io::Read,
    generation: u32,
) {
    let mut framer = Framer::new(shared.cfg.max_message_bytes);
    let mut outbox = Outbox::new();
    let mut invalid_lines: u64 = 0;
    loop {
        let eof = match framer.fill(&mut from) {
            Ok(0) => true,
            Ok(_) => false,
            Err(err) => {
                log::debug!("reading from the server failed: {err}");
                true
            }
        };
        while let Some(frame) = framer.next_frame() {
            on_upstream_frame(
                shared,
                events,
                &framer,
                frame,
                &mut outbox,
                &mut invalid_lines,
            );
        }
        if eof && let Some(frame) = framer.finish() {
            on_upstream_frame(
                shared,
                events,
                &framer,
                frame,
                &mut outbox,
                &mut invalid_lines,
            );
        }
        flush_to_host(shared, events, &framer, &mut outbox);
        if eof {
            let _ = events.send(Event::UpstreamEof { generation });
            return;
        }
    }
}

fn on_upstream_frame(
    shared: &Shared,
    events: &Sender<Event>,
    framer: &Framer,
    frame: Frame,
    outbox: &mut Outbox,
    invalid_lines: &mut u64,
) {
    match frame {
        Frame::Line { range, summary } => {
            let bytes = framer.bytes(range.clone());
            let kind = Kind::of(&summary);
            if let Kind::Invalid = kind {
                *invalid_lines += 1;
                if *invalid_lines <= 3 || invalid_lines.is_power_of_two() {
                    log::warn!(
                        "the server wrote a line that is not JSON-RPC ({} bytes; {} so far); relayed unchanged",
                        summary.len,
                        invalid_lines
                    );
                }
            }
            let step = match upstream_line(shared, bytes, kind) {
                UpstreamVerdict::Relay => None,
                UpstreamVerdict::RelayStep(request) => Some(request),
                UpstreamVerdict::RelayBatch(steps) => {
                    outbox
                        .after
                        .extend(steps.into_iter().map(|(b, r)| After::StepOwned(b, r)));
                    None
                }
                UpstreamVerdict::Swallow => return,
            };
            if !outbox.push(range.clone()) {
                flush_to_host(shared, events, framer, outbox);
                outbox.push(range.clone());
            }
            if shared.observer.wants_messages() {
                outbox.after.push(After::Message(range.clone()));
            }
            if let Some(request) = step {
                outbox.after.push(After::Step(range, request));
            }
        }
        Frame::Oversized { summary } => {
            flush_to_host(shared, events, framer, outbox);
            upstream_oversized(shared, events, &summary);
        }
    }
}

enum UpstreamVerdict {
    Relay,
    /// Relay; it answers this host `tools/call`.
    RelayStep(HostRequest),
    /// Relay; a batch answering these host `tools/call`s.
    RelayBatch(Vec<(Vec<u8>, HostRequest)>),
    /// An answer to the proxy's own request: not for the host.
    Swallow,
}

fn upstream_line(shared: &Shared, bytes: &[u8], kind: Kind) -> UpstreamVerdict {
    match kind {
        Kind::Response { id, .. } => {
            let mut inflight = lock(&shared.inflight);
            if let Some(own) = inflight.answer_own(&id) {
                drop(inflight);
                if let Some(next) = own.then_send {
                    shared.write_to_upstream(&next);
                    shared.observer.message(Direction::ProxyToServer, &next);
                }
                return UpstreamVerdict::Swallow;
            }
            match inflight.answer_host(&id) {
                Some(request) if request.kept_request.is_some() => {
                    UpstreamVerdict::RelayStep(request)
                }
                _ => UpstreamVerdict::Relay,
            }
        }
        Kind::Request { id, .. } => {
            lock(&shared.inflight).insert_server(&id);
            UpstreamVerdict::Relay
        }
        Kind::Batch => {
            let mut steps = Vec::new();
            for element in batch_elements(bytes) {
                let raw = element.get().as_bytes();
                match Kind::of(&summarize(raw)) {
                    Kind::Response { id, .. } => {
                        if let Some(request) = lock(&shared.inflight).answer_host(&id)
                            && request.kept_request.is_some()
                        {
                            steps.push((raw.to_vec(), request));
                        }
                    }
                    Kind::Request { id, .. } => lock(&shared.inflight).insert_server(&id),
                    _ => {}
                }
            }
            UpstreamVerdict::RelayBatch(steps)
        }
        _ => UpstreamVerdict::Relay,
    }
}

/// A message from the upstream over the size limit: never buffered, never
/// relayed; the party waiting for it gets an answer that says why.
fn upstream_oversized(shared: &Shared, events: &Sender<Event>, summary: &LineSummary) {
    let limit = shared.cfg.max_message_bytes;
    let size = summary.len;
    match Kind::of(summary) {
        Kind::Response { id, .. } => {
            let request = {
                let mut inflight = lock(&shared.inflight);
                if inflight.answer_own(&id).is_some() {
                    log::warn!(
                        "the server's {size}-byte answer to bir's own request was too large"
                    );
                    return;
                }
                inflight.answer_host(&id)
            };
            log::warn!(
                "an answer of {size} bytes from the server is over the {limit}-byte limit; answering with an error instead"
            );
            match request {
                Some(request) if request.method == "tools/call" => {
                    let text = format!(
                        "The result was too large to deliver ({size} bytes; the limit is {limit} bytes)."
                    );
                    shared
                        .write_to_host(&message::tool_error_result(&request.raw_id, &text), events);
                    shared.observe_unanswered_call(request, CallOutcome::TooLarge, Some(size));
                }
                Some(request) => {
                    let text = format!(
                        "upstream answer too large ({size} bytes; the limit is {limit} bytes)"
                    );
                    shared.write_to_host(
                        &message::error_response(&request.raw_id, -32000, &text),
                        events,
                    );
                }
                None => {
                    let text = format!(
                        "upstream answer too large ({size} bytes; the limit is {limit} bytes)"
                    );
                    shared.write_to_host(&message::error_response(&id, -32000, &text), events);
                }
            }
        }
        Kind::Request { id, method } => {
            log::warn!(
                "refused a {size}-byte `{method}` request from the server: over the {limit}-byte limit"
            );
            let text = format!("request too large ({size} bytes; the limit is {limit} bytes)");
            let answer = message::error_response(&id, -32600, &text);
            shared.write_to_upstream(&answer);
            shared.observer.message(Direction::ProxyToServer, &answer);
        }
        Kind::Notification { method } => {
            log::warn!(
                "dropped a {size}-byte `{method}` notification from the server: over the {limit}-byte limit"
            );
        }
        _ => {
            log::warn!("dropped a {size}-byte message from the server: over the {limit}-byte limit")
        }
    }
}

fn flush_to_host(shared: &Shared, events: &Sender<Event>, framer: &Framer, outbox: &mut Outbox) {
    if let Some(run) = outbox.run.take()
        && lock(&shared.host_out).write_all(framer.bytes(run)).is_err()
    {
        let _ = events.send(Event::HostGone);
    }
    for after in outbox.after.drain(..) {
        match after {
            After::Message(range) => shared
                .observer
                .message(Direction::ServerToHost, framer.bytes(range)),
            After::Step(range, request) => {
                observe_answered_call(shared, request, framer.bytes(range))
            }
            After::StepOwned(bytes, request) => observe_answered_call(shared, request, &bytes),
        }
    }
}

fn observe_answered_call(shared: &Shared, request: HostRequest, response: &[u8]) {
    let duration = request.started.elapsed();
    let Some(kept_request) = request.kept_request else {
        return;
    };
    if request.method != "tools/call" {
        if response.len() <= OBSERVE_WHOLE {
            let response = response.to_vec();
            shared
                .observer
                .exchange(&request.method, kept_request, response);
        }
        return;
    }
    shared.observer.tool_call(ToolCallObserved {
        server_name: Arc::clone(&shared.cfg.server_name),
        session_id: shared.cfg.session_id.clone(),
        started_at: request.started_at,
        duration,
        request: kept_request,
        response: Some(ObservedBody::of(response)),
        outcome: if request.cancelled {
            CallOutcome::Cancelled
        } else {
            CallOutcome::Answered
        },
        response_bytes: None,
    });
}

// ---------------------------------------------------------------------------

/// The elements of a JSON array line (empty if it does not parse).
fn batch_elements(bytes: &[u8]) -> Vec<&RawValue> {
    serde_json::from_slice::<Vec<&RawValue>>(bytes).unwrap_or_default()
}

/// Scans one complete JSON value (no newline inside).
fn summarize(bytes: &[u8]) -> LineSummary {
    let mut scanner = LineScanner::new();
    let _ = scanner.scan(bytes);
    scanner.end_line()
}
