//! Guided replay in Claude Code (`bir guide`): the decision table the
//! daemon applies to a session's hooks while a guide is armed.
//!
//! A guide is a scenario turned into a plan ([`Guide`]: the steps as the
//! host names the tools, their expected arguments in recorded space, the
//! slots matching relaxes and the values a pin writes) plus its progress.
//! `bir guide start` builds it (`crate::cmd::guide`); the daemon keeps it in a
//! private file (`crate::daemon::armed_guides`) and, for every hook of the
//! session that claimed it, calls the functions here, which decide and
//! build the hook's answer — no I/O here, so the table is tested on plain
//! payloads.
//!
//! The table (docs/guide.md, with the departures these docs name):
//!
//! | hook | situation | answer |
//! |---|---|---|
//! | UserPromptSubmit | a guide armed for this project (or this session) | `additionalContext`: the outline of the steps left; the session claims the guide |
//! | PreToolUse | the call equals the next expected step (or a step of its group) in recorded space | nothing: the host's own permission flow decides |
//! | PreToolUse | same tool, different only in slots (volatile, parameter, binding) | a pin: `updatedInput` with the scenario's values and a decision — `allow` only where the call provably would not have prompted, `ask` otherwise |
//! | PreToolUse | the same with `--no-pin` | no decision, no `updatedInput`: one line of advice in `additionalContext` |
//! | PreToolUse | anything in `plan` mode | never a decision, a rewrite, progress or a handover (plan mode runs no write): advice for a would-be pin, else nothing |
//! | PreToolUse | an extra read-only call (Read, Grep, Glob, or a read-only MCP tool the scenario does not use), up to `max_extra` | nothing |
//! | PreToolUse | anything else | handover: one line of `additionalContext`, no decision; the guide disarms |
//! | PostToolUse(Failure) | a step's call failed where the recording did not (or the reverse) | nothing; the guide hands over (recorded) |
//! | PostToolBatch | a step's call never ran (refused at `ask`, or blocked) | nothing; the step is not done, the guide hands over |
//! | Stop | steps remain, nudges left, not `stop_hook_active`, not plan mode | `decision: block` with a reason naming the next step (once by default) |
//!
//! Invariants:
//! * **No silent approval.** `allow` is given only when the session runs in
//!   `bypassPermissions` mode or an allow rule bir read from the user's
//!   settings names the tool, with no `ask` or `deny` rule naming it, and
//!   never for a tool that declares it needs the user
//!   (`anthropic/requiresUserInteraction`). Rules given only on the
//!   command line (`--allowedTools`) are invisible to hooks: those calls
//!   get `ask`. An exact match gets no decision at all.
//! * No decision and no `updatedInput` in `plan` mode.
//! * A handover or a finished guide answers nothing more; a subagent's
//!   calls are left alone (v1 pins only the main agent's).
//! * Nothing secret is stored in a guide: expected arguments are in
//!   recorded space (redacted), and a parameter whose value the redactor
//!   would change is left to the model (a slot, never pinned).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::record::model::canonical;

/// The guide file's schema.
pub(crate) const SCHEMA: &str = "bir/guide@1";

/// The built-in tools Claude Code runs without asking inside the project
/// and that change nothing: tolerated between steps.
const READ_ONLY_BUILTINS: &[&str] = &["Read", "Grep", "Glob"];

/// Calls of steps remembered until they finish (a message may hold a few
/// concurrent ones; a host that never reports the end cannot grow it).
const MAX_IN_FLIGHT: usize = 64;

/// At most this much of a step's arguments goes into a line of context.
const ARGS_IN_TEXT: usize = 240;

/// An armed guide: the plan and how far the session got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Guide {
    pub schema: String,
    /// The scenario (a path or a run) as given to `bir guide start`.
    pub scenario: String,
    /// The project directory the guide was armed in.
    pub project: String,
    /// The session that follows it: given (`--session`) or claimed by the
    /// first prompt in the project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    pub armed_at: String,
    /// `--no-pin`: advise instead of pinning.
    #[serde(default)]
    pub no_pin: bool,
    /// `--trigger`: the scenario's trigger (a regex, or keywords that
    /// must all appear); only a prompt that matches it starts the guide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    pub max_extra: u32,
    pub max_nudges: u32,
    pub steps: Vec<GuideStep>,
    /// Host names of read-only MCP tools of the scenario's servers that
    /// no step uses: tolerated as extra calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only_tools: Vec<String>,
    #[serde(default)]
    pub progress: Progress,
}

