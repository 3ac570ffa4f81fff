//! `bir scenario derive`: a run (immutable) → a scenario (editable).
//!
//! Calls are paired from the run's `tool_selected`/`tool_response` steps
//! (by `toolUseId` when the host gave one, else by server and request id,
//! first in first out). Bindings are proposed where a later argument
//! equals a value that first appeared in an earlier *result* (not in an
//! earlier argument: a value the caller already knew is a literal, not
//! fresh state), when it is at least 4 characters long or sits under an
//! id-like key. The proposals are heuristics: derive applies them (unless
//! `--no-bind`) and lists each in the step's `bindings` for review.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::compare::expand_json_text;
use super::scenario::{Binding, Expect, Rules, SCHEMA, Scenario, ScenarioStep, ServerSnap, Source};
use super::template::{for_each_leaf, has_placeholder};
use crate::record::calls::reader_calls;
use crate::record::model::StepKind;
use crate::record::store::LoadedRun;

/// Shortest value bound by equality alone (shorter ones must sit under an
/// id-like key): `42` or `ok` recurring is a coincidence more often than
/// a reference.
const MIN_BINDING_CHARS: usize = 4;

pub(crate) struct DeriveOptions {
    /// Apply proposed bindings to the arguments (default), or only list them.
    pub apply_bindings: bool,
}

pub(crate) fn derive(run: &LoadedRun, options: &DeriveOptions) -> Scenario {
    let header = run.header.as_ref();
    let source = Source {
        run: run.id(),
        recorded_at: header.map(|h| h.started_at.clone()).unwrap_or_default(),
        verified_at: None,
        bir_version: env!("CARGO_PKG_VERSION").to_owned(),
        host: header
            .and_then(|h| h.metadata.host.as_ref())
            .map(|h| format!("{} {}", h.app, h.version)),
        tier: header.map(|h| h.metadata.tier.clone()).unwrap_or_default(),
        cwd: header.map(|h| h.metadata.cwd.clone()).unwrap_or_default(),
    };
    let mut servers = BTreeMap::new();
    for snap in &run.snapshots {
        let plain = |v: &Option<crate::record::model::Redacted<Value>>| {
            v.as_ref().map(|r| r.clone().into_inner())
        };
        servers.insert(
            snap.server_name.clone(),
            ServerSnap {
                protocol_version: snap
                    .protocol_version
                    .as_ref()
                    .map(|p| p.as_str().to_owned()),
                server_info: plain(&snap.server_info),
                capabilities: plain(&snap.capabilities),
                instructions: plain(&snap.instructions),
                client_capabilities: plain(&snap.client_capabilities),
                client_protocol_version: snap
                    .client_protocol_version
                    .as_ref()
                    .map(|p| p.as_str().to_owned()),
                tools: snap.tools.iter().map(|t| t.clone().into_inner()).collect(),
                tool_hashes: snap
                    .tool_hashes
                    .iter()
                    .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
                    .collect(),
                tools_digest: snap.tools_digest.clone(),
            },
        );
    }
    let mut steps = pair_calls(run, &servers);
    propose_bindings(&mut steps, options.apply_bindings);
    Scenario {
        schema: SCHEMA.to_owned(),
        source: Some(source),
        servers,
        params: BTreeMap::new(),
        rules: Rules::default(),
        trigger: None,
        allow: Vec::new(),
        deny: Vec::new(),
        steps,
    }
}

