//! What the relay hands off its hot path, and who consumes it.
//!
//! The relay produces [`Observation`]s *after* the bytes they describe are on
//! their way to the peer, pushes them onto a bounded [`queue::Queue`] and
//! moves on. One worker thread drains the queue, turns tool calls into
//! [`step::StepReport`]s and feeds every [`Sink`] (the `--transcript`
//! file, and the recorder: `crate::record`).
//!
//! Invariants:
//! * Observing never blocks the relay: pushes drop the oldest entry when the
//!   queue is full, and count the drop.
//! * A sink that fails or panics loses its own data only. A panic is caught
//!   at the worker boundary and the observer switches itself off (logged
//!   once); the relay is unaffected.
//! * Recording completes on a busy machine. The worker keeps its normal
//!   weight: a lowered priority can never be raised again by an
//!   unprivileged thread, and against busy nice-0 processes a nice-19
//!   thread gets a sliver of the CPU — runs were left unfinished and calls
//!   lost that way.
//! * Recording stays out of the relay's way by choosing *when* it works,
//!   not by a lower priority: while the relay is busy (it read something
//!   within [`QUIET`]) the worker stands back, asleep, and does the whole
//!   backlog in the next pause — an agent's think time, or the gap between
//!   two bursts. It stands back for at most [`MAX_DEFERRAL`], and never
//!   lets more than half the queue wait ([`BEHIND`]): beyond that, while
//!   the relay stays busy, it delivers one observation per observation
//!   queued (woken by the push that crosses the mark), so that a relay
//!   that is never quiet still gets its calls recorded at a small, even
//!   cost per call rather than a burst that stalls a few. The looks at
//!   whether the relay went quiet are the pause watch's (`pause.rs`), an
//!   idle-class helper, so that the worker itself wakes once per pause, not
//!   once per millisecond of a burst (each of its wake-ups cost the call
//!   it landed on tens of microseconds). The worker runs as `SCHED_BATCH`
//!   (same weight as any thread, but its wake-ups do not preempt a running
//!   relay thread), takes a whole batch under one short lock, stops as
//!   soon as the relay reads again, and offers the CPU back between any
//!   two observations.
//! * The end does not wait for the worker. The sinks and every observation
//!   taken off the queue live behind one lock ([`Delivery`]); the worker
//!   lets go after the observation it is on once the queue is closed, and
//!   the thread that calls [`Observer::finish`] takes the lock and
//!   completes the delivery itself, within its deadline.

mod pause;
pub(crate) mod queue;
mod sched;
pub(crate) mod session;
pub(crate) mod step;
pub(crate) mod transcript;

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use crate::locks::try_lock_until;
use queue::{Queue, Weighed};
pub(crate) use sched::give_way_to_the_relay;
use step::{StepReport, ToolCallObserved};

/// How often the worker looks for observations when nobody woke it: the
/// longest a recorded step waits before it is written.
const POLL: Duration = Duration::from_millis(50);

/// How often an idle worker looks when every sink is settled
/// ([`Sink::settled`]): a push wakes it anyway, so this only bounds what
/// a sink that settled too early could hold up.
const SETTLED_NAP: Duration = Duration::from_secs(10);

/// At most this many observations wait for the worker (the design's
/// `STEP_BACKLOG`, raised from 250, then 2048): room for a burst of two
/// thousand calls (half the queue, [`BEHIND`]) that the worker records in
/// the pause after it (see [`QUIET`]) — a burst that follows another with
/// no pause between them (a process stopped and continued, say) does not
/// reach the mark where recording starts to cost every call. Each holds a
/// small call's copies (a few hundred bytes: about 1 MB when full of small
/// calls); large messages are bounded by [`MAX_QUEUED_BYTES`] instead.
pub(crate) const MAX_QUEUED: usize = 4096;
/// And at most this many bytes of message copies (large messages are
/// copied as a head and a tail only, see [`step::ObservedBody`]).
pub(crate) const MAX_QUEUED_BYTES: usize = 32 * 1024 * 1024;

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
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
    pub(crate) fn as_str(self) -> &'static str {
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
pub(crate) enum Observation {
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
pub(crate) trait Sink: Send {
    /// A relayed message; `bytes` is the whole line, or for a large one only
    /// its head (`total` then says how long it was).
    fn message(&mut self, at: SystemTime, direction: Direction, bytes: &[u8], total: Option<u64>);
    fn step(&mut self, step: &StepReport);
    fn event(&mut self, at: SystemTime, text: &str);
    /// An answered `initialize`, `server/discover` or `tools/list`.
    fn exchange(&mut self, _method: &str, _request: &[u8], _response: &[u8]) {}
    /// Called when the queue is momentarily empty and at the end.
    fn flush(&mut self);
    /// Whether, right after a [`Sink::flush`], the sink has nothing to do
    /// until the next observation: nothing written that awaits its
    /// `fsync`, nothing held for a retry, no deadline to watch. When every
    /// sink is settled the idle worker sleeps until the relay hands
    /// something over, instead of waking every [`POLL`] (an idle proxy
    /// then costs no wake-ups, and none lands on the first calls after a
    /// long pause). Say `false` when unsure: the worker keeps looking.
    fn settled(&self) -> bool {
        false
    }
    /// The observer is shutting down; `dropped` observations were lost.
    fn finish(&mut self, _dropped: u64) {}
}

/// Observations the relay gathered while handling one read, handed to the
/// queue together ([`Observer::hand_over`]): one lock per read, however many
/// messages it held. Kept by the relay and reused, so it does not allocate
/// once warm.
#[derive(Default)]
pub(crate) struct Batch {
    items: Vec<Observation>,
}

impl Batch {
    /// A relayed or proxy-made message (the caller checked
    /// [`Observer::wants_messages`]).
    pub(crate) fn message(&mut self, direction: Direction, bytes: &[u8]) {
        self.items.push(Observation::message(direction, bytes));
    }

