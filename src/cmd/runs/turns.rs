//! `bir runs show` for a bound run (Tier 1): the session as its turns.
//!
//! ```text
//! Turn 1 · 20:14:03.120 · prompt
//!   > Check the repo, then ask the everything server to echo.
//!       1  Bash                    built-in         12.3 ms  ok
//!            context  I'll look at the files first.
//!            args     {"command":"ls"}
//!            result   README.md
//!       2  Agent                   subagent (general-purpose)   ok
//!          · SubagentStart general-purpose
//!         2.1  everything › echo   MCP              3.1 ms  ok
//!   answer  Done: the echo said hi.
//! ```
//!
//! What is shown where, and in which order, is `record::layout`'s
//! (calls in `stepIndex` order, numbered by `record::calls`, a subagent's
//! calls and events nested under its Agent call, session events after the
//! steps emitted before them); this file says each entry in words.
//!
//! Every recorded string goes through [`super::escape`] before it is
//! printed.

use serde_json::Value;

use super::{Screen, clip, compact, escape, pretty, result_preview};
use crate::record::calls::Call;
use crate::record::layout::{self, Entry, Turns};
use crate::record::model::{SessionEvent, Step, StepKind, Turn};
use crate::record::store::LoadedRun;

/// Writes `run` (a bound run, `layout::is_bound`) into `t`.
pub(super) fn render(t: &mut Screen, run: &LoadedRun, full: bool) {
    super::write_header(t, run);
    let laid = layout::turns(run);
    for turn in &laid.turns {
        write_turn_header(t, turn.number, turn.prompt, full);
        for entry in &turn.entries {
            write_entry(t, &laid, entry, 1, full);
        }
        super::write_turn_tokens(t, run, turn.number);
        t.line("");
    }
    // The run's final answer when no step carried it.
    if !laid.answered
        && let Some(output) = run.finish.as_ref().and_then(|f| f.output.as_ref())
    {
        write_answer(
            t,
            "final answer",
            Some(&Value::String(output.to_string())),
            full,
        );
        t.line("");
    }
    super::write_finish(
        t,
        run,
        "interrupted: the recorder ended without finishing the run (killed, or the machine stopped)",
        "not finished: the session is still going",
    );
}

/// One entry of a turn, or of an Agent call's children at `depth`.
fn write_entry(t: &mut Screen, laid: &Turns, entry: &Entry, depth: usize, full: bool) {
    match entry {
        Entry::Call(i) => write_tree(t, laid, *i, depth, full),
        Entry::Event(e) => write_event(t, e, depth, laid.agent_type(e)),
        Entry::Answer(a) => write_answer(t, "answer", a.output.as_deref(), full),
    }
}

fn write_turn_header(t: &mut Screen, n: u32, prompt: Option<&Turn>, full: bool) {
    let Some(p) = prompt else {
        t.line(format_args!(
            "  {}",
            if n == 0 {
                "Before the first prompt".to_owned()
            } else {
                format!("Turn {n} (its prompt was not recorded)")
            }
        ));
        return;
    };
    let who = match &p.origin {
        Some(origin) => format!("from the host ({})", escape(origin)),
        None => "prompt".to_owned(),
    };
    t.line(format_args!("  Turn {n} · {} · {who}", time_of(&p.at)));
    if full {
        for line in p.prompt.lines() {
            t.line(format_args!("    > {}", escape(line)));
        }
    } else {
        // A host prompt (a background agent's notification) is XML; its
        // summary says what happened.
        let shown = p
            .origin
            .as_ref()
            .and_then(|_| between(&p.prompt, "<summary>", "</summary>"))
            .unwrap_or(&p.prompt);
        t.line(format_args!(
            "    > {}",
            clip(&escape(&one_line(shown)), 110)
        ));
    }
}

/// The text between the first `open` and the `close` after it.
fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = s.find(open)? + open.len();
    let len = s[start..].find(close)?;
    Some(&s[start..start + len])
}

/// `HH:MM:SS.mmm` of an RFC 3339 time.
fn time_of(at: &str) -> &str {
    at.get(11..23).unwrap_or(at)
}

/// Line breaks as ` ⏎ ` (a preview is one line); blank lines dropped.
fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ⏎ ")
}

