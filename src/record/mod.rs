//! Recording: turning what the proxy observed into runs.
//!
//! Every payload goes through one choke point, [`Preparation`]
//! (`preparation.rs`, built on `payload.rs`, which the bound tier's engine
//! shares): parse a copy → stub binaries → redact → cap. It yields
//! prepared items (a server snapshot, or one call's two steps) and writes
//! nothing; the proxy's report path decides where they go — a
//! [`LocalRun`] here (Tier 2, "standalone"), or the recorder daemon
//! (`crate::proxy::binding`, Tier 1). So the journal, the daemon and every
//! other sink hold redacted data only. If redaction fails (panics), the
//! step is stored without bodies and marked `withheld: "redaction_failed"`
//! — never raw.
//!
//! The [`Recorder`] is the standalone observer [`Sink`]: it runs on the
//! observer's worker thread, never on the relay's, and owns one run per
//! proxy process: opened at the first recorded `tools/call` (so idle
//! servers leave no empty runs), finished when the proxy exits.
//!
//! ```text
//! StepReport ─▶ Preparation ─▶ ProxyItem ─▶ LocalRun ─▶ LocalWriter (journal, fsync in batches)
//! exchanges (initialize, tools/list) ─▶ ServerSnapshot ─┘
//! ```

pub(crate) mod calls;
pub(crate) mod catchup;
pub(crate) mod export;
pub(crate) mod index;
pub(crate) mod journal;
pub(crate) mod layout;
pub(crate) mod model;
pub(crate) mod payload;
pub(crate) mod preparation;
pub(crate) mod prices;
pub(crate) mod sender;
pub(crate) mod store;
pub(crate) mod truncate;
pub(crate) mod writer;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::observe::step::StepReport;
use crate::observe::{Direction, Sink};
use crate::redact::RedactConfig;
use crate::time;
use model::{Record, RunEvent, RunFinish, RunHeader, RunMetadata, RunMetrics, ServerSnapshot};
pub(crate) use preparation::Preparation;
pub(crate) use preparation::ProxyItem;
use store::Store;
use writer::LocalWriter;

/// How long a finishing run waits for its forwarders.
const FORWARD_DEADLINE: Duration = Duration::from_millis(300);

/// How the recorder is set up (resolved once from the environment).
#[derive(Debug, Clone)]
pub(crate) struct RecorderConfig {
    pub server_name: Arc<str>,
    pub session_id: Option<Arc<str>>,
    /// Cap per stored payload (`BIR_MAX_PAYLOAD_BYTES`, default 64 KiB).
    pub payload_cap: usize,
    /// Keep at most this many finished runs (`BIR_RUNS_KEEP`).
    pub keep_runs: Option<usize>,
    /// Delete finished runs older than this (`BIR_RUNS_MAX_AGE_DAYS`).
    pub max_age: Option<Duration>,
    pub redact: RedactConfig,
    /// Values the proxy itself holds as credentials (the headers it sends a
    /// remote upstream): redacted wherever they turn up, in any encoding.
    pub known_secrets: Vec<String>,
    /// The server's command digest, stamped on its snapshots (see
    /// `ServerSnapshot::command_digest`).
    pub command_digest: Option<String>,
    /// How the proxy reaches the server (`ServerSnapshot::transport`):
    /// `pipe` or `tcp`; `None` where no proxy set it.
    pub transport: Option<&'static str>,
    /// A remote upstream's `Mcp-Session-Id`, as its transport learns it.
    pub upstream_session: Option<crate::observe::session::UpstreamSession>,
    /// The run's id, when the proxy chose it at start (it names the trace
    /// of the `traceparent`s it adds before the run is opened); else the
    /// run draws one when it opens.
    pub run_id: Option<String>,
}