/// One expected call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GuideStep {
    pub id: String,
    /// The tool as the host names it (`mcp__everything__echo`, `Bash`).
    pub tool: String,
    /// `server/tool` (or the built-in's name), for people.
    pub label: String,
    /// The expected arguments in recorded space (parameters resolved;
    /// a binding or a secret parameter stays a `${…}` template).
    pub args: Value,
    /// JSON Pointers matching ignores: volatile, parameter and binding
    /// slots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slots: Vec<String>,
    /// Pointer → the value a pin writes there (a subset of `slots`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pins: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    /// The recorded call failed (`isError` or a JSON-RPC error).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expect_error: bool,
    /// The tool declares it needs the user (`anthropic/requiresUserInteraction`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub needs_user: bool,
}

/// Where a guide stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Phase {
    /// Waiting for a prompt in its project.
    #[default]
    Armed,
    /// A session follows it.
    Active,
    /// The model went its own way; the guide answers nothing more.
    HandedOver,
    /// Every step was done.
    Done,
}

/// What happened so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Progress {
    pub phase: Phase,
    /// Steps done (followed, pinned or advised and run), in order.
    #[serde(default)]
    pub done: Vec<String>,
    #[serde(default)]
    pub followed: u32,
    #[serde(default)]
    pub pinned: u32,
    /// Pins that asked the user (`ask`).
    #[serde(default)]
    pub asked: u32,
    #[serde(default)]
    pub advised: u32,
    #[serde(default)]
    pub extras: u32,
    #[serde(default)]
    pub nudges: u32,
    /// Steps whose call has not finished yet: (tool_use_id, step id).
    /// A call that then fails (or succeeds where the recording failed),
    /// or never runs (the user refused at `ask`), ends the guide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_flight: Vec<(String, String)>,
    /// Pinned calls: (tool_use_id, step id), for the proxy's check, which
    /// may come after the host's PostToolUse.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned_calls: Vec<(String, String)>,
    /// The step the model left the procedure at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handed_over_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The user's permission rules bir could read (settings files), by kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Permissions {
    pub allow: Vec<String>,
    pub ask: Vec<String>,
    pub deny: Vec<String>,
}

impl Permissions {
    /// Whether a call of `tool` provably would not prompt: an allow rule
    /// names the whole tool (a rule with a specifier, `Bash(ls:*)`, cannot
    /// be checked against the pinned input here) and no ask or deny rule
    /// names it at all.
    pub(crate) fn allows_without_prompt(&self, tool: &str) -> bool {
        let whole = |rule: &String| !rule.contains('(') && rule_names(rule, tool);
        let any = |rule: &String| rule_names(rule, tool);
        self.allow.iter().any(whole) && !self.ask.iter().any(any) && !self.deny.iter().any(any)
    }
}

/// Whether permission rule `rule` is about `tool`: `Tool`, `Tool(spec)`,
/// `mcp__server` (the whole server) or `mcp__server__*`.
fn rule_names(rule: &str, tool: &str) -> bool {
    let name = rule.split('(').next().unwrap_or(rule).trim();
    if name == tool {
        return true;
    }
    if let Some(server) = name.strip_suffix("__*") {
        return server.starts_with("mcp__") && tool.starts_with(&format!("{server}__"));
    }
    name.starts_with("mcp__")
        && name.matches("__").count() == 1
        && tool.starts_with(&format!("{name}__"))
}

/// What the daemon does with one hook under a guide.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Verdict {
    /// The hook's stdout (JSON), if anything.
    pub answer: Option<String>,
    /// What to record in the session's run (a `bir.guide` session event).
    pub note: Option<Value>,
    /// A pin: the call's `tool_use_id` and the arguments the server should
    /// receive, so the run can tell whether they arrived.
    pub pin: Option<(String, Value)>,
    /// The guide changed: write it back.
    pub changed: bool,
}