    pub(crate) fn tool_call(&mut self, call: ToolCallObserved) {
        self.items.push(Observation::ToolCall(call));
    }

    pub(crate) fn exchange(&mut self, method: &str, request: Vec<u8>, response: Vec<u8>) {
        self.items.push(Observation::Exchange {
            method: method.to_owned(),
            request,
            response,
        });
    }
}

/// The sinks and the observations taken off the queue for them, behind
/// one lock (`Observer::delivery`). Whoever holds the lock holds every
/// observation that left the queue, so the worker can hand over mid-batch
/// to the finishing thread without losing or repeating one.
struct Delivery {
    sinks: Vec<Box<dyn Sink>>,
    /// Taken off the queue, not yet delivered.
    pending: VecDeque<Observation>,
    /// The sinks were finished: nothing more is delivered.
    finished: bool,
}

/// When the relay last read something, in microseconds since `since`: the
/// worker keeps off the CPU while the relay is busy ([`QUIET`]).
struct RelayActivity {
    since: Instant,
    last_read_us: AtomicU64,
}

impl RelayActivity {
    fn new() -> RelayActivity {
        RelayActivity {
            since: Instant::now(),
            last_read_us: AtomicU64::new(0),
        }
    }

    /// How long until the relay counts as quiet; `None` when it does.
    fn quiet_in(&self) -> Option<Duration> {
        let now = self.since.elapsed().as_micros() as u64;
        let quiet_at = self.last_read_us.load(Ordering::Relaxed) + QUIET.as_micros() as u64;
        (quiet_at > now).then(|| Duration::from_micros(quiet_at - now))
    }

    /// Microseconds since `since`, on the clock `last_read_us` uses.
    fn now_us(&self) -> u64 {
        self.since.elapsed().as_micros() as u64
    }

    /// The relay read something now (tests).
    #[cfg(test)]
    fn read_now(&self) {
        self.last_read_us.store(self.now_us(), Ordering::Relaxed);
    }

    /// Whether the relay read something at or after `at_us`.
    fn read_since(&self, at_us: u64) -> bool {
        self.last_read_us.load(Ordering::Relaxed) >= at_us
    }
}

/// The relay's handle on the observation pipeline. Cheap to share.
pub(crate) struct Observer {
    queue: Arc<Queue<Observation>>,
    wants_messages: bool,
    activity: Arc<RelayActivity>,
    /// `None` when nothing observes. A poisoned lock means a sink panicked
    /// (observing is then off, and its sinks are never called again).
    delivery: Option<Arc<Mutex<Delivery>>>,
}

impl Observer {
    /// An observer that observes nothing (no sink configured).
    pub(crate) fn disabled() -> Observer {
        let queue = Arc::new(Queue::new(1, 0));
        queue.close();
        Observer {
            queue,
            wants_messages: false,
            activity: Arc::new(RelayActivity::new()),
            delivery: None,
        }
    }

