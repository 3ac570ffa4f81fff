//! What the relay hands off its hot path, and who consumes it.
//!
//! The relay produces [`Observation`]s *after* the bytes they describe are on
//! their way to the peer, pushes them onto a bounded [`queue::Queue`] and
//! moves on. One worker thread drains the queue, turns tool calls into
//! [`step::StepReport`]s and feeds every [`Sink`] (today: the `--transcript`
//! file; the recorder is the next sink).
//!
//! Invariants:
//! * Observing never blocks the relay: pushes drop the oldest entry when the
//!   queue is full, and count the drop.
//! * A sink that fails or panics loses its own data only. A panic is caught
//!   at the worker boundary and the observer switches itself off (logged
//!   once); the relay is unaffected.

pub mod queue;
pub mod step;
pub mod transcript;

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use queue::{Queue, Weighed};
use step::{StepReport, ToolCallObserved};

/// How often the worker looks for observations when nobody woke it: the
/// longest a recorded step waits before it is written.
const POLL: Duration = Duration::from_millis(50);

/// At most this many observations wait for the worker (the design's
/// `STEP_BACKLOG`).
pub const MAX_QUEUED: usize = 250;
/// And at most this many bytes of message copies (large messages are
/// copied as a head and a tail only, see [`step::ObservedBody`]).
pub const MAX_QUEUED_BYTES: usize = 32 * 1024 * 1024;

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the host (MCP client) to the upstream server.
    HostToServer,
    /// From the upstream server to the host.
    ServerToHost,
    /// Written by the proxy itself to the host.
    ProxyToHost,
    /// Written by the proxy itself to the upstream.
    ProxyToServer,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::HostToServer => "host_to_server",
            Direction::ServerToHost => "server_to_host",
            Direction::ProxyToHost => "proxy_to_host",
            Direction::ProxyToServer => "proxy_to_server",
        }
    }
}

/// One thing the relay saw.
#[derive(Debug)]
pub enum Observation {
    /// A relayed (or proxy-written) message, copied (clipped when large);
    /// only produced when a sink wants messages.
    Message {
        at: SystemTime,
        direction: Direction,
        body: step::ObservedBody,
    },
    ToolCall(ToolCallObserved),
    /// A host request the recorder learns from (`initialize`,
    /// `server/discover`, `tools/list`) and the upstream's answer, raw.
    Exchange {
        method: String,
        request: Vec<u8>,
        response: Vec<u8>,
    },
    /// A lifecycle event worth a line in a transcript.
    Event {
        at: SystemTime,
        text: String,
    },
}

impl Observation {
    /// A copy of a relayed or proxy-made message, stamped now.
    fn message(direction: Direction, bytes: &[u8]) -> Observation {
        Observation::Message {
            at: SystemTime::now(),
            direction,
            body: step::ObservedBody::of(bytes),
        }
    }
}

impl Weighed for Observation {
    fn weight(&self) -> usize {
        match self {
            Observation::Message { body, .. } => body.weight(),
            Observation::ToolCall(c) => {
                c.request.weight() + c.response.as_ref().map_or(0, step::ObservedBody::weight)
            }
            Observation::Exchange {
                request, response, ..
            } => request.len() + response.len(),
            Observation::Event { text, .. } => text.len(),
        }
    }
}

/// A consumer of observations. Called on the observer's worker thread only.
pub trait Sink: Send {
    /// A relayed message; `bytes` is the whole line, or for a large one only
    /// its head (`total` then says how long it was).
    fn message(&mut self, at: SystemTime, direction: Direction, bytes: &[u8], total: Option<u64>);
    fn step(&mut self, step: &StepReport);
    fn event(&mut self, at: SystemTime, text: &str);
    /// An answered `initialize`, `server/discover` or `tools/list`.
    fn exchange(&mut self, _method: &str, _request: &[u8], _response: &[u8]) {}
    /// Called when the queue is momentarily empty and at the end.
    fn flush(&mut self);
    /// The observer is shutting down; `dropped` observations were lost.
    fn finish(&mut self, _dropped: u64) {}
}

