//! What the page shows, decided here: a run turned into one JSON document
//! the page's script only lays out.
//!
//! The shape (`format` 1), every field optional unless said:
//!
//! * `run`: `id`, `tier`, `state` (`finished`/`open`/`interrupted`),
//!   `live` (the page should refresh), host, model, times (`startedAt`,
//!   `finishedAt`, `durationMs`), `calls`, `errors`, `toolMs`, `lossy` with
//!   `lossyWhy` (sentences a reader understands), `reason`, `cwd`, …;
//! * `servers`: name, title, version, tool count, tools digest;
//! * `turns` (bound runs): the prompts, each with its `tokens` and
//!   `models` where the host reported them; `answers`: the model's final
//!   words;
//! * `steps`: one per tool call, `n` = 1, 2, 3 in reading order (see
//!   `record::calls`), labelled as `bir runs show` numbers them (`label`:
//!   `3`, and `3.1` for the first call of the subagent step 3 started),
//!   with `parent` (the label of the Agent step it ran under) and `depth`; `kind` (`builtin`/`mcp`/`agent`/`tool`),
//!   `status` (`ok`/`error`/`cancelled`/… /`running`/`unanswered`), `at`
//!   and `ms` (start, as milliseconds after the timeline's origin) and
//!   `endMs` (where its bar ends), payloads as recorded (`args`, `result`,
//!   `error`);
//! * `events` (bound runs): session events placed on the timeline;
//! * `span`: the timeline's length in milliseconds.
//!
//! The payloads are the journal's: already redacted and capped by the
//! recorder. Nothing here escapes for HTML; `page.rs` embeds the document
//! and the script renders it as text.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::record::calls::{Call, reader_calls};
use crate::record::layout;
use crate::record::model::{Step, StepKind, StepType, TokenUsage};
use crate::record::prices::Prices;
use crate::record::store::LoadedRun;

/// The page's document for `run`. `live` asks the page to refresh itself
/// (the run is being followed); `generated_at` is when it was written.
pub(crate) fn build(run: &LoadedRun, live: bool, generated_at: &str) -> Value {
    let all = reader_calls(run);
    let calls = in_reading_order(&all);
    let origin = origin_of(run, &calls);
    let mut steps: Vec<Value> = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        let parent = call.parent.map(|p| all[p].number.as_str());
        steps.push(step_view(call, i + 1, parent, origin));
    }
    // Each call's parent, as a position in `calls`.
    let position: HashMap<&str, usize> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| (c.number.as_str(), i))
        .collect();
    let parents: Vec<Option<usize>> = calls
        .iter()
        .map(|c| {
            c.parent
                .and_then(|p| position.get(all[p].number.as_str()).copied())
        })
        .collect();
    // An Agent step that never said how long it took lasts as long as the
    // steps of its subagent do.
    for i in (0..calls.len()).rev() {
        if let Some(p) = parents[i] {
            let end = steps[i]["endMs"].as_f64().unwrap_or(0.0);
            let bar = steps[p]["endMs"].as_f64().unwrap_or(0.0);
            if steps[p]["durationMs"].is_null() && end > bar {
                steps[p]["endMs"] = json!(end);
            }
        }
    }
    let finished = run
        .finish
        .as_ref()
        .and_then(|f| millis(&f.finished_at))
        .map(|t| (t - origin) as f64);
    let last_step = steps
        .iter()
        .filter_map(|s| s["endMs"].as_f64())
        .fold(0.0, f64::max);
    let events: Vec<Value> = run
        .events
        .iter()
        .map(|e| {
            json!({"name": e.name, "at": e.at, "ms": offset(&e.at, origin),
                   "agentId": e.agent_id, "data": e.data})
        })
        .collect();
    let last_event = events
        .iter()
        .filter_map(|e| e["ms"].as_f64())
        .fold(0.0, f64::max);
    let span = finished.unwrap_or(0.0).max(last_step).max(last_event);
    json!({
        "format": 1,
        "generatedAt": generated_at,
        "birVersion": env!("CARGO_PKG_VERSION"),
        "run": run_view(run, live),
        "servers": servers_view(run),
        "turns": run.turns.iter().map(|t| json!({"turn": t.turn, "at": t.at, "prompt": t.prompt,
            "origin": t.origin, "ms": offset(&t.at, origin),
            "tokens": turn_tokens(run, t.turn), "models": turn_models(run, t.turn)}))
            .collect::<Vec<_>>(),
        "answers": answers_view(run),
        "steps": steps,
        "events": events,
        "span": span,
    })
}

