//! Gemini CLI (observed on 0.61.0 offline): its events
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

/// The tool that runs a subagent (to its end, within the call).
const AGENT_TOOL: &str = "invoke_agent";

/// The id bir gives the subagent run by `invoke_agent` call `call_id`.
fn agent_id(call_id: &str) -> String {
    format!("{call_id}:agent")
}

/// An `invoke_agent` call's hook, with the subagent's start after its
/// PreToolUse and its stop before its PostToolUse: the calls in between
/// (Gemini's subagent hooks name no agent) are the subagent's.
fn agent_call(
    adapter: &mut Adapter,
    name: &str,
    id: String,
    map: serde_json::Map<String, Value>,
) -> Vec<Hook> {
    let agent_name = field(&map, "tool_input")["agent_name"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let mut agent = serde_json::Map::new();
    agent.insert("agent_id".into(), Value::String(agent_id(&id)));
    agent.insert("agent_type".into(), Value::String(agent_name.clone()));
    for key in ["session_id", "cwd", "timestamp"] {
        if let Some(v) = map.get(key) {
            agent.insert(key.into(), v.clone());
        }
    }
    if name == "PreToolUse" {
        adapter.agents_in_flight.push((id, agent_name));
        vec![engine_hook(name, map), engine_hook("SubagentStart", agent)]
    } else {
        adapter.agents_in_flight.retain(|(call, _)| *call != id);
        let post = match field(&map, "tool_response").get("error") {
            Some(e) if !e.is_null() => "PostToolUseFailure",
            _ => name,
        };
        let mut map = map;
        // The subagent's chat, found by `bir-hooks` (`host::gemini_subagent_chat`).
        if let Some(chat) = map.remove(crate::bound::host::AGENT_CHAT_FIELD) {
            agent.insert("agent_transcript_path".into(), chat);
        }
        if post == "PostToolUseFailure"
            && let Some(error) = field(&map, "tool_response").get("error").cloned()
        {
            map.insert(
                "error".into(),
                error.get("message").cloned().unwrap_or(error),
            );
        }
        vec![engine_hook("SubagentStop", agent), engine_hook(post, map)]
    }
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
            map.insert("tool_use_id".into(), Value::String(id.clone()));
            if tool == AGENT_TOOL {
                return agent_call(adapter, name, id, map);
            }
            if let Some((agent_call, agent_name)) = adapter.agents_in_flight.last() {
                map.insert("agent_id".into(), Value::String(agent_id(agent_call)));
                map.insert("agent_type".into(), Value::String(agent_name.clone()));
            }
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
