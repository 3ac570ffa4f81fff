//! What the daemon answers a hook: almost always nothing. The one answer
//! it gives is the opt-in call-id injection at `PreToolUse`.
//!
//! Why it exists: Claude Code puts `_meta["claudecode/toolUseId"]` on every
//! `tools/call`, so a proxy's report joins the hooks' view of a call
//! exactly without touching anything the model or the server sees. A host
//! without that key leaves only the fingerprint join, which is ambiguous
//! under identical concurrent calls. For such a host the user may switch
//! injection on (`BIR_CORRELATE=inject`, or `bir install --correlate
//! inject`): the `PreToolUse` answer then adds
//! `__bir_call_id__ = "bir-<tool_use_id>"` to the arguments (`updatedInput`),
//! the proxy records the arguments as relayed, and the engine joins on the
//! id and strips it from what is stored (`join.rs`).
//!
//! Invariants of the answer:
//! * It never carries a `permissionDecision`. `allow` would skip the
//!   permission prompt the user would have seen, `ask` would add one; with
//!   none, Claude Code 2.1.332 applies `updatedInput` and the user's own
//!   permission flow decides the call (observed: an allowed tool runs with
//!   the key; a tool not allowed is refused as before).
//! * Only for MCP tools (`mcp__*`) of servers whose proxy is bound in the
//!   session: a server bir does not record would only receive a stray key.
//! * Only when the input is a JSON object without the key already (another
//!   hook, or a host that injected for us): `updatedInput` replaces the
//!   whole input, so everything else in it is given back unchanged.
//! * The proxy does not strip the key: its relay is byte for byte and never
//!   re-serialises (ARCHITECTURE.md), so the server receives it. That is the
//!   price of injection, and why it is off by default: a server that
//!   validates its arguments strictly may refuse the call.

use serde_json::{Map, Value, json};

use super::hook;
use super::join;

/// Whether `PreToolUse` answers inject a call id: the user's choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Correlation {
    /// The default: join on what the host sends (`_meta`), then by
    /// fingerprint; never touch the arguments.
    Passive,
    /// Inject `__bir_call_id__` through `updatedInput`.
    Inject,
    /// `--no-correlation` / `BIR_CORRELATE=off`: never inject, whatever
    /// else asks for it (a hard off that wins over the environment).
    Off,
}

impl Correlation {
    /// The environment variable that chooses the mode.
    pub(crate) const ENV: &'static str = "BIR_CORRELATE";

    /// `inject`, `off` (or `none`), `meta` (the default); `None` for
    /// anything else.
    pub(crate) fn parse(word: &str) -> Option<Correlation> {
        match word.trim().to_ascii_lowercase().as_str() {
            "inject" => Some(Correlation::Inject),
            "off" | "none" => Some(Correlation::Off),
            "meta" | "passive" | "" => Some(Correlation::Passive),
            _ => None,
        }
    }
}

/// The `PreToolUse` answer that injects the call id into `payload`'s tool
/// input, or `None` when this call gets none (see the module's invariants).
/// `bound` says whether a proxy of a server (as the tool name spells it) is
/// bound in the payload's session.
pub(crate) fn inject_call_id(payload: &Value, bound: impl Fn(&str) -> bool) -> Option<Value> {
    let event = payload["hook_event_name"].as_str().unwrap_or("PreToolUse");
    if event != "PreToolUse" {
        return None;
    }
    let tool = payload["tool_name"].as_str()?;
    if !tool.starts_with("mcp__") {
        return None;
    }
    let (_, server, _) = hook::classify(tool, payload["mcp_server"]["name"].as_str());
    if !bound(&join::spelled(&server)) {
        return None;
    }
    let id = payload["tool_use_id"]
        .as_str()
        .filter(|id| !id.is_empty())?;
    let mut input = match payload.get("tool_input") {
        Some(Value::Object(map)) => map.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => return None,
    };
    if input.contains_key(join::CALL_ID_KEY) {
        return None;
    }
    input.insert(
        join::CALL_ID_KEY.to_owned(),
        Value::String(join::injected_id(id)),
    );
    Some(json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "updatedInput": input,
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pre(tool: &str, input: Value) -> Value {
        json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": tool,
               "tool_use_id": "toolu_7", "tool_input": input})
    }

    #[test]
    fn an_mcp_call_of_a_bound_server_gets_its_id_and_no_decision() {
        let answer = inject_call_id(
            &pre("mcp__my_srv__echo", json!({"message": "hi", "n": [1, 2]})),
            |s| s == "my_srv",
        )
        .expect("an answer");
        assert_eq!(
            answer,
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                   "updatedInput": {"message": "hi", "n": [1, 2],
                                    "__bir_call_id__": "bir-toolu_7"}}})
        );
        assert!(!answer.to_string().contains("permissionDecision"));
        assert!(!answer.to_string().contains("\"decision\""));
        // What the engine reads back from it.
        let mut args = answer["hookSpecificOutput"]["updatedInput"].clone();
        assert_eq!(join::strip_call_id(&mut args).as_deref(), Some("toolu_7"));
        // No input at all: the key alone.
        let bare = json!({"hook_event_name": "PreToolUse", "tool_name": "mcp__my_srv__ping",
                          "tool_use_id": "toolu_8"});
        let answer = inject_call_id(&bare, |_| true).expect("an answer");
        assert_eq!(
            answer["hookSpecificOutput"]["updatedInput"],
            json!({"__bir_call_id__": "bir-toolu_8"})
        );
    }

    #[test]
    fn nothing_for_built_ins_unbound_servers_odd_inputs_or_other_events() {
        let all = |_: &str| true;
        assert_eq!(
            inject_call_id(&pre("Bash", json!({"command": "ls"})), all),
            None
        );
        assert_eq!(
            inject_call_id(&pre("mcp__other__echo", json!({})), |s| s == "srv"),
            None
        );
        assert_eq!(
            inject_call_id(&pre("mcp__srv__echo", json!("text")), all),
            None
        );
        let already = json!({"message": "hi", "__bir_call_id__": "bir-x"});
        assert_eq!(inject_call_id(&pre("mcp__srv__echo", already), all), None);
        let mut post = pre("mcp__srv__echo", json!({}));
        post["hook_event_name"] = json!("PostToolUse");
        assert_eq!(inject_call_id(&post, all), None);
        let mut no_id = pre("mcp__srv__echo", json!({}));
        no_id["tool_use_id"] = json!("");
        assert_eq!(inject_call_id(&no_id, all), None);
    }

    #[test]
    fn the_server_is_compared_in_claude_codes_spelling() {
        // A proxy configured as `my.server` is `my_server` in tool names.
        let payload = json!({"hook_event_name": "PreToolUse", "tool_name": "mcp__my_server__echo",
                             "tool_use_id": "toolu_1", "tool_input": {},
                             "mcp_server": {"name": "my_server"}});
        let bound = ["my.server".to_owned()];
        let answer = inject_call_id(&payload, |s| bound.iter().any(|b| join::spelled(b) == s));
        assert!(answer.is_some());
    }

    #[test]
    fn modes() {
        assert_eq!(Correlation::parse("inject"), Some(Correlation::Inject));
        assert_eq!(Correlation::parse(" INJECT "), Some(Correlation::Inject));
        assert_eq!(Correlation::parse("off"), Some(Correlation::Off));
        assert_eq!(Correlation::parse("none"), Some(Correlation::Off));
        assert_eq!(Correlation::parse("meta"), Some(Correlation::Passive));
        assert_eq!(Correlation::parse("sometimes"), None);
    }
}
