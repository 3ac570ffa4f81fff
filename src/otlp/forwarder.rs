//! The recorder's OTLP sink: a [`Forwarder`] that gathers each run's
//! records as they are journaled and, when the run finishes, exports it
//! from a bounded queue on a thread of its own (never the relay's, never
//! the observer's: `forward` only clones and queues).
//!
//! Nothing is lost when the receiver is down: a run is marked exported
//! only once the receiver took it, and everything is in the journal, so
//! what did not go out (a failure, a queue overflow, a process that ended
//! before the export did) goes later with `bir runs export --otlp`, or by
//! the background catch-up that this thread runs whenever it is idle.

use std::collections::{HashMap, HashSet, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::catchup::{CatchUp, export_run};
use super::client::Client;
use super::config::OtlpConfig;
use crate::locks::Monitor;
use crate::record::Forwarder;
use crate::record::model::{Record, RunEvent};
use crate::record::sender::{
    self, CatchUpState, CatchUpWhen, Outbox, Sending, Work, cool_down_for, next_work,
};
use crate::record::store::{LoadedRun, Store};

/// Finished runs waiting for export, at most.
const MAX_QUEUED_RUNS: usize = 32;
/// Records gathered for one run, at most; a longer run is left to the
/// catch-up (its journal has it all).
const MAX_RUN_RECORDS: usize = 100_000;
/// The catch-up starts after the thread has been idle this long: a short
/// proxy session never spends its time on earlier runs.
const CATCH_UP_AFTER: Duration = Duration::from_millis(1500);
/// The least a finishing run waits for its export. A run is exported when
/// it ends, so the export happens while the process is on its way out; the
/// recorder's usual 300 ms is too short for that on a loaded machine (the
/// export thread runs at low priority). Only a run actually being sent is
/// waited for: a receiver that refuses connections puts the thread in a
/// cool-down, which ends the wait at once. What does not make it is left
/// to the catch-up.
const FINISH_AT_LEAST: Duration = Duration::from_secs(2);

struct Item {
    run_id: String,
    records: Vec<Record>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Item>,
    /// The process is ending: no more waiting between tries (what did not
    /// go out is left to the catch-up).
    finishing: bool,
    /// Runs of this process: the catch-up leaves them to the live path.
    live: HashSet<String>,
    /// The one warning of this process was given.
    warned: bool,
    /// Runs exported by this thread (for tests and the debug log).
    exported: u64,
}

impl Outbox for State {
    type Item = Item;
    fn take(&mut self) -> Option<Item> {
        self.queue.pop_front()
    }
    fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
    fn clear(&mut self) {
        self.queue.clear();
    }
}

type Shared = Monitor<Sending<State>>;

/// A run being gathered.
#[derive(Default)]
struct Gathering {
    records: Vec<Record>,
    /// Too long, or its start was not seen: left to the catch-up.
    given_up: bool,
}

pub(crate) struct OtlpForwarder {
    shared: Arc<Shared>,
    runs: HashMap<String, Gathering>,
    content: bool,
}

impl std::fmt::Debug for OtlpForwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OtlpForwarder")
    }
}

impl OtlpForwarder {
    /// The exporter the environment asks for, if any; a configuration
    /// problem is logged (once, here) and export stays off.
    pub(crate) fn from_env() -> Option<OtlpForwarder> {
        let cfg = OtlpForwarder::config_from_env()?;
        OtlpForwarder::start(cfg, Store::open_default().ok())
    }

    /// The export's configuration from the environment; `None` when export
    /// is off, or asked for but impossible (said once, as a warning).
    pub(crate) fn config_from_env() -> Option<OtlpConfig> {
        match OtlpConfig::from_env() {
            Ok(cfg) => cfg,
            Err(msg) => {
                log::warn!("runs are not exported to OpenTelemetry: {msg}");
                None
            }
        }
    }

