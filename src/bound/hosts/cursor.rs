//! Cursor (editor and `cursor-agent`), from its documented payloads
//! (cursor.com/docs/agent/hooks): camelCase events,
//! snake_case fields; the session is `conversation_id`, the working
//! directory `workspace_roots[0]`; `preToolUse`/`postToolUse` carry
//! `tool_use_id`, the older `beforeShellExecution`/`beforeMCPExecution`
//! pairs do not (paired by name and arguments). The model's words come
//! from `afterAgentThought` and `afterAgentResponse`, the answer from the
//! last `afterAgentResponse` before `stop`. Its transcript is not a
//! documented format: not read.

use serde_json::{Value, json};

use super::{Adapter, as_mcp, engine_hook, field, fields, json_in_string, rename};
use crate::bound::hook::Hook;

pub(super) fn engine_event(event: &str) -> Option<&'static str> {
    Some(match event {
        "sessionStart" => "SessionStart",
        "sessionEnd" => "SessionEnd",
        "beforeSubmitPrompt" => "UserPromptSubmit",
        "preToolUse" | "beforeShellExecution" | "beforeMCPExecution" => "PreToolUse",
        "postToolUse" | "afterShellExecution" | "afterMCPExecution" => "PostToolUse",
        "postToolUseFailure" => "PostToolUseFailure",
        "subagentStart" => "SubagentStart",
        "subagentStop" => "SubagentStop",
        "afterAgentThought" | "afterAgentResponse" => "MessageDisplay",
        "stop" => "Stop",
        _ => "other",
    })
}

pub(super) fn normalize(adapter: &mut Adapter, event: &str, payload: Value) -> Vec<Hook> {
    let Some(name) = engine_event(event) else {
        return Vec::new();
    };
    let mut map = fields(payload);
    if let Some(v) = map.get("cursor_version").and_then(Value::as_str) {
        adapter.version = Some(v.to_owned());
    }
    if !map.contains_key("cwd")
        && let Some(root) = field(&map, "workspace_roots").get(0).cloned()
    {
        map.insert("cwd".into(), root);
    }
    rename(&mut map, "subagent_id", "agent_id");
    rename(&mut map, "subagent_type", "agent_type");
    if name == "PreToolUse" {
        adapter.called_since_words = true;
    }
    let name = match (name, event) {
        ("other", _) => {
            map.insert("hook_event_name".into(), Value::String(event.to_owned()));
            return vec![Hook::new(event.to_owned(), Value::Object(map))];
        }
        ("UserPromptSubmit", _) => {
            adapter.last_message = None;
            name
        }
        (_, "beforeShellExecution" | "afterShellExecution") => {
            let command = map.remove("command").unwrap_or(Value::Null);
            let args = json!({ "command": command });
            map.insert("tool_name".into(), Value::String("Shell".into()));
            map.insert("tool_input".into(), args.clone());
            shell_or_mcp_ids(adapter, name, "Shell", &args, &mut map);
            if let Some(output) = map.remove("output") {
                map.insert("tool_response".into(), output);
            }
            rename(&mut map, "duration", "duration_ms");
            name
        }
        (_, "beforeMCPExecution" | "afterMCPExecution") => {
            let tool = field(&map, "tool_name").as_str().unwrap_or("").to_owned();
            let args = json_in_string(map.remove("tool_input").unwrap_or(Value::Null));
            map.insert("tool_input".into(), args.clone());
            shell_or_mcp_ids(adapter, name, &tool, &args, &mut map);
            let server = ["server_name", "server"]
                .iter()
                .find_map(|k| map.get(*k).and_then(Value::as_str))
                .unwrap_or("")
                .to_owned();
            as_mcp(&mut map, &server, &tool);
            if let Some(result) = map.remove("result_json") {
                map.insert("tool_response".into(), json_in_string(result));
            }
            rename(&mut map, "duration", "duration_ms");
            name
        }
        ("PostToolUse" | "PostToolUseFailure", _) => {
            rename(&mut map, "tool_output", "tool_response");
            rename(&mut map, "error_message", "error");
            name
        }
        ("MessageDisplay", _) => {
            let text = field(&map, "text").as_str().unwrap_or("").to_owned();
            if text.trim().is_empty() {
                return Vec::new();
            }
            let delta = if event == "afterAgentThought" {
                format!("[thinking] {text}\n\n")
            } else {
                adapter.last_message = Some(text.clone());
                format!("{text}\n\n")
            };
            // Words after a call belong to the next message.
            if std::mem::take(&mut adapter.called_since_words) {
                adapter.message_seq += 1;
            }
            let generation = field(&map, "generation_id").as_str().unwrap_or("");
            let message = Value::String(format!("{generation}#{}", adapter.message_seq));
            let mut display = serde_json::Map::new();
            for key in ["conversation_id", "cwd"] {
                if let Some(v) = map.get(key) {
                    display.insert(key.into(), v.clone());
                }
            }
            display.insert("message_id".into(), message);
            display.insert("delta".into(), Value::String(delta));
            return vec![engine_hook("MessageDisplay", display)];
        }
        ("Stop", _) => {
            if let Some(text) = adapter.last_message.take() {
                map.insert("last_assistant_message".into(), Value::String(text));
            }
            name
        }
        _ => name,
    };
    vec![engine_hook(name, map)]
}

fn shell_or_mcp_ids(
    adapter: &mut Adapter,
    name: &str,
    tool: &str,
    args: &Value,
    map: &mut serde_json::Map<String, Value>,
) {
    if map.get("tool_use_id").is_some_and(Value::is_string) {
        return;
    }
    let id = if name == "PreToolUse" {
        adapter.start_call(tool, args)
    } else {
        adapter.end_call(tool, args)
    };
    map.insert("tool_use_id".into(), Value::String(id));
}
