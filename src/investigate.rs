//! The findings of `bir investigate`, computed from a run and the runs
//! recorded before it. Pure: no I/O, no clock, so every kind of problem is
//! tested on hand-made runs.
//!
//! Everything taken from the run is already redacted (the store holds
//! nothing else); the findings carry it as plain text for rendering, which
//! escapes it before it reaches a terminal.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use crate::record::calls::reader_calls;
use crate::record::model::{ServerSnapshot, Step, StepType, canonical};
use crate::record::store::LoadedRun;

/// A tool is "slow" in this run when a call took at least this many times
/// its usual (median) duration…
const SLOW_FACTOR: f64 = 3.0;
/// …and at least this much longer in absolute terms: a 2 ms call taking
/// 9 ms is noise, not a finding.
const SLOW_MARGIN_MS: f64 = 500.0;
/// A median over fewer earlier calls than this says little.
const MIN_SAMPLES: usize = 3;
/// The same tool with the same arguments this many times is a loop.
const LOOP_MIN_CALLS: usize = 3;
/// How many calls before a failure are shown as its lead-up.
const LEAD_UP_CALLS: usize = 3;
/// At most this many slow steps are listed (the slowest relative first).
const MAX_SLOW: usize = 10;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Findings {
    pub run: String,
    pub tier: String,
    /// `finished`, `open` (a writer holds it) or `interrupted`.
    pub state: String,
    pub tool_calls: usize,
    /// How many earlier runs the comparisons were drawn from.
    pub history_runs: usize,
    pub failures: Vec<Failure>,
    pub slow: Vec<SlowStep>,
    pub loops: Vec<Loop>,
    pub server_changes: Vec<ServerChange>,
    /// Why the record of this run is incomplete, when it is.
    pub gaps: Vec<Gap>,
}

