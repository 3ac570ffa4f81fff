//! One host session = one bound run: its counters, its calls in flight,
//! the transcripts it follows, and the rules that turn hook events and
//! proxy records into the run's records.
//!
//! Ordering: `stepIndex` is allocated when a step's first view says it
//! happened — `tool_selected` at `PreToolUse` (or when the proxy's report
//! arrives first), `tool_response` at `PostToolUse` (or the proxy's
//! answer). A step that then waits for its other view keeps that index,
//! so a run's `stepIndex` order is the true order even when the journal
//! (`seq` order) holds a joined step after a later one. `seq` is the order
//! records were emitted.
//!
//! Context: the model's words before a call are known at `PreToolUse` only
//! from `MessageDisplay` events (main agent); the transcript, which also
//! has thinking, is read asynchronously. So `tool_selected` is emitted at
//! once with what is known then (never held for its context: that would
//! delay and reorder the stream), and the `tool_response` carries the
//! context from the transcript (text and thinking, preferred over the
//! MessageDisplay text when both are known). The transcript-wait rule: a
//! response whose call the transcript has not shown yet waits (up to the
//! join grace) for a read under way, and for its agent's transcript to be
//! whole — the turn's `Stop` (main thread) or the `SubagentStop`, whose
//! read comes with it (`waits_for_words`). It keeps the index its first
//! view gave it, so a later call told meanwhile is written (`seq`) before
//! it but ordered (`stepIndex`) after it.
//!
//! The end: `Stop` releases nothing (held steps keep their index, and the
//! async Agent tool's result starts another turn). `SessionEnd` waits, at
//! most the join grace, for reports of servers whose proxy is bound and for
//! transcript reads under way, then finishes. Idleness counts from the
//! last hook event or proxy input: a tool that runs longer than `idle_end`
//! with nothing else happening ends the run (its call recorded as
//! `session_ended`; its late PostToolUse is dropped).

use std::collections::{BTreeSet, HashMap};
use std::time::SystemTime;

mod guide_events;
mod modlink;
mod resume;

use serde_json::{Value, json};

use super::hook::{self, Hook};
use super::join;
use super::transcript::{Seen, Transcript};
use super::wire::ProxyItem;
use super::{EngineConfig, Output, SessionSummary};
use crate::record::model::{
    self, HostInfo, Record, Redacted, RunEvent, RunFinish, RunHeader, RunMetadata, RunMetrics,
    ServerSnapshot, SessionEvent, Step, StepKind, StepType, TokenUsage, Turn, TurnUsage,
};
use crate::record::payload::{self, Prepared};
use crate::redact::Redactor;
use crate::time::rfc3339;

/// Cap on a step's `context`.
const CONTEXT_CAP: usize = 4 * 1024;
/// A transcript read that returned this much is followed by another: the
/// daemon may answer with less than the file holds.
const READ_AGAIN: usize = 1024 * 1024;

/// What a session's handlers need besides the session: the configuration,
/// the redactor, the time, and where outputs go.
pub(super) struct Cx<'a> {
    pub cfg: &'a EngineConfig,
    pub redactor: &'a Redactor,
    pub now: SystemTime,
    pub out: &'a mut Vec<Output>,
}

impl Cx<'_> {
    fn value(&self, v: Value) -> Prepared {
        payload::value(self.redactor, v, self.cfg.payload_cap)
    }
    fn text(&self, s: &str, cap: usize) -> Redacted<String> {
        payload::text(self.redactor, s, cap).0
    }
    /// A name or path from a hook payload (an event or tool name, a cwd,
    /// an agent type), redacted like any other text, and capped.
    fn label(&self, s: &str) -> Redacted<String> {
        self.text(s, LABEL_CAP)
    }
    /// An id the join keeps as sent (`tool_use_id`, `agent_id`), redacted
    /// where it is written to a record, as the standalone recorder writes
    /// it (uncapped).
    fn id(&self, s: &str) -> Redacted<String> {
        payload::label(self.redactor, s)
    }
}

/// Cap on a name or path taken from a hook payload.
const LABEL_CAP: usize = 1024;

/// Hook events after which a session is known from its start.
const CLEAN_STARTS: &[&str] = &[
    "SessionStart",
    "Setup",
    "InstructionsLoaded",
    "UserPromptSubmit",
];

/// A tool call the run has not finished telling.
#[derive(Debug)]
struct Call {
    tool_use_id: Option<String>,
    qualified: String,
    server: String,
    tool: String,
    kind: StepKind,
    agent_id: Option<String>,
    agent_type: Option<Redacted<String>>,
    turn: Option<u32>,
    started_at: String,
    first_seen: SystemTime,
    /// The hook's identity is known (PreToolUse, or PostToolUse /
    /// PostToolBatch when PreToolUse was missed).
    hooked: bool,
    /// The model's arguments as the hook saw them, redacted and capped.
    input: Option<Redacted<Value>>,
    input_digest: Option<String>,
    input_redactions: u32,
    input_withheld: Option<&'static str>,
    /// sha256 of the raw arguments, to find the call a PermissionRequest
    /// (which has no tool_use_id) is about.
    raw_digest: String,
    fingerprint: Option<String>,
    selected_index: Option<u64>,
    selected_emitted: bool,
    response_index: Option<u64>,
    result: Option<HookResult>,
    proxy: Option<ProxyView>,
    correlation: Option<&'static str>,
    permission: Option<Redacted<Value>>,
    /// The main agent's text of its message (MessageDisplay), known at
    /// PreToolUse.
    context: Option<Redacted<String>>,
    /// The model's words from the transcript (text and thinking): the
    /// fuller context, preferred when known.
    transcript_context: Option<Redacted<String>>,
    /// The transcript has shown this call (with or without words before
    /// it): its context is as complete as it will be.
    words_known: bool,
    /// When the call stops waiting for its other view.
    deadline: Option<SystemTime>,
    /// An Agent call already attributed to a subagent.
    claimed: bool,
    /// Told from the transcript: the recorder missed its hooks.
    recovered: bool,
    /// Known from its after-hook only (no before-hook is registered for
    /// it, `Host::before_tool_matcher`), on a host whose transcript says
    /// when the model made each call (Codex): its start is the
    /// transcript's, and its selection is told once the transcript shows
    /// it.
    start_from_transcript: bool,
}

impl Call {
    /// A call known by its name only (`qualified`, server, tool, kind):
    /// no view of it yet, no place in the order.
    fn new(
        (qualified, server, tool, kind): (String, String, String, StepKind),
        turn: Option<u32>,
        started_at: String,
        first_seen: SystemTime,
    ) -> Call {
        Call {
            tool_use_id: None,
            qualified,
            server,
            tool,
            kind,
            agent_id: None,
            agent_type: None,
            turn,
            started_at,
            first_seen,
            hooked: false,
            input: None,
            input_digest: None,
            input_redactions: 0,
            input_withheld: None,
            raw_digest: String::new(),
            fingerprint: None,
            selected_index: None,
            selected_emitted: false,
            response_index: None,
            result: None,
            proxy: None,
            correlation: None,
            permission: None,
            context: None,
            transcript_context: None,
            words_known: false,
            deadline: None,
            claimed: false,
            recovered: false,
            start_from_transcript: false,
        }
    }
}

impl Call {
    /// Takes what the transcript says of this call's words, once it has
    /// shown the call (`transcript_words`).
    fn learn_words(&mut self, words: Option<Option<Redacted<String>>>) {
        if let Some(words) = words {
            self.words_known = true;
            self.transcript_context = words;
        }
    }
}

#[derive(Debug)]
struct HookResult {
    output: Option<Redacted<Value>>,
    error: Option<Redacted<Value>>,
    is_error: bool,
    duration_ms: Option<f64>,
    outcome: &'static str,
    redactions: u32,
    withheld: Option<&'static str>,
}

#[derive(Debug)]
struct ProxyView {
    selected: Step,
    response: Step,
    fingerprint: Option<String>,
}

#[derive(Debug, Default)]
struct Agent {
    agent_type: Option<Redacted<String>>,
    /// The Agent call this subagent runs under.
    parent: Option<String>,
    /// Its SubagentStop was seen: its transcript is whole.
    stopped: bool,
    /// The turn its SubagentStart came in: its tokens are that turn's.
    turn: Option<u32>,
}