    /// Starts the export thread; `store` is where exports are marked and
    /// the catch-up looks (none: no marks, no catch-up).
    pub(crate) fn start(cfg: OtlpConfig, store: Option<Store>) -> Option<OtlpForwarder> {
        let shared = Arc::new(Monitor::new(Sending::new(State::default())));
        let content = cfg.map.content;
        let worker = Arc::clone(&shared);
        let spawned = thread::Builder::new()
            .name("bir-otlp".into())
            .spawn(move || {
                // Not lowered in priority like the recorder's threads: this
                // one works when a run ends, i.e. when its relay is done,
                // and then has seconds at most before the process exits. On
                // a saturated machine a niced thread got no CPU in that
                // time and the export was left to the catch-up every time.
                // While calls are relayed it only waits on its condvar
                // (gathering a run's records is the observer's work).
                let ran = catch_unwind(AssertUnwindSafe(|| {
                    let client = Client::new(cfg);
                    send_loop(&worker, &client, store);
                }));
                if ran.is_err() {
                    log::error!("OpenTelemetry export stopped after an internal error; runs stay in the local store for `bir runs export --otlp`");
                }
                sender::sender_gone(&worker);
            });
        match spawned {
            Ok(_) => Some(OtlpForwarder {
                shared,
                runs: HashMap::new(),
                content,
            }),
            Err(err) => {
                log::warn!("runs are not exported to OpenTelemetry: cannot start a thread: {err}");
                None
            }
        }
    }

    /// How many runs this forwarder's thread exported (tests).
    #[cfg(test)]
    fn exported(&self) -> u64 {
        self.shared.lock().exported
    }
}

/// A copy of `record` with only what the export uses: without content,
/// tool arguments and results are left out (prompts and answers stay, for
/// their length).
fn trimmed(record: &Record, content: bool) -> Record {
    let mut r = record.clone();
    if !content && let RunEvent::Step(s) = &mut r.event {
        if s.step_type != crate::record::model::StepType::FinalAnswer {
            s.output = None;
        }
        s.input = None;
        s.context = None;
    }
    r
}

/// Exports finished runs as they are queued; the catch-up takes its turns
/// once the thread has been idle for [`CATCH_UP_AFTER`].
fn send_loop(shared: &Shared, client: &Client, store: Option<Store>) {
    let mut catch_up = if store.is_some() {
        CatchUpState::Waiting
    } else {
        CatchUpState::Over
    };
    let mut idle_since = Instant::now();
    loop {
        let when = |_: &State, now: Instant| {
            if catch_up.is_over() {
                return CatchUpWhen::Not;
            }
            let idle = now.duration_since(idle_since);
            if idle >= CATCH_UP_AFTER {
                CatchUpWhen::Now
            } else {
                CatchUpWhen::After(CATCH_UP_AFTER - idle)
            }
        };
        match next_work(shared, when) {
            None => return,
            Some(Work::Live(item)) => {
                export_live(shared, client, store.as_ref(), item);
                idle_since = Instant::now();
            }
            Some(Work::CatchUp) => {
                catch_up = catch_up_turn(shared, client, store.as_ref(), catch_up);
            }
        }
    }
}

fn export_live(shared: &Shared, client: &Client, store: Option<&Store>, item: Item) {
    let mut sleep = |d: Duration| {
        let st = shared.lock();
        let st = shared.wait_timeout_while(st, d, |s| !s.pace.stop && !s.finishing);
        !st.pace.stop && !st.finishing
    };
    let run = LoadedRun {
        records: item.records,
        ..LoadedRun::default()
    };
    let result = export_run(client, store, &item.run_id, &run, &mut sleep);
    let mut st = shared.lock();
    st.pace.settle(result.is_ok(), cool_down_for);
    match result {
        Ok(sent) => {
            st.exported += 1;
            log::debug!("run {} exported ({} span(s))", item.run_id, sent.spans);
        }
        Err(failure) => {
            if !st.warned {
                st.warned = true;
                log::warn!(
                    "{failure}. Run {} stays in the local store, not exported; `bir runs export --otlp {}` or a later session sends it",
                    item.run_id,
                    item.run_id
                );
            }
        }
    }
    shared.notify_all();
}