impl RecorderConfig {
    /// `None` when recording is switched off (`BIR_RECORDER=off`).
    pub(crate) fn from_env(
        server_name: Arc<str>,
        session_id: Option<Arc<str>>,
    ) -> Option<RecorderConfig> {
        if std::env::var("BIR_RECORDER").is_ok_and(|v| matches!(v.trim(), "off" | "0" | "none")) {
            return None;
        }
        let num = |name: &str| -> Option<u64> {
            let raw = std::env::var(name).ok()?;
            match raw.trim().parse::<u64>() {
                Ok(n) => Some(n),
                Err(_) => {
                    log::warn!("{name}={raw:?} is not a number; ignored");
                    None
                }
            }
        };
        Some(RecorderConfig {
            server_name,
            session_id,
            payload_cap: num("BIR_MAX_PAYLOAD_BYTES")
                .map(|n| n.max(1024) as usize)
                .unwrap_or(truncate::DEFAULT_CAP),
            keep_runs: num("BIR_RUNS_KEEP").map(|n| n as usize),
            max_age: num("BIR_RUNS_MAX_AGE_DAYS").map(|d| Duration::from_secs(d * 86_400)),
            redact: RedactConfig {
                legacy_substring_keys: std::env::var("BIR_REDACT_LEGACY_KEYS")
                    .is_ok_and(|v| v == "1"),
            },
            known_secrets: Vec::new(),
            command_digest: None,
            transport: None,
            upstream_session: None,
            run_id: None,
        })
    }
}

#[cfg(test)]
impl RecorderConfig {
    /// The recorder as unit tests set it up: server `peer` in session
    /// `sess`, 64 KiB payloads, nothing else configured.
    pub(crate) fn for_tests() -> RecorderConfig {
        RecorderConfig {
            server_name: Arc::from("peer"),
            session_id: Some(Arc::from("sess")),
            payload_cap: 65536,
            keep_runs: None,
            max_age: None,
            redact: RedactConfig::default(),
            known_secrets: Vec::new(),
            command_digest: None,
            transport: None,
            upstream_session: None,
            run_id: None,
        }
    }
}

/// A destination for records besides the local journal: the recording
/// service (and, later, an OpenTelemetry exporter).
///
/// Contract: `forward` is called on the observer thread, in `seq` order,
/// after the record was handed to the local journal; it must not block
/// (queue and send on a thread of your own). A record the destination did
/// not acknowledge stays in the local journal, and `bir sync` sends it
/// later — so a forwarder may drop its queue when it must, never the data.
pub(crate) trait Forwarder: Send {
    fn forward(&mut self, run_id: &str, record: &Record);
    /// The highest `seq` of this run the destination acknowledged (0: none).
    fn acked(&self, run_id: &str) -> u64;
    /// The run is over: deliver what is queued within `deadline`.
    fn finish(&mut self, deadline: Duration);
    /// Whether [`Forwarder::acked`] counts toward the journal's
    /// `remote_ack` (the recording service's bookkeeping, which `bir sync`
    /// reads). A sink that keeps its own record of what went out (the
    /// OpenTelemetry exporter) says no, so it never holds that back.
    fn notes_remote_acks(&self) -> bool {
        true
    }
}

/// The local Tier 2 run: one journal in `$BIR_HOME/runs/`, opened at the
/// first call it is given (so idle servers leave no empty runs) and
/// finished when the proxy exits. One of the proxy's report paths; the
/// other sends the same prepared items to the recorder daemon
/// (`crate::proxy::binding`).
pub(crate) struct LocalRun {
    cfg: RecorderConfig,
    store: Option<Store>,
    writer: Option<LocalWriter>,
    forwarders: Vec<Box<dyn Forwarder>>,
    run_id: Option<String>,
    /// The snapshot last written to the run: its tools digest and
    /// session id (a renewed session is written again).
    written_digest: Option<(String, Option<String>)>,
    /// The latest snapshot, written when the run opens.
    snapshot: Option<ServerSnapshot>,
    next_seq: u64,
    next_step: u64,
    metrics: RunMetrics,
    withheld: u64,
    /// Who made the run, when not the proxy (see [`Origin`]).
    origin: Option<Origin>,
}

/// A run bir made itself rather than observed as a proxy: `bir replay`
/// and `bir verify` (`bir-replay`) and `bir mock` (`bir-mock`). The
/// metadata's `recorder` says so, so readers can tell such a run from a
/// recording of the agent's own calls.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub recorder: String,
    /// The scenario file or run that was replayed or served.
    pub replay_of: Option<String>,
    /// Which of bir's commands made the run.
    pub made_by: model::MadeBy,
    /// Every server the run's calls went to.
    pub servers: Vec<String>,
}

impl LocalRun {
    /// A run writing to `store` (or to nowhere, if the store could not be
    /// opened: then it still counts, and says so once).
    pub(crate) fn new(cfg: RecorderConfig, store: Option<Store>) -> LocalRun {
        LocalRun {
            cfg,
            store,
            writer: None,
            forwarders: Vec::new(),
            run_id: None,
            written_digest: None,
            snapshot: None,
            next_seq: 1,
            next_step: 1,
            metrics: RunMetrics::default(),
            withheld: 0,
            origin: None,
        }
    }

