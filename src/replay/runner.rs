//! Replay and verify: a scenario's steps against the live servers.
//!
//! Steps run serially in recorded order. Each is first judged by the
//! safety gate (recorded and live annotations, the stricter wins); only
//! `auto` steps run unless `--execute` and the allow-lists (plus a TTY
//! confirmation where required) say otherwise. A held step is planned, not
//! run: its recorded result feeds later bindings. Live answers are brought
//! into recorded space (redacted and capped as the recorder would) before
//! they are compared, so no secret is ever needed or written, and a
//! bound value is compared through its binding: where the expected result
//! holds the literal a binding replaced, the live bound value is expected.
//!
//! Statuses: `match`, `diverged`, `error-changed`, `held`, `blocked`,
//! `missing-tool`, `schema-changed`, `unbound-literal`, plus `planned`
//! (`--dry-run`) and `guided-only` (a host built-in: only guided replay
//! can follow it). The exit status follows docs/replay.md (`bir verify`'s exit codes).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use serde_json::Value;

use super::client::{Answer, ClientError, McpClient};
use super::compare::{self, Difference, RuleSet};
use super::recording::{REPLAY_RECORDER, SessionRecorder};
use super::safety::{self, Class, Consent};
use super::scenario::{CompareRule, Scenario, ScenarioStep};
use super::template::{self, Lookup};
use crate::error::ExitStatus;
use crate::redact::Redactor;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Status {
    Match,
    Diverged,
    ErrorChanged,
    Held,
    Blocked,
    MissingTool,
    SchemaChanged,
    UnboundLiteral,
    Planned,
    GuidedOnly,
    /// `verify`: held by verify's own policy (only read-only steps run);
    /// like a skipped test, it does not fail the run unless `--require-all`.
    Skipped,
}

impl Status {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Status::Match => "match",
            Status::Diverged => "diverged",
            Status::ErrorChanged => "error-changed",
            Status::Held => "held",
            Status::Blocked => "blocked",
            Status::MissingTool => "missing-tool",
            Status::SchemaChanged => "schema-changed",
            Status::UnboundLiteral => "unbound-literal",
            Status::Planned => "planned",
            Status::GuidedOnly => "guided-only",
            Status::Skipped => "skipped",
        }
    }

    /// Not run, and not a regression: a JUnit `<skipped>`.
    pub(crate) fn is_not_run(self) -> bool {
        matches!(
            self,
            Status::Held | Status::Blocked | Status::Planned | Status::GuidedOnly | Status::Skipped
        )
    }

    /// Every status, in the order the summary counts them.
    pub(crate) const ALL: [Status; 11] = [
        Status::Match,
        Status::Diverged,
        Status::ErrorChanged,
        Status::MissingTool,
        Status::SchemaChanged,
        Status::UnboundLiteral,
        Status::Skipped,
        Status::Held,
        Status::Blocked,
        Status::GuidedOnly,
        Status::Planned,
    ];

    /// A regression: exit 1.
    pub(crate) fn is_divergence(self) -> bool {
        matches!(
            self,
            Status::Diverged
                | Status::ErrorChanged
                | Status::MissingTool
                | Status::SchemaChanged
                | Status::UnboundLiteral
        )
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StepReport {
    pub id: String,
    pub index: u64,
    pub server: String,
    pub tool: String,
    pub class: Class,
    pub external: bool,
    pub status: Status,
    pub reasons: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<Difference>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub needs_interaction: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded_ms: Option<f64>,
    /// The live result in recorded space (what `--update` writes).
    #[serde(skip)]
    pub live_result: Option<Value>,
    #[serde(skip)]
    pub live_error: Option<Value>,
    /// `--calibrate`: result paths that varied between runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub varying: Vec<String>,
    /// The arguments as they would be sent (bindings and parameters
    /// resolved), in recorded space: what a confirmation shows.
    #[serde(skip)]
    pub args: Option<Value>,
}

/// Lines of arguments a confirmation shows before folding the rest.
const PROMPT_ARG_LINES: usize = 8;
/// Characters of one argument line a confirmation shows.
const PROMPT_LINE_CHARS: usize = 100;

/// The question asked on a terminal before a held step runs: the step,
/// its class, and its arguments as they would be sent (redacted, as the
/// recorder stores them: a binding or parameter may have changed them
/// since the recording), folded to a few lines.
pub(crate) fn confirm_prompt(sr: &StepReport) -> String {
    let mut text = format!(
        "run {} {}/{} [{}] with arguments:\n",
        sr.id,
        sr.server,
        sr.tool,
        sr.class.name()
    );
    // One line per top-level argument, its value compact and cut short.
    let lines: Vec<String> = match &sr.args {
        Some(Value::Object(map)) if !map.is_empty() => {
            map.iter().map(|(k, v)| format!("{k}: {v}")).collect()
        }
        Some(Value::Object(_)) | Some(Value::Null) | None => vec!["(none)".to_owned()],
        Some(other) => vec![other.to_string()],
    };
    for line in lines.iter().take(PROMPT_ARG_LINES) {
        text.push_str("    ");
        if line.chars().count() > PROMPT_LINE_CHARS {
            text.extend(line.chars().take(PROMPT_LINE_CHARS - 1));
            text.push('…');
        } else {
            text.push_str(line);
        }
        text.push('\n');
    }
    if lines.len() > PROMPT_ARG_LINES {
        text.push_str(&format!(
            "    … ({} more arguments)\n",
            lines.len() - PROMPT_ARG_LINES
        ));
    }
    text.push_str("(y)es / (n)o / (a)lways this tool / (q)uit asking: ");
    text
}

/// How a server's live tools differ from the snapshot.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Drift {
    pub server: String,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
}