    /// Starts the worker thread feeding `sinks`.
    pub(crate) fn start(sinks: Vec<Box<dyn Sink>>, wants_messages: bool) -> Observer {
        if sinks.is_empty() {
            return Observer::disabled();
        }
        let queue = Arc::new(Queue::new(MAX_QUEUED, MAX_QUEUED_BYTES));
        let delivery = Arc::new(Mutex::new(Delivery {
            sinks,
            pending: VecDeque::new(),
            finished: false,
        }));
        let activity = Arc::new(RelayActivity::new());
        let (worker_queue, worker_delivery) = (Arc::clone(&queue), Arc::clone(&delivery));
        let worker_activity = Arc::clone(&activity);
        let spawned = thread::Builder::new()
            .name("bir-observer".into())
            .spawn(move || run_worker(&worker_queue, &worker_delivery, &worker_activity));
        if let Err(err) = spawned {
            log::warn!("recording disabled: cannot start the observer thread: {err}");
            return Observer::disabled();
        }
        Observer {
            queue,
            wants_messages,
            activity,
            delivery: Some(delivery),
        }
    }

    /// The relay read something at `at` (one relaxed store per read): the
    /// worker stays off the CPU for a moment.
    pub(crate) fn relay_active(&self, at: Instant) {
        let us = at
            .saturating_duration_since(self.activity.since)
            .as_micros() as u64;
        self.activity.last_read_us.store(us, Ordering::Relaxed);
    }

    pub(crate) fn enabled(&self) -> bool {
        !self.queue.is_closed()
    }

    pub(crate) fn wants_messages(&self) -> bool {
        self.wants_messages && self.enabled()
    }

    /// Copies a message for the sinks, if any wants messages.
    pub(crate) fn message(&self, direction: Direction, bytes: &[u8]) {
        if self.wants_messages() {
            self.queue.push(Observation::message(direction, bytes));
        }
    }

    pub(crate) fn tool_call(&self, call: ToolCallObserved) {
        if self.enabled() {
            self.queue.push(Observation::ToolCall(call));
        }
    }

    /// Queues everything in `batch` at once (and empties it).
    pub(crate) fn hand_over(&self, batch: &mut Batch) {
        if batch.items.is_empty() {
            return;
        }
        if self.enabled() {
            self.queue.push_all(batch.items.drain(..));
        } else {
            batch.items.clear();
        }
    }

    pub(crate) fn event(&self, text: impl Into<String>) {
        if self.enabled() {
            self.queue.push(Observation::Event {
                at: SystemTime::now(),
                text: text.into(),
            });
        }
    }

    /// Observations the relay lost before handing them over (the run is
    /// then `lossy`, like one whose queue overflowed).
    pub(crate) fn lost(&self, n: u64) {
        if self.enabled() {
            self.queue.count_lost(n);
        }
    }

    /// Stops accepting observations and completes the recording on the
    /// calling thread, within `deadline`: it takes the delivery over from
    /// the worker (which lets go after the observation it is on), delivers
    /// what is left for three quarters of the deadline at most, counts the
    /// rest as dropped, and finishes the sinks, so that a run cut short
    /// still ends, marked lossy, rather than not at all.
    ///
    /// The work is done here, not handed to the worker and waited for:
    /// the caller knows its deadline and runs without a hand-off (a
    /// wake-up of another thread on a saturated CPU is itself a wait).
    ///
    /// The one wait that may outlast `deadline` is for the worker to let
    /// go: the observation it is on may be stuck in a write or an `fsync`
    /// to a slow disk (or a post to a slow daemon), and giving up there
    /// would leave the run unfinished although its journal is about to
    /// take records again. That wait lasts [`LET_GO_LIMIT`] at most;
    /// whatever is still queued once the delivery is in hand past the
    /// deadline is counted as dropped.
    pub(crate) fn finish(&self, deadline: Duration) {
        self.finish_within(deadline, LET_GO_LIMIT.max(deadline));
    }