impl Findings {
    pub(crate) fn is_clean(&self) -> bool {
        self.failures.is_empty()
            && self.slow.is_empty()
            && self.loops.is_empty()
            && self.server_changes.is_empty()
            && self.gaps.is_empty()
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Failure {
    /// The call's number as `bir runs show` prints it (`3`, `2.1`).
    pub step: String,
    pub tool: String,
    pub server: String,
    pub started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// The error as text: a JSON-RPC error's code and message, or the text
    /// a tool result flagged `isError` carried.
    pub error: String,
    /// `answered`, or how the call ended without an answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// Bound runs: what the model wrote just before choosing this call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The prompt of the turn the call belongs to (bound runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The calls just before it, oldest first.
    pub lead_up: Vec<LeadUp>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LeadUp {
    /// As in [`Failure::step`].
    pub step: String,
    pub tool: String,
    pub failed: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SlowStep {
    /// As in [`Failure::step`].
    pub step: String,
    pub tool: String,
    pub server: String,
    pub duration_ms: f64,
    /// The median duration of the same tool in earlier runs.
    pub usual_ms: f64,
    /// How many earlier calls that median is over.
    pub samples: usize,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Loop {
    pub tool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    pub calls: usize,
    /// The longest run of these calls with no other call between them.
    pub in_a_row: usize,
    /// The calls' numbers (as in [`Failure::step`]), in order.
    pub steps: Vec<String>,
    /// The first call's place in the run (orders loops of equal size).
    #[serde(skip)]
    pub first: usize,
    /// How many of them failed.
    pub failed: usize,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ServerChange {
    pub server: String,
    /// The run the previous definitions were recorded in, or `None` when
    /// they changed during this run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_run: Option<String>,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Same name, different definition (description, schema, …): the
    /// pattern of a rug pull.
    pub changed: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Gap {
    /// `interrupted`, `open`, `dropped`, `torn`, `unknown_records`,
    /// `joined_late`, `unanswered`, `withheld`.
    pub kind: String,
    pub detail: String,
}

/// Everything `bir investigate` finds in `run`, comparing it with
/// `history` (other runs, each started before it).
pub(crate) fn investigate(run: &LoadedRun, history: &[LoadedRun]) -> Findings {
    let calls = pair_calls(run);
    Findings {
        run: run.id(),
        tier: run
            .header
            .as_ref()
            .map(|h| h.metadata.tier.clone())
            .unwrap_or_else(|| "?".into()),
        state: state_of(run).into(),
        tool_calls: calls.len(),
        history_runs: history.len(),
        failures: failures(run, &calls),
        slow: slow_steps(&calls, history),
        loops: loops(&calls),
        server_changes: server_changes(run, history),
        gaps: gaps(run, &calls),
    }
}

fn state_of(run: &LoadedRun) -> &'static str {
    if run.finish.is_some() {
        "finished"
    } else if run.interrupted() {
        "interrupted"
    } else {
        "open"
    }
}

/// One tool call: its selection and, once answered, its response.
struct Call<'a> {
    selected: &'a Step,
    response: Option<&'a Step>,
    /// The reader's number (`record::calls`): the step number `bir runs
    /// show` prints for this call, never a journal index.
    number: String,
}

impl Call<'_> {
    fn failed(&self) -> bool {
        self.response.is_some_and(step_failed)
    }
}

fn step_failed(s: &Step) -> bool {
    s.is_error
        || s.error.is_some()
        || s.outcome
            .as_deref()
            .is_some_and(|o| !matches!(o, "answered"))
}

/// The run's calls, paired and ordered the way every reader pairs them
/// (`record::calls`). A call with only a response (its selection lost)
/// stands for itself.
fn pair_calls(run: &LoadedRun) -> Vec<Call<'_>> {
    reader_calls(run)
        .into_iter()
        .filter_map(|c| {
            Some(Call {
                selected: c.selected.or(c.response)?,
                response: c.response,
                number: c.number,
            })
        })
        .collect()
}

fn tool_label(s: &Step) -> String {
    if s.qualified_name.is_empty() {
        s.tool_name.to_string()
    } else {
        s.qualified_name.to_string()
    }
}

fn failures(run: &LoadedRun, calls: &[Call<'_>]) -> Vec<Failure> {
    let mut found = Vec::new();
    for (i, call) in calls.iter().enumerate() {
        let Some(response) = call.response.filter(|r| step_failed(r)) else {
            continue;
        };
        let lead_up = calls[i.saturating_sub(LEAD_UP_CALLS)..i]
            .iter()
            .map(|c| LeadUp {
                step: c.number.clone(),
                tool: tool_label(c.selected),
                failed: c.failed(),
            })
            .collect();
        let prompt = call.selected.turn.and_then(|n| {
            run.turns
                .iter()
                .find(|t| t.turn == n)
                .map(|t| t.prompt.to_string())
        });
        found.push(Failure {
            step: call.number.clone(),
            tool: tool_label(call.selected),
            server: call.selected.server_name.clone(),
            started_at: call.selected.started_at.clone(),
            input: call.selected.input.as_deref().cloned(),
            error: error_text(response),
            outcome: response.outcome.clone(),
            context: call.selected.context.as_deref().map(str::to_owned),
            prompt,
            lead_up,
        });
    }
    found
}

/// The error a failed response carried, as text.
fn error_text(s: &Step) -> String {
    if let Some(err) = s.error.as_deref() {
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)");
        return match err.get("code") {
            Some(code) => format!("JSON-RPC error {code}: {message}"),
            None => message.to_owned(),
        };
    }
    if let Some(output) = s.output.as_deref() {
        let texts: Vec<&str> = output
            .get("content")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.get("text").and_then(Value::as_str))
                    .collect()
            })
            .unwrap_or_default();
        if !texts.is_empty() {
            return texts.join("\n");
        }
        // A bound run's built-in tool answers in its own shape.
        if let Some(text) = ["/error", "/stderr", "/message"]
            .iter()
            .find_map(|p| output.pointer(p).and_then(Value::as_str))
            .filter(|t| !t.is_empty())
        {
            return text.to_owned();
        }
        if s.is_error {
            return output.to_string();
        }
    }
    match s.outcome.as_deref() {
        Some("cancelled") => "the host cancelled the call".into(),
        Some("too_large") => "the answer was over the proxy's size limit".into(),
        Some("upstream_gone") => "the server exited before it answered".into(),
        Some("session_ended") => "the session ended before the server answered".into(),
        Some(other) => format!("ended without an answer ({other})"),
        None => "the tool reported an error".into(),
    }
}

/// Durations of each (server, tool) in the history runs.
fn usual_durations(history: &[LoadedRun]) -> BTreeMap<(String, String), Vec<f64>> {
    let mut by_tool: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for run in history {
        for s in &run.steps {
            if s.step_type == StepType::ToolResponse
                && let Some(ms) = s.duration_ms.filter(|ms| ms.is_finite())
            {
                by_tool
                    .entry((s.server_name.clone(), s.tool_name.to_string()))
                    .or_default()
                    .push(ms);
            }
        }
    }
    by_tool
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    })
}

