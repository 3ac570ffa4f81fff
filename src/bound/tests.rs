//! The engine on event sequences, at simulated times.
//!
//! A [`Harness`] plays the daemon: it feeds inputs, keeps the records the
//! engine asks to write, and answers transcript reads from an in-memory
//! file table (immediately, unless told to hold them).

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::wire::{ProxyItem, ProxyRecords, ProxyRegister};
use super::{Engine, EngineConfig, Input, Output};
use crate::record::model::{
    Record, Redacted, RunEvent, RunFinish, RunHeader, Step, StepKind, StepType,
};
use crate::record::payload::fixture;

const SESSION: &str = "0b3f6f1e-2c5d-4e8a-9a77-5c1f00000001";
const TRANSCRIPT: &str = "/home/u/.claude/projects/p/0b3f6f1e.jsonl";

/// `secs` seconds into the simulated day.
fn at(secs: f64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000) + Duration::from_secs_f64(secs)
}

struct Harness {
    engine: Engine,
    /// (run id, record) in the order the engine emitted them.
    records: Vec<(String, Record)>,
    files: HashMap<String, Vec<u8>>,
    /// Reads asked for and not answered yet (when `hold_reads`).
    reads: Vec<Output>,
    hold_reads: bool,
    now: SystemTime,
}

impl Harness {
    fn new() -> Harness {
        Harness {
            engine: Engine::new(EngineConfig::for_tests()),
            records: Vec::new(),
            files: HashMap::new(),
            reads: Vec::new(),
            hold_reads: false,
            now: at(0.0),
        }
    }

    fn take(&mut self, outputs: Vec<Output>) {
        let mut queue = outputs;
        while !queue.is_empty() {
            let mut next = Vec::new();
            for output in queue {
                match output {
                    Output::Record { run_id, record } => self.records.push((run_id, *record)),
                    read @ Output::ReadTranscript { .. } if self.hold_reads => {
                        self.reads.push(read)
                    }
                    Output::ReadTranscript {
                        session_id,
                        agent_id,
                        path,
                        offset,
                        ..
                    } => {
                        let bytes = self
                            .files
                            .get(&path)
                            .map(|b| b.get(offset as usize..).unwrap_or_default().to_vec())
                            .unwrap_or_default();
                        let input = Input::TranscriptRead {
                            session_id,
                            agent_id,
                            offset,
                            bytes,
                        };
                        next.extend(self.engine.handle(input, self.now));
                    }
                }
            }
            queue = next;
        }
    }

    /// The file at `path` holds these transcript records, one a line.
    fn write_transcript(&mut self, path: &str, records: &[Value]) {
        let text: String = records.iter().map(|r| format!("{r}\n")).collect();
        self.files.insert(path.to_owned(), text.into_bytes());
    }

    /// A session its hooks tell from the start: the main transcript holds
    /// `prompt`, `calls` and `answer` (see [`transcript_rows`]), and the
    /// session starts (0 s) and gets `prompt` (1 s).
    fn begin_told_by_hooks(
        &mut self,
        prompt: &str,
        calls: &[(&str, &str, Value, Value)],
        answer: &str,
    ) {
        self.write_transcript(TRANSCRIPT, &transcript_rows(prompt, calls, answer));
        self.hook(0.0, "SessionStart", json!({"source": "startup"}));
        self.hook(1.0, "UserPromptSubmit", json!({"prompt": prompt}));
    }

    /// The model's message making calls `ids`, with `words` before them,
    /// appended to the main transcript: what Claude Code writes there
    /// (usually before the calls' PreToolUse; under load, later). A message
    /// after earlier ones follows their tool results (one row standing for
    /// them), as in a real transcript.
    fn said(&mut self, words: &str, ids: &[&str]) {
        if self.files.get(TRANSCRIPT).is_some_and(|f| !f.is_empty()) {
            let results = json!({"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "earlier", "content": "ok"}]}});
            let file = self.files.entry(TRANSCRIPT.to_owned()).or_default();
            file.extend_from_slice(format!("{results}\n").as_bytes());
        }
        let mut content = vec![json!({"type": "text", "text": words})];
        for id in ids {
            content.push(json!({"type": "tool_use", "id": id, "name": "Tool", "input": {}}));
        }
        let line =
            json!({"type": "assistant", "message": {"role": "assistant", "content": content}});
        let file = self.files.entry(TRANSCRIPT.to_owned()).or_default();
        file.extend_from_slice(format!("{line}\n").as_bytes());
    }

    /// Answers the reads that were held.
    fn answer_reads(&mut self) {
        self.hold_reads = false;
        let reads = std::mem::take(&mut self.reads);
        self.take(reads);
    }

    fn input(&mut self, secs: f64, input: Input) {
        self.now = at(secs);
        let out = self.engine.handle(input, self.now);
        self.take(out);
    }

    /// The `everything` server's proxy reports one echo call.
    fn echo_report(&mut self, secs: f64, id: Option<&str>, args: Value, text: &str) {
        let item = call("everything", "echo", id, args, echo_result(text));
        self.proxy(secs, "everything", vec![item]);
    }

    fn stop(&mut self, secs: f64, answer: &str) {
        self.hook(secs, "Stop", json!({"last_assistant_message": answer}));
    }

    fn end(&mut self, secs: f64) {
        self.hook(secs, "SessionEnd", json!({"reason": "other"}));
    }

    /// A Bash call: PreToolUse at `secs`, PostToolUse half a second later.
    fn bash(&mut self, secs: f64, id: &str, command: &str, stdout: &str) {
        let input = json!({"command": command});
        self.pre(secs, "Bash", id, input.clone());
        self.post(secs + 0.5, "Bash", id, input, json!({"stdout": stdout}));
    }

    fn pre(&mut self, secs: f64, tool: &str, id: &str, input: Value) {
        self.hook(secs, "PreToolUse", pre(tool, id, input));
    }

    fn post(&mut self, secs: f64, tool: &str, id: &str, input: Value, response: Value) {
        self.hook(secs, "PostToolUse", post(tool, id, input, response));
    }

    fn hook(&mut self, secs: f64, event: &str, extra: Value) {
        self.hook_in(SESSION, secs, event, extra);
    }

    fn hook_in(&mut self, session: &str, secs: f64, event: &str, extra: Value) {
        let mut payload = json!({
            "session_id": session,
            "transcript_path": TRANSCRIPT,
            "cwd": "/work/project",
            "hook_event_name": event,
        });
        if let (Some(p), Value::Object(extra)) = (payload.as_object_mut(), extra) {
            p.extend(extra);
        }
        self.input(
            secs,
            Input::Hook {
                event: event.to_owned(),
                payload,
            },
        );
    }

    fn register(&mut self, secs: f64, proxy_id: &str, server: &str) {
        self.input(
            secs,
            Input::ProxyRegistered(ProxyRegister {
                proxy_id: proxy_id.into(),
                session_id: SESSION.into(),
                server_name: server.into(),
                pid: 42,
                cwd: "/work/project".into(),
                bir_version: "test".into(),
                host: Some(crate::record::model::HostInfo {
                    app: "claude-code".into(),
                    version: "2.1.332".into(),
                }),
                ancestors: Vec::new(),
            }),
        );
    }

    fn proxy(&mut self, secs: f64, server: &str, items: Vec<ProxyItem>) {
        self.input(
            secs,
            Input::ProxyRecords(ProxyRecords {
                proxy_id: format!("p-{server}"),
                session_id: SESSION.into(),
                server_name: server.into(),
                items,
                lost: 0,
            }),
        );
    }

    fn tick(&mut self, secs: f64) {
        self.now = at(secs);
        let out = self.engine.tick(self.now);
        self.take(out);
    }

    fn run_count(&self) -> usize {
        let runs: std::collections::HashSet<&str> =
            self.records.iter().map(|(r, _)| r.as_str()).collect();
        runs.len()
    }

    /// The names of the session events, in order.
    fn event_names(&self) -> Vec<&str> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                RunEvent::SessionEvent(s) => Some(s.name.as_str()),
                _ => None,
            })
            .collect()
    }

    fn turns(&self) -> Vec<&crate::record::model::Turn> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                RunEvent::Turn(t) => Some(t),
                _ => None,
            })
            .collect()
    }

    fn events(&self) -> Vec<&RunEvent> {
        self.records.iter().map(|(_, r)| &r.event).collect()
    }

    /// Steps in `stepIndex` order.
    fn steps(&self) -> Vec<&Step> {
        let mut steps: Vec<&Step> = self
            .events()
            .into_iter()
            .filter_map(|e| match e {
                RunEvent::Step(s) => Some(s),
                _ => None,
            })
            .collect();
        steps.sort_by_key(|s| s.step_index);
        steps
    }

    /// How many final answers the run tells.
    fn final_answers(&self) -> usize {
        self.steps()
            .iter()
            .filter(|s| s.step_type == StepType::FinalAnswer)
            .count()
    }

    fn steps_of(&self, tool_use_id: &str) -> Vec<&Step> {
        self.steps()
            .into_iter()
            .filter(|s| s.tool_use_id.as_deref() == Some(tool_use_id))
            .collect()
    }

    fn header(&self) -> &RunHeader {
        match self.records.first().map(|(_, r)| &r.event) {
            Some(RunEvent::RunStarted(h)) => h,
            other => panic!("the first record is not run_started: {other:?}"),
        }
    }

    fn finish(&self) -> &RunFinish {
        match self.records.last().map(|(_, r)| &r.event) {
            Some(RunEvent::RunFinished(f)) => f,
            other => panic!("the last record is not run_finished: {other:?}"),
        }
    }

    fn journal(&self) -> String {
        self.records
            .iter()
            .map(|(_, r)| serde_json::to_string(r).expect("serialise"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// What every run must satisfy, whatever happened.
    fn assert_well_formed(&self) {
        let mut runs: HashMap<&str, Vec<&Record>> = HashMap::new();
        for (run, record) in &self.records {
            runs.entry(run.as_str()).or_default().push(record);
        }
        for (run, records) in runs {
            assert!(run.starts_with("run_"), "{run}");
            for (i, r) in records.iter().enumerate() {
                assert_eq!(r.seq, i as u64 + 1, "seq of run {run} has a gap");
            }
            assert!(matches!(records[0].event, RunEvent::RunStarted(_)));
            let finishes = records
                .iter()
                .filter(|r| matches!(r.event, RunEvent::RunFinished(_)))
                .count();
            assert!(finishes <= 1, "run {run} finished twice");
            if finishes == 1 {
                assert!(matches!(
                    records.last().map(|r| &r.event),
                    Some(RunEvent::RunFinished(_))
                ));
            }
            let mut indexes: Vec<u64> = records
                .iter()
                .filter_map(|r| match &r.event {
                    RunEvent::Step(s) => Some(s.step_index),
                    _ => None,
                })
                .collect();
            let count = indexes.len();
            indexes.sort_unstable();
            indexes.dedup();
            assert_eq!(
                indexes.len(),
                count,
                "a stepIndex of run {run} is used twice"
            );
        }
    }

    /// Each tool call told exactly once: one `tool_selected` before one
    /// `tool_response`.
    fn assert_told_once(&self, tool_use_id: &str) -> (Step, Step) {
        let steps = self.steps_of(tool_use_id);
        assert_eq!(steps.len(), 2, "{tool_use_id}: {steps:#?}");
        assert_eq!(steps[0].step_type, StepType::ToolSelected);
        assert_eq!(steps[1].step_type, StepType::ToolResponse);
        (steps[0].clone(), steps[1].clone())
    }
}

fn pre(tool: &str, id: &str, input: Value) -> Value {
    let mut v = json!({"tool_name": tool, "tool_use_id": id, "tool_input": input,
                       "permission_mode": "bypassPermissions"});
    if let Some(server) = tool
        .strip_prefix("mcp__")
        .and_then(|r| r.split("__").next())
    {
        v["mcp_server"] = json!({"name": server, "source": "project"});
    }
    v
}

fn post(tool: &str, id: &str, input: Value, response: Value) -> Value {
    let mut v = pre(tool, id, input);
    v["tool_response"] = response;
    v["duration_ms"] = json!(9);
    v
}

/// A proxy's report of one call, as its recorder prepares it.
fn call(
    server: &str,
    tool: &str,
    tool_use_id: Option<&str>,
    args: Value,
    result: Value,
) -> ProxyItem {
    let selected: Step = serde_json::from_value(json!({
        "id": "step_p1", "stepIndex": 1, "type": "tool_selected",
        "qualifiedName": format!("mcp__{server}__{tool}"), "serverName": server,
        "toolName": tool, "startedAt": "2027-01-15T08:00:00.000Z",
        "input": args, "requestId": 7, "toolUseId": tool_use_id,
        "argsDigest": crate::codec::sha256_hex(&crate::record::model::canonical(&args)),
    }))
    .expect("selected step");
    let is_error = result["isError"].as_bool().unwrap_or(false);
    let mut response = selected.clone();
    response.id = "step_p2".into();
    response.step_index = 2;
    response.step_type = StepType::ToolResponse;
    response.input = None;
    response.args_digest = None;
    response.output = Some(fixture(result));
    response.is_error = is_error;
    response.duration_ms = Some(3.25);
    response.outcome = Some("answered".into());
    ProxyItem::Call {
        selected: Box::new(selected),
        response: Box::new(response),
    }
}

fn echo_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": format!("Echo: {text}")}],
           "structuredContent": {"echoed": text}})
}