    /// [`Observer::finish`], waiting `let_go_limit` at most for the worker
    /// to let go of the delivery.
    fn finish_within(&self, deadline: Duration, let_go_limit: Duration) {
        let started = Instant::now();
        let until = started + deadline * 3 / 4;
        self.queue.close();
        let Some(delivery) = &self.delivery else {
            return;
        };
        let mut delivery = match try_lock_until(delivery, started + let_go_limit, HANDOVER_POLL) {
            Ok(held) => held,
            // A sink panicked: observing is off, its sinks are dead.
            Err(TryLockError::Poisoned(_)) => return,
            Err(TryLockError::WouldBlock) => {
                log::warn!(
                    "observer did not finish within {let_go_limit:?}; some observations are lost"
                );
                return;
            }
        };
        if delivery.finished {
            return;
        }
        let completed = catch_unwind(AssertUnwindSafe(|| {
            complete(&self.queue, &mut delivery, until);
        }));
        if completed.is_err() {
            log::error!("recording stopped after an internal error while finishing");
        }
    }
}

/// How often [`Observer::finish`] looks whether the worker let go of the
/// delivery (it does after the observation it is on).
const HANDOVER_POLL: Duration = Duration::from_millis(1);

/// How long [`Observer::finish`] waits at most for the worker to let go of
/// the delivery, whatever its deadline: what the worker is on may be a
/// write or an `fsync` held up by a busy disk (hundreds of milliseconds on
/// a shared CI volume), or a post to a recorder daemon slow to answer (1 s
/// at most). As long as a proxy's whole time to finish when no signal
/// hurries it: a disk that holds a write up longer is treated as gone.
const LET_GO_LIMIT: Duration = Duration::from_millis(1500);

/// The relay counts as busy this long after its last read: meanwhile the
/// worker stands back (see the module docs). Long enough to span the gap
/// between two calls of a burst, short against an agent's think time, and
/// short enough that the recording starts at once in a pause (whoever
/// waits for a proxy to go idle sees it working, not asleep).
const QUIET: Duration = Duration::from_millis(1);

/// The shortest nap while standing back: a relay that went quiet a moment
/// ago is looked at again a little later, not spun on.
const MIN_NAP: Duration = Duration::from_micros(250);

/// With this many observations waiting, the worker delivers even while the
/// relay is busy (half the queue: before it starts dropping), as many as
/// keep it under the mark.
const BEHIND: usize = MAX_QUEUED / 2;

/// And once it has stood back this long: a relay that is never quiet (a
/// server streaming progress notifications, say) must not keep a run
/// from reaching its journal, and a proxy killed (SIGKILL) in the middle
/// of a long burst must not lose more than this much of it. Long enough
/// for a burst of a thousand quick calls.
const MAX_DEFERRAL: Duration = Duration::from_millis(50);

/// The worker: waits for observations, stands back while the relay is
/// busy, then takes them off the queue and delivers them under the
/// delivery lock. Once the queue is closed it lets go (after the
/// observation it is on) and leaves the rest to [`Observer::finish`].
fn run_worker(
    queue: &Arc<Queue<Observation>>,
    delivery: &Mutex<Delivery>,
    activity: &Arc<RelayActivity>,
) {
    sched::run_as_batch();
    // Its timers (the longest deferral, the idle look) need no precision.
    sched::allow_late_timers();
    let watch = pause::PauseWatch::start(Arc::clone(queue), Arc::clone(activity));
    let activity: &RelayActivity = activity;
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut taken = VecDeque::new();
        // Taken off the queue but not yet delivered (the relay got busy).
        let mut pending = 0;
        let mut standing_back: Option<Instant> = None;
        // When the sinks were last flushed: what was delivered reaches the
        // journal within [`POLL`] even while the worker is behind.
        let mut flushed_at: Option<Instant> = None;
        // Every sink said, after the last flush, that it has nothing to do
        // until the next observation.
        let mut settled = false;
        let mut yielding = Yielding::default();
        loop {
            if pending == 0 && standing_back.is_none() {
                // Idle: the first push wakes it (one wake-up per burst),
                // so that it records the burst as soon as the relay pauses.
                // Until then it looks every POLL while a sink has work
                // left (an fsync to do, say), and hardly ever once none has.
                queue.wait(1, if settled { SETTLED_NAP } else { POLL });
            }
            if queue.is_closed() {
                return;
            }
            let waiting = pending + queue.len();
            // Nothing waiting (the idle wait timed out, or a nudge came for
            // a backlog that is gone): no delivery, but the sinks' flush
            // below still comes every [`POLL`] (their periodic look).
            let reason = if waiting == 0 {
                standing_back = None;
                None
            } else {
                let since = *standing_back.get_or_insert_with(Instant::now);
                let look = Look {
                    waiting,
                    stood_back: since.elapsed(),
                    relay_quiet_in: activity.quiet_in(),
                    pause_watch: watch.available(),
                };
                let Some(reason) = look.deliver_now() else {
                    // Asleep until the relay is quiet (the pause watch
                    // nudges it), half the queue waits, the queue closes
                    // (a push or `close` wakes it), or the time to look
                    // again.
                    if look.pause_watch {
                        watch.arm();
                    }
                    queue.wait(BEHIND.saturating_sub(pending), look.nap());
                    continue;
                };
                Some(reason)
            };
            // The relay paused: the deferral starts afresh from here, so
            // that a pause that ends before the whole backlog is written
            // does not count as standing back.
            if reason == Some(Reason::Quiet) {
                standing_back = Some(Instant::now());
            }
            // Once it stood back too long, the whole backlog goes.
            let stop_when_back = reason != Some(Reason::Overdue);
            let Ok(mut held) = delivery.lock() else {
                return;
            };
            let d = &mut *held;
            if d.finished || queue.is_closed() {
                return;
            }
            queue.take_all(Duration::ZERO, &mut taken);
            d.pending.append(&mut taken);
            deliver_while_open(queue, d, activity, stop_when_back, &mut yielding);
            pending = d.pending.len();
            if pending == 0 {
                // Caught up: the next wait for the relay starts afresh.
                standing_back = None;
            }
            let stale = flushed_at.is_none_or(|at| at.elapsed() >= POLL);
            if (pending == 0 && queue.is_empty()) || stale {
                d.sinks.iter_mut().for_each(|s| s.flush());
                flushed_at = Some(Instant::now());
                settled = d.sinks.iter().all(|s| s.settled());
            } else {
                settled = false;
            }
        }
    }));
    watch.close();
    if result.is_err() {
        log::error!("recording stopped after an internal error; relaying continues");
        queue.close();
    }
}

