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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::Event;
use super::config::ProxyConfig;
use super::inflight::{Admission, HostRequest, InFlight};
use super::lazy::{LIST_METHODS, LazyGate, ToolsCheck, list_cursor};
use super::traceparent::Traceparent;
use crate::jsonrpc::framer::{Frame, Framer};
use crate::jsonrpc::message::{self, Kind};
use crate::jsonrpc::scan::{self, LineSummary};
use crate::locks::lock;
use crate::observe::step::{
    CallOutcome, OBSERVE_WHOLE, ObservedBody, ToolCallObserved, has_binary_block,
};
use crate::observe::{Batch, Direction, Observer};

/// How long [`Shared::close_host`] lets a write to the host under way
/// finish: one that a host reading its stdout takes microseconds for;
/// longer, the host has stopped reading.
const HOST_WRITE_PATIENCE: Duration = Duration::from_millis(100);

/// Bytes the host has taken from the proxy's stdout, counted per write
/// call (so a large message blocked on a slow reader still shows progress).
/// One counter: there is one `HostOut` per process. The lifecycle loop
/// reads it to tell a host that reads slowly (keep delivering, as a bare
/// server's pipe would) from one that stopped reading (end on schedule).
static HOST_BYTES_TAKEN: AtomicU64 = AtomicU64::new(0);

/// How many bytes the host has taken so far (see [`HOST_BYTES_TAKEN`]).
pub(crate) fn host_bytes_taken() -> u64 {
    HOST_BYTES_TAKEN.load(Ordering::Relaxed)
}

/// At most this much per write call: a blocking write to a pipe returns
/// only once all of it is taken, so a larger one would show no progress
/// while a slow reader works through it. A pipe's default capacity.
const HOST_WRITE_PIECE: usize = 64 * 1024;

/// `write_all`, counting every byte the host takes as it goes.
fn write_counting(out: &mut File, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match out.write(&bytes[..bytes.len().min(HOST_WRITE_PIECE)]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                HOST_BYTES_TAKEN.fetch_add(n as u64, Ordering::Relaxed);
                bytes = &bytes[n..];
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// State shared by the pumps and the lifecycle loop.
///
/// Four locks, each guarding one thing, each held only for as long as that
/// thing is used (never across a read from a pipe or the host):
///
/// * `host_out` — the proxy's stdout. Held for the writes of one read's
///   pieces, so a proxy-made message never lands inside a relayed one.
/// * `upstream_in` — the current upstream's stdin. Held for one write.
/// * `inflight` — the in-flight tables of both directions. Held while one
///   read's frames are decided, never while writing: the decisions go into
///   an outbox that is written after the lock is released.
/// * `handshake` — the host's handshake, for a restart. Held for one copy.
/// * `lazy` — `--lazy`: the snapshot answers while the server is not
///   started (see `proxy::lazy`). Held for one decision or one copy.
///
/// **Lock order.** Two locks are ever held together only in this order:
/// `host_out` before `upstream_in` (`flush_upstream_outbox` writes the
/// proxy's own requests to the upstream inside the host write), and
/// `inflight` before `lazy` before `handshake` (`on_host_frame` keeps a
/// host's `initialize` while deciding it). So the lifecycle loop, restarting the
/// upstream, copies the handshake out under its lock alone and never holds
/// it together with `inflight`; nothing takes `host_out` while holding
/// `upstream_in`; and `inflight` is never held together with `host_out` or
/// `upstream_in`.
pub(crate) struct Shared {
    /// The proxy's configuration (immutable).
    pub cfg: ProxyConfig,
    /// The proxy's stdout, the only writer of it (see [`HostOut`]).
    pub host_out: Mutex<HostOut>,
    /// The current upstream's stdin (a child's, or the pipe into the HTTP
    /// transport); `None` once closed (host EOF) or dead.
    pub upstream_in: Mutex<Option<Box<dyn Write + Send>>>,
    /// Requests awaiting answers in both directions, plus the proxy's own;
    /// also whether the upstream is alive (see `inflight.rs`).
    pub inflight: Mutex<InFlight>,
    /// The host's handshake, replayed to a restarted upstream.
    pub handshake: Mutex<Handshake>,
    /// `--lazy`: whether the server is still not started, and what the
    /// host was answered in its place.
    pub lazy: Mutex<LazyState>,
    /// Where observations go after their bytes are written (never blocks).
    pub observer: Observer,
    /// `BIR_OTLP_TRACEPARENT=1` (decided at start; `None`, the default,
    /// costs the host pump one check per request): the `traceparent` put
    /// into each relayed `tools/call`, the one edit of a relayed message.
    pub traceparent: Option<Traceparent>,
}

/// A lazy proxy's state (see [`Shared::lazy`]).
#[derive(Debug, Default)]
pub(crate) struct LazyState {
    /// Set while the server is not started: the host is answered from it.
    pub dormant: Option<LazyGate>,
    /// The host's `initialize` was answered from the snapshot: the server,
    /// once started, gets it replayed.
    pub answered_initialize: bool,
    /// The host was given the snapshot's tools: the live server's are
    /// compared with them once it is started.
    pub tools_given: Option<ToolsCheck>,
}

/// The host's `initialize` request and `notifications/initialized`, as sent.
#[derive(Debug, Default)]
pub(crate) struct Handshake {
    pub initialize: Option<Vec<u8>>,
    pub initialized: Option<Vec<u8>>,
}

/// The proxy's stdout: the host's side of the protocol.
///
/// Every message written here starts on a line of its own. Relayed lines
/// end in `\n`, except a server's last line cut off by its exit (relayed as
/// it came, with no `\n`); whatever follows it (the proxy's answer to the
/// request that line would have answered, a restarted server's first line)
/// would be glued to that fragment and lost with it in the host's parser.
/// So the line is ended first: one `\n` added, never a byte changed.
pub(crate) struct HostOut {
    out: ManuallyDrop<File>,
    broken: bool,
    /// The last byte written was not a `\n`.
    line_open: bool,
}

impl HostOut {
    /// Takes over file descriptor 1. Only one `HostOut` may exist.
    pub(crate) fn stdout() -> HostOut {
        // SAFETY: fd 1 is open for the life of the process; ManuallyDrop
        // keeps this File from closing it.
        let out = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
        HostOut {
            out,
            broken: false,
            line_open: false,
        }
    }

    /// Writes whole messages (ending an open line first). Once the host has
    /// gone away, further writes are dropped (and reported once, by the
    /// caller).
    pub(crate) fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "host output closed",
            ));
        }
        let Some(&last) = bytes.last() else {
            return Ok(());
        };
        let mut result = Ok(());
        if self.line_open {
            result = write_counting(&mut self.out, b"\n");
        }
        if result.is_ok() {
            result = write_counting(&mut self.out, bytes);
        }
        if result.is_err() {
            self.broken = true;
        }
        self.line_open = last != b'\n';
        result
    }
}