impl Guide {
    /// Whether this guide's hooks come from `session` (claimed, or given
    /// at start).
    pub(crate) fn belongs_to(&self, session: &str) -> bool {
        self.session.as_deref() == Some(session)
    }

    /// The first step not done yet, and the others of its group.
    fn candidates(&self) -> Vec<usize> {
        let Some(first) = self
            .steps
            .iter()
            .position(|s| !self.progress.done.contains(&s.id))
        else {
            return Vec::new();
        };
        let mut out = vec![first];
        if let Some(group) = self.steps[first].group {
            out.extend(
                (first + 1..self.steps.len())
                    .take_while(|&i| self.steps[i].group == Some(group))
                    .filter(|&i| !self.progress.done.contains(&self.steps[i].id)),
            );
        }
        out
    }

    fn next_step(&self) -> Option<&GuideStep> {
        self.candidates().first().map(|&i| &self.steps[i])
    }

    fn remaining(&self) -> usize {
        self.steps.len().saturating_sub(self.progress.done.len())
    }

    fn mark_done(&mut self, step: &str) {
        self.progress.done.push(step.to_owned());
        if self.remaining() == 0 {
            self.progress.phase = Phase::Done;
        }
    }

    /// Step `step` starts with call `tool_use_id`: done, unless its call
    /// then fails or never runs (`on_post`, `on_batch`).
    fn start_step(&mut self, step: &str, tool_use_id: &str) {
        self.mark_done(step);
        if !tool_use_id.is_empty() {
            if self.progress.in_flight.len() >= MAX_IN_FLIGHT {
                self.progress.in_flight.remove(0);
            }
            self.progress
                .in_flight
                .push((tool_use_id.to_owned(), step.to_owned()));
        }
    }

    fn hand_over(&mut self, at: Option<String>, reason: String) {
        self.progress.in_flight.clear();
        self.progress.phase = Phase::HandedOver;
        self.progress.handed_over_at = at;
        self.progress.reason = Some(reason);
    }

    /// The outline the model gets with the prompt: the steps left.
    fn outline(&self) -> String {
        let mut text = format!(
            "bir guide: this task has a recorded procedure (scenario {}). \
             Make these tool calls in this order, with these arguments:",
            self.scenario
        );
        for (n, step) in self
            .steps
            .iter()
            .filter(|s| !self.progress.done.contains(&s.id))
            .enumerate()
        {
            text.push_str(&format!(
                "\n{}. [{}] {} {}",
                n + 1,
                step.id,
                step.tool,
                short(&step.args)
            ));
        }
        text
    }
}

/// `value` on one line, cut at [`ARGS_IN_TEXT`] characters.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(ARGS_IN_TEXT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn pre_answer(fields: Value) -> String {
    let mut out = json!({"hookEventName": "PreToolUse"});
    if let (Some(out), Value::Object(more)) = (out.as_object_mut(), fields) {
        out.extend(more);
    }
    json!({"hookSpecificOutput": out}).to_string()
}

/// `UserPromptSubmit`: an armed guide in this session's project starts;
/// an active one reminds the model of the steps left. `payload` is the
/// hook's.
pub(crate) fn on_prompt(guide: &mut Guide, payload: &Value) -> Verdict {
    let session = payload["session_id"].as_str().unwrap_or("");
    let prompt = payload["prompt"].as_str().unwrap_or("");
    if session.is_empty() || prompt.trim_start().starts_with("<task-notification>") {
        return Verdict::default();
    }
    let mut verdict = Verdict::default();
    if guide.progress.phase == Phase::Armed
        && guide
            .trigger
            .as_deref()
            .is_some_and(|t| !trigger_matches(t, prompt))
    {
        return verdict;
    }
    match (guide.progress.phase, &guide.session) {
        (Phase::Armed, None) => {
            guide.session = Some(session.to_owned());
        }
        (Phase::Armed | Phase::Active, Some(s)) if s == session => {}
        _ => return verdict,
    }
    if guide.progress.phase == Phase::Armed {
        guide.progress.phase = Phase::Active;
        verdict.note = Some(json!({"action": "started", "scenario": guide.scenario,
                                   "steps": guide.steps.len()}));
    }
    verdict.changed = true;
    verdict.answer = Some(
        json!({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                      "additionalContext": guide.outline()}})
        .to_string(),
    );
    verdict
}