impl Drift {
    pub(crate) fn any(&self) -> bool {
        !(self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty())
    }
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Report {
    pub scenario: String,
    pub steps: Vec<StepReport>,
    /// Servers that could not be started or initialised (exit 4).
    pub environment: Vec<String>,
    pub drift: Vec<Drift>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale: Option<String>,
    /// Stale under `--expired error`, or drifted under `--fail-on-drift`.
    pub stale_is_error: bool,
    pub dry_run: bool,
    /// The run this replay was journaled as (see `Options::record`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Environment variables the steps' arguments read (names only, sorted):
    /// what a scenario took from this machine.
    pub env_read: Vec<String>,
}

impl Report {
    /// docs/replay.md, the exit codes: environment (4) over divergence (1) over stale (5)
    /// over incomplete (3) over success (0). Usage errors (2) never get a
    /// report.
    pub(crate) fn exit_status(&self) -> ExitStatus {
        if !self.environment.is_empty() {
            return ExitStatus::Environment;
        }
        if self.steps.iter().any(|s| s.status.is_divergence()) {
            return ExitStatus::Failure;
        }
        if self.stale_is_error {
            return ExitStatus::Stale;
        }
        if self
            .steps
            .iter()
            .any(|s| matches!(s.status, Status::Held | Status::Blocked))
        {
            return ExitStatus::Incomplete;
        }
        ExitStatus::Success
    }

    /// `bir verify`'s reading of a report, the test-runner convention: a
    /// step held by verify's own policy (it runs read-only steps only) is
    /// skipped, as is a blocked one, and neither fails the run; with
    /// `require_all` any step held, blocked or skipped makes it incomplete
    /// (3). Built-in steps never do: no client could run them.
    pub(crate) fn verify_exit_status(&mut self, require_all: bool) -> ExitStatus {
        for st in &mut self.steps {
            if st.status == Status::Held {
                st.status = Status::Skipped;
                st.reasons
                    .push("skipped: verify runs read-only steps only".to_owned());
            }
        }
        let status = self.exit_status();
        if status != ExitStatus::Incomplete && status != ExitStatus::Success {
            return status;
        }
        let incomplete = self
            .steps
            .iter()
            .any(|s| matches!(s.status, Status::Held | Status::Blocked | Status::Skipped));
        if require_all && incomplete {
            ExitStatus::Incomplete
        } else {
            ExitStatus::Success
        }
    }

    /// One line counting every step by status: `5 steps: 2 matched, 3
    /// guided-only` (the counts add up to the total; "matched" is always
    /// said).
    pub(crate) fn summary(&self) -> String {
        let mut parts = Vec::new();
        for status in Status::ALL {
            let n = self.steps.iter().filter(|s| s.status == status).count();
            if n == 0 && status != Status::Match {
                continue;
            }
            let name = match status {
                Status::Match => "matched",
                other => other.name(),
            };
            parts.push(format!("{n} {name}"));
        }
        let total = self.steps.len();
        format!(
            "{total} step{}: {}",
            if total == 1 { "" } else { "s" },
            parts.join(", ")
        )
    }
}

/// A TTY answer to "run this held step?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Confirm {
    Yes,
    No,
    /// Yes, and for every later step of this tool.
    Always,
    /// No, and stop asking.
    Quit,
}

pub(crate) struct Options {
    pub dry_run: bool,
    pub execute: bool,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub trust_scenario: bool,
    pub trust_none: bool,
    pub no_open_world: bool,
    pub params: HashMap<String, String>,
    /// Inclusive index range.
    pub steps: Option<(u64, u64)>,
    pub from: Option<String>,
    pub timeout: Duration,
    /// `--schema-only`: compare snapshots, call nothing.
    pub schema_only: bool,
    /// `--calibrate N`: rerun auto steps N more times.
    pub calibrate: u32,
    pub payload_cap: usize,
    /// `--parallel-groups`: the steps of one recorded concurrent group
    /// (consecutive steps sharing a `group`) are sent together and their
    /// answers awaited together; the report keeps the recorded order.
    pub parallel_groups: bool,
    /// Journal the replay as a run (recorder `bir-replay`, made by
    /// `replay` or `verify`) naming this source as what it replays (see
    /// `replay::source_label`); `None`: `--no-record`.
    pub record: Option<(crate::record::model::MadeBy, String)>,
}

/// Opens a transport to a server that is not a child of bir (a remote
/// server over Streamable HTTP): a writer taking one JSON-RPC message per
/// line and a reader yielding one per line. The proxy builds it
/// (`proxy::upstream_http::replay_connector`: the HTTP transport lives
/// there, above this layer) and the command layer hands it down.
pub(crate) type Connector = Arc<dyn Fn() -> Result<Pipes, String> + Send + Sync>;

/// The two ends a [`Connector`] opens.
pub(crate) type Pipes = (Box<dyn Write + Send>, Box<dyn Read + Send>);

/// How to reach one live server.
#[derive(Clone)]
pub(crate) enum ServerTarget {
    /// A stdio server: its command (no shell) and extra environment.
    Command {
        argv: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// A remote server; `label` names it in messages (its URL, redacted),
    /// `secrets` are the static header values bir sends it (redacted in
    /// whatever is compared, reported or journaled).
    Remote {
        label: String,
        connect: Connector,
        secrets: Vec<String>,
    },
}

impl ServerTarget {
    /// A stdio server with no extra environment.
    pub(crate) fn command(argv: Vec<String>) -> ServerTarget {
        ServerTarget::Command {
            argv,
            env: Vec::new(),
        }
    }
}

impl std::fmt::Debug for ServerTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerTarget::Command { argv, env } => f
                .debug_struct("Command")
                .field("argv", argv)
                .field("env", &format!("[{} variables]", env.len()))
                .finish(),
            ServerTarget::Remote { label, .. } => {
                f.debug_struct("Remote").field("label", label).finish()
            }
        }
    }
}

/// Server name → how to reach it.
pub(crate) type ServerTargets = BTreeMap<String, ServerTarget>;

struct Results<'a> {
    params: &'a HashMap<String, Value>,
    steps: HashMap<String, Value>,
}

impl Lookup for Results<'_> {
    fn param(&self, name: &str) -> Option<Value> {
        self.params.get(name).cloned()
    }
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
    fn step_result(&self, step: &str) -> Option<&Value> {
        self.steps.get(step)
    }
}