fn start(h: &mut Harness, prompt: &str) {
    h.hook(0.0, "SessionStart", json!({"source": "startup"}));
    h.register(0.1, "p-everything", "everything");
    h.hook(1.0, "UserPromptSubmit", json!({"prompt": prompt}));
}

/// One MCP call where the proxy's report arrives at `proxy_at` and the
/// hooks at 2.0 (Pre) and 3.0 (Post).
fn one_mcp_call(proxy_at: f64) -> Harness {
    let mut h = Harness::new();
    start(&mut h, "echo hi");
    let report = || {
        vec![call(
            "everything",
            "echo",
            Some("toolu_1"),
            json!({"message": "hi"}),
            echo_result("hi"),
        )]
    };
    let args = json!({"message": "hi"});
    let mut proxy_sent = false;
    for (t, what) in [(2.0, "pre"), (3.0, "post")] {
        if !proxy_sent && proxy_at < t {
            h.proxy(proxy_at, "everything", report());
            proxy_sent = true;
        }
        if what == "pre" {
            h.pre(t, "mcp__everything__echo", "toolu_1", args.clone());
        } else {
            let content = json!([{"type": "text", "text": "Echo: hi"}]);
            h.post(t, "mcp__everything__echo", "toolu_1", args.clone(), content);
        }
    }
    if !proxy_sent {
        h.proxy(proxy_at, "everything", report());
    }
    h.stop(4.0, "It said hi.");
    h.end(5.0);
    h
}

#[test]
fn an_mcp_call_is_one_joined_step_whatever_arrives_first() {
    for proxy_at in [1.5, 2.5, 3.5] {
        let h = one_mcp_call(proxy_at);
        h.assert_well_formed();
        let (selected, response) = h.assert_told_once("toolu_1");
        // The hook's identity and the model's arguments…
        assert_eq!(
            selected.input.as_deref(),
            Some(&json!({"message": "hi"})),
            "proxy at {proxy_at}"
        );
        assert_eq!(selected.kind, Some(StepKind::Mcp));
        assert_eq!(selected.qualified_name, "mcp__everything__echo");
        assert_eq!(selected.turn, Some(1));
        // …and the server's true result, with the proxy's duration.
        assert_eq!(
            response.output.as_deref(),
            Some(&echo_result("hi")),
            "proxy at {proxy_at}"
        );
        assert_eq!(response.duration_ms, Some(3.25));
        assert_eq!(response.request_id.as_deref(), Some(&json!(7)));
        assert_eq!(response.correlation, None);
        assert!(selected.step_index < response.step_index);
        let answer = h.steps().last().map(|s| (s.step_type, s.output.clone()));
        assert_eq!(
            answer,
            Some((StepType::FinalAnswer, Some(fixture(json!("It said hi.")))))
        );
        let finish = h.finish();
        assert_eq!(finish.reason.as_deref(), Some("session_end"));
        assert_eq!(finish.output.as_deref(), Some("It said hi."));
        assert_eq!(finish.metrics.tool_calls, 1);
        assert!(!finish.lossy);
        let header = h.header();
        assert_eq!(header.input.as_deref(), Some("echo hi"));
        assert_eq!(header.metadata.tier, "bound");
        assert_eq!(header.metadata.wrapped_servers, ["everything"]);
        assert_eq!(
            header.metadata.host.as_ref().map(|h| h.version.as_str()),
            Some("2.1.332")
        );
    }
}

#[test]
fn an_mcp_step_keeps_the_servers_tool_name_when_the_host_renames_it() {
    // Codex shows the model `get-sum` as `get_sum` and its hooks say so;
    // the server's tools/list (the proxy's snapshot) has its own name.
    for proxy_at in [1.5, 2.5, 3.5] {
        let mut h = Harness::new();
        start(&mut h, "sum");
        // The proxy's snapshot names the server's tools.
        let snapshot = crate::record::model::ServerSnapshot {
            server_name: "everything".into(),
            tools_digest: "d1".into(),
            tools: ["echo", "get-sum"]
                .iter()
                .map(|n| fixture(json!({"name": n})))
                .collect(),
            ..Default::default()
        };
        h.proxy(
            1.2,
            "everything",
            vec![ProxyItem::Snapshot(Box::new(snapshot))],
        );
        let args = json!({"a": 2, "b": 3});
        let result = json!({"content": [{"type": "text", "text": "5"}]});
        let report = || {
            vec![call(
                "everything",
                "get-sum",
                Some("call_6"),
                args.clone(),
                result.clone(),
            )]
        };
        if proxy_at < 2.0 {
            h.proxy(proxy_at, "everything", report());
        }
        h.pre(2.0, "mcp__everything__get_sum", "call_6", args.clone());
        if (2.0..3.0).contains(&proxy_at) {
            h.proxy(proxy_at, "everything", report());
        }
        h.post(
            3.0,
            "mcp__everything__get_sum",
            "call_6",
            args.clone(),
            json!([]),
        );
        if proxy_at > 3.0 {
            h.proxy(proxy_at, "everything", report());
        }
        h.stop(4.0, "5.");
        h.end(5.0);
        h.assert_well_formed();
        let (selected, response) = h.assert_told_once("call_6");
        assert_eq!(selected.tool_name, "get-sum", "proxy at {proxy_at}");
        assert_eq!(response.tool_name, "get-sum", "proxy at {proxy_at}");
        assert_eq!(selected.server_name, "everything");
    }
}

#[test]
fn a_response_waiting_for_its_proxy_keeps_its_place_in_the_order() {
    // Post of the MCP call at 3.0, a Bash call after it, the proxy's report
    // only at 4.5: the MCP response still comes before the Bash steps.
    let mut h = Harness::new();
    start(&mut h, "two things");
    let args = json!({"message": "hi"});
    h.said("Echo first.", &["toolu_1"]);
    h.pre(2.0, "mcp__everything__echo", "toolu_1", args.clone());
    h.post(
        3.0,
        "mcp__everything__echo",
        "toolu_1",
        args.clone(),
        json!([]),
    );
    h.said("Then list.", &["toolu_2"]);
    h.bash(3.5, "toolu_2", "ls", "a");
    assert_eq!(
        h.steps_of("toolu_1").len(),
        1,
        "the response waits for the proxy"
    );
    assert_eq!(
        h.steps_of("toolu_2").len(),
        2,
        "a call with its words waits for nothing"
    );
    h.echo_report(4.5, Some("toolu_1"), args, "hi");
    h.assert_well_formed();
    let order: Vec<(String, StepType)> = h
        .steps()
        .iter()
        .map(|s| {
            (
                s.tool_use_id.clone().unwrap_or_default().into_inner(),
                s.step_type,
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("toolu_1".into(), StepType::ToolSelected),
            ("toolu_1".into(), StepType::ToolResponse),
            ("toolu_2".into(), StepType::ToolSelected),
            ("toolu_2".into(), StepType::ToolResponse),
        ]
    );
    assert_eq!(
        h.steps_of("toolu_1")[1].output.as_deref(),
        Some(&echo_result("hi"))
    );
    assert_eq!(
        h.steps_of("toolu_1")[1].context.as_deref(),
        Some("Echo first.")
    );
    assert_eq!(
        h.steps_of("toolu_2")[1].context.as_deref(),
        Some("Then list.")
    );
}

#[test]
fn without_its_proxy_report_a_call_is_told_from_the_hooks_after_the_grace() {
    let mut h = Harness::new();
    start(&mut h, "echo");
    let args = json!({"message": "hi"});
    let content = json!([{"type": "text", "text": "Echo: hi"}]);
    h.pre(2.0, "mcp__everything__echo", "toolu_1", args.clone());
    h.post(
        3.0,
        "mcp__everything__echo",
        "toolu_1",
        args.clone(),
        content.clone(),
    );
    h.tick(7.9);
    assert_eq!(h.steps_of("toolu_1").len(), 1, "still within the grace");
    h.tick(8.1);
    let (_, response) = h.assert_told_once("toolu_1");
    assert_eq!(response.output.as_deref(), Some(&content));
    assert_eq!(response.duration_ms, Some(9.0));
    // The proxy's report after that is not told twice.
    h.echo_report(9.0, Some("toolu_1"), args, "hi");
    h.assert_told_once("toolu_1");
    h.assert_well_formed();
}

#[test]
fn a_proxy_that_binds_late_still_joins_within_the_grace() {
    let mut h = Harness::new();
    h.hook(0.0, "SessionStart", json!({"source": "startup"}));
    h.hook(1.0, "UserPromptSubmit", json!({"prompt": "echo"}));
    let args = json!({"message": "hi"});
    h.said("Echoing.", &["toolu_1"]);
    h.pre(2.0, "mcp__everything__echo", "toolu_1", args.clone());
    h.post(
        3.0,
        "mcp__everything__echo",
        "toolu_1",
        args.clone(),
        json!([]),
    );
    // The proxy looked for the daemon for a while, then bound.
    h.register(6.0, "p-everything", "everything");
    h.tick(6.5);
    h.echo_report(7.0, Some("toolu_1"), args, "hi");
    let (_, response) = h.assert_told_once("toolu_1");
    assert_eq!(response.output.as_deref(), Some(&echo_result("hi")));
    h.assert_well_formed();
}

#[test]
fn a_server_whose_proxy_left_is_not_waited_for() {
    let mut h = Harness::new();
    start(&mut h, "echo");
    h.input(
        1.5,
        Input::ProxyGone {
            proxy_id: "p-everything".into(),
        },
    );
    let args = json!({"message": "hi"});
    h.said("Echoing.", &["toolu_1"]);
    h.pre(2.0, "mcp__everything__echo", "toolu_1", args.clone());
    h.post(3.0, "mcp__everything__echo", "toolu_1", args, json!([]));
    h.assert_told_once("toolu_1");
}

#[test]
fn a_session_ending_waits_only_for_servers_with_a_bound_proxy() {
    let mut h = Harness::new();
    start(&mut h, "two servers");
    let args = json!({"q": 1});
    for (t, tool, id) in [
        (2.0, "mcp__everything__echo", "toolu_1"),
        (3.0, "mcp__unwrapped__search", "toolu_2"),
    ] {
        h.pre(t, tool, id, args.clone());
        h.post(t + 0.5, tool, id, args.clone(), json!([]));
    }
    h.stop(4.0, "done");
    h.end(4.5);
    // `unwrapped` has no proxy: told at once. `everything` has one whose
    // report may still come.
    h.assert_told_once("toolu_2");
    assert_eq!(h.steps_of("toolu_1").len(), 1);
    h.echo_report(5.0, Some("toolu_1"), args, "late");
    let (_, response) = h.assert_told_once("toolu_1");
    assert_eq!(response.output.as_deref(), Some(&echo_result("late")));
    assert_eq!(h.finish().reason.as_deref(), Some("session_end"));
    h.assert_well_formed();
}

#[test]
fn reports_interleaved_with_hooks_in_any_order_join_exactly_once() {
    // A tiny deterministic generator: the order varies per seed, the test
    // does not vary per run.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for round in 0..40 {
        let mut h = Harness::new();
        start(&mut h, "many");
        let calls = 6;
        let keyed = round % 2 == 0;
        // The hooks keep their order; each report goes somewhere among
        // them (before its Pre, between, after its Post).
        let mut script: Vec<(usize, &str)> = Vec::new();
        for i in 0..calls {
            script.push((i, "pre"));
        }
        for i in 0..calls {
            script.push((i, "post"));
        }
        for i in 0..calls {
            let at = next(script.len() + 1);
            script.insert(at, (i, "report"));
        }
        for (step, (i, what)) in script.iter().enumerate() {
            let t = 2.0 + step as f64 * 0.1;
            let id = format!("toolu_{i}");
            let args = json!({"n": i});
            match *what {
                "pre" => h.pre(t, "mcp__everything__echo", &id, args),
                "post" => h.post(t, "mcp__everything__echo", &id, args, json!([])),
                _ => h.echo_report(t, keyed.then_some(id.as_str()), args, &format!("r{i}")),
            }
        }
        h.stop(20.0, "done");
        h.end(21.0);
        h.tick(40.0);
        h.assert_well_formed();
        for i in 0..calls {
            let (selected, response) = h.assert_told_once(&format!("toolu_{i}"));
            assert_eq!(
                selected.input.as_deref(),
                Some(&json!({"n": i})),
                "round {round}"
            );
            assert_eq!(
                response.output.as_deref(),
                Some(&echo_result(&format!("r{i}"))),
                "round {round}"
            );
            let expected = (!keyed).then_some("fingerprint");
            assert_eq!(response.correlation.as_deref(), expected, "round {round}");
        }
        assert_eq!(h.finish().metrics.tool_calls, calls as u64);
    }
}