/// Whether `prompt` matches a scenario's trigger: as a regex (ASCII
/// letters case-insensitive: the crate is built without Unicode case
/// tables), or, when it is not one, as keywords that must all appear.
pub(crate) fn trigger_matches(trigger: &str, prompt: &str) -> bool {
    let build = |unicode: bool| {
        regex::RegexBuilder::new(trigger)
            .unicode(unicode)
            .case_insensitive(!unicode)
            .size_limit(1 << 20)
            .build()
    };
    match build(false).or_else(|_| build(true)) {
        Ok(re) => re.is_match(prompt),
        Err(_) => {
            let prompt = prompt.to_lowercase();
            trigger
                .split_whitespace()
                .all(|word| prompt.contains(&word.to_lowercase()))
        }
    }
}

/// How a call relates to one expected step.
enum Fit {
    Exact,
    /// Same tool, differs only in slots; the pinned input and the pointers
    /// it changed (empty: the differences are all in slots no pin fills).
    Slots(Value, Vec<String>),
    /// Same tool, other arguments: the first differing pointers.
    Other(Vec<String>),
}

fn fit(step: &GuideStep, input: &Value, in_recorded_space: &Value) -> Fit {
    if canonical(in_recorded_space) == canonical(&step.args) {
        return Fit::Exact;
    }
    let relaxed = |v: &Value| {
        let mut copy = v.clone();
        for slot in &step.slots {
            remove_pointer(&mut copy, slot);
        }
        canonical(&copy)
    };
    if relaxed(in_recorded_space) != relaxed(&step.args) {
        let mut paths = Vec::new();
        differing(&step.args, in_recorded_space, "", &mut paths);
        paths.truncate(5);
        return Fit::Other(paths);
    }
    let mut pinned = input.clone();
    let mut changed = Vec::new();
    for (pointer, value) in &step.pins {
        if pinned.pointer(pointer) != Some(value)
            && set_pointer(&mut pinned, pointer, value.clone())
        {
            changed.push(pointer.clone());
        }
    }
    Fit::Slots(pinned, changed)
}