pub(super) struct Session {
    pub id: String,
    pub run_id: String,
    cwd: String,
    started_at: SystemTime,
    pub last_event_at: SystemTime,
    opened: bool,
    pub finished: bool,
    /// Records told before the run opened (the session's start, server
    /// snapshots): written right after its header, if it ever opens.
    early: Vec<RunEvent>,
    pub hooks_seen: bool,
    lossy: bool,
    note: Option<String>,
    dropped: u64,
    next_seq: u64,
    next_step: u64,
    turn: u32,
    model: Option<Redacted<String>>,
    model_in_header: bool,
    host_version: Option<String>,
    calls: Vec<Call>,
    /// tool_use_ids already told in full, to ignore late views of them.
    done: HashMap<String, SystemTime>,
    /// Fingerprints of calls told without a proxy view, to ignore a
    /// proxy's late report of them.
    done_unjoined: Vec<(String, SystemTime)>,
    agents: HashMap<String, Agent>,
    /// The main agent's text of its current message (MessageDisplay), the
    /// context of every tool call in that message: kept until the
    /// message's PostToolBatch, the turn's Stop or the next prompt.
    display: String,
    /// The `message_id` `display` belongs to.
    display_message: String,
    transcript_path: Option<String>,
    /// `None`: the main transcript; `Some(agent_id)`: a subagent's.
    transcripts: HashMap<Option<String>, Transcript>,
    /// A Stop without `last_assistant_message`: the transcript's will do.
    awaiting_answer: bool,
    /// The current turn's Stop was seen: the main transcript is whole.
    turn_stopped: bool,
    last_answer: Option<Redacted<String>>,
    /// proxy_id → server name.
    pub proxies: HashMap<String, String>,
    /// Servers whose proxy said goodbye and none other is bound.
    gone_servers: BTreeSet<String>,
    wrapped: BTreeSet<String>,
    snapshots: HashMap<String, (String, Option<String>)>,
    /// Each wrapped server's tool names (its latest `tools/list`): the
    /// server's own spelling of a tool a host renamed.
    server_tools: HashMap<String, Vec<String>>,
    metrics: RunMetrics,
    /// SessionEnd was seen: the run finishes when nothing waits any more,
    /// or at this time.
    ending: Option<SystemTime>,
    /// What the Claude Code mod reported (`session/modlink.rs`).
    modlink: modlink::ModState,
    /// Pins of a guide waiting for the proxy's report (`session/guide_events.rs`).
    guide: guide_events::GuidePins,
    /// The recorder joined this session under way: its first hook (and any
    /// that follow) wait here while the transcript is read from its start,
    /// so what came before is told first, in order (`catch_up`).
    catching_up: bool,
    /// A run another daemon left open, taken up again (`session/resume.rs`):
    /// its first hook reads the transcript from the start, whatever the
    /// hook, and what the run does not hold is told from it.
    resuming: bool,
    /// A catch-up waiting for the transcript to show the first stashed
    /// hook's call gives up at this time (`catch_up_waits`).
    catch_up_until: Option<SystemTime>,
    stash: Vec<Hook>,
    /// What the transcripts showed that the hooks have not told (yet):
    /// taken in file order when the transcript is whole (`Stop`, the end,
    /// a catch-up). `None`: the main thread; `Some`: a subagent.
    unheard: Vec<(Option<String>, Seen)>,
    /// Prompts told live and not yet met in the transcript (matched in
    /// order, not by text: the transcript may spell a prompt otherwise).
    live_prompts: u32,
    /// Prompt texts told from the transcript and not (yet) by a hook.
    recovered_prompts: HashMap<String, u32>,
    /// The turn whose final answer was told.
    answered_turn: Option<u32>,
    /// Steps told from the transcript.
    recovered: u64,
    /// Permission requests about a call the run has not seen yet (a
    /// built-in tool's `PreToolUse` does not reach bir): the tool, the
    /// digest of its raw arguments, and what the request said. Taken by
    /// the call when its `PostToolUse` or its transcript rows arrive.
    asked: Vec<(String, String, Option<Redacted<Value>>)>,
    /// The host's adapter and what it remembers between hooks (`hosts`).
    pub adapter: super::hosts::Adapter,
    /// The agent's process that runs this session's hooks (and starts its
    /// MCP servers), as its hooks named it: what binds a proxy whose
    /// environment names no session (`process`).
    pub host_process: Option<super::process::ProcessId>,
    /// The answer a Stop gave that the transcript's is preferred to
    /// (Gemini's `prompt_response`): told if the transcript has none.
    answer_fallback: Option<String>,
}

impl Session {
    pub(super) fn new(id: &str, now: SystemTime) -> Session {
        Session {
            id: id.to_owned(),
            run_id: model::new_run_id(),
            cwd: String::new(),
            started_at: now,
            last_event_at: now,
            opened: false,
            finished: false,
            early: Vec::new(),
            hooks_seen: false,
            lossy: false,
            note: None,
            dropped: 0,
            next_seq: 1,
            next_step: 1,
            turn: 0,
            model: None,
            model_in_header: false,
            host_version: None,
            calls: Vec::new(),
            done: HashMap::new(),
            done_unjoined: Vec::new(),
            agents: HashMap::new(),
            display: String::new(),
            display_message: String::new(),
            transcript_path: None,
            transcripts: HashMap::new(),
            awaiting_answer: false,
            turn_stopped: false,
            last_answer: None,
            proxies: HashMap::new(),
            gone_servers: BTreeSet::new(),
            wrapped: BTreeSet::new(),
            snapshots: HashMap::new(),
            server_tools: HashMap::new(),
            metrics: RunMetrics::default(),
            ending: None,
            modlink: modlink::ModState::default(),
            guide: guide_events::GuidePins::default(),
            catching_up: false,
            resuming: false,
            catch_up_until: None,
            stash: Vec::new(),
            unheard: Vec::new(),
            live_prompts: 0,
            recovered_prompts: HashMap::new(),
            answered_turn: None,
            recovered: 0,
            asked: Vec::new(),
            host_process: None,
            adapter: super::hosts::Adapter::default(),
            answer_fallback: None,
        }
    }

    pub(super) fn summary(&self) -> SessionSummary {
        let mut proxies: Vec<String> = self.proxies.values().cloned().collect();
        proxies.sort();
        SessionSummary {
            session_id: self.id.clone(),
            run_id: self.run_id.clone(),
            cwd: self.cwd.clone(),
            steps: self.next_step - 1,
            proxies,
            last_event_at: self.last_event_at,
        }
    }

    // ---- records -------------------------------------------------------

    fn push(&mut self, cx: &mut Cx, event: RunEvent) {
        let record = Record {
            seq: self.next_seq,
            event,
        };
        self.next_seq += 1;
        cx.out.push(Output::Record {
            run_id: self.run_id.clone(),
            record: Box::new(record),
        });
    }

    /// Writes the run's header (once), then what was told before it.
    fn open(&mut self, cx: &mut Cx, input: Option<Redacted<String>>) {
        if self.opened {
            return;
        }
        self.opened = true;
        self.model_in_header = self.model.is_some();
        let metadata = RunMetadata {
            recorder: "bir".into(),
            tier: "bound".into(),
            host: Some(HostInfo {
                app: self.adapter.host.app().into(),
                version: self
                    .host_version
                    .clone()
                    .or_else(|| {
                        self.adapter
                            .version
                            .as_deref()
                            .map(|v| cx.label(v).into_inner())
                    })
                    .unwrap_or_default(),
            }),
            wrapped_servers: self.wrapped.iter().cloned().collect(),
            server_info: None,
            protocol_version: None,
            cwd: self.cwd.clone(),
            session_id: Some(self.id.clone()),
            bir_version: env!("CARGO_PKG_VERSION").into(),
            lossy: self.lossy,
            model: self.model.clone(),
            note: self.note.clone(),
            replay_of: None,
            made_by: None,
        };
        let header = RunHeader {
            id: self.run_id.clone(),
            started_at: rfc3339(self.started_at),
            input,
            metadata,
        };
        self.push(cx, RunEvent::RunStarted(header));
        for event in std::mem::take(&mut self.early) {
            self.push(cx, event);
        }
    }

    fn emit(&mut self, cx: &mut Cx, event: RunEvent) {
        self.open(cx, None);
        self.push(cx, event);
    }

    /// A record that may wait for the run to open (and is dropped with a
    /// session that never does).
    fn emit_early(&mut self, cx: &mut Cx, event: RunEvent) {
        if self.opened {
            self.push(cx, event);
        } else {
            self.early.push(event);
        }
    }

    fn next_index(&mut self) -> u64 {
        let i = self.next_step;
        self.next_step += 1;
        i
    }

    fn session_event(&mut self, cx: &mut Cx, h: &Hook, early: bool) {
        let data = h.event_data().and_then(|d| cx.value(d).value);
        let event = RunEvent::SessionEvent(SessionEvent {
            name: cx.label(&h.name),
            at: rfc3339(cx.now),
            agent_id: h.agent_id().map(|id| cx.id(id)),
            data,
        });
        if early {
            self.emit_early(cx, event);
        } else {
            self.emit(cx, event);
        }
    }

    // ---- hooks ---------------------------------------------------------