/// Observations the relay gathered while handling one read, handed to the
/// queue together ([`Observer::hand_over`]): one lock per read, however many
/// messages it held. Kept by the relay and reused, so it does not allocate
/// once warm.
#[derive(Default)]
pub struct Batch {
    items: Vec<Observation>,
}

impl Batch {
    /// A relayed or proxy-made message (the caller checked
    /// [`Observer::wants_messages`]).
    pub fn message(&mut self, direction: Direction, bytes: &[u8]) {
        self.items.push(Observation::message(direction, bytes));
    }

    pub fn tool_call(&mut self, call: ToolCallObserved) {
        self.items.push(Observation::ToolCall(call));
    }

    pub fn exchange(&mut self, method: &str, request: Vec<u8>, response: Vec<u8>) {
        self.items.push(Observation::Exchange {
            method: method.to_owned(),
            request,
            response,
        });
    }
}

/// The relay's handle on the observation pipeline. Cheap to share.
pub struct Observer {
    queue: Arc<Queue<Observation>>,
    wants_messages: bool,
    /// Signalled by the worker when it has drained and flushed everything.
    done: Mutex<Option<mpsc::Receiver<()>>>,
}

impl Observer {
    /// An observer that observes nothing (no sink configured).
    pub fn disabled() -> Observer {
        let queue = Arc::new(Queue::new(1, 0));
        queue.close();
        Observer {
            queue,
            wants_messages: false,
            done: Mutex::new(None),
        }
    }

    /// Starts the worker thread feeding `sinks`.
    pub fn start(sinks: Vec<Box<dyn Sink>>, wants_messages: bool) -> Observer {
        if sinks.is_empty() {
            return Observer::disabled();
        }
        let queue = Arc::new(Queue::new(MAX_QUEUED, MAX_QUEUED_BYTES));
        let (done_tx, done_rx) = mpsc::channel();
        let worker_queue = Arc::clone(&queue);
        let spawned = thread::Builder::new()
            .name("bir-observer".into())
            .spawn(move || {
                give_way_to_the_relay();
                run_worker(&worker_queue, sinks);
                let _ = done_tx.send(());
            });
        if let Err(err) = spawned {
            log::warn!("recording disabled: cannot start the observer thread: {err}");
            return Observer::disabled();
        }
        Observer {
            queue,
            wants_messages,
            done: Mutex::new(Some(done_rx)),
        }
    }

    pub fn enabled(&self) -> bool {
        !self.queue.is_closed()
    }

    pub fn wants_messages(&self) -> bool {
        self.wants_messages && self.enabled()
    }

    /// Copies a message for the sinks, if any wants messages.
    pub fn message(&self, direction: Direction, bytes: &[u8]) {
        if self.wants_messages() {
            self.queue.push(Observation::message(direction, bytes));
        }
    }

    pub fn tool_call(&self, call: ToolCallObserved) {
        if self.enabled() {
            self.queue.push(Observation::ToolCall(call));
        }
    }

    /// Queues everything in `batch` at once (and empties it).
    pub fn hand_over(&self, batch: &mut Batch) {
        if batch.items.is_empty() {
            return;
        }
        if self.enabled() {
            self.queue.push_all(batch.items.drain(..));
        } else {
            batch.items.clear();
        }
    }

    pub fn event(&self, text: impl Into<String>) {
        if self.enabled() {
            self.queue.push(Observation::Event {
                at: SystemTime::now(),
                text: text.into(),
            });
        }
    }

    /// Observations the relay lost before handing them over (the run is
    /// then `lossy`, like one whose queue overflowed).
    pub fn lost(&self, n: u64) {
        if self.enabled() {
            self.queue.count_lost(n);
        }
    }

