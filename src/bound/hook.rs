//! A typed view of a Claude Code hook payload that keeps everything.
//!
//! The payload stays the JSON the host sent; [`Hook`] only names the fields
//! the engine reads (the payloads Claude Code 2.1.332 sends). A field it does not know,
//! or an event it has never heard of, is not an error: the rest of the
//! payload is kept (redacted) in a session event.

use serde_json::{Map, Value};

use crate::record::model::StepKind;

/// Fields every payload repeats (or that the session event has a field
/// of its own for, `agent_id`); a session event leaves them out.
const SESSION_WIDE: &[&str] = &[
    "session_id",
    "transcript_path",
    "cwd",
    "hook_event_name",
    "prompt_id",
    "agent_id",
];

/// One hook event: its name and its payload.
#[derive(Debug)]
pub(crate) struct Hook {
    /// The payload's `hook_event_name`, else the route's name.
    pub name: String,
    pub payload: Value,
    /// The agent that sent it (its adapter made `name` and `payload` the
    /// engine's vocabulary: `hosts`).
    pub host: super::host::Host,
}

impl Hook {
    pub(crate) fn new(route_event: String, payload: Value) -> Hook {
        let name = payload["hook_event_name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .unwrap_or(route_event);
        Hook {
            name,
            payload,
            host: super::host::Host::ClaudeCode,
        }
    }

    fn str(&self, key: &str) -> Option<&str> {
        self.payload.get(key).and_then(Value::as_str)
    }

    pub(crate) fn session_id(&self) -> Option<&str> {
        self.str("session_id").filter(|s| !s.is_empty())
    }
    pub(crate) fn cwd(&self) -> Option<&str> {
        self.str("cwd")
    }
    pub(crate) fn transcript_path(&self) -> Option<&str> {
        self.str("transcript_path").filter(|s| !s.is_empty())
    }
    /// Set on events fired inside a subagent.
    pub(crate) fn agent_id(&self) -> Option<&str> {
        self.str("agent_id").filter(|s| !s.is_empty())
    }
    pub(crate) fn agent_type(&self) -> Option<&str> {
        self.str("agent_type")
    }
    /// The subagent a tool's answer says it launched: Claude Code's
    /// `tool_response.agentId`, or the `agent_id` of Codex's `spawn_agent`
    /// answer (a string holding JSON). Codex answers the spawn before the
    /// subagent's `SubagentStart`, so this is how its steps find their parent.
    pub(crate) fn spawned_agent_id(&self) -> Option<String> {
        let response = &self.payload["tool_response"];
        if let Some(id) = response["agentId"].as_str().filter(|s| !s.is_empty()) {
            return Some(id.to_owned());
        }
        let tool = self.tool_name()?;
        if !self.host.is_agent_tool(tool) {
            return None;
        }
        let parsed = serde_json::from_str::<Value>(response.as_str()?).ok()?;
        parsed["agent_id"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    }
    pub(crate) fn tool_name(&self) -> Option<&str> {
        self.str("tool_name")
    }
    pub(crate) fn tool_use_id(&self) -> Option<&str> {
        self.str("tool_use_id").filter(|s| !s.is_empty())
    }
    pub(crate) fn tool_input(&self) -> Option<&Value> {
        self.payload.get("tool_input")
    }
    pub(crate) fn prompt(&self) -> Option<&str> {
        self.str("prompt")
    }
    pub(crate) fn model(&self) -> Option<&str> {
        self.str("model").filter(|s| !s.is_empty())
    }
    pub(crate) fn source(&self) -> Option<&str> {
        self.str("source")
    }
    pub(crate) fn last_assistant_message(&self) -> Option<&str> {
        self.str("last_assistant_message")
    }
    /// The answer a host's stop event gave that its transcript's is
    /// preferred to (`hosts`).
    pub(crate) fn answer_fallback(&self) -> Option<&str> {
        self.str("answer_fallback").filter(|s| !s.trim().is_empty())
    }
    pub(crate) fn agent_transcript_path(&self) -> Option<&str> {
        self.str("agent_transcript_path").filter(|s| !s.is_empty())
    }
    /// `mcp_server.name` on tool events of MCP tools.
    pub(crate) fn mcp_server(&self) -> Option<&str> {
        self.payload["mcp_server"]["name"].as_str()
    }
    /// `duration_ms` of PostToolUse / PostToolUseFailure.
    pub(crate) fn duration_ms(&self) -> Option<f64> {
        self.payload.get("duration_ms").and_then(Value::as_f64)
    }
    /// PostToolBatch's `tool_calls[]`.
    pub(crate) fn tool_calls(&self) -> &[Value] {
        self.payload["tool_calls"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
    /// A MessageDisplay's text and the message it belongs to.
    pub(crate) fn display_delta(&self) -> Option<(&str, &str)> {
        Some((self.str("message_id").unwrap_or(""), self.str("delta")?))
    }
    /// Stop's subagents still running (the async Agent tool).
    pub(crate) fn has_background_tasks(&self) -> bool {
        self.payload["background_tasks"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    }

    /// The payload without the fields every event repeats: what a session
    /// event keeps (before redaction).
    pub(crate) fn event_data(&self) -> Option<Value> {
        let Value::Object(map) = &self.payload else {
            return Some(self.payload.clone()).filter(|v| !v.is_null());
        };
        let rest: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| !SESSION_WIDE.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (!rest.is_empty()).then_some(Value::Object(rest))
    }
}

/// What a tool name says about the tool: its kind, server and own name.
/// `mcp__<server>__<tool>` is an MCP tool (the payload's `mcp_server.name`
/// tells where the server's name ends when it has `__` of its own);
/// `Agent` (and the older `Task`) launch subagents; anything else is a
/// host built-in.
pub(crate) fn classify(
    host: super::host::Host,
    qualified: &str,
    mcp_server: Option<&str>,
) -> (StepKind, String, String) {
    if let Some(rest) = qualified.strip_prefix("mcp__") {
        if let Some(tool) = mcp_server
            .and_then(|server| rest.strip_prefix(server))
            .and_then(|r| r.strip_prefix("__"))
        {
            let server = mcp_server.unwrap_or_default();
            return (StepKind::Mcp, server.to_owned(), tool.to_owned());
        }
        let (server, tool) = rest.split_once("__").unwrap_or((rest, ""));
        return (StepKind::Mcp, server.to_owned(), tool.to_owned());
    }
    let kind = if host.is_agent_tool(qualified) {
        StepKind::Agent
    } else {
        StepKind::Builtin
    };
    (kind, String::new(), qualified.to_owned())
}

/// The server's own name of MCP tool `tool` as a host spelled it, among
/// the server's tool `names`: Codex shows the model a name with every
/// character outside `[A-Za-z0-9_]` turned into `_` (`get-sum` is
/// `get_sum`). `None` when the name is the server's already (Claude
/// Code's always is), or when no single server tool is spelled so (then
/// the host's name stands).
pub(crate) fn server_spelling(tool: &str, names: &[String]) -> Option<String> {
    if names.iter().any(|n| n == tool) {
        return None;
    }
    let codex = |name: &str| -> String {
        name.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let mut hits = names.iter().filter(|n| codex(n) == tool);
    match (hits.next(), hits.next()) {
        (Some(one), None) => Some(one.clone()),
        _ => None,
    }
}

/// `<task-notification>` prompts are the host's, not the user's: a
/// background subagent's result arriving as a new turn.
pub(crate) fn prompt_origin(prompt: &str) -> Option<&'static str> {
    prompt
        .trim_start()
        .starts_with("<task-notification>")
        .then_some("task_notification")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn codexs_renamed_mcp_tools_map_back_to_the_servers_names() {
        let names: Vec<String> = ["echo", "get-sum", "a.b", "a-b"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            server_spelling("get_sum", &names).as_deref(),
            Some("get-sum")
        );
        assert_eq!(server_spelling("echo", &names), None);
        // Two server tools spelled `a_b`: which one is not known.
        assert_eq!(server_spelling("a_b", &names), None);
        assert_eq!(server_spelling("nope", &names), None);
    }

    #[test]
    fn names_and_kinds() {
        let h = Hook::new("Route".into(), json!({"hook_event_name": "PreToolUse"}));
        assert_eq!(h.name, "PreToolUse");
        let h = Hook::new("Route".into(), json!({"x": 1}));
        assert_eq!(h.name, "Route");
        assert_eq!(
            classify(
                crate::bound::host::Host::ClaudeCode,
                "mcp__everything__echo",
                None
            ),
            (StepKind::Mcp, "everything".into(), "echo".into())
        );
        assert_eq!(
            classify(
                crate::bound::host::Host::ClaudeCode,
                "mcp__my__srv__do_it",
                Some("my__srv")
            ),
            (StepKind::Mcp, "my__srv".into(), "do_it".into())
        );
        assert_eq!(
            classify(crate::bound::host::Host::ClaudeCode, "Agent", None).0,
            StepKind::Agent
        );
        assert_eq!(
            classify(crate::bound::host::Host::ClaudeCode, "Bash", None),
            (StepKind::Builtin, "".into(), "Bash".into())
        );
        assert_eq!(
            prompt_origin("<task-notification>\n<task-id>"),
            Some("task_notification")
        );
        assert_eq!(prompt_origin("hello"), None);
    }

    #[test]
    fn event_data_leaves_out_session_wide_fields_and_keeps_unknown_ones() {
        let h = Hook::new(
            "X".into(),
            json!({"session_id": "s", "cwd": "/p", "transcript_path": "/t", "hook_event_name": "X",
                   "brand_new": {"a": 1}}),
        );
        assert_eq!(h.event_data(), Some(json!({"brand_new": {"a": 1}})));
    }
}
