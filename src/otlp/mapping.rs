//! A run's journal records → spans (`docs/opentelemetry.md`, "What a run
//! looks like"): the one function every
//! export goes through (live, catch-up, `bir runs export --otlp`), so the
//! export of a run is fixed by its journal: same records, same spans, same
//! bytes.
//!
//! **One trace per run**, not per turn: the run is what bir journals,
//! marks as exported and exports again, so it is the unit whose ids must be
//! stable; a standalone (proxy) run has no turns at all; and every span
//! carries `gen_ai.conversation.id`, which is what Phoenix and Langfuse
//! group sessions by, so the per-turn split would buy nothing there. Each
//! turn is a `bir.user_prompt` event on the root span (with `bir.turn`).
//!
//! **Ids.** The trace id and every span id are derived (SHA-256, domain
//! separated) from ids the journal already holds and that were generated
//! once, at random: the run id, a call's `toolUseId` (else its first
//! `stepIndex`), a subagent's `agentId`. So they are fixed when the run is
//! recorded, unique across runs (Phoenix drops a span whose id it has seen),
//! identical on every re-export (a receiver sees the same spans, not
//! copies), and no new field is needed in the journal format (runs
//! recorded before this exporter existed export the same way).
//!
//! **Content.** Span names, tool names, ids, timings, error types and
//! status codes always go out; prompts, answers, arguments, results and a
//! JSON-RPC error's message (the status description) only
//! with `content` (`BIR_OTLP_CONTENT=1`), and then exactly as the journal
//! holds them: already redacted and truncated by the recorder. Without it
//! the prompt and answer events carry their length only.

use std::collections::HashMap;

use super::span::{Event, KeyValue, Span, SpanKind, StatusCode, kv};
use crate::record::calls::{Call, reader_calls};
use crate::record::model::{
    RunEvent, RunFinish, RunHeader, SessionEvent, Step, StepKind, TokenUsage, Turn,
};
use crate::record::store::LoadedRun;

/// What the mapping may add beyond names and timings.
#[derive(Debug, Clone, Default)]
pub(crate) struct MapOptions {
    /// Prompts, answers, arguments and results (redacted, truncated).
    pub content: bool,
    /// `gen_ai.provider.name`; when `None`, `anthropic` for Claude Code
    /// hosts and nothing for others (bir cannot know their model's maker).
    pub provider: Option<String>,
}

/// The longest `status.message` sent (a JSON-RPC error's message, with
/// content on).
const MAX_STATUS_MESSAGE: usize = 256;

/// The W3C `traceparent` bir-proxy adds to the `n`-th `tools/call` it
/// relays in run `run_id` (`BIR_OTLP_TRACEPARENT=1`): the run's trace, and
/// the span id that call's span has in the export. The proxy takes it
/// from here; the journal keeps it with the call (`Step::traceparent`),
/// and [`call_span_id`] gives the call's span that id back. Sampled
/// (`01`): bir exports every run.
pub(crate) fn relayed_call_traceparent(run_id: &str, n: u64) -> String {
    let trace = trace_id(run_id);
    let span = span_id(run_id, "call", &format!("relay:{n}"));
    format!(
        "00-{}-{}-01",
        crate::codec::hex_lower(&trace),
        crate::codec::hex_lower(&span)
    )
}

