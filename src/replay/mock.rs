//! A recording served as a stdio MCP server (`bir mock`, `bir-proxy
//! --replay`).
//!
//! * `initialize` and the `*/list` methods are answered from the snapshot;
//!   a list never captured comes back empty; an unrecorded
//!   `server/discover` gets -32601 (the caller falls back to
//!   `initialize`). Replies carry the caller's id; notifications get none.
//! * `tools/call` goes through the [`Matcher`]; a hit is served exactly as
//!   recorded (in recorded space: a redacted or truncated result is served
//!   as stored, with one warning per step). The live arguments are
//!   redacted and capped the way the recorder would have stored them
//!   before matching, so a secret in a live call equals its placeholder.
//! * A miss answers a JSON-RPC error in the implementation-defined range
//!   with `data.bir` naming the nearest recorded step and the differing
//!   argument paths; with `--on-miss passthrough` a call to a tool the
//!   safety gate classes `auto` goes to the real server instead.
//! * At the end: status 1 if any call missed (or, with `--require-all`,
//!   recorded calls were left unused), else 0, and one summary line.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use super::client::{Answer, McpClient};
use super::matcher::{Matcher, Mode, Outcome, lossy_result};
use super::recording::SessionRecorder;
use super::safety::{self, Class};
use super::scenario::{Scenario, ScenarioStep};
use crate::redact::Redactor;

/// Protocol versions published before the stateless era, oldest first:
/// a server that answers one of them by echoing it supports the earlier
/// ones too (the SDKs do: they keep a list of every version up to theirs).
const SESSION_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The version the recorded server would answer a client asking
/// `requested`, from what it answered the recorded client (`recorded`) to
/// its request (`recorded_request`). The spec: a server that supports the
/// requested version answers it; otherwise it answers another it supports
/// (its latest). So, when the recording shows the server echoing the
/// client (or does not say what was asked), a client asking a published
/// version no later than the recorded answer gets its own version back; a
/// server that answered its own version to a different request is known
/// not to echo, and answers that version again (unless asked it).
pub(crate) fn negotiated_version(
    recorded: &str,
    recorded_request: Option<&str>,
    requested: Option<&str>,
) -> String {
    let Some(requested) = requested else {
        return recorded.to_owned();
    };
    if requested == recorded {
        return recorded.to_owned();
    }
    let echoes = recorded_request.is_none_or(|asked| asked == recorded);
    let known = SESSION_VERSIONS.contains(&requested) && SESSION_VERSIONS.contains(&recorded);
    if echoes && known && requested < recorded {
        requested.to_owned()
    } else {
        recorded.to_owned()
    }
}

/// Client capabilities some servers register tools for, each with the
/// words of a tool name that show the tool exists for it
/// (server-everything's `get-roots-list`, `trigger-sampling-request`,
/// `trigger-elicitation-request`).
const CAPABILITY_WORDS: &[(&str, &[&str])] = &[
    ("roots", &["roots", "root"]),
    ("sampling", &["sampling"]),
    ("elicitation", &["elicitation", "elicit"]),
];

/// The recorded tools as the server would list them to a client that
/// declared `client` (`None`: unknown, all of them). Servers register
/// some tools only for clients that declare a capability (server-everything
/// lists 16 tools to a client declaring roots, sampling and elicitation, 13
/// to one declaring none). A tool is left out when the recorded client
/// declared a capability this one does not, and the tool's name names that
/// capability. Tools the recorded client was never offered cannot be
/// added: the recording does not have them.
pub(crate) fn tools_for_client(
    tools: &[Value],
    recorded: Option<&Value>,
    client: Option<&Value>,
) -> Vec<Value> {
    let Some(client) = client else {
        return tools.to_vec();
    };
    let declared = |caps: Option<&Value>, name: &str| {
        caps.and_then(|c| c.get(name)).is_some_and(|v| !v.is_null())
    };
    let missing: Vec<&[&str]> = CAPABILITY_WORDS
        .iter()
        .filter(|(cap, _)| declared(recorded, cap) && !declared(Some(client), cap))
        .map(|(_, words)| *words)
        .collect();
    if missing.is_empty() {
        return tools.to_vec();
    }
    tools
        .iter()
        .filter(|t| {
            let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
            let words = safety::name_words(name);
            !missing
                .iter()
                .any(|cap_words| words.iter().any(|w| cap_words.contains(&w.as_str())))
        })
        .cloned()
        .collect()
}

