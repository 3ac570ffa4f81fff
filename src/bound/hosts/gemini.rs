//! Gemini CLI (observed on 0.61.0 offline, `AGENT-HOOKS.md`): its events
//! have names of their own, no hook carries a call id, MCP tools are
//! `mcp_<server>_<tool>` with `mcp_context`, and the answer is in
//! `AfterAgent.prompt_response` (which can repeat chunks: the transcript's
//! is preferred, this one is the fallback).

use serde_json::Value;

use super::{Adapter, as_mcp, engine_hook, field, fields};
use crate::bound::hook::Hook;

pub(super) fn engine_event(event: &str, payload: &Value) -> Option<&'static str> {
    Some(match event {
        "SessionStart" => "SessionStart",
        "SessionEnd" => "SessionEnd",
        "BeforeAgent" => "UserPromptSubmit",
        "BeforeTool" => "PreToolUse",
        "AfterTool" => "PostToolUse",
        "AfterAgent" => "Stop",
        // Fires before every model call: only a manual one is news.
        "PreCompress" if payload["trigger"] == "auto" => return None,
        // The model's request and each streamed chunk of its reply: the
        // transcript tells the same once, whole.
        "BeforeModel" | "AfterModel" | "BeforeToolSelection" => return None,
        _ => "other",
    })
}

pub(super) fn normalize(adapter: &mut Adapter, event: &str, payload: Value) -> Vec<Hook> {
    let Some(name) = engine_event(event, &payload) else {
        return Vec::new();
    };
    let mut map = fields(payload);
    let name = match name {
        "other" => {
            map.insert("hook_event_name".into(), Value::String(event.to_owned()));
            return vec![Hook::new(event.to_owned(), Value::Object(map))];
        }
        "PreToolUse" | "PostToolUse" => {
            let tool = field(&map, "tool_name").as_str().unwrap_or("").to_owned();
            let args = map.get("tool_input").cloned().unwrap_or(Value::Null);
            let id = if name == "PreToolUse" {
                adapter.start_call(&tool, &args)
            } else {
                adapter.end_call(&tool, &args)
            };
            map.insert("tool_use_id".into(), Value::String(id));
            let server = field(&map, "mcp_context")["server_name"]
                .as_str()
                .map(str::to_owned);
            let mcp_tool = field(&map, "mcp_context")["tool_name"]
                .as_str()
                .map(str::to_owned);
            if let (Some(server), Some(mcp_tool)) = (server, mcp_tool) {
                as_mcp(&mut map, &server, &mcp_tool);
            }
            let error = field(&map, "tool_response")
                .get("error")
                .filter(|e| !e.is_null())
                .cloned();
            match error {
                Some(error) if name == "PostToolUse" => {
                    let message = error.get("message").cloned().unwrap_or(error);
                    map.insert("error".into(), message);
                    "PostToolUseFailure"
                }
                _ => name,
            }
        }
        "Stop" => {
            if let Some(answer) = map.remove("prompt_response") {
                // The transcript has the answer right; this is the
                // fallback when it cannot be read.
                let key = if map.get("transcript_path").is_some_and(|p| p.is_string()) {
                    "answer_fallback"
                } else {
                    "last_assistant_message"
                };
                map.insert(key.into(), answer);
            }
            map.remove("prompt");
            name
        }
        _ => name,
    };
    vec![engine_hook(name, map)]
}
