//! Guided replay's plan: a scenario turned into the steps a guide follows
//! (`bir guide start` arms it; `bound::guidance` decides with it in the
//! daemon).
//!
//! For each step the plan holds:
//! * the tool as Claude Code names it (`mcp__<server>__<tool>`, or the
//!   built-in's name);
//! * the expected arguments in recorded space: parameters bound
//!   (`--param`, `from: env:X`, the default — [`super::runner::bind_params`]),
//!   bindings to earlier results (`${step:…}`) and secret parameters left as
//!   templates;
//! * the slots matching relaxes (volatile paths, parameters, bindings) and
//!   the values a pin writes (bound parameters, recorded volatile values —
//!   never a placeholder, never a secret: a value the redactor would change
//!   stays the model's).
//!
//! A step reads the environment only as `bir verify` would let it
//! ([`EnvTrust`], `replay::trust`): a guide writes its pinned values into
//! the agent's tool calls.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::Value;

use super::safety;
use super::scenario::Scenario;
use super::template::{self, Lookup};
use crate::bound::guidance::GuideStep;
use crate::error::Error;

/// Arguments of built-in tools that are the model's free text (shown to
/// the user), relaxed in every built-in step.
const BUILTIN_FREE_TEXT: &[(&str, &str)] = &[
    ("Bash", "/description"),
    ("Agent", "/description"),
    ("Task", "/description"),
];

/// Template values for the plan: bound parameters and, where the step
/// may read it ([`EnvTrust`]), the environment; never an earlier step's
/// result (that is the live model's to use).
struct Bound<'a> {
    params: &'a HashMap<String, Value>,
    env: bool,
}

impl Lookup for Bound<'_> {
    fn param(&self, name: &str) -> Option<Value> {
        self.params.get(name).cloned()
    }
    fn env(&self, name: &str) -> Option<String> {
        if self.env {
            std::env::var(name).ok()
        } else {
            None
        }
    }
    fn step_result(&self, _step: &str) -> Option<&Value> {
        None
    }
}

/// What a guide's steps may read from the environment: the check `bir
/// verify` applies (`replay::trust`). A guide writes its pinned values
/// into the agent's tool calls, so a hand-written scenario's `${env:X}`
/// would otherwise hand a variable to whatever tool the step names.
pub(crate) struct EnvTrust<'a> {
    /// Parameters bound with `--param`: they read nothing.
    pub given: &'a HashMap<String, String>,
    /// `--trust-scenario`.
    pub trusted: bool,
    /// `$BIR_HOME`, whose key verifies `bir scenario param`'s seals.
    pub home: Option<&'a Path>,
}