/// The parameters' values: `--param`, else `from: env:X`, else the default
/// (never for a redacted one). `prompt` parameters are bound only with
/// `--param` here (replay never prompts for a value it would then hold).
pub(crate) fn bind_params(
    scenario: &Scenario,
    given: &HashMap<String, String>,
) -> HashMap<String, Value> {
    let mut out = HashMap::new();
    for (name, param) in &scenario.params {
        let value = if let Some(v) = given.get(name) {
            Some(Value::String(v.clone()))
        } else if let Some(var) = param.from.as_deref().and_then(|f| f.strip_prefix("env:")) {
            std::env::var(var).ok().map(Value::String)
        } else if !param.redacted {
            param.default.clone()
        } else {
            None
        };
        if let Some(v) = value {
            out.insert(name.clone(), v);
        }
    }
    for (name, v) in given {
        out.entry(name.clone())
            .or_insert_with(|| Value::String(v.clone()));
    }
    out
}

/// Live definitions that differ from the snapshot, in recorded space.
pub(crate) fn drift_of(server: &str, recorded: &[Value], live: &[Value]) -> Drift {
    let by_name = |tools: &[Value]| -> BTreeMap<String, Value> {
        tools
            .iter()
            .filter_map(|t| Some((t.get("name")?.as_str()?.to_owned(), t.clone())))
            .collect()
    };
    let (r, l) = (by_name(recorded), by_name(live));
    let mut d = Drift {
        server: server.to_owned(),
        ..Drift::default()
    };
    for (name, def) in &l {
        match r.get(name) {
            None => d.added.push(name.clone()),
            Some(old) if old != def => d.changed.push(name.clone()),
            Some(_) => {}
        }
    }
    d.removed = r.keys().filter(|n| !l.contains_key(*n)).cloned().collect();
    d
}

/// A live server, its session opened as the recording's was.
pub(crate) struct LiveServer {
    pub client: McpClient,
    /// Live tool definitions in recorded space, by name.
    pub tools: HashMap<String, Value>,
}

/// Runs `scenario`. `confirm` is asked about held steps `--execute` may
/// run after a TTY confirmation (`None`: never ask, hold them).
///
/// The phases, each a method of [`Replay`]: start the servers the selected
/// steps use (not in a dry run); then, batch by batch, judge every step
/// (safety, schema, environment, arguments, consent) and execute the ones
/// cleared; last, put the report in the recorded order.
pub(crate) fn run(
    scenario: &Scenario,
    servers: &ServerTargets,
    options: &Options,
    mut confirm: Option<&mut dyn FnMut(&StepReport) -> Confirm>,
) -> Report {
    let params = bind_params(scenario, &options.params);
    let mut replay = Replay::new(scenario, servers, options, &params);
    let selected: Vec<&ScenarioStep> = select(scenario, options);
    let selected_ids: HashSet<&str> = selected.iter().map(|s| s.id.as_str()).collect();
    if !options.dry_run {
        replay.start_servers(servers, &selected);
    }
    for batch in batches(&scenario.steps, options.parallel_groups) {
        let ready = replay.judge_batch(batch, &selected_ids, &mut confirm);
        replay.execute_batch(ready);
    }
    replay.finish()
}

/// The TTY confirmation `run` may ask for (see [`run`]).
type Confirmer<'c> = Option<&'c mut dyn FnMut(&StepReport) -> Confirm>;

/// One replay in progress: what the phases of [`run`] share.
struct Replay<'a> {
    scenario: &'a Scenario,
    options: &'a Options,
    /// The static header values sent to remote servers: redacted like the
    /// secrets the redactor knows by shape.
    known_secrets: Vec<String>,
    /// Live values are compared, reported and journaled in recorded space
    /// (redacted with this, capped at `options.payload_cap`).
    redactor: Redactor,
    report: Report,
    live: BTreeMap<String, LiveServer>,
    recorder: Option<SessionRecorder>,
    results: Results<'a>,
    home: Option<PathBuf>,
    /// `--allow` (and, trusted, the scenario's own), `--deny` and the
    /// scenario's.
    allow: Vec<String>,
    deny: Vec<String>,
    /// `server/tool` keys confirmed with "always" on the terminal.
    always: Vec<String>,
    /// The user quit answering: every later step that would ask is held.
    stop_asking: bool,
    base_rules: Vec<CompareRule>,
}