/// Why the worker delivers now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    /// Half the queue waits ([`BEHIND`]).
    Behind,
    /// It stood back for [`MAX_DEFERRAL`] while the relay stayed busy: the
    /// whole backlog goes.
    Overdue,
    /// The relay read nothing for [`QUIET`].
    Quiet,
}

/// What the worker sees when it wakes with observations waiting.
#[derive(Debug, Clone, Copy)]
struct Look {
    /// Observations taken or queued, not yet delivered.
    waiting: usize,
    /// How long it has stood back for the relay.
    stood_back: Duration,
    /// When the relay counts as quiet (`None`: it does now).
    relay_quiet_in: Option<Duration>,
    /// The pause watch works here; else the worker looks at the clock.
    pause_watch: bool,
}

impl Look {
    /// Whether to deliver now, and why (`None`: stand back).
    fn deliver_now(&self) -> Option<Reason> {
        if self.waiting == 0 {
            return None;
        }
        if self.waiting >= BEHIND {
            return Some(Reason::Behind);
        }
        // Quiet before overdue: a relay that paused (or a process that was
        // stopped, say, with SIGSTOP, for longer than the deferral) gets a
        // delivery that stops when it reads again, not the whole backlog at
        // once in the middle of its next burst.
        if self.relay_quiet_in.is_none() {
            return Some(Reason::Quiet);
        }
        (self.stood_back >= MAX_DEFERRAL).then_some(Reason::Overdue)
    }

    /// How long to sleep while standing back (woken sooner by a push that
    /// crosses [`BEHIND`], by the pause watch, or by the queue closing).
    /// With the pause watch the pause wakes it, so no timer is needed but
    /// the end of the longest deferral: the worker's wake-ups do not land
    /// between two calls of a burst. Without it, it looks again when the
    /// relay may be quiet (not sooner than [`MIN_NAP`]).
    fn nap(&self) -> Duration {
        let left = MAX_DEFERRAL.saturating_sub(self.stood_back).max(MIN_NAP);
        if self.waiting == 0 {
            return POLL;
        }
        if self.pause_watch {
            return left;
        }
        self.relay_quiet_in.unwrap_or(MIN_NAP).clamp(MIN_NAP, left)
    }
}

/// Delivers what is pending while the queue is open; stops (leaving the
/// rest pending) as soon as the queue is closed, so the finishing thread
/// takes over, or, when `stop_when_back`, as soon as the relay read
/// something since the delivery began and fewer than [`BEHIND`]
/// observations wait: the relay is back, and the rest waits for its next
/// pause. Between two observations it may offer the CPU back (see
/// [`Yielding`]).
fn deliver_while_open(
    queue: &Queue<Observation>,
    d: &mut Delivery,
    activity: &RelayActivity,
    stop_when_back: bool,
    yielding: &mut Yielding,
) {
    let began = activity.now_us();
    let mut delivered = 0;
    while let Some(obs) = d.pending.pop_front() {
        let relay_is_back = || {
            stop_when_back && activity.read_since(began) && d.pending.len() + queue.len() < BEHIND
        };
        if queue.is_closed() || (delivered > 0 && relay_is_back()) {
            d.pending.push_front(obs);
            return;
        }
        if delivered > 0 {
            yielding.between_observations();
        }
        deliver(&obs, &mut d.sinks);
        delivered += 1;
    }
}