/// The error code of a mock miss (JSON-RPC's implementation-defined range).
pub(crate) const MISS_CODE: i64 = -32001;
/// How long a passed-through call may take.
const PASSTHROUGH_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) struct MockOptions {
    pub mode: Mode,
    pub repeats_last: bool,
    pub require_all: bool,
    /// Refuse to serve results that still hold placeholders or were cut.
    pub strict_redaction: bool,
    /// Payload cap the live arguments are brought to before matching.
    pub payload_cap: usize,
}

/// How a mock session went.
#[derive(Debug, Default)]
pub(crate) struct MockSummary {
    pub served: usize,
    pub repeats: usize,
    pub misses: usize,
    pub passed_through: usize,
    pub unused: Vec<String>,
}

impl MockSummary {
    pub(crate) fn failed(&self, require_all: bool) -> bool {
        self.misses > 0 || (require_all && !self.unused.is_empty())
    }

    pub(crate) fn line(&self) -> String {
        format!(
            "bir mock: {} served, {} repeated, {} missed, {} passed through, {} recorded calls unused",
            self.served,
            self.repeats,
            self.misses,
            self.passed_through,
            self.unused.len()
        )
    }
}

pub(crate) struct Mock<'a> {
    snapshot: Option<&'a super::scenario::ServerSnap>,
    steps: Vec<&'a ScenarioStep>,
    matcher: Matcher,
    options: MockOptions,
    redactor: Redactor,
    upstream: Option<McpClient>,
    warned: HashSet<usize>,
    summary: MockSummary,
    server: String,
    /// Journals the session as a run (see [`Mock::recording`]).
    recorder: Option<SessionRecorder>,
    /// What this session's client declared in `initialize` (`None`: not
    /// initialised; the recorded tool list is served whole).
    client_capabilities: Option<Value>,
}

