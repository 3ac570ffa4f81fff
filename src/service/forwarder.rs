//! The recorder's forwarder: records sent to the service as they are
//! journaled, from a bounded queue, by one background thread; at the end
//! of a run, what that thread has not sent is sent by the finishing
//! thread itself ([`ServiceForwarder::finish`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, TryLockError};
use std::thread;
use std::time::{Duration, Instant};

use super::client::{Client, SendFailure, ServiceConfig, jittered};
use super::wire::{WireRequest, request_for};
use crate::locks::{Monitor, try_lock_until};
use crate::record::Forwarder;
use crate::record::model::Record;
use crate::record::sender::{
    self, CatchUpState, CatchUpWhen, Outbox, Sending, Work, cool_down_for, next_work,
};
use crate::urls;

/// The send queue's bounds.
pub(super) const MAX_QUEUED: usize = 1000;
pub(super) const MAX_QUEUED_BYTES: usize = 32 * 1024 * 1024;

pub(super) struct Item {
    run_id: String,
    seq: u64,
    req: WireRequest,
}

/// What the service acknowledged of one run.
#[derive(Default)]
struct RunAck {
    /// Every record up to here was acknowledged.
    acked: u64,
    /// A record of this run was dropped or failed: later acknowledgements
    /// no longer extend `acked` (`bir sync` resends from there).
    broken: bool,
    /// The last seq handed to `forward`.
    forwarded: u64,
    /// The one warning for this run was given.
    warned: bool,
    /// The latest failed attempt, for the warning.
    last_failure: Option<String>,
}

#[derive(Default)]
pub(super) struct State {
    queue: VecDeque<Item>,
    queued_bytes: usize,
    runs: HashMap<String, RunAck>,
    dropped: u64,
    warned_overflow: bool,
    /// A record of this session reached the service: it is up, and the
    /// background catch-up may begin.
    delivered_any: bool,
    /// The forwarder is finishing: its caller sends what is left, and the
    /// sender thread starts no catch-up turn that would hold the client.
    finishing: bool,
}

impl State {
    fn push(&mut self, item: Item) {
        let run = self.runs.entry(item.run_id.clone()).or_default();
        if item.seq != run.forwarded + 1 {
            // A record of this run never reached us.
            run.broken = true;
        }
        run.forwarded = item.seq;
        self.queued_bytes += item.req.body.len();
        self.queue.push_back(item);
        while self.queue.len() > MAX_QUEUED || self.queued_bytes > MAX_QUEUED_BYTES {
            let Some(old) = self.queue.pop_front() else {
                break;
            };
            self.queued_bytes -= old.req.body.len();
            self.dropped += 1;
            if let Some(run) = self.runs.get_mut(&old.run_id) {
                run.broken = true;
            }
            if !self.warned_overflow {
                self.warned_overflow = true;
                log::warn!(
                    "the recording service is not keeping up; records wait in the local store for `bir sync`"
                );
            }
        }
    }

    fn pop(&mut self) -> Option<Item> {
        let item = self.queue.pop_front()?;
        self.queued_bytes -= item.req.body.len();
        Some(item)
    }

    fn settle(&mut self, run_id: &str, seq: u64, delivered: bool) {
        let run = self.runs.entry(run_id.to_owned()).or_default();
        if !delivered {
            run.broken = true;
        } else if !run.broken && seq > run.acked {
            run.acked = seq;
        }
    }
}

impl Outbox for State {
    type Item = Item;
    fn take(&mut self) -> Option<Item> {
        self.pop()
    }
    fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
    fn clear(&mut self) {
        self.queue.clear();
        self.queued_bytes = 0;
    }
}

type Shared = Monitor<Sending<State>>;

/// The one client of a forwarder, built by the sender thread (or by
/// [`ServiceForwarder::finish`] if it comes first) and held by whoever is
/// sending: requests go out one at a time, in order, with one set of
/// credentials however often they are refreshed.
type ClientSlot = Mutex<Option<Client>>;

/// The recording-service sink of a [`super::Recorder`].
pub(crate) struct ServiceForwarder {
    shared: Arc<Shared>,
    client: Arc<ClientSlot>,
    /// To build the client on the finishing thread, if the sender thread
    /// has not yet.
    cfg: ServiceConfig,
    /// The service, fit for a message.
    label: String,
}

impl fmt::Debug for ServiceForwarder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServiceForwarder")
    }
}

impl ServiceForwarder {
    /// The remote recorder the environment asks for, if any (see
    /// [`ServiceConfig::resolve`]). Problems are logged, never fatal.
    pub(crate) fn from_env() -> Option<ServiceForwarder> {
        match ServiceConfig::resolve() {
            Ok(Some(cfg)) => ServiceForwarder::start(cfg),
            Ok(None) => None,
            Err(msg) => {
                log::warn!("runs are not sent to the recording service: {msg}");
                None
            }
        }
    }

    /// Starts the sender thread for `cfg`.
    pub(crate) fn start(cfg: ServiceConfig) -> Option<ServiceForwarder> {
        Self::start_held(cfg, None)
    }

