//! Recording: turning what the proxy observed into runs.
//!
//! The [`Recorder`] is an observer [`Sink`]: it runs on the observer's
//! worker thread, never on the relay's. For a proxy with no recorder daemon
//! to bind to (Tier 2, "standalone"), it owns one run per proxy process:
//! opened at the first recorded `tools/call` (so idle servers leave no empty
//! runs), finished when the proxy exits.
//!
//! Every payload goes through one choke point, [`Recorder::prepare`]
//! ([`prepare`], shared with the bound tier): parse a copy → stub
//! binaries → redact → cap. Only its output reaches a record, so the
//! journal and every other sink hold redacted data only. If
//! redaction fails (panics), the step is stored without bodies and marked
//! `withheld: "redaction_failed"` — never raw.
//!
//! ```text
//! StepReport ─▶ prepare ─▶ Step records ─▶ LocalWriter (journal, fsync in batches)
//! exchanges (initialize, tools/list) ─▶ ServerSnapshot
//! ```

pub mod journal;
pub mod model;
pub(crate) mod prepare;
pub mod store;
pub mod truncate;
pub mod writer;

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::observe::step::StepReport;
use crate::observe::{Direction, Sink};
use crate::redact::{RedactConfig, Redactor};
use crate::time;
use model::{
    HostInfo, Record, RunEvent, RunFinish, RunHeader, RunMetadata, RunMetrics, ServerSnapshot,
    Step, StepType,
};
use prepare::Prepared;
use store::Store;
use writer::LocalWriter;

/// How long a finishing run waits for its forwarders.
const FORWARD_DEADLINE: Duration = Duration::from_millis(300);

/// How the recorder is set up (resolved once from the environment).
#[derive(Debug, Clone)]
pub struct RecorderConfig {
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
}

impl RecorderConfig {
    /// `None` when recording is switched off (`BIR_RECORDER=off`).
    pub fn from_env(server_name: Arc<str>, session_id: Option<Arc<str>>) -> Option<RecorderConfig> {
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
        })
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
pub trait Forwarder: Send {
    fn forward(&mut self, run_id: &str, record: &Record);
    /// The highest `seq` of this run the destination acknowledged (0: none).
    fn acked(&self, run_id: &str) -> u64;
    /// The run is over: deliver what is queued within `deadline`.
    fn finish(&mut self, deadline: Duration);
}

/// What the recorder learned about the server and the host before (and
/// while) the run exists.
#[derive(Default)]
struct Knowledge {
    host: Option<HostInfo>,
    protocol_version: Option<String>,
    snapshot: ServerSnapshot,
    /// `tools/list` pages being collected (a request without `cursor`
    /// starts over).
    tools_pages: Vec<Value>,
    /// The snapshot digest last written to the run.
    written_digest: Option<String>,
    snapshot_known: bool,
}

/// The Tier 2 recorder: one run per proxy process.
pub struct Recorder {
    cfg: RecorderConfig,
    /// Built at first use, on the observer thread: compiling the redactor's
    /// patterns must not delay the proxy's start.
    redactor: Option<Redactor>,
    store: Option<Store>,
    writer: Option<LocalWriter>,
    forwarders: Vec<Box<dyn Forwarder>>,
    run_id: Option<String>,
    knowledge: Knowledge,
    next_seq: u64,
    next_step: u64,
    metrics: RunMetrics,
    withheld: u64,
    /// Exchanges seen before the run exists, still raw. They are read when
    /// the first call opens the run: an idle proxy never parses, hashes or
    /// redacts anything, so it keeps that code and memory out of its
    /// resident set (most servers in a session sit idle).
    pending_exchanges: Vec<PendingExchange>,
}

/// At most this many exchanges wait for a run (a handshake is two or three;
/// a server that keeps re-listing its tools only needs its latest lists).
const MAX_PENDING_EXCHANGES: usize = 32;

struct PendingExchange {
    method: String,
    request: Vec<u8>,
    response: Vec<u8>,
}