/// `costUsd` on the run and on each turn whose tokens all have a price
/// the user set (`record::prices`); nowhere else.
pub(crate) fn add_costs(doc: &mut serde_json::Value, run: &LoadedRun, prices: &Prices) {
    let Some(metrics) = run.finish.as_ref().map(|f| &f.metrics) else {
        return;
    };
    if let Some(cost) = prices.cost(&metrics.turn_usage) {
        doc["run"]["costUsd"] = cost.into();
    }
    if let Some(turns) = doc["turns"].as_array_mut() {
        for t in turns {
            let Some(n) = t["turn"].as_u64() else {
                continue;
            };
            if let Some(cost) =
                prices.cost(metrics.turn_usage.iter().filter(|r| u64::from(r.turn) == n))
            {
                t["costUsd"] = cost.into();
            }
        }
    }
}

/// Turn `turn`'s tokens, where the host reported them.
fn turn_tokens(run: &LoadedRun, turn: u32) -> Option<TokenUsage> {
    run.finish.as_ref()?.metrics.turn_tokens(turn)
}

/// The models that answered in turn `turn` (empty: not known).
fn turn_models(run: &LoadedRun, turn: u32) -> Vec<&str> {
    run.finish
        .as_ref()
        .map(|f| f.metrics.turn_models(turn))
        .unwrap_or_default()
}

/// The timeline's zero: the run's start, or its first call's when that
/// came earlier (a bound run's header can be written after its first
/// call), in Unix milliseconds.
fn origin_of(run: &LoadedRun, calls: &[Call]) -> i64 {
    let header = run.header.as_ref().and_then(|h| millis(&h.started_at));
    let first = calls
        .iter()
        .filter_map(|c| c.any().and_then(|s| millis(&s.started_at)))
        .min();
    match (header, first) {
        (Some(h), Some(f)) => h.min(f),
        (h, f) => h.or(f).unwrap_or(0),
    }
}

fn run_view(run: &LoadedRun, live: bool) -> Value {
    let mut v = Map::new();
    v.insert("id".into(), json!(run.id()));
    let state = if run.finish.is_some() {
        "finished"
    } else if run.interrupted() {
        "interrupted"
    } else {
        "open"
    };
    v.insert("state".into(), json!(state));
    v.insert("live".into(), json!(live));
    let responses = run
        .steps
        .iter()
        .filter(|s| s.step_type == StepType::ToolResponse);
    let errors = responses.filter(|s| s.is_error).count();
    let calls = run
        .steps
        .iter()
        .filter(|s| s.step_type == StepType::ToolSelected)
        .count();
    v.insert("calls".into(), json!(calls));
    v.insert("errors".into(), json!(errors));
    if let Some(h) = &run.header {
        let m = &h.metadata;
        v.insert("startedAt".into(), json!(h.started_at));
        v.insert("tier".into(), json!(m.tier));
        v.insert("cwd".into(), json!(m.cwd));
        v.insert("recordedBy".into(), json!(m.bir_version));
        if let Some(host) = &m.host {
            v.insert("host".into(), json!(host.app));
            v.insert("hostVersion".into(), json!(host.version));
        }
        if let Some(p) = &m.protocol_version {
            v.insert("protocol".into(), json!(p));
        }
        if let Some(s) = &m.session_id {
            v.insert("sessionId".into(), json!(s));
        }
        if let Some(input) = &h.input {
            v.insert("prompt".into(), json!(input));
        }
    }
    let model = run
        .header
        .as_ref()
        .and_then(|h| h.metadata.model.as_ref())
        .or(run.finish.as_ref().and_then(|f| f.model.as_ref()));
    if let Some(model) = model {
        v.insert("model".into(), json!(model));
    }
    if let Some(f) = &run.finish {
        v.insert("finishedAt".into(), json!(f.finished_at));
        v.insert("toolMs".into(), json!(f.metrics.total_tool_ms));
        if let Some(u) = &f.metrics.usage {
            v.insert("tokens".into(), json!(u));
        }
        if let Some(r) = &f.reason {
            v.insert("reason".into(), json!(r));
        }
        let start = run.header.as_ref().and_then(|h| millis(&h.started_at));
        if let (Some(s), Some(e)) = (start, millis(&f.finished_at)) {
            v.insert("durationMs".into(), json!(e - s));
        }
    }
    let why = lossy_why(run);
    v.insert("lossy".into(), json!(!why.is_empty()));
    v.insert("lossyWhy".into(), json!(why));
    Value::Object(v)
}