    /// [`ServiceForwarder::start`]; with `hold`, the sender thread waits
    /// for it before doing anything (a test's stand-in for a sender that
    /// a busy CPU does not run).
    pub(super) fn start_held(
        cfg: ServiceConfig,
        hold: Option<std::sync::mpsc::Receiver<()>>,
    ) -> Option<ServiceForwarder> {
        let shared = Arc::new(Monitor::new(Sending::new(State::default())));
        let label = urls::display(&cfg.base);
        let client: Arc<ClientSlot> = Arc::new(Mutex::new(None));
        let (worker, worker_client, worker_cfg) =
            (Arc::clone(&shared), Arc::clone(&client), cfg.clone());
        let spawned = thread::Builder::new()
            .name("bir-remote".into())
            .spawn(move || {
                crate::observe::give_way_to_the_relay();
                if let Some(hold) = hold {
                    let _ = hold.recv();
                }
                // The client (and its TLS setup) is built here, off the
                // proxy's start-up path.
                let ran = catch_unwind(AssertUnwindSafe(|| {
                    let built = Client::new(worker_cfg);
                    crate::locks::lock(&worker_client).get_or_insert(built);
                    send_loop(&worker, &worker_client);
                }));
                if ran.is_err() {
                    log::error!("sending to the recording service stopped after an internal error; runs stay in the local store");
                }
                sender::sender_gone(&worker);
            });
        match spawned {
            Ok(_) => Some(ServiceForwarder {
                shared,
                client,
                cfg,
                label,
            }),
            Err(err) => {
                log::warn!(
                    "runs are not sent to the recording service: cannot start a thread: {err}"
                );
                None
            }
        }
    }
}

/// Sends what is queued; the background catch-up ([`super::sync::CatchUp`])
/// begins once a record of this session reached the service.
fn send_loop(shared: &Shared, client: &ClientSlot) {
    let mut catch_up = CatchUpState::Waiting;
    loop {
        let when = |st: &State, _: Instant| {
            if st.delivered_any && !st.finishing && !catch_up.is_over() {
                CatchUpWhen::Now
            } else {
                CatchUpWhen::Not
            }
        };
        let Some(work) = next_work(shared, when) else {
            return;
        };
        // Held while a request is out: the finishing thread sends after it.
        let mut held = crate::locks::lock(client);
        let Some(client) = held.as_mut() else {
            return;
        };
        match work {
            Work::Live(item) => send_live(shared, client, item, None),
            Work::CatchUp => catch_up = catch_up_turn(shared, client, catch_up),
        }
    }
}

/// Sends one queued item, with its one retry; `until`: the retry is given
/// up rather than waited for past it (the forwarder is finishing).
fn send_live(shared: &Shared, client: &mut Client, item: Item, until: Option<Instant>) {
    let mut sleep = |d: Duration, why: &SendFailure| {
        let mut st = shared.lock();
        if let Some(run) = st.runs.get_mut(&item.run_id) {
            run.last_failure = Some(why.detail.clone());
        }
        if until.is_some_and(|until| Instant::now() + d > until) {
            return false;
        }
        let st = shared.wait_timeout_while(st, d, |s| !s.pace.stop);
        !st.pace.stop
    };
    let result = client.deliver(&item.req, &mut sleep);
    let mut st = shared.lock();
    st.settle(&item.run_id, item.seq, result.is_ok());
    let paused = st
        .pace
        .settle(result.is_ok(), |n| jittered(cool_down_for(n)));
    match result {
        Ok(()) => st.delivered_any = true,
        Err(failure) => {
            let pause = paused.unwrap_or_default();
            let run = st.runs.entry(item.run_id.clone()).or_default();
            run.last_failure = Some(failure.detail.clone());
            if !run.warned {
                run.warned = true;
                log::warn!(
                    "recording service {}: {failure}. Run {} stays in the local store; `bir sync` sends it later. Sending pauses for {}s",
                    urls::display(client.base()),
                    item.run_id,
                    pause.as_secs()
                );
            }
        }
    }
    shared.notify_all();
}

/// One run of the background catch-up. It is not `busy` work: the end of
/// the session does not wait for it (an interrupted run is sent again
/// later, under the same ids).
fn catch_up_turn(
    shared: &Shared,
    client: &mut Client,
    state: CatchUpState<super::sync::CatchUp>,
) -> CatchUpState<super::sync::CatchUp> {
    state.turn(
        super::sync::CatchUp::begin,
        |running| {
            let live: HashSet<String> = shared.lock().runs.keys().cloned().collect();
            running.send_next(client, &|id| live.contains(id))
        },
        |failure| {
            log::debug!(
                "catching up on earlier runs stopped: {failure}; `bir sync` sends them later"
            )
        },
    )
}

impl Forwarder for ServiceForwarder {
    fn forward(&mut self, run_id: &str, record: &Record) {
        let Some(req) = request_for(run_id, record) else {
            return;
        };
        let mut st = self.shared.lock();
        if st.pace.stop {
            return;
        }
        st.push(Item {
            run_id: run_id.to_owned(),
            seq: record.seq,
            req,
        });
        self.shared.notify_all();
    }