#[test]
fn identical_concurrent_calls_join_by_fingerprint_first_in_first_out() {
    let mut h = Harness::new();
    start(&mut h, "echo twice");
    let args = json!({"message": "same"});
    h.pre(2.0, "mcp__everything__echo", "toolu_a", args.clone());
    h.pre(2.1, "mcp__everything__echo", "toolu_b", args.clone());
    // A host without the `_meta` key: the reports carry no tool_use_id.
    let first = call(
        "everything",
        "echo",
        None,
        args.clone(),
        echo_result("first"),
    );
    let second = call(
        "everything",
        "echo",
        None,
        args.clone(),
        echo_result("second"),
    );
    h.proxy(2.5, "everything", vec![first, second]);
    // The hooks' view of the answers (the calls carry no words of the
    // model, so they wait for it and the transcript read it brings).
    let content = json!([{"type": "text", "text": "Echo: same"}]);
    h.post(
        3.0,
        "mcp__everything__echo",
        "toolu_a",
        args.clone(),
        content.clone(),
    );
    h.post(3.1, "mcp__everything__echo", "toolu_b", args, content);
    h.tick(9.0);
    h.assert_well_formed();
    let (_, a) = h.assert_told_once("toolu_a");
    let (_, b) = h.assert_told_once("toolu_b");
    assert_eq!(a.output.as_deref(), Some(&echo_result("first")));
    assert_eq!(b.output.as_deref(), Some(&echo_result("second")));
    assert_eq!(a.correlation.as_deref(), Some("fingerprint"));
    assert_eq!(b.correlation.as_deref(), Some("fingerprint"));
}

#[test]
fn a_report_before_its_hooks_joins_by_fingerprint_too() {
    let mut h = Harness::new();
    start(&mut h, "echo");
    let args = json!({"message": "early"});
    h.echo_report(1.5, None, args.clone(), "early");
    h.pre(2.0, "mcp__everything__echo", "toolu_1", args);
    // No PostToolUse in this sequence: the call is told at the grace.
    h.tick(9.0);
    let (selected, response) = h.assert_told_once("toolu_1");
    assert_eq!(selected.correlation.as_deref(), Some("fingerprint"));
    assert_eq!(response.output.as_deref(), Some(&echo_result("early")));
}

#[test]
fn an_injected_call_id_joins_and_is_not_stored() {
    let mut h = Harness::new();
    start(&mut h, "echo");
    let args = json!({"message": "hi"});
    h.pre(2.0, "mcp__everything__echo", "toolu_1", args.clone());
    let injected = json!({"message": "hi", "__bir_call_id__": "bir-toolu_1"});
    h.echo_report(2.5, None, injected, "hi");
    // No PostToolUse in this sequence: the call is told at the grace.
    h.tick(9.0);
    let (selected, response) = h.assert_told_once("toolu_1");
    assert_eq!(selected.input.as_deref(), Some(&args));
    assert_eq!(response.correlation, None);
    assert!(!h.journal().contains("__bir_call_id__"));
}

/// The opt-in injection end to end in the engine: the `PreToolUse` answer
/// for a bound server's call carries the id (and no permission decision);
/// the host runs the call with it and without `_meta`; the proxy's report
/// joins on it, and nothing stored holds the key.
#[test]
fn the_pre_tool_use_answer_injects_an_id_that_joins_a_report_without_meta() {
    let mut h = Harness::new();
    start(&mut h, "echo twice");
    let args = json!({"message": "hi"});
    let mut payload = pre("mcp__everything__echo", "toolu_1", args.clone());
    payload["session_id"] = json!(SESSION);
    payload["hook_event_name"] = json!("PreToolUse");
    let injection = |payload: &Value| {
        let raw = payload.to_string();
        let text = h.engine.injection(payload, raw.as_bytes())?;
        Some(serde_json::from_str::<Value>(&text).expect("JSON"))
    };
    let answer = injection(&payload).expect("an injection");
    assert_eq!(answer["hookSpecificOutput"]["hookEventName"], "PreToolUse");
    assert!(
        answer["hookSpecificOutput"]
            .get("permissionDecision")
            .is_none()
    );
    let updated = answer["hookSpecificOutput"]["updatedInput"].clone();
    assert_eq!(
        updated,
        json!({"message": "hi", "__bir_call_id__": "bir-toolu_1"})
    );

    // Not for a built-in, a server without a bound proxy, another session.
    let bash = pre("Bash", "toolu_x", json!({"command": "ls"}));
    let mut bash = bash;
    bash["session_id"] = json!(SESSION);
    assert_eq!(injection(&bash), None);
    let mut other = pre("mcp__github__search", "toolu_y", json!({}));
    other["session_id"] = json!(SESSION);
    assert_eq!(injection(&other), None);
    let mut stranger = payload.clone();
    stranger["session_id"] = json!("another-session");
    assert_eq!(injection(&stranger), None);

    // Two identical calls in flight: only the injected ids tell them apart.
    h.hook(2.0, "PreToolUse", payload.clone());
    h.pre(2.1, "mcp__everything__echo", "toolu_2", args.clone());
    let second = json!({"message": "hi", "__bir_call_id__": "bir-toolu_2"});
    h.echo_report(2.5, None, second.clone(), "second");
    h.echo_report(2.6, None, updated.clone(), "first");
    let content = json!([{"type": "text", "text": "Echo: hi"}]);
    h.post(
        3.0,
        "mcp__everything__echo",
        "toolu_1",
        updated,
        content.clone(),
    );
    h.post(3.1, "mcp__everything__echo", "toolu_2", second, content);
    h.stop(4.0, "done");
    h.end(5.0);
    h.tick(20.0);
    h.assert_well_formed();
    for (id, text) in [("toolu_1", "first"), ("toolu_2", "second")] {
        let (selected, response) = h.assert_told_once(id);
        assert_eq!(selected.input.as_deref(), Some(&args), "{id}");
        assert_eq!(response.output.as_deref(), Some(&echo_result(text)), "{id}");
        assert_eq!(
            response.correlation, None,
            "{id}: joined exactly, not by fingerprint"
        );
    }
    assert!(!h.journal().contains("__bir_call_id__"), "{}", h.journal());
}

#[test]
fn a_proxy_call_without_any_hook_is_still_an_mcp_step() {
    let mut h = Harness::new();
    h.register(0.0, "p-everything", "everything");
    h.echo_report(1.0, Some("toolu_9"), json!({"message": "x"}), "x");
    assert!(h.records.is_empty(), "held for the grace");
    h.tick(6.5);
    h.assert_well_formed();
    let (selected, response) = h.assert_told_once("toolu_9");
    assert_eq!(selected.kind, Some(StepKind::Mcp));
    assert_eq!(selected.input.as_deref(), Some(&json!({"message": "x"})));
    assert_eq!(selected.started_at, "2027-01-15T08:00:00.000Z");
    assert_eq!(response.output.as_deref(), Some(&echo_result("x")));
    assert!(
        !h.header().metadata.lossy,
        "hooks may just not be installed"
    );
}

#[test]
fn parallel_tool_calls_in_one_turn_are_each_told_once() {
    let mut h = Harness::new();
    start(&mut h, "do three things");
    let m = |s: &str| json!({"message": s});
    h.said("Three at once.", &["toolu_1", "toolu_2", "toolu_3"]);
    h.pre(2.0, "mcp__everything__echo", "toolu_1", m("one"));
    h.pre(2.0, "Read", "toolu_2", json!({"file_path": "/a"}));
    h.pre(2.0, "mcp__everything__echo", "toolu_3", m("three"));
    h.echo_report(2.2, Some("toolu_3"), m("three"), "three");
    h.post(
        2.3,
        "Read",
        "toolu_2",
        json!({"file_path": "/a"}),
        json!({"content": "A"}),
    );
    h.echo_report(2.4, Some("toolu_1"), m("one"), "one");
    h.post(
        2.5,
        "mcp__everything__echo",
        "toolu_3",
        m("three"),
        json!([]),
    );
    h.post(2.6, "mcp__everything__echo", "toolu_1", m("one"), json!([]));
    let batch = json!({"tool_calls": [
        {"tool_name": "mcp__everything__echo", "tool_input": m("one"), "tool_use_id": "toolu_1", "tool_response": []},
        {"tool_name": "Read", "tool_input": {"file_path": "/a"}, "tool_use_id": "toolu_2", "tool_response": "A"},
        {"tool_name": "mcp__everything__echo", "tool_input": m("three"), "tool_use_id": "toolu_3", "tool_response": []}]});
    h.hook(2.7, "PostToolBatch", batch);
    h.assert_well_formed();
    for (id, text) in [("toolu_1", "one"), ("toolu_3", "three")] {
        let (_, response) = h.assert_told_once(id);
        assert_eq!(response.output.as_deref(), Some(&echo_result(text)));
    }
    let (selected, response) = h.assert_told_once("toolu_2");
    assert_eq!(selected.kind, Some(StepKind::Builtin));
    assert_eq!(response.output.as_deref(), Some(&json!({"content": "A"})));
    assert_eq!(response.outcome.as_deref(), Some("answered"));
    // Completion order, by the first view that saw each end: toolu_3's
    // report (2.2), Read's PostToolUse (2.3), toolu_1's report (2.4).
    let responses: Vec<String> = h
        .steps()
        .iter()
        .filter(|s| s.step_type == StepType::ToolResponse)
        .filter_map(|s| s.tool_use_id.clone().map(Redacted::into_inner))
        .collect();
    assert_eq!(responses, ["toolu_3", "toolu_2", "toolu_1"]);
}