    /// Marks the run as made by `origin` (before its first call).
    pub(crate) fn set_origin(&mut self, origin: Origin) {
        self.origin = Some(origin);
    }

    /// The id of the run once its first call opened it.
    pub(crate) fn id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// Adds a destination for this run's records (see [`Forwarder`]).
    pub(crate) fn add_forwarder(&mut self, forwarder: Box<dyn Forwarder>) {
        self.forwarders.push(forwarder);
    }

    /// The id of the run, once it exists.
    #[cfg(test)]
    pub(crate) fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// How many calls the run holds.
    #[cfg(test)]
    pub(crate) fn tool_calls(&self) -> u64 {
        self.metrics.tool_calls
    }

    /// Writes prepared items: a snapshot (if its tools digest is new to
    /// the run) or a call (renumbered into this run's steps).
    pub(crate) fn write(&mut self, prep: &Preparation, item: ProxyItem) {
        match item {
            ProxyItem::Snapshot(snapshot) => {
                self.snapshot = Some(*snapshot);
                self.write_snapshot_if_changed();
            }
            ProxyItem::Call { selected, response } => {
                self.ensure_run(prep, &selected.started_at);
                let (mut selected, mut response) = (*selected, *response);
                selected.step_index = self.next_step;
                response.step_index = self.next_step + 1;
                self.next_step += 2;
                if selected.withheld.is_some() || response.withheld.is_some() {
                    self.withheld += 1;
                }
                let duration = response.duration_ms.unwrap_or(0.0);
                self.metrics.tool_calls += 1;
                self.metrics.errors += u64::from(response.is_error);
                self.metrics.total_tool_ms += duration;
                self.emit(RunEvent::Step(selected));
                self.emit(RunEvent::Step(response));
            }
        }
    }

    fn emit(&mut self, event: RunEvent) {
        let record = Record {
            seq: self.next_seq,
            event,
        };
        self.next_seq += 1;
        if let Some(writer) = self.writer.as_mut()
            && let Err(err) = writer.write_json(record.seq, &record)
        {
            log::warn!("a record could not be serialised: {err}");
        }
        let local_only = matches!(record.event, RunEvent::RemoteAck(_));
        if let Some(run_id) = self.run_id.as_deref().filter(|_| !local_only) {
            for forwarder in &mut self.forwarders {
                forwarder.forward(run_id, &record);
            }
        }
    }

    /// Opens the run at the first recorded call, dated from that call.
    fn ensure_run(&mut self, prep: &Preparation, first_call_at: &str) {
        if self.run_id.is_some() {
            return;
        }
        let id = self.cfg.run_id.clone().unwrap_or_else(model::new_run_id);
        if let Some(store) = &self.store {
            if self.cfg.keep_runs.is_some() || self.cfg.max_age.is_some() {
                match store.apply_retention(self.cfg.keep_runs, self.cfg.max_age) {
                    Ok(0) => {}
                    Ok(n) => log::debug!("retention removed {n} old run(s)"),
                    Err(err) => log::debug!("retention skipped: {err}"),
                }
            }
            self.writer = Some(LocalWriter::new(store.clone(), id.clone()));
        }
        let metadata = RunMetadata {
            recorder: "bir".into(),
            tier: "standalone".into(),
            host: prep.host().cloned(),
            wrapped_servers: vec![self.cfg.server_name.to_string()],
            server_info: prep.snapshot().and_then(|s| s.server_info.clone()),
            protocol_version: prep.protocol_version().cloned(),
            cwd: std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            session_id: self.cfg.session_id.as_deref().map(str::to_owned),
            bir_version: env!("CARGO_PKG_VERSION").into(),
            lossy: false,
            model: None,
            note: None,
            replay_of: None,
            made_by: None,
        };
        let metadata = match &self.origin {
            Some(o) => RunMetadata {
                recorder: o.recorder.clone(),
                wrapped_servers: o.servers.clone(),
                replay_of: o.replay_of.clone(),
                made_by: Some(o.made_by),
                ..metadata
            },
            None => metadata,
        };
        self.run_id = Some(id.clone());
        self.emit(RunEvent::RunStarted(RunHeader {
            id,
            started_at: first_call_at.to_owned(),
            input: None,
            metadata,
        }));
        self.write_snapshot_if_changed();
    }