impl HostOut {
    /// Closes the host's side of the protocol (the host reads end of file),
    /// as a server closing its stdout would have. Descriptor 1 stays taken
    /// (by `/dev/null`), so no file opened later can land on it; every
    /// later write fails as for a host that went away.
    pub(crate) fn close(&mut self) {
        self.broken = true;
        Self::close_descriptor();
    }

    /// Puts `/dev/null` in place of descriptor 1 without the `HostOut`:
    /// for when a pump holds it, blocked writing to a host that stopped
    /// reading. That write keeps the pipe it started on (and may never
    /// return); the process can end regardless.
    fn close_descriptor() {
        // SAFETY: plain descriptor calls; `null` is closed once duplicated.
        unsafe {
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if null >= 0 {
                libc::dup2(null, 1);
                libc::close(null);
            }
        }
    }
}

impl Shared {
    /// `--lazy` only: the lazy state, locked. A proxy without `--lazy`
    /// never takes this lock, so its per-message path does not pay for it.
    fn lazy_state(&self) -> Option<std::sync::MutexGuard<'_, LazyState>> {
        self.cfg.lazy.then(|| lock(&self.lazy))
    }

    pub(crate) fn new(cfg: ProxyConfig, observer: Observer) -> Shared {
        Shared {
            cfg,
            host_out: Mutex::new(HostOut::stdout()),
            upstream_in: Mutex::new(None),
            inflight: Mutex::new(InFlight::new()),
            handshake: Mutex::new(Handshake::default()),
            lazy: Mutex::new(LazyState::default()),
            observer,
            traceparent: None,
        }
    }

    /// A remote upstream's current session epoch (`observe::session`):
    /// one atomic load; 0 for a child process.
    fn session_epoch(&self) -> u64 {
        self.cfg
            .upstream_http
            .as_ref()
            .map_or(0, |h| h.session_note.epoch())
    }

    /// Closes the host's side (see [`HostOut::close`]) without waiting
    /// long: a pump may hold `host_out` for as long as the host does not
    /// read, and the lifecycle loop must end the proxy whatever the pipes
    /// do. A lock still held after [`HOST_WRITE_PATIENCE`] is a write
    /// blocked on the host: the descriptor is swapped under it (that
    /// pump's later writes, if its write ever returns, go to `/dev/null`)
    /// and `false` says that what the pump was writing will not be
    /// observed.
    pub(crate) fn close_host(&self) -> bool {
        self.close_host_within(HOST_WRITE_PATIENCE, false)
    }

    /// Closes the host's side once the writes under way are delivered, for
    /// as long as the host keeps taking bytes: a host that reads slowly
    /// gets every byte the server sent, as it would from the server's own
    /// pipe. Only `stall` without a byte taken counts as a host that
    /// stopped reading (then as [`Shared::close_host`]).
    pub(crate) fn close_host_when_drained(&self, stall: Duration) -> bool {
        self.close_host_within(stall, true)
    }

    fn close_host_within(&self, patience: Duration, while_taking: bool) -> bool {
        let mut started = Instant::now();
        let mut taken = host_bytes_taken();
        loop {
            match self.host_out.try_lock() {
                Ok(mut host) => {
                    host.close();
                    return true;
                }
                Err(std::sync::TryLockError::Poisoned(poisoned)) => {
                    poisoned.into_inner().close();
                    return true;
                }
                Err(std::sync::TryLockError::WouldBlock)
                    if while_taking && host_bytes_taken() != taken =>
                {
                    taken = host_bytes_taken();
                    started = Instant::now();
                }
                Err(std::sync::TryLockError::WouldBlock) if started.elapsed() >= patience => {
                    HostOut::close_descriptor();
                    return false;
                }
                Err(std::sync::TryLockError::WouldBlock) => {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }

    /// Writes a message the proxy made to the host.
    pub(crate) fn write_to_host(&self, bytes: &[u8], events: &Sender<Event>) {
        if lock(&self.host_out).write_all(bytes).is_err() {
            let _ = events.send(Event::HostGone);
        }
        self.observer.message(Direction::ProxyToHost, bytes);
    }

    /// Writes to the upstream's stdin. A failure means the upstream is
    /// gone; the lifecycle loop learns that from the process itself.
    pub(crate) fn write_to_upstream(&self, bytes: &[u8]) -> bool {
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
    pub(crate) fn unavailable_answer(&self, request: &HostRequest) -> Vec<u8> {
        let text = self.cfg.unavailable_text();
        if request.method == "tools/call" {
            message::tool_error_result(&request.raw_id, &text)
        } else {
            message::error_response(&request.raw_id, -32000, &text)
        }
    }

    /// Reports a `tools/call` that got no answer: the upstream died, or the
    /// session ended first. One the host had cancelled is recorded as
    /// `cancelled`, ended when the host cancelled it: the host stopped
    /// waiting then, and a server that honours the cancel never answers,
    /// so how the session went on says nothing about the call.
    pub(crate) fn observe_unanswered_call(
        &self,
        request: HostRequest,
        outcome: CallOutcome,
        size: Option<u64>,
        ended: Instant,
    ) {
        if let Some(call) = self.unanswered_call(request, outcome, size, ended) {
            self.observer.tool_call(call);
        }
    }

    /// What the observer learns of a `tools/call` that got no answer (see
    /// [`Shared::observe_unanswered_call`]); nothing for other methods.
    fn unanswered_call(
        &self,
        request: HostRequest,
        outcome: CallOutcome,
        size: Option<u64>,
        ended: Instant,
    ) -> Option<ToolCallObserved> {
        if request.method != "tools/call" {
            return None;
        }
        let (outcome, ended) = match (request.cancelled_at, outcome) {
            (Some(at), CallOutcome::UpstreamGone | CallOutcome::SessionEnded) => {
                (CallOutcome::Cancelled, at)
            }
            _ => (outcome, ended),
        };
        self.tool_call_observed(request, None, outcome, size, ended)
    }

    /// What the observer learns of a finished `tools/call` (nothing unless
    /// its request was kept); `ended` is when the proxy read its answer (or
    /// gave up).
    fn tool_call_observed(
        &self,
        mut request: HostRequest,
        response: Option<ObservedBody>,
        outcome: CallOutcome,
        response_bytes: Option<u64>,
        ended: Instant,
    ) -> Option<ToolCallObserved> {
        let kept_request = request.kept_request.take()?;
        Some(ToolCallObserved {
            server_name: Arc::clone(&self.cfg.server_name),
            session_id: self.cfg.session_id.clone(),
            started: request.started,
            duration: ended.saturating_duration_since(request.started),
            request: kept_request,
            raw_id: std::mem::take(&mut request.raw_id),
            response,
            outcome,
            response_bytes,
            id_shared: request.id_shared,
            traceparent: request.traceparent.take(),
            // Read with the answer; a call that got none is stamped now.
            session_epoch: match request.session_epoch {
                0 => self.session_epoch(),
                epoch => epoch,
            },
        })
    }
}

/// What happens to a line once the pump has looked at it.
enum Verdict {
    Relay,
    /// Relay this in place of the line: the line with a `traceparent`
    /// added (`BIR_OTLP_TRACEPARENT`), the only edit ever made.
    Replace(Vec<u8>),
    /// The proxy dealt with it (answered or dropped it): not relayed.
    Consumed,
}

/// Work to do once the relayed bytes are written.
enum After {
    /// A relayed line, for transcript sinks.
    Message(Range<usize>),
    /// A message the proxy made, for transcript sinks.
    MadeMessage(Direction, Vec<u8>),
    /// A `tools/call` answer (the line at this range) to report; the flag
    /// is the scanner's `maybe_binary`.
    Step(Range<usize>, HostRequest, bool),
    /// A `tools/call` answered inside a batch (the element's bytes).
    StepOwned(Vec<u8>, HostRequest),
    /// A `tools/call` the proxy answered itself.
    Unanswered(HostRequest, CallOutcome, Option<u64>),
    /// `--lazy`: an exchange the proxy answered from the snapshot (the
    /// method, the host's request, the answer): the recorder learns the
    /// server from it as if the server had answered.
    Exchange(&'static str, Vec<u8>, Vec<u8>),
}

/// One piece of a pump's output, in order.
enum Piece {
    /// Relayed bytes: a range of the framer's buffer.
    Relayed(Range<usize>),
    /// A message the proxy made.
    Made(Vec<u8>),
}

/// What one chunk of input produced. It is filled while the in-flight table
/// is locked and written after the lock is released: no I/O ever happens
/// under that lock (a blocked pipe must never stall the other pump).
struct Outbox {
    /// When the chunk was read: the arrival time of every line in it (one
    /// clock read per read, however many lines it holds).
    read_at: Instant,
    /// For this pump's destination, in order.
    forward: Vec<Piece>,
    /// Proxy-made messages for the other side (the host, for the host pump;
    /// the upstream, for the upstream pump).
    back: Vec<Vec<u8>>,
    after: Vec<After>,
    /// What `after` turns into, handed to the observer in one go.
    observed: Batch,
    /// Host pump, `--lazy`: a request needs the server, which is not
    /// started yet. It is started (and its handshake done) before this
    /// outbox is written.
    wake: bool,
    /// Upstream pump: events for the lifecycle loop (answers to the
    /// proxy's own requests it waits for), sent after the writes.
    lifecycle: Vec<Event>,
}

impl Outbox {
    fn new() -> Outbox {
        Outbox {
            read_at: Instant::now(),
            forward: Vec::new(),
            back: Vec::new(),
            after: Vec::new(),
            observed: Batch::default(),
            wake: false,
            lifecycle: Vec::new(),
        }
    }

    /// Queues relayed bytes, merging with the previous range when contiguous.
    fn relay(&mut self, range: Range<usize>) {
        if let Some(Piece::Relayed(last)) = self.forward.last_mut()
            && last.end == range.start
        {
            last.end = range.end;
            return;
        }
        self.forward.push(Piece::Relayed(range));
    }
}

/// Writes an outbox's pieces to `to`, its `back` messages to `other`.
/// Returns false if writing to the host failed.
fn write_pieces(
    framer: &Framer,
    outbox: &mut Outbox,
    mut to: impl FnMut(&[u8]) -> bool,
    mut other: impl FnMut(&[u8]) -> bool,
) -> (bool, bool) {
    let mut to_ok = true;
    for piece in outbox.forward.drain(..) {
        let bytes = match &piece {
            Piece::Relayed(range) => framer.bytes(range.clone()),
            Piece::Made(bytes) => bytes.as_slice(),
        };
        if to_ok && !to(bytes) {
            to_ok = false;
        }
    }
    let mut other_ok = true;
    for bytes in outbox.back.drain(..) {
        if other_ok && !other(&bytes) {
            other_ok = false;
        }
    }
    (to_ok, other_ok)
}

// ---------------------------------------------------------------------------
// Host → upstream
// ---------------------------------------------------------------------------

/// Relays the host's stdin to the upstream until end of input.
pub(crate) fn pump_host(shared: &Shared, events: &Sender<Event>) {
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
        outbox.read_at = Instant::now();
        shared.observer.relay_active(outbox.read_at);
        {
            let mut inflight = lock(&shared.inflight);
            while let Some(frame) = framer.next_frame_or_final(eof) {
                on_host_frame(shared, &mut inflight, &framer, frame, &mut outbox);
            }
        }
        flush_host_outbox(shared, events, &framer, &mut outbox);
        if eof {
            let _ = events.send(Event::HostEof);
            return;
        }
    }
}

fn flush_host_outbox(
    shared: &Shared,
    events: &Sender<Event>,
    framer: &Framer,
    outbox: &mut Outbox,
) {
    if std::mem::take(&mut outbox.wake) {
        wake_upstream(events);
    }
    let (_, host_ok) = write_pieces(
        framer,
        outbox,
        |bytes| {
            shared.write_to_upstream(bytes);
            true
        },
        |bytes| lock(&shared.host_out).write_all(bytes).is_ok(),
    );
    if !host_ok {
        let _ = events.send(Event::HostGone);
    }
    deliver_after(shared, framer, outbox, Direction::HostToServer);
}

fn on_host_frame(
    shared: &Shared,
    inflight: &mut InFlight,
    framer: &Framer,
    frame: Frame,
    outbox: &mut Outbox,
) {
    match frame {
        Frame::Line { range, summary } => {
            let bytes = framer.bytes(range.clone());
            match host_line(shared, inflight, bytes, &summary, outbox) {
                Verdict::Relay => {
                    outbox.relay(range.clone());
                    if shared.observer.wants_messages() {
                        outbox.after.push(After::Message(range));
                    }
                }
                Verdict::Replace(edited) => {
                    if shared.observer.wants_messages() {
                        outbox
                            .after
                            .push(After::MadeMessage(Direction::HostToServer, edited.clone()));
                    }
                    outbox.forward.push(Piece::Made(edited));
                }
                Verdict::Consumed => {}
            }
        }
        Frame::Oversized { summary } => {
            let limit = shared.cfg.max_message_bytes;
            match Kind::of(&summary) {
                Kind::Request { id, .. } => {
                    let text = format!(
                        "request too large for bir-proxy ({} bytes; the limit is {limit} bytes)",
                        summary.len
                    );
                    answer_host(shared, outbox, message::error_response(id, -32600, &text));
                }
                _ => log::warn!(
                    "dropped a {}-byte message from the host: over the {limit}-byte limit",
                    summary.len
                ),
            }
        }
    }
}

/// Queues a proxy-made message for the host (from the host pump).
fn answer_host(shared: &Shared, outbox: &mut Outbox, bytes: Vec<u8>) {
    if shared.observer.wants_messages() {
        outbox
            .after
            .push(After::MadeMessage(Direction::ProxyToHost, bytes.clone()));
    }
    outbox.back.push(bytes);
}

/// Decides what to do with one line from the host, updating the in-flight
/// table.
fn host_line(
    shared: &Shared,
    inflight: &mut InFlight,
    bytes: &[u8],
    summary: &LineSummary,
    outbox: &mut Outbox,
) -> Verdict {
    match Kind::of(summary) {
        Kind::Invalid => {
            // Not JSON: JSON-RPC says answer -32700 with a null id.
            log::debug!(
                "answered a line from the host that is not JSON ({} bytes)",
                summary.len
            );
            answer_host(shared, outbox, message::parse_error());
            Verdict::Consumed
        }
        Kind::Request { id, method } => host_request(shared, inflight, bytes, id, &method, outbox),
        Kind::Notification { method } => {
            if !inflight.upstream_alive() {
                return Verdict::Consumed;
            }
            if let Some(verdict) = lazy_notification(shared, bytes, &method) {
                return verdict;
            }
            host_notification(shared, inflight, bytes, &method, outbox.read_at);
            Verdict::Relay
        }
        Kind::Response { id, .. } => {
            inflight.answer_server(id);
            if inflight.upstream_alive() {
                Verdict::Relay
            } else {
                Verdict::Consumed
            }
        }
        Kind::Batch => {
            // A batch is relayed whole: the server has to be there.
            if shared
                .lazy_state()
                .is_some_and(|mut lazy| lazy.dormant.take().is_some())
            {
                outbox.wake = true;
            }
            host_batch(shared, inflight, bytes, outbox)
        }
        Kind::Blank | Kind::Unclassified => Verdict::Relay,
    }
}

fn host_request(
    shared: &Shared,
    inflight: &mut InFlight,
    bytes: &[u8],
    id: &[u8],
    method: &str,
    outbox: &mut Outbox,
) -> Verdict {
    if let Some(verdict) = lazy_request(shared, bytes, id, method, outbox) {
        return verdict;
    }
    let keep = shared.observer.enabled()
        && matches!(
            method,
            "tools/call"
                | "initialize"
                | "server/discover"
                | "tools/list"
                | "prompts/list"
                | "resources/list"
                | "resources/templates/list"
        );
    let admission = inflight.insert_host(id, method, keep.then_some(bytes), outbox.read_at);
    let evicted = inflight.take_evicted_calls();
    if evicted > 0 {
        log::warn!(
            "{evicted} recorded tools/call request(s) forgotten: over 10000 requests unanswered; the run is lossy"
        );
        shared.observer.lost(evicted);
    }
    match admission {
        Admission::Relay => {
            if method == "initialize" && shared.cfg.restart {
                lock(&shared.handshake).initialize = Some(bytes.to_vec());
            }
            if let Some(tp) = &shared.traceparent
                && method == "tools/call"
                && let Some((edited, traceparent)) = tp.inject(bytes)
            {
                inflight.note_traceparent(id, traceparent);
                return Verdict::Replace(edited);
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
            answer_host(shared, outbox, answer);
            Verdict::Consumed
        }
    }
}

/// How long the host pump waits for a lazily started server to finish its
/// handshake before relaying anyway. Generous: a server fetched by `npx`
/// on first use can take this long, and the host is waiting for it either
/// way.
const LAZY_WAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// `--lazy`: asks the lifecycle loop to start the server and waits until
/// its handshake is done (or it failed), so that what this pump relays
/// next reaches a server ready for it.
fn wake_upstream(events: &Sender<Event>) {
    let (done, wait) = std::sync::mpsc::channel();
    if events.send(Event::WakeUpstream(done)).is_ok() {
        let _ = wait.recv_timeout(LAZY_WAKE_TIMEOUT);
    }
}

#[derive(Deserialize)]
struct InitializeParams<'a> {
    #[serde(rename = "protocolVersion", borrow, default)]
    protocol_version: Option<&'a str>,
}

#[derive(Deserialize)]
struct RequestEnvelope<'a> {
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

/// `--lazy`, while the server is not started: answers what the snapshot
/// can (`initialize` in the snapshot's protocol version, each `*/list`
/// page it holds, `ping`, a `server/discover` probe the server refused);
/// anything else wakes the server (`None`: go on as usual, the outbox
/// waits for the server).
fn lazy_request(
    shared: &Shared,
    bytes: &[u8],
    id: &[u8],
    method: &str,
    outbox: &mut Outbox,
) -> Option<Verdict> {
    let mut lazy = shared.lazy_state()?;
    let gate = lazy.dormant.as_ref()?;
    let params = serde_json::from_slice::<RequestEnvelope>(bytes)
        .ok()
        .and_then(|e| e.params);
    if method == "server/discover"
        && let Some(error) = gate.discover_error.clone()
    {
        drop(lazy);
        answer_from_snapshot(shared, bytes, id, method, "error", &error, outbox);
        return Some(Verdict::Consumed);
    }
    let result = match method {
        "initialize" => {
            let asked = params
                .and_then(|p| serde_json::from_str::<InitializeParams>(p.get()).ok())
                .and_then(|p| p.protocol_version);
            (asked == Some(gate.protocol_version.as_str())).then(|| gate.initialize_result.clone())
        }
        "ping" => Some("{}".to_owned()),
        _ if LIST_METHODS.contains(&method) => match list_cursor(params) {
            Ok(cursor) => gate.page(method, cursor.as_deref()).map(str::to_owned),
            Err(()) => None,
        },
        _ => None,
    };
    let Some(result) = result else {
        lazy.dormant = None;
        outbox.wake = true;
        return None;
    };
    match method {
        "initialize" => {
            lazy.answered_initialize = true;
            lock(&shared.handshake).initialize = Some(bytes.to_vec());
        }
        "tools/list" if lazy.tools_given.is_none() => lazy.tools_given = ToolsCheck::of(gate),
        _ => {}
    }
    drop(lazy);
    answer_from_snapshot(shared, bytes, id, method, "result", &result, outbox);
    Some(Verdict::Consumed)
}

/// `--lazy`: answers the host's request (`bytes`, with `id`) with a
/// `result` or an `error` (`member`) from the snapshot. The exchange is
/// also handed to the recorder as if the server had answered, so the
/// lazy session's own snapshot is as whole as an eager one's.
fn answer_from_snapshot(
    shared: &Shared,
    bytes: &[u8],
    id: &[u8],
    method: &str,
    member: &str,
    value: &str,
    outbox: &mut Outbox,
) {
    let id = String::from_utf8_lossy(id);
    let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"{member}\":{value}}}\n");
    let learned = ["initialize", "server/discover"]
        .into_iter()
        .chain(LIST_METHODS)
        .find(|m| *m == method);
    if let Some(method) = learned.filter(|_| shared.observer.enabled()) {
        outbox.after.push(After::Exchange(
            method,
            bytes.to_vec(),
            answer.clone().into_bytes(),
        ));
    }
    answer_host(shared, outbox, answer.into_bytes());
}

/// `--lazy`, while the server is not started: its notifications have
/// nowhere to go. `notifications/initialized` is kept for the replay.
fn lazy_notification(shared: &Shared, bytes: &[u8], method: &str) -> Option<Verdict> {
    shared.lazy_state()?.dormant.as_ref()?;
    if method == "notifications/initialized" {
        lock(&shared.handshake).initialized = Some(bytes.to_vec());
    }
    Some(Verdict::Consumed)
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

/// `read_at`: when the proxy read the notification.
fn host_notification(
    shared: &Shared,
    inflight: &mut InFlight,
    bytes: &[u8],
    method: &str,
    read_at: Instant,
) {
    match method {
        "notifications/initialized" if shared.cfg.restart => {
            lock(&shared.handshake).initialized = Some(bytes.to_vec());
        }
        "notifications/cancelled" => {
            if let Ok(env) = serde_json::from_slice::<NotificationEnvelope>(bytes)
                && let Some(id) = env.params.and_then(|p| p.request_id)
            {
                inflight.cancel_host(id.get().as_bytes(), read_at);
            }
        }
        _ => {}
    }
}

/// A 2025-03-26 batch: relayed whole; each element is tracked.
fn host_batch(
    shared: &Shared,
    inflight: &mut InFlight,
    bytes: &[u8],
    outbox: &mut Outbox,
) -> Verdict {
    let alive = inflight.upstream_alive();
    for element in batch_elements(bytes) {
        let raw = element.get().as_bytes();
        match Kind::of(&scan::summarize(raw)) {
            Kind::Request { id, method } => {
                // A dead upstream: each request gets its own answer.
                host_request(shared, inflight, raw, id, &method, outbox);
            }
            Kind::Notification { method } if alive => {
                host_notification(shared, inflight, raw, &method, outbox.read_at)
            }
            Kind::Response { id, .. } => {
                inflight.answer_server(id);
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

// ---------------------------------------------------------------------------
// Upstream → host
// ---------------------------------------------------------------------------

/// Relays one upstream's stdout to the host until it closes.
pub(crate) fn pump_upstream(
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
        outbox.read_at = Instant::now();
        shared.observer.relay_active(outbox.read_at);
        {
            let mut inflight = lock(&shared.inflight);
            while let Some(frame) = framer.next_frame_or_final(eof) {
                on_upstream_frame(
                    shared,
                    &mut inflight,
                    &framer,
                    frame,
                    &mut outbox,
                    &mut invalid_lines,
                );
            }
        }
        flush_upstream_outbox(shared, events, &framer, &mut outbox);
        if eof {
            let _ = events.send(Event::UpstreamEof { generation });
            return;
        }
    }
}

fn on_upstream_frame(
    shared: &Shared,
    inflight: &mut InFlight,
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
            let step = match upstream_line(shared, inflight, bytes, kind, outbox) {
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
            outbox.relay(range.clone());
            if shared.observer.wants_messages() {
                outbox.after.push(After::Message(range.clone()));
            }
            if let Some(request) = step {
                outbox
                    .after
                    .push(After::Step(range, request, summary.maybe_binary));
            }
        }
        Frame::Oversized { summary } => upstream_oversized(shared, inflight, &summary, outbox),
    }
}

enum UpstreamVerdict {
    Relay,
    /// Relay; it answers this host request, which the recorder wants.
    RelayStep(HostRequest),
    /// Relay; a batch answering these host `tools/call`s.
    RelayBatch(Vec<(Vec<u8>, HostRequest)>),
    /// An answer to the proxy's own request: not for the host.
    Swallow,
}

fn upstream_line(
    shared: &Shared,
    inflight: &mut InFlight,
    bytes: &[u8],
    kind: Kind,
    outbox: &mut Outbox,
) -> UpstreamVerdict {
    match kind {
        Kind::Response { id, .. } => {
            if let Some(own) = inflight.answer_own(id) {
                if let Some(name) = own.report_as {
                    outbox.lifecycle.push(Event::OwnAnswer {
                        id: name,
                        answer: bytes.to_vec(),
                    });
                }
                if let Some(next) = own.then_send {
                    if shared.observer.wants_messages() {
                        outbox
                            .after
                            .push(After::MadeMessage(Direction::ProxyToServer, next.clone()));
                    }
                    outbox.back.push(next);
                }
                return UpstreamVerdict::Swallow;
            }
            match inflight.answer_host(id) {
                Some(mut request) if request.kept_request.is_some() => {
                    request.session_epoch = shared.session_epoch();
                    UpstreamVerdict::RelayStep(request)
                }
                _ => UpstreamVerdict::Relay,
            }
        }
        Kind::Request { id, .. } => {
            inflight.insert_server(id);
            UpstreamVerdict::Relay
        }
        Kind::Batch => {
            let mut steps = Vec::new();
            for element in batch_elements(bytes) {
                let raw = element.get().as_bytes();
                match Kind::of(&scan::summarize(raw)) {
                    Kind::Response { id, .. } => {
                        if let Some(mut request) = inflight.answer_host(id)
                            && request.kept_request.is_some()
                        {
                            request.session_epoch = shared.session_epoch();
                            steps.push((raw.to_vec(), request));
                        }
                    }
                    Kind::Request { id, .. } => inflight.insert_server(id),
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
fn upstream_oversized(
    shared: &Shared,
    inflight: &mut InFlight,
    summary: &LineSummary,
    outbox: &mut Outbox,
) {
    let limit = shared.cfg.max_message_bytes;
    let size = summary.len;
    let to_host = |outbox: &mut Outbox, bytes: Vec<u8>| {
        if shared.observer.wants_messages() {
            outbox
                .after
                .push(After::MadeMessage(Direction::ProxyToHost, bytes.clone()));
        }
        outbox.forward.push(Piece::Made(bytes));
    };
    match Kind::of(summary) {
        Kind::Response { id, .. } => {
            if inflight.answer_own(id).is_some() {
                log::warn!("the server's {size}-byte answer to bir's own request was too large");
                return;
            }
            let request = inflight.answer_host(id);
            log::warn!(
                "an answer of {size} bytes from the server is over the {limit}-byte limit; answering with an error instead"
            );
            let too_large =
                format!("upstream answer too large ({size} bytes; the limit is {limit} bytes)");
            match request {
                Some(request) if request.method == "tools/call" => {
                    let text = format!(
                        "The result was too large to deliver ({size} bytes; the limit is {limit} bytes)."
                    );
                    to_host(outbox, message::tool_error_result(&request.raw_id, &text));
                    outbox.after.push(After::Unanswered(
                        request,
                        CallOutcome::TooLarge,
                        Some(size),
                    ));
                }
                Some(request) => to_host(
                    outbox,
                    message::error_response(&request.raw_id, -32000, &too_large),
                ),
                None => to_host(outbox, message::error_response(id, -32000, &too_large)),
            }
        }
        Kind::Request { id, method } => {
            log::warn!(
                "refused a {size}-byte `{method}` request from the server: over the {limit}-byte limit"
            );
            let text = format!("request too large ({size} bytes; the limit is {limit} bytes)");
            let answer = message::error_response(id, -32600, &text);
            if shared.observer.wants_messages() {
                outbox
                    .after
                    .push(After::MadeMessage(Direction::ProxyToServer, answer.clone()));
            }
            outbox.back.push(answer);
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

fn flush_upstream_outbox(
    shared: &Shared,
    events: &Sender<Event>,
    framer: &Framer,
    outbox: &mut Outbox,
) {
    let (host_ok, _) = {
        let mut host = lock(&shared.host_out);
        write_pieces(
            framer,
            outbox,
            |bytes| host.write_all(bytes).is_ok(),
            |bytes| {
                shared.write_to_upstream(bytes);
                true
            },
        )
    };
    if !host_ok {
        let _ = events.send(Event::HostGone);
    }
    for event in outbox.lifecycle.drain(..) {
        let _ = events.send(event);
    }
    deliver_after(shared, framer, outbox, Direction::ServerToHost);
}

/// Hands a chunk's observations to the observer, once its bytes are
/// written. `relayed` is the direction of the pump's relayed lines.
fn deliver_after(shared: &Shared, framer: &Framer, outbox: &mut Outbox, relayed: Direction) {
    let batch = &mut outbox.observed;
    for after in outbox.after.drain(..) {
        match after {
            After::Message(range) => batch.message(relayed, framer.bytes(range)),
            After::MadeMessage(direction, bytes) => batch.message(direction, &bytes),
            After::Step(range, request, maybe_binary) => observe_answered_call(
                shared,
                batch,
                request,
                framer.bytes(range),
                maybe_binary,
                outbox.read_at,
            ),
            After::StepOwned(bytes, request) => {
                let maybe_binary = has_binary_block(&bytes);
                observe_answered_call(shared, batch, request, &bytes, maybe_binary, outbox.read_at)
            }
            After::Unanswered(request, outcome, size) => {
                if let Some(call) = shared.unanswered_call(request, outcome, size, outbox.read_at) {
                    batch.tool_call(call);
                }
            }
            After::Exchange(method, request, response) => batch.exchange(method, request, response),
        }
    }
    shared.observer.hand_over(batch);
}

fn observe_answered_call(
    shared: &Shared,
    batch: &mut Batch,
    request: HostRequest,
    response: &[u8],
    maybe_binary: bool,
    answered_at: Instant,
) {
    if request.method != "tools/call" {
        // A handshake exchange is kept only whole; the request's bytes move
        // into the batch (no copy).
        if let Some(ObservedBody::Whole(kept_request)) = request.kept_request
            && response.len() <= OBSERVE_WHOLE
        {
            batch.exchange(request.method.as_str(), kept_request, response.to_vec());
        }
        return;
    }
    if request.kept_request.is_none() {
        return;
    }
    let outcome = if request.cancelled_at.is_some() {
        CallOutcome::Cancelled
    } else {
        CallOutcome::Answered
    };
    let body = ObservedBody::of_answer(response, maybe_binary);
    if let Some(call) = shared.tool_call_observed(request, Some(body), outcome, None, answered_at) {
        batch.tool_call(call);
    }
}

// ---------------------------------------------------------------------------

/// The elements of a JSON array line (empty if it does not parse).
fn batch_elements(bytes: &[u8]) -> Vec<&RawValue> {
    serde_json::from_slice::<Vec<&RawValue>>(bytes).unwrap_or_default()
}