/// `PreToolUse` of the session following `guide`. `in_recorded_space`
/// turns a value into what the recorder would store (redacted, capped);
/// `permissions` are the rules read from the user's settings.
pub(crate) fn on_pre(
    guide: &mut Guide,
    payload: &Value,
    permissions: &Permissions,
    in_recorded_space: &dyn Fn(&Value) -> Value,
) -> Verdict {
    let session = payload["session_id"].as_str().unwrap_or("");
    if guide.progress.phase != Phase::Active
        || !guide.belongs_to(session)
        || payload["agent_id"].as_str().is_some_and(|a| !a.is_empty())
    {
        return Verdict::default();
    }
    let tool = payload["tool_name"].as_str().unwrap_or("");
    let input = payload.get("tool_input").cloned().unwrap_or(json!({}));
    let tool_use_id = payload["tool_use_id"].as_str().unwrap_or("").to_owned();
    let mode = payload["permission_mode"].as_str().unwrap_or("default");
    let live = in_recorded_space(&input);
    if mode == "plan" {
        return in_plan_mode(guide, tool, &input, &live, &tool_use_id);
    }
    let candidates = guide.candidates();
    let mut other = None;
    let mut best = None;
    for &i in &candidates {
        let step = &guide.steps[i];
        if step.tool != tool {
            continue;
        }
        match fit(step, &input, &live) {
            Fit::Exact => {
                best = Some((i, None));
                break;
            }
            Fit::Slots(pinned, changed) if best.is_none() => {
                best = Some((i, Some((pinned, changed))))
            }
            Fit::Slots(..) => {}
            Fit::Other(paths) => {
                other.get_or_insert((i, paths));
            }
        }
    }
    let note = |action: &str, step: Option<&GuideStep>| {
        json!({"action": action, "toolUseId": tool_use_id, "tool": tool,
               "step": step.map(|s| s.id.as_str())})
    };
    let mut verdict = Verdict {
        changed: true,
        ..Verdict::default()
    };
    match best {
        Some((i, ref fitted))
            if fitted
                .as_ref()
                .is_none_or(|(_, changed)| changed.is_empty()) =>
        {
            let step = guide.steps[i].clone();
            guide.progress.followed += 1;
            guide.start_step(&step.id, &tool_use_id);
            verdict.note = Some(note("followed", Some(&step)));
        }
        Some((i, Some((pinned, changed)))) => {
            let step = guide.steps[i].clone();
            let mut n = note("pinned", Some(&step));
            n["changed"] = json!(changed);
            if guide.no_pin {
                // Advice only: no decision, no rewrite.
                n["action"] = json!("advised");
                guide.progress.advised += 1;
                guide.start_step(&step.id, &tool_use_id);
                verdict.answer = Some(advice(&step));
            } else {
                let allow = !step.needs_user
                    && ((mode == "bypassPermissions"
                        && !permissions.ask.iter().any(|r| rule_names(r, tool))
                        && !permissions.deny.iter().any(|r| rule_names(r, tool)))
                        || permissions.allows_without_prompt(tool));
                let decision = if allow { "allow" } else { "ask" };
                n["decision"] = json!(decision);
                guide.progress.pinned += 1;
                if !allow {
                    guide.progress.asked += 1;
                }
                guide.start_step(&step.id, &tool_use_id);
                verdict.answer = Some(pre_answer(json!({
                    "permissionDecision": decision,
                    "permissionDecisionReason": format!(
                        "bir guide: step {} of the recorded procedure ({}); arguments set to the recorded values: {}",
                        step.id, step.label, changes(&step, &changed)),
                    "updatedInput": pinned,
                })));
                if guide.progress.pinned_calls.len() >= MAX_IN_FLIGHT {
                    guide.progress.pinned_calls.remove(0);
                }
                guide
                    .progress
                    .pinned_calls
                    .push((tool_use_id.clone(), step.id.clone()));
                verdict.pin = Some((tool_use_id.clone(), pinned));
            }
            verdict.note = Some(n);
        }
        _ => {
            let extra = READ_ONLY_BUILTINS.contains(&tool)
                || guide.read_only_tools.iter().any(|t| t == tool);
            let in_scenario = guide.steps.iter().any(|s| s.tool == tool);
            if extra && !in_scenario && guide.progress.extras < guide.max_extra {
                guide.progress.extras += 1;
                verdict.note = Some(note("extra", None));
                return verdict;
            }
            let next = guide.next_step().cloned();
            let why = match (&other, &next) {
                (Some((i, paths)), _) => format!(
                    "{} was called with other arguments (at {})",
                    guide.steps[*i].label,
                    if paths.is_empty() {
                        "/".to_owned()
                    } else {
                        paths.join(", ")
                    }
                ),
                (None, Some(next)) => format!("{tool} was called where {} was expected", next.tool),
                (None, None) => format!("{tool} was called after the last step"),
            };
            let at = next.as_ref().map(|s| s.id.clone());
            let mut n = note("handover", next.as_ref());
            n["reason"] = json!(why);
            verdict.answer = Some(pre_answer(json!({"additionalContext": format!(
                "bir guide: stopped following the recorded procedure at step {} ({why}); carry on as you see fit.",
                at.as_deref().unwrap_or("-")
            )})));
            guide.hand_over(at, why);
            verdict.note = Some(n);
        }
    }
    verdict
}

/// `pointer = value` for each pinned pointer (a pin's value is never a
/// secret: see `crate::cmd::guide`).
fn changes(step: &GuideStep, changed: &[String]) -> String {
    let parts: Vec<String> = changed
        .iter()
        .map(|p| match step.pins.get(p) {
            Some(v) => format!("{p} = {}", short(v)),
            None => p.clone(),
        })
        .collect();
    parts.join(", ")
}