    pub(super) fn on_hook(&mut self, cx: &mut Cx, h: &Hook) {
        self.last_event_at = cx.now;
        if self.catching_up {
            self.stash
                .push(Hook::new(h.name.clone(), h.payload.clone()));
            return;
        }
        if !self.hooks_seen || self.resuming {
            self.hooks_seen = true;
            // A compaction's restart, or a subagent's own prompt (Codex),
            // is no start of the session.
            let not_a_start = (h.name == "SessionStart" && h.source() == Some("compact"))
                || (h.name == "UserPromptSubmit" && h.agent_id().is_some());
            let clean = !self.resuming && CLEAN_STARTS.contains(&h.name.as_str()) && !not_a_start;
            if !clean && let Some(path) = h.transcript_path() {
                // Read what came before from the transcript's start; this
                // hook waits for it (`catch_up`).
                self.transcript_path = Some(path.to_owned());
                if let Some(cwd) = h.cwd().filter(|c| !c.is_empty()) {
                    self.cwd = cx.label(cwd).into_inner();
                }
                self.catching_up = true;
                self.stash
                    .push(Hook::new(h.name.clone(), h.payload.clone()));
                self.note = Some(format!(
                    "the recorder joined this session under way (first event: {}); \
                     what came before is recovered from the transcript",
                    cx.label(&h.name)
                ));
                self.request_read(cx, None);
                self.resuming = false;
                return;
            }
            self.resuming = false;
            if !clean {
                self.lossy = true;
                self.note = Some(format!(
                    "the recorder joined this session under way (first event: {}); \
                     what happened before is missing",
                    cx.label(&h.name)
                ));
            }
        }
        if let Some(cwd) = h.cwd().filter(|c| !c.is_empty())
            && self.cwd.is_empty()
        {
            self.cwd = cx.label(cwd).into_inner();
        }
        // A subagent's hooks may name its own transcript (Codex: the
        // child's rollout); the run's stays the main agent's.
        if let Some(path) = h.transcript_path()
            && h.agent_id().is_none()
        {
            self.transcript_path = Some(path.to_owned());
        }
        if self.model.is_none()
            && let Some(m) = h.model()
        {
            self.model = Some(cx.label(m));
        }
        match h.name.as_str() {
            "SessionStart" => {
                if let Some(m) = h.model() {
                    self.model = Some(cx.label(m));
                }
                self.session_event(cx, h, true);
                // Other agents' transcripts say the host's version from
                // their first line (Codex's `session_meta`): read before
                // the run's header is written at the first prompt.
                if h.host != super::hosts::Host::ClaudeCode {
                    self.request_read(cx, None);
                }
            }
            "Setup" | "InstructionsLoaded" => self.session_event(cx, h, true),
            // A subagent's own prompt (Codex fires UserPromptSubmit for
            // it, with its `agent_id`) starts that subagent: the user's
            // turn goes on.
            "UserPromptSubmit" if h.agent_id().is_some() => self.on_subagent_prompt(cx, h),
            "UserPromptSubmit" => self.on_prompt(cx, h),
            "PreToolUse" => self.on_pre(cx, h),
            "PostToolUse" | "PostToolUseFailure" => self.on_post(cx, h),
            "PostToolBatch" => self.on_batch(cx, h),
            "PermissionRequest" | "PermissionDenied" => self.on_permission(cx, h),
            "SubagentStart" => self.on_subagent_start(cx, h),
            "SubagentStop" => self.on_subagent_stop(cx, h),
            "MessageDisplay" => {
                if h.agent_id().is_none()
                    && let Some((message, delta)) = h.display_delta()
                {
                    if message != self.display_message {
                        self.display.clear();
                        self.display_message = message.to_owned();
                    }
                    self.display.push_str(delta);
                }
            }
            "Stop" => self.on_stop(cx, h),
            "SessionEnd" => {
                self.session_event(cx, h, true);
                self.request_reads_for_end(cx);
                self.ending = Some(cx.now + cx.cfg.join_grace);
            }
            _ => self.session_event(cx, h, false),
        }
        self.settle(cx);
    }

    fn on_prompt(&mut self, cx: &mut Cx, h: &Hook) {
        // The last turn's answer, if its transcript never told it.
        if self.awaiting_answer
            && let Some(text) = self.answer_fallback.take()
        {
            let text = cx.text(&text, cx.cfg.payload_cap);
            self.final_answer(cx, text);
        }
        self.turn_stopped = false;
        let raw = h.prompt().unwrap_or("");
        if take_one(&mut self.recovered_prompts, raw) {
            // Already told from the transcript (a catch-up read it first).
            return;
        }
        self.live_prompts += 1;
        let prompt = cx.text(raw, cx.cfg.payload_cap);
        self.display.clear();
        self.turn += 1;
        if !self.opened {
            // The first prompt is the run's input (a run opened by
            // something else first, after a restart, has none).
            let input = (self.turn == 1).then(|| prompt.clone());
            self.open(cx, input);
        }
        let turn = Turn {
            turn: self.turn,
            at: rfc3339(cx.now),
            prompt,
            origin: hook::prompt_origin(raw).map(str::to_owned),
        };
        self.push(cx, RunEvent::Turn(turn));
    }

    fn current_turn(&self) -> Option<u32> {
        (self.turn > 0).then_some(self.turn)
    }

    /// A call as the hook names it, with its arguments prepared.
    fn call_from_hook(&self, cx: &mut Cx, h: &Hook, tool_name: &str, args: Option<&Value>) -> Call {
        let (kind, server, mut tool) = hook::classify(h.host, tool_name, h.mcp_server());
        if kind == StepKind::Mcp
            && let Some(real) = self
                .server_tools
                .get(&server)
                .and_then(|names| hook::server_spelling(&tool, names))
        {
            tool = real;
        }
        let mut raw_args = args.cloned().unwrap_or(Value::Null);
        join::strip_call_id(&mut raw_args);
        let raw_digest = crate::codec::sha256_hex(&model::canonical(&raw_args));
        let prepared = if raw_args.is_null() {
            Prepared::default()
        } else {
            cx.value(raw_args)
        };
        let fingerprint = match (&prepared.value, kind) {
            (Some(v), StepKind::Mcp) => Some(join::fingerprint(
                &server,
                &tool,
                &prepared
                    .digest
                    .clone()
                    .unwrap_or_else(|| join::args_digest(v)),
            )),
            _ => None,
        };
        Call {
            agent_id: h.agent_id().map(str::to_owned),
            agent_type: h.agent_type().map(|t| cx.label(t)),
            hooked: true,
            input: prepared.value,
            input_digest: prepared.digest,
            input_redactions: prepared.redactions,
            input_withheld: prepared.withheld,
            raw_digest,
            fingerprint,
            ..Call::new(
                (tool_name.to_owned(), server, tool, kind),
                self.current_turn(),
                rfc3339(cx.now),
                cx.now,
            )
        }
    }

    /// Gives `call` (which may hold only a proxy's view) the hook's
    /// identity.
    fn adopt_identity(target: &mut Call, from: Call) {
        target.hooked = true;
        // A live hook's view replaces one recovered from the transcript.
        target.recovered = from.recovered;
        target.tool_use_id = from.tool_use_id.or(target.tool_use_id.take());
        target.qualified = from.qualified;
        target.kind = from.kind;
        target.agent_id = from.agent_id;
        target.agent_type = from.agent_type;
        target.turn = from.turn;
        target.started_at = from.started_at;
        target.input = from.input;
        target.input_digest = from.input_digest;
        target.input_redactions = from.input_redactions;
        target.input_withheld = from.input_withheld;
        target.raw_digest = from.raw_digest;
        if target.context.is_none() {
            target.context = from.context;
        }
        if !target.words_known {
            target.transcript_context = from.transcript_context;
            target.words_known = from.words_known;
        }
        if target.proxy.is_none() {
            target.server = from.server;
            target.tool = from.tool;
        }
        target.fingerprint = from.fingerprint.or(target.fingerprint.take());
    }

    fn find(&self, tool_use_id: &str) -> Option<usize> {
        self.calls
            .iter()
            .position(|c| c.tool_use_id.as_deref() == Some(tool_use_id))
    }

    /// The oldest proxy report without a key that a hooked call with
    /// `fingerprint` may be joined with.
    fn unkeyed_proxy_for(
        &self,
        fingerprint: &str,
        now: SystemTime,
        window: std::time::Duration,
    ) -> Option<usize> {
        self.calls.iter().position(|c| {
            !c.hooked
                && c.tool_use_id.is_none()
                && c.proxy
                    .as_ref()
                    .is_some_and(|p| p.fingerprint.as_deref() == Some(fingerprint))
                && within(c.first_seen, now, window)
        })
    }