#[test]
fn subagents_calling_the_same_mcp_tool_are_each_attributed() {
    let mut h = Harness::new();
    start(&mut h, "two subagents");
    let agent_input =
        |n: &str| json!({"description": n, "prompt": n, "subagent_type": "general-purpose"});
    let launched = |id: &str| json!({"isAsync": true, "status": "async_launched", "agentId": id});
    h.pre(2.0, "Agent", "toolu_ag1", agent_input("one"));
    h.hook(
        2.1,
        "SubagentStart",
        json!({"agent_id": "a1", "agent_type": "general-purpose"}),
    );
    h.post(
        2.2,
        "Agent",
        "toolu_ag1",
        agent_input("one"),
        launched("a1"),
    );
    h.pre(2.3, "Agent", "toolu_ag2", agent_input("two"));
    h.hook(
        2.4,
        "SubagentStart",
        json!({"agent_id": "a2", "agent_type": "Explore"}),
    );
    h.post(
        2.5,
        "Agent",
        "toolu_ag2",
        agent_input("two"),
        launched("a2"),
    );
    let args = json!({"message": "same"});
    for (t, agent, agent_type, id) in [
        (3.0, "a1", "general-purpose", "toolu_s1"),
        (3.1, "a2", "Explore", "toolu_s2"),
    ] {
        let mut p = pre("mcp__everything__echo", id, args.clone());
        p["agent_id"] = json!(agent);
        p["agent_type"] = json!(agent_type);
        h.hook(t, "PreToolUse", p);
    }
    // Reports in the other order.
    h.proxy(
        3.5,
        "everything",
        vec![
            call(
                "everything",
                "echo",
                Some("toolu_s2"),
                args.clone(),
                echo_result("two"),
            ),
            call(
                "everything",
                "echo",
                Some("toolu_s1"),
                args.clone(),
                echo_result("one"),
            ),
        ],
    );
    for (t, agent, agent_type, id, text) in [
        (3.6, "a1", "general-purpose", "toolu_s1", "one"),
        (3.7, "a2", "Explore", "toolu_s2", "two"),
    ] {
        let content = json!([{"type": "text", "text": format!("Echo: {text}")}]);
        let mut p = post("mcp__everything__echo", id, args.clone(), content);
        p["agent_id"] = json!(agent);
        p["agent_type"] = json!(agent_type);
        h.hook(t, "PostToolUse", p);
    }
    h.hook(
        4.0,
        "Stop",
        json!({"last_assistant_message": "Launched both.",
        "background_tasks": [{"id": "a1", "type": "subagent", "status": "running"}]}),
    );
    assert!(
        !h.events()
            .iter()
            .any(|e| matches!(e, RunEvent::RunFinished(_))),
        "a Stop with subagents still running does not end the run"
    );
    h.hook(
        5.0,
        "SubagentStop",
        json!({"agent_id": "a1", "agent_type": "general-purpose",
        "last_assistant_message": "one done"}),
    );
    h.hook(
        5.2,
        "SubagentStop",
        json!({"agent_id": "a2", "agent_type": "Explore",
        "last_assistant_message": "two done"}),
    );
    h.hook(5.5, "UserPromptSubmit", json!({"prompt":
        "<task-notification>\n<task-id>a1</task-id>\n<tool-use-id>toolu_ag1</tool-use-id>\n<status>completed</status>"}));
    h.stop(6.0, "done");
    h.end(7.0);
    h.assert_well_formed();
    for (id, agent, agent_type, parent, text) in [
        ("toolu_s1", "a1", "general-purpose", "toolu_ag1", "one"),
        ("toolu_s2", "a2", "Explore", "toolu_ag2", "two"),
    ] {
        let (selected, response) = h.assert_told_once(id);
        for step in [&selected, &response] {
            assert_eq!(step.agent_id.as_deref(), Some(agent));
            assert_eq!(step.agent_type.as_deref(), Some(agent_type));
            assert_eq!(step.parent_tool_use_id.as_deref(), Some(parent));
        }
        assert_eq!(response.output.as_deref(), Some(&echo_result(text)));
    }
    let (agent_step, _) = h.assert_told_once("toolu_ag1");
    assert_eq!(agent_step.kind, Some(StepKind::Agent));
    let turns: Vec<(u32, Option<&str>)> = h
        .turns()
        .iter()
        .map(|t| (t.turn, t.origin.as_deref()))
        .collect();
    assert_eq!(turns, [(1, None), (2, Some("task_notification"))]);
    let started = h
        .events()
        .into_iter()
        .find_map(|e| match e {
            RunEvent::SessionEvent(s) if s.name == "SubagentStart" => Some(s.clone()),
            _ => None,
        })
        .expect("SubagentStart");
    assert_eq!(started.agent_id.as_deref(), Some("a1"));
    assert_eq!(
        started.data.as_deref(),
        Some(&json!({"agent_type": "general-purpose"}))
    );
    let names = h.event_names();
    assert_eq!(
        names,
        [
            "SessionStart",
            "SubagentStart",
            "SubagentStart",
            "Stop",
            "SubagentStop",
            "SubagentStop",
            "SessionEnd"
        ]
    );
    assert_eq!(h.finish().output.as_deref(), Some("done"));
}

#[test]
fn a_subagent_named_by_its_agent_call_first_leaves_the_guess_to_the_others() {
    let mut h = Harness::new();
    start(&mut h, "two subagents at once");
    let input = json!({"prompt": "p", "subagent_type": "general-purpose"});
    h.pre(2.0, "Agent", "toolu_ag1", input.clone());
    h.pre(2.0, "Agent", "toolu_ag2", input.clone());
    // ag2's PostToolUse names its subagent before that one's SubagentStart.
    let launched = json!({"status": "async_launched", "agentId": "a2"});
    h.post(2.1, "Agent", "toolu_ag2", input, launched);
    for (t, agent) in [(2.2, "a2"), (2.3, "a1")] {
        h.hook(
            t,
            "SubagentStart",
            json!({"agent_id": agent, "agent_type": "x"}),
        );
    }
    for (t, agent, id) in [(3.0, "a1", "toolu_s1"), (3.1, "a2", "toolu_s2")] {
        let mut p = pre("Bash", id, json!({"command": "ls"}));
        p["agent_id"] = json!(agent);
        h.hook(t, "PreToolUse", p);
    }
    let parent = |id: &str| h.steps_of(id)[0].parent_tool_use_id.clone();
    assert_eq!(parent("toolu_s1").as_deref(), Some("toolu_ag1"));
    assert_eq!(parent("toolu_s2").as_deref(), Some("toolu_ag2"));
}

#[test]
fn a_daemon_restart_mid_run_starts_a_lossy_run_that_says_why() {
    let mut h = Harness::new();
    // The new daemon's first event for this session is a tool's.
    h.bash(10.0, "toolu_5", "ls", "a");
    h.stop(11.0, "listed");
    h.end(12.0);
    h.assert_well_formed();
    let header = h.header();
    assert!(header.metadata.lossy);
    assert!(
        header
            .metadata
            .note
            .as_deref()
            .is_some_and(|n| n.contains("PreToolUse"))
    );
    assert_eq!(header.input, None);
    let (selected, _) = h.assert_told_once("toolu_5");
    assert_eq!(selected.turn, None, "the turn is unknown");
    let finish = h.finish();
    assert!(finish.lossy);
    assert_eq!(finish.output.as_deref(), Some("listed"));
}

#[test]
fn a_session_with_two_prompts_is_one_run_with_two_turns() {
    let mut h = Harness::new();
    start(&mut h, "first");
    h.stop(2.0, "answer one");
    h.hook(30.0, "UserPromptSubmit", json!({"prompt": "second"}));
    h.bash(31.0, "toolu_1", "ls", "");
    h.stop(32.0, "answer two");
    h.end(33.0);
    h.assert_well_formed();
    assert_eq!(h.run_count(), 1);
    assert_eq!(h.header().input.as_deref(), Some("first"));
    let prompts: Vec<(u32, &str)> = h
        .turns()
        .iter()
        .map(|t| (t.turn, t.prompt.as_str()))
        .collect();
    assert_eq!(prompts, [(1, "first"), (2, "second")]);
    let answers: Vec<(Option<u32>, Option<Value>)> = h
        .steps()
        .iter()
        .filter(|s| s.step_type == StepType::FinalAnswer)
        .map(|s| (s.turn, s.output.clone().map(Redacted::into_inner)))
        .collect();
    assert_eq!(
        answers,
        [
            (Some(1), Some(json!("answer one"))),
            (Some(2), Some(json!("answer two")))
        ]
    );
    assert_eq!(h.steps_of("toolu_1")[0].turn, Some(2));
    assert_eq!(h.finish().output.as_deref(), Some("answer two"));
}

/// bir's `PreToolUse` reaches it for MCP and subagent tools only
/// (`Host::before_tool_matcher`): a built-in call is first seen at its
/// `PostToolUse`, which dates its start by its duration, and a call refused
/// after a permission request is told from the transcript, with its
/// request, as not run — not as something the recorder missed.
#[test]
fn built_in_calls_without_their_pre_tool_use_are_told_whole() {
    let mut h = Harness::new();
    start(&mut h, "list, then delete");
    let ls = json!({"command": "ls"});
    let rm = json!({"command": "rm -rf build"});
    // `ls` runs: only its PostToolUse reaches bir (duration 9 ms).
    h.said("Listing first.", &[]);
    h.post(2.0, "Bash", "toolu_ls", ls.clone(), json!({"stdout": "a"}));
    // `rm` asks, is refused, never runs: a PermissionRequest (no id), then
    // the transcript's error result.
    h.hook(
        3.0,
        "PermissionRequest",
        json!({"tool_name": "Bash", "tool_input": rm.clone(),
               "permission_suggestions": [{"type": "addRules"}]}),
    );
    let rows = [
        json!({"type": "assistant", "timestamp": "2027-01-15T08:00:02.500Z", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Now the build dir."},
            {"type": "tool_use", "id": "toolu_rm", "name": "Bash", "input": rm}]}}),
        json!({"type": "user", "timestamp": "2027-01-15T08:00:03.200Z", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_rm", "is_error": true,
             "content": "Permission to use Bash has been denied."}]}}),
    ];
    let file = h.files.entry(TRANSCRIPT.to_owned()).or_default();
    for row in rows {
        file.extend_from_slice(format!("{row}\n").as_bytes());
    }
    h.stop(4.0, "I could not delete it.");
    h.end(5.0);
    h.assert_well_formed();

    let (selected, response) = h.assert_told_once("toolu_ls");
    assert_eq!(
        selected.started_at,
        crate::time::rfc3339(at(2.0) - Duration::from_millis(9))
    );
    assert_eq!(response.outcome.as_deref(), Some("answered"));
    assert!(!response.recovered);

    let (_, refused) = h.assert_told_once("toolu_rm");
    assert_eq!(refused.outcome.as_deref(), Some("not_run"));
    assert!(refused.is_error);
    let permission = refused.permission.expect("its permission request");
    assert_eq!(permission["event"], "PermissionRequest");
    let order: Vec<&str> = h
        .steps()
        .iter()
        .filter_map(|s| s.tool_use_id.as_deref())
        .collect();
    assert_eq!(order.first(), Some(&"toolu_ls"));
    assert!(!h.finish().lossy);
}

#[test]
fn a_session_that_never_ends_is_finished_when_idle() {
    let mut h = Harness::new();
    start(&mut h, "hello");
    h.stop(2.0, "hi");
    h.tick(2.0 + 29.0 * 60.0);
    assert!(
        !h.events()
            .iter()
            .any(|e| matches!(e, RunEvent::RunFinished(_)))
    );
    assert_eq!(h.engine.sessions().len(), 1);
    assert_eq!(h.engine.sessions()[0].cwd, "/work/project");
    h.tick(2.0 + 30.0 * 60.0 + 1.0);
    h.assert_well_formed();
    assert_eq!(h.finish().reason.as_deref(), Some("idle_timeout"));
    assert!(!h.finish().lossy);
    assert!(h.engine.sessions().is_empty());
    // A late hook of that session opens no second run…
    h.hook(2000.0, "Notification", json!({"message": "late"}));
    assert!(matches!(
        h.records.last().map(|(_, r)| &r.event),
        Some(RunEvent::RunFinished(_))
    ));
    // …but a resumed session starts a new one.
    h.hook(2001.0, "UserPromptSubmit", json!({"prompt": "again"}));
    assert_eq!(h.run_count(), 2);
}

