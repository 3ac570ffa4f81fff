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