    fn on_pre(&mut self, cx: &mut Cx, h: &Hook) {
        let Some(id) = h.tool_use_id().map(str::to_owned) else {
            return self.session_event(cx, h, false);
        };
        if self.done.contains_key(&id) {
            return;
        }
        let mut call = self.call_from_hook(cx, h, h.tool_name().unwrap_or(""), h.tool_input());
        call.tool_use_id = Some(id.clone());
        if call.agent_id.is_none() && !self.display.trim().is_empty() {
            call.context = Some(cx.text(self.display.trim(), CONTEXT_CAP));
        }
        let words = self.transcript_words(cx, call.agent_id.as_deref(), &id);
        call.learn_words(words);
        self.attach_hook_view(cx, call);
        let agent = h.agent_id().map(str::to_owned);
        self.request_read(cx, agent);
    }

    fn on_post(&mut self, cx: &mut Cx, h: &Hook) {
        let Some(id) = h.tool_use_id().map(str::to_owned) else {
            return self.session_event(cx, h, false);
        };
        if self.done.contains_key(&id) {
            return;
        }
        let failed = h.name == "PostToolUseFailure";
        let result = if failed {
            let error = h.payload.get("error").cloned().map(|e| cx.value(e));
            let interrupted = h.payload["is_interrupt"].as_bool().unwrap_or(false);
            let error = error.unwrap_or_default();
            HookResult {
                output: None,
                error: error.value,
                is_error: true,
                duration_ms: h.duration_ms(),
                outcome: if interrupted { "cancelled" } else { "answered" },
                redactions: error.redactions,
                withheld: error.withheld,
            }
        } else {
            let output = h
                .payload
                .get("tool_response")
                .cloned()
                .map(|v| cx.value(v))
                .unwrap_or_default();
            HookResult {
                output: output.value,
                error: None,
                is_error: false,
                duration_ms: h.duration_ms(),
                outcome: "answered",
                redactions: output.redactions,
                withheld: output.withheld,
            }
        };
        let i = self.hooked_call(cx, h, &id, h.tool_name().unwrap_or(""), h.tool_input());
        // The Agent tool names the subagent it launched.
        if let Some(agent_id) = h.spawned_agent_id() {
            let agent = self.agents.entry(agent_id).or_default();
            agent.parent = Some(id.clone());
            self.calls[i].claimed = true;
        }
        self.calls[i].result = Some(result);
        // By now the transcript holds the message that made this call: if
        // the read asked for at PreToolUse did not bring its words, read
        // again (the response waits for it).
        if !self.calls[i].words_known {
            let agent = self.calls[i].agent_id.clone();
            self.request_read(cx, agent);
        }
    }

    /// The call `id`, creating it from this (Post or batch) event's view if
    /// its PreToolUse was missed, and joining a waiting proxy report.
    fn hooked_call(
        &mut self,
        cx: &mut Cx,
        h: &Hook,
        id: &str,
        tool: &str,
        args: Option<&Value>,
    ) -> usize {
        if let Some(i) = self.find(id)
            && self.calls[i].hooked
        {
            return i;
        }
        let mut call = self.call_from_hook(cx, h, tool, args);
        call.tool_use_id = Some(id.to_owned());
        // First seen at its end (a built-in tool's `PreToolUse` does not
        // reach bir): it started its duration ago.
        if let Some(ms) = h.duration_ms().filter(|ms| ms.is_finite() && *ms >= 0.0)
            && let Some(start) = cx
                .now
                .checked_sub(std::time::Duration::from_secs_f64(ms / 1000.0))
        {
            call.started_at = rfc3339(start);
        }
        self.take_asked(&mut call);
        call.start_from_transcript = self.adapter.host.transcript_format()
            == Some(super::host::TranscriptFormat::CodexRollout);
        let words = self.transcript_words(cx, call.agent_id.as_deref(), id);
        call.learn_words(words);
        if let Some(at) = self.transcript_start(&call) {
            call.started_at = at;
        }
        self.attach_hook_view(cx, call)
    }

    /// When the transcript says the model made `call`, for a call known
    /// from its after-hook only (`start_from_transcript`).
    fn transcript_start(&self, call: &Call) -> Option<String> {
        if !call.start_from_transcript {
            return None;
        }
        let id = call.tool_use_id.as_deref()?;
        self.transcripts
            .get(&call.agent_id)?
            .call_at
            .get(id)
            .cloned()
    }

    /// Puts the hook's view of a call where it belongs: on the proxy's
    /// report of it if one waits (by tool_use_id, else by fingerprint),
    /// else as a new call. Returns its position.
    fn attach_hook_view(&mut self, cx: &Cx, call: Call) -> usize {
        let keyed = call.tool_use_id.as_deref().and_then(|id| self.find(id));
        let existing = keyed.or_else(|| {
            let fp = call.fingerprint.as_deref()?;
            let i = self.unkeyed_proxy_for(fp, cx.now, cx.cfg.fingerprint_window)?;
            self.calls[i].correlation = Some(join::BY_FINGERPRINT);
            Some(i)
        });
        match existing {
            Some(i) => {
                Self::adopt_identity(&mut self.calls[i], call);
                let c = &self.calls[i];
                if c.selected_emitted || c.selected_index.is_some() {
                    return i;
                }
                // A view that took no place (`before_unknown`) is told in
                // the order of its hook view, as a call first seen now.
                let c = self.calls.remove(i);
                self.calls.push(c);
                self.calls.len() - 1
            }
            None => {
                self.calls.push(call);
                self.calls.len() - 1
            }
        }
    }

    /// PostToolBatch: the calls of one model message, each with the result
    /// the model got. A call that had no PostToolUse did not run (refused
    /// permission, unknown tool, blocked by a hook): its result comes from
    /// here, as an error with outcome `not_run`.
    fn on_batch(&mut self, cx: &mut Cx, h: &Hook) {
        if h.agent_id().is_none() {
            self.display.clear();
        }
        for entry in h.tool_calls() {
            let Some(id) = entry["tool_use_id"].as_str() else {
                continue;
            };
            if self.done.contains_key(id) {
                continue;
            }
            if self
                .find(id)
                .is_some_and(|i| self.calls[i].result.is_some())
            {
                continue;
            }
            let tool = entry["tool_name"].as_str().unwrap_or("");
            let i = self.hooked_call(cx, h, id, tool, entry.get("tool_input"));
            let output = entry
                .get("tool_response")
                .cloned()
                .map(|v| cx.value(v))
                .unwrap_or_default();
            self.calls[i].result = Some(HookResult {
                output: output.value,
                error: None,
                is_error: true,
                duration_ms: None,
                outcome: "not_run",
                redactions: output.redactions,
                withheld: output.withheld,
            });
        }
    }

    fn on_permission(&mut self, cx: &mut Cx, h: &Hook) {
        // Without a tool_use_id, the call is found by its tool and the
        // digest of its raw arguments (`Call::raw_digest`).
        let unnamed = h.tool_use_id().is_none().then(|| {
            let args = h.tool_input().unwrap_or(&Value::Null);
            (
                h.tool_name().unwrap_or("").to_owned(),
                join::args_digest(args),
            )
        });
        let target = match (&unnamed, h.tool_use_id()) {
            (None, Some(id)) => self.find(id),
            (Some((tool, digest)), _) => self.calls.iter().position(|c| {
                c.hooked
                    && c.result.is_none()
                    && c.permission.is_none()
                    && c.qualified == *tool
                    && c.raw_digest == *digest
            }),
            (None, None) => None,
        };
        let mut decision = h.event_data().unwrap_or_else(|| json!({}));
        if let Some(map) = decision.as_object_mut() {
            map.remove("tool_input");
            map.remove("tool_name");
            map.remove("tool_use_id");
            map.insert("event".into(), Value::String(h.name.clone()));
        }
        let decision = cx.value(decision).value;
        match (target, unnamed) {
            (Some(i), _) => self.calls[i].permission = decision,
            // Asked before a call the run has not seen: its `PostToolUse`,
            // or the transcript, brings it.
            (None, Some((tool, digest))) => self.asked.push((tool, digest, decision)),
            (None, None) => {}
        }
        self.session_event(cx, h, false);
    }

    /// Gives `call` the permission request asked about it before the run
    /// saw it (same tool, same arguments), if any; whether there was one.
    fn take_asked(&mut self, call: &mut Call) -> bool {
        let Some(at) = self
            .asked
            .iter()
            .position(|(tool, digest, _)| *tool == call.qualified && *digest == call.raw_digest)
        else {
            return false;
        };
        let (_, _, decision) = self.asked.remove(at);
        if call.permission.is_none() {
            call.permission = decision;
        }
        true
    }