/// The run's calls as every reader pairs and orders them
/// (`record::calls`), as scenario steps.
fn pair_calls(run: &LoadedRun, servers: &BTreeMap<String, ServerSnap>) -> Vec<ScenarioStep> {
    let mut out: Vec<ScenarioStep> = Vec::new();
    // (step id, last stepIndex) of calls whose answer came after a later
    // call began: they ran concurrently and share a group.
    let mut open: Vec<(usize, u64)> = Vec::new();
    let mut next_group = 1u32;
    for call in reader_calls(run) {
        let Some(first) = call.any() else { continue };
        let i = out.len();
        let kind = match first.kind {
            Some(StepKind::Builtin) | Some(StepKind::Agent) => "builtin",
            _ => "mcp",
        };
        let args = call
            .selected
            .and_then(|s| s.input.as_ref())
            .map(|v| v.clone().into_inner())
            .unwrap_or(Value::Object(Default::default()));
        let tool = first.tool_name.as_str().to_owned();
        let annotations = servers
            .get(&first.server_name)
            .and_then(|s| s.tool(&tool))
            .and_then(|t| t.get("annotations"))
            .cloned();
        let start = call.selected.map_or(call.order, |s| s.step_index);
        let end = call.response.map_or(u64::MAX, |r| r.step_index);
        open.retain(|&(_, until)| until > start);
        let mut group = None;
        if let Some(&(other, _)) = open.first() {
            let g = *out[other].group.get_or_insert_with(|| {
                next_group += 1;
                next_group - 1
            });
            group = Some(g);
        }
        open.push((i, end));
        let mut step = ScenarioStep {
            id: format!("s{}", i + 1),
            index: (i + 1) as u64,
            kind: kind.to_owned(),
            server: first.server_name.clone(),
            tool,
            redacted: has_placeholder(&args) || call.selected.is_some_and(|s| s.redactions > 0),
            args,
            annotations,
            group,
            ..ScenarioStep::default()
        };
        if let Some(response) = call.response {
            let result = response.output.as_ref().map(|v| v.clone().into_inner());
            step.truncated = result.as_ref().is_some_and(|r| {
                r.get("truncated") == Some(&Value::Bool(true)) && r.get("originalBytes").is_some()
            });
            step.expect = Expect {
                is_error: response.is_error,
                result,
                error: response.error.as_ref().map(|v| v.clone().into_inner()),
                volatile: false,
            };
            step.duration_ms = response.duration_ms;
        }
        out.push(step);
    }
    out
}

fn id_like(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    lower == "id"
        || lower.ends_with("_id")
        || lower.ends_with("-id")
        || key.ends_with("Id")
        || key.ends_with("ID")
        || lower.ends_with("number")
        || lower == "key"
}

/// Every string or number leaf of `value`: (pointer, key, value).
fn leaves(value: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for_each_leaf(value, &mut |pointer, key, leaf| {
        if matches!(leaf, Value::String(_) | Value::Number(_)) {
            out.push((pointer.to_owned(), key.to_owned(), leaf.clone()));
        }
    });
    out
}

fn bindable(key: &str, value: &Value) -> bool {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    !text.contains("[REDACTED")
        && !text.contains("${")
        && (text.chars().count() >= MIN_BINDING_CHARS || id_like(key))
}

