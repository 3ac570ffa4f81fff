//! The scenario file (`*.scenario.json`, schema `bir/scenario@1`): an
//! editable, reviewable description of a recorded run that replay, verify
//! and mock work on. Runs stay immutable; everything a user relaxes, binds
//! or overrides lives here.
//!
//! Invariants:
//! * Everything in a scenario derived from a run is in recorded space:
//!   redacted and truncated exactly as the run stored it. No secret is ever
//!   written here; a redacted argument stays a placeholder until a
//!   parameter binds it (from the environment, an argument or a prompt).
//! * The file is pretty-printed with a stable key order (struct field
//!   order, then sorted object keys) and one step per block, so it diffs
//!   cleanly. Unknown schema versions are refused, not guessed at.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::compare::CompareRule;
use crate::error::Error;

/// The schema this build reads and writes.
pub const SCHEMA: &str = "bir/scenario@1";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Scenario {
    pub schema: String,
    /// Where it came from. Absent in a hand-written script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    /// Per server: what it answered to `initialize` and `tools/list` when
    /// the run was recorded.
    #[serde(default)]
    pub servers: BTreeMap<String, ServerSnap>,
    #[serde(default)]
    pub params: BTreeMap<String, Param>,
    #[serde(default)]
    pub rules: Rules,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// Lists embedded in the scenario. They count only with
    /// `--trust-scenario`: a shared file must not grant itself execution.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    pub steps: Vec<ScenarioStep>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    pub run: String,
    pub recorded_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_at: Option<String>,
    pub bir_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub tier: String,
    /// The recorded working directory: what replay answers `roots/list` with.
    #[serde(default)]
    pub cwd: String,
}

/// A server's snapshot, as recorded (redacted).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServerSnap {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_capabilities: Option<Value>,
    #[serde(default)]
    pub tools: Vec<Value>,
    #[serde(default)]
    pub tool_hashes: BTreeMap<String, String>,
    #[serde(default)]
    pub tools_digest: String,
}

impl ServerSnap {
    /// The recorded definition of `tool`, if the snapshot has it.
    pub fn tool(&self, tool: &str) -> Option<&Value> {
        self.tools
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(tool))
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Param {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// `env:VAR`, `arg` (only `--param`) or `prompt` (asked on a TTY).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The recorded value was a redaction placeholder: the parameter must
    /// be bound, a default cannot stand in for the secret.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
    /// Where `bir scenario param` bound this parameter, each sealed under
    /// this machine's key: only there may an `env:` source be read without
    /// `--trust-scenario` (see [`super::trust`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seals: Vec<Seal>,
}

/// A parameter's seal: the argument it replaced ([`super::trust::place`])
/// and the HMAC `bir scenario param` wrote for it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Seal {
    pub at: String,
    pub mac: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Rules {
    /// The mock's default match mode (`keyed`, `ordered`, `strict`, `tool`).
    #[serde(rename = "match", default = "default_match")]
    pub match_mode: String,
    /// Compare rules for every step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compare: Vec<CompareRule>,
}

fn default_match() -> String {
    "keyed".to_owned()
}

impl Default for Rules {
    fn default() -> Rules {
        Rules {
            match_mode: default_match(),
            compare: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioStep {
    pub id: String,
    #[serde(default)]
    pub index: u64,
    /// `mcp` or `builtin` (built-in steps are guided-only); a script may
    /// leave it out (`mcp`).
    #[serde(default = "mcp")]
    pub kind: String,
    /// A script may leave it out: then the step belongs to any server.
    #[serde(default)]
    pub server: String,
    pub tool: String,
    /// May hold `${param:x}`, `${env:X}` or `${step:s3:/pointer}`.
    #[serde(default)]
    pub args: Value,
    /// Argument pointers whose value may differ (matching ignores them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volatile_args: Vec<String>,
    #[serde(default)]
    pub expect: Expect,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<CompareRule>,
    /// Steps that ran concurrently share a group number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    /// `auto`, `confirm` or `skip`: overrides the gate (`auto` only with
    /// `--trust-scenario`; the others only ever make it stricter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<bool>,
    /// The recorded arguments held a redaction placeholder.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
    /// The recorded result was cut at the payload cap.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// Bindings derive proposed (and applied, unless `--no-bind`): shown
    /// for review by `bir scenario show`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bindings: Vec<Binding>,
    /// The recorded duration, for the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
}

/// What the step is expected to answer: the whole `CallToolResult` (the
/// mock serves it as recorded), or the JSON-RPC error.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Expect {
    #[serde(default)]
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// The whole result is volatile: only `isError` and the content block
    /// types are compared.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub volatile: bool,
}

/// A later argument equal to a value in an earlier result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    /// The argument's pointer.
    pub arg: String,
    /// `${step:sN:/pointer}`.
    pub from: String,
    /// The literal it replaced (recorded space).
    pub literal: String,
    /// Applied to `args`, or only proposed.
    pub applied: bool,
}

fn mcp() -> String {
    "mcp".to_owned()
}

impl Scenario {
    pub fn step(&self, id: &str) -> Option<&ScenarioStep> {
        self.steps.iter().find(|s| s.id == id)
    }

