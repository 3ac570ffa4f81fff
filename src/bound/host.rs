//! The coding agents whose hooks bir reads, and what the engine needs to
//! know of each outside its adapter (`hosts`): its names, where its
//! session id is, which transcript it writes, which tool starts a subagent.

use serde_json::Value;

/// A coding agent whose hooks bir understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) enum Host {
    #[default]
    ClaudeCode,
    Codex,
    Gemini,
    Copilot,
    Cursor,
    VsCode,
}

/// How a host writes its session transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum TranscriptFormat {
    /// Claude Code's JSONL (`message.content[]` blocks).
    #[default]
    ClaudeCode,
    /// Codex's rollout JSONL (`{timestamp, type, payload}`).
    CodexRollout,
    /// Gemini CLI's chats JSONL (messages rewritten under their `id`).
    GeminiChat,
}

impl Host {
    pub(crate) const ALL: [Host; 6] = [
        Host::ClaudeCode,
        Host::Codex,
        Host::Gemini,
        Host::Copilot,
        Host::Cursor,
        Host::VsCode,
    ];

    /// The name `--host` and `?host=` use.
    pub(crate) fn flag(self) -> &'static str {
        match self {
            Host::ClaudeCode => "claude",
            Host::Codex => "codex",
            Host::Gemini => "gemini",
            Host::Copilot => "copilot",
            Host::Cursor => "cursor",
            Host::VsCode => "vscode",
        }
    }

    pub(crate) fn parse(word: &str) -> Option<Host> {
        Host::ALL
            .into_iter()
            .find(|h| h.flag() == word)
            .or(match word {
                "claude-code" => Some(Host::ClaudeCode),
                "gemini-cli" => Some(Host::Gemini),
                "copilot-cli" => Some(Host::Copilot),
                "vs-code" | "code" => Some(Host::VsCode),
                _ => None,
            })
    }

    /// The run header's `host.app`.
    pub(crate) fn app(self) -> &'static str {
        match self {
            Host::ClaudeCode => "claude-code",
            Host::Codex => "codex",
            Host::Gemini => "gemini-cli",
            Host::Copilot => "copilot-cli",
            Host::Cursor => "cursor",
            Host::VsCode => "vscode",
        }
    }

    /// The transcript bir reads for this host, if any. VS Code's
    /// `transcript_path` is not a stable format (its docs say so), Cursor's
    /// is undocumented, Copilot CLI names none: their words come from
    /// hooks, or not at all.
    pub(crate) fn transcript_format(self) -> Option<TranscriptFormat> {
        match self {
            Host::ClaudeCode => Some(TranscriptFormat::ClaudeCode),
            Host::Codex => Some(TranscriptFormat::CodexRollout),
            Host::Gemini => Some(TranscriptFormat::GeminiChat),
            Host::Copilot | Host::Cursor | Host::VsCode => None,
        }
    }

    /// Whether a tool of this host starts a subagent.
    pub(crate) fn is_agent_tool(self, name: &str) -> bool {
        match self {
            Host::ClaudeCode | Host::VsCode => matches!(name, "Agent" | "Task"),
            // Codex 0.169 spells its sub-agent tools inconsistently.
            Host::Codex => name == "spawn_agent" || name.ends_with("spawn_agent"),
            Host::Copilot => matches!(name, "task" | "Task"),
            Host::Cursor => matches!(name, "Task" | "task"),
            Host::Gemini => name == "invoke_agent",
        }
    }

    /// The tools whose before-tool hook bir registers (`matcher`, a regex on
    /// the tool's name), for hosts whose after-tool hook carries the call
    /// whole: MCP tools (their hook view meets the proxy's while the call
    /// runs) and the tools that start or wait for a subagent (the subagent's
    /// calls nest under them, in order). Every other tool costs the session
    /// one hook process (its after-hook) instead of two.
    ///
    /// Codex CLI 0.169 and Gemini CLI 0.61 compare a matcher as a regex
    /// against the tool name the payload carries (`mcp__<server>__<tool>`,
    /// `spawn_agent`, `multi_agent_v1wait_agent`; `mcp_<server>_<tool>`,
    /// `invoke_agent`); Claude Code too (`mcp__<server>__<tool>`, `Agent`,
    /// `Task` before 2.1), for its `PreToolUse` while no guide is armed
    /// (`clientconfig::hook_entries::matcher_of`).
    pub(crate) fn before_tool_matcher(self) -> Option<&'static str> {
        match self {
            Host::ClaudeCode => Some("mcp__.*|Agent|Task"),
            Host::Codex => Some("^(mcp__.*|.*_agent)$"),
            Host::Gemini => Some("^(mcp_.*|invoke_agent)$"),
            _ => None,
        }
    }

    /// The session a payload belongs to, as the host names it.
    pub(crate) fn session_id(self, payload: &Value) -> Option<String> {
        let field = |k: &str| {
            payload
                .get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        match self {
            Host::ClaudeCode | Host::Codex | Host::Gemini => field("session_id"),
            Host::Cursor => field("conversation_id").or_else(|| field("session_id")),
            Host::VsCode => field("sessionId").or_else(|| field("session_id")),
            // Copilot CLI's documented payloads name no session: one
            // session per working directory, from its sessionStart to its
            // sessionEnd.
            Host::Copilot => field("sessionId")
                .or_else(|| field("session_id"))
                .or_else(|| field("cwd").map(|cwd| format!("copilot:{cwd}"))),
        }
    }
}