/// The trace and parent ids of a version-00 `traceparent`.
pub(crate) fn parse_traceparent(text: &str) -> Option<([u8; 16], [u8; 8])> {
    let mut parts = text.split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != "00"
        || parts.next().is_some()
        || trace.len() != 32
        || span.len() != 16
        || flags.len() != 2
        || u8::from_str_radix(flags, 16).is_err()
    {
        return None;
    }
    let mut t = [0u8; 16];
    let mut s = [0u8; 8];
    for (i, b) in t.iter_mut().enumerate() {
        *b = u8::from_str_radix(trace.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    for (i, b) in s.iter_mut().enumerate() {
        *b = u8::from_str_radix(span.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some((t, s))
}

/// The span id of a call whose first record is `s` and whose place is
/// `order`: the one its `traceparent` named when bir-proxy added one to
/// the request (in this run's trace), so the server's spans hang under
/// it; else derived from its `toolUseId`, else from its place. Every span
/// id of a call (its own, a subagent's parent link) comes from here.
fn call_span_id(run_id: &str, trace: &[u8; 16], s: &Step, order: u64) -> [u8; 8] {
    if let Some((t, span)) = s.traceparent.as_deref().and_then(parse_traceparent)
        && t == *trace
        && span.iter().any(|b| *b != 0)
    {
        return span;
    }
    match s.tool_use_id.as_deref() {
        Some(id) => span_id(run_id, "call", id),
        None => span_id(run_id, "call", &format!("#{order}")),
    }
}

/// A server's connection as a call saw it: `network.transport` and
/// `mcp.session.id`, from the snapshot of the server in force when the
/// call's record was written (a renewed session writes a new one).
#[derive(Clone, Copy, Default)]
struct Connection<'a> {
    transport: Option<&'a str>,
    session: Option<&'a str>,
}

/// `trace_id` of run `run_id`.
pub(crate) fn trace_id(run_id: &str) -> [u8; 16] {
    let d = digest(&["bir.otlp.trace", run_id]);
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    nonzero(&mut id);
    id
}

/// The span id of `what` (`root`, `call`, `agent`) named `key` in run `run_id`.
pub(crate) fn span_id(run_id: &str, what: &str, key: &str) -> [u8; 8] {
    let d = digest(&["bir.otlp.span", run_id, what, key]);
    let mut id = [0u8; 8];
    id.copy_from_slice(&d[..8]);
    nonzero(&mut id);
    id
}

fn digest(parts: &[&str]) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for p in parts {
        // Length-prefixed: ("ab","c") and ("a","bc") differ.
        ctx.update(&(p.len() as u64).to_le_bytes());
        ctx.update(p.as_bytes());
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// All-zero ids are invalid in OTLP.
fn nonzero(id: &mut [u8]) {
    if id.iter().all(|b| *b == 0)
        && let Some(last) = id.last_mut()
    {
        *last = 1;
    }
}

/// Unix nanoseconds of an RFC 3339 time (0 when unreadable).
pub(crate) fn unix_nanos(at: &str) -> u64 {
    let Some(secs) = crate::time::parse_rfc3339(at) else {
        return 0;
    };
    let mut nanos: u64 = 0;
    let mut digits = 0;
    if let Some(frac) = at.trim().get(19..).and_then(|r| r.strip_prefix('.')) {
        for b in frac.bytes().take_while(u8::is_ascii_digit).take(9) {
            nanos = nanos * 10 + u64::from(b - b'0');
            digits += 1;
        }
    }
    nanos *= 10u64.pow(9 - digits);
    u64::try_from(secs)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(nanos)
}

/// A subagent seen in the run.
#[derive(Default)]
struct Agent {
    agent_type: Option<String>,
    parent_tool_use_id: Option<String>,
    start: Option<u64>,
    end: Option<u64>,
}

/// The spans of `run` (only its `records` are read), root first; empty
/// when it has no run header (nothing to name the trace by). Calls are
/// paired as every reader pairs them ([`reader_calls`]).
pub(crate) fn spans_of(run: &LoadedRun, opts: &MapOptions) -> Vec<Span> {
    let Some(journal) = Journal::read(run) else {
        return Vec::new();
    };
    let cx = Mapping::new(journal, opts);
    let calls: Vec<(Call, &Step)> = reader_calls(run)
        .into_iter()
        .filter_map(|c| {
            let s = c.any()?;
            Some((c, s))
        })
        .collect();
    let agents = cx.subagents(&calls);
    let (mut spans, emitted_agents) = cx.call_spans(&calls);
    cx.insert_agent_spans(&mut spans, &calls, &agents, &emitted_agents);
    let latest_end = spans
        .iter()
        .map(|s| s.end_time_unix_nano)
        .max()
        .unwrap_or(0);
    spans.insert(0, cx.root_span(calls.len(), latest_end));
    spans
}

/// What a run's journal holds that its spans are made of, read in one
/// pass over its records.
struct Journal<'a> {
    header: &'a RunHeader,
    finish: Option<&'a RunFinish>,
    turns: Vec<&'a Turn>,
    session_events: Vec<&'a SessionEvent>,
    protocol_versions: HashMap<&'a str, &'a str>,
    /// Each server's connection as the journal ends, and each step's as it
    /// was when the step was written.
    connections: HashMap<&'a str, Connection<'a>>,
    step_connections: HashMap<&'a str, Connection<'a>>,
    answers: Vec<&'a Step>,
}

impl<'a> Journal<'a> {
    /// `None` without a run header.
    fn read(run: &'a LoadedRun) -> Option<Journal<'a>> {
        let mut header: Option<&RunHeader> = None;
        let mut finish: Option<&RunFinish> = None;
        let mut turns = Vec::new();
        let mut session_events = Vec::new();
        let mut protocol_versions: HashMap<&str, &str> = HashMap::new();
        let mut connections: HashMap<&str, Connection> = HashMap::new();
        let mut step_connections: HashMap<&str, Connection> = HashMap::new();
        for r in &run.records {
            match &r.event {
                RunEvent::RunStarted(h) => header = Some(h),
                RunEvent::RunFinished(f) => finish = Some(f),
                RunEvent::Step(s) => {
                    if let Some(c) = connections.get(s.server_name.as_str()) {
                        step_connections.insert(s.id.as_str(), *c);
                    }
                }
                RunEvent::Turn(t) => turns.push(t),
                RunEvent::SessionEvent(e) => session_events.push(e),
                RunEvent::ServerSnapshot(s) => {
                    if let Some(v) = &s.protocol_version {
                        protocol_versions.insert(&s.server_name, v.as_str());
                    }
                    connections.insert(
                        &s.server_name,
                        Connection {
                            transport: s.transport.as_deref(),
                            session: s.mcp_session_id.as_ref().map(|x| x.as_str()),
                        },
                    );
                }
                RunEvent::RemoteAck(_) => {}
            }
        }
        Some(Journal {
            header: header?,
            finish,
            turns,
            session_events,
            protocol_versions,
            connections,
            step_connections,
            answers: crate::record::layout::answers(run)
                .into_iter()
                .map(|a| a.step)
                .collect(),
        })
    }

    /// The run's final answers, as `record::layout::answers` orders them
    /// (by turn, then step index; an amended one once, as its last
    /// emission; a subagent's left out).
    fn answers(&self) -> Vec<&'a Step> {
        self.answers.clone()
    }
}

/// One run's mapping: its journal, the ids every span is placed by, and
/// what every span shares.
struct Mapping<'a> {
    journal: Journal<'a>,
    opts: &'a MapOptions,
    run_id: &'a str,
    trace: [u8; 16],
    root_id: [u8; 8],
    host_app: Option<&'a str>,
    provider: Option<String>,
}

impl<'a> Mapping<'a> {
    fn new(journal: Journal<'a>, opts: &'a MapOptions) -> Mapping<'a> {
        let run_id = journal.header.id.as_str();
        let meta = &journal.header.metadata;
        let host_app = meta.host.as_ref().map(|h| h.app.as_str());
        let provider = opts.provider.clone().or_else(|| {
            (meta.tier == "bound" || host_app.is_some_and(|a| a.to_lowercase().contains("claude")))
                .then(|| "anthropic".to_owned())
        });
        Mapping {
            opts,
            run_id,
            trace: trace_id(run_id),
            root_id: span_id(run_id, "root", ""),
            host_app,
            provider,
            journal,
        }
    }

    /// `gen_ai.conversation.id`, on every span.
    fn common(&self, attrs: &mut Vec<KeyValue>) {
        if let Some(c) = self.journal.header.metadata.session_id.as_deref() {
            attrs.push(kv("gen_ai.conversation.id", c));
        }
    }

    /// Subagents: from their calls, and the SubagentStart/Stop events.
    fn subagents(&self, calls: &[(Call, &Step)]) -> HashMap<String, Agent> {
        let mut agents: HashMap<String, Agent> = HashMap::new();
        for (_, s) in calls {
            if let Some(id) = s.agent_id.as_deref() {
                let a = agents.entry(id.to_owned()).or_default();
                a.agent_type = a
                    .agent_type
                    .take()
                    .or_else(|| s.agent_type.as_deref().map(str::to_owned));
                a.parent_tool_use_id = a
                    .parent_tool_use_id
                    .take()
                    .or_else(|| s.parent_tool_use_id.as_deref().map(str::to_owned));
            }
        }
        for e in &self.journal.session_events {
            let Some(id) = e.agent_id.as_deref() else {
                continue;
            };
            let Some(a) = agents.get_mut(id) else {
                continue;
            };
            let at = unix_nanos(&e.at);
            match e.name.as_str() {
                "SubagentStart" => a.start = Some(a.start.map_or(at, |s| s.min(at))),
                "SubagentStop" => a.end = Some(a.end.map_or(at, |s| s.max(at))),
                _ => {}
            }
            if a.agent_type.is_none()
                && let Some(t) = e.data.as_ref().and_then(|d| d.text_at("/agent_type"))
            {
                a.agent_type = Some(t.into_inner());
            }
        }
        agents
    }

    /// One span per call, in reading order, and the subagents their calls
    /// name, in the order first named.
    fn call_spans(&self, calls: &[(Call, &Step)]) -> (Vec<Span>, Vec<String>) {
        let j = &self.journal;
        let mut spans: Vec<Span> = Vec::with_capacity(calls.len() + 1);
        let mut emitted_agents: Vec<String> = Vec::new();
        for (c, s) in calls {
            if let Some(agent) = s.agent_id.as_deref()
                && !emitted_agents.iter().any(|a| a == agent)
            {
                emitted_agents.push(agent.to_owned());
            }
            let first = c.selected.unwrap_or(s);
            let connection = j
                .step_connections
                .get(first.id.as_str())
                .or_else(|| j.connections.get(s.server_name.as_str()))
                .copied()
                .unwrap_or_default();
            let server = ServerFacts {
                protocol_version: j.protocol_versions.get(s.server_name.as_str()).copied(),
                connection,
            };
            let mut span = call_span(
                c,
                s,
                self.run_id,
                &self.trace,
                self.opts,
                server,
                |s| match s.agent_id.as_deref() {
                    Some(agent) => span_id(self.run_id, "agent", agent),
                    None => self.root_id,
                },
            );
            self.common(&mut span.attributes);
            spans.push(span);
        }
        (spans, emitted_agents)
    }

    /// Each subagent's span, placed before its first call, under the call
    /// that started it (else the root).
    fn insert_agent_spans(
        &self,
        spans: &mut Vec<Span>,
        calls: &[(Call, &Step)],
        agents: &HashMap<String, Agent>,
        emitted_agents: &[String],
    ) {
        let run_id = self.run_id;
        let call_span_of_use_id: HashMap<String, [u8; 8]> = calls
            .iter()
            .filter_map(|(c, s)| {
                let id = s.tool_use_id.as_deref()?;
                let first = c.selected.unwrap_or(s);
                Some((
                    id.to_owned(),
                    call_span_id(run_id, &self.trace, first, c.order),
                ))
            })
            .collect();
        for agent_key in emitted_agents {
            let Some(a) = agents.get(agent_key) else {
                continue;
            };
            let members: Vec<&Span> = spans
                .iter()
                .filter(|sp| sp.parent_span_id == Some(span_id(run_id, "agent", agent_key)))
                .collect();
            let first = members
                .iter()
                .map(|s| s.start_time_unix_nano)
                .min()
                .unwrap_or(0);
            let last = members
                .iter()
                .map(|s| s.end_time_unix_nano)
                .max()
                .unwrap_or(first);
            let start = a.start.map_or(first, |s| s.min(first));
            let end = a.end.map_or(last, |e| e.max(last));
            let name = match &a.agent_type {
                Some(t) => format!("invoke_agent {t}"),
                None => "invoke_agent".to_owned(),
            };
            let mut attrs = vec![kv("gen_ai.operation.name", "invoke_agent")];
            if let Some(p) = &self.provider {
                attrs.push(kv("gen_ai.provider.name", p.as_str()));
            }
            if let Some(t) = &a.agent_type {
                attrs.push(kv("gen_ai.agent.name", t.as_str()));
            }
            attrs.push(kv("gen_ai.agent.id", agent_key.as_str()));
            self.common(&mut attrs);
            let parent = a
                .parent_tool_use_id
                .as_deref()
                .and_then(|id| call_span_of_use_id.get(id).copied())
                .unwrap_or(self.root_id);
            let span = Span {
                trace_id: self.trace,
                span_id: span_id(run_id, "agent", agent_key),
                parent_span_id: Some(parent),
                name,
                kind: SpanKind::Internal,
                start_time_unix_nano: start,
                end_time_unix_nano: end,
                attributes: attrs,
                events: Vec::new(),
                status: StatusCode::Unset,
                status_message: String::new(),
            };
            let at = spans
                .iter()
                .position(|sp| sp.parent_span_id == Some(span.span_id))
                .unwrap_or(spans.len());
            spans.insert(at, span);
        }
    }

    /// The agent's name: the host's, else Claude Code's for a bound run.
    fn agent_name(&self) -> Option<String> {
        self.host_app.map(str::to_owned).or_else(|| {
            (self.journal.header.metadata.tier == "bound").then(|| "claude-code".to_owned())
        })
    }

    /// The root: the whole run (to its finish, else to its last span's
    /// end), with the prompts and answers as events.
    fn root_span(&self, call_count: usize, latest_end: u64) -> Span {
        let j = &self.journal;
        let start = unix_nanos(&j.header.started_at);
        let end = match j.finish {
            Some(f) => unix_nanos(&f.finished_at).max(start),
            None => latest_end.max(start),
        };
        let agent_name = self.agent_name();
        let answers = j.answers();
        let mut attrs = self.root_attributes(agent_name.as_deref(), call_count);
        let (status, status_message) = if j.finish.is_none() {
            attrs.push(kv("error.type", "interrupted"));
            (StatusCode::Error, String::new())
        } else {
            (StatusCode::Unset, String::new())
        };
        if self.opts.content {
            self.root_content(&mut attrs, &answers);
        }
        Span {
            trace_id: self.trace,
            span_id: self.root_id,
            parent_span_id: None,
            name: match &agent_name {
                Some(a) => format!("invoke_agent {a}"),
                None => "invoke_agent".to_owned(),
            },
            kind: SpanKind::Internal,
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            attributes: attrs,
            events: self.root_events(&answers),
            status,
            status_message,
        }
    }

    /// The root's attributes: the agent, the model, the run's tokens,
    /// bir's own keys.
    fn root_attributes(&self, agent_name: Option<&str>, call_count: usize) -> Vec<KeyValue> {
        let j = &self.journal;
        let meta = &j.header.metadata;
        let mut attrs = vec![kv("gen_ai.operation.name", "invoke_agent")];
        if let Some(p) = &self.provider {
            attrs.push(kv("gen_ai.provider.name", p.as_str()));
        }
        if let Some(a) = agent_name {
            attrs.push(kv("gen_ai.agent.name", a));
        }
        if let Some(h) = &meta.host
            && !h.version.is_empty()
        {
            attrs.push(kv("gen_ai.agent.version", h.version.as_str()));
        }
        self.common(&mut attrs);
        if let Some(m) = j
            .finish
            .and_then(|f| f.model.as_ref())
            .or(meta.model.as_ref())
        {
            attrs.push(kv("gen_ai.request.model", m.as_str()));
        }
        if let Some(u) = j.finish.and_then(|f| f.metrics.usage) {
            usage_attrs(&mut attrs, &u);
        }
        attrs.push(kv("bir.run.id", self.run_id));
        attrs.push(kv("bir.run.tier", meta.tier.as_str()));
        attrs.push(kv("bir.step.count", call_count as i64));
        if !meta.wrapped_servers.is_empty() {
            attrs.push(kv("bir.mcp.servers", meta.wrapped_servers.join(",")));
        }
        let lossy = meta.lossy || j.finish.is_some_and(|f| f.lossy);
        if lossy {
            attrs.push(kv("bir.lossy", true));
        }
        if let Some(reason) = j.finish.and_then(|f| f.reason.as_deref()) {
            attrs.push(kv("bir.run.end_reason", reason));
        }
        attrs
    }

    /// With content on: the first prompt and the last answer as GenAI
    /// messages on the root.
    fn root_content(&self, attrs: &mut Vec<KeyValue>, answers: &[&Step]) {
        let j = &self.journal;
        if let Some(first) = j.turns.first() {
            attrs.push(kv(
                "gen_ai.input.messages",
                message_json("user", first.prompt.as_str(), None),
            ));
        } else if let Some(input) = &j.header.input {
            attrs.push(kv(
                "gen_ai.input.messages",
                message_json("user", input.as_str(), None),
            ));
        }
        let last_answer = answers
            .last()
            .and_then(|a| a.output.as_ref())
            .and_then(|o| o.as_str().map(str::to_owned))
            .or_else(|| {
                j.finish
                    .and_then(|f| f.output.as_ref())
                    .map(|o| o.as_str().to_owned())
            });
        if let Some(text) = last_answer {
            attrs.push(kv(
                "gen_ai.output.messages",
                message_json("assistant", &text, Some("stop")),
            ));
        }
    }

    /// `bir.user_prompt` per turn (with the turn's tokens where the host
    /// reported them) and `bir.final_answer` per answer, in time order.
    fn root_events(&self, answers: &[&Step]) -> Vec<Event> {
        let j = &self.journal;
        let content = self.opts.content;
        let mut events: Vec<(u64, u8, Event)> = Vec::new();
        for t in &j.turns {
            let mut a = vec![kv("bir.turn", i64::from(t.turn))];
            if let Some(origin) = &t.origin {
                a.push(kv("bir.turn.origin", origin.as_str()));
            }
            content_attrs(&mut a, t.prompt.as_str(), content);
            if let Some(metrics) = j.finish.map(|f| &f.metrics)
                && let Some(u) = metrics.turn_tokens(t.turn)
            {
                if let Some(model) = metrics.turn_models(t.turn).first() {
                    a.push(kv("gen_ai.response.model", *model));
                }
                usage_attrs(&mut a, &u);
            }
            let at = unix_nanos(&t.at);
            events.push((at, 0, event("bir.user_prompt", at, a)));
        }
        for s in answers {
            let text = s
                .output
                .as_ref()
                .and_then(|o| o.as_str().map(str::to_owned))
                .unwrap_or_default();
            let mut a = Vec::new();
            if let Some(turn) = s.turn {
                a.push(kv("bir.turn", i64::from(turn)));
            }
            content_attrs(&mut a, &text, content);
            let at = unix_nanos(&s.started_at);
            events.push((at, 1, event("bir.final_answer", at, a)));
        }
        events.sort_by_key(|(at, order, _)| (*at, *order));
        events.into_iter().map(|(_, _, e)| e).collect()
    }
}

/// The `gen_ai.usage.*` token counts (OpenTelemetry's meaning: input
/// counts the cached tokens too, the cache counts are parts of it).
fn usage_attrs(attrs: &mut Vec<KeyValue>, u: &TokenUsage) {
    attrs.push(kv("gen_ai.usage.input_tokens", u.input as i64));
    attrs.push(kv("gen_ai.usage.output_tokens", u.output as i64));
    attrs.push(kv(
        "gen_ai.usage.cache_read.input_tokens",
        u.cache_read as i64,
    ));
    attrs.push(kv(
        "gen_ai.usage.cache_creation.input_tokens",
        u.cache_write as i64,
    ));
}

fn event(name: &str, at: u64, attributes: Vec<KeyValue>) -> Event {
    Event {
        time_unix_nano: at,
        name: name.to_owned(),
        attributes,
    }
}

/// `bir.content.length` (characters) always; the text itself only with
/// content on.
fn content_attrs(attrs: &mut Vec<KeyValue>, text: &str, content: bool) {
    attrs.push(kv("bir.content.captured", content));
    attrs.push(kv("bir.content.length", text.chars().count() as i64));
    if content {
        attrs.push(kv("bir.content", text));
    }
}

/// One GenAI message (`gen-ai-input-messages.json` /
/// `gen-ai-output-messages.json`) as a JSON string.
fn message_json(role: &str, text: &str, finish_reason: Option<&str>) -> String {
    let mut m = serde_json::json!({"role": role, "parts": [{"type": "text", "content": text}]});
    if let Some(r) = finish_reason {
        m["finish_reason"] = r.into();
    }
    serde_json::Value::Array(vec![m]).to_string()
}

/// What the journal says of a call's server.
#[derive(Clone, Copy, Default)]
struct ServerFacts<'a> {
    protocol_version: Option<&'a str>,
    connection: Connection<'a>,
}