    pub fn step_mut(&mut self, id: &str) -> Result<&mut ScenarioStep, Error> {
        self.steps
            .iter_mut()
            .find(|s| s.id == id)
            .ok_or_else(|| Error::usage(format!("no step {id} in the scenario")))
    }

    /// Parses and validates a scenario.
    pub fn parse(text: &str) -> Result<Scenario, Error> {
        let raw: Value =
            serde_json::from_str(text).map_err(|e| Error::usage(format!("not JSON: {e}")))?;
        match raw.get("schema").and_then(Value::as_str) {
            Some(SCHEMA) => {}
            Some(other) => {
                return Err(Error::usage(format!(
                    "schema {other:?} is not one this bir reads ({SCHEMA})"
                )));
            }
            None => return Err(Error::usage(format!("no \"schema\": \"{SCHEMA}\""))),
        }
        let scenario: Scenario = serde_json::from_value(raw)
            .map_err(|e| Error::usage(format!("not a valid scenario: {e}")))?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// What the schema cannot say: unique step ids, steps naming a server
    /// the file knows (scripts may omit servers), known match modes and
    /// rule kinds, `${step:…}` references pointing backwards.
    pub fn validate(&self) -> Result<(), Error> {
        let mut seen = std::collections::HashSet::new();
        // Ids seen so far: a `${step:…}` must name one of them (an earlier
        // step), checked before the step's own id joins them.
        for step in &self.steps {
            if step.tool.is_empty() {
                return Err(Error::usage(format!("step {} has no tool", step.id)));
            }
            if let Some(s) = &step.safety
                && !matches!(s.as_str(), "auto" | "confirm" | "skip")
            {
                return Err(Error::usage(format!(
                    "step {}: safety {s:?} is not auto, confirm or skip",
                    step.id
                )));
            }
            for rule in &step.ignore {
                super::compare::check_rule(rule)
                    .map_err(|e| Error::usage(format!("step {}: {e}", step.id)))?;
            }
            for reference in super::template::step_refs(&step.args) {
                if !seen.contains(reference.as_str()) {
                    return Err(Error::usage(format!(
                        "step {} refers to {reference}, which is not an earlier step",
                        step.id
                    )));
                }
            }
            if !seen.insert(step.id.as_str()) {
                return Err(Error::usage(format!("step id {} appears twice", step.id)));
            }
        }
        if !matches!(
            self.rules.match_mode.as_str(),
            "keyed" | "ordered" | "strict" | "tool"
        ) {
            return Err(Error::usage(format!(
                "rules.match {:?} is not keyed, ordered, strict or tool",
                self.rules.match_mode
            )));
        }
        for rule in &self.rules.compare {
            super::compare::check_rule(rule).map_err(Error::usage)?;
        }
        Ok(())
    }

    /// The file's text: pretty-printed, stable order, ending in a newline.
    pub fn to_text(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    pub fn load(path: &Path) -> Result<Scenario, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::failure(format!("cannot read {}", path.display())).because(e))?;
        Scenario::parse(&text).map_err(|e| {
            Error::usage(format!("{}: {e}", path.display()))
                .with_status(crate::error::ExitStatus::Usage)
        })
    }

    /// Writes the file atomically (temp file, rename).
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, self.to_text())
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| Error::failure(format!("cannot write {}", path.display())).because(e))
    }

    /// When the scenario was last known good: verified, else recorded.
    pub fn reference_time(&self) -> Option<&str> {
        let source = self.source.as_ref()?;
        Some(source.verified_at.as_deref().unwrap_or(&source.recorded_at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_refuses_what_the_schema_cannot_say() {
        let ok = r#"{"schema": "bir/scenario@1", "steps": [{"id": "s1", "tool": "a"}, {"id": "s2", "tool": "b", "args": {"x": "${step:s1:/id}"}}]}"#;
        let s = Scenario::parse(ok).expect("valid");
        assert_eq!(s.steps[0].kind, "mcp");
        assert_eq!(Scenario::parse(&s.to_text()).expect("round trip"), s);
        for (bad, why) in [
            (
                r#"{"schema": "bir/scenario@2", "steps": []}"#,
                "bir/scenario@2",
            ),
            (r#"{"steps": []}"#, "schema"),
            (
                r#"{"schema": "bir/scenario@1", "steps": [{"id": "s1", "tool": "a"}, {"id": "s1", "tool": "b"}]}"#,
                "twice",
            ),
            (
                r#"{"schema": "bir/scenario@1", "steps": [{"id": "s1", "tool": "a", "args": {"x": "${step:s2:/id}"}}, {"id": "s2", "tool": "b"}]}"#,
                "earlier",
            ),
            (
                r#"{"schema": "bir/scenario@1", "steps": [{"id": "s1", "tool": "a", "safety": "yolo"}]}"#,
                "safety",
            ),
            (
                r#"{"schema": "bir/scenario@1", "rules": {"match": "fuzzy"}, "steps": []}"#,
                "fuzzy",
            ),
            (
                r#"{"schema": "bir/scenario@1", "steps": [{"id": "s1", "tool": "a", "ignore": [{"path": "/x", "kind": "pattern:("}]}]}"#,
                "pattern",
            ),
        ] {
            let err = Scenario::parse(bad).expect_err(bad).to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