impl<'a> Mock<'a> {
    /// A mock of `server` (steps of other servers are not served; a script
    /// without servers serves all its steps).
    pub(crate) fn new(
        scenario: &'a Scenario,
        server: &str,
        options: MockOptions,
        redactor: Redactor,
        upstream: Option<McpClient>,
    ) -> Mock<'a> {
        let steps: Vec<&ScenarioStep> = scenario
            .steps
            .iter()
            .filter(|s| s.kind == "mcp" || s.kind.is_empty())
            .filter(|s| s.server == server || s.server.is_empty())
            .collect();
        let matcher = Matcher::new(&steps, options.mode, options.repeats_last);
        Mock {
            snapshot: scenario.servers.get(server),
            steps,
            matcher,
            options,
            redactor,
            upstream,
            warned: HashSet::new(),
            summary: MockSummary::default(),
            server: server.to_owned(),
            recorder: None,
            client_capabilities: None,
        }
    }

    /// Journals every exchange served (the opening ones make the run's
    /// snapshot, each `tools/call` its steps) into `recorder`'s run,
    /// finished when the session ends.
    pub(crate) fn recording(mut self, recorder: SessionRecorder) -> Mock<'a> {
        self.recorder = Some(recorder);
        self
    }

    /// `handle`, journaling the exchange when recording.
    fn answer(&mut self, message: &Value) -> Option<Value> {
        let wall = SystemTime::now();
        let started = Instant::now();
        let reply = self.handle(message)?;
        if let Some(rec) = self.recorder.as_mut() {
            rec.exchange(&self.server, message, &reply, wall, started.elapsed());
        }
        Some(reply)
    }

    /// Serves until `input` ends.
    pub(crate) fn serve(mut self, input: &mut dyn BufRead, output: &mut dyn Write) -> MockSummary {
        let mut line = String::new();
        loop {
            line.clear();
            match input.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            let reply = match serde_json::from_str::<Value>(trimmed) {
                Ok(Value::Array(batch)) => {
                    let answers: Vec<Value> = batch.iter().filter_map(|m| self.answer(m)).collect();
                    (!answers.is_empty()).then_some(Value::Array(answers))
                }
                Ok(message) => self.answer(&message),
                Err(_) => Some(error(Value::Null, -32700, "parse error", None)),
            };
            if let Some(reply) = reply {
                let mut bytes = serde_json::to_vec(&reply).unwrap_or_default();
                bytes.push(b'\n');
                if output
                    .write_all(&bytes)
                    .and_then(|()| output.flush())
                    .is_err()
                {
                    break;
                }
            }
        }
        self.summary.unused = self
            .matcher
            .unused()
            .into_iter()
            .map(str::to_owned)
            .collect();
        if let Some(recorder) = self.recorder.take()
            && let Some(run) = recorder.finish()
        {
            log::info!("bir mock: the session is run {run}");
        }
        self.summary
    }

    fn handle(&mut self, message: &Value) -> Option<Value> {
        let method = message.get("method").and_then(Value::as_str)?;
        let id = message.get("id")?.clone();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let snap = self.snapshot;
        let recorded_version = snap.and_then(|s| s.protocol_version.clone());
        let modern_recording = recorded_version
            .as_deref()
            .is_some_and(super::client::is_modern);
        // A stateless-era request (its `_meta` names the version) gets
        // stateless-era result envelopes.
        let modern_request = params
            .pointer("/_meta/io.modelcontextprotocol~1protocolVersion")
            .is_some();
        let mut result = match method {
            "server/discover" if modern_recording => {
                let mut r = json!({
                    "capabilities": snap.and_then(|s| s.capabilities.clone()).unwrap_or_else(|| json!({"tools": {}})),
                    "supportedVersions": [recorded_version],
                    "_meta": {"io.modelcontextprotocol/serverInfo": snap.and_then(|s| s.server_info.clone()).unwrap_or(Value::Null)},
                });
                if let Some(i) = snap.and_then(|s| s.instructions.clone()) {
                    r["instructions"] = i;
                }
                r
            }
            "initialize" => {
                // A stateless-era recording has no session version to offer:
                // a client opening a session gets the version it asked for
                // (the server it stands in for spoke both eras).
                let requested = params.get("protocolVersion").and_then(Value::as_str);
                self.client_capabilities = params.get("capabilities").cloned();
                let version = recorded_version
                    .as_deref()
                    .filter(|_| !modern_recording)
                    .map(|recorded| {
                        Value::String(negotiated_version(
                            recorded,
                            snap.and_then(|s| s.client_protocol_version.as_deref()),
                            requested,
                        ))
                    })
                    .or_else(|| params.get("protocolVersion").cloned())
                    .unwrap_or(Value::Null);
                let mut r = json!({
                    "protocolVersion": version,
                    "capabilities": snap.and_then(|s| s.capabilities.clone()).unwrap_or_else(|| json!({"tools": {}})),
                    "serverInfo": snap.and_then(|s| s.server_info.clone()).unwrap_or_else(|| json!({"name": "bir-mock", "version": env!("CARGO_PKG_VERSION")})),
                });
                if let Some(i) = snap.and_then(|s| s.instructions.clone()) {
                    r["instructions"] = i;
                }
                r
            }
            "ping" => json!({}),
            "tools/list" => {
                let tools = match snap {
                    Some(s) => tools_for_client(
                        &s.tools,
                        s.client_capabilities.as_ref(),
                        self.client_capabilities.as_ref(),
                    ),
                    None => self.script_tools(),
                };
                json!({"tools": tools})
            }
            "prompts/list" => json!({"prompts": []}),
            "resources/list" => json!({"resources": []}),
            "resources/templates/list" => json!({"resourceTemplates": []}),
            "tools/call" => return Some(self.call(id, &params)),
            other => {
                return Some(error(
                    id,
                    -32601,
                    &format!("method not found: {other} was not recorded"),
                    None,
                ));
            }
        };
        if modern_request && let Some(obj) = result.as_object_mut() {
            obj.insert("resultType".to_owned(), json!("complete"));
            // Cacheable results of that era must say how long they may be
            // cached: a mock's answers are private and not to be kept.
            if method == "server/discover" || method.ends_with("/list") {
                obj.insert("cacheScope".to_owned(), json!("private"));
                obj.insert("ttlMs".to_owned(), json!(0));
            }
        }
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    /// A hand-written script has no snapshot: its tools are the names it
    /// answers, with an open schema.
    fn script_tools(&self) -> Vec<Value> {
        let mut names: Vec<&str> = self.steps.iter().map(|s| s.tool.as_str()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
            .collect()
    }

    fn call(&mut self, id: Value, params: &Value) -> Value {
        let tool = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let raw_args = params
            .get("arguments")
            .cloned()
            .unwrap_or_else(|| json!({}));
        // Recorded space: what the recorder would have stored of these arguments.
        let args =
            super::in_recorded_space(&self.redactor, self.options.payload_cap, raw_args.clone());
        let (i, repeat) = match self.matcher.call(&tool, &args) {
            Outcome::Hit(i) => (i, false),
            Outcome::Repeat(i) => (i, true),
            Outcome::Miss(miss) => {
                if let Some(answer) = self.passthrough(&tool, &raw_args) {
                    self.summary.passed_through += 1;
                    return match answer {
                        Answer::Result(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
                        Answer::Error(e) => json!({"jsonrpc": "2.0", "id": id, "error": e}),
                    };
                }
                self.summary.misses += 1;
                let where_ = miss
                    .nearest_step
                    .as_deref()
                    .map_or(String::new(), |s| format!("; nearest recorded step {s}"));
                log::warn!("miss: {tool}: {}{where_}", miss.reason);
                return error(
                    id,
                    MISS_CODE,
                    &format!("bir mock: {}{where_}", miss.reason),
                    Some(json!({"bir": miss})),
                );
            }
        };
        if repeat {
            self.summary.repeats += 1;
        } else {
            self.summary.served += 1;
        }
        let step = self.steps[i];
        if self.options.mode == Mode::Tool {
            log::warn!(
                "--match tool: {tool} served from {} whatever its arguments",
                step.id
            );
        }
        if lossy_result(step) {
            if self.options.strict_redaction {
                self.summary.misses += 1;
                return error(
                    id,
                    MISS_CODE,
                    &format!(
                        "bir mock: step {} was recorded redacted or truncated (--strict-redaction)",
                        step.id
                    ),
                    Some(json!({"bir": {"reason": "strict-redaction", "nearestStep": step.id}})),
                );
            }
            if self.warned.insert(i) {
                log::warn!(
                    "step {} is served as recorded: redacted or truncated",
                    step.id
                );
            }
        }
        match (&step.expect.result, &step.expect.error) {
            (_, Some(e)) => json!({"jsonrpc": "2.0", "id": id, "error": e}),
            (Some(r), None) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
            (None, None) => error(
                id,
                MISS_CODE,
                &format!("bir mock: step {} has no recorded answer", step.id),
                None,
            ),
        }
    }

    /// `--on-miss passthrough`: only tools the gate classes `auto` (from the
    /// snapshot's annotations) reach the real server.
    fn passthrough(&mut self, tool: &str, raw_args: &Value) -> Option<Answer> {
        let upstream = self.upstream.as_mut()?;
        let annotations = self
            .snapshot
            .and_then(|s| s.tool(tool))
            .and_then(|t| t.get("annotations"));
        let verdict = safety::judge(&safety::Facts {
            tool,
            recorded: annotations,
            live: None,
            trusted_server: true,
            trust_none: false,
            override_: None,
            trust_scenario: false,
        });
        if verdict.class != Class::Auto {
            log::warn!(
                "miss: {tool} is {} and is not passed through",
                verdict.class.name()
            );
            return None;
        }
        match upstream.call_tool(tool, raw_args, PASSTHROUGH_TIMEOUT) {
            Ok(answer) => Some(answer),
            Err(e) => {
                log::warn!("passthrough failed: {e}");
                None
            }
        }
    }
}

fn error(id: Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut e = json!({"code": code, "message": message});
    if let Some(d) = data {
        e["data"] = d;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": e})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_answers_the_version_the_recorded_server_would() {
        // Recorded: the client asked 2025-11-25, the server echoed it.
        let v = |asked| negotiated_version("2025-11-25", Some("2025-11-25"), asked);
        assert_eq!(v(Some("2025-06-18")), "2025-06-18");
        assert_eq!(v(Some("2024-11-05")), "2024-11-05");
        assert_eq!(v(Some("2025-11-25")), "2025-11-25");
        assert_eq!(v(Some("2099-01-01")), "2025-11-25", "unknown: its own");
        assert_eq!(v(None), "2025-11-25");
        // Unknown request (an older recording): the same reading.
        assert_eq!(
            negotiated_version("2025-11-25", None, Some("2025-06-18")),
            "2025-06-18"
        );
        // A server that answered its own version to another request.
        assert_eq!(
            negotiated_version("2025-03-26", Some("2025-06-18"), Some("2024-11-05")),
            "2025-03-26"
        );
    }

    #[test]
    fn tools_follow_the_capabilities_the_client_declared() {
        let names = [
            "echo",
            "get-roots-list",
            "trigger-sampling-request",
            "trigger-elicitation-request",
            "get-sum",
        ];
        let tools: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
        let recorded = json!({"roots": {"listChanged": true}, "sampling": {}, "elicitation": {}});
        let listed = |client: Option<Value>| -> Vec<String> {
            tools_for_client(&tools, Some(&recorded), client.as_ref())
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        };
        assert_eq!(listed(Some(json!({}))), ["echo", "get-sum"]);
        assert_eq!(
            listed(Some(json!({"sampling": {}}))),
            ["echo", "trigger-sampling-request", "get-sum"]
        );
        assert_eq!(listed(Some(recorded.clone())).len(), 5);
        assert_eq!(listed(None).len(), 5);
    }
}