    /// Stops accepting observations and waits up to `deadline` for the
    /// worker to drain and flush. Shutdown is never held up longer. The
    /// worker delivers for three quarters of it at most, then counts what
    /// is left as dropped: the last quarter is for closing the run, so a
    /// run cut short still ends, marked lossy, rather than not at all.
    pub fn finish(&self, deadline: Duration) {
        self.queue
            .close_by(std::time::Instant::now() + deadline * 3 / 4);
        let done = self.done.lock().ok().and_then(|mut d| d.take());
        if let Some(done) = done
            && done.recv_timeout(deadline).is_err()
        {
            log::warn!("observer did not finish within {deadline:?}; some observations are lost");
        }
    }
}

/// The worker offers the CPU back after this many observations of a batch,
/// so that a relay thread waiting for the CPU never waits for a whole batch.
const YIELD_EVERY: usize = 16;

/// How much the recording threads step back (the most `nice` allows).
const RECORDING_NICENESS: i32 = 19;

/// Lowers the calling thread's priority, so that on a busy CPU the kernel
/// runs a waking relay thread ahead of recording work: recording uses the
/// gaps between messages instead of sitting between a request and its
/// answer. Called by the observer's worker and by the recording service's
/// sender. (Linux: `setpriority` on a thread id affects that thread only.)
pub fn give_way_to_the_relay() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: two system calls with no pointers; the id is our own.
        let failed = unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, RECORDING_NICENESS) != 0
        };
        if failed {
            log::debug!("could not lower the recording thread's priority");
        }
    }
}

fn run_worker(queue: &Queue<Observation>, mut sinks: Vec<Box<dyn Sink>>) {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut batch = VecDeque::new();
        loop {
            queue.take_all(POLL, &mut batch);
            if batch.is_empty() && queue.is_closed() {
                // Drain whatever raced with the close.
                queue.take_all(Duration::ZERO, &mut batch);
                deliver_batch(queue, &mut batch, &mut sinks);
                let dropped = queue.dropped();
                sinks.iter_mut().for_each(|s| s.finish(dropped));
                break;
            }
            deliver_batch(queue, &mut batch, &mut sinks);
            if queue.is_empty() {
                sinks.iter_mut().for_each(|s| s.flush());
            }
        }
        sinks.iter_mut().for_each(|s| s.flush());
    }));
    if result.is_err() {
        log::error!("recording stopped after an internal error; relaying continues");
        queue.close();
    }
}

/// Delivers a batch. While the proxy runs, it offers the CPU back every
/// [`YIELD_EVERY`] observations. Once the proxy is ending (the queue closed
/// with a time, [`Observer::finish`]) it does not yield, and at that time it
/// counts the rest as dropped instead of delivering it.
fn deliver_batch(
    queue: &Queue<Observation>,
    batch: &mut VecDeque<Observation>,
    sinks: &mut [Box<dyn Sink>],
) {
    let mut delivered = 0;
    // Read once the queue is closed (it is set before the close).
    let mut until: Option<Option<Instant>> = None;
    while let Some(obs) = batch.pop_front() {
        if queue.is_closed() {
            let until = *until.get_or_insert_with(|| queue.deliver_until());
            if until.is_some_and(|t| Instant::now() >= t) {
                queue.count_lost(1 + batch.len() as u64);
                batch.clear();
                return;
            }
        } else if delivered > 0 && delivered % YIELD_EVERY == 0 {
            std::thread::yield_now();
        }
        deliver(&obs, sinks);
        delivered += 1;
    }
}