/// One line of context: the recorded arguments of `step`.
fn advice(step: &GuideStep) -> String {
    pre_answer(json!({"additionalContext": format!(
        "bir guide: the recorded procedure made this call (step {}) with {}",
        step.id,
        short(&recorded_view(step))
    )}))
}

/// `PreToolUse` in plan mode: advice only. No decision and no rewrite;
/// no progress either (plan mode runs no write, so every step is still to
/// come) and no handover (the model explores before it plans). A call of
/// a step's tool that a pin would change gets that step's recorded
/// arguments as context.
fn in_plan_mode(
    guide: &mut Guide,
    tool: &str,
    input: &Value,
    live: &Value,
    tool_use_id: &str,
) -> Verdict {
    let remaining = guide
        .steps
        .iter()
        .filter(|s| s.tool == tool && !guide.progress.done.contains(&s.id));
    for step in remaining {
        let (action, answer) = match fit(step, input, live) {
            Fit::Exact => ("planned", None),
            Fit::Slots(_, changed) if changed.is_empty() => ("planned", None),
            Fit::Slots(..) => ("advised", Some(advice(step))),
            Fit::Other(_) => continue,
        };
        let note = json!({"action": action, "step": step.id, "tool": tool,
                          "toolUseId": tool_use_id, "permissionMode": "plan"});
        if action == "advised" {
            guide.progress.advised += 1;
        }
        return Verdict {
            answer,
            note: Some(note),
            pin: None,
            changed: true,
        };
    }
    Verdict::default()
}

/// A step's arguments with its pins written in: what a pin would send.
fn recorded_view(step: &GuideStep) -> Value {
    let mut args = step.args.clone();
    for (pointer, value) in &step.pins {
        set_pointer(&mut args, pointer, value.clone());
    }
    args
}

/// `Stop` of the main agent: one nudge while steps remain (never when
/// the host says a Stop hook already continued this turn, nor in plan
/// mode).
pub(crate) fn on_stop(guide: &mut Guide, payload: &Value) -> Verdict {
    let session = payload["session_id"].as_str().unwrap_or("");
    if guide.progress.phase != Phase::Active
        || !guide.belongs_to(session)
        || payload["stop_hook_active"].as_bool() == Some(true)
        // Plan mode ends a turn by presenting the plan: not a step to skip.
        || payload["permission_mode"].as_str() == Some("plan")
        || guide.progress.nudges >= guide.max_nudges
    {
        return Verdict::default();
    }
    let Some(next) = guide.next_step().cloned() else {
        return Verdict::default();
    };
    guide.progress.nudges += 1;
    let reason = format!(
        "bir guide: the recorded procedure is not finished ({} of {} steps left). \
         Next: step {}, {} with {}",
        guide.remaining(),
        guide.steps.len(),
        next.id,
        next.tool,
        short(&recorded_view(&next))
    );
    Verdict {
        answer: Some(json!({"decision": "block", "reason": reason}).to_string()),
        note: Some(json!({"action": "nudged", "step": next.id})),
        pin: None,
        changed: true,
    }
}

/// `PostToolUse` / `PostToolUseFailure` of the session following `guide`:
/// a step's call that failed where the recorded one did not (or the other
/// way round) ends the guide — what comes next was recorded after a
/// different outcome.
pub(crate) fn on_post(guide: &mut Guide, payload: &Value) -> Verdict {
    let Some(step) = finished_call(guide, payload) else {
        return Verdict::default();
    };
    let failed = payload["hook_event_name"] == "PostToolUseFailure";
    let expected = guide
        .steps
        .iter()
        .find(|s| s.id == step)
        .is_some_and(|s| s.expect_error);
    let mut verdict = Verdict {
        changed: true,
        ..Verdict::default()
    };
    if failed != expected {
        let reason = if failed {
            let error = payload["error"]
                .as_str()
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or("");
            format!(
                "step {step} failed where the recorded call succeeded: {}",
                short(&json!(error))
            )
        } else {
            format!("step {step} succeeded where the recorded call failed")
        };
        verdict.note = Some(json!({"action": "handover", "step": step, "reason": reason,
                                   "toolUseId": payload["tool_use_id"]}));
        guide.hand_over(Some(step), reason);
    }
    verdict
}