fn slow_steps(calls: &[Call<'_>], history: &[LoadedRun]) -> Vec<SlowStep> {
    let mut usual: BTreeMap<(String, String), (f64, usize)> = BTreeMap::new();
    for (key, mut durations) in usual_durations(history) {
        if durations.len() >= MIN_SAMPLES
            && let Some(m) = median(&mut durations)
        {
            usual.insert(key, (m, durations.len()));
        }
    }
    let mut slow: Vec<SlowStep> = calls
        .iter()
        .filter_map(|c| {
            let r = c.response?;
            let ms = r.duration_ms?;
            let key = (r.server_name.clone(), r.tool_name.to_string());
            let &(usual_ms, samples) = usual.get(&key)?;
            (ms >= usual_ms * SLOW_FACTOR && ms - usual_ms >= SLOW_MARGIN_MS).then(|| SlowStep {
                step: c.number.clone(),
                tool: tool_label(c.selected),
                server: r.server_name.clone(),
                duration_ms: ms,
                usual_ms,
                samples,
            })
        })
        .collect();
    slow.sort_by(|a, b| {
        let ra = a.duration_ms / a.usual_ms.max(1.0);
        let rb = b.duration_ms / b.usual_ms.max(1.0);
        rb.total_cmp(&ra)
    });
    slow.truncate(MAX_SLOW);
    slow
}

/// What makes two calls "the same": the tool and the arguments (their
/// digest when the recorder stored one, else their canonical form).
fn call_key(s: &Step) -> (String, Vec<u8>) {
    let args = match (&s.args_digest, s.input.as_deref()) {
        (Some(d), _) => d.as_bytes().to_vec(),
        (None, Some(v)) => canonical(v),
        (None, None) => Vec::new(),
    };
    (tool_label(s), args)
}

fn loops(calls: &[Call<'_>]) -> Vec<Loop> {
    let mut groups: BTreeMap<(String, Vec<u8>), Vec<usize>> = BTreeMap::new();
    for (i, c) in calls.iter().enumerate() {
        groups.entry(call_key(c.selected)).or_default().push(i);
    }
    let mut found: Vec<Loop> = groups
        .into_values()
        .filter(|at| at.len() >= LOOP_MIN_CALLS)
        .map(|at| {
            let mut in_a_row = 1;
            let mut streak = 1;
            for pair in at.windows(2) {
                streak = if pair[1] == pair[0] + 1 {
                    streak + 1
                } else {
                    1
                };
                in_a_row = in_a_row.max(streak);
            }
            let first = calls[at[0]].selected;
            Loop {
                tool: tool_label(first),
                input: first.input.as_deref().cloned(),
                calls: at.len(),
                in_a_row,
                steps: at.iter().map(|&i| calls[i].number.clone()).collect(),
                first: at[0],
                failed: at.iter().filter(|&&i| calls[i].failed()).count(),
            }
        })
        .collect();
    found.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.first.cmp(&b.first)));
    found
}

/// The tools a snapshot names, with their definition hashes.
fn hashes(s: &ServerSnapshot) -> BTreeMap<String, String> {
    s.tool_hashes
        .iter()
        .map(|(name, hash)| (name.to_string(), hash.clone()))
        .collect()
}

fn diff(
    server: &str,
    since_run: Option<String>,
    before: &ServerSnapshot,
    after: &ServerSnapshot,
) -> Option<ServerChange> {
    if before.tools_digest == after.tools_digest && before.tool_hashes == after.tool_hashes {
        return None;
    }
    let (old, new) = (hashes(before), hashes(after));
    let names: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut change = ServerChange {
        server: server.to_owned(),
        since_run,
        added: Vec::new(),
        removed: Vec::new(),
        changed: Vec::new(),
    };
    for name in names {
        match (old.get(name), new.get(name)) {
            (None, Some(_)) => change.added.push(name.clone()),
            (Some(_), None) => change.removed.push(name.clone()),
            (Some(a), Some(b)) if a != b => change.changed.push(name.clone()),
            _ => {}
        }
    }
    let any = !(change.added.is_empty() && change.removed.is_empty() && change.changed.is_empty());
    any.then_some(change)
}