/// The span of one call: a CLIENT `tools/call {tool}` span for an MCP
/// call, an INTERNAL `execute_tool {tool}` span for a host built-in.
fn call_span(
    c: &Call,
    s: &Step,
    run_id: &str,
    trace: &[u8; 16],
    opts: &MapOptions,
    server: ServerFacts,
    parent_of: impl Fn(&Step) -> [u8; 8],
) -> Span {
    let tool = s.tool_name.as_str();
    let mcp = matches!(s.kind, None | Some(StepKind::Mcp));
    let start = unix_nanos(&c.selected.unwrap_or(s).started_at);
    let end = match c.response {
        Some(r) => match r.duration_ms {
            Some(ms) if ms.is_finite() && ms >= 0.0 => {
                start.saturating_add((ms * 1_000_000.0) as u64)
            }
            _ => unix_nanos(&r.started_at).max(start),
        },
        None => start,
    };
    let mut attrs = Vec::with_capacity(12);
    let name;
    if mcp {
        name = format!("tools/call {tool}");
        attrs.push(kv("mcp.method.name", "tools/call"));
        attrs.push(kv("gen_ai.operation.name", "execute_tool"));
        attrs.push(kv("gen_ai.tool.name", tool));
        if let Some(id) = s.tool_use_id.as_deref() {
            attrs.push(kv("gen_ai.tool.call.id", id));
        }
        if let Some(id) = &s.request_id {
            let text = match &**id {
                serde_json::Value::String(t) => t.clone(),
                other => other.to_string(),
            };
            attrs.push(kv("jsonrpc.request.id", text));
        }
        if let Some(v) = server.protocol_version {
            attrs.push(kv("mcp.protocol.version", v));
        }
        if let Some(t) = server.connection.transport {
            attrs.push(kv("network.transport", t));
        }
        if let Some(id) = server.connection.session {
            attrs.push(kv("mcp.session.id", id));
        }
        if !s.server_name.is_empty() {
            attrs.push(kv("bir.mcp.server.name", s.server_name.as_str()));
        }
    } else {
        name = format!("execute_tool {tool}");
        attrs.push(kv("gen_ai.operation.name", "execute_tool"));
        attrs.push(kv("gen_ai.tool.name", tool));
        if let Some(id) = s.tool_use_id.as_deref() {
            attrs.push(kv("gen_ai.tool.call.id", id));
        }
        attrs.push(kv("gen_ai.tool.type", "function"));
    }
    attrs.push(kv("bir.step.index", c.order as i64));
    let mut status = StatusCode::Unset;
    let mut status_message = String::new();
    if let Some(r) = c.response {
        if let Some(err) = &r.error {
            let code = err.get("code").map(|c| c.to_string());
            attrs.push(kv(
                "error.type",
                code.clone().unwrap_or_else(|| "_OTHER".to_owned()),
            ));
            if let Some(code) = code {
                attrs.push(kv("rpc.response.status_code", code));
            }
            // The message is the server's words (it may quote the
            // arguments): content, so it goes out only with content on.
            if opts.content
                && let Some(m) = err.get("message").and_then(|m| m.as_str())
            {
                status_message = m.chars().take(MAX_STATUS_MESSAGE).collect();
            }
            status = StatusCode::Error;
        } else if r.is_error {
            attrs.push(kv("error.type", "tool_error"));
            status = StatusCode::Error;
        } else if let Some(outcome) = r.outcome.as_deref().filter(|o| *o != "answered") {
            attrs.push(kv("error.type", outcome));
            status = StatusCode::Error;
        }
        if let Some(corr) = &r.correlation {
            attrs.push(kv("bir.correlation", corr.as_str()));
        }
    }
    if opts.content {
        if let Some(input) = c.selected.and_then(|s| s.input.as_ref()) {
            attrs.push(kv("gen_ai.tool.call.arguments", (**input).to_string()));
        }
        if let Some(output) = c
            .response
            .filter(|_| status == StatusCode::Unset)
            .and_then(|r| r.output.as_ref())
        {
            attrs.push(kv("gen_ai.tool.call.result", (**output).to_string()));
        }
    }
    Span {
        trace_id: *trace,
        span_id: call_span_id(run_id, trace, c.selected.unwrap_or(s), c.order),
        parent_span_id: Some(parent_of(s)),
        name,
        kind: if mcp {
            SpanKind::Client
        } else {
            SpanKind::Internal
        },
        start_time_unix_nano: start,
        end_time_unix_nano: end,
        attributes: attrs,
        events: Vec::new(),
        status,
        status_message,
    }
}
