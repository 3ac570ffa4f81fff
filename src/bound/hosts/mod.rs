//! Host adapters: each coding agent's hook payloads turned into the
//! engine's one vocabulary (Claude Code's hook events and fields), so that
//! nothing past this module knows which agent is talking.
//!
//! ```text
//! bir-hooks --host gemini BeforeTool ─▶ /hook/BeforeTool?host=gemini
//!   ─▶ Engine ─▶ Adapter::normalize ─▶ [Hook "PreToolUse" {session_id, tool_name,
//!                                       tool_use_id, tool_input, mcp_server…}]
//!                                    ─▶ Session::on_hook (host-blind)
//! ```
//!
//! What an adapter does, per host (`docs/agents.md` has what each records):
//! * names the session (`session_id`, Cursor's `conversation_id`, VS Code's
//!   and Copilot's `sessionId`);
//! * maps its events onto the engine's (`BeforeTool` → `PreToolUse`, …) and
//!   drops the ones that would only be noise (Gemini's per-chunk
//!   `AfterModel`, its `PreCompress` before every model call);
//! * spells MCP tools as `mcp__<server>__<tool>` with `mcp_server.name`;
//! * gives every call a `tool_use_id`: the host's own where it has one
//!   (Codex, VS Code, Cursor's `preToolUse`), else one made from the call's
//!   name, arguments and how many times that pair was called before
//!   ([`pairing_key`]), so a `BeforeTool` and its `AfterTool` (and the
//!   transcript's record of the call) meet;
//! * keeps `transcript_path` only for hosts whose transcript bir can read
//!   ([`Host::transcript_format`]).
//!
//! Invariants: an adapter never fails (a payload it does not understand is
//! passed on as a session event of its own name); it keeps at most a few
//! ids per call in flight (the pairing queues).

mod copilot;
mod cursor;
mod gemini;
mod vscode;

use std::collections::{HashMap, VecDeque};

use serde_json::{Map, Value, json};

use super::hook::Hook;

pub(crate) use super::host::{Host, TranscriptFormat};

/// The engine's name for `host`'s event (`None`: dropped).
pub(crate) fn engine_event(host: Host, event: &str, payload: &Value) -> Option<&'static str> {
    match host {
        Host::ClaudeCode | Host::Codex | Host::VsCode => Some(static_name(event)),
        Host::Gemini => gemini::engine_event(event, payload),
        Host::Copilot => copilot::engine_event(event),
        Host::Cursor => cursor::engine_event(event),
    }
}

/// A `&'static str` for an event name the engine knows, or `"other"`.
fn static_name(event: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "SessionStart",
        "SessionEnd",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PermissionRequest",
        "PermissionDenied",
        "SubagentStart",
        "SubagentStop",
        "Stop",
        "MessageDisplay",
    ];
    KNOWN
        .iter()
        .find(|k| **k == event)
        .copied()
        .unwrap_or("other")
}

/// What an adapter remembers of one session between its hooks: the ids it
/// made for calls still in flight, and (Cursor) the agent's last message.
#[derive(Debug, Default)]
pub(crate) struct Adapter {
    pub host: Host,
    /// pairing key → ids given to calls not answered yet, oldest first.
    pending: HashMap<String, VecDeque<String>>,
    /// (tool, arguments) digest → calls seen so far with it.
    occurrences: HashMap<String, u32>,
    /// The agent's last message (hosts whose answer comes from a hook of
    /// its own, not from Stop).
    pub last_message: Option<String>,
    /// The host's version, where its payloads say it.
    pub version: Option<String>,
    /// Words the host reports by hook (Cursor): which message they belong
    /// to, and whether a call came since the last ones.
    message_seq: u32,
    called_since_words: bool,
    /// Gemini's `invoke_agent` calls in flight, innermost last: (the
    /// call's id, the agent's name). Its subagents' hooks carry no agent
    /// id, so a call made while one runs is that subagent's.
    agents_in_flight: Vec<(String, String)>,
}

impl Adapter {
    /// The engine's hooks for one host hook (none, one, or several).
    pub(crate) fn normalize(&mut self, event: &str, payload: Value) -> Vec<Hook> {
        let session_id = self.host.session_id(&payload);
        let mut payload = payload;
        if let Some(v) = payload
            .as_object_mut()
            .and_then(|m| m.remove(super::host::HOST_VERSION_FIELD))
            .and_then(|v| v.as_str().map(str::to_owned))
        {
            self.version = Some(v);
        }
        let mut hooks = match self.host {
            Host::ClaudeCode => return vec![Hook::new(event.to_owned(), payload)],
            Host::Codex => vec![Hook::new(event.to_owned(), payload)],
            Host::Gemini => gemini::normalize(self, event, payload),
            Host::Copilot => copilot::normalize(self, event, payload),
            Host::Cursor => cursor::normalize(self, event, payload),
            Host::VsCode => vscode::normalize(event, payload),
        };
        for hook in &mut hooks {
            hook.host = self.host;
            if let Value::Object(map) = &mut hook.payload {
                if let Some(id) = &session_id {
                    map.insert("session_id".into(), Value::String(id.clone()));
                }
                if self.host.transcript_format().is_none() {
                    map.remove("transcript_path");
                }
            }
        }
        hooks
    }