    fn acked(&self, run_id: &str) -> u64 {
        self.shared.lock().runs.get(run_id).map_or(0, |r| r.acked)
    }

    /// Sends what is still queued on the calling thread (see
    /// [`ServiceForwarder::send_the_rest`]), then waits for what the
    /// sender has in flight, within `deadline`.
    fn finish(&mut self, deadline: Duration) {
        let until = Instant::now() + deadline;
        self.send_the_rest(until);
        let mut st = sender::wait_settled(&self.shared, self.shared.lock(), until);
        // The process may end now: the one warning for each run that did
        // not get through, if the sender has not given it yet.
        for (run_id, run) in st.runs.iter_mut() {
            if run.acked < run.forwarded && !run.warned {
                run.warned = true;
                log::warn!(
                    "recording service {}: run {run_id} was not fully delivered ({}). It stays in the local store; `bir sync` sends it later",
                    self.label,
                    run.last_failure
                        .as_deref()
                        .unwrap_or("still sending when the session ended")
                );
            }
        }
    }
}

impl ServiceForwarder {
    /// The end of the run: the caller sends what is queued itself, in
    /// order, after the item the sender has in flight (the client is
    /// held while a request is out). The sender thread steps back for the
    /// relay (nice 19), and on a busy CPU it may not run again within the
    /// deadline, while nothing is left to step back for: the caller (the
    /// proxy's finishing thread) runs at normal priority. What is not sent
    /// by `until` stays in the journal for `bir sync`.
    fn send_the_rest(&self, until: Instant) {
        let mut rest = VecDeque::new();
        {
            let mut st = self.shared.lock();
            if st.pace.stop {
                return;
            }
            st.finishing = true;
            // The item the sender took goes out first.
            let left = until.saturating_duration_since(Instant::now());
            st = self
                .shared
                .wait_timeout_while(st, left, |s| s.pace.busy && !s.pace.stop);
            if st.pace.busy || st.pace.stop {
                return;
            }
            while let Some(item) = st.pop() {
                rest.push_back(item);
            }
        }
        if rest.is_empty() {
            return;
        }
        let mut held = match try_lock_until(&self.client, until, Duration::from_millis(1)) {
            Ok(held) => held,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        let client = held.get_or_insert_with(|| Client::new(self.cfg.clone()));
        for item in rest {
            if !self.may_send_now(until) {
                return;
            }
            send_live(&self.shared, client, item, Some(until));
        }
    }

    /// Whether the finishing thread sends its next item: time is left, and
    /// the service is not in a cool-down after a failure.
    fn may_send_now(&self, until: Instant) -> bool {
        let now = Instant::now();
        let st = self.shared.lock();
        now < until && !st.pace.stop && st.pace.cooling(now).is_none()
    }
}

impl Drop for ServiceForwarder {
    fn drop(&mut self) {
        sender::stop(&self.shared);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_jittered_up_to_a_fifth() {
        let d = Duration::from_secs(5);
        let waits: Vec<Duration> = (0..50).map(|_| jittered(d)).collect();
        assert!(
            waits.iter().all(|w| *w >= d && *w <= d + d / 5),
            "{waits:?}"
        );
        let distinct: std::collections::HashSet<_> = waits.iter().collect();
        assert!(distinct.len() > 10, "{waits:?}");
    }

    fn item(run: &str, seq: u64, bytes: usize) -> Item {
        Item {
            run_id: run.into(),
            seq,
            req: WireRequest {
                method: "POST",
                path: "/x".into(),
                body: vec![b' '; bytes],
                optional: false,
            },
        }
    }

    #[test]
    fn acknowledgements_stop_at_the_first_gap() {
        let mut st = State::default();
        for seq in 1..=4 {
            st.push(item("a", seq, 1));
        }
        st.settle("a", 1, true);
        st.settle("a", 2, true);
        assert_eq!(st.runs["a"].acked, 2);
        st.settle("a", 3, false);
        st.settle("a", 4, true);
        assert_eq!(st.runs["a"].acked, 2, "4 was delivered, 3 was not");
        // A run whose first records the forwarder never saw acks nothing.
        st.push(item("b", 5, 1));
        st.settle("b", 5, true);
        assert_eq!(st.runs["b"].acked, 0);
    }

    #[test]
    fn overflow_drops_the_oldest_and_breaks_its_run() {
        let mut st = State::default();
        for seq in 1..=(MAX_QUEUED as u64 + 1) {
            st.push(item("a", seq, 1));
        }
        assert_eq!(st.queue.len(), MAX_QUEUED);
        assert_eq!(st.dropped, 1);
        assert_eq!(st.queue.front().map(|i| i.seq), Some(2));
        assert!(st.runs["a"].broken);
        // Bytes bound too.
        let mut st = State::default();
        st.push(item("a", 1, MAX_QUEUED_BYTES));
        st.push(item("a", 2, 10));
        assert_eq!(st.queue.len(), 1);
        assert_eq!(st.queued_bytes, 10);
    }
}