/// Whether the worker offers the CPU back between two observations.
///
/// It does, so that a relay that keeps a CPU busy itself (pipelined calls)
/// loses recordings rather than speed (recording never blocks the relay); a relay thread
/// that wakes takes the CPU from the worker at once anyway
/// ([`sched::run_as_batch`]), so the yield is for the relay's share, not its
/// latency. But when yield after yield keeps the worker off the CPU for
/// longer than [`YIELD_TOO_LONG`], another process wants the CPU (a busy
/// loop, a build), and each further yield hands it a whole time slice:
/// yielding after every observation there made a batch of forty take
/// forty slices, the worker competing with the relay all along
/// (recording-on p99 2.2 times recording-off under `bench/contention.py`).
/// So after [`LONG_YIELDS`] such yields in a row the worker stops yielding
/// for [`YIELD_PAUSE`], then tries again. (One long yield alone is no
/// sign: a relay busy with a pipelined burst sometimes keeps the CPU that
/// long too.)
#[derive(Debug, Default)]
struct Yielding {
    /// Long yields in a row.
    long_in_a_row: u32,
    /// No yields until then.
    off_until: Option<Instant>,
}

impl Yielding {
    fn between_observations(&mut self) {
        self.maybe_yield(std::thread::yield_now);
    }

    /// Calls `yield_now` unless yielding is paused, and notes how long it
    /// took.
    fn maybe_yield(&mut self, yield_now: impl FnOnce()) {
        if self.off_until.is_some_and(|until| Instant::now() < until) {
            return;
        }
        let asked = Instant::now();
        yield_now();
        let now = Instant::now();
        if now - asked < YIELD_TOO_LONG {
            self.long_in_a_row = 0;
            return;
        }
        self.long_in_a_row += 1;
        if self.long_in_a_row >= LONG_YIELDS {
            self.long_in_a_row = 0;
            self.off_until = Some(now + YIELD_PAUSE);
        }
    }
}

/// A yield that kept the worker off the CPU this long, [`LONG_YIELDS`]
/// times in a row, means a process other than the relay wants it (see
/// [`Yielding`]).
const YIELD_TOO_LONG: Duration = Duration::from_millis(1);
const LONG_YIELDS: u32 = 3;
/// How long the worker then delivers without yielding.
const YIELD_PAUSE: Duration = Duration::from_secs(1);