#[test]
fn shutdown_leaves_a_live_run_open_and_a_session_with_nothing_leaves_none() {
    let mut h = Harness::new();
    start(&mut h, "hello");
    h.bash(1.5, "toolu_0", "ls", "a");
    h.pre(2.0, "Bash", "toolu_1", json!({"command": "sleep 100"}));
    h.hook_in(
        "other-session",
        2.0,
        "SessionStart",
        json!({"source": "startup"}),
    );
    let out = h.engine.shutdown(at(3.0));
    h.take(out);
    h.assert_well_formed();
    assert!(
        !h.events()
            .iter()
            .any(|e| matches!(e, RunEvent::RunFinished(_))),
        "the live session's run is left open for the next daemon"
    );
    h.assert_told_once("toolu_0");
    let running = h.steps_of("toolu_1");
    assert_eq!(running.len(), 1, "the running call stays as chosen");
    assert_eq!(h.run_count(), 1, "the session that only started has no run");
}

#[test]
fn shutdown_finishes_the_run_of_a_session_that_ended() {
    let mut h = Harness::new();
    h.hold_reads = true;
    start(&mut h, "hello");
    h.pre(2.0, "Bash", "toolu_1", json!({"command": "sleep 100"}));
    h.end(3.0);
    let out = h.engine.shutdown(at(3.5));
    h.take(out);
    h.assert_well_formed();
    let finish = h.finish();
    assert_eq!(finish.reason.as_deref(), Some("daemon_shutdown"));
    let (_, response) = h.assert_told_once("toolu_1");
    assert_eq!(response.outcome.as_deref(), Some("session_ended"));
}

/// The run the records of `h` tell so far, as the store reads it back.
fn loaded(h: &Harness) -> crate::record::store::LoadedRun {
    let mut run = crate::record::store::LoadedRun::default();
    for (_, record) in &h.records {
        run.absorb(&serde_json::to_vec(record).expect("record json"));
    }
    run
}

/// The recorder dies (SIGKILL) in the middle of a session, while a call
/// runs, and the hooks of the next calls find no daemon; a new daemon
/// takes the run up again: the session is ONE run, every call once with
/// both records, the ones no daemon heard marked recovered, `seq` and
/// `stepIndex` going on from where the first daemon stopped.
#[test]
fn a_daemon_killed_mid_session_leaves_one_whole_run() {
    let mut h = Harness::new();
    h.begin_told_by_hooks(
        "four shells",
        &[
            shell("toolu_1", "a", "1"),
            shell("toolu_2", "kill", ""),
            shell("toolu_3", "c", "3"),
            shell("toolu_4", "d", "4"),
        ],
        "four",
    );
    h.bash(2.0, "toolu_1", "a", "1");
    h.pre(4.0, "Bash", "toolu_2", json!({"command": "kill"}));
    // Killed: no run_finished, nothing more from this engine.
    let first_run = h.header().id.clone();
    let before = h.records.len();
    let run = loaded(&h);
    assert!(run.finish.is_none());

    h.engine = Engine::new(EngineConfig::for_tests());
    assert!(h.engine.resume(&run, at(4.5)));
    // toolu_2's PostToolUse and all of toolu_3 went to no daemon; the
    // proxy's retry or a hook started this one: toolu_4 is heard live.
    h.bash(8.0, "toolu_4", "d", "4");
    h.stop(9.0, "four");
    h.end(10.0);
    h.tick(30.0);
    h.assert_well_formed();
    assert!(h.records.len() > before);
    assert_eq!(h.run_count(), 1, "one run for the session");
    assert!(h.records.iter().all(|(id, _)| *id == first_run));
    assert_eq!(h.turns().len(), 1, "the prompt is not told twice");
    let (s1, r1) = h.assert_told_once("toolu_1");
    let (s2, r2) = h.assert_told_once("toolu_2");
    let (s3, r3) = h.assert_told_once("toolu_3");
    let (s4, r4) = h.assert_told_once("toolu_4");
    assert!(!s1.recovered && !r1.recovered);
    assert!(
        !s2.recovered && r2.recovered,
        "its answer came from the transcript"
    );
    assert!(s3.recovered && r3.recovered);
    assert!(!s4.recovered && !r4.recovered);
    assert_eq!(r3.output.as_deref(), Some(&json!({"stdout": "3"})));
    assert!(s2.step_index < s3.step_index && s3.step_index < s4.step_index);
    let finish = h.finish();
    assert_eq!(finish.reason.as_deref(), Some("session_end"));
    assert_eq!(finish.metrics.tool_calls, 4);
    assert_eq!(finish.output.as_deref(), Some("four"));
    assert_eq!(h.final_answers(), 1);
}

/// The recorder is killed by a built-in call (whose PreToolUse does not
/// reach bir), and the next daemon is started by an MCP call's proxy: the
/// proxy's report arrives before any hook, and the calls no daemon heard
/// come from the transcript afterwards. The proxy's call takes its place
/// after them, not before: the order is the transcript's.
#[test]
fn a_proxy_report_to_a_resumed_run_waits_for_what_came_before() {
    let mut h = Harness::new();
    let before = json!({"message": "before"});
    let after = json!({"message": "after"});
    let echo = |id, args: &Value, text: &str| {
        (id, "mcp__everything__echo", args.clone(), echo_result(text))
    };
    h.begin_told_by_hooks(
        "echo around a kill",
        &[
            shell("toolu_1", "a", "1"),
            echo("toolu_2", &before, "before"),
            shell("toolu_3", "kill", ""),
            shell("toolu_4", "c", "3"),
            echo("toolu_5", &after, "after"),
            shell("toolu_6", "d", "4"),
        ],
        "done",
    );
    h.register(1.5, "p-everything", "everything");
    h.post(
        2.0,
        "Bash",
        "toolu_1",
        json!({"command": "a"}),
        json!({"stdout": "1"}),
    );
    h.pre(3.0, "mcp__everything__echo", "toolu_2", before.clone());
    h.echo_report(3.2, Some("toolu_2"), before.clone(), "before");
    h.post(
        3.4,
        "mcp__everything__echo",
        "toolu_2",
        before,
        echo_result("before"),
    );
    let run = loaded(&h);

    h.engine = Engine::new(EngineConfig::for_tests());
    assert!(h.engine.resume(&run, at(7.0)));
    h.register(7.5, "p-everything", "everything");
    h.echo_report(8.0, Some("toolu_5"), after.clone(), "after");

    h.post(
        8.5,
        "mcp__everything__echo",
        "toolu_5",
        after,
        echo_result("after"),
    );
    h.post(
        9.0,
        "Bash",
        "toolu_6",
        json!({"command": "d"}),
        json!({"stdout": "4"}),
    );
    h.stop(9.5, "done");
    h.end(10.0);
    h.tick(30.0);
    h.assert_well_formed();
    assert_eq!(h.run_count(), 1);
    let selected: Vec<u64> = [
        "toolu_1", "toolu_2", "toolu_3", "toolu_4", "toolu_5", "toolu_6",
    ]
    .iter()
    .map(|id| h.assert_told_once(id).0.step_index)
    .collect();
    let mut sorted = selected.clone();
    sorted.sort_unstable();
    assert_eq!(selected, sorted, "chosen in the transcript's order");
}

/// `bir down` while a session is live, then a daemon again: the same one
/// run, as after a kill.
#[test]
fn a_daemon_stopped_mid_session_is_taken_up_by_the_next() {
    let mut h = Harness::new();
    h.begin_told_by_hooks(
        "two shells",
        &[shell("toolu_1", "a", "1"), shell("toolu_2", "b", "2")],
        "two",
    );
    h.bash(2.0, "toolu_1", "a", "1");
    let out = h.engine.shutdown(at(3.0));
    h.take(out);
    let run = loaded(&h);
    h.engine = Engine::new(EngineConfig::for_tests());
    assert!(h.engine.resume(&run, at(3.0)));
    h.stop(9.0, "two");
    h.end(10.0);
    h.tick(30.0);
    h.assert_well_formed();
    assert_eq!(h.run_count(), 1);
    assert_eq!(h.turns().len(), 1);
    h.assert_told_once("toolu_1");
    let (s2, _) = h.assert_told_once("toolu_2");
    assert!(s2.recovered);
    assert_eq!(h.finish().metrics.tool_calls, 2);
}

/// A run left open whose session never comes back ends when idle, counted
/// from when its journal was last written; a finished or standalone run
/// is not taken up.
#[test]
fn a_run_left_open_whose_session_is_gone_ends_when_idle() {
    let mut h = Harness::new();
    start(&mut h, "hello");
    h.pre(2.0, "Bash", "toolu_1", json!({"command": "sleep 100"}));
    let run = loaded(&h);
    h.engine = Engine::new(EngineConfig::for_tests());
    assert!(h.engine.resume(&run, at(2.0)));
    assert!(!h.engine.resume(&run, at(2.0)), "taken up once");
    h.tick(2.0 + 30.0 * 60.0 + 1.0);
    h.assert_well_formed();
    assert_eq!(h.finish().reason.as_deref(), Some("idle_timeout"));
    let (_, response) = h.assert_told_once("toolu_1");
    assert_eq!(response.outcome.as_deref(), Some("session_ended"));
    let finished = loaded(&h);
    let mut again = Engine::new(EngineConfig::for_tests());
    assert!(!again.resume(&finished, at(3.0)));
}

#[test]
fn unknown_hook_events_are_kept_as_session_events() {
    let mut h = Harness::new();
    start(&mut h, "hello");
    h.hook(
        2.0,
        "BrandNewEvent",
        json!({"novel": {"field": [1, 2]}, "prompt_id": "x"}),
    );
    let event = h
        .events()
        .into_iter()
        .find_map(|e| match e {
            RunEvent::SessionEvent(s) if s.name == "BrandNewEvent" => Some(s.clone()),
            _ => None,
        })
        .expect("kept");
    assert_eq!(
        event.data.as_deref(),
        Some(&json!({"novel": {"field": [1, 2]}}))
    );
}

#[test]
fn lost_proxy_observations_and_snapshots() {
    let mut h = Harness::new();
    start(&mut h, "hello");
    let snapshot = crate::record::model::ServerSnapshot {
        server_name: "everything".into(),
        tools_digest: "d1".into(),
        ..Default::default()
    };
    for t in [1.5, 1.6] {
        h.input(
            t,
            Input::ProxyRecords(ProxyRecords {
                proxy_id: "p-everything".into(),
                session_id: SESSION.into(),
                server_name: "everything".into(),
                items: vec![ProxyItem::Snapshot(Box::new(snapshot.clone()))],
                lost: 2,
            }),
        );
    }
    h.hook(3.0, "SessionEnd", json!({}));
    let snapshots = h
        .events()
        .iter()
        .filter(|e| matches!(e, RunEvent::ServerSnapshot(_)))
        .count();
    assert_eq!(snapshots, 1, "an unchanged snapshot is written once");
    let finish = h.finish();
    assert!(finish.lossy);
    assert_eq!(finish.dropped, 4);
}

