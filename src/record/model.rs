//! The recording model: runs, steps, server snapshots, and the events that
//! carry them to every sink.
//!
//! A run is written as a sequence of [`Record`]s (one journal record each);
//! the same records drive every sink (the local store appends them, the
//! remote recorder sends them). Every payload in here has already been
//! redacted and truncated: nothing raw reaches this type. That is enforced
//! by the types: every field that carries outside data (payloads, free
//! text, names the server or host chose) is a [`Redacted`], which only the
//! preparation module (`record::payload`) can make. Fields that are safe
//! by construction (ids bir generates, counters, timestamps, bir's own
//! words) stay plain.
//!
//! Serialised field names are camelCase and part of the on-disk format.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub(crate) use super::payload::{Redacted, canonical};

/// One journal record: a sequence number (1, 2, … within the run) and an
/// event. `seq` is what remote acknowledgements refer to.
///
/// Shape: `{"seq":3,"event":{"kind":"step","data":{…}}}`. The event is
/// adjacently tagged, not flattened: serde buffers flattened and
/// internally-tagged content, which loses exact numbers (payloads keep
/// `1.50` and `18446744073709551617` as written).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    pub seq: u64,
    pub event: RunEvent,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub(crate) enum RunEvent {
    RunStarted(RunHeader),
    /// A server's `initialize` / `server/discover` answer and its tools,
    /// recorded once per run (and again if the tools change).
    ServerSnapshot(ServerSnapshot),
    Step(Step),
    /// A prompt that starts a turn of a bound run (Tier 1). The first one is
    /// also the run header's `input`.
    Turn(Turn),
    /// Something the host session did that is not a tool step: compaction,
    /// a subagent starting or stopping, a permission request or denial, a
    /// notification, an elicitation (Tier 1). Kept so nothing the hooks
    /// told is thrown away.
    SessionEvent(SessionEvent),
    RunFinished(RunFinish),
    /// The recording service acknowledged every record up to `upTo`.
    RemoteAck(RemoteAck),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunHeader {
    pub id: String,
    pub started_at: String,
    /// The prompt (Tier 1 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Redacted<String>>,
    pub metadata: RunMetadata,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunMetadata {
    /// Always `"bir"`: tells bir's runs apart from other recorders'.
    pub recorder: String,
    /// `"standalone"` (Tier 2: MCP calls only) or `"bound"` (Tier 1).
    pub tier: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostInfo>,
    pub wrapped_servers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<Redacted<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<Redacted<String>>,
    pub cwd: String,
    /// `CLAUDE_CODE_SESSION_ID` of the host session, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub bir_version: String,
    /// Set at the end if any observation was lost.
    #[serde(default)]
    pub lossy: bool,
    /// Bound runs only: the model the host session used, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Redacted<String>>,
    /// Bound runs only: why the run is lossy from its start, when it is
    /// (the recorder joined a session already under way, e.g. after a
    /// daemon restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Runs made by `bir replay`/`bir verify` (recorder `bir-replay`) and
    /// `bir mock` (recorder `bir-mock`): the scenario file or run they
    /// replayed or served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<String>,
    /// Which of bir's own commands made the run (`replay`, `verify`,
    /// `mock`); absent for a recording of an agent's session or of a
    /// host's calls through a proxy. Such runs are never `latest` and are
    /// hidden from `bir runs` unless asked for ([`MadeBy`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_by: Option<MadeBy>,
}

/// The bir command that made a run, for the runs bir makes itself: a
/// replay, a verification or a mock session is not an agent's session,
/// so `latest` never names one and `bir runs` lists them only when asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum MadeBy {
    Replay,
    Verify,
    Mock,
}

impl MadeBy {
    /// The word in headers, listings and `bir runs --origin`.
    pub(crate) fn word(self) -> &'static str {
        match self {
            MadeBy::Replay => "replay",
            MadeBy::Verify => "verify",
            MadeBy::Mock => "mock",
        }
    }

    /// The kind `word` names (see [`MadeBy::word`]).
    pub(crate) fn parse(word: &str) -> Option<MadeBy> {
        [MadeBy::Replay, MadeBy::Verify, MadeBy::Mock]
            .into_iter()
            .find(|m| m.word() == word)
    }

    /// The kind a header of a bir version that wrote no `madeBy` had:
    /// its recorder (`bir-mock`, else `bir-replay`) when it replayed
    /// something, else none.
    pub(crate) fn of_legacy(recorder: &str, replay_of: Option<&str>) -> Option<MadeBy> {
        replay_of?;
        Some(if recorder == "bir-mock" {
            MadeBy::Mock
        } else {
            MadeBy::Replay
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct HostInfo {
    pub app: String,
    pub version: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ServerSnapshot {
    pub server_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<Redacted<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<Redacted<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Redacted<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<Redacted<Value>>,
    /// What the client declared (servers register some tools only for
    /// clients that declare a capability).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_capabilities: Option<Redacted<Value>>,
    /// The protocol version the client asked for in `initialize`: with the
    /// server's answer (`protocol_version`) it shows whether the server
    /// echoes a version it supports (what a mock must answer a client that
    /// asks another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_protocol_version: Option<Redacted<String>>,
    /// The full `tools/list` (all pages), redacted.
    pub tools: Vec<Redacted<Value>>,
    /// Tool name → sha256 of its canonical definition: a later run can show
    /// that a definition changed.
    pub tool_hashes: BTreeMap<Redacted<String>, String>,
    /// sha256 over all tool hashes, in name order.
    pub tools_digest: String,
    /// sha256 of the command line the proxy started the server with (and
    /// the program's size and modification time): how `bir-proxy --lazy`
    /// finds the last snapshot of the same server, same version; for a
    /// remote server, of its URL without credentials, the transport and
    /// the header names (`proxy::lazy::remote_digest`). Absent in runs
    /// recorded before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_digest: Option<String>,
    /// The server's answers to `prompts/list`, `resources/list` and
    /// `resources/templates/list` (their `prompts`, `resources`,
    /// `resourceTemplates`), redacted, when the host asked and one page
    /// held them all: `--lazy` answers a host from them. Not part of the
    /// tools digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<Vec<Redacted<Value>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<Redacted<Value>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_templates: Option<Vec<Redacted<Value>>>,
    /// How the proxy reached the server, in OpenTelemetry's words for
    /// `network.transport`: `pipe` (stdio) or `tcp` (Streamable HTTP, the
    /// legacy HTTP+SSE). bir's own choice, so plain. Absent in runs
    /// recorded before it existed (their export simply lacks it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// The `Mcp-Session-Id` the server assigned (Streamable HTTP only;
    /// never for stdio, which has no protocol session), redacted like any
    /// value the server chose. A snapshot is written again when a renewed
    /// session brings a new one, so each call is under the session it
    /// was made in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_session_id: Option<Redacted<String>>,
    /// The pages of the lists the server paginated (`tools/list`,
    /// `prompts/list`, `resources/list`, `resources/templates/list` → the
    /// pages the host asked for, each with its cursor and the whole
    /// `result`, `nextCursor` included), redacted: `--lazy` answers a page
    /// from here exactly as the server did, and wakes the server for a
    /// page not here. Absent when no list had more than one page (a
    /// one-page list is the fields above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_pages: Option<BTreeMap<String, Vec<ListPage>>>,
    /// The `error` a server that does not speak the 2026-07-28 protocol
    /// answered the host's `server/discover` probe with (Claude Code
    /// 2.1.332 probes every server first), redacted: `--lazy` gives the
    /// probe the same answer instead of starting the server for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discover_error: Option<Redacted<Value>>,
}

impl ServerSnapshot {
    /// What makes a snapshot worth writing again: its tools, and its
    /// upstream session (a renewed Streamable HTTP session).
    pub(crate) fn identity(&self) -> (String, Option<String>) {
        (
            self.tools_digest.clone(),
            self.mcp_session_id.as_ref().map(|s| s.as_str().to_owned()),
        )
    }
}

/// One page of a paginated list, as the server answered it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListPage {
    /// The request's `params.cursor`; absent for the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Redacted<Value>>,
    /// The answer's whole `result`.
    pub result: Redacted<Value>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StepType {
    ToolSelected,
    ToolResponse,
    FinalAnswer,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Step {
    pub id: String,
    pub step_index: u64,
    #[serde(rename = "type")]
    pub step_type: StepType,
    /// The host's rendering, e.g. `mcp__github__create_issue`.
    pub qualified_name: Redacted<String>,
    pub server_name: String,
    /// The server's own name for the tool.
    pub tool_name: Redacted<String>,
    pub started_at: String,
    /// `tool_selected`: the arguments (redacted, truncated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Redacted<Value>>,
    /// `tool_response`: the whole `CallToolResult` (redacted, truncated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Redacted<Value>>,
    /// `tool_response`: a JSON-RPC error answer (redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Redacted<Value>>,
    #[serde(default)]
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// `answered`, `cancelled`, `too_large`, `upstream_gone`,
    /// `session_ended`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<Redacted<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<Redacted<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<Redacted<String>>,
    /// sha256 of the canonical redacted arguments (before truncation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_digest: Option<String>,
    /// `tool_response`: `ambiguous` when another call with the same request
    /// id was in flight with this one. The answer was paired first-in,
    /// first-out (the id is all JSON-RPC gives), so it may be the other
    /// call's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation: Option<String>,
    /// Why bodies are missing, when they are (`unparseable`,
    /// `redaction_failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
    /// Secrets replaced in this step's payloads.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redactions: u32,
    /// Payloads serde_json refuses but peers read, stored anyway: what was
    /// replaced in them, by kind and count (`invalid-utf8:2`,
    /// `lone-surrogate:1`, `too-deep:1`). In place, an invalid UTF-8
    /// sequence or a lone surrogate is U+FFFD and a container too deep to
    /// keep is `"[REDACTED:too-deep]"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repaired: Option<Box<str>>,
    /// Bound runs only: what kind of tool this is. Absent in standalone
    /// runs, where every step is an MCP call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<StepKind>,
    /// Bound runs only: the subagent type (`agent_type`) when the step ran
    /// inside a subagent; `agent_id` names the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<Redacted<String>>,
    /// Bound runs only: the `tool_use_id` of the Agent step a subagent's
    /// step is nested under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_tool_use_id: Option<Redacted<String>>,
    /// Bound runs only: the model's text (and thinking summary, where the
    /// transcript has one) just before it chose this tool. Redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Redacted<String>>,
    /// Bound runs only: the turn (1, 2, …) this step belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Bound runs only: the permission decision the host reported for
    /// this call (`PermissionRequest`, `PermissionDenied`), redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<Redacted<Value>>,
    /// `tool_selected` only: the W3C `traceparent` bir-proxy added to the
    /// request's `params._meta` (`BIR_OTLP_TRACEPARENT=1`; the one change
    /// the relay ever makes to a relayed message). Made by bir from the
    /// run id, so plain. The export gives the call's span this span id,
    /// so the server's own spans join the run's trace under it. The
    /// stored `input` is the arguments as the host sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// Bound runs only: told from the host's transcript, not live (the
    /// recorder missed the call's hooks: no daemon, a daemon that died or
    /// was stopped, an HTTP hook that could not connect). `started_at` is
    /// the transcript's time of the call; `duration_ms` the time between
    /// its call and its result rows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recovered: bool,
}

impl Step {
    /// A fresh step (new id) with its place, type and start time; every
    /// other field empty, for the caller to fill.
    pub(crate) fn new(step_index: u64, step_type: StepType, started_at: String) -> Step {
        Step {
            id: new_step_id(),
            step_index,
            step_type,
            qualified_name: Redacted::default(),
            server_name: String::new(),
            tool_name: Redacted::default(),
            started_at,
            input: None,
            output: None,
            error: None,
            is_error: false,
            duration_ms: None,
            outcome: None,
            request_id: None,
            tool_use_id: None,
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
            repaired: None,
            traceparent: None,
            recovered: false,
        }
    }
}

/// What kind of tool a bound run's step used.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StepKind {
    /// A host built-in (Bash, Read, Edit, …).
    Builtin,
    /// A tool of an MCP server (`mcp__<server>__<tool>`).
    Mcp,
    /// The tool that launches a subagent (Claude Code's `Agent`/`Task`).
    Agent,
}

/// A prompt of a bound run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Turn {
    /// 1 for the session's first prompt, then 2, 3, …
    pub turn: u32,
    pub at: String,
    /// The prompt text, redacted and truncated.
    pub prompt: Redacted<String>,
    /// Set when the prompt is not the user's but the host's (a background
    /// subagent's `<task-notification>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// A session event that is not a tool step (see [`RunEvent::SessionEvent`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionEvent {
    /// The hook event's name as the host sent it (`PreCompact`,
    /// `SubagentStart`, …), kept verbatim so unknown events survive.
    pub name: Redacted<String>,
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<Redacted<String>>,
    /// The rest of the payload, redacted (session-wide fields such as
    /// `session_id` and `transcript_path` left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Redacted<Value>>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunFinish {
    pub finished_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Redacted<String>>,
    pub metrics: RunMetrics,
    pub lossy: bool,
    /// Observations lost before they reached the recorder.
    pub dropped: u64,
    /// Bound runs only: why the run ended (`session_end`, `idle_timeout`,
    /// `daemon_shutdown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Bound runs only: the model, when it was learned after the header
    /// was written (from the transcript's first assistant message; the
    /// hooks name it only after a compaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Redacted<String>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunMetrics {
    pub tool_calls: u64,
    pub errors: u64,
    pub total_tool_ms: f64,
    /// The model's tokens over the run, where the host's transcript reports
    /// them (bound runs: Claude Code's `usage`, Codex's `token_count`,
    /// Gemini's `tokens`). No price is derived from them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// The same tokens per turn and model, turns in order: one row per
    /// model that answered in a turn (a subagent's model has a row of its
    /// own in the turn that started it). Turn 0 holds what the model did
    /// before the run's first recorded prompt (a recorder that joined a
    /// session mid-turn). The rows sum to `usage`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turn_usage: Vec<TurnUsage>,
}

impl RunMetrics {
    /// The tokens of turn `turn`, over all its models (`None`: none
    /// recorded).
    pub(crate) fn turn_tokens(&self, turn: u32) -> Option<TokenUsage> {
        let mut sum = TokenUsage::default();
        for row in self.turn_usage.iter().filter(|r| r.turn == turn) {
            sum.add(&row.usage);
        }
        (!sum.is_empty()).then_some(sum)
    }

    /// The models that answered in turn `turn`, in the order recorded.
    pub(crate) fn turn_models(&self, turn: u32) -> Vec<&str> {
        let mut models: Vec<&str> = Vec::new();
        for row in self.turn_usage.iter().filter(|r| r.turn == turn) {
            if let Some(m) = row.model.as_deref()
                && !models.contains(&m)
            {
                models.push(m);
            }
        }
        models
    }
}

/// One model's tokens in one turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TurnUsage {
    /// As [`Turn::turn`]; 0 before the run's first recorded prompt.
    pub turn: u32,
    /// The model as the host's transcript names it (`None`: unnamed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Redacted<String>>,
    pub usage: TokenUsage,
}

/// Token counts as a host reports them (summed over a run or a turn).
///
/// One meaning for every host, the OpenTelemetry one
/// (`gen_ai.usage.input_tokens`): `input` is every input token the model
/// read, cached ones included; `cache_read` and `cache_write` are parts of
/// it. Codex and Gemini count input so; Claude Code's `input_tokens`
/// leaves the cached parts out, so its three counts are added up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TokenUsage {
    /// Input tokens, cached ones included.
    pub input: u64,
    pub output: u64,
    /// Input tokens read from the provider's cache (part of `input`).
    #[serde(default)]
    pub cache_read: u64,
    /// Input tokens written to the provider's cache (part of `input`;
    /// Claude Code).
    #[serde(default)]
    pub cache_write: u64,
}

impl TokenUsage {
    pub(crate) fn is_empty(&self) -> bool {
        *self == TokenUsage::default()
    }
    pub(crate) fn add(&mut self, other: &TokenUsage) {
        // Saturating: the counts are the host's, not ours to trust.
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
    }
    /// The input tokens neither read from nor written to a cache.
    pub(crate) fn uncached_input(&self) -> u64 {
        self.input
            .saturating_sub(self.cache_read)
            .saturating_sub(self.cache_write)
    }
    /// Every token: input (cached included) and output.
    pub(crate) fn total(&self) -> u64 {
        self.input.saturating_add(self.output)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RemoteAck {
    pub up_to: u64,
    pub at: String,
}

/// A fresh `run_<uuid>`.
pub(crate) fn new_run_id() -> String {
    ["run_", &uuid_v4()].concat()
}

/// A fresh `step_<uuid>`.
pub(crate) fn new_step_id() -> String {
    ["step_", &uuid_v4()].concat()
}

/// A random (version 4) UUID from the OS's CSPRNG.
pub(crate) fn uuid_v4() -> String {
    let mut b = random_16();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    // 8-4-4-4-12 hex digits, written into place.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [b'-'; 36];
    let mut at = 0;
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            at += 1;
        }
        out[at] = HEX[usize::from(byte >> 4)];
        out[at + 1] = HEX[usize::from(byte & 15)];
        at += 2;
    }
    // ASCII by construction, so this never falls back.
    String::from_utf8(out.to_vec()).unwrap_or_default()
}

/// A random number (for jitter; not for secrets).
pub(crate) fn random_u64() -> u64 {
    let b = random_16();
    let mut le = [0u8; 8];
    le.copy_from_slice(&b[..8]);
    u64::from_le_bytes(le)
}

/// 16 random bytes. Drawn from the OS a pool at a time: a run makes two
/// step ids per call, and a system call for each was most of their cost.
fn random_16() -> [u8; 16] {
    use ring::rand::SecureRandom;
    use std::cell::RefCell;
    const POOL: usize = 32 * 16;
    thread_local! {
        static RANDOM: RefCell<([u8; POOL], usize)> = const { RefCell::new(([0; POOL], POOL)) };
    }
    RANDOM.with(|cell| {
        let mut guard = cell.borrow_mut();
        let (pool, used) = &mut *guard;
        if *used == POOL {
            if ring::rand::SystemRandom::new().fill(pool).is_err() {
                // No OS randomness: time, pid and a counter, still unique
                // on one machine.
                static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0);
                let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mixed = t ^ (u128::from(std::process::id()) << 64) ^ (u128::from(n) << 96);
                return mixed.to_le_bytes();
            }
            *used = 0;
        }
        let mut out = [0u8; 16];
        out.copy_from_slice(&pool[*used..*used + 16]);
        // Never hand the same bytes out twice.
        pool[*used..*used + 16].fill(0);
        *used += 16;
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_look_right() {
        let id = new_run_id();
        assert!(id.starts_with("run_") && id.len() == 40, "{id}");
        assert_eq!(&id[18..19], "4");
        assert_ne!(new_step_id(), new_step_id());
        // Several pools' worth: all distinct, all version 4 / variant 10.
        let ids: std::collections::HashSet<String> = (0..200).map(|_| uuid_v4()).collect();
        assert_eq!(ids.len(), 200);
        for id in &ids {
            let dashes: Vec<usize> = id.match_indices('-').map(|(i, _)| i).collect();
            assert_eq!(dashes, [8, 13, 18, 23], "{id}");
            assert_eq!(&id[14..15], "4", "{id}");
            assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
        }
    }

    #[test]
    fn exact_numbers_survive_a_round_trip() {
        let step: Step = serde_json::from_str(
            r#"{"id":"s","stepIndex":1,"type":"tool_selected","qualifiedName":"q","serverName":"s","toolName":"t","startedAt":"x","input":{"n":1.50,"big":18446744073709551617},"durationMs":1.5}"#,
        )
        .expect("step");
        let rec = Record {
            seq: 1,
            event: RunEvent::Step(step),
        };
        let json = serde_json::to_string(&rec).expect("ser");
        let back: Record = serde_json::from_str(&json).expect("de");
        let RunEvent::Step(step) = back.event else {
            panic!("not a step")
        };
        assert_eq!(
            serde_json::to_string(&step.input).expect("ser"),
            r#"{"big":18446744073709551617,"n":1.50}"#
        );
    }

    #[test]
    fn records_round_trip() {
        let rec = Record {
            seq: 3,
            event: RunEvent::RemoteAck(RemoteAck {
                up_to: 2,
                at: "t".into(),
            }),
        };
        let json = serde_json::to_string(&rec).expect("ser");
        assert_eq!(
            json,
            r#"{"seq":3,"event":{"kind":"remote_ack","data":{"upTo":2,"at":"t"}}}"#
        );
        let back: Record = serde_json::from_str(&json).expect("de");
        assert!(matches!(
            back.event,
            RunEvent::RemoteAck(RemoteAck { up_to: 2, .. })
        ));
    }
}
