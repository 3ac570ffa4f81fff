//! Host built-in steps (Claude Code's `Read`, `Edit`, `Bash`, …) and how a
//! scenario names its steps for a reader.
//!
//! A built-in belongs to the host, not to an MCP server: it has no server
//! name and no MCP annotations, so the gate's spec defaults (no hints:
//! destructive, open-world) would call `Read` a destructive external tool.
//! Built-ins are classed here by what they do instead. Replay never runs
//! them (they are `guided-only`); the class says what following them means.

use super::safety::{self, Class};
use super::scenario::ScenarioStep;

/// What a host built-in does, and the class that gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Nature {
    /// In words, for a reader: "reads files".
    pub does: &'static str,
    pub class: Class,
    /// It reaches outside the machine.
    pub external: bool,
}

const fn nature(does: &'static str, class: Class, external: bool) -> Nature {
    Nature {
        does,
        class,
        external,
    }
}

/// Claude Code's built-ins by name (other hosts' built-ins are unknown,
/// and classed as any unannotated tool).
const BUILTINS: &[(&str, Nature)] = &[
    ("Read", nature("reads files", Class::Auto, false)),
    ("Grep", nature("searches files", Class::Auto, false)),
    ("Glob", nature("lists files", Class::Auto, false)),
    ("LS", nature("lists files", Class::Auto, false)),
    (
        "NotebookRead",
        nature("reads a notebook", Class::Auto, false),
    ),
    ("WebFetch", nature("reads a web page", Class::Auto, true)),
    ("WebSearch", nature("searches the web", Class::Auto, true)),
    (
        "TodoWrite",
        nature("updates the host's to-do list", Class::Auto, false),
    ),
    (
        "TodoRead",
        nature("reads the host's to-do list", Class::Auto, false),
    ),
    (
        "ExitPlanMode",
        nature("leaves plan mode", Class::Auto, false),
    ),
    (
        "AskUserQuestion",
        nature("asks the user", Class::Auto, false),
    ),
    (
        "BashOutput",
        nature("reads a shell's output", Class::Auto, false),
    ),
    ("Edit", nature("edits files", Class::Confirm, false)),
    ("MultiEdit", nature("edits files", Class::Confirm, false)),
    (
        "NotebookEdit",
        nature("edits a notebook", Class::Confirm, false),
    ),
    (
        "Write",
        nature("writes (overwrites) files", Class::Destructive, false),
    ),
    ("KillShell", nature("stops a shell", Class::Confirm, false)),
    ("KillBash", nature("stops a shell", Class::Confirm, false)),
    ("Task", nature("starts a subagent", Class::Confirm, false)),
    ("Agent", nature("starts a subagent", Class::Confirm, false)),
    ("Skill", nature("runs a skill", Class::Confirm, false)),
    (
        "SlashCommand",
        nature("runs a slash command", Class::Confirm, false),
    ),
    (
        "Bash",
        nature("runs shell commands", Class::Destructive, true),
    ),
];

/// What the built-in `tool` does (an unknown one: anything, destructive
/// and external, as an unannotated tool).
pub(crate) fn nature_of(tool: &str) -> Nature {
    BUILTINS.iter().find(|(name, _)| *name == tool).map_or(
        nature(
            "a host built-in bir does not know",
            Class::Destructive,
            true,
        ),
        |(_, n)| *n,
    )
}

/// The host's name as a scenario's source gives it (`claude-code 2.1.3`
/// → `claude-code`), or `host`.
pub(crate) fn host_name(host: Option<&str>) -> &str {
    host.and_then(|h| h.split_whitespace().next())
        .filter(|h| !h.is_empty())
        .unwrap_or("host")
}

/// One step's heading in `bir scenario show`: number, id, who runs it
/// (`server/tool` for MCP, `host/Tool` for a built-in), its class, its
/// group and flags. Not escaped: the caller escapes for a terminal.
pub(crate) fn heading(step: &ScenarioStep, host: Option<&str>) -> String {
    let mut flags: Vec<String> = Vec::new();
    let (owner, class) = if step.kind == "mcp" {
        let verdict = safety::judge(&safety::Facts {
            tool: &step.tool,
            recorded: step.annotations.as_ref(),
            live: None,
            trusted_server: true,
            trust_none: false,
            override_: step.safety.as_deref(),
            trust_scenario: false,
        });
        if verdict.external {
            flags.push("external".into());
        }
        (step.server.clone(), verdict.class)
    } else {
        let n = nature_of(&step.tool);
        flags.push(format!("host built-in: {}", n.does));
        if n.external {
            flags.push("external".into());
        }
        (host_name(host).to_owned(), n.class)
    };
    if step.redacted {
        flags.push("redacted".into());
    }
    if step.truncated {
        flags.push("truncated".into());
    }
    if step.expect.is_error || step.expect.error.is_some() {
        flags.push("error".into());
    }
    if step.pin == Some(true) {
        flags.push("pinned".into());
    }
    format!(
        "{:>4} {:<5} {}/{} [{}]{}{}",
        step.index,
        step.id,
        owner,
        step.tool,
        class.name(),
        step.group.map_or(String::new(), |g| format!(" group {g}")),
        if flags.is_empty() {
            String::new()
        } else {
            format!(" ({})", flags.join(", "))
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(kind: &str, server: &str, tool: &str) -> ScenarioStep {
        ScenarioStep {
            id: "s1".into(),
            index: 1,
            kind: kind.into(),
            server: server.into(),
            tool: tool.into(),
            ..ScenarioStep::default()
        }
    }

    #[test]
    fn built_ins_are_the_hosts_and_classed_by_what_they_do() {
        let host = Some("claude-code 2.1.332");
        assert_eq!(
            heading(&step("builtin", "", "Read"), host),
            "   1 s1    claude-code/Read [auto] (host built-in: reads files)"
        );
        let bash = heading(&step("builtin", "", "Bash"), None);
        assert_eq!(
            bash,
            "   1 s1    host/Bash [destructive] (host built-in: runs shell commands, external)"
        );
        assert!(heading(&step("builtin", "", "Edit"), host).contains("[confirm]"));
        // An MCP step is still judged by its annotations.
        let mut m = step("mcp", "fs", "read_file");
        m.annotations = Some(serde_json::json!({"readOnlyHint": true, "openWorldHint": false}));
        assert_eq!(heading(&m, host), "   1 s1    fs/read_file [auto]");
        assert_eq!(
            heading(&step("mcp", "fs", "x"), host),
            "   1 s1    fs/x [destructive] (external)"
        );
    }
}