#[test]
fn secrets_are_redacted_in_prompts_arguments_answers_and_the_transcript() {
    let ghp = "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB";
    let sk = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcdefghijkl";
    let mut h = Harness::new();
    let thinking = format!("I will use the token {ghp} for this");
    h.files.insert(
        TRANSCRIPT.into(),
        format!(
            "{}\n",
            json!({"type": "assistant", "message": {"model": "claude-opus-5-5", "content": [
                {"type": "thinking", "thinking": thinking},
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]}})
        )
        .into_bytes(),
    );
    h.hook(0.0, "SessionStart", json!({}));
    h.hook(
        1.0,
        "UserPromptSubmit",
        json!({"prompt": format!("use {ghp} and {sk}")}),
    );
    let cmd = json!({"command": format!("curl -H 'x-api-key: {sk}' https://api")});
    h.pre(2.0, "Bash", "toolu_1", cmd.clone());
    h.post(
        2.5,
        "Bash",
        "toolu_1",
        cmd,
        json!({"stdout": format!("token={ghp}")}),
    );
    h.hook(
        3.0,
        "Stop",
        json!({"last_assistant_message": format!("Your key is {sk}")}),
    );
    h.end(4.0);
    h.assert_well_formed();
    let journal = h.journal();
    assert!(!journal.contains(ghp), "{journal}");
    assert!(!journal.contains(sk), "{journal}");
    assert!(journal.contains("REDACTED"));
    let (_, response) = h.assert_told_once("toolu_1");
    let context = response.context.expect("context from the transcript");
    assert!(
        context.starts_with("[thinking] I will use the token"),
        "{context}"
    );
    assert_eq!(h.finish().model.as_deref(), Some("claude-opus-5-5"));
}