/// The npm package a host CLI is installed as, where its version can be
/// read from its `package.json` (hosts whose hooks and transcript never
/// say their version).
fn npm_package(host: Host) -> Option<&'static str> {
    match host {
        Host::Gemini => Some("@google/gemini-cli"),
        _ => None,
    }
}

/// The version of the host CLI that ran this hook, read from the
/// `package.json` of the script one of the hook's ancestor processes runs
/// (Gemini's hook is started by its node process, maybe through a shell).
/// Linux only (`/proc`); `None` when not found. Bounded: a few ancestors,
/// a few directories up, small files only.
pub(crate) fn version_from_ancestry(host: Host) -> Option<String> {
    version_from_process(host, std::os::unix::process::parent_id())
}

/// The same, from process `pid` and its ancestors: the daemon's reading
/// for a post script, which names its shell's parent (`$PPID`).
pub(crate) fn version_from_process(host: Host, pid: u32) -> Option<String> {
    let package = npm_package(host)?;
    let mut pid = pid;
    for _ in 0..4 {
        if pid <= 1 {
            return None;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        for arg in cmdline
            .split(|b| *b == 0)
            .filter(|a| a.first() == Some(&b'/'))
        {
            let path = std::path::Path::new(std::str::from_utf8(arg).ok()?);
            if let Some(v) = package_version(path, package) {
                return Some(v);
            }
        }
        pid = parent_of(pid)?;
    }
    None
}

/// The `version` of the `package.json` named `package` in a directory
/// holding `script` (its real path), at most five levels up.
fn package_version(script: &std::path::Path, package: &str) -> Option<String> {
    let real = std::fs::canonicalize(script).ok()?;
    if !real.is_file() {
        return None;
    }
    for dir in real.ancestors().skip(1).take(5) {
        let file = dir.join("package.json");
        let small = std::fs::metadata(&file).is_ok_and(|m| m.len() < 256 * 1024);
        if !small {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let Ok(doc) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        if doc["name"] == package {
            return doc["version"]
                .as_str()
                .filter(|v| !v.is_empty() && v.len() <= 64)
                .map(str::to_owned);
        }
    }
    None
}

/// A process's parent (`/proc/<pid>/stat`: the field after the command's
/// closing parenthesis and its state).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The payload field `bir-hooks` adds to Gemini CLI's `AfterTool` of an
/// `invoke_agent` call: the subagent's own chat file, which no hook names.
pub(crate) const AGENT_CHAT_FIELD: &str = "bir_agent_transcript_path";

/// Gemini CLI 0.61.0 writes a subagent's chat (the main chat's JSONL
/// format, `kind: "subagent"`) as `<chats>/<session_id>/<agent>.jsonl`
/// beside the session's own `transcript_path`: after an `invoke_agent`
/// call, the newest file there is its subagent's (the adapter already
/// takes the calls made while `invoke_agent` runs as that one agent's).
/// `None` for any other payload, or when there is no such file.
pub(crate) fn gemini_subagent_chat(payload: &[u8]) -> Option<String> {
    // Cheap first: most AfterTool payloads are not an agent's.
    memchr::memmem::find(payload, b"invoke_agent")?;
    let doc: Value = serde_json::from_slice(payload).ok()?;
    if doc["tool_name"] != "invoke_agent" {
        return None;
    }
    let main = std::path::Path::new(doc["transcript_path"].as_str()?);
    let session = doc["session_id"]
        .as_str()
        .filter(|s| !s.is_empty() && !s.contains('/') && *s != "." && *s != "..")?;
    let dir = main.parent()?.join(session);
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|e| {
            let meta = e.metadata().ok().filter(|m| m.is_file())?;
            Some((meta.modified().ok()?, e.path()))
        })
        .max()
        .and_then(|(_, path)| path.to_str().map(str::to_owned))
}

/// `payload` with `key` set to `value` when it is a JSON object; else as
/// it was.
pub(crate) fn with_field(payload: Vec<u8>, key: &str, value: &str) -> Vec<u8> {
    match serde_json::from_slice::<Value>(&payload) {
        Ok(Value::Object(mut map)) => {
            map.insert(key.into(), Value::String(value.to_owned()));
            serde_json::to_vec(&Value::Object(map)).unwrap_or(payload)
        }
        _ => payload,
    }
}

/// The payload field `bir-hooks` adds with the host's version (read from
/// its process) to the payload it forwards.
pub(crate) const HOST_VERSION_FIELD: &str = "bir_host_version";

/// `payload` with the host's version added (`HOST_VERSION_FIELD`), when
/// it is a JSON object and the result stays within `cap` bytes (the
/// daemon refuses a body over its cap, and the event would be lost for a
/// version string); else as it was.
pub(crate) fn with_host_version(payload: Vec<u8>, version: &str, cap: usize) -> Vec<u8> {
    match serde_json::from_slice::<Value>(&payload) {
        Ok(Value::Object(mut map)) => {
            map.insert(HOST_VERSION_FIELD.into(), Value::String(version.to_owned()));
            match serde_json::to_vec(&Value::Object(map)) {
                Ok(grown) if grown.len() <= cap => grown,
                _ => payload,
            }
        }
        _ => payload,
    }
}

#[cfg(test)]
mod version_tests {
    use super::*;

    #[test]
    fn a_gemini_subagents_chat_is_the_newest_file_of_the_sessions_directory() {
        let dir = std::env::temp_dir().join(format!("bir-gemini-chat-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let chats = dir.join("chats");
        let agents = chats.join("sess-1");
        std::fs::create_dir_all(&agents).expect("dirs");
        let main = chats.join("session-2026-12-03T10-00-sess1.jsonl");
        std::fs::write(&main, "").expect("main chat");
        std::fs::write(agents.join("older.jsonl"), "{}").expect("older");
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(agents.join("older.jsonl"))
            .and_then(|f| f.set_modified(old))
            .expect("mtime");
        std::fs::write(agents.join("newer.jsonl"), "{}").expect("newer");
        let payload = |tool: &str, session: &str| {
            serde_json::json!({"tool_name": tool, "session_id": session,
                "transcript_path": main.display().to_string()})
            .to_string()
            .into_bytes()
        };
        let found = gemini_subagent_chat(&payload("invoke_agent", "sess-1")).expect("a chat");
        assert!(found.ends_with("sess-1/newer.jsonl"), "{found}");
        assert_eq!(
            gemini_subagent_chat(&payload("run_shell_command", "sess-1")),
            None
        );
        assert_eq!(
            gemini_subagent_chat(&payload("invoke_agent", "../chats")),
            None
        );
        assert_eq!(
            gemini_subagent_chat(&payload("invoke_agent", "sess-2")),
            None
        );
        let with = with_field(payload("invoke_agent", "sess-1"), AGENT_CHAT_FIELD, &found);
        let v: Value = serde_json::from_slice(&with).expect("json");
        assert_eq!(v[AGENT_CHAT_FIELD], found.as_str());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_hosts_version_comes_from_the_package_json_above_its_script() {
        let dir = std::env::temp_dir().join(format!("bir-host-version-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = dir.join("node_modules/@google/gemini-cli");
        std::fs::create_dir_all(root.join("bundle")).expect("dirs");
        std::fs::write(
            root.join("package.json"),
            r#"{"name":"@google/gemini-cli","version":"0.61.0"}"#,
        )
        .expect("package.json");
        std::fs::write(root.join("bundle/gemini.js"), "").expect("script");
        let script = root.join("bundle/gemini.js");
        assert_eq!(
            package_version(&script, "@google/gemini-cli").as_deref(),
            Some("0.61.0")
        );
        assert_eq!(package_version(&script, "@openai/codex"), None);
        let payload = with_host_version(br#"{"session_id":"s"}"#.to_vec(), "0.61.0", 1024);
        let v: Value = serde_json::from_slice(&payload).expect("json");
        assert_eq!(v[HOST_VERSION_FIELD], "0.61.0");
        assert_eq!(with_host_version(b"nope".to_vec(), "1", 1024), b"nope");
        // A payload the version would push over the cap goes as it was:
        // the daemon takes it, where the grown one would be refused.
        let full = format!(r#"{{"session_id":"s","pad":"{}"}}"#, "x".repeat(100));
        assert_eq!(
            with_host_version(full.clone().into_bytes(), "0.61.0", full.len()),
            full.as_bytes()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