impl<'a> Replay<'a> {
    fn new(
        scenario: &'a Scenario,
        servers: &ServerTargets,
        options: &'a Options,
        params: &'a HashMap<String, Value>,
    ) -> Replay<'a> {
        let known_secrets: Vec<String> = servers
            .values()
            .flat_map(|t| match t {
                ServerTarget::Remote { secrets, .. } => secrets.clone(),
                ServerTarget::Command { .. } => Vec::new(),
            })
            .collect();
        let redactor = super::recorded_space_redactor_knowing(&known_secrets);
        let (allow, deny) = if options.trust_scenario {
            (
                [options.allow.clone(), scenario.allow.clone()].concat(),
                [options.deny.clone(), scenario.deny.clone()].concat(),
            )
        } else {
            (
                options.allow.clone(),
                [options.deny.clone(), scenario.deny.clone()].concat(),
            )
        };
        let base_rules: Vec<CompareRule> = compare::default_rules()
            .into_iter()
            .chain(scenario.rules.compare.iter().cloned())
            .collect();
        Replay {
            scenario,
            options,
            known_secrets,
            redactor,
            report: Report {
                dry_run: options.dry_run,
                ..Report::default()
            },
            live: BTreeMap::new(),
            recorder: None,
            results: Results {
                params,
                steps: HashMap::new(),
            },
            home: crate::home::bir_home(),
            allow,
            deny,
            always: Vec::new(),
            stop_asking: false,
            base_rules,
        }
    }

    /// A live value in recorded space.
    fn to_recorded(&self, v: Value) -> Value {
        super::in_recorded_space(&self.redactor, self.options.payload_cap, v)
    }

    /// Starts every server the selected steps use (all of them for
    /// `--schema-only`), opens the replay's own run when it is recorded,
    /// and notes each server's tools drift. A server that cannot start is
    /// an environment problem of the report.
    fn start_servers(&mut self, servers: &ServerTargets, selected: &[&ScenarioStep]) {
        let scenario = self.scenario;
        let options = self.options;
        let cwd = scenario
            .source
            .as_ref()
            .map(|s| s.cwd.clone())
            .unwrap_or_default();
        let mut wanted: Vec<String> = selected
            .iter()
            .filter(|s| s.kind == "mcp")
            .map(|s| s.server.clone())
            .collect();
        if options.schema_only {
            wanted.extend(scenario.servers.keys().cloned());
        }
        wanted.sort();
        wanted.dedup();
        if let Some((made_by, of)) = &options.record {
            self.recorder = SessionRecorder::open(
                REPLAY_RECORDER,
                *made_by,
                of,
                &wanted,
                self.known_secrets.clone(),
            );
        }
        for name in wanted {
            let Some(target) = servers.get(&name) else {
                self.report.environment.push(format!(
                    "server {name}: no command (give --server {name}='command …', or install it with bir install)"
                ));
                continue;
            };
            let to_recorded = |v: Value| self.to_recorded(v);
            match start_target(&name, target, scenario, &cwd, options.timeout, &to_recorded) {
                Ok(server) => {
                    if let Some(rec) = self.recorder.as_mut() {
                        for (_, request, answer) in &server.client.exchanges {
                            rec.exchange(&name, request, answer, SystemTime::now(), Duration::ZERO);
                        }
                    }
                    if let Some(snap) = scenario.servers.get(&name) {
                        let live_defs: Vec<Value> = server.tools.values().cloned().collect();
                        self.report
                            .drift
                            .push(drift_of(&name, &snap.tools, &live_defs));
                    }
                    self.live.insert(name, server);
                }
                Err(e) => self.report.environment.push(e.to_string()),
            }
        }
    }

    /// Judges one batch. A batch's steps are judged first, then those that
    /// may run are sent together (one at a time without
    /// `--parallel-groups`: batches of one). Within a concurrent group no
    /// step can have seen another's answer: their recorded results feed
    /// bindings. A step not selected is not run, but its recorded result
    /// still feeds bindings.
    fn judge_batch(
        &mut self,
        batch: Vec<&'a ScenarioStep>,
        selected_ids: &HashSet<&str>,
        confirm: &mut Confirmer<'_>,
    ) -> Vec<Ready<'a>> {
        if batch.len() > 1 {
            for step in &batch {
                self.feed_recorded(step);
            }
        }
        let mut ready: Vec<Ready> = Vec::new();
        for step in batch {
            if !selected_ids.contains(step.id.as_str()) {
                self.feed_recorded(step);
                continue;
            }
            if let Some(cleared) = self.judge_step(step, confirm) {
                ready.push(cleared);
            }
        }
        ready
    }

    /// The step's recorded result, as what later bindings read.
    fn feed_recorded(&mut self, step: &ScenarioStep) {
        if let Some(r) = &step.expect.result {
            self.results.steps.insert(step.id.clone(), r.clone());
        }
    }

    /// A step that is not sent: reported as judged, its recorded result
    /// feeding later bindings.
    fn settle(&mut self, step: &ScenarioStep, sr: StepReport) {
        self.feed_recorded(step);
        self.report.steps.push(sr);
    }

    /// One selected step through every check before it may be sent: the
    /// safety verdict, built-ins, the live server and tool, its input
    /// schema, the environment it may read, its arguments, the gate and
    /// consent. `Some`: cleared to run; `None`: reported already.
    fn judge_step(
        &mut self,
        step: &'a ScenarioStep,
        confirm: &mut Confirmer<'_>,
    ) -> Option<Ready<'a>> {
        let scenario = self.scenario;
        let options = self.options;
        let recorded_annotations = step.annotations.as_ref();
        let server = self.live.get(&step.server);
        let server_available = server.is_some();
        let live_def = server.and_then(|s| s.tools.get(&step.tool)).cloned();
        let verdict = safety::judge(&safety::Facts {
            tool: &step.tool,
            recorded: recorded_annotations,
            live: live_def.as_ref().and_then(|d| d.get("annotations")),
            trusted_server: true,
            trust_none: options.trust_none,
            override_: step.safety.as_deref(),
            trust_scenario: options.trust_scenario,
        });
        let mut sr = StepReport {
            id: step.id.clone(),
            index: step.index,
            server: step.server.clone(),
            tool: step.tool.clone(),
            class: verdict.class,
            external: verdict.external,
            status: Status::Planned,
            reasons: verdict.reasons.clone(),
            differences: Vec::new(),
            needs_interaction: Vec::new(),
            duration_ms: None,
            recorded_ms: step.duration_ms,
            live_result: None,
            live_error: None,
            varying: Vec::new(),
            args: None,
        };
        if step.kind != "mcp" {
            let nature = super::builtin::nature_of(&step.tool);
            sr.status = Status::GuidedOnly;
            sr.class = nature.class;
            sr.external = nature.external;
            sr.reasons = vec![format!(
                "a host built-in ({}): only guided replay can follow it",
                nature.does
            )];
            self.settle(step, sr);
            return None;
        }
        if options.dry_run {
            self.settle(step, sr);
            return None;
        }
        if !server_available {
            sr.status = Status::Blocked;
            sr.reasons
                .push(format!("server {} is not available", step.server));
            self.settle(step, sr);
            return None;
        }
        // The tool is gone, or its input schema changed: do not call it.
        let Some(live_def) = live_def else {
            sr.status = Status::MissingTool;
            sr.reasons.push(format!(
                "{} no longer has a tool {:?}",
                step.server, step.tool
            ));
            self.settle(step, sr);
            return None;
        };
        let recorded_def = scenario
            .servers
            .get(&step.server)
            .and_then(|s| s.tool(&step.tool));
        if let Some(old) = recorded_def
            && old.get("inputSchema") != live_def.get("inputSchema")
        {
            sr.status = Status::SchemaChanged;
            sr.differences = compare::diff(
                old.get("inputSchema").unwrap_or(&Value::Null),
                live_def.get("inputSchema").unwrap_or(&Value::Null),
                &RuleSet::new(&[]),
            );
            sr.reasons
                .push("the tool's input schema changed since the recording".to_owned());
            self.settle(step, sr);
            return None;
        }
        if options.schema_only {
            sr.status = Status::Match;
            if recorded_def.is_some_and(|old| old.get("annotations") != live_def.get("annotations"))
            {
                sr.reasons
                    .push("annotations changed (the stricter class applies)".to_owned());
            }
            self.report.steps.push(sr);
            return None;
        }
        // The environment: only what the user trusts the scenario to
        // read (see `super::trust`); otherwise the step is not sent.
        let env = super::trust::env_use(
            scenario,
            step,
            &options.params,
            options.trust_scenario,
            self.home.as_deref(),
        );
        if let Some(why) = env.refused {
            sr.status = Status::Blocked;
            sr.reasons.push(why);
            self.settle(step, sr);
            return None;
        }
        // Arguments: templates resolved, no placeholder left.
        let args = match template::resolve(&step.args, &self.results) {
            Ok(a) => a,
            Err(e) => {
                sr.status = Status::Blocked;
                sr.reasons.push(e.0);
                self.settle(step, sr);
                return None;
            }
        };
        if template::has_placeholder(&args) {
            sr.status = Status::Blocked;
            sr.reasons.push(
                "an argument is still a redaction placeholder: bind it (bir scenario param … --from env:VAR)"
                    .to_owned(),
            );
            self.settle(step, sr);
            return None;
        }
        // A literal that was an earlier result when recorded, and is not
        // bound: against fresh state it names the wrong object.
        if let Some(stale) = unbound_literal(step, &self.results) {
            sr.status = Status::UnboundLiteral;
            sr.reasons.push(stale);
            self.settle(step, sr);
            return None;
        }
        // The gate.
        let mut runnable =
            verdict.class == Class::Auto && !(verdict.external && options.no_open_world);
        if verdict.class == Class::Blocked {
            sr.status = Status::Blocked;
            self.settle(step, sr);
            return None;
        }
        if !runnable {
            if !options.execute {
                sr.reasons
                    .push("held: not read-only (use --execute with --allow)".to_owned());
            } else {
                match self.consent(step, verdict.class, &args, &mut sr, confirm) {
                    Some(given) => runnable = given,
                    None => {
                        sr.status = Status::Blocked;
                        sr.reasons.push("denied by --deny".to_owned());
                        self.settle(step, sr);
                        return None;
                    }
                }
            }
        }
        if !runnable {
            sr.status = Status::Held;
            self.settle(step, sr);
            return None;
        }
        self.report.env_read.extend(env.vars);
        Some(Ready {
            sr,
            step,
            args,
            class: verdict.class,
        })
    }

    /// With `--execute`, whether a step the gate did not clear by itself
    /// may run: `--allow`/`--deny`, then a confirmation on a terminal
    /// (with `args` shown in recorded space). Why it is held goes to `sr`.
    /// `None`: denied by `--deny`.
    fn consent(
        &mut self,
        step: &ScenarioStep,
        judged: Class,
        args: &Value,
        sr: &mut StepReport,
        confirm: &mut Confirmer<'_>,
    ) -> Option<bool> {
        let class = if judged == Class::Auto {
            Class::Confirm
        } else {
            judged
        };
        match safety::consent(class, &step.server, &step.tool, &self.allow, &self.deny) {
            Consent::Allowed => Some(true),
            Consent::Refused => {
                if self
                    .deny
                    .iter()
                    .any(|d| safety::glob_matches(d, &step.server, &step.tool))
                {
                    return None;
                }
                sr.reasons.push(if class == Class::Destructive {
                    "held: destructive tools run only when allowed by exact name (server/tool) and confirmed".to_owned()
                } else {
                    "held: not allowed".to_owned()
                });
                Some(false)
            }
            Consent::AskTty => {
                let key = format!("{}/{}", step.server, step.tool);
                if self.always.contains(&key) && class != Class::Destructive {
                    return Some(true);
                }
                let (Some(ask), false) = (confirm.as_deref_mut(), self.stop_asking) else {
                    sr.reasons
                        .push("held: needs a confirmation on a terminal".to_owned());
                    return Some(false);
                };
                sr.args = Some(self.to_recorded(args.clone()));
                match ask(sr) {
                    Confirm::Yes => Some(true),
                    Confirm::Always => {
                        self.always.push(key);
                        Some(true)
                    }
                    Confirm::No => {
                        sr.reasons.push("held: declined".to_owned());
                        Some(false)
                    }
                    Confirm::Quit => {
                        self.stop_asking = true;
                        sr.reasons.push("held: declined".to_owned());
                        Some(false)
                    }
                }
            }
        }
    }

    /// Sends every ready step's call, then awaits each answer (in step
    /// order; an answer that comes first is kept by the client), compares
    /// it and journals it. Needs-interaction marks go to the step being
    /// awaited when the server asked.
    fn execute_batch(&mut self, ready: Vec<Ready>) {
        let options = self.options;
        let redactor = &self.redactor;
        let to_recorded = |v: Value| super::in_recorded_space(redactor, options.payload_cap, v);
        let live = &mut self.live;
        let report = &mut self.report;
        let mut sent = Vec::with_capacity(ready.len());
        for mut r in ready {
            let Some(server) = live.get_mut(&r.step.server) else {
                r.sr.status = Status::Blocked;
                r.sr.reasons
                    .push(format!("server {} is not available", r.step.server));
                report.steps.push(r.sr);
                continue;
            };
            let params = serde_json::json!({"name": r.step.tool, "arguments": r.args});
            let wall = SystemTime::now();
            let started = Instant::now();
            match server.client.send_request("tools/call", params) {
                Ok((id, request)) => sent.push((r, id, request, wall, started)),
                Err(e) => {
                    let m = e.to_string();
                    report.environment.push(m.clone());
                    r.sr.status = Status::Blocked;
                    r.sr.reasons.push(m);
                    report.steps.push(r.sr);
                    live.remove(&r.step.server);
                }
            }
        }
        for (mut r, id, request, wall, started) in sent {
            let step = r.step;
            let Some(server) = live.get_mut(&step.server) else {
                r.sr.status = Status::Blocked;
                r.sr.reasons
                    .push(format!("server {} ended during the group", step.server));
                report.steps.push(r.sr);
                continue;
            };
            let answer = server.client.wait_for(
                id,
                "tools/call",
                started + options.timeout,
                options.timeout,
            );
            let took = started.elapsed();
            r.sr.duration_ms = Some(took.as_secs_f64() * 1000.0);
            r.sr.needs_interaction = server.client.take_interactions();
            let answer = match answer {
                Ok(a) => a,
                Err(ClientError::Timeout(m)) => {
                    r.sr.status = Status::Diverged;
                    r.sr.reasons.push(m);
                    report.steps.push(r.sr);
                    continue;
                }
                Err(ClientError::Environment(m)) => {
                    report.environment.push(m.clone());
                    r.sr.status = Status::Blocked;
                    r.sr.reasons.push(m);
                    report.steps.push(r.sr);
                    live.remove(&step.server);
                    continue;
                }
            };
            if let Some(rec) = self.recorder.as_mut() {
                let message = match &answer {
                    Answer::Result(v) => {
                        serde_json::json!({"jsonrpc": "2.0", "id": id, "result": v})
                    }
                    Answer::Error(e) => serde_json::json!({"jsonrpc": "2.0", "id": id, "error": e}),
                };
                rec.exchange(&step.server, &request, &message, wall, took);
            }
            let rules = RuleSet::new(self.base_rules.iter().chain(step.ignore.iter()));
            let expected_result = expected_through_bindings(step, &self.results);
            judge_answer(
                &mut r.sr,
                step,
                expected_result.as_ref(),
                &answer,
                &rules,
                &to_recorded,
            );
            if let Answer::Result(v) = &answer {
                self.results.steps.insert(step.id.clone(), v.clone());
            }
            // Calibration: the same call again, N times.
            if options.calibrate > 0
                && r.class == Class::Auto
                && let Some(first) = r.sr.live_result.clone()
            {
                let mut seen = vec![first];
                for _ in 0..options.calibrate {
                    if let Ok(Answer::Result(v)) =
                        server
                            .client
                            .call_tool(&step.tool, &r.args, options.timeout)
                    {
                        seen.push(to_recorded(v));
                    }
                }
                if let Some(expected) = &step.expect.result {
                    seen.push(expected.clone());
                }
                r.sr.varying = compare::varying_paths(&seen);
            }
            report.steps.push(r.sr);
        }
    }

    /// The report, in the recorded order whatever order the batches'
    /// answers came in, with the replay's own run when it was recorded.
    fn finish(self) -> Report {
        let mut report = self.report;
        let position: HashMap<&str, usize> = self
            .scenario
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        report
            .steps
            .sort_by_key(|s| position.get(s.id.as_str()).copied().unwrap_or(usize::MAX));
        report.env_read.sort();
        report.env_read.dedup();
        report.run = self.recorder.and_then(SessionRecorder::finish);
        report
    }
}