impl Recorder {
    /// A recorder writing to `store` (or to nowhere, if the store could not
    /// be opened: then it still redacts and counts, and says so once).
    pub fn new(cfg: RecorderConfig, store: Option<Store>) -> Recorder {
        Recorder {
            redactor: None,
            store,
            writer: None,
            forwarders: Vec::new(),
            run_id: None,
            knowledge: Knowledge::default(),
            next_seq: 1,
            next_step: 1,
            metrics: RunMetrics::default(),
            withheld: 0,
            pending_exchanges: Vec::new(),
            cfg: cfg.clone(),
        }
    }

    /// Adds a destination for this run's records (see [`Forwarder`]).
    pub fn with_forwarder(mut self, forwarder: Box<dyn Forwarder>) -> Recorder {
        self.forwarders.push(forwarder);
        self
    }

    fn emit(&mut self, event: RunEvent) {
        let record = Record {
            seq: self.next_seq,
            event,
        };
        self.next_seq += 1;
        if let Some(writer) = self.writer.as_mut() {
            match serde_json::to_vec(&record) {
                Ok(json) => writer.write(record.seq, &json),
                Err(err) => log::warn!("a record could not be serialised: {err}"),
            }
        }
        let local_only = matches!(record.event, RunEvent::RemoteAck(_));
        if let Some(run_id) = self.run_id.as_deref().filter(|_| !local_only) {
            for forwarder in &mut self.forwarders {
                forwarder.forward(run_id, &record);
            }
        }
    }

    /// Opens the run at the first recorded call, dated from that call.
    fn ensure_run(&mut self, first_call_at: &str) {
        if self.run_id.is_some() {
            return;
        }
        let id = model::new_run_id();
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
            host: self.knowledge.host.clone(),
            wrapped_servers: vec![self.cfg.server_name.to_string()],
            server_info: self.knowledge.snapshot.server_info.clone(),
            protocol_version: self.knowledge.protocol_version.clone(),
            cwd: std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            session_id: self.cfg.session_id.as_deref().map(str::to_owned),
            bir_version: env!("CARGO_PKG_VERSION").into(),
            lossy: false,
            model: None,
            note: None,
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
        if self.run_id.is_none() || !self.knowledge.snapshot_known {
            return;
        }
        let digest = self.knowledge.snapshot.tools_digest.clone();
        if self.knowledge.written_digest.as_ref() == Some(&digest) {
            return;
        }
        self.knowledge.written_digest = Some(digest);
        let snapshot = self.knowledge.snapshot.clone();
        self.emit(RunEvent::ServerSnapshot(snapshot));
    }

    fn redactor(&mut self) -> &Redactor {
        let cfg = self.cfg.redact;
        let known = &self.cfg.known_secrets;
        self.redactor
            .get_or_insert_with(|| prepare::build_redactor(cfg, known))
    }

    /// The one choke point ([`prepare::raw`]): a raw JSON payload → what
    /// may be stored.
    fn prepare(&mut self, raw: Option<&str>) -> Prepared {
        let cap = self.cfg.payload_cap;
        prepare::raw(self.redactor(), raw, cap)
    }

    /// A result too large to parse: its size and a redacted preview.
    fn prepare_clipped(&mut self, clipped: &crate::observe::step::ClippedResult) -> Prepared {
        prepare::preview_only(
            self.redactor(),
            &clipped.head,
            clipped.original_bytes as usize,
        )
    }