/// One run of the catch-up; a failure ends it for this process.
fn catch_up_turn(
    shared: &Shared,
    client: &Client,
    store: Option<&Store>,
    state: CatchUpState<CatchUp>,
) -> CatchUpState<CatchUp> {
    state.turn(
        || store.cloned().and_then(CatchUp::begin),
        |running| {
            let live: HashSet<String> = shared.lock().live.clone();
            // A catch-up never waits while a run of this session is queued.
            let mut sleep = |d: Duration| {
                let st = shared.lock();
                let st = shared.wait_timeout_while(st, d, |s| {
                    !s.pace.stop && !s.finishing && s.queue.is_empty()
                });
                !st.pace.stop && !st.finishing && st.queue.is_empty()
            };
            running.export_next(client, &|id| live.contains(id), &mut sleep)
        },
        |failure| log::debug!("catching up on earlier runs stopped: {failure}"),
    )
}

impl Forwarder for OtlpForwarder {
    fn forward(&mut self, run_id: &str, record: &Record) {
        if matches!(record.event, RunEvent::RemoteAck(_)) {
            return;
        }
        let finished = matches!(record.event, RunEvent::RunFinished(_));
        // A run whose start this forwarder did not see cannot be exported
        // from what it gathered.
        let run = self
            .runs
            .entry(run_id.to_owned())
            .or_insert_with(|| Gathering {
                given_up: !matches!(record.event, RunEvent::RunStarted(_)),
                ..Gathering::default()
            });
        if run.records.is_empty() && !run.given_up {
            self.shared.lock().live.insert(run_id.to_owned());
        }
        if !run.given_up {
            if run.records.len() >= MAX_RUN_RECORDS {
                run.given_up = true;
                run.records = Vec::new();
            } else {
                run.records.push(trimmed(record, self.content));
            }
        }
        if !finished {
            return;
        }
        let Some(run) = self.runs.remove(run_id) else {
            return;
        };
        let mut st = self.shared.lock();
        st.live.remove(run_id);
        if run.given_up || st.pace.stop {
            return;
        }
        st.queue.push_back(Item {
            run_id: run_id.to_owned(),
            records: run.records,
        });
        while st.queue.len() > MAX_QUEUED_RUNS {
            // The oldest waits in the journal for the catch-up.
            st.queue.pop_front();
        }
        self.shared.notify_all();
    }

    /// The OTLP sink keeps its own record of what went out (the ledger);
    /// it acknowledges nothing in the journal's `remote_ack`.
    fn acked(&self, _run_id: &str) -> u64 {
        0
    }

    fn notes_remote_acks(&self) -> bool {
        false
    }

    fn finish(&mut self, deadline: Duration) {
        let until = Instant::now() + deadline.max(FINISH_AT_LEAST);
        let mut st = self.shared.lock();
        st.finishing = true;
        self.shared.notify_all();
        drop(sender::wait_settled(&self.shared, st, until));
    }
}

impl Drop for OtlpForwarder {
    fn drop(&mut self) {
        sender::stop(&self.shared);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_content_arguments_and_results_are_not_kept() {
        let step: crate::record::model::Step = serde_json::from_value(serde_json::json!({
            "id": "s", "stepIndex": 1, "type": "tool_response", "qualifiedName": "q",
            "serverName": "s", "toolName": "t", "startedAt": "x",
            "input": {"secret": 1}, "output": {"content": []}, "error": {"code": -1}
        }))
        .expect("step");
        let rec = Record {
            seq: 1,
            event: RunEvent::Step(step),
        };
        let RunEvent::Step(kept) = trimmed(&rec, false).event else {
            panic!("step")
        };
        assert!(kept.input.is_none() && kept.output.is_none());
        assert!(
            kept.error.is_some(),
            "the error's code and message name the failure"
        );
        let RunEvent::Step(all) = trimmed(&rec, true).event else {
            panic!("step")
        };
        assert!(all.input.is_some() && all.output.is_some());
    }

    #[test]
    fn a_run_not_seen_from_its_start_is_left_to_the_catch_up() {
        let cfg = OtlpConfig::resolve(&|k: &str| {
            (k == "BIR_OTLP_ENDPOINT").then(|| "http://127.0.0.1:9".to_owned())
        })
        .expect("ok")
        .expect("on");
        let mut f = OtlpForwarder::start(cfg, None).expect("thread");
        let finish = Record {
            seq: 7,
            event: RunEvent::RunFinished(crate::record::model::RunFinish::default()),
        };
        f.forward("run_x", &finish);
        assert!(f.shared.lock().queue.is_empty());
        assert_eq!(f.exported(), 0);
    }
}
