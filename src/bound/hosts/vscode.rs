//! VS Code agent mode (preview), from its documented payloads
//! (code.visualstudio.com/docs/agents/reference/hooks-reference): Claude Code's
//! events and snake_case tool fields (`tool_name`, `tool_input`,
//! `tool_use_id`, `tool_response`), with camelCase common fields
//! (`sessionId`, `hookEventName`). Its `transcript_path` is not a stable
//! format: not read.

use serde_json::Value;

use super::{fields, rename};
use crate::bound::hook::Hook;

pub(super) fn normalize(event: &str, payload: Value) -> Vec<Hook> {
    let mut map = fields(payload);
    rename(&mut map, "sessionId", "session_id");
    rename(&mut map, "hookEventName", "hook_event_name");
    rename(&mut map, "toolUseId", "tool_use_id");
    rename(&mut map, "agentId", "agent_id");
    rename(&mut map, "agentType", "agent_type");
    vec![Hook::new(event.to_owned(), Value::Object(map))]
}
