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

pub(crate) use super::compare::CompareRule;
use crate::error::Error;

/// The largest scenario file read (a recording's results are capped per
/// step, so a real scenario is far smaller).
pub(crate) const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The schema this build reads and writes.
pub(crate) const SCHEMA: &str = "bir/scenario@1";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Scenario {
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
pub(crate) struct Source {
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
pub(crate) struct ServerSnap {
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
    /// The version the recorded client asked for (`protocol_version` is
    /// what the server answered it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_protocol_version: Option<String>,
    #[serde(default)]
    pub tools: Vec<Value>,
    #[serde(default)]
    pub tool_hashes: BTreeMap<String, String>,
    #[serde(default)]
    pub tools_digest: String,
}

impl ServerSnap {
    /// The recorded definition of `tool`, if the snapshot has it.
    pub(crate) fn tool(&self, tool: &str) -> Option<&Value> {
        self.tools
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(tool))
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Param {
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
pub(crate) struct Seal {
    pub at: String,
    pub mac: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Rules {
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
pub(crate) struct ScenarioStep {
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
pub(crate) struct Expect {
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
pub(crate) struct Binding {
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
    pub(crate) fn step(&self, id: &str) -> Option<&ScenarioStep> {
        self.steps.iter().find(|s| s.id == id)
    }

    pub(crate) fn step_mut(&mut self, id: &str) -> Result<&mut ScenarioStep, Error> {
        self.steps
            .iter_mut()
            .find(|s| s.id == id)
            .ok_or_else(|| Error::usage(format!("no step {id} in the scenario")))
    }

    /// Parses and validates a scenario.
    pub(crate) fn parse(text: &str) -> Result<Scenario, Error> {
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
    pub(crate) fn validate(&self) -> Result<(), Error> {
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
    pub(crate) fn to_text(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Reads a scenario file: a regular file only (a FIFO or a device is
    /// refused at once, never waited on: the open does not block and the
    /// type is checked on the descriptor opened), at most [`MAX_FILE_BYTES`].
    pub(crate) fn load(path: &Path) -> Result<Scenario, Error> {
        let text = read_capped(path)
            .map_err(|e| Error::failure(format!("cannot read {}", path.display())).because(e))?;
        Scenario::parse(&text).map_err(|e| {
            Error::usage(format!("{}: {e}", path.display()))
                .with_status(crate::error::ExitStatus::Usage)
        })
    }

    /// Writes the file atomically and privately: the text goes to a fresh
    /// temporary name beside it (created exclusively, never through a
    /// symlink, mode 0600), which is then renamed over `path`. A link
    /// planted at any name bir might use is never written through; a
    /// symlink at `path` itself is replaced, not followed.
    pub(crate) fn save(&self, path: &Path) -> Result<(), Error> {
        write_private(path, self.to_text().as_bytes())
            .map_err(|e| Error::failure(format!("cannot write {}", path.display())).because(e))
    }

    /// When the scenario was last known good: verified, else recorded.
    pub(crate) fn reference_time(&self) -> Option<&str> {
        let source = self.source.as_ref()?;
        Some(source.verified_at.as_deref().unwrap_or(&source.recorded_at))
    }
}

fn read_capped(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {} MiB", MAX_FILE_BYTES >> 20),
        ));
    }
    // SAFETY: `file` is open for as long as these calls run; only
    // O_NONBLOCK is cleared (for a regular file it changes nothing else).
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    if flags >= 0 {
        // SAFETY: as above.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) };
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {} MiB", MAX_FILE_BYTES >> 20),
        ));
    }
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"))
}

/// `bytes` into `path` through a fresh temporary name (see
/// [`Scenario::save`]).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let base = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "scenario".to_owned());
    for _ in 0..16 {
        let tmp = dir.join(format!(
            ".{base}.{}.{:016x}.tmp",
            std::process::id(),
            crate::record::model::random_u64()
        ));
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        let written = file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        return written;
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "no free temporary name beside it",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "bir-scenario-{tag}-{}-{:x}",
            std::process::id(),
            crate::record::model::random_u64()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    /// A FIFO is refused at once (no writer ever comes), a planted
    /// symlink at the old fixed temporary name is not written through, and
    /// the file is private.
    #[test]
    fn scenario_files_are_regular_private_and_written_without_following_links() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("files");
        let fifo = dir.join("f");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).expect("path");
        // SAFETY: a valid C string; mkfifo only creates a node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = Scenario::load(&fifo).expect_err("a FIFO").to_string();
        assert!(err.contains("not a regular file"), "{err}");

        let s = Scenario::parse(
            r#"{"schema": "bir/scenario@1", "steps": [{"id": "s1", "tool": "a"}]}"#,
        )
        .expect("valid");
        let target = dir.join("s.scenario.json");
        let victim = dir.join("victim");
        std::fs::write(&victim, "keep me").expect("victim");
        std::os::unix::fs::symlink(&victim, dir.join("s.scenario.json.tmp")).expect("link");
        std::os::unix::fs::symlink(&victim, dir.join(".s.scenario.json.tmp")).expect("link");
        s.save(&target).expect("saved");
        assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "keep me");
        assert_eq!(Scenario::load(&target).expect("load"), s);
        let mode = std::fs::metadata(&target)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // A symlink at the target is replaced, not followed.
        let linked = dir.join("l.scenario.json");
        std::os::unix::fs::symlink(&victim, &linked).expect("link");
        s.save(&linked).expect("saved");
        assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "keep me");
        // Nothing left behind but the files named here.
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .expect("dir")
            .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                ".s.scenario.json.tmp",
                "f",
                "l.scenario.json",
                "s.scenario.json",
                "s.scenario.json.tmp",
                "victim"
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

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