    fn write_snapshot_if_changed(&mut self) {
        if self.run_id.is_none() {
            return;
        }
        let Some(snapshot) = &self.snapshot else {
            return;
        };
        let written = snapshot.identity();
        if self.written_digest.as_ref() == Some(&written) {
            return;
        }
        self.written_digest = Some(written);
        let snapshot = snapshot.clone();
        self.emit(RunEvent::ServerSnapshot(snapshot));
    }

    /// Asks the journal to fsync soon (the observer is momentarily idle).
    pub(crate) fn flush(&mut self) {
        if let Some(writer) = self.writer.as_mut() {
            writer.sync_soon();
        }
    }

    /// Everything written is on disk and nothing waits for a retry (see
    /// [`crate::observe::Sink::settled`]).
    pub(crate) fn settled(&self) -> bool {
        self.writer.as_ref().is_none_or(LocalWriter::settled)
    }

    /// Opens the run at its end when observations were lost and no call
    /// reached it (the only call's answer was still being written to a
    /// host that stopped reading, say): a session that lost what it saw
    /// leaves a run saying so (`lossy`), never nothing at all.
    pub(crate) fn open_for_loss(&mut self, prep: &Preparation, dropped: u64) {
        if dropped > 0 && self.run_id.is_none() {
            self.ensure_run(prep, &time::rfc3339(SystemTime::now()));
        }
    }

    /// Ends the run (if one was opened); `dropped` observations were lost
    /// before they reached it.
    pub(crate) fn finish(&mut self, dropped: u64) {
        if self.run_id.is_none() {
            return;
        }
        let lost = self.writer.as_mut().map_or(0, LocalWriter::lost_by_now);
        let finish = RunFinish {
            finished_at: time::rfc3339(SystemTime::now()),
            output: None,
            metrics: self.metrics.clone(),
            lossy: dropped > 0 || lost > 0,
            dropped: dropped + lost,
            reason: None,
            model: None,
        };
        self.emit(RunEvent::RunFinished(finish));
        if let Some(writer) = self.writer.as_mut() {
            writer.sync();
        }
        // What the destinations acknowledged is noted locally, so that
        // `bir sync` sends only the rest.
        let run_id = self.run_id.clone().unwrap_or_default();
        let mut acked = Vec::new();
        for forwarder in &mut self.forwarders {
            forwarder.finish(FORWARD_DEADLINE);
            if forwarder.notes_remote_acks() {
                acked.push(forwarder.acked(&run_id));
            }
        }
        if let Some(up_to) = acked.into_iter().min().filter(|n| *n > 0) {
            let at = time::rfc3339(SystemTime::now());
            self.emit(RunEvent::RemoteAck(model::RemoteAck { up_to, at }));
        }
        if let Some(writer) = self.writer.as_mut() {
            writer.sync();
            writer.report_if_degraded();
        }
    }
}

/// The Tier 2 recorder: one local run per proxy process, an observer
/// [`Sink`] that prepares what it is given and writes it to a [`LocalRun`].
pub(crate) struct Recorder {
    prep: Preparation,
    run: LocalRun,
    /// Reused between observations.
    items: Vec<ProxyItem>,
}

impl Recorder {
    /// A recorder over a run set up by the caller.
    pub(crate) fn from_parts(prep: Preparation, run: LocalRun) -> Recorder {
        Recorder {
            prep,
            run,
            items: Vec::new(),
        }
    }

    fn write_items(&mut self) {
        for item in self.items.drain(..) {
            self.run.write(&self.prep, item);
        }
    }
}

impl Sink for Recorder {
    fn message(
        &mut self,
        _at: SystemTime,
        _direction: Direction,
        _bytes: &[u8],
        _total: Option<u64>,
    ) {
    }

    fn exchange(&mut self, method: &str, request: &[u8], response: &[u8]) {
        self.prep
            .exchange(method, request, response, &mut self.items);
        self.write_items();
    }

    fn step(&mut self, step: &StepReport) {
        self.prep.call(step, &mut self.items);
        self.write_items();
    }

    fn event(&mut self, _at: SystemTime, _text: &str) {}

    fn flush(&mut self) {
        self.run.flush();
    }

    fn settled(&self) -> bool {
        self.run.settled()
    }

    fn finish(&mut self, dropped: u64) {
        self.run.open_for_loss(&self.prep, dropped);
        self.run.finish(dropped);
    }
}