/// A step cleared to run, with its resolved arguments.
struct Ready<'a> {
    sr: StepReport,
    step: &'a ScenarioStep,
    args: Value,
    class: Class,
}

/// The steps in runs to execute together: with `parallel`, each maximal
/// run of consecutive steps sharing a `group` is one batch; otherwise (and
/// for steps in no group) every step is a batch of its own.
fn batches(steps: &[ScenarioStep], parallel: bool) -> Vec<Vec<&ScenarioStep>> {
    let mut out: Vec<Vec<&ScenarioStep>> = Vec::new();
    for step in steps {
        let joins = parallel
            && step.group.is_some()
            && out
                .last()
                .and_then(|b| b.last())
                .is_some_and(|prev| prev.group == step.group);
        match out.last_mut() {
            Some(batch) if joins => batch.push(step),
            _ => out.push(vec![step]),
        }
    }
    out
}

fn select<'a>(scenario: &'a Scenario, options: &Options) -> Vec<&'a ScenarioStep> {
    let from_index = options
        .from
        .as_ref()
        .and_then(|id| scenario.step(id))
        .map_or(0, |s| s.index);
    scenario
        .steps
        .iter()
        .filter(|s| s.index >= from_index)
        .filter(|s| {
            options
                .steps
                .is_none_or(|(a, b)| s.index >= a && s.index <= b)
        })
        .collect()
}