/// Why a reader should not take the run as complete, in plain sentences.
fn lossy_why(run: &LoadedRun) -> Vec<String> {
    let mut why = Vec::new();
    let dropped = run.finish.as_ref().map_or(0, |f| f.dropped);
    if dropped > 0 {
        why.push(format!(
            "{dropped} observation(s) were dropped before they reached the recorder (its queue was full, the relay never waits for it), so calls may be missing or incomplete."
        ));
    } else if run.finish.as_ref().is_some_and(|f| f.lossy)
        || run.header.as_ref().is_some_and(|h| h.metadata.lossy)
    {
        why.push("The recorder marked this run lossy: some of what happened was not recorded, so calls may be missing or incomplete.".into());
    }
    if let Some(note) = run.header.as_ref().and_then(|h| h.metadata.note.as_ref()) {
        why.push(format!("Recorder's note: {note}"));
    }
    if run.torn_bytes > 0 {
        why.push(format!(
            "The journal ended with {} byte(s) of an interrupted write, which were ignored.",
            run.torn_bytes
        ));
    }
    if run.unknown_records > 0 {
        why.push(format!(
            "{} record(s) of the journal were not understood (written by a newer bir?) and are not shown.",
            run.unknown_records
        ));
    }
    why
}

fn servers_view(run: &LoadedRun) -> Vec<Value> {
    let mut servers: Vec<Value> = run
        .snapshots
        .iter()
        .map(|s| {
            let info = s.server_info.as_deref();
            json!({
                "name": s.server_name,
                "title": info.and_then(|i| i["title"].as_str().or(i["name"].as_str())),
                "version": info.and_then(|i| i["version"].as_str()),
                "protocol": s.protocol_version,
                "tools": s.tools.len(),
                "toolsDigest": s.tools_digest,
            })
        })
        .collect();
    // Servers named by the header (or a bound run's steps) without a
    // snapshot are still listed.
    let mut named: Vec<String> = run
        .header
        .as_ref()
        .map(|h| h.metadata.wrapped_servers.clone())
        .unwrap_or_default();
    for s in &run.steps {
        if !s.server_name.is_empty() && !named.contains(&s.server_name) {
            named.push(s.server_name.clone());
        }
    }
    for name in named {
        if !servers.iter().any(|s| s["name"] == name.as_str()) {
            servers.push(json!({"name": name}));
        }
    }
    servers
}