/// The guide's steps for `scenario` (see the module's docs). A step that
/// would read the environment without the user's trust (see
/// [`EnvTrust`]) reads none of it: those slots are left to the model, with
/// a note saying why; `env_read` gets the variables the other steps read.
pub(crate) fn plan(
    scenario: &Scenario,
    params: &HashMap<String, Value>,
    env: &EnvTrust<'_>,
    recorded: &dyn Fn(&Value) -> Value,
    notes: &mut Vec<String>,
    env_read: &mut Vec<String>,
) -> Result<Vec<GuideStep>, Error> {
    let mut steps = Vec::new();
    // The parameters a step that may not read the environment sees: none
    // bound from it (unless given on the command line).
    let without_env: HashMap<String, Value> = params
        .iter()
        .filter(|(name, _)| {
            env.given.contains_key(*name)
                || scenario
                    .params
                    .get(*name)
                    .and_then(|p| p.from.as_deref())
                    .is_none_or(|from| !from.starts_with("env:"))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for s in &scenario.steps {
        let use_of_env = super::trust::env_use(scenario, s, env.given, env.trusted, env.home);
        let lookup = match &use_of_env.refused {
            None => {
                env_read.extend(use_of_env.vars.iter().cloned());
                Bound { params, env: true }
            }
            Some(why) => {
                notes.push(format!(
                    "step {}: {}; left to the model",
                    s.id,
                    why.strip_prefix("not sent: ").unwrap_or(why)
                ));
                Bound {
                    params: &without_env,
                    env: false,
                }
            }
        };
        let tool = if s.kind == "builtin" {
            s.tool.clone()
        } else if s.server.is_empty() {
            return Err(Error::usage(format!(
                "step {} names no server: Claude Code's name for its tool is unknown",
                s.id
            )));
        } else {
            format!("mcp__{}__{}", crate::bound::spelled(&s.server), s.tool)
        };
        let mut args = s.args.clone();
        let mut slots = Vec::new();
        let mut pins = BTreeMap::new();
        let mut templated = Vec::new();
        template::for_each_leaf(&s.args, &mut |pointer, _, leaf| {
            if leaf.as_str().is_some_and(|t| t.contains("${")) {
                templated.push((pointer.to_owned(), leaf.clone()));
            }
        });
        for (pointer, leaf) in templated {
            slots.push(pointer.clone());
            let Ok(value) = template::resolve(&leaf, &lookup) else {
                continue; // a binding, or an unbound parameter: the model's
            };
            if recorded(&value) != value {
                notes.push(format!(
                    "step {} {pointer}: the value holds a secret; left to the model (bir stores no secret)",
                    s.id
                ));
                continue;
            }
            if let Some(slot) = args.pointer_mut(&pointer) {
                *slot = value.clone();
            }
            pins.insert(pointer, value);
        }
        if s.kind == "builtin" {
            // Words the model writes for people, never part of the procedure.
            for (tool, pointer) in BUILTIN_FREE_TEXT {
                if s.tool == *tool && s.args.pointer(pointer).is_some() {
                    slots.push((*pointer).to_owned());
                }
            }
        }
        for pointer in &s.volatile_args {
            slots.push(pointer.clone());
            if let Some(v) = args.pointer(pointer)
                && !template::has_placeholder(v)
                && !v.to_string().contains("${")
            {
                pins.insert(pointer.clone(), v.clone());
            }
        }
        let needs_user = scenario
            .servers
            .get(&s.server)
            .and_then(|snap| snap.tool(&s.tool))
            .is_some_and(|t| t["_meta"]["anthropic/requiresUserInteraction"] == Value::Bool(true));
        let label = if s.kind == "builtin" {
            s.tool.clone()
        } else {
            format!("{}/{}", s.server, s.tool)
        };
        steps.push(GuideStep {
            id: s.id.clone(),
            tool,
            label,
            args,
            slots,
            pins,
            group: s.group,
            expect_error: s.expect.is_error || s.expect.error.is_some(),
            needs_user,
        });
    }
    env_read.sort();
    env_read.dedup();
    Ok(steps)
}

/// Read-only MCP tools of the scenario's servers (by their recorded
/// annotations, a write verb demoting as in the gate) that no step uses:
/// extra calls of them do not end the guide. Untrusted hints are fine
/// here: a tolerated call still goes through the user's permissions.
pub(crate) fn read_only_tools(scenario: &Scenario, steps: &[GuideStep]) -> Vec<String> {
    let mut out = Vec::new();
    for (server, snap) in &scenario.servers {
        for t in &snap.tools {
            let Some(name) = t["name"].as_str() else {
                continue;
            };
            let host = format!("mcp__{}__{}", crate::bound::spelled(server), name);
            if safety::class_of(t.get("annotations")) == safety::Class::Auto
                && !safety::has_write_verb(name)
                && !steps.iter().any(|s| s.tool == host)
            {
                out.push(host);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::runner;
    use serde_json::json;

    #[test]
    fn a_scenario_becomes_a_plan_with_slots_and_pins_and_no_secret() {
        let scenario = Scenario::parse(
            &json!({
                "schema": "bir/scenario@1",
                "params": {"n": {"default": 2}, "tok": {"from": "env:BIR_GUIDE_TEST_UNSET"}},
                "servers": {"my.srv": {"tools": [
                    {"name": "get", "annotations": {"readOnlyHint": true}},
                    {"name": "delete_all", "annotations": {"readOnlyHint": true}},
                    {"name": "ask", "_meta": {"anthropic/requiresUserInteraction": true}},
                    {"name": "sum", "annotations": {"readOnlyHint": true}}],
                    "toolsDigest": "x"}},
                "steps": [
                    {"id": "s1", "server": "my.srv", "tool": "sum",
                     "args": {"a": "${param:n}", "b": 3, "at": "2026-01-01", "who": "${param:tok}"},
                     "volatileArgs": ["/at"]},
                    {"id": "s2", "server": "my.srv", "tool": "ask",
                     "args": {"id": "${step:s1:/structuredContent/id}"}},
                    {"id": "s3", "kind": "builtin", "tool": "Bash",
                     "args": {"command": "ls", "description": "List files"}}
                ]
            })
            .to_string(),
        )
        .expect("a scenario");
        let params = runner::bind_params(&scenario, &HashMap::new());
        let recorded = |v: &Value| v.clone();
        let mut notes = Vec::new();
        let steps = plan(
            &scenario,
            &params,
            &untrusted(&HashMap::new()),
            &recorded,
            &mut notes,
            &mut Vec::new(),
        )
        .expect("a plan");
        let s1 = &steps[0];
        assert_eq!(s1.tool, "mcp__my_srv__sum");
        assert_eq!(s1.label, "my.srv/sum");
        assert_eq!(s1.args["a"], json!(2));
        assert_eq!(s1.args["who"], json!("${param:tok}"));
        let mut slots = s1.slots.clone();
        slots.sort();
        assert_eq!(slots, vec!["/a", "/at", "/who"]);
        assert_eq!(
            s1.pins,
            BTreeMap::from([
                ("/a".to_owned(), json!(2)),
                ("/at".to_owned(), json!("2026-01-01"))
            ])
        );
        assert!(!s1.needs_user);
        assert!(steps[1].needs_user);
        // A binding is a slot the model fills: never pinned.
        assert_eq!(steps[1].slots, vec!["/id"]);
        assert!(steps[1].pins.is_empty());
        assert_eq!(steps[2].tool, "Bash");
        assert_eq!(steps[2].slots, vec!["/description"]);
        assert!(steps[2].pins.is_empty());
        // Read-only tools no step uses; a write verb demotes `delete_all`.
        assert_eq!(read_only_tools(&scenario, &steps), vec!["mcp__my_srv__get"]);
        // A parameter the redactor would change is never pinned.
        let secret = |v: &Value| {
            if v == &json!(2) {
                json!("[REDACTED:x]")
            } else {
                v.clone()
            }
        };
        let steps = plan(
            &scenario,
            &params,
            &untrusted(&HashMap::new()),
            &secret,
            &mut notes,
            &mut Vec::new(),
        )
        .expect("a plan");
        assert!(!steps[0].pins.contains_key("/a"));
        assert_eq!(steps[0].args["a"], json!("${param:n}"));
        assert!(notes.iter().any(|n| n.contains("holds a secret")));
    }

    fn untrusted(given: &HashMap<String, String>) -> EnvTrust<'_> {
        EnvTrust {
            given,
            trusted: false,
            home: None,
        }
    }

    /// A hand-written scenario's `${env:X}` (or parameter `from: env:X`)
    /// is never written into a guide, hence never into an agent's call,
    /// unless the user trusts the scenario, as under `bir verify`.
    #[test]
    fn a_guide_reads_the_environment_only_when_trusted() {
        let scenario = Scenario::parse(
            &json!({
                "schema": "bir/scenario@1",
                "params": {"p": {"from": "env:PATH"}},
                "steps": [
                    {"id": "s1", "server": "srv", "tool": "fetch",
                     "args": {"url": "https://x/?k=${env:PATH}", "n": "${param:p}"}},
                    {"id": "s2", "server": "srv", "tool": "fetch",
                     "args": {"url": "https://x/"}}
                ]
            })
            .to_string(),
        )
        .expect("a scenario");
        let path = std::env::var("PATH").unwrap_or_default();
        assert!(!path.is_empty(), "the test needs PATH set");
        let recorded = |v: &Value| v.clone();
        let given = HashMap::new();
        let params = runner::bind_params(&scenario, &given);

        let (mut notes, mut read) = (Vec::new(), Vec::new());
        let steps = plan(
            &scenario,
            &params,
            &untrusted(&given),
            &recorded,
            &mut notes,
            &mut read,
        )
        .expect("a plan");
        let text = serde_json::to_string(&steps).expect("json");
        assert!(!text.contains(&path), "the variable was read: {text}");
        assert_eq!(steps[0].args["url"], json!("https://x/?k=${env:PATH}"));
        assert!(steps[0].pins.is_empty(), "{:?}", steps[0].pins);
        assert!(read.is_empty(), "{read:?}");
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("step s1:") && n.contains("--trust-scenario")),
            "{notes:?}"
        );

        let trusted = EnvTrust {
            trusted: true,
            ..untrusted(&given)
        };
        let (mut notes, mut read) = (Vec::new(), Vec::new());
        let steps = plan(
            &scenario, &params, &trusted, &recorded, &mut notes, &mut read,
        )
        .expect("a plan");
        assert_eq!(steps[0].pins["/url"], json!(format!("https://x/?k={path}")));
        assert_eq!(steps[0].pins["/n"], json!(path));
        assert_eq!(read, ["PATH"]);
        assert!(notes.is_empty(), "{notes:?}");

        // A value given with --param reads nothing and needs no trust.
        let given = HashMap::from([("p".to_owned(), "v".to_owned())]);
        let params = runner::bind_params(&scenario, &given);
        let mut s = scenario.clone();
        s.steps[0].args = json!({"n": "${param:p}"});
        let (mut notes, mut read) = (Vec::new(), Vec::new());
        let steps = plan(
            &s,
            &params,
            &untrusted(&given),
            &recorded,
            &mut notes,
            &mut read,
        )
        .expect("a plan");
        assert_eq!(steps[0].pins["/n"], json!("v"));
        assert!(read.is_empty() && notes.is_empty(), "{read:?} {notes:?}");
    }
}