fn kind_label(call: &Call) -> String {
    let Some(s) = call.any() else {
        return String::new();
    };
    match s.kind {
        Some(StepKind::Builtin) => "built-in".into(),
        Some(StepKind::Mcp) => "MCP".into(),
        Some(StepKind::Agent) => {
            let kind = call
                .selected
                .and_then(|x| x.input.as_ref())
                .and_then(|i| i.get("subagent_type"))
                .and_then(Value::as_str);
            match kind {
                Some(k) => format!("subagent ({})", escape(k)),
                None => "subagent".into(),
            }
        }
        None if !s.server_name.is_empty() => "MCP".into(),
        None => "tool".into(),
    }
}

fn name_of(s: &Step) -> String {
    match s.kind {
        Some(StepKind::Mcp) | None if !s.server_name.is_empty() => {
            format!("{} › {}", s.server_name, s.tool_name)
        }
        _ => s.qualified_name.to_string(),
    }
}

fn status_of(call: &Call) -> &'static str {
    let Some(r) = call.response else {
        return "…";
    };
    match (r.is_error, r.outcome.as_deref()) {
        (_, Some("cancelled")) => "cancel",
        (_, Some("too_large")) => "large",
        (_, Some("upstream_gone")) => "gone",
        (_, Some("session_ended")) => "ended",
        (_, Some("denied")) => "DENIED",
        (true, _) => "ERROR",
        (false, _) => "ok",
    }
}

/// A call line, its detail lines, then its children one level deeper.
fn write_tree(t: &mut Screen, laid: &Turns, i: usize, depth: usize, full: bool) {
    let c = &laid.calls[i];
    let number = c.number.as_str();
    let Some(s) = c.any() else {
        return;
    };
    let pad = "    ".repeat(depth);
    let duration = c
        .response
        .and_then(|r| r.duration_ms)
        .map(|d| format!("{d:.1} ms"))
        .unwrap_or_default();
    let mut kind = kind_label(c);
    if depth > 1
        && let Some(agent) = &s.agent_type
    {
        kind = format!("{kind} · in {}", escape(agent));
    }
    t.line(format_args!(
        "{pad}{number:>4}  {}  {:<32} {:<28} {:>10}  {}",
        time_of(&s.started_at),
        clip(&escape(&name_of(s)), 32),
        kind,
        duration,
        status_of(c)
    ));
    let detail = format!("{pad}      ");
    let context = c
        .response
        .and_then(|r| r.context.as_deref())
        .or(c.selected.and_then(|x| x.context.as_deref()));
    if let Some(ctx) = context.filter(|x| !x.trim().is_empty()) {
        line(t, &detail, "context", &one_line(ctx), full);
    }
    if let Some(args) = c.selected.and_then(|x| x.input.as_ref()) {
        if full {
            t.block(&format!("{detail}args     "), &pretty(args));
        } else {
            line(t, &detail, "args", &compact(args), false);
        }
    }
    if let Some(r) = c.response {
        if let Some(out) = &r.output {
            if full {
                t.block(&format!("{detail}result   "), &pretty(out));
            } else {
                line(t, &detail, "result", &preview(out), false);
            }
        }
        if let Some(err) = &r.error {
            let text = err.as_str().map_or_else(|| compact(err), str::to_owned);
            line(t, &detail, "error", &one_line(&text), full);
        }
        if let Some(p) = &r.permission {
            line(t, &detail, "permission", &permission(p), full);
        }
        if let Some(why) = r.withheld.as_deref() {
            t.line(format_args!("{detail}(payloads withheld: {})", escape(why)));
        }
        if let Some(how) = r.correlation.as_deref() {
            t.line(format_args!("{detail}(joined by {})", escape(how)));
        }
    }
    for child in &laid.children[i] {
        write_entry(t, laid, child, depth + 1, full);
    }
}

/// One labelled detail line: escaped, and clipped unless `full`.
fn line(t: &mut Screen, indent: &str, label: &str, text: &str, full: bool) {
    let text = escape(text);
    let text = if full { text } else { clip(&text, 100) };
    t.line(format_args!("{indent}{label:<8} {text}"));
}