    /// The id of a call starting now (`BeforeTool`): made from its name and
    /// arguments, remembered until its answer.
    pub(crate) fn start_call(&mut self, tool: &str, args: &Value) -> String {
        let digest = call_digest(tool, args);
        let n = self.occurrences.entry(digest.clone()).or_insert(0);
        *n += 1;
        let id = pairing_key(&digest, *n);
        let queue = self.pending.entry(digest).or_default();
        if queue.len() < MAX_PENDING {
            queue.push_back(id.clone());
        }
        id
    }

    /// The id of the call an answer (`AfterTool`) is for: the oldest call
    /// in flight with the same name and arguments, else the oldest with the
    /// same name (the host may show the arguments changed), else a new one
    /// (its start was missed).
    pub(crate) fn end_call(&mut self, tool: &str, args: &Value) -> String {
        let digest = call_digest(tool, args);
        if let Some(id) = self.pending.get_mut(&digest).and_then(VecDeque::pop_front) {
            return id;
        }
        let prefix = format!("{}:", tool_prefix(tool));
        let mut same_tool: Vec<&String> = self
            .pending
            .iter()
            .filter(|(k, q)| k.starts_with(&prefix) && !q.is_empty())
            .map(|(k, _)| k)
            .collect();
        same_tool.sort();
        if let Some(key) = same_tool.first().map(|k| (*k).clone())
            && let Some(id) = self.pending.get_mut(&key).and_then(VecDeque::pop_front)
        {
            return id;
        }
        let n = self.occurrences.entry(digest.clone()).or_insert(0);
        *n += 1;
        pairing_key(&digest, *n)
    }
}

/// Calls of one name and arguments in flight at once that are remembered.
const MAX_PENDING: usize = 64;

fn tool_prefix(tool: &str) -> String {
    tool.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(64)
        .collect()
}

/// A call's name and the digest of its canonical arguments.
pub(crate) fn call_digest(tool: &str, args: &Value) -> String {
    let digest = crate::codec::sha256_hex(&crate::record::model::canonical(args));
    format!("{}:{}", tool_prefix(tool), &digest[..16])
}

/// The id bir gives the `n`th call (1-based) with digest `digest` in a
/// session of a host whose hooks carry no call id: the same from the hooks
/// and from the transcript.
pub(crate) fn pairing_key(digest: &str, n: u32) -> String {
    format!("bir:{digest}:{n}")
}

/// `mcp__<server>__<tool>` with `mcp_server.name`, as Claude Code names an
/// MCP tool.
fn as_mcp(map: &mut Map<String, Value>, server: &str, tool: &str) {
    map.insert(
        "tool_name".into(),
        Value::String(format!("mcp__{server}__{tool}")),
    );
    map.insert("mcp_server".into(), json!({ "name": server }));
}

/// A string that holds JSON (Copilot's `toolArgs`, Cursor's `result_json`)
/// as its value; anything else as it is.
fn json_in_string(v: Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str::<Value>(&s).unwrap_or(Value::String(s)),
        other => other,
    }
}

/// A hook of the engine's vocabulary: `name` with `payload`.
fn engine_hook(name: &str, mut payload: Map<String, Value>) -> Hook {
    payload.insert("hook_event_name".into(), Value::String(name.to_owned()));
    Hook::new(name.to_owned(), Value::Object(payload))
}

/// The payload's fields as a map (a payload that is not an object is kept
/// whole under `payload`).
fn fields(payload: Value) -> Map<String, Value> {
    match payload {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        other => {
            let mut map = Map::new();
            map.insert("payload".into(), other);
            map
        }
    }
}

/// A field of a payload (`null` when missing: `Map`'s index would panic).
fn field<'a>(map: &'a Map<String, Value>, key: &str) -> &'a Value {
    map.get(key).unwrap_or(&Value::Null)
}

/// Moves `from` to `to` (when `from` is there and `to` is not).
fn rename(map: &mut Map<String, Value>, from: &str, to: &str) {
    if !map.contains_key(to)
        && let Some(v) = map.remove(from)
    {
        map.insert(to.to_owned(), v);
    }
}

#[cfg(test)]
mod tests;