    fn record_call(&mut self, report: &StepReport) {
        self.ensure_run(&report.started_at);
        let tool = report.tool_name.clone().unwrap_or_default();
        let qualified = report
            .qualified_name
            .clone()
            .unwrap_or_else(|| format!("mcp__{}__{tool}", report.server_name));
        let args = self.prepare(report.arguments.as_deref().map(|r| r.get()));
        let mut result = self.prepare(report.result.as_deref().map(|r| r.get()));
        if let Some(clipped) = &report.result_clipped {
            result = self.prepare_clipped(clipped);
        }
        let error = self.prepare(report.error.as_deref().map(|r| r.get()));
        // Each step says only what its own side lost.
        let request_unparseable = report.request_unparseable.then_some("unparseable");
        let response_unparseable = report.response_unparseable.then_some("unparseable");
        let request_id = report
            .request_id
            .as_deref()
            .and_then(|r| serde_json::from_str::<Value>(r.get()).ok());
        let base = Step {
            id: model::new_step_id(),
            step_index: self.next_step,
            step_type: StepType::ToolSelected,
            qualified_name: qualified,
            server_name: report.server_name.clone(),
            tool_name: tool,
            started_at: report.started_at.clone(),
            input: None,
            output: None,
            error: None,
            is_error: false,
            duration_ms: None,
            outcome: None,
            request_id,
            tool_use_id: report.tool_use_id.clone(),
            agent_id: None,
            args_digest: None,
            correlation: None,
            withheld: None,
            redactions: 0,
            kind: None,
            agent_type: None,
            parent_tool_use_id: None,
            context: None,
            turn: None,
            permission: None,
        };
        let selected = Step {
            input: args.value,
            args_digest: args.digest,
            withheld: request_unparseable.or(args.withheld).map(str::to_owned),
            redactions: args.redactions,
            ..base.clone()
        };
        let response = Step {
            id: model::new_step_id(),
            step_index: self.next_step + 1,
            step_type: StepType::ToolResponse,
            output: result.value,
            error: error.value,
            is_error: report.is_error,
            duration_ms: Some((report.duration_ms * 1000.0).round() / 1000.0),
            outcome: serde_json::to_value(report.outcome)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned)),
            withheld: response_unparseable
                .or(result.withheld)
                .or(error.withheld)
                .map(str::to_owned),
            redactions: result.redactions + error.redactions,
            correlation: report.id_shared.then(|| "ambiguous".to_owned()),
            ..base
        };
        if selected.withheld.is_some() || response.withheld.is_some() {
            self.withheld += 1;
        }
        self.next_step += 2;
        self.metrics.tool_calls += 1;
        self.metrics.errors += u64::from(report.is_error);
        self.metrics.total_tool_ms += report.duration_ms;
        self.emit(RunEvent::Step(selected));
        self.emit(RunEvent::Step(response));
    }

    fn on_initialize(&mut self, request: &Value, result: &Value) {
        let params = &request["params"];
        if let Some(info) = client_info(&params["clientInfo"]) {
            self.knowledge.host = Some(info);
        }
        let k = &mut self.knowledge;
        k.protocol_version = result["protocolVersion"].as_str().map(str::to_owned);
        k.snapshot.protocol_version = k.protocol_version.clone();
        k.snapshot.server_info = non_null(&result["serverInfo"]);
        k.snapshot.capabilities = non_null(&result["capabilities"]);
        k.snapshot.instructions = non_null(&result["instructions"]);
        k.snapshot.client_capabilities = non_null(&params["capabilities"]);
        k.snapshot_known = true;
        self.refresh_snapshot_digest();
    }

    /// The 2026-07-28 era: identity travels in `_meta`.
    fn on_discover(&mut self, request: &Value, result: &Value) {
        let meta = &request["params"]["_meta"];
        if self.knowledge.host.is_none() {
            self.knowledge.host = client_info(&meta["io.modelcontextprotocol/clientInfo"]);
        }
        let k = &mut self.knowledge;
        if k.snapshot.server_info.is_some() {
            return; // an initialize answer is more complete
        }
        k.snapshot.server_info = non_null(&result["_meta"]["io.modelcontextprotocol/serverInfo"]);
        k.snapshot.capabilities = non_null(&result["capabilities"]);
        k.snapshot.instructions = non_null(&result["instructions"]);
        k.snapshot.client_capabilities =
            non_null(&meta["io.modelcontextprotocol/clientCapabilities"]);
        k.protocol_version = meta["io.modelcontextprotocol/protocolVersion"]
            .as_str()
            .map(str::to_owned);
        k.snapshot.protocol_version = k.protocol_version.clone();
        k.snapshot_known = true;
        self.refresh_snapshot_digest();
    }

    fn on_tools_list(&mut self, request: &Value, result: &Value) {
        if request["params"]["cursor"].is_null() {
            self.knowledge.tools_pages.clear();
        }
        if let Some(tools) = result["tools"].as_array() {
            self.knowledge.tools_pages.extend(tools.iter().cloned());
        }
        let mut tools = self.knowledge.tools_pages.clone();
        let mut hashes = BTreeMap::new();
        let redactor = self.redactor();
        for tool in &mut tools {
            let _ = catch_unwind(AssertUnwindSafe(|| redactor.redact_value(tool)));
            if let Some(name) = tool["name"].as_str() {
                hashes.insert(
                    name.to_owned(),
                    crate::codec::sha256_hex(&model::canonical(tool)),
                );
            }
        }
        let k = &mut self.knowledge;
        k.snapshot.tools = tools;
        k.snapshot.tool_hashes = hashes;
        k.snapshot_known = true;
        self.refresh_snapshot_digest();
        if result["nextCursor"].is_null() {
            self.write_snapshot_if_changed();
        }
    }

    fn refresh_snapshot_digest(&mut self) {
        let s = &mut self.knowledge.snapshot;
        s.server_name = self.cfg.server_name.to_string();
        let joined: String = s
            .tool_hashes
            .iter()
            .map(|(name, hash)| format!("{name}:{hash}\n"))
            .collect();
        s.tools_digest = crate::codec::sha256_hex(joined.as_bytes());
    }
}