/// A result as one line: an MCP result's blocks, a built-in's stdout (and
/// stderr), a string as itself.
fn preview(v: &Value) -> String {
    if let Some(s) = v.as_str() {
        return one_line(s);
    }
    if let Some(stdout) = v.get("stdout").and_then(Value::as_str) {
        let stderr = v.get("stderr").and_then(Value::as_str).unwrap_or("");
        return one_line(&if stderr.is_empty() {
            stdout.to_owned()
        } else {
            format!("{stdout} [stderr] {stderr}")
        });
    }
    if v.get("content").is_some() || v.get("truncated").is_some() {
        return one_line(&result_preview(v));
    }
    // The content blocks alone (how a hook reports an MCP result).
    if v.as_array()
        .is_some_and(|blocks| !blocks.is_empty() && blocks.iter().all(|b| b.get("type").is_some()))
    {
        return one_line(&result_preview(&serde_json::json!({ "content": v })));
    }
    compact(v)
}

/// A permission decision as one line: `behavior` / `decision` and the
/// reason when present, else the whole value.
fn permission(p: &Value) -> String {
    let get = |k: &str| p.get(k).and_then(Value::as_str);
    match (
        get("behavior").or(get("decision")).or(get("event")),
        get("reason").or(get("message")),
    ) {
        (Some(d), Some(r)) => format!("{d}: {r}"),
        (Some(d), None) => d.to_owned(),
        _ => p.as_str().map_or_else(|| compact(p), str::to_owned),
    }
}

/// A session event as one short line. `agent_type` is the subagent's type
/// as its steps name it (the event's own data may leave it out).
fn write_event(t: &mut Screen, e: &SessionEvent, depth: usize, agent_type: Option<&str>) {
    let data = e.data.as_deref();
    let get = |k: &str| data.and_then(|d| d.get(k)).and_then(Value::as_str);
    let what = match e.name.as_str() {
        "SubagentStart" | "SubagentStop" => {
            // An empty type is the host's own forked agent (compaction).
            let kind = match get("agent_type").or(agent_type) {
                Some("") => "(forked)",
                Some(k) => k,
                None => "subagent",
            };
            match &e.agent_id {
                Some(id) => format!("{kind} (agent {})", id.get(..12).unwrap_or(id)),
                None => kind.to_owned(),
            }
        }
        "PreCompact" | "PostCompact" => get("trigger").unwrap_or("").to_owned(),
        "SessionStart" => get("source").unwrap_or("").to_owned(),
        "SessionEnd" => get("reason").unwrap_or("").to_owned(),
        "Notification" => get("message").unwrap_or("").to_owned(),
        "PermissionRequest" | "PermissionDenied" => get("tool_name").unwrap_or("").to_owned(),
        "Stop" => "the main agent stopped; background work goes on".to_owned(),
        "bir.guide" => guide_line(data),
        _ => data.map(compact).unwrap_or_default(),
    };
    let pad = "    ".repeat(depth);
    t.line(format_args!(
        "{pad}   · {} {} {}",
        time_of(&e.at),
        escape(&e.name),
        clip(&escape(&one_line(&what)), 90)
    ));
}

/// A guide's decision (`bir guide`) as words: what it did, at which step.
fn guide_line(data: Option<&Value>) -> String {
    let get = |k: &str| data.and_then(|d| d.get(k)).and_then(Value::as_str);
    let step = get("step").unwrap_or("-");
    match get("action").unwrap_or("") {
        "started" => format!(
            "started: {} steps of {}",
            data.and_then(|d| d.get("steps"))
                .map_or_else(String::new, compact),
            get("scenario").unwrap_or("")
        ),
        "pinned" => format!(
            "pinned {step} ({}) at {}",
            get("decision").unwrap_or("?"),
            data.and_then(|d| d.get("changed"))
                .map_or_else(String::new, compact)
        ),
        "pin_checked" => {
            let applied = data.and_then(|d| d.get("applied")) == Some(&Value::Bool(true));
            format!(
                "pin of {} {}",
                get("toolUseId").unwrap_or("?"),
                if applied {
                    "reached the server"
                } else {
                    "did NOT reach the server"
                }
            )
        }
        "handover" => format!("handed over at {step}: {}", get("reason").unwrap_or("")),
        "nudged" => format!("nudged at Stop: next is {step}"),
        "extra" => format!("extra call {} tolerated", get("tool").unwrap_or("")),
        other => format!("{other} {step}"),
    }
}