/// Servers whose tool definitions differ from the previous run that
/// recorded the same server (by name), and servers whose definitions
/// changed while this run was recorded (a second snapshot).
fn server_changes(run: &LoadedRun, history: &[LoadedRun]) -> Vec<ServerChange> {
    let mut found = Vec::new();
    let mut last_seen: BTreeMap<&str, &ServerSnapshot> = BTreeMap::new();
    for snap in &run.snapshots {
        let name = snap.server_name.as_str();
        match last_seen.get(name) {
            Some(before) => found.extend(diff(name, None, before, snap)),
            None => {
                if let Some((prev_run, before)) = previous_snapshot(name, history) {
                    found.extend(diff(name, Some(prev_run), before, snap));
                }
            }
        }
        last_seen.insert(name, snap);
    }
    found
}

/// The last snapshot of `server` in the most recently started history run
/// that recorded one, with that run's id.
fn previous_snapshot<'a>(
    server: &str,
    history: &'a [LoadedRun],
) -> Option<(String, &'a ServerSnapshot)> {
    history
        .iter()
        .filter_map(|r| {
            let snap = r.snapshots.iter().rev().find(|s| s.server_name == server)?;
            let started = r.header.as_ref().map(|h| h.started_at.as_str())?;
            Some((started, r, snap))
        })
        .max_by(|a, b| a.0.cmp(b.0))
        .map(|(_, r, snap)| (r.id(), snap))
}