/// The model's final words: the run's answers as `record::layout::answers`
/// orders them (by turn, then step index; an amended one once; a
/// subagent's left out), each with the turn it answers; else the run's
/// output when no step carried it.
fn answers_view(run: &LoadedRun) -> Vec<Value> {
    let answers = layout::answers(run);
    let mut out: Vec<Value> = answers
        .iter()
        .map(|a| {
            let text = match a.step.output.as_deref() {
                Some(Value::String(s)) => json!(s),
                Some(other) => other.clone(),
                None => Value::Null,
            };
            json!({"turn": a.turn, "at": a.step.started_at, "text": text})
        })
        .collect();
    if out.is_empty()
        && let Some(output) = run.finish.as_ref().and_then(|f| f.output.as_ref())
    {
        out.push(json!({"text": output}));
    }
    out
}

/// The calls depth first, as a reader goes through them: each top-level
/// call (by its number), then the calls of its subagent right after it.
/// The numbers (`3`, `3.1`, `3.1.2`) say that order: compared part by
/// part, as numbers.
fn in_reading_order<'a>(calls: &[Call<'a>]) -> Vec<Call<'a>> {
    let parts = |c: &Call| -> Vec<u64> {
        c.number
            .split('.')
            .map(|p| p.parse().unwrap_or(u64::MAX))
            .collect()
    };
    let mut ordered = calls.to_vec();
    ordered.sort_by_cached_key(parts);
    ordered
}

/// One call as the page shows it: the `number`th in reading order, under
/// the call numbered `parent`. A field both records carry is taken from
/// the selection, else the response.
fn step_view(call: &Call, number: usize, parent: Option<&str>, origin: i64) -> Value {
    let Some(s) = call.any() else {
        return Value::Null;
    };
    let label = call.number.as_str();
    let (selected, response) = (call.selected, call.response);
    let start = offset(&s.started_at, origin).unwrap_or(0.0);
    let duration = response.and_then(|r| r.duration_ms);
    let kind = match s.kind {
        Some(StepKind::Builtin) => "builtin",
        Some(StepKind::Agent) => "agent",
        Some(StepKind::Mcp) => "mcp",
        None if !s.server_name.is_empty() => "mcp",
        None => "tool",
    };
    let name = if kind == "mcp" && !s.server_name.is_empty() {
        format!("{} › {}", s.server_name, s.tool_name)
    } else {
        s.qualified_name.to_string()
    };
    let either = |f: fn(&Step) -> Option<Value>| {
        selected
            .and_then(f)
            .or_else(|| response.and_then(f))
            .unwrap_or(Value::Null)
    };
    let both = [selected, response];
    let records = || both.iter().flatten();
    json!({
        "n": number,
        "label": label,
        "depth": label.matches('.').count(),
        "parent": parent,
        "kind": kind,
        "name": name,
        "server": s.server_name,
        "tool": s.tool_name,
        "qualified": s.qualified_name,
        "at": s.started_at,
        "ms": start,
        "durationMs": duration,
        "endMs": start + duration.unwrap_or(0.0),
        "status": status_of(call),
        "isError": response.is_some_and(|r| r.is_error),
        "args": either(|x| x.input.as_deref().cloned()),
        "result": response.and_then(|r| r.output.as_deref()),
        "error": response.and_then(|r| r.error.as_deref()),
        "permission": response.and_then(|r| r.permission.as_deref()),
        "correlation": response.and_then(|r| r.correlation.as_deref()),
        "context": either(|x| x.context.as_deref().map(|c| json!(c))),
        "outcome": either(|x| x.outcome.as_ref().map(|o| json!(o))),
        "turn": either(|x| x.turn.map(|t| json!(t))),
        "agentType": either(|x| x.agent_type.as_deref().map(|a| json!(a))),
        "agentId": either(|x| x.agent_id.as_deref().map(|a| json!(a))),
        "toolUseId": either(|x| x.tool_use_id.as_deref().map(|a| json!(a))),
        "requestId": either(|x| x.request_id.as_deref().cloned()),
        "argsDigest": either(|x| x.args_digest.as_ref().map(|d| json!(d))),
        "withheld": records().find_map(|x| x.withheld.as_deref()),
        "repaired": records().filter_map(|x| x.repaired.as_deref()).collect::<Vec<_>>().join(","),
        "redactions": records().map(|x| x.redactions).sum::<u32>(),
        "records": [selected.map(|x| &x.id), response.map(|x| &x.id)],
    })
}