fn write_answer(t: &mut Screen, label: &str, output: Option<&Value>, full: bool) {
    let text = match output {
        Some(Value::String(s)) => s.clone(),
        Some(v) => compact(v),
        None => return,
    };
    if full {
        t.line(format_args!("    {label}:"));
        for l in text.lines() {
            t.line(format_args!("      {}", escape(l)));
        }
    } else {
        t.line(format_args!(
            "    {label}  {}",
            clip(&escape(&one_line(&text)), 110)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `bir runs show` prints for `run`.
    fn shown(run: &LoadedRun, full: bool) -> String {
        let mut t = Screen::default();
        render(&mut t, run, full);
        t.0
    }
    use crate::record::journal;
    use crate::record::model::{
        HostInfo, Record, RunEvent, RunFinish, RunHeader, RunMetadata, RunMetrics, StepType,
        TokenUsage, TurnUsage,
    };
    use serde_json::json;

    fn step(index: u64, t: StepType, name: &str, id: &str) -> Step {
        let (kind, server, tool) = match name.strip_prefix("mcp__") {
            Some(rest) => {
                let (srv, tool) = rest.split_once("__").unwrap_or((rest, ""));
                (StepKind::Mcp, srv.to_owned(), tool.to_owned())
            }
            None if name == "Agent" => (StepKind::Agent, String::new(), name.to_owned()),
            None => (StepKind::Builtin, String::new(), name.to_owned()),
        };
        Step {
            id: format!("step_{index}"),
            qualified_name: name.into(),
            server_name: server,
            tool_name: tool.as_str().into(),
            duration_ms: Some(1.5),
            tool_use_id: Some(id.into()),
            kind: Some(kind),
            turn: Some(1),
            ..Step::new(index, t, format!("2026-12-01T20:00:{index:02}.000Z"))
        }
    }

    /// A call's two records: the model's arguments and context on the
    /// selection, the result on the response.
    fn call(
        sel: u64,
        resp: u64,
        name: &str,
        id: &str,
        input: Value,
        output: Value,
        context: &str,
    ) -> (Step, Step) {
        let mut s = step(sel, StepType::ToolSelected, name, id);
        s.input = Some(input.into());
        s.context = Some(context.into());
        let mut r = step(resp, StepType::ToolResponse, name, id);
        r.output = Some(output.into());
        r.context = Some(context.into());
        (s, r)
    }

    fn mcp_text(text: &str) -> Value {
        json!({"content": [{"type": "text", "text": text}]})
    }

    /// Writes `events` as a journal and loads it back as the store would.
    fn load(tag: &str, events: Vec<RunEvent>) -> LoadedRun {
        let dir = std::env::temp_dir().join(format!("bir-turns-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("run_test.jsonl");
        let mut bytes = Vec::new();
        for (i, event) in events.into_iter().enumerate() {
            let rec = Record {
                seq: i as u64 + 1,
                event,
            };
            bytes.extend(journal::frame(&serde_json::to_vec(&rec).expect("json")));
        }
        std::fs::write(&path, bytes).expect("write");
        let run = crate::record::store::load_path(&path).expect("load");
        let _ = std::fs::remove_dir_all(&dir);
        run
    }

    fn header() -> RunEvent {
        RunEvent::RunStarted(RunHeader {
            id: "run_bound".into(),
            started_at: "2026-12-01T20:00:00.000Z".into(),
            input: Some("List the files, echo hi, ask a helper".into()),
            metadata: RunMetadata {
                recorder: "bir".into(),
                tier: "bound".into(),
                host: Some(HostInfo {
                    app: "claude-code".into(),
                    version: "2.1.332".into(),
                }),
                cwd: "/p".into(),
                session_id: Some("sess-1".into()),
                note: Some("joined under way \u{1b}[2J".into()),
                ..RunMetadata::default()
            },
        })
    }

    fn usage_row(turn: u32, model: &str, input: u64, cache_read: u64) -> TurnUsage {
        TurnUsage {
            turn,
            model: Some(model.into()),
            usage: TokenUsage {
                input,
                output: 20,
                cache_read,
                cache_write: 0,
            },
        }
    }

    fn turn(n: u32, prompt: &str, origin: Option<&str>) -> RunEvent {
        RunEvent::Turn(Turn {
            turn: n,
            at: format!("2026-12-01T20:0{n}:00.000Z"),
            prompt: prompt.into(),
            origin: origin.map(str::to_owned),
        })
    }

    fn event(name: &str, agent: Option<&str>, data: Value) -> RunEvent {
        RunEvent::SessionEvent(SessionEvent {
            name: name.into(),
            at: "2026-12-01T20:00:30.000Z".into(),
            agent_id: agent.map(Into::into),
            data: Some(data.into()),
        })
    }

    /// Two prompts; a built-in call, an MCP call, a subagent (with its own
    /// MCP call), a failed MCP call, and answers. The journal holds the
    /// echo's response after the Agent's selection (a late join).
    fn session() -> Vec<RunEvent> {
        let (bash_s, bash_r) = call(
            1,
            2,
            "Bash",
            "toolu_1",
            json!({"command": "ls"}),
            json!({"stdout": "README.md\nsrc", "stderr": "", "interrupted": false}),
            "I'll look at the files first.",
        );
        let (echo_s, echo_r) = call(
            3,
            4,
            "mcp__everything__echo",
            "toolu_2",
            json!({"message": "hi"}),
            mcp_text("Echo: hi"),
            "Now the echo \u{1b}[31mtool\u{1b}[0m.",
        );
        let (agent_s, mut agent_r) = call(
            5,
            6,
            "Agent",
            "toolu_3",
            json!({"subagent_type": "general-purpose", "prompt": "SUBTASK"}),
            json!({"isAsync": true, "status": "async_launched"}),
            "[thinking] Delegate.\n\nA helper can do the sum.",
        );
        agent_r.duration_ms = None;
        let (mut sub_s, mut sub_r) = call(
            8,
            9,
            "mcp__everything__get-sum",
            "toolu_4",
            json!({"a": 1, "b": 2}),
            // As a hook reports an MCP result: the blocks alone.
            json!([{"type": "text", "text": "The sum of 1 and 2 is 3."}]),
            "Summing as asked.",
        );
        for s in [&mut sub_s, &mut sub_r] {
            s.agent_id = Some("agent-a1".into());
            s.agent_type = Some("general-purpose".into());
            s.parent_tool_use_id = Some("toolu_3".into());
        }
        let (fail_s, mut fail_r) = call(
            10,
            11,
            "mcp__everything__fail",
            "toolu_5",
            json!({}),
            json!({"content": [{"type": "text", "text": "boom"}], "isError": true}),
            "This one will fail.",
        );
        fail_r.is_error = true;
        fail_r.permission =
            Some(json!({"behavior": "allow", "reason": "bypassPermissions"}).into());
        let mut answer1 = step(12, StepType::FinalAnswer, "", "");
        answer1.tool_use_id = None;
        answer1.kind = None;
        answer1.output = Some(json!("Launched a helper; echo said hi.").into());
        let mut answer2 = answer1.clone();
        answer2.step_index = 13;
        answer2.turn = Some(2);
        answer2.output = Some(json!("The helper says 3.").into());
        vec![
            header(),
            turn(1, "List the files, echo hi, ask a helper", None),
            RunEvent::Step(bash_s),
            RunEvent::Step(bash_r),
            RunEvent::Step(echo_s),
            RunEvent::Step(agent_s),
            RunEvent::Step(echo_r),
            RunEvent::Step(agent_r),
            event(
                "SubagentStart",
                Some("agent-a1"),
                json!({"agent_type": "general-purpose"}),
            ),
            RunEvent::Step(sub_s),
            RunEvent::Step(sub_r),
            // No data: the type comes from the subagent's steps.
            RunEvent::SessionEvent(SessionEvent {
                name: "SubagentStop".into(),
                at: "2026-12-01T20:00:30.000Z".into(),
                agent_id: Some("agent-a1".into()),
                data: None,
            }),
            RunEvent::Step(fail_s),
            RunEvent::Step(fail_r),
            RunEvent::Step(answer1),
            event("PreCompact", None, json!({"trigger": "manual"})),
            turn(
                2,
                "<task-notification>\n<task-id>a1</task-id>\n<summary>Agent \"Sum\" finished</summary>\n</task-notification>",
                Some("task-notification"),
            ),
            RunEvent::Step(answer2),
            RunEvent::RunFinished(RunFinish {
                finished_at: "2026-12-01T20:02:00.000Z".into(),
                output: Some("The helper says 3.".into()),
                metrics: RunMetrics {
                    tool_calls: 5,
                    errors: 1,
                    total_tool_ms: 7.5,
                    usage: None,
                    turn_usage: vec![
                        usage_row(1, "claude-opus-5-5", 1200, 300),
                        usage_row(1, "claude-haiku-5", 400, 0),
                        usage_row(2, "claude-opus-5-5", 900, 100),
                    ],
                },
                lossy: false,
                dropped: 0,
                reason: Some("session_end".into()),
                // Learned from the transcript after the header was written.
                model: Some("claude-opus-5-5".into()),
            }),
        ]
    }

    /// The line holding `needle`, and its position.
    fn find<'a>(text: &'a str, needle: &str) -> (usize, &'a str) {
        text.lines()
            .enumerate()
            .find(|(_, l)| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
    }

    #[test]
    fn a_bound_run_reads_as_its_turns_in_true_order() {
        let run = load("full", session());
        assert!(layout::is_bound(&run));
        let text = shown(&run, false);
        // The header: tier, host, model.
        assert!(
            text.contains("tier bound · host claude-code 2.1.332"),
            "{text}"
        );
        assert!(text.contains("model claude-opus-5-5"), "{text}");
        assert!(
            text.contains("  note: joined under way \\u{1b}[2J"),
            "{text}"
        );
        // Turn 1 and its prompt, then the calls numbered 1–4 (one number per
        // call, not per record) in stepIndex order, though the journal has
        // the echo's response after the Agent's selection.
        let (t1, _) = find(&text, "Turn 1 ·");
        let (p1, _) = find(&text, "> List the files, echo hi, ask a helper");
        let (c1, l1) = find(&text, "   1  20:00:01.000  Bash");
        let (c2, l2) = find(&text, "   2  20:00:03.000  everything › echo");
        let (c3, l3) = find(&text, "   3  20:00:05.000  Agent");
        let (c4, l4) = find(&text, "   4  20:00:10.000  everything › fail");
        assert!(
            t1 < p1 && p1 < c1 && c1 < c2 && c2 < c3 && c3 < c4,
            "{text}"
        );
        assert!(l1.contains("built-in") && l1.ends_with("ok"), "{l1}");
        assert!(l2.contains("MCP") && l2.contains("1.5 ms"), "{l2}");
        assert!(l3.contains("subagent (general-purpose)"), "{l3}");
        assert!(
            text.contains("context  [thinking] Delegate. ⏎ A helper can do the sum.\n"),
            "thinking, then the text, on one line: {text}"
        );
        assert!(l4.contains("MCP") && l4.ends_with("ERROR"), "{l4}");
        assert!(
            !text.contains("   5  "),
            "five calls but the subagent's is nested: {text}"
        );
        // Details: context, args, result previews (built-in stdout, MCP text).
        assert!(
            text.contains("context  I'll look at the files first."),
            "{text}"
        );
        assert!(text.contains("args     {\"command\":\"ls\"}"), "{text}");
        assert!(text.contains("result   README.md ⏎ src"), "{text}");
        assert!(text.contains("result   Echo: hi"), "{text}");
        assert!(text.contains("result   boom"), "{text}");
        assert!(
            text.contains("permission allow: bypassPermissions"),
            "{text}"
        );
        // Control characters from the model's text never reach the terminal.
        assert!(!text.contains('\u{1b}'), "{text}");
        assert!(text.contains("Now the echo \\u{1b}[31mtool"), "{text}");
        // The subagent's call sits under the Agent call, with its events.
        let (sub, sub_line) = find(&text, "3.1  20:00:08.000  everything › get-sum");
        let (start, _) = find(&text, "SubagentStart general-purpose (agent agent-a1)");
        let (stop, _) = find(&text, "SubagentStop general-purpose");
        assert!(
            c3 < start && start < sub && sub < stop && stop < c4,
            "{text}"
        );
        assert!(sub_line.contains("in general-purpose"), "{sub_line}");
        assert!(text.contains("result   The sum of 1 and 2 is 3."), "{text}");
        assert!(
            text.contains("SubagentStop general-purpose (agent agent-a1)"),
            "the type from the subagent's steps: {text}"
        );
        let indent = |l: &str| l.len() - l.trim_start().len();
        assert!(indent(sub_line) > indent(l3), "nested deeper:\n{text}");
        // Answers close their turns; turn 2 came from the host; compaction
        // is a short line; the finish names the reason.
        let (a1, _) = find(&text, "answer  Launched a helper; echo said hi.");
        let (compact_at, _) = find(&text, "PreCompact manual");
        let (t2, t2_line) = find(&text, "Turn 2 ·");
        let (a2, _) = find(&text, "answer  The helper says 3.");
        assert!(
            c4 < a1 && a1 < compact_at && compact_at < t2 && t2 < a2,
            "{text}"
        );
        assert!(
            t2_line.contains("from the host (task-notification)"),
            "{t2_line}"
        );
        assert!(
            text.contains("    > Agent \"Sum\" finished\n"),
            "a notification shows its summary: {text}"
        );
        assert!(
            text.contains("5 calls · 1 errors") && text.contains("session_end"),
            "{text}"
        );
        // Each turn's tokens close it, its models named.
        let (k1, k1_line) = find(&text, "tokens  1600 in (300 cache reads) · 40 out");
        let (k2, k2_line) = find(&text, "tokens  900 in (100 cache reads) · 20 out");
        assert!(a1 < k1 && k1 < t2 && a2 < k2, "{text}");
        assert!(
            k1_line.ends_with("· claude-opus-5-5, claude-haiku-5"),
            "{k1_line}"
        );
        assert!(k2_line.ends_with("· claude-opus-5-5"), "{k2_line}");

        // --full: whole payloads, pretty, still escaped.
        let full = shown(&run, true);
        assert!(full.contains("\"message\": \"hi\""), "{full}");
        assert!(!full.contains('\u{1b}'), "{full}");
    }

    #[test]
    fn a_run_cut_short_still_reads() {
        // No finish, an unanswered call, no prompt recorded for its turn, and
        // a final answer only in the finish record of another run.
        let mut events = session();
        events.truncate(6); // header, turn 1, bash (both), echo selected, agent selected
        events.remove(1);
        let run = load("cut", events);
        let text = shown(&run, false);
        assert!(
            text.contains("Turn 1 (its prompt was not recorded)"),
            "{text}"
        );
        let (_, echo) = find(&text, "everything › echo");
        assert!(echo.ends_with('…'), "unanswered: {echo}");
        // No writer holds its journal: it was cut short, not still going.
        assert!(
            text.contains("interrupted: the recorder ended without finishing the run"),
            "{text}"
        );

        let mut events = vec![header(), turn(1, "hi", None)];
        events.push(RunEvent::RunFinished(RunFinish {
            finished_at: "2026-12-01T20:02:00.000Z".into(),
            output: Some("Hello \u{7}there".into()),
            lossy: true,
            dropped: 2,
            reason: Some("idle_timeout".into()),
            ..RunFinish::default()
        }));
        let text = shown(&load("finish-only", events), false);
        assert!(text.contains("final answer  Hello \\u{7}there"), "{text}");

        assert!(
            text.contains("idle_timeout · LOSSY (2 observations lost)"),
            "{text}"
        );

        // Two calls naming each other as parent (a damaged journal): both
        // are still shown.
        let (mut a, _) = call(1, 2, "Agent", "toolu_a", json!({}), json!({}), "a");
        let (mut b, _) = call(3, 4, "Agent", "toolu_b", json!({}), json!({}), "b");
        a.parent_tool_use_id = Some("toolu_b".into());
        b.parent_tool_use_id = Some("toolu_a".into());
        let text = shown(
            &load(
                "cycle",
                vec![header(), RunEvent::Step(a), RunEvent::Step(b)],
            ),
            false,
        );
        assert!(
            text.contains("   1  20:00:01.000  Agent")
                && text.contains("   2  20:00:03.000  Agent"),
            "{text}"
        );
    }
}