/// Starts `command` and opens the session the way the recording did (its
/// protocol version, its client capabilities), then lists the tools.
pub(crate) fn start_server(
    name: &str,
    command: &[String],
    scenario: &Scenario,
    cwd: &str,
    timeout: Duration,
    to_recorded: &dyn Fn(Value) -> Value,
) -> Result<LiveServer, ClientError> {
    let target = ServerTarget::command(command.to_vec());
    start_target(name, &target, scenario, cwd, timeout, to_recorded)
}

/// [`start_server`] for any [`ServerTarget`].
pub(crate) fn start_target(
    name: &str,
    target: &ServerTarget,
    scenario: &Scenario,
    cwd: &str,
    timeout: Duration,
    to_recorded: &dyn Fn(Value) -> Value,
) -> Result<LiveServer, ClientError> {
    let snap = scenario.servers.get(name);
    let mut client = match target {
        ServerTarget::Command { argv, env } => McpClient::spawn(name, argv, env, cwd)?,
        ServerTarget::Remote { label, connect, .. } => {
            let (writer, reader) = connect()
                .map_err(|e| ClientError::Environment(format!("server {name} ({label}): {e}")))?;
            McpClient::over(name, Some(writer), Some(reader), cwd)
        }
    };
    let version = snap
        .and_then(|s| s.protocol_version.clone())
        .unwrap_or_else(|| "2025-06-18".to_owned());
    let caps = snap
        .and_then(|s| s.client_capabilities.clone())
        .unwrap_or_else(|| serde_json::json!({}));
    client.initialize(&version, &caps, timeout)?;
    let tools = client
        .list_tools(timeout)?
        .into_iter()
        .map(to_recorded)
        .filter_map(|t| Some((t.get("name")?.as_str()?.to_owned(), t)))
        .collect();
    Ok(LiveServer { client, tools })
}