fn gaps(run: &LoadedRun, calls: &[Call<'_>]) -> Vec<Gap> {
    let mut found = Vec::new();
    let mut gap = |kind: &str, detail: String| {
        found.push(Gap {
            kind: kind.into(),
            detail,
        })
    };
    match state_of(run) {
        "interrupted" => gap(
            "interrupted",
            "the run was never finished: its recorder ended without closing it (killed, crashed, or the machine stopped), so what happened after its last record is unknown".into(),
        ),
        "open" => gap(
            "open",
            "the run is still being recorded: this is what it holds so far".into(),
        ),
        _ => {}
    }
    if let Some(f) = &run.finish
        && f.dropped > 0
    {
        gap(
            "dropped",
            format!(
                "{} observation(s) were dropped before they reached the recorder (its queue was full: the relay never waits for recording), so steps may be missing",
                f.dropped
            ),
        );
    }
    if let Some(note) = run.header.as_ref().and_then(|h| h.metadata.note.as_deref()) {
        gap("joined_late", format!("lossy from its start: {note}"));
    }
    let lossy = run.finish.as_ref().is_some_and(|f| f.lossy)
        || run.header.as_ref().is_some_and(|h| h.metadata.lossy);
    let lossy_unexplained = lossy
        && run.torn_bytes == 0
        && run.finish.as_ref().is_none_or(|f| f.dropped == 0)
        && run
            .header
            .as_ref()
            .is_none_or(|h| h.metadata.note.is_none());
    if lossy_unexplained {
        gap(
            "lossy",
            "the recorder marked the run lossy: some of what happened was not recorded".into(),
        );
    }
    if run.torn_bytes > 0 {
        gap(
            "torn",
            format!(
                "the last {} byte(s) of its journal are not a whole record (a write cut short, or damage): they were skipped",
                run.torn_bytes
            ),
        );
    }
    if run.unknown_records > 0 {
        gap(
            "unknown_records",
            format!(
                "{} record(s) were not understood (written by a newer bir?) and were skipped",
                run.unknown_records
            ),
        );
    }
    let unanswered: Vec<String> = calls
        .iter()
        .filter(|c| c.response.is_none())
        .map(|c| format!("{} (step {})", tool_label(c.selected), c.number))
        .collect();
    if !unanswered.is_empty() {
        gap(
            "unanswered",
            format!("no answer recorded for {}", unanswered.join(", ")),
        );
    }
    let withheld = run.steps.iter().filter(|s| s.withheld.is_some()).count();
    if withheld > 0 {
        gap(
            "withheld",
            format!(
                "{withheld} step(s) were stored without their bodies (unparseable, or redaction failed)"
            ),
        );
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::model::{Record, RunEvent};
    use crate::record::store::LoadedRun;

    fn run_of(id: &str, started: &str, events: Vec<Value>) -> LoadedRun {
        let mut run = LoadedRun::default();
        let mut all = vec![
            serde_json::json!({"kind": "run_started", "data": {"id": id, "startedAt": started,
            "metadata": {"recorder": "bir", "tier": "standalone", "wrappedServers": ["s"], "cwd": "/",
            "birVersion": "0"}}}),
        ];
        all.extend(events);
        for (i, e) in all.into_iter().enumerate() {
            let record: Record =
                serde_json::from_value(serde_json::json!({"seq": i + 1, "event": e}))
                    .expect("record");
            match &record.event {
                RunEvent::RunStarted(h) => run.header = Some(h.clone()),
                RunEvent::ServerSnapshot(s) => run.snapshots.push(s.clone()),
                RunEvent::Step(s) => run.steps.push(s.clone()),
                RunEvent::RunFinished(f) => run.finish = Some(f.clone()),
                _ => {}
            }
            run.records.push(record);
        }
        run
    }

    fn call(i: u64, tool: &str, args: Value, ms: f64, error: bool) -> Vec<Value> {
        let base = serde_json::json!({"qualifiedName": format!("mcp__s__{tool}"), "serverName": "s",
            "toolName": tool, "startedAt": "2026-01-01T00:00:00.000Z", "requestId": i});
        let mut sel = base.clone();
        sel["id"] = format!("a{i}").into();
        sel["stepIndex"] = (i * 2).into();
        sel["type"] = "tool_selected".into();
        sel["input"] = args;
        let mut resp = base;
        resp["id"] = format!("b{i}").into();
        resp["stepIndex"] = (i * 2 + 1).into();
        resp["type"] = "tool_response".into();
        resp["durationMs"] = ms.into();
        resp["isError"] = error.into();
        resp["outcome"] = "answered".into();
        resp["output"] = serde_json::json!({"content": [{"type": "text", "text": if error {"boom"} else {"ok"}}], "isError": error});
        vec![
            serde_json::json!({"kind": "step", "data": sel}),
            serde_json::json!({"kind": "step", "data": resp}),
        ]
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn a_failed_call_names_its_error_and_lead_up() {
        let mut events = Vec::new();
        events.extend(call(1, "a", serde_json::json!({"x": 1}), 5.0, false));
        events.extend(call(2, "b", serde_json::json!({"x": 2}), 5.0, true));
        let run = run_of("run_f", "2026-01-01T00:00:00.000Z", events);
        let f = investigate(&run, &[]);
        assert_eq!(f.failures.len(), 1);
        assert_eq!(f.failures[0].tool, "mcp__s__b");
        assert_eq!(f.failures[0].error, "boom");
        assert_eq!(f.failures[0].lead_up.len(), 1);
        assert_eq!(f.failures[0].lead_up[0].tool, "mcp__s__a");
    }

    #[test]
    fn slowness_is_judged_against_the_median_of_earlier_runs() {
        let history: Vec<LoadedRun> = (0..4)
            .map(|i| {
                run_of(
                    &format!("run_h{i}"),
                    "2025-01-01T00:00:00.000Z",
                    call(1, "a", Value::Null, 100.0 + i as f64, false),
                )
            })
            .collect();
        let mut events = call(1, "a", Value::Null, 5000.0, false);
        events.extend(call(2, "a", Value::from(1), 150.0, false));
        let run = run_of("run_s", "2026-01-01T00:00:00.000Z", events);
        let f = investigate(&run, &history);
        assert_eq!(f.slow.len(), 1, "{:?}", f.slow);
        assert_eq!(
            f.slow[0].step, "1",
            "the reader's number, not the journal index 3"
        );
        assert_eq!(f.slow[0].usual_ms, 101.5);
        assert_eq!(f.slow[0].samples, 4);
        // Too few samples: no verdict.
        assert!(investigate(&run, &history[..2]).slow.is_empty());
    }

    #[test]
    fn the_same_call_again_and_again_is_a_loop() {
        let mut events = Vec::new();
        for i in 1..=4 {
            events.extend(call(i, "a", serde_json::json!({"q": "same"}), 1.0, i == 4));
        }
        events.extend(call(5, "a", serde_json::json!({"q": "other"}), 1.0, false));
        let run = run_of("run_l", "2026-01-01T00:00:00.000Z", events);
        let f = investigate(&run, &[]);
        assert_eq!(f.loops.len(), 1);
        assert_eq!(f.loops[0].calls, 4);
        assert_eq!(f.loops[0].in_a_row, 4);
        assert_eq!(f.loops[0].failed, 1);
    }
}