fn deliver(obs: &Observation, sinks: &mut [Box<dyn Sink>]) {
    match obs {
        Observation::Message {
            at,
            direction,
            body,
        } => {
            let (bytes, total) = match body {
                step::ObservedBody::Whole(b) => (b.as_slice(), None),
                step::ObservedBody::Clipped { head, len, .. } => (head.as_slice(), Some(*len)),
            };
            sinks
                .iter_mut()
                .for_each(|s| s.message(*at, *direction, bytes, total));
        }
        Observation::ToolCall(call) => {
            let report = StepReport::from_observed(call);
            sinks.iter_mut().for_each(|s| s.step(&report));
        }
        Observation::Exchange {
            method,
            request,
            response,
        } => sinks
            .iter_mut()
            .for_each(|s| s.exchange(method, request, response)),
        Observation::Event { at, text } => sinks.iter_mut().for_each(|s| s.event(*at, text)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    use super::*;
    use crate::observe::step::{CallOutcome, ObservedBody};

    fn call(n: u64) -> ToolCallObserved {
        ToolCallObserved {
            server_name: Arc::from("peer"),
            session_id: None,
            started: Instant::now(),
            duration: Duration::from_millis(1),
            request: ObservedBody::Whole(
                format!(
                    r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"t"}}}}"#
                )
                .into_bytes(),
            ),
            raw_id: crate::jsonrpc::small::SmallBytes::new(n.to_string().as_bytes()),
            response: Some(ObservedBody::Whole(
                format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{}}}}"#).into_bytes(),
            )),
            outcome: CallOutcome::Answered,
            response_bytes: None,
            id_shared: false,
        }
    }

    /// What a sink saw: steps delivered, and the drop count it was closed with.
    #[derive(Default)]
    struct Tally {
        steps: AtomicU64,
        finished_with: AtomicU64,
    }

    struct Counting {
        tally: Arc<Tally>,
        step_cost: Duration,
        panic_at: Option<u64>,
    }

    impl Sink for Counting {
        fn message(&mut self, _: SystemTime, _: Direction, _: &[u8], _: Option<u64>) {}
        fn step(&mut self, _: &StepReport) {
            let n = self.tally.steps.fetch_add(1, Ordering::SeqCst) + 1;
            assert!(self.panic_at != Some(n), "a sink bug");
            std::thread::sleep(self.step_cost);
        }
        fn event(&mut self, _: SystemTime, _: &str) {}
        fn flush(&mut self) {}
        fn finish(&mut self, dropped: u64) {
            self.tally
                .finished_with
                .store(dropped + 1, Ordering::SeqCst);
        }
    }

    fn observer(step_cost: Duration, panic_at: Option<u64>) -> (Observer, Arc<Tally>) {
        let tally = Arc::new(Tally::default());
        let sink = Counting {
            tally: Arc::clone(&tally),
            step_cost,
            panic_at,
        };
        (Observer::start(vec![Box::new(sink)], false), tally)
    }

    #[test]
    fn a_slow_sink_is_cut_off_at_the_deadline_and_still_closed() {
        let (observer, tally) = observer(Duration::from_millis(20), None);
        for n in 0..50 {
            observer.tool_call(call(n));
        }
        let started = Instant::now();
        observer.finish(Duration::from_millis(200));
        assert!(started.elapsed() < Duration::from_millis(400), "bounded");
        let delivered = tally.steps.load(Ordering::SeqCst);
        let finished_with = tally.finished_with.load(Ordering::SeqCst);
        assert!(finished_with > 0, "the sink was closed");
        let dropped = finished_with - 1;
        assert!(dropped > 0 && delivered < 50, "{delivered} delivered");
        assert_eq!(delivered + dropped, 50, "each one delivered or counted");
    }

    #[test]
    fn a_sink_that_panics_switches_observing_off_and_nothing_else() {
        let (observer, tally) = observer(Duration::ZERO, Some(3));
        let started = Instant::now();
        for n in 0..1000 {
            observer.tool_call(call(n));
            if n % 100 == 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the producer never waits"
        );
        while observer.enabled() && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!observer.enabled(), "switched off after the panic");
        observer.tool_call(call(1000));
        observer.finish(Duration::from_millis(200));
        assert_eq!(
            tally.steps.load(Ordering::SeqCst),
            3,
            "nothing after the panic"
        );
    }
}