/// `PostToolBatch`: the calls of one model message. A step's call that
/// had no `PostToolUse` did not run — refused at a permission prompt (an
/// `ask` pin's, or the host's own) or blocked: the step is not done, and
/// the guide ends there (the user said no; bir does not push the model to
/// try again).
pub(crate) fn on_batch(guide: &mut Guide, payload: &Value) -> Verdict {
    let mut verdict = Verdict::default();
    for call in payload["tool_calls"].as_array().into_iter().flatten() {
        let mut one = payload.clone();
        one["tool_use_id"] = call["tool_use_id"].clone();
        let Some(step) = finished_call(guide, &one) else {
            continue;
        };
        guide.progress.done.retain(|d| d != &step);
        let reason = format!("step {step} did not run (refused or blocked)");
        verdict.note = Some(json!({"action": "handover", "step": step, "reason": reason,
                                   "toolUseId": call["tool_use_id"]}));
        verdict.changed = true;
        guide.hand_over(Some(step), reason);
    }
    verdict
}

/// The step whose call `payload` reports the end of (taken off the calls
/// in flight), if the guide is following the payload's session.
fn finished_call(guide: &mut Guide, payload: &Value) -> Option<String> {
    let session = payload["session_id"].as_str().unwrap_or("");
    if !matches!(guide.progress.phase, Phase::Active | Phase::Done) || !guide.belongs_to(session) {
        return None;
    }
    let id = payload["tool_use_id"].as_str()?;
    let pos = guide.progress.in_flight.iter().position(|(t, _)| t == id)?;
    Some(guide.progress.in_flight.remove(pos).1)
}

/// The proxy's report shows the server did not get the pinned arguments
/// of call `tool_use_id` (`session/guide_events.rs`): the guide hands over, since
/// what runs is no longer the recorded procedure.
pub(crate) fn pin_not_applied(guide: &mut Guide, tool_use_id: &str) -> Verdict {
    if !matches!(guide.progress.phase, Phase::Active | Phase::Done) {
        return Verdict::default();
    }
    let reason =
        format!("pin-not-applied: the server did not get the pinned arguments of {tool_use_id}");
    // The step the pinned call was for: it did not run as recorded, so it
    // is not done.
    let at = guide
        .progress
        .pinned_calls
        .iter()
        .find(|(id, _)| id == tool_use_id)
        .map(|(_, step)| step.clone());
    if let Some(step) = &at {
        guide.progress.done.retain(|d| d != step);
    }
    let at = at.or_else(|| guide.progress.done.last().cloned());
    guide.hand_over(at.clone(), reason.clone());
    Verdict {
        answer: None,
        note: Some(
            json!({"action": "handover", "step": at, "toolUseId": tool_use_id,
                          "reason": reason}),
        ),
        pin: None,
        changed: true,
    }
}

/// Removes the member or element `pointer` names (an array element
/// becomes `null`, so later indices keep their meaning).
pub(crate) fn remove_pointer(value: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = unescape(last);
    match value.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.remove(&last);
        }
        Some(Value::Array(items)) => {
            if let Some(item) = last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                *item = Value::Null;
            }
        }
        _ => {}
    }
}

/// Writes `new` at `pointer` (its parent must exist); whether it did.
fn set_pointer(value: &mut Value, pointer: &str, new: Value) -> bool {
    if pointer.is_empty() {
        *value = new;
        return true;
    }
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return false;
    };
    let last = unescape(last);
    match value.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(last, new);
            true
        }
        Some(Value::Array(items)) => {
            match last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(item) => {
                    *item = new;
                    true
                }
                None => false,
            }
        }
        _ => false,
    }
}

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The pointers where `a` and `b` differ (leaves, or where types differ).
fn differing(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let here = format!("{at}/{}", escape(key));
                match (x.get(key), y.get(key)) {
                    (Some(p), Some(q)) => differing(p, q, &here, out),
                    _ => out.push(here),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differing(p, q, &format!("{at}/{i}"), out);
            }
        }
        _ if canonical(a) != canonical(b) => out.push(at.to_owned()),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