fn non_null(v: &Value) -> Option<Value> {
    (!v.is_null()).then(|| v.clone())
}

fn client_info(v: &Value) -> Option<HostInfo> {
    Some(HostInfo {
        app: v["name"].as_str()?.to_owned(),
        version: v["version"].as_str().unwrap_or("").to_owned(),
    })
}

impl Recorder {
    /// Reads an answered `initialize`, `server/discover` or `tools/list`.
    fn learn_from_exchange(&mut self, method: &str, request: &[u8], response: &[u8]) {
        let (Ok(request), Ok(response)) = (
            serde_json::from_slice::<Value>(request),
            serde_json::from_slice::<Value>(response),
        ) else {
            return;
        };
        let result = &response["result"];
        if result.is_null() {
            return;
        }
        match method {
            "initialize" => self.on_initialize(&request, result),
            "server/discover" => self.on_discover(&request, result),
            "tools/list" => self.on_tools_list(&request, result),
            _ => {}
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
        if self.run_id.is_none() {
            if self.pending_exchanges.len() == MAX_PENDING_EXCHANGES {
                self.pending_exchanges.remove(0);
            }
            self.pending_exchanges.push(PendingExchange {
                method: method.to_owned(),
                request: request.to_vec(),
                response: response.to_vec(),
            });
            return;
        }
        self.learn_from_exchange(method, request, response);
        // The run is open, so its start has written the snapshot it could:
        // an `initialize` (or `server/discover`) answered after a call (a
        // server may answer out of order) is written now, or never. A
        // `tools/list` writes its own once its last page is in.
        if method != "tools/list" {
            self.write_snapshot_if_changed();
        }
    }

    fn step(&mut self, step: &StepReport) {
        for pending in std::mem::take(&mut self.pending_exchanges) {
            self.learn_from_exchange(&pending.method, &pending.request, &pending.response);
        }
        self.record_call(step);
    }

    fn event(&mut self, _at: SystemTime, _text: &str) {}

    fn flush(&mut self) {
        if let Some(writer) = self.writer.as_mut() {
            writer.sync_soon();
        }
    }

    fn finish(&mut self, dropped: u64) {
        if self.run_id.is_none() {
            return;
        }
        let lost = self.writer.as_ref().map_or(0, LocalWriter::lost);
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
            acked.push(forwarder.acked(&run_id));
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