#[test]
fn context_and_final_answer_come_from_the_transcript_when_the_hooks_lack_them() {
    let mut h = Harness::new();
    h.hold_reads = true;
    let line = |v: Value| format!("{v}\n");
    let head = [
        line(json!({"type": "user", "message": {"role": "user", "content": "list files"}})),
        line(json!({"type": "file-history-snapshot", "snapshot": {}})),
        line(
            json!({"type": "assistant", "message": {"model": "claude-opus-5-5", "content": [
            {"type": "text", "text": "Let me look at the directory."},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]}}),
        ),
    ]
    .concat();
    h.files.insert(TRANSCRIPT.into(), head.clone().into_bytes());
    start(&mut h, "list files");
    h.pre(2.0, "Bash", "toolu_1", json!({"command": "ls"}));
    // The tool finished before the read asked for at PreToolUse came back:
    // its response waits for it.
    h.post(
        2.5,
        "Bash",
        "toolu_1",
        json!({"command": "ls"}),
        json!({"stdout": "a b"}),
    );
    assert_eq!(h.steps_of("toolu_1").len(), 1);
    h.answer_reads();
    let (_, response) = h.assert_told_once("toolu_1");
    assert_eq!(
        response.context.as_deref(),
        Some("Let me look at the directory.")
    );
    // The rest of the transcript, its last line still being written.
    let tail = [
        line(json!({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a b"}]}})),
        line(json!({"type": "assistant", "message": {"content": [
            {"type": "text", "text": "There are two files: a and b."}]}})),
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"cut"#.to_owned(),
    ]
    .concat();
    h.files
        .insert(TRANSCRIPT.into(), format!("{head}{tail}").into_bytes());
    h.hook(3.0, "Stop", json!({}));
    h.end(4.0);
    h.assert_well_formed();
    let answer = h
        .steps()
        .into_iter()
        .find(|s| s.step_type == StepType::FinalAnswer)
        .cloned();
    assert_eq!(
        answer.and_then(|s| s.output),
        Some(fixture(json!("There are two files: a and b.")))
    );
    assert_eq!(
        h.finish().output.as_deref(),
        Some("There are two files: a and b.")
    );
}

#[test]
fn message_display_text_is_the_context_of_the_next_main_agent_call() {
    let mut h = Harness::new();
    start(&mut h, "echo");
    h.hook(
        1.5,
        "MessageDisplay",
        json!({"message_id": "m1", "index": 0, "final": true,
        "delta": "Calling the echo tool."}),
    );
    // Two calls of that message, then one of a message without text.
    h.pre(2.0, "Bash", "toolu_1", json!({"command": "echo"}));
    h.pre(2.1, "Bash", "toolu_2", json!({"command": "echo"}));
    h.hook(2.5, "PostToolBatch", json!({"tool_calls": []}));
    h.pre(3.0, "Bash", "toolu_3", json!({"command": "echo"}));
    for id in ["toolu_1", "toolu_2"] {
        let context = h.steps_of(id)[0].context.clone();
        assert_eq!(context.as_deref(), Some("Calling the echo tool."), "{id}");
    }
    assert_eq!(h.steps_of("toolu_3")[0].context, None);
}

#[test]
fn a_subagent_call_takes_its_context_from_the_subagent_transcript() {
    let mut h = Harness::new();
    let path = "/home/u/.claude/projects/p/0b3f6f1e/subagents/agent-a1.jsonl";
    let line = json!({"type": "assistant", "isSidechain": true, "agentId": "a1",
        "message": {"content": [
            {"type": "text", "text": "I will echo as asked."},
            {"type": "tool_use", "id": "toolu_s1", "name": "mcp__everything__echo", "input": {}}]}});
    h.write_transcript(path, &[line]);
    start(&mut h, "delegate");
    h.hook(
        2.0,
        "SubagentStart",
        json!({"agent_id": "a1", "agent_type": "general-purpose"}),
    );
    let mut p = pre("Bash", "toolu_s1", json!({"command": "echo"}));
    p["agent_id"] = json!("a1");
    h.hook(3.0, "PreToolUse", p.clone());
    p["tool_response"] = json!({"stdout": "echo"});
    h.hook(3.5, "PostToolUse", p);
    let (_, response) = h.assert_told_once("toolu_s1");
    assert_eq!(response.context.as_deref(), Some("I will echo as asked."));
    assert_eq!(response.agent_type.as_deref(), Some("general-purpose"));
}

#[test]
fn a_permission_denial_with_its_tool_use_id_lands_on_that_call() {
    let mut h = Harness::new();
    start(&mut h, "write");
    let input = json!({"file_path": "/etc/passwd", "content": "x"});
    h.said("Writing twice.", &["toolu_1", "toolu_2"]);
    h.pre(2.0, "Write", "toolu_1", input.clone());
    h.pre(2.0, "Write", "toolu_2", input.clone());
    h.hook(
        2.1,
        "PermissionDenied",
        json!({"tool_name": "Write", "tool_input": input, "tool_use_id": "toolu_2",
               "reason": "outside the project"}),
    );
    h.hook(
        2.5,
        "PostToolBatch",
        json!({"tool_calls": [
            {"tool_name": "Write", "tool_use_id": "toolu_2", "tool_input": {}, "tool_response": "denied"}]}),
    );
    let (_, response) = h.assert_told_once("toolu_2");
    let permission = response.permission.expect("permission");
    assert_eq!(permission["event"], "PermissionDenied");
    assert_eq!(permission["reason"], "outside the project");
    assert!(permission.get("tool_input").is_none());
    assert_eq!(
        h.steps_of("toolu_1").len(),
        1,
        "the other call is still running"
    );
    assert!(h.event_names().contains(&"PermissionDenied"));
}

#[test]
fn a_transcript_read_never_answered_holds_nothing_for_long() {
    let mut h = Harness::new();
    h.hold_reads = true;
    start(&mut h, "ls");
    h.bash(2.0, "toolu_1", "ls", "a");
    assert_eq!(h.steps_of("toolu_1").len(), 1, "waits for the read");
    assert_eq!(h.reads.len(), 1);
    h.tick(7.6);
    h.assert_told_once("toolu_1");
    // The lost read is asked for again.
    h.pre(9.0, "Bash", "toolu_2", json!({"command": "ls"}));
    assert_eq!(h.reads.len(), 2);
    h.end(10.0);
    h.tick(15.1);
    assert_eq!(h.finish().reason.as_deref(), Some("session_end"));
    h.assert_well_formed();
}

#[test]
fn the_transcript_context_with_thinking_wins_over_the_displayed_text() {
    let mut h = Harness::new();
    h.hold_reads = true;
    let line = json!({"type": "assistant", "message": {"content": [
        {"type": "thinking", "thinking": "Start with the shell, it is cheap."},
        {"type": "text", "text": "First, the shell marker."},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]}});
    h.write_transcript(TRANSCRIPT, &[line]);
    start(&mut h, "shell");
    h.hook(
        1.5,
        "MessageDisplay",
        json!({"message_id": "m1", "delta": "First, the shell marker."}),
    );
    h.bash(2.0, "toolu_1", "echo marker", "marker");
    h.answer_reads();
    let (selected, response) = h.assert_told_once("toolu_1");
    assert_eq!(
        selected.context.as_deref(),
        Some("First, the shell marker.")
    );
    assert_eq!(
        response.context.as_deref(),
        Some("[thinking] Start with the shell, it is cheap.\n\nFirst, the shell marker.")
    );
}

#[test]
fn words_written_to_the_transcript_after_pre_tool_use_are_read_at_post() {
    let mut h = Harness::new();
    start(&mut h, "shell");
    h.pre(2.0, "Bash", "toolu_1", json!({"command": "ls"}));
    // The host wrote the message only after the read at PreToolUse.
    let line = json!({"type": "assistant", "message": {"content": [
        {"type": "text", "text": "Listing."},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]}});
    h.write_transcript(TRANSCRIPT, &[line]);
    h.post(
        2.5,
        "Bash",
        "toolu_1",
        json!({"command": "ls"}),
        json!({"stdout": ""}),
    );
    let (_, response) = h.assert_told_once("toolu_1");
    assert_eq!(response.context.as_deref(), Some("Listing."));
}

/// The transcript-wait rule on the main thread (the bound e2e's flake
/// under load): a built-in's PostToolUse arrives before the host wrote the
/// message that made the call, so the read at PostToolUse finds nothing.
/// The call waits — the MessageDisplay text does not end the wait, it has
/// no thinking — and the turn's Stop brings the read with the words. A
/// later call whose words are there is told at once, after it in the
/// journal but before it nowhere in the run's order.
#[test]
fn a_main_thread_call_answered_before_its_words_are_written_waits_for_the_stop() {
    let mut h = Harness::new();
    start(&mut h, "shell twice");
    h.hook(
        1.5,
        "MessageDisplay",
        json!({"message_id": "m1", "delta": "First the date."}),
    );
    h.bash(2.0, "toolu_1", "date", "Tue");
    assert_eq!(
        h.steps_of("toolu_1").len(),
        1,
        "the response waits for the model's words"
    );
    // The host catches up: the first message, then the second with its call.
    let first = json!({"type": "assistant", "message": {"content": [
        {"type": "thinking", "thinking": "The date is cheap to get."},
        {"type": "text", "text": "First the date."},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]}});
    h.write_transcript(TRANSCRIPT, &[first]);
    h.said("Now the files.", &["toolu_2"]);
    h.hook(
        2.9,
        "MessageDisplay",
        json!({"message_id": "m2", "delta": "Now the files."}),
    );
    h.bash(3.0, "toolu_2", "ls", "a");
    h.stop(4.0, "Tuesday, and one file.");
    h.end(5.0);
    h.tick(11.0);
    h.assert_well_formed();
    let order: Vec<(String, StepType, Option<String>)> = h
        .steps()
        .iter()
        .map(|s| {
            (
                s.tool_use_id
                    .clone()
                    .map(|i| i.into_inner())
                    .unwrap_or_default(),
                s.step_type,
                s.context.clone().map(|c| c.into_inner()),
            )
        })
        .collect();
    let thought = "[thinking] The date is cheap to get.\n\nFirst the date.";
    assert_eq!(
        order,
        [
            (
                "toolu_1".into(),
                StepType::ToolSelected,
                Some("First the date.".into())
            ),
            (
                "toolu_1".into(),
                StepType::ToolResponse,
                Some(thought.into())
            ),
            (
                "toolu_2".into(),
                StepType::ToolSelected,
                Some("Now the files.".into())
            ),
            (
                "toolu_2".into(),
                StepType::ToolResponse,
                Some("Now the files.".into())
            ),
            (String::new(), StepType::FinalAnswer, None),
        ]
    );
}

/// A session that ends without its turn's Stop (the user quit): SessionEnd's
/// read is the last there will be, so a call still waiting for its words
/// is told then, and the run finishes without waiting out the grace.
#[test]
fn session_end_ends_the_wait_for_words() {
    let mut h = Harness::new();
    start(&mut h, "list");
    h.bash(2.0, "toolu_1", "ls", "a");
    assert_eq!(h.steps_of("toolu_1").len(), 1, "waits for its words");
    h.end(3.0);
    h.assert_told_once("toolu_1");
    assert_eq!(h.finish().reason.as_deref(), Some("session_end"));
    h.assert_well_formed();
}

/// A subagent's MCP call: no MessageDisplay text, the proxy's answer
/// arrives before PostToolUse, and the subagent's words reach its
/// transcript only after PreToolUse. The joined step still carries them.
#[test]
fn a_subagent_mcp_call_answered_before_its_words_are_written_still_gets_them() {
    let mut h = Harness::new();
    start(&mut h, "delegate");
    h.hook(
        1.5,
        "SubagentStart",
        json!({"agent_id": "a1", "agent_type": "general-purpose"}),
    );
    let args = json!({"message": "sub"});
    let mut p = pre("mcp__everything__echo", "toolu_s1", args.clone());
    p["agent_id"] = json!("a1");
    p["agent_type"] = json!("general-purpose");
    h.hook(2.0, "PreToolUse", p);
    h.echo_report(2.1, Some("toolu_s1"), args.clone(), "sub");
    assert!(
        h.steps_of("toolu_s1")
            .iter()
            .all(|s| s.step_type != StepType::ToolResponse),
        "an answer without the model's words waits for PostToolUse"
    );
    let line = json!({"type": "assistant", "message": {"content": [
        {"type": "text", "text": "Echoing for the parent."},
        {"type": "tool_use", "id": "toolu_s1", "name": "mcp__everything__echo", "input": {}}]}});
    let sub = format!(
        "{}/subagents/agent-a1.jsonl",
        TRANSCRIPT.strip_suffix(".jsonl").unwrap_or(TRANSCRIPT)
    );
    h.write_transcript(&sub, &[line]);
    let content = json!([{"type": "text", "text": "Echo: sub"}]);
    let mut p = post("mcp__everything__echo", "toolu_s1", args, content);
    p["agent_id"] = json!("a1");
    p["agent_type"] = json!("general-purpose");
    h.hook(2.5, "PostToolUse", p);
    let (_, response) = h.assert_told_once("toolu_s1");
    assert_eq!(response.context.as_deref(), Some("Echoing for the parent."));
    assert_eq!(response.output.as_deref(), Some(&echo_result("sub")));
}

#[test]
fn oversized_hook_payloads_are_stored_as_a_marker() {
    let mut h = Harness::new();
    start(&mut h, "read a big file");
    let big = "line of a big file\n".repeat(20_000);
    h.said("Reading it.", &["toolu_1"]);
    h.bash(2.0, "toolu_1", "cat big", &big);
    let (_, response) = h.assert_told_once("toolu_1");
    let output = response.output.expect("output");
    assert_eq!(output["truncated"], true);
    let rendered = serde_json::to_string(&json!({"stdout": big})).expect("json");
    assert_eq!(
        output["originalBytes"].as_u64(),
        Some(rendered.len() as u64)
    );
    assert!(h.journal().len() < 16 * 1024);
}

/// Not a check (timings vary on a shared machine): how many hook events a
/// second the engine takes, and what it writes. `cargo test --lib
/// bound::tests::engine_throughput -- --ignored --nocapture`.
#[test]
#[ignore]
fn engine_throughput() {
    let mut h = Harness::new();
    start(&mut h, "many calls");
    let calls = 20_000;
    let begun = std::time::Instant::now();
    for i in 0..calls {
        let t = 2.0 + f64::from(i) * 0.01;
        let id = format!("toolu_{i}");
        let args = json!({"message": format!("m{i}")});
        h.pre(t, "mcp__everything__echo", &id, args.clone());
        h.echo_report(t + 0.001, Some(&id), args.clone(), "x");
        h.post(t + 0.002, "mcp__everything__echo", &id, args, json!([]));
        if i % 1000 == 0 {
            h.records.clear();
        }
    }
    let took = begun.elapsed();
    let per_s = f64::from(calls * 3) / took.as_secs_f64();
    crate::output::note(&format!(
        "{calls} calls (3 inputs each) in {took:?}: {per_s:.0} inputs/s"
    ));
}

// ---- the real captured sessions ----------------------------------------

/// Feeds a captured Claude Code session (`tests/fixtures/bound/`): its
/// hooks as they fired and, for each answered `tools/call` the MCP relay
/// saw, the report a bound proxy would have sent.
fn replay(name: &str) -> Harness {
    let path = format!(
        "{}/tests/fixtures/bound/{name}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("fixture");
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("fixture line"))
        .collect();
    let t0 = rows[0]["t"].as_f64().expect("t");
    let mut h = Harness::new();
    let mut requests: HashMap<String, Value> = HashMap::new();
    let mut session = String::new();
    let mut last = 0.0;
    for row in &rows {
        let t = row["t"].as_f64().expect("t") - t0;
        last = t;
        match row["source"].as_str() {
            Some("hook") => {
                let payload = row["payload"].clone();
                if session.is_empty() {
                    session = payload["session_id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                }
                let event = row["event"].as_str().unwrap_or_default().to_owned();
                h.input(t, Input::Hook { event, payload });
            }
            Some("mcp") => {
                let msg = &row["msg"];
                let id = msg["id"].to_string();
                let server = row["server"].as_str().unwrap_or_default();
                if row["dir"] == "c2s" {
                    requests.insert(id, msg.clone());
                    continue;
                }
                let Some(request) = requests.remove(&id) else {
                    continue;
                };
                let params = &request["params"];
                let tool_use_id = params["_meta"]["claudecode/toolUseId"].as_str();
                let tool = params["name"].as_str().unwrap_or_default();
                let result = if msg["result"].is_null() {
                    json!({"content": [], "isError": true, "jsonrpcError": msg["error"]})
                } else {
                    msg["result"].clone()
                };
                let item = call(
                    server,
                    tool,
                    tool_use_id,
                    params["arguments"].clone(),
                    result,
                );
                h.input(
                    t,
                    Input::ProxyRecords(ProxyRecords {
                        proxy_id: format!("p-{server}"),
                        session_id: session.clone(),
                        server_name: server.to_owned(),
                        items: vec![item],
                        lost: 0,
                    }),
                );
            }
            _ => {}
        }
    }
    h.tick(last + 60.0);
    h.assert_well_formed();
    assert_eq!(h.run_count(), 1, "{name}: one session, one run");
    let finish = h.finish();
    assert_eq!(finish.reason.as_deref(), Some("session_end"), "{name}");
    assert!(!finish.lossy, "{name}");
    // Every call the hooks announced is told exactly once.
    for row in &rows {
        if row["event"] == "PreToolUse" {
            let id = row["payload"]["tool_use_id"].as_str().expect("id");
            h.assert_told_once(id);
        }
    }
    h
}

#[test]
fn captured_subagent_session() {
    let h = replay("subagent");
    let (selected, response) = h.assert_told_once("toolu_fake_0003_0");
    assert_eq!(selected.agent_id.as_deref(), Some("a1488b47df3219fda"));
    assert_eq!(selected.agent_type.as_deref(), Some("general-purpose"));
    assert_eq!(
        selected.parent_tool_use_id.as_deref(),
        Some("toolu_fake_0001_0")
    );
    assert_eq!(
        selected.input.as_deref(),
        Some(&json!({"message": "from-subagent"}))
    );
    assert_eq!(
        response.output.as_deref(),
        Some(&json!({"content": [{"type": "text", "text": "Echo: from-subagent"}]}))
    );
    assert_eq!(response.duration_ms, Some(3.25), "the proxy's duration");
    let (agent, agent_response) = h.assert_told_once("toolu_fake_0001_0");
    assert_eq!(agent.kind, Some(StepKind::Agent));
    assert_eq!(
        agent_response.output.as_ref().map(|o| &o["status"]),
        Some(&json!("async_launched"))
    );
    assert_eq!(h.turns().len(), 2);
    assert_eq!(h.finish().output.as_deref(), Some("done"));
    assert_eq!(
        h.header().input.as_deref(),
        Some("Delegate the echo to a subagent.")
    );
    assert!(!h.journal().contains("__bir_call_id__"));
}

#[test]
fn captured_mcp_echo_session() {
    let h = replay("mcp-echo-hooks");
    let (selected, response) = h.assert_told_once("toolu_fake_0001_1");
    assert_eq!(selected.context.as_deref(), Some("Calling the echo tool."));
    assert_eq!(response.duration_ms, Some(3.25));
    assert_eq!(h.finish().output.as_deref(), Some("The echo tool said: hi"));
}

#[test]
fn captured_mcp_tool_error_session() {
    let h = replay("mcp-tool-error");
    let (_, failed) = h.assert_told_once("toolu_fake_0001_0");
    assert!(failed.is_error);
    // The unknown tool fired no Pre/Post: the batch tells it.
    let (selected, unknown) = h.assert_told_once("toolu_fake_0003_0");
    assert_eq!(selected.qualified_name, "mcp__everything__no-such-tool");
    assert_eq!(unknown.outcome.as_deref(), Some("not_run"));
    assert!(unknown.is_error);
    assert_eq!(h.finish().metrics.errors, 2);
}

#[test]
fn captured_permission_session() {
    let h = replay("permission-denied");
    for id in ["toolu_fake_0001_0", "toolu_fake_0003_0"] {
        let (_, response) = h.assert_told_once(id);
        assert_eq!(response.outcome.as_deref(), Some("not_run"), "{id}");
        let permission = response.permission.expect("permission");
        assert_eq!(permission["event"], "PermissionRequest");
        assert!(permission["permission_suggestions"].is_array());
    }
}

#[test]
fn captured_bash_compact_and_elicitation_sessions() {
    let h = replay("bash-tool");
    let (selected, response) = h.assert_told_once("toolu_fake_0001_0");
    assert_eq!(selected.kind, Some(StepKind::Builtin));
    assert_eq!(
        response.output.as_ref().map(|o| &o["stdout"]),
        Some(&json!("hi"))
    );
    assert_eq!(response.duration_ms, Some(24.0));

    let h = replay("compact");
    let names = h.event_names();
    assert_eq!(
        names,
        [
            "SessionStart",
            "PreCompact",
            "SubagentStop",
            "SessionStart",
            "PostCompact",
            "SessionEnd"
        ]
    );
    assert_eq!(h.finish().model.as_deref(), Some("claude-opus-5-5"));

    let h = replay("elicitation-instructions");
    let names = h.event_names();
    for expected in [
        "InstructionsLoaded",
        "Elicitation",
        "ElicitationResult",
        "Notification",
    ] {
        assert!(names.contains(&expected), "{names:?}");
    }
}

/// A guide's pin: the proxy's report of the call says whether the server
/// got the pinned arguments; a decision is one `bir.guide` event.
#[test]
fn a_guides_pin_is_checked_against_what_the_server_got() {
    let pinned = json!({"message": "recorded"});
    for (server_got, applied) in [
        (pinned.clone(), true),
        (json!({"message": "model's"}), false),
    ] {
        let mut h = Harness::new();
        start(&mut h, "echo");
        h.pre(
            2.0,
            "mcp__everything__echo",
            "toolu_1",
            json!({"message": "model's"}),
        );
        h.input(
            2.0,
            Input::Guide {
                session_id: SESSION.into(),
                note: json!({"action": "pinned", "step": "s1", "toolUseId": "toolu_1",
                             "decision": "ask"}),
                pin: Some(("toolu_1".into(), pinned.clone())),
            },
        );
        h.post(
            2.2,
            "mcp__everything__echo",
            "toolu_1",
            json!({"message": "model's"}),
            echo_result("x"),
        );
        // The hooks are through, the bound proxy has not reported: a
        // guided Stop now would wait for the check.
        assert!(h.engine.awaits_pin_report(SESSION));
        assert!(!h.engine.awaits_pin_report("another session"));
        h.proxy(
            2.5,
            "everything",
            vec![call(
                "everything",
                "echo",
                Some("toolu_1"),
                server_got,
                echo_result("x"),
            )],
        );
        let guide_events: Vec<Value> = h
            .events()
            .into_iter()
            .filter_map(|e| match e {
                RunEvent::SessionEvent(s) if s.name == "bir.guide" => s.data.as_deref().cloned(),
                _ => None,
            })
            .collect();
        assert!(!h.engine.awaits_pin_report(SESSION));
        assert_eq!(guide_events.len(), 2, "{guide_events:?}");
        assert_eq!(guide_events[0]["action"], "pinned");
        assert_eq!(guide_events[1]["action"], "pin_checked");
        assert_eq!(guide_events[1]["applied"], json!(applied));
        let missed = h.engine.take_pins_not_applied();
        if applied {
            assert!(missed.is_empty());
        } else {
            assert_eq!(missed, vec![(SESSION.to_owned(), "toolu_1".to_owned())]);
        }
        // Asked once: nothing is reported twice.
        assert!(h.engine.take_pins_not_applied().is_empty());
        h.stop(3.0, "done");
        h.end(4.0);
        h.tick(20.0);
        h.assert_well_formed();
    }
}

/// A pin whose call no bound proxy will report (a server bir does not
/// wrap, a built-in tool) is never waited for.
#[test]
fn a_pin_no_proxy_will_report_is_not_awaited() {
    let mut h = Harness::new();
    start(&mut h, "echo");
    for (tool, id) in [("mcp__unwrapped__echo", "toolu_1"), ("Bash", "toolu_2")] {
        h.pre(2.0, tool, id, json!({"message": "model's"}));
        h.input(
            2.0,
            Input::Guide {
                session_id: SESSION.into(),
                note: json!({"action": "pinned", "step": "s1", "toolUseId": id}),
                pin: Some((id.into(), json!({"message": "recorded"}))),
            },
        );
        h.post(
            2.2,
            tool,
            id,
            json!({"message": "model's"}),
            echo_result("x"),
        );
    }
    assert!(!h.engine.awaits_pin_report(SESSION));
}

/// A Bash call for [`transcript_rows`]: `command` run, `stdout` printed.
fn shell<'a>(id: &'a str, command: &str, stdout: &str) -> (&'a str, &'static str, Value, Value) {
    (
        id,
        "Bash",
        json!({"command": command}),
        json!({"stdout": stdout}),
    )
}

/// A transcript as Claude Code writes it: a prompt, then `calls` (one
/// message each, `(id, tool, input, result)`, a second apart), then the
/// model's last words.
fn transcript_rows(prompt: &str, calls: &[(&str, &str, Value, Value)], answer: &str) -> Vec<Value> {
    let t = |secs: u32| format!("2027-01-15T08:00:{secs:02}.250Z");
    let mut rows = vec![json!({"type": "user", "timestamp": t(0),
        "message": {"role": "user", "content": prompt}})];
    for (n, (id, tool, input, result)) in calls.iter().enumerate() {
        let secs = 1 + 2 * n as u32;
        rows.push(
            json!({"type": "assistant", "timestamp": t(secs), "message": {"role": "assistant",
            "model": "claude-opus-5-5", "content": [
                {"type": "text", "text": format!("Calling {tool}.")},
                {"type": "tool_use", "id": id, "name": tool, "input": input}]}}),
        );
        rows.push(json!({"type": "user", "timestamp": t(secs + 1), "toolUseResult": result,
            "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": "text form", "is_error": false}]}}));
    }
    rows.push(
        json!({"type": "assistant", "timestamp": t(59), "message": {"role": "assistant",
        "content": [{"type": "text", "text": answer}]}}),
    );
    rows
}

/// The recorder heard nothing of a session until its end (no daemon while
/// it ran; the `SessionEnd` command hook started one): the run is told
/// whole from the transcript, every step marked recovered, with the
/// transcript's times — not lossy.
#[test]
fn a_session_heard_only_at_its_end_is_recovered_whole_from_the_transcript() {
    let mut h = Harness::new();
    let rows = transcript_rows(
        "list and echo",
        &[
            shell("toolu_r1", "ls", "a b"),
            (
                "toolu_r2",
                "mcp__everything__echo",
                json!({"message": "hi"}),
                json!([{"type": "text", "text": "Echo: hi"}]),
            ),
        ],
        "Listed and echoed.",
    );
    h.write_transcript(TRANSCRIPT, &rows);
    h.end(100.0);
    h.assert_well_formed();
    assert_eq!(h.run_count(), 1);
    let header = h.header();
    assert!(!header.metadata.lossy, "{:?}", header.metadata.note);
    assert!(
        header
            .metadata
            .note
            .as_deref()
            .is_some_and(|n| n.contains("recovered from the transcript")),
        "{:?}",
        header.metadata.note
    );
    assert_eq!(header.input.as_deref(), Some("list and echo"));
    assert_eq!(h.turns().len(), 1);
    let (sel, resp) = h.assert_told_once("toolu_r1");
    assert!(sel.recovered && resp.recovered);
    assert_eq!(sel.started_at, "2027-01-15T08:00:01.250Z");
    assert_eq!(resp.output.as_deref(), Some(&json!({"stdout": "a b"})));
    assert_eq!(resp.duration_ms, Some(1000.0));
    assert_eq!(
        sel.context.as_ref().map(|c| c.as_str()),
        Some("Calling Bash.")
    );
    let (sel2, resp2) = h.assert_told_once("toolu_r2");
    assert_eq!(sel2.kind, Some(StepKind::Mcp));
    assert_eq!(sel2.server_name, "everything");
    assert!(resp2.recovered);
    assert!(sel.step_index < resp.step_index && resp.step_index < sel2.step_index);
    let finish = h.finish();
    assert!(!finish.lossy);
    assert_eq!(finish.reason.as_deref(), Some("session_end"));
    assert_eq!(finish.output.as_deref(), Some("Listed and echoed."));
    assert_eq!(finish.metrics.tool_calls, 2);
}

/// The daemon came back mid-session (its first event a `PreToolUse`):
/// what came before is told first from the transcript, in order, then the
/// live call — one run, not lossy, no call twice.
#[test]
fn a_daemon_that_joins_under_way_tells_what_came_before_first() {
    let mut h = Harness::new();
    let mut rows = transcript_rows("two shells", &[shell("toolu_a", "ls", "x")], "");
    rows.pop();
    rows.push(
        json!({"type": "assistant", "timestamp": "2027-01-15T08:00:05.000Z",
        "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": {"command": "pwd"}}]}}),
    );
    h.write_transcript(TRANSCRIPT, &rows);
    h.bash(10.0, "toolu_b", "pwd", "/w");
    h.stop(11.0, "done");
    h.end(12.0);
    h.assert_well_formed();
    assert_eq!(h.run_count(), 1);
    assert!(!h.header().metadata.lossy);
    let (a, a_resp) = h.assert_told_once("toolu_a");
    let (b, b_resp) = h.assert_told_once("toolu_b");
    assert!(a.recovered && a_resp.recovered);
    assert!(!b_resp.recovered, "told by its live hooks");
    assert!(a_resp.step_index < b.step_index);
    assert_eq!(h.turns().len(), 1);
    assert_eq!(h.finish().output.as_deref(), Some("done"));
    assert_eq!(h.final_answers(), 1);
}