/// How the call ended, as one word the page colours and filters by.
fn status_of(call: &Call) -> &'static str {
    let Some(r) = call.response else {
        return "unanswered";
    };
    match r.outcome.as_deref() {
        Some("cancelled") => "cancelled",
        Some("too_large") => "too_large",
        Some("upstream_gone") => "upstream_gone",
        Some("session_ended") => "session_ended",
        Some("denied") => "denied",
        _ if r.is_error || r.error.is_some() => "error",
        _ => "ok",
    }
}

/// Milliseconds after `origin` of an RFC 3339 time (`None` if it does not
/// parse).
fn offset(at: &str, origin: i64) -> Option<f64> {
    millis(at).map(|t| (t - origin) as f64)
}

/// An RFC 3339 time in Unix milliseconds.
fn millis(at: &str) -> Option<i64> {
    let seconds = crate::time::parse_rfc3339(at)?;
    let fraction = at
        .get(19..)
        .and_then(|rest| rest.strip_prefix('.'))
        .map(|f| {
            let digits: String = f.chars().take_while(char::is_ascii_digit).take(3).collect();
            format!("{digits:0<3}").parse::<i64>().unwrap_or(0)
        })
        .unwrap_or(0);
    Some(seconds * 1000 + fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_to_millis() {
        assert_eq!(millis("1970-01-01T00:00:01.5Z"), Some(1500));
        assert_eq!(millis("1970-01-01T00:00:01.023456Z"), Some(1023));
        assert_eq!(millis("1970-01-01T00:00:02Z"), Some(2000));
        assert_eq!(millis("1970-01-01T01:00:00.000+01:00"), Some(0));
        assert_eq!(millis("soon"), None);
    }

    #[test]
    fn costs_go_on_the_run_and_on_each_turn_whose_tokens_all_have_a_price() {
        use crate::record::model::{RunFinish, RunMetrics, TurnUsage};
        let usage = |turn: u32, model: &str| TurnUsage {
            turn,
            model: Some(model.into()),
            usage: TokenUsage {
                input: 1_000_000,
                output: 0,
                cache_read: 0,
                cache_write: 0,
            },
        };
        let run = LoadedRun {
            finish: Some(RunFinish {
                metrics: RunMetrics {
                    turn_usage: vec![usage(1, "priced"), usage(2, "unpriced")],
                    ..RunMetrics::default()
                },
                ..RunFinish::default()
            }),
            ..LoadedRun::default()
        };
        let prices = Prices::parse(r#"{"priced": {"input": 2, "output": 8}}"#).expect("prices");
        let mut doc = json!({"run": {}, "turns": [{"turn": 1}, {"turn": 2}]});
        add_costs(&mut doc, &run, &prices);
        assert_eq!(doc["turns"][0]["costUsd"], json!(2.0));
        assert!(doc["turns"][1].get("costUsd").is_none(), "no partial cost");
        assert!(
            doc["run"].get("costUsd").is_none(),
            "the run has an unpriced turn"
        );

        let mut doc = json!({"run": {}, "turns": [{"turn": 1}]});
        add_costs(&mut doc, &run, &Prices::default());
        assert_eq!(
            doc,
            json!({"run": {}, "turns": [{"turn": 1}]}),
            "no prices, no cost"
        );
    }

    #[test]
    fn the_pages_answers_are_the_runs_in_runs_shows_order() {
        let run = crate::record::layout::tests::answers_told_out_of_order();
        let doc = build(&run, false, "2026-12-01T00:00:00Z");
        assert_eq!(
            doc["answers"],
            json!([
                {"turn": 1, "at": "", "text": "turn 1, recovered"},
                {"turn": 2, "at": "", "text": "turn 2, amended"},
            ])
        );
    }
}