    fn on_subagent_start(&mut self, cx: &mut Cx, h: &Hook) {
        if let Some(agent_id) = h.agent_id() {
            let known = self
                .agents
                .get(agent_id)
                .is_some_and(|a| a.parent.is_some());
            // The Agent call that launched it, unless its PostToolUse
            // (`agentId`) already said: the most recent one still running
            // and not yet attributed. That PostToolUse corrects a guess.
            let guess = if known {
                None
            } else {
                self.calls
                    .iter_mut()
                    .rev()
                    .find(|c| {
                        c.kind == StepKind::Agent && c.hooked && c.result.is_none() && !c.claimed
                    })
                    .and_then(|c| {
                        c.claimed = true;
                        c.tool_use_id.clone()
                    })
            };
            let turn = self.turn;
            let agent = self.agents.entry(agent_id.to_owned()).or_default();
            agent.turn.get_or_insert(turn);
            agent.agent_type = h.agent_type().map(|t| cx.label(t));
            if agent.parent.is_none() {
                agent.parent = guess;
            }
        }
        self.session_event(cx, h, false);
    }

    /// The prompt a subagent was given, as its own `UserPromptSubmit`
    /// (Codex): the subagent's start, kept as a session event of that
    /// agent (its steps nest under the call that spawned it; its
    /// transcript is read as that agent's from its SubagentStop on).
    fn on_subagent_prompt(&mut self, cx: &mut Cx, h: &Hook) {
        let Some(agent_id) = h.agent_id().map(str::to_owned) else {
            return;
        };
        let turn = self.turn;
        let agent = self.agents.entry(agent_id).or_default();
        agent.turn.get_or_insert(turn);
        if agent.agent_type.is_none() {
            agent.agent_type = h.agent_type().map(|t| cx.label(t));
        }
        self.session_event(cx, h, false);
    }

    fn on_subagent_stop(&mut self, cx: &mut Cx, h: &Hook) {
        self.session_event(cx, h, false);
        if let Some(agent_id) = h.agent_id().map(str::to_owned) {
            self.agents.entry(agent_id.clone()).or_default().stopped = true;
            if let Some(path) = h.agent_transcript_path() {
                let format = self.adapter.host.transcript_format().unwrap_or_default();
                let turn = self.turn;
                self.transcripts
                    .entry(Some(agent_id.clone()))
                    .or_insert_with(|| {
                        let mut t = Transcript::with_format(path.to_owned(), format);
                        t.opened_in_turn = turn;
                        t
                    })
                    .path = path.to_owned();
            }
            self.request_read(cx, Some(agent_id));
        }
    }

    fn on_stop(&mut self, cx: &mut Cx, h: &Hook) {
        self.turn_stopped = true;
        self.display.clear();
        if h.has_background_tasks() {
            self.session_event(cx, h, false);
        }
        match h.last_assistant_message() {
            // The mod already gave this turn's answer.
            _ if self.modlink.answered_turn == Some(self.turn) => {}
            // So did the transcript (a catch-up at this very Stop).
            _ if self.answered_turn == Some(self.turn) && self.turn > 0 => {}
            Some(text) if !text.trim().is_empty() => {
                let text = cx.text(text, cx.cfg.payload_cap);
                self.final_answer(cx, text);
            }
            _ => {
                self.awaiting_answer = true;
                self.answer_fallback = h.answer_fallback().map(str::to_owned);
            }
        }
        self.request_read(cx, None);
    }

    fn final_answer(&mut self, cx: &mut Cx, text: Redacted<String>) {
        self.final_answer_at(cx, text, rfc3339(cx.now), false);
    }

    fn final_answer_at(
        &mut self,
        cx: &mut Cx,
        text: Redacted<String>,
        at: String,
        recovered: bool,
    ) {
        self.awaiting_answer = false;
        self.answered_turn = self.current_turn();
        self.answer_fallback = None;
        let step = Step {
            output: Some(Redacted::from_text(text.clone())),
            turn: self.current_turn(),
            recovered,
            ..Step::new(self.next_index(), StepType::FinalAnswer, at)
        };
        self.last_answer = Some(text);
        self.emit(cx, RunEvent::Step(step));
    }

    // ---- proxies -------------------------------------------------------

    pub(super) fn on_register(&mut self, cx: &mut Cx, reg: &super::wire::ProxyRegister) {
        self.last_event_at = cx.now;
        if self.cwd.is_empty() {
            self.cwd = cx.label(&reg.cwd).into_inner();
        }
        if let Some(host) = &reg.host
            && !host.version.is_empty()
        {
            // As the proxy read it from its environment: outside data.
            self.host_version = Some(cx.label(&host.version).into_inner());
        }
        self.proxies
            .insert(reg.proxy_id.clone(), reg.server_name.clone());
        self.gone_servers.remove(&reg.server_name);
        self.wrapped.insert(reg.server_name.clone());
    }

    pub(super) fn on_proxy_gone(&mut self, cx: &mut Cx, proxy_id: &str) {
        let Some(server) = self.proxies.remove(proxy_id) else {
            return;
        };
        if !self.proxies.values().any(|s| *s == server) {
            self.gone_servers.insert(server);
        }
        self.settle(cx);
    }

    pub(super) fn on_records(&mut self, cx: &mut Cx, recs: super::wire::ProxyRecords) {
        self.last_event_at = cx.now;
        if recs.lost > 0 {
            self.lossy = true;
            self.dropped += recs.lost;
        }
        self.wrapped.insert(recs.server_name.clone());
        for item in recs.items {
            match item {
                ProxyItem::Snapshot(snapshot) => self.on_snapshot(cx, *snapshot),
                ProxyItem::Call { selected, response } => {
                    self.on_proxy_call(cx, &recs.server_name, *selected, *response)
                }
            }
        }
        self.settle(cx);
    }

    fn on_snapshot(&mut self, cx: &mut Cx, snapshot: ServerSnapshot) {
        let names = snapshot
            .tools
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        self.server_tools
            .insert(snapshot.server_name.clone(), names);
        let seen = snapshot.identity();
        if self.snapshots.get(&snapshot.server_name) == Some(&seen) {
            return;
        }
        self.snapshots.insert(snapshot.server_name.clone(), seen);
        self.emit_early(cx, RunEvent::ServerSnapshot(snapshot));
    }

    fn on_proxy_call(&mut self, cx: &mut Cx, server: &str, mut selected: Step, response: Step) {
        let mut key = selected
            .tool_use_id
            .clone()
            .map(Redacted::into_inner)
            .filter(|k| !k.is_empty());
        let injected = selected
            .input
            .as_mut()
            .and_then(join::strip_prepared_call_id);
        if key.is_none() {
            key = injected;
        }
        if let Some(k) = &key {
            self.check_pin(cx, k, &selected);
        }
        let server = if selected.server_name.is_empty() {
            server.to_owned()
        } else {
            selected.server_name.clone()
        };
        let digest = match &selected.input {
            Some(input) if input.get("truncated") != Some(&Value::Bool(true)) => {
                Some(join::args_digest(input))
            }
            _ => selected.args_digest.clone(),
        };
        let fingerprint = digest.map(|d| join::fingerprint(&server, &selected.tool_name, &d));
        if let Some(k) = &key {
            if self.done.contains_key(k) {
                log::debug!(
                    "a proxy report for call {k}, already recorded without it, came too late"
                );
                return;
            }
        } else if let Some(fp) = &fingerprint
            && let Some(pos) = self
                .done_unjoined
                .iter()
                .position(|(f, at)| f == fp && within(*at, cx.now, cx.cfg.fingerprint_window))
        {
            self.done_unjoined.remove(pos);
            log::debug!("a proxy report came after its call was recorded without it");
            return;
        }
        let view = ProxyView {
            selected,
            response,
            fingerprint: fingerprint.clone(),
        };
        let target = match &key {
            Some(k) => self.find(k),
            None => fingerprint.as_deref().and_then(|fp| {
                self.calls.iter().position(|c| {
                    c.hooked
                        && c.proxy.is_none()
                        && c.kind == StepKind::Mcp
                        && c.fingerprint.as_deref() == Some(fp)
                        && within(c.first_seen, cx.now, cx.cfg.fingerprint_window)
                })
            }),
        };
        match target {
            Some(i) => {
                let call = &mut self.calls[i];
                if key.is_none() {
                    call.correlation = Some(join::BY_FINGERPRINT);
                }
                if call.tool_use_id.is_none() {
                    call.tool_use_id = key;
                }
                call.server = server;
                call.proxy = Some(view);
            }
            None => {
                let step = &view.selected;
                let qualified = if step.qualified_name.is_empty() {
                    format!("mcp__{}__{}", join::spelled(&server), step.tool_name)
                } else {
                    step.qualified_name.to_string()
                };
                let tool = step.tool_name.to_string();
                let started_at = step.started_at.clone();
                let call = Call {
                    tool_use_id: key,
                    fingerprint,
                    proxy: Some(view),
                    ..Call::new(
                        (qualified, server, tool, StepKind::Mcp),
                        self.current_turn(),
                        started_at,
                        cx.now,
                    )
                };
                self.calls.push(call);
            }
        }
    }