fn propose_bindings(steps: &mut [ScenarioStep], apply: bool) {
    // Canonical value → (step id, pointer) of its latest appearance in a result.
    let mut produced: HashMap<String, (String, String)> = HashMap::new();
    let mut known_inputs: HashSet<String> = HashSet::new();
    for step in steps.iter_mut() {
        let arg_leaves = leaves(&step.args);
        for (pointer, key, value) in &arg_leaves {
            let canon = value.to_string();
            if !bindable(key, value) || known_inputs.contains(&canon) {
                continue;
            }
            let Some((from_step, from_pointer)) = produced.get(&canon) else {
                continue;
            };
            let template = format!("${{step:{from_step}:{from_pointer}}}");
            if apply && let Some(slot) = step.args.pointer_mut(pointer) {
                *slot = Value::String(template.clone());
            }
            step.bindings.push(Binding {
                arg: pointer.clone(),
                from: template,
                literal: match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                },
                applied: apply,
            });
        }
        for (_, _, value) in arg_leaves {
            known_inputs.insert(value.to_string());
        }
        if let Some(result) = &step.expect.result {
            for (pointer, _, value) in leaves(&expand_json_text(result)) {
                if pointer.starts_with("/_meta") {
                    continue;
                }
                // The first pointer within one result wins (structured
                // content before a text rendering of it would be nicer,
                // but order of keys is the file's).
                produced
                    .entry(value.to_string())
                    .and_modify(|e| {
                        if e.0 != step.id {
                            *e = (step.id.clone(), pointer.clone());
                        }
                    })
                    .or_insert_with(|| (step.id.clone(), pointer.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::model::{Record, RunEvent, Step, StepType};
    use serde_json::json;

    fn call(run: &mut LoadedRun, tool: &str, rid: u64, args: Value, result: Value) {
        let mut sel = Step::new(
            run.steps.len() as u64 + 1,
            StepType::ToolSelected,
            "t".into(),
        );
        sel.server_name = "fx".into();
        sel.tool_name = tool.into();
        sel.qualified_name = format!("mcp__fx__{tool}").as_str().into();
        sel.request_id = Some(json!(rid).into());
        sel.input = Some(args.into());
        let mut resp = Step::new(
            run.steps.len() as u64 + 2,
            StepType::ToolResponse,
            "t".into(),
        );
        resp.server_name = "fx".into();
        resp.tool_name = tool.into();
        resp.qualified_name = format!("mcp__fx__{tool}").as_str().into();
        resp.request_id = Some(json!(rid).into());
        resp.output = Some(result.into());
        for step in [sel, resp] {
            run.records.push(Record {
                seq: run.records.len() as u64 + 1,
                event: RunEvent::Step(step.clone()),
            });
            run.steps.push(step);
        }
    }

    fn text(t: &str) -> Value {
        json!({"content": [{"type": "text", "text": t}], "isError": false})
    }

    /// "Create a ticket, then comment on ticket 42": the comment's ticket
    /// number came from the create's result, so it is bound to it.
    #[test]
    fn a_later_argument_equal_to_an_earlier_result_is_bound() {
        let mut run = LoadedRun::default();
        call(
            &mut run,
            "create_issue",
            1,
            json!({"title": "Bug in parser"}),
            json!({"structuredContent": {"number": 42, "url": "https://x/issues/42"}, "content": []}),
        );
        call(
            &mut run,
            "comment_on_issue",
            2,
            json!({"issue_number": 42, "body": "Bug in parser"}),
            text("ok"),
        );
        call(
            &mut run,
            "get_item",
            3,
            json!({"id": "item-0001"}),
            text("{\"id\": \"item-0001\"}"),
        );
        call(
            &mut run,
            "get_item",
            4,
            json!({"id": "item-0001"}),
            text("{\"id\": \"item-0001\"}"),
        );
        let s = derive(
            &run,
            &DeriveOptions {
                apply_bindings: true,
            },
        );
        assert_eq!(s.steps.len(), 4);
        assert_eq!(
            s.steps[1].args["issue_number"],
            "${step:s1:/structuredContent/number}"
        );
        // The body repeats the first call's *argument*: a literal, not state.
        assert_eq!(s.steps[1].args["body"], "Bug in parser");
        // An id first seen as an argument is not bound to a later echo.
        assert_eq!(s.steps[3].args["id"], "item-0001");
        assert_eq!(s.steps[1].bindings.len(), 1);
        let listed = derive(
            &run,
            &DeriveOptions {
                apply_bindings: false,
            },
        );
        assert_eq!(listed.steps[1].args["issue_number"], 42);
        assert!(!listed.steps[1].bindings[0].applied);
        // Serialise → parse is the identity.
        let back = Scenario::parse(&s.to_text()).expect("parses");
        assert_eq!(back, s);
    }

    #[test]
    fn ids_from_json_text_are_bound_and_placeholders_mark_the_step() {
        let mut run = LoadedRun::default();
        call(
            &mut run,
            "create_item",
            1,
            json!({"name": "w"}),
            text("{\n \"id\": \"item-0007\"\n}"),
        );
        call(
            &mut run,
            "get_item",
            2,
            json!({"id": "item-0007"}),
            text("{}"),
        );
        call(
            &mut run,
            "whoami",
            3,
            json!({"token": "[REDACTED:key]"}),
            text("hello"),
        );
        let s = derive(
            &run,
            &DeriveOptions {
                apply_bindings: true,
            },
        );
        assert_eq!(s.steps[1].args["id"], "${step:s1:/content/0/text/id}");
        assert!(s.steps[2].redacted && !s.steps[1].redacted);
        assert!(s.steps[2].bindings.is_empty());
    }
}