/// The end, on the finishing thread: delivers what is left until `until`,
/// counts the rest as dropped, and finishes every sink.
fn complete(queue: &Queue<Observation>, d: &mut Delivery, until: Instant) {
    let mut rest = VecDeque::new();
    queue.take_all(Duration::ZERO, &mut rest);
    d.pending.append(&mut rest);
    while let Some(obs) = d.pending.pop_front() {
        if Instant::now() >= until {
            queue.count_lost(1 + d.pending.len() as u64);
            d.pending.clear();
            break;
        }
        deliver(&obs, &mut d.sinks);
    }
    let dropped = queue.dropped();
    d.finished = true;
    d.sinks.iter_mut().for_each(|s| s.finish(dropped));
    d.sinks.iter_mut().for_each(|s| s.flush());
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

/// The test suites' one wait (`tests/it/support/wait.rs`), shared by path;
/// the tests of `observe`'s submodules use it from here.
#[cfg(test)]
#[allow(dead_code, unreachable_pub, clippy::duplicate_mod)]
#[path = "../../tests/it/support/wait.rs"]
mod test_wait;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    use super::test_wait::wait_until;
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
            raw_id: crate::jsonrpc::inline_bytes::SmallBytes::new(n.to_string().as_bytes()),
            response: Some(ObservedBody::Whole(
                format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{}}}}"#).into_bytes(),
            )),
            outcome: CallOutcome::Answered,
            response_bytes: None,
            id_shared: false,
            traceparent: None,
            session_epoch: 0,
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
            // A sink's simulated cost, not a wait for an event.
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

    /// A sink whose first step does not return until the test lets it (a
    /// write held up by a busy disk), then counts like [`Counting`].
    struct Stuck {
        counting: Counting,
        entered: std::sync::mpsc::Sender<()>,
        release: std::sync::mpsc::Receiver<()>,
    }

    impl Sink for Stuck {
        fn message(&mut self, _: SystemTime, _: Direction, _: &[u8], _: Option<u64>) {}
        fn step(&mut self, step: &StepReport) {
            if self.counting.tally.steps.load(Ordering::SeqCst) == 0 {
                let _ = self.entered.send(());
                let _ = self.release.recv();
            }
            self.counting.step(step);
        }
        fn event(&mut self, _: SystemTime, _: &str) {}
        fn flush(&mut self) {}
        fn finish(&mut self, dropped: u64) {
            self.counting.finish(dropped);
        }
    }

    /// The worker is stuck in a delivery past the finishing deadline: the
    /// finisher waits for it to let go (up to its own limit, long here),
    /// then still closes the run, counting what it had no time to deliver.
    #[test]
    fn a_delivery_stuck_past_the_deadline_still_lets_the_run_close() {
        let tally = Arc::new(Tally::default());
        let (entered_tx, entered) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel();
        let sink = Stuck {
            counting: Counting {
                tally: Arc::clone(&tally),
                step_cost: Duration::ZERO,
                panic_at: None,
            },
            entered: entered_tx,
            release: release_rx,
        };
        let observer = Observer::start(vec![Box::new(sink)], false);
        for n in 0..5 {
            observer.tool_call(call(n));
        }
        entered
            .recv_timeout(Duration::from_secs(60))
            .expect("the worker took the first observation");
        let deadline = Duration::from_millis(50);
        let finisher = std::thread::spawn(move || {
            observer.finish_within(deadline, Duration::from_secs(600));
        });
        // At least the deadline passes before the stuck write returns.
        std::thread::sleep(deadline * 2);
        release.send(()).expect("the sink waits");
        finisher.join().expect("the finisher returns");
        let finished_with = tally.finished_with.load(Ordering::SeqCst);
        assert!(finished_with > 0, "the run was left unfinished");
        let delivered = tally.steps.load(Ordering::SeqCst);
        assert_eq!(
            delivered + (finished_with - 1),
            5,
            "each one delivered or counted"
        );
    }

    /// Counts its flushes; says it is settled or not.
    struct Flushes {
        count: Arc<AtomicU64>,
        settled: bool,
    }

    impl Sink for Flushes {
        fn message(&mut self, _: SystemTime, _: Direction, _: &[u8], _: Option<u64>) {}
        fn step(&mut self, _: &StepReport) {}
        fn event(&mut self, _: SystemTime, _: &str) {}
        fn flush(&mut self) {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
        fn settled(&self) -> bool {
            self.settled
        }
    }

    /// An idle worker whose sinks all say they are settled sleeps until the
    /// relay hands something over; one whose sink has work left keeps
    /// looking every POLL. (Load can only delay the worker, so the settled
    /// half cannot pass by accident; the other half waits as long as it
    /// takes.)
    #[test]
    fn an_idle_worker_sleeps_once_its_sinks_are_settled() {
        for settled in [true, false] {
            let count = Arc::new(AtomicU64::new(0));
            let sink = Flushes {
                count: Arc::clone(&count),
                settled,
            };
            let observer = Observer::start(vec![Box::new(sink)], false);
            observer.tool_call(call(1));
            // The call is delivered and flushed (the worker then idles).
            wait_until("delivered and flushed", Duration::from_secs(60), || {
                count.load(Ordering::SeqCst) > 0
            });
            let after_delivery = count.load(Ordering::SeqCst);
            if settled {
                // An absence has no event to wait on: six polls' time for
                // a periodic flush that must not come.
                thread::sleep(POLL * 6);
                assert_eq!(
                    count.load(Ordering::SeqCst),
                    after_delivery,
                    "no periodic flush while settled"
                );
                // A push still wakes it.
                observer.tool_call(call(2));
                wait_until("woken by the push", Duration::from_secs(60), || {
                    count.load(Ordering::SeqCst) > after_delivery
                });
            } else {
                wait_until(
                    "an unsettled sink flushed again while idle",
                    Duration::from_secs(60),
                    || count.load(Ordering::SeqCst) > after_delivery + 1,
                );
            }
            observer.finish(Duration::from_secs(5));
        }
    }

    /// Three long yields in a row pause yielding; a quick one in between
    /// does not count them. (A long yield is simulated by sleeping longer
    /// than the limit: load can only lengthen it.)
    #[test]
    fn yielding_pauses_after_long_yields_in_a_row_only() {
        // A long yield, simulated: the sleep is the point, not a wait.
        let long = || thread::sleep(YIELD_TOO_LONG * 2);
        let mut y = Yielding::default();
        for _ in 0..LONG_YIELDS {
            y.maybe_yield(long);
        }
        let paused_at = Instant::now();
        let mut called = false;
        y.maybe_yield(|| called = true);
        if paused_at.elapsed() < YIELD_PAUSE {
            assert!(!called, "paused after {LONG_YIELDS} long yields");
        }
        let mut y = Yielding::default();
        for _ in 1..LONG_YIELDS {
            y.maybe_yield(long);
        }
        let quick = Instant::now();
        y.maybe_yield(|| {});
        let quick_was_quick = quick.elapsed() < YIELD_TOO_LONG;
        y.maybe_yield(long);
        let mut called = false;
        y.maybe_yield(|| called = true);
        if quick_was_quick {
            assert!(called, "a quick yield starts the count afresh");
        }
    }

    fn look(waiting: usize, stood_back: Duration, quiet_in: Option<Duration>) -> Look {
        Look {
            waiting,
            stood_back,
            relay_quiet_in: quiet_in,
            pause_watch: true,
        }
    }

    #[test]
    fn the_worker_stands_back_only_while_the_relay_is_busy_and_it_is_not_behind() {
        let busy = Some(Duration::from_micros(700));
        let fresh = Duration::ZERO;
        assert_eq!(look(0, fresh, busy).deliver_now(), None, "nothing to do");
        assert_eq!(look(3, fresh, None).deliver_now(), Some(Reason::Quiet));
        assert_eq!(look(3, fresh, busy).deliver_now(), None, "relay busy");
        assert_eq!(look(BEHIND - 1, fresh, busy).deliver_now(), None);
        assert_eq!(
            look(BEHIND, fresh, busy).deliver_now(),
            Some(Reason::Behind)
        );
        assert_eq!(
            look(3, MAX_DEFERRAL, busy).deliver_now(),
            Some(Reason::Overdue),
            "stood back enough"
        );
        assert_eq!(
            look(3, MAX_DEFERRAL, None).deliver_now(),
            Some(Reason::Quiet),
            "quiet after a long wait: stops when the relay reads again"
        );
    }

    /// With the pause watch, standing back sets no timer but the end of the
    /// longest deferral (no wake-up between two calls of a burst); without
    /// it, the worker looks again when the relay may be quiet, never in a
    /// spin.
    #[test]
    fn a_worker_standing_back_sleeps_until_the_pause_or_the_deferral_ends() {
        let busy = Some(Duration::from_micros(700));
        let stood = Duration::from_millis(10);
        assert_eq!(look(3, stood, busy).nap(), MAX_DEFERRAL - stood);
        let clock = Look {
            pause_watch: false,
            ..look(3, stood, busy)
        };
        assert_eq!(clock.nap(), Duration::from_micros(700));
        let soon = Look {
            relay_quiet_in: Some(Duration::from_micros(1)),
            ..clock
        };
        assert_eq!(soon.nap(), MIN_NAP, "never a spin");
        let late = Look {
            stood_back: MAX_DEFERRAL - Duration::from_micros(300),
            relay_quiet_in: Some(Duration::from_millis(1)),
            ..clock
        };
        assert_eq!(
            late.nap(),
            Duration::from_micros(300),
            "not past the deferral"
        );
    }

    /// A relay that never goes quiet (it reads all the time) does not keep
    /// its calls from the sinks: the worker stands back for a bounded time
    /// only. (On a busy machine the relay may look quiet now and then,
    /// which delivers sooner: no duration is asserted.)
    #[test]
    fn a_relay_that_is_never_quiet_still_gets_its_calls_delivered() {
        let (observer, tally) = observer(Duration::ZERO, None);
        let observer = Arc::new(observer);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let relay = {
            let (observer, stop) = (Arc::clone(&observer), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    observer.relay_active(Instant::now());
                    // The busy relay's pace, not a wait for an event.
                    std::thread::sleep(Duration::from_micros(100));
                }
            })
        };
        // Busy from before the first call on.
        observer.relay_active(Instant::now());
        for n in 0..5 {
            observer.tool_call(call(n));
        }
        let delivered = crate::observe::test_wait::poll_until(Duration::from_secs(60), || {
            tally.steps.load(Ordering::SeqCst) >= 5
        });
        stop.store(true, Ordering::Relaxed);
        relay.join().expect("relay thread");
        assert!(delivered, "delivered while the relay stayed busy");
        assert_eq!(tally.steps.load(Ordering::SeqCst), 5);
        observer.finish(Duration::from_secs(5));
        assert_eq!(
            tally.finished_with.load(Ordering::SeqCst),
            1,
            "none dropped"
        );
    }

    #[test]
    fn a_sink_that_panics_switches_observing_off_and_nothing_else() {
        let (observer, tally) = observer(Duration::ZERO, Some(3));
        let started = Instant::now();
        for n in 0..1000 {
            observer.tool_call(call(n));
            if n % 100 == 0 {
                // The producer's pace, not a wait for an event.
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the producer never waits"
        );
        wait_until(
            "observing switched off after the panic",
            Duration::from_secs(5),
            || !observer.enabled(),
        );
        observer.tool_call(call(1000));
        observer.finish(Duration::from_millis(200));
        assert_eq!(
            tally.steps.load(Ordering::SeqCst),
            3,
            "nothing after the panic"
        );
    }
}