    // ---- transcripts ---------------------------------------------------

    /// The transcript file of the main agent (`None`) or a subagent. A
    /// subagent's path is known from its SubagentStop; before that it is
    /// where Claude Code 2.1.332 puts it: `<session>/subagents/agent-<id>.jsonl`
    /// beside the main transcript.
    fn transcript_for(&mut self, agent: &Option<String>) -> Option<&mut Transcript> {
        if !self.transcripts.contains_key(agent) {
            let main = self.transcript_path.clone()?;
            let path = match agent {
                None => main,
                Some(id) => {
                    let base = main.strip_suffix(".jsonl").unwrap_or(&main);
                    format!("{base}/subagents/agent-{id}.jsonl")
                }
            };
            let format = self.adapter.host.transcript_format().unwrap_or_default();
            let mut t = Transcript::with_format(path, format);
            t.opened_in_turn = self.turn;
            self.transcripts.insert(agent.clone(), t);
        }
        self.transcripts.get_mut(agent)
    }

    fn request_read(&mut self, cx: &mut Cx, agent: Option<String>) {
        let session_id = self.id.clone();
        let Some(t) = self.transcript_for(&agent) else {
            return;
        };
        if t.is_reading(cx.now, cx.cfg.join_grace) {
            t.again = true;
            return;
        }
        t.reading = Some(cx.now);
        cx.out.push(Output::ReadTranscript {
            session_id,
            agent_id: agent,
            path: t.path.clone(),
            offset: t.offset,
            from_start: self.resuming,
        });
    }

    fn request_reads_for_end(&mut self, cx: &mut Cx) {
        let mut agents: Vec<Option<String>> = self.transcripts.keys().cloned().collect();
        if !agents.contains(&None) {
            agents.push(None);
        }
        for agent in agents {
            self.request_read(cx, agent);
        }
    }

    /// What the transcript says the model wrote before call
    /// `tool_use_id`: `None` while the file has not shown the call,
    /// `Some(None)` when it has and no words came before it.
    fn transcript_words(
        &self,
        cx: &Cx,
        agent: Option<&str>,
        tool_use_id: &str,
    ) -> Option<Option<Redacted<String>>> {
        // The mod's words first: the same text, known earlier.
        if let Some(text) = self.modlink.context(agent, tool_use_id) {
            return Some(Some(cx.text(text, CONTEXT_CAP)));
        }
        let t = self.transcripts.get(&agent.map(str::to_owned))?;
        let text = t.contexts.get(tool_use_id)?;
        Some((!text.trim().is_empty()).then(|| cx.text(text, CONTEXT_CAP)))
    }

    pub(super) fn on_transcript(
        &mut self,
        cx: &mut Cx,
        agent: Option<String>,
        offset: u64,
        bytes: &[u8],
    ) {
        let Some(t) = self.transcripts.get_mut(&agent) else {
            return;
        };
        if !t.consume(offset, bytes) {
            log::debug!("a transcript read from offset {offset} was stale; ignored");
        }
        t.reading = None;
        let seen = std::mem::take(&mut t.seen);
        let dropped = std::mem::take(&mut t.seen_dropped);
        let whole_file = t.offset > 0;
        if dropped > 0 {
            self.lossy = true;
            self.dropped += dropped;
        }

        // A large answer may not have been all there was.
        let again = std::mem::take(&mut t.again) || bytes.len() >= READ_AGAIN;
        if agent.is_none()
            && let Some(m) = &t.model
        {
            self.model = Some(cx.label(m));
        }
        if agent.is_none()
            && self.host_version.is_none()
            && let Some(v) = &t.host_version
        {
            self.host_version = Some(cx.label(v).into_inner());
        }
        for item in seen {
            if self.unheard_matters(&item) {
                self.unheard.push((agent.clone(), item));
            }
        }
        for i in 0..self.calls.len() {
            let c = &self.calls[i];
            if c.words_known || c.agent_id != agent {
                continue;
            }
            let Some(id) = c.tool_use_id.clone() else {
                continue;
            };
            let words = self.transcript_words(cx, agent.as_deref(), &id);
            self.calls[i].learn_words(words);
            if let Some(at) = self.transcript_start(&self.calls[i]) {
                self.calls[i].started_at = at;
            }
        }
        if let Some(t) = self.transcripts.get_mut(&agent) {
            let done = &self.done;
            t.forget(|id| done.contains_key(id));
        }
        if agent.is_none() && self.awaiting_answer {
            let answer = self
                .transcripts
                .get(&None)
                .and_then(|t| t.last_text.clone());
            if let Some(text) = answer {
                let text = cx.text(&text, cx.cfg.payload_cap);
                self.final_answer(cx, text);
            }
        }
        if again {
            self.request_read(cx, agent);
        } else if agent.is_none() && self.catching_up {
            if whole_file && self.catch_up_waits(cx) {
                // Read again at a tick: the host has not written the rows
                // of the call that waits yet.
                return;
            }
            self.catch_up(cx, whole_file);
            return;
        }
        self.take_unheard(cx, false);
        self.settle(cx);
    }

    // ---- what the hooks did not tell --------------------------------------

    /// Whether a transcript item may still tell something the hooks have
    /// not (checked again when it is taken).
    fn unheard_matters(&self, item: &Seen) -> bool {
        match item {
            Seen::Call { id, .. } => {
                !self.done.contains_key(id) && !self.find(id).is_some_and(|i| self.calls[i].hooked)
            }
            Seen::Result { id, .. } => {
                !self.done.contains_key(id)
                    && !self.find(id).is_some_and(|i| {
                        self.calls[i].result.is_some() || self.calls[i].proxy.is_some()
                    })
            }
            Seen::Prompt { .. } | Seen::Answer { .. } => true,
        }
    }

    /// Whether the catch-up waits for the transcript to show the call of
    /// the first hook that waits in the stash: Claude Code may write a
    /// message's rows after that call's hooks, and what the transcript
    /// shows before the call must be told before it (its place in the
    /// order). The join grace from the first such read bounds the wait.
    fn catch_up_waits(&mut self, cx: &Cx) -> bool {
        let Some(id) = self
            .stash
            .iter()
            .find_map(|h| h.tool_use_id().filter(|_| h.agent_id().is_none()))
        else {
            return false;
        };
        if self
            .transcripts
            .get(&None)
            .is_some_and(|t| t.contexts.contains_key(id))
        {
            return false;
        }
        let until = *self
            .catch_up_until
            .get_or_insert(cx.now + cx.cfg.join_grace);
        cx.now < until
    }

    /// The end of a catch-up: the transcript was read from its start; what
    /// it shows is told first, in its order, then the hooks that waited.
    /// A transcript that could not be read leaves the run lossy.
    fn catch_up(&mut self, cx: &mut Cx, read_something: bool) {
        self.catching_up = false;
        self.catch_up_until = None;
        if !read_something {
            self.lossy = true;
            if let Some(note) = &mut self.note {
                *note = note.replace(
                    "what came before is recovered from the transcript",
                    "what happened before is missing (the transcript could not be read)",
                );
            }
        }
        self.take_unheard(cx, true);
        if self.answered_turn != self.current_turn()
            && self
                .transcripts
                .get(&None)
                .is_some_and(|t| t.last_text.is_some())
        {
            self.awaiting_answer = true;
        }
        for h in std::mem::take(&mut self.stash) {
            self.on_hook(cx, &h);
        }
        self.settle(cx);
    }

    /// Tells the transcript items whose agent's transcript is whole (the
    /// turn's `Stop`, the subagent's `SubagentStop`, the session's end), or
    /// every one with `force`; the others wait.
    fn take_unheard(&mut self, cx: &mut Cx, force: bool) {
        if self.unheard.is_empty() {
            return;
        }
        let mut keep = Vec::new();
        for (agent, item) in std::mem::take(&mut self.unheard) {
            let whole = force
                || self.ending.is_some()
                || match &agent {
                    None => self.turn_stopped,
                    Some(a) => self.agents.get(a).is_some_and(|x| x.stopped),
                };
            if whole {
                self.tell_unheard(cx, agent, item);
            } else {
                keep.push((agent, item));
            }
        }
        self.unheard = keep;
    }