/// A live session whose hooks missed one call (an HTTP hook that could not
/// connect, or an event bir does not register): the `Stop` that follows
/// tells it from the transcript, marked recovered; the calls the hooks
/// told are not told again, and the prompt is not a second turn.
#[test]
fn a_call_the_hooks_missed_is_told_at_the_stop_from_the_transcript() {
    let mut h = Harness::new();
    h.begin_told_by_hooks(
        "three shells",
        &[
            shell("toolu_1", "a", "1"),
            shell("toolu_2", "b", "2"),
            shell("toolu_3", "c", "3"),
        ],
        "three",
    );
    h.bash(2.0, "toolu_1", "a", "1");
    h.bash(4.0, "toolu_3", "c", "3");
    h.stop(5.0, "three");
    h.end(6.0);
    h.assert_well_formed();
    assert_eq!(h.turns().len(), 1);
    let (_, r1) = h.assert_told_once("toolu_1");
    let (s2, r2) = h.assert_told_once("toolu_2");
    let (_, r3) = h.assert_told_once("toolu_3");
    assert!(!r1.recovered && !r3.recovered);
    assert!(s2.recovered && r2.recovered);
    assert_eq!(r2.output.as_deref(), Some(&json!({"stdout": "2"})));
    assert!(!h.finish().lossy);
    assert_eq!(h.finish().metrics.tool_calls, 3);
}

/// A Gemini CLI hook, as `bir-hooks --host gemini` posts it, naming the
/// agent's process.
fn gemini_hook(session: &str, event: &str, host: Option<super::process::ProcessId>) -> Input {
    Input::HostHook {
        host: super::hosts::Host::Gemini,
        event: event.into(),
        payload: json!({"session_id": session, "hook_event_name": event, "cwd": "/work/project",
            "transcript_path": "", "timestamp": "2026-12-03T10:00:00.000Z"}),
        host_process: host,
    }
}

#[test]
fn a_proxy_naming_no_session_is_bound_to_the_session_whose_host_is_its_ancestor() {
    use super::process::ProcessId;
    let p = |pid, start| ProcessId { pid, start };
    let mut h = Harness::new();
    h.input(1.0, gemini_hook("sess-a", "SessionStart", Some(p(200, 7))));
    h.input(1.1, gemini_hook("sess-b", "SessionStart", Some(p(300, 9))));
    h.input(1.2, gemini_hook("sess-b", "BeforeAgent", None));
    // A server of session b: bir-proxy → its wrapper (301) → Gemini (300).
    assert_eq!(
        h.engine
            .session_by_ancestry(&[p(301, 10), p(300, 9), p(10, 1)])
            .as_deref(),
        Some("sess-b")
    );
    // Pid 300 reused by another program after b's Gemini exited: no match.
    assert_eq!(
        h.engine.session_by_ancestry(&[p(300, 4000), p(10, 1)]),
        None
    );
    // A host without hooks, started from the same terminal: no match.
    assert_eq!(h.engine.session_by_ancestry(&[p(500, 20), p(10, 1)]), None);
    // Once the session ended, its host binds nothing any more.
    h.input(2.0, gemini_hook("sess-a", "SessionEnd", None));
    h.tick(100.0);
    assert_eq!(h.engine.session_by_ancestry(&[p(200, 7)]), None);
}

/// The daemon joins a session under way at a call whose rows Claude Code
/// has not written to the transcript yet (it writes them when it likes),
/// and a call the hooks missed comes before it: the catch-up waits for the
/// transcript to show the joining call, so the missed one keeps its place
/// before it.
#[test]
fn a_catch_up_waits_for_the_rows_of_the_call_it_joined_at() {
    let mut h = Harness::new();
    let prompt = json!({"type": "user", "timestamp": "2027-01-15T08:00:00.250Z",
        "message": {"role": "user", "content": "two shells"}});
    h.write_transcript(TRANSCRIPT, &[prompt]);
    h.pre(10.0, "Bash", "toolu_b", json!({"command": "pwd"}));
    let mut rows = transcript_rows("two shells", &[shell("toolu_a", "ls", "x")], "");
    rows.pop();
    rows.push(
        json!({"type": "assistant", "timestamp": "2027-01-15T08:00:05.000Z",
        "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": {"command": "pwd"}}]}}),
    );
    h.write_transcript(TRANSCRIPT, &rows);
    h.tick(10.5);
    h.post(
        11.0,
        "Bash",
        "toolu_b",
        json!({"command": "pwd"}),
        json!({"stdout": "/w"}),
    );
    h.stop(12.0, "done");
    h.end(13.0);
    h.tick(30.0);
    h.assert_well_formed();
    let (a, a_resp) = h.assert_told_once("toolu_a");
    let (b, _) = h.assert_told_once("toolu_b");
    assert!(a.recovered && a_resp.recovered);
    assert!(
        a_resp.step_index < b.step_index,
        "the missed call keeps its place: {} < {}",
        a_resp.step_index,
        b.step_index
    );
}