/// `unbound-literal`: a binding derive proposed but did not apply, whose
/// source now holds something else.
fn unbound_literal(step: &ScenarioStep, results: &Results) -> Option<String> {
    for b in step.bindings.iter().filter(|b| !b.applied) {
        let body = b.from.strip_prefix("${step:")?.strip_suffix('}')?;
        let (from_step, pointer) = body.split_once(':')?;
        let now = results
            .steps
            .get(from_step)
            .and_then(|r| template::pointer_into(r, pointer));
        let now_text = match &now {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => continue,
        };
        if now_text != b.literal {
            return Some(format!(
                "argument {} is the literal {:?}, which was {from_step}'s result at {pointer} when recorded; now that is {now_text:?} (bind it: {})",
                b.arg, b.literal, b.from
            ));
        }
    }
    None
}

/// The expected result with each applied binding's recorded literal
/// replaced by the value it resolves to now (the result of `get_item(id)`
/// echoes the new id, not the recorded one).
fn expected_through_bindings(step: &ScenarioStep, results: &Results) -> Option<Value> {
    let mut expected = step.expect.result.clone()?;
    for b in step.bindings.iter().filter(|b| b.applied) {
        let Ok(now) = template::resolve(&Value::String(b.from.clone()), results) else {
            continue;
        };
        let now_text = match &now {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if now_text != b.literal {
            replace_text(&mut expected, &b.literal, &now_text);
        }
    }
    Some(expected)
}

/// Replaces `from` by `to` in every string (including JSON held in text).
fn replace_text(value: &mut Value, from: &str, to: &str) {
    match value {
        Value::String(s) if s.contains(from) => *s = s.replace(from, to),
        Value::Array(items) => items.iter_mut().for_each(|v| replace_text(v, from, to)),
        Value::Object(map) => map.values_mut().for_each(|v| replace_text(v, from, to)),
        Value::Number(n) if n.to_string() == from => {
            if let Ok(parsed) = serde_json::from_str::<Value>(to) {
                *value = parsed;
            }
        }
        _ => {}
    }
}

fn judge_answer(
    sr: &mut StepReport,
    step: &ScenarioStep,
    expected: Option<&Value>,
    answer: &Answer,
    rules: &RuleSet,
    to_recorded: &dyn Fn(Value) -> Value,
) {
    match answer {
        Answer::Error(e) => {
            let live = to_recorded(e.clone());
            sr.live_error = Some(live.clone());
            match &step.expect.error {
                None => {
                    sr.status = Status::ErrorChanged;
                    sr.reasons.push(format!(
                        "recorded a result; now a JSON-RPC error {}",
                        brief(&live)
                    ));
                }
                Some(old) => {
                    sr.differences = compare::diff(old, &live, rules);
                    sr.status = if sr.differences.is_empty() {
                        Status::Match
                    } else {
                        Status::Diverged
                    };
                }
            }
        }
        Answer::Result(r) => {
            let live = to_recorded(r.clone());
            sr.live_result = Some(live.clone());
            let live_is_error = live
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if step.expect.error.is_some() {
                sr.status = Status::ErrorChanged;
                sr.reasons
                    .push("recorded a JSON-RPC error; now a result".to_owned());
                return;
            }
            if live_is_error != step.expect.is_error {
                sr.status = Status::ErrorChanged;
                sr.reasons.push(format!(
                    "isError was {}, now {live_is_error}",
                    step.expect.is_error
                ));
                sr.differences = compare::diff(expected.unwrap_or(&Value::Null), &live, rules);
                return;
            }
            let Some(expected) = expected else {
                sr.status = Status::Match;
                return;
            };
            sr.differences = if step.expect.volatile {
                compare::diff(
                    &compare::volatile_shape(expected),
                    &compare::volatile_shape(&live),
                    rules,
                )
            } else {
                compare::diff(expected, &live, rules)
            };
            sr.status = if sr.differences.is_empty() {
                Status::Match
            } else {
                Status::Diverged
            };
        }
    }
}

/// A value in one short line (for reports).
pub(crate) fn brief(v: &Value) -> String {
    let text = v.to_string();
    if text.len() <= 80 {
        return text;
    }
    let cut = crate::record::truncate::token_safe_prefix(&text, 77);
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(status: Status) -> StepReport {
        StepReport {
            id: "s1".into(),
            index: 1,
            server: "fx".into(),
            tool: "t".into(),
            class: Class::Auto,
            external: false,
            status,
            reasons: Vec::new(),
            differences: Vec::new(),
            needs_interaction: Vec::new(),
            duration_ms: None,
            recorded_ms: None,
            live_result: None,
            live_error: None,
            varying: Vec::new(),
            args: None,
        }
    }

    /// A confirmation shows the arguments that would be sent, redacted as
    /// the recorder would store them, folded to a few short lines.
    #[test]
    fn a_confirmation_shows_the_arguments_redacted_and_folded() {
        let mut sr = step(Status::Planned);
        sr.tool = "delete_repo".into();
        sr.class = Class::Destructive;
        let long = "x".repeat(300);
        let args = serde_json::json!({
            "repo": "acme/prod",
            "token": "ghp_0123456789abcdefghijABCDEFGHIJ012345",
            "note": long,
            "list": [1, 2, 3],
            "x1": 1, "x2": 2, "x3": 3, "x4": 4, "x5": 5, "x6": 6
        });
        sr.args = Some(super::super::in_recorded_space(
            &super::super::recorded_space_redactor(),
            crate::record::truncate::DEFAULT_CAP,
            args,
        ));
        let text = confirm_prompt(&sr);
        assert!(
            text.starts_with("run s1 fx/delete_repo [destructive] with arguments:"),
            "{text}"
        );
        assert!(text.contains("repo: \"acme/prod\""), "{text}");
        assert!(text.contains("list: [1,2,3]"), "{text}");
        assert!(!text.contains("ghp_0123456789"), "{text}");
        assert!(text.contains("REDACTED"), "{text}");
        assert!(text.contains("(2 more arguments)"), "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 110), "{text}");
        assert!(text.ends_with("(q)uit asking: "), "{text}");
    }

    /// docs/replay.md, the exit codes: 4 over 1 over 5 over 3 over 0.
    #[test]
    fn exit_codes_follow_their_priority() {
        let mut r = Report::default();
        assert_eq!(r.exit_status().code(), 0);
        r.steps.push(step(Status::Match));
        r.steps.push(step(Status::GuidedOnly));
        assert_eq!(r.exit_status().code(), 0, "built-ins are not incomplete");
        r.steps.push(step(Status::Held));
        assert_eq!(r.exit_status().code(), 3);
        r.stale_is_error = true;
        assert_eq!(r.exit_status().code(), 5);
        for divergence in [
            Status::Diverged,
            Status::ErrorChanged,
            Status::MissingTool,
            Status::SchemaChanged,
            Status::UnboundLiteral,
        ] {
            let mut d = Report {
                stale_is_error: true,
                ..Report::default()
            };
            d.steps.push(step(Status::Held));
            d.steps.push(step(divergence));
            assert_eq!(d.exit_status().code(), 1, "{divergence:?}");
            d.environment.push("down".into());
            assert_eq!(d.exit_status().code(), 4, "server down is not a regression");
        }
    }

    /// Consecutive steps of one group form a batch only with
    /// `--parallel-groups`; a step in no group is always alone.
    /// verify: held steps are skipped and pass; `--require-all` makes
    /// them (and blocked ones) incomplete; a divergence still fails; the
    /// summary counts every step.
    #[test]
    fn verify_skips_held_steps_unless_all_are_required() {
        let report = || {
            let mut r = Report::default();
            r.steps.push(step(Status::Match));
            r.steps.push(step(Status::Held));
            r.steps.push(step(Status::GuidedOnly));
            r.steps.push(step(Status::GuidedOnly));
            r.steps.push(step(Status::Blocked));
            r
        };
        let mut r = report();
        assert_eq!(r.verify_exit_status(false).code(), 0);
        assert_eq!(r.steps[1].status, Status::Skipped);
        assert_eq!(
            r.summary(),
            "5 steps: 1 matched, 1 skipped, 1 blocked, 2 guided-only"
        );
        assert_eq!(report().verify_exit_status(true).code(), 3);
        let mut only_builtins = Report::default();
        only_builtins.steps.push(step(Status::GuidedOnly));
        assert_eq!(only_builtins.verify_exit_status(true).code(), 0);
        let mut d = report();
        d.steps.push(step(Status::Diverged));
        assert_eq!(d.verify_exit_status(false).code(), 1);
        assert!(
            d.summary()
                .starts_with("6 steps: 1 matched, 1 diverged, 1 skipped")
        );
        // Replay keeps its reading: held is incomplete.
        assert_eq!(report().exit_status().code(), 3);
    }

    #[test]
    fn batches_are_runs_of_one_group() {
        let step = |id: &str, group: Option<u32>| ScenarioStep {
            id: id.into(),
            group,
            ..Default::default()
        };
        let steps = vec![
            step("s1", None),
            step("s2", Some(1)),
            step("s3", Some(1)),
            step("s4", Some(2)),
            step("s5", None),
            step("s6", None),
            step("s7", Some(2)),
        ];
        let ids = |parallel| -> Vec<Vec<String>> {
            batches(&steps, parallel)
                .iter()
                .map(|b| b.iter().map(|s| s.id.clone()).collect())
                .collect()
        };
        assert_eq!(
            ids(true),
            [
                vec!["s1"],
                vec!["s2", "s3"],
                vec!["s4"],
                vec!["s5"],
                vec!["s6"],
                vec!["s7"]
            ]
        );
        assert!(ids(false).iter().all(|b| b.len() == 1));
        assert_eq!(ids(false).len(), steps.len());
    }

    #[test]
    fn expected_values_follow_their_bindings() {
        let mut s = ScenarioStep {
            id: "s2".into(),
            expect: super::super::scenario::Expect {
                result: Some(
                    serde_json::json!({"content": [{"type": "text", "text": "{\"id\": \"item-0001\", \"n\": 1}"}]}),
                ),
                ..Default::default()
            },
            ..Default::default()
        };
        s.bindings.push(super::super::scenario::Binding {
            arg: "/id".into(),
            from: "${step:s1:/id}".into(),
            literal: "item-0001".into(),
            applied: true,
        });
        let params = HashMap::new();
        let mut results = Results {
            params: &params,
            steps: HashMap::new(),
        };
        results
            .steps
            .insert("s1".into(), serde_json::json!({"id": "item-0006"}));
        let expected = expected_through_bindings(&s, &results).expect("expected");
        assert!(
            expected.to_string().contains("item-0006")
                && !expected.to_string().contains("item-0001")
        );
        // Not applied: the literal stays, and a changed source is reported.
        s.bindings[0].applied = false;
        let why = unbound_literal(&s, &results).expect("unbound");
        assert!(why.contains("item-0006"), "{why}");
        results
            .steps
            .insert("s1".into(), serde_json::json!({"id": "item-0001"}));
        assert!(unbound_literal(&s, &results).is_none());
    }
}