    fn tell_unheard(&mut self, cx: &mut Cx, agent: Option<String>, item: Seen) {
        if !self.unheard_matters(&item) {
            return;
        }
        match item {
            Seen::Prompt { text, at } => {
                if self.live_prompts > 0 {
                    self.live_prompts -= 1;
                    return;
                }
                *self.recovered_prompts.entry(text.clone()).or_default() += 1;
                let prompt = cx.text(&text, cx.cfg.payload_cap);
                self.turn += 1;
                self.awaiting_answer = false;
                if !self.opened {
                    let input = (self.turn == 1).then(|| prompt.clone());
                    self.open(cx, input);
                }
                let turn = Turn {
                    turn: self.turn,
                    at: at.unwrap_or_else(|| rfc3339(cx.now)),
                    prompt,
                    origin: hook::prompt_origin(&text).map(str::to_owned),
                };
                self.push(cx, RunEvent::Turn(turn));
            }
            Seen::Answer { text, at } => {
                if agent.is_some() || self.answered_turn == self.current_turn() {
                    return;
                }
                let text = cx.text(&text, cx.cfg.payload_cap);
                self.recovered += 1;
                self.final_answer_at(cx, text, at.unwrap_or_else(|| rfc3339(cx.now)), true);
            }
            Seen::Call {
                id,
                name,
                input,
                at,
            } => {
                let view = Hook::new(
                    String::new(),
                    json!({ "agent_id": agent.clone().unwrap_or_default() }),
                );
                let mut call = self.call_from_hook(cx, &view, &name, Some(&input));
                call.tool_use_id = Some(id.clone());
                if let Some(at) = at {
                    call.started_at = at;
                }
                // A call the host asked permission for, live, and that no
                // `PostToolUse` told: refused, it did not run (its error
                // result says so below). Any other is recovered: the
                // recorder missed its hooks.
                if !self.take_asked(&mut call) {
                    call.recovered = true;
                    self.recovered += 1;
                }
                let words = self.transcript_words(cx, agent.as_deref(), &id);
                call.learn_words(words);
                self.attach_hook_view(cx, call);
            }
            Seen::Result {
                id,
                output,
                is_error,
                at,
            } => {
                let Some(i) = self.find(&id) else {
                    return;
                };
                let prepared = cx.value(output);
                let c = &mut self.calls[i];
                let duration_ms = at
                    .as_deref()
                    .and_then(millis)
                    .zip(millis(&c.started_at))
                    .map(|(end, start)| (end - start).max(0.0));
                // A call the hooks saw chosen but never answered, with an
                // error result: it did not run (refused, unknown, blocked).
                let not_run = !c.recovered && is_error;
                c.recovered = true;
                c.result = Some(HookResult {
                    output: prepared.value,
                    error: None,
                    is_error,
                    duration_ms,
                    outcome: if not_run { "not_run" } else { "answered" },
                    redactions: prepared.redactions,
                    withheld: prepared.withheld,
                });
            }
        }
    }

    // ---- telling calls -------------------------------------------------

    /// Emits whatever each call's views allow now; then finishes the run if
    /// it is ending and nothing waits any more.
    fn settle(&mut self, cx: &mut Cx) {
        let mut i = 0;
        while i < self.calls.len() {
            if self.advance(cx, i, false) {
                self.retire(cx, i);
            } else {
                i += 1;
            }
        }
        if self.ending.is_some() && !self.waiting(cx) {
            self.finish(cx, "session_end");
        }
    }

    /// Something the run still waits for before it may finish: a call
    /// holding for its other view, or a transcript read under way.
    fn waiting(&self, cx: &Cx) -> bool {
        self.calls.iter().any(|c| c.deadline.is_some())
            || self
                .transcripts
                .values()
                .any(|t| t.is_reading(cx.now, cx.cfg.join_grace))
    }

    fn retire(&mut self, cx: &Cx, i: usize) {
        let call = self.calls.remove(i);
        if let Some(id) = call.tool_use_id {
            self.done.insert(id, cx.now);
        }
        if call.proxy.is_none()
            && let Some(fp) = call.fingerprint
        {
            self.done_unjoined.push((fp, cx.now));
        }
    }

    /// Tells what call `i` allows; `force` tells everything it has (the
    /// wait is over). Returns whether the call is fully told.
    fn advance(&mut self, cx: &mut Cx, i: usize, force: bool) -> bool {
        let before_unknown = self.before_unknown();
        let c = &self.calls[i];
        let hooked = c.hooked;
        let has_answer = c.result.is_some() || c.proxy.is_some();
        // Ready: the hook's identity and an answer (the proxy's, or the
        // hook's when no proxy report can come), and the model's words
        // from the transcript as complete as they will be — see
        // `waits_for_words`. The join grace bounds every wait.
        let ready = c.hooked
            && match (c.proxy.is_some(), c.result.is_some()) {
                (true, _) => true,
                (false, true) => !self.waits_for_proxy(c),
                (false, false) => false,
            }
            && !self.waits_for_context(cx, c)
            && !self.waits_for_words(c);
        // A call known from its after-hook only is told chosen once the
        // transcript says when (or the wait for it is over).
        let start_unknown = c.start_from_transcript && self.waits_for_words(c);
        if ((hooked && !start_unknown) || force) && !c.selected_emitted {
            self.emit_selected(cx, i);
        }
        if ready || (force && (has_answer || hooked)) {
            self.emit_response(cx, i);
            return true;
        }
        let c = &mut self.calls[i];
        if has_answer && c.deadline.is_none() {
            c.deadline = Some(cx.now + cx.cfg.join_grace);
            if before_unknown {
                // Its place comes when it is told: after what the
                // transcript shows came before it.
                return false;
            }
            // Hold, keeping the place in the order this view gave it.
            if c.selected_index.is_none() {
                c.selected_index = Some(self.next_step);
                self.next_step += 1;
            }
            c.response_index = Some(self.next_step);
            self.next_step += 1;
        }
        false
    }

    /// What came before in this session is not known yet: a catch-up reads
    /// it, or a run taken up again waits for the hook that starts one (a
    /// proxy's report may reach a new daemon before any hook). A view that
    /// arrives now takes no place in the order until it is told.
    fn before_unknown(&self) -> bool {
        self.catching_up || self.resuming
    }

    /// An MCP call told by the hooks waits for its proxy's report (a proxy
    /// may bind late: it buffers while it looks for the daemon), unless
    /// none can come: its server's proxy left, or the session is ending and
    /// no proxy of that server is bound (a server bir does not wrap).
    fn waits_for_proxy(&self, c: &Call) -> bool {
        if c.kind != StepKind::Mcp || c.recovered {
            return false;
        }
        let server = join::spelled(&c.server);
        if self.gone_servers.iter().any(|s| join::spelled(s) == server) {
            return false;
        }
        self.ending.is_none() || self.server_is_bound(&c.server)
    }

    /// A proxy of `server` (as a call spells it) is bound to this session.
    fn server_is_bound(&self, server: &str) -> bool {
        let server = join::spelled(server);
        self.proxies.values().any(|s| join::spelled(s) == server)
    }

    /// The transcript-wait rule: a call whose words the transcript has not
    /// shown yet waits until its agent's transcript is whole — the turn's
    /// `Stop` for the main thread, the subagent's `SubagentStop` — and the
    /// read that event brings. Claude Code writes a message's rows when it
    /// likes: a subagent's after the call's PostToolUse, the main thread's
    /// Agent call's late (the tool answers at once, `async_launched`), and
    /// under load any main-thread call's after its PostToolUse. Every
    /// PreToolUse and PostToolUse reads the transcript again, so a call
    /// usually learns its words from the next read and waits no longer;
    /// the join grace bounds the rest. The MessageDisplay text does not end
    /// the wait: it lacks the thinking the transcript has.
    fn waits_for_words(&self, c: &Call) -> bool {
        // After SessionEnd nothing more is written: its reads are the last.
        if c.words_known || self.transcript_path.is_none() || self.ending.is_some() {
            return false;
        }
        match c.agent_id.as_deref() {
            Some(agent) => !self.agents.get(agent).is_some_and(|a| a.stopped),
            None => !self.turn_stopped,
        }
    }

    /// A finished call whose context a transcript read under way may bring.
    fn waits_for_context(&self, cx: &Cx, c: &Call) -> bool {
        !c.words_known
            && self
                .transcripts
                .get(&c.agent_id)
                .is_some_and(|t| t.is_reading(cx.now, cx.cfg.join_grace))
    }

    fn parent_of(&self, agent_id: Option<&str>) -> Option<String> {
        self.agents.get(agent_id?)?.parent.clone()
    }

    fn agent_type_of(&self, c: &Call) -> Option<Redacted<String>> {
        let id = c.agent_id.as_deref()?;
        c.agent_type
            .clone()
            .or_else(|| self.agents.get(id)?.agent_type.clone())
    }

