//! GitHub Copilot CLI, from its documented payloads (docs.github.com,
//! "Hooks configuration" and the CLI command reference's "Hook event input
//! payloads"): camelCase events and fields (`toolName`,
//! `toolArgs` — a JSON string — `toolResult {resultType,
//! textResultForLlm}`), no transcript. The same events configured in
//! PascalCase get Claude-Code-shaped snake_case payloads: those pass as
//! VS Code's do.

use serde_json::Value;

use super::{Adapter, engine_hook, field, fields, json_in_string, rename};
use crate::bound::hook::Hook;

pub(super) fn engine_event(event: &str) -> Option<&'static str> {
    Some(match event {
        "sessionStart" | "SessionStart" => "SessionStart",
        "sessionEnd" | "SessionEnd" => "SessionEnd",
        "userPromptSubmitted" | "UserPromptSubmit" => "UserPromptSubmit",
        "preToolUse" | "PreToolUse" => "PreToolUse",
        "postToolUse" | "PostToolUse" => "PostToolUse",
        "postToolUseFailure" | "PostToolUseFailure" => "PostToolUseFailure",
        "agentStop" | "Stop" => "Stop",
        "subagentStart" | "SubagentStart" => "SubagentStart",
        "subagentStop" | "SubagentStop" => "SubagentStop",
        _ => "other",
    })
}

pub(super) fn normalize(adapter: &mut Adapter, event: &str, payload: Value) -> Vec<Hook> {
    if event.starts_with(|c: char| c.is_ascii_uppercase()) {
        return super::vscode::normalize(event, payload);
    }
    let Some(name) = engine_event(event) else {
        return Vec::new();
    };
    let mut map = fields(payload);
    rename(&mut map, "toolName", "tool_name");
    rename(&mut map, "toolCallId", "tool_use_id");
    if let Some(args) = map.remove("toolArgs") {
        map.insert("tool_input".into(), json_in_string(args));
    }
    rename(&mut map, "toolResult", "tool_response");
    rename(&mut map, "agentId", "agent_id");
    rename(&mut map, "agentName", "agent_type");
    rename(&mut map, "transcriptPath", "transcript_path");
    if name == "other" {
        map.insert("hook_event_name".into(), Value::String(event.to_owned()));
        return vec![Hook::new(event.to_owned(), Value::Object(map))];
    }
    let mut hooks = Vec::new();
    let name = match name {
        "PreToolUse" | "PostToolUse" | "PostToolUseFailure" => {
            if map.get("tool_use_id").is_none_or(|v| !v.is_string()) {
                let tool = field(&map, "tool_name").as_str().unwrap_or("").to_owned();
                let args = map.get("tool_input").cloned().unwrap_or(Value::Null);
                let id = if name == "PreToolUse" {
                    adapter.start_call(&tool, &args)
                } else {
                    adapter.end_call(&tool, &args)
                };
                map.insert("tool_use_id".into(), Value::String(id));
            }
            let result_type = field(&map, "tool_response")["resultType"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            match result_type.as_str() {
                "failure" | "denied" | "rejected" if name == "PostToolUse" => {
                    let text = field(&map, "tool_response")["textResultForLlm"].clone();
                    if result_type != "failure" {
                        let mut denied = map.clone();
                        denied.remove("tool_response");
                        denied.insert("reason".into(), text.clone());
                        hooks.push(engine_hook("PermissionDenied", denied));
                    }
                    map.insert("error".into(), text);
                    "PostToolUseFailure"
                }
                _ => name,
            }
        }
        _ => name,
    };
    hooks.push(engine_hook(name, map));
    hooks
}