    /// A step of call `i` with the call's identity and context, at the
    /// place its first view reserved (or the next one).
    fn call_step(&mut self, cx: &Cx, i: usize, step_type: StepType) -> Step {
        let reserved = match step_type {
            StepType::ToolSelected => self.calls[i].selected_index,
            _ => self.calls[i].response_index,
        };
        let index = reserved.unwrap_or_else(|| self.next_index());
        let c = &self.calls[i];
        Step {
            context: c.transcript_context.clone().or_else(|| c.context.clone()),
            qualified_name: cx.label(&c.qualified),
            server_name: cx.label(&c.server).into_inner(),
            tool_name: cx.label(&c.tool),
            tool_use_id: c.tool_use_id.as_deref().map(|id| cx.id(id)),
            agent_id: c.agent_id.as_deref().map(|id| cx.id(id)),
            agent_type: self.agent_type_of(c),
            parent_tool_use_id: self.parent_of(c.agent_id.as_deref()).map(|id| cx.id(&id)),
            kind: Some(c.kind),
            turn: c.turn,
            correlation: c.correlation.map(str::to_owned),
            request_id: c.proxy.as_ref().and_then(|p| p.selected.request_id.clone()),
            recovered: c.recovered,
            ..Step::new(index, step_type, c.started_at.clone())
        }
    }

    fn emit_selected(&mut self, cx: &mut Cx, i: usize) {
        let mut step = self.call_step(cx, i, StepType::ToolSelected);
        let index = step.step_index;
        let c = &self.calls[i];
        match (&c.input, &c.proxy) {
            (Some(_), _) | (None, None) => {
                step.input = c.input.clone();
                step.args_digest = c.input_digest.clone();
                step.redactions = c.input_redactions;
                step.withheld = c.input_withheld.map(str::to_owned);
            }
            (None, Some(p)) => {
                step.input = p.selected.input.clone();
                step.args_digest = p.selected.args_digest.clone();
                step.redactions = p.selected.redactions;
                step.withheld = p.selected.withheld.clone();
                if !c.hooked {
                    step.started_at = p.selected.started_at.clone();
                }
            }
        }
        let c = &mut self.calls[i];
        c.selected_emitted = true;
        c.selected_index = Some(index);
        self.emit(cx, RunEvent::Step(step));
    }

    fn emit_response(&mut self, cx: &mut Cx, i: usize) {
        let mut step = self.call_step(cx, i, StepType::ToolResponse);
        let c = &self.calls[i];
        step.permission = c.permission.clone();
        if let Some(p) = &c.proxy {
            let r = &p.response;
            step.output = r.output.clone();
            step.error = r.error.clone();
            step.is_error = r.is_error;
            step.duration_ms = r.duration_ms;
            step.outcome = r.outcome.clone();
            step.redactions = r.redactions;
            step.withheld = r.withheld.clone();
            if r.correlation.is_some() && step.correlation.is_none() {
                step.correlation = r.correlation.clone();
            }
            if !c.hooked {
                step.started_at = p.selected.started_at.clone();
            }
        } else if let Some(r) = &c.result {
            step.output = r.output.clone();
            step.error = r.error.clone();
            step.is_error = r.is_error;
            step.duration_ms = r.duration_ms;
            step.outcome = Some(r.outcome.to_owned());
            step.redactions = r.redactions;
            step.withheld = r.withheld.map(str::to_owned);
        } else {
            // Never answered: the session ended (or the recorder stopped)
            // while it ran.
            step.outcome = Some("session_ended".to_owned());
        }
        self.metrics.tool_calls += 1;
        self.metrics.errors += u64::from(step.is_error);
        self.metrics.total_tool_ms += step.duration_ms.unwrap_or(0.0);
        self.emit(cx, RunEvent::Step(step));
    }

    // ---- time and the end ----------------------------------------------

    /// Releases what waited long enough; ends an idle or ending session.
    pub(super) fn tick(&mut self, cx: &mut Cx) {
        let now = cx.now;
        if self.catching_up && self.catch_up_until.is_some() {
            // A catch-up waiting for the host's rows: read again, or end
            // it once the wait is over.
            let reading = self
                .transcripts
                .get(&None)
                .is_some_and(|t| t.is_reading(now, cx.cfg.join_grace));
            if self.catch_up_until.is_some_and(|until| now >= until) && !reading {
                self.catch_up(cx, true);
            } else if !reading {
                self.request_read(cx, None);
            }
        }
        let mut i = 0;
        while i < self.calls.len() {
            if self.calls[i].deadline.is_some_and(|d| d <= now) && self.advance(cx, i, true) {
                self.retire(cx, i);
            } else {
                i += 1;
            }
        }
        let window = cx.cfg.fingerprint_window;
        self.done.retain(|_, at| within(*at, now, window));
        self.done_unjoined
            .retain(|(_, at)| within(*at, now, window));
        if self.ending.is_some_and(|d| d <= now) {
            self.finish(cx, "session_end");
        } else if now
            .duration_since(self.last_event_at)
            .is_ok_and(|idle| idle >= cx.cfg.idle_end)
        {
            self.finish(cx, "idle_timeout");
        }
    }

    /// Tells everything still held and writes `run_finished`. A session
    /// that never got further than its start (no prompt, no step) leaves
    /// no run.
    pub(super) fn finish(&mut self, cx: &mut Cx, reason: &str) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.take_unheard(cx, true);
        while !self.calls.is_empty() {
            self.advance(cx, 0, true);
            self.retire(cx, 0);
        }
        if self.awaiting_answer
            && let Some(text) = self
                .transcripts
                .get(&None)
                .and_then(|t| t.last_text.clone())
                .or_else(|| self.answer_fallback.take())
        {
            let text = cx.text(&text, cx.cfg.payload_cap);
            self.final_answer(cx, text);
        }
        if !self.opened {
            return;
        }
        self.metrics.turn_usage = self.turn_usage(cx);
        let mut usage = TokenUsage::default();
        for row in &self.metrics.turn_usage {
            usage.add(&row.usage);
        }
        self.metrics.usage = (!usage.is_empty()).then_some(usage);
        let finish = RunFinish {
            finished_at: rfc3339(cx.now),
            output: self.last_answer.clone(),
            metrics: self.metrics.clone(),
            lossy: self.lossy,
            dropped: self.dropped,
            reason: Some(reason.to_owned()),
            model: self.model.clone().filter(|_| !self.model_in_header),
        };
        self.push(cx, RunEvent::RunFinished(finish));
    }
}

impl Session {
    /// The tokens every transcript reports, per turn of the run and model.
    /// The main transcript's turns are the run's (its prompts are the
    /// turns, paired in order as the recovery pairs them; one it shows
    /// beyond the run's last turn counts in that turn); a subagent's
    /// tokens count in the turn that started it (its SubagentStart's, else
    /// the one its transcript was first asked for in: a host may send the
    /// subagent's own prompt as a prompt hook). Main agent's rows first
    /// within a turn.
    fn turn_usage(&self, cx: &Cx) -> Vec<TurnUsage> {
        let mut files: Vec<(&Option<String>, &Transcript)> = self.transcripts.iter().collect();
        files.sort_by(|a, b| a.0.cmp(b.0));
        let mut rows: Vec<TurnUsage> = Vec::new();
        for (agent, t) in files {
            for row in t.usage_rows() {
                let turn = match agent {
                    None => row.turn.min(self.turn),
                    Some(id) => self
                        .agents
                        .get(id)
                        .and_then(|a| a.turn)
                        .unwrap_or(t.opened_in_turn),
                };
                let model = row.model.as_deref().map(|m| cx.label(m));
                match rows.iter_mut().find(|r| r.turn == turn && r.model == model) {
                    Some(r) => r.usage.add(&row.usage),
                    None => rows.push(TurnUsage {
                        turn,
                        model,
                        usage: row.usage,
                    }),
                }
            }
        }
        // Stable: the main agent's rows stay first within a turn.
        rows.sort_by_key(|r| r.turn);
        rows
    }
}

/// Takes one of `text` from the multiset `set`; whether there was one.
fn take_one(set: &mut HashMap<String, u32>, text: &str) -> bool {
    match set.get_mut(text) {
        Some(n) if *n > 1 => {
            *n -= 1;
            true
        }
        Some(_) => {
            set.remove(text);
            true
        }
        None => false,
    }
}

/// An RFC 3339 time as milliseconds since the epoch (with its fraction).
fn millis(at: &str) -> Option<f64> {
    let secs = crate::time::parse_rfc3339(at)?;
    let frac = at
        .get(19..)
        .and_then(|rest| rest.strip_prefix('.'))
        .map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            format!("0.{digits}").parse::<f64>().unwrap_or(0.0)
        })
        .unwrap_or(0.0);
    Some((secs as f64 + frac) * 1000.0)
}

fn within(at: SystemTime, now: SystemTime, window: std::time::Duration) -> bool {
    now.duration_since(at).map_or(true, |age| age <= window)
}
