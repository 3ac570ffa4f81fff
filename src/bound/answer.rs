//! What the daemon answers a hook: almost always nothing. The one answer
//! it gives on its own is the opt-in call-id injection at `PreToolUse`
//! (an armed guide answers too: `guidance.rs`, which wins over injection).
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
//!   whole input, so everything else in it is given back unchanged — as
//!   its own text, key order and number spelling included.
//! * The proxy does not strip the key: its relay is byte for byte and never
//!   re-serialises (ARCHITECTURE.md), so the server receives it. That is the
//!   price of injection, and why it is off by default: a server that
//!   validates its arguments strictly may refuse the call.

use serde_json::Value;
#[cfg(test)]
use serde_json::json;

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

/// The `PreToolUse` answer that injects the call id into the tool input
/// of `payload` (parsed from `raw`, the bytes the host posted), or `None`
/// when this call gets none (see the module's invariants). `bound` says
/// whether a proxy of a server (as the tool name spells it) is bound in the
/// payload's session.
///
/// The answer's `updatedInput` is the input's own text with the key added
/// before its closing brace: `updatedInput` replaces the whole input, and
/// re-serialising it would reorder its keys (the host passes them on in
/// the order it reads them).
pub(crate) fn inject_call_id(
    payload: &Value,
    raw: &[u8],
    bound: impl Fn(&str) -> bool,
) -> Option<String> {
    let event = payload["hook_event_name"].as_str().unwrap_or("PreToolUse");
    if event != "PreToolUse" {
        return None;
    }
    let tool = payload["tool_name"].as_str()?;
    if !tool.starts_with("mcp__") {
        return None;
    }
    let (_, server, _) = hook::classify(
        super::host::Host::ClaudeCode,
        tool,
        payload["mcp_server"]["name"].as_str(),
    );
    if !bound(&join::spelled(&server)) {
        return None;
    }
    let id = payload["tool_use_id"]
        .as_str()
        .filter(|id| !id.is_empty())?;
    match payload.get("tool_input") {
        Some(Value::Object(map)) if map.contains_key(join::CALL_ID_KEY) => return None,
        Some(Value::Object(_)) | None | Some(Value::Null) => {}
        Some(_) => return None,
    }
    let key = Value::String(join::CALL_ID_KEY.to_owned());
    let member = format!("{key}:{}", Value::String(join::injected_id(id)));
    let updated = match raw_tool_input(raw) {
        Some(text) => {
            let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?;
            if inner.trim().is_empty() {
                format!("{{{member}}}")
            } else {
                format!("{{{inner},{member}}}")
            }
        }
        None => format!("{{{member}}}"),
    };
    Some(format!(
        r#"{{"hookSpecificOutput":{{"hookEventName":"PreToolUse","updatedInput":{updated}}}}}"#
    ))
}

/// The text of the payload's `tool_input` as the host wrote it (`None`
/// when absent or `null`).
fn raw_tool_input(raw: &[u8]) -> Option<&str> {
    #[derive(serde::Deserialize)]
    struct Pre<'a> {
        #[serde(borrow, default)]
        tool_input: Option<&'a serde_json::value::RawValue>,
    }
    let pre: Pre = serde_json::from_slice(raw).ok()?;
    pre.tool_input
        .map(|r| r.get())
        .filter(|t| t.trim() != "null")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pre(tool: &str, input: Value) -> Value {
        json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": tool,
               "tool_use_id": "toolu_7", "tool_input": input})
    }

    /// The answer for `payload` as the host posts it (serialised).
    fn answer(payload: &Value, bound: impl Fn(&str) -> bool) -> Option<Value> {
        let raw = payload.to_string();
        let text = inject_call_id(payload, raw.as_bytes(), bound)?;
        Some(serde_json::from_str(&text).expect("the answer is JSON"))
    }

    #[test]
    fn an_mcp_call_of_a_bound_server_gets_its_id_and_no_decision() {
        let got = answer(
            &pre("mcp__my_srv__echo", json!({"message": "hi", "n": [1, 2]})),
            |s| s == "my_srv",
        )
        .expect("an answer");
        assert_eq!(
            got,
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                   "updatedInput": {"message": "hi", "n": [1, 2],
                                    "__bir_call_id__": "bir-toolu_7"}}})
        );
        assert!(!got.to_string().contains("permissionDecision"));
        assert!(!got.to_string().contains("\"decision\""));
        // What the engine reads back from it.
        let mut args = got["hookSpecificOutput"]["updatedInput"].clone();
        assert_eq!(join::strip_call_id(&mut args).as_deref(), Some("toolu_7"));
        // No input at all, or an empty one: the key alone.
        let bare = json!({"hook_event_name": "PreToolUse", "tool_name": "mcp__my_srv__ping",
                          "tool_use_id": "toolu_8"});
        let got = answer(&bare, |_| true).expect("an answer");
        assert_eq!(
            got["hookSpecificOutput"]["updatedInput"],
            json!({"__bir_call_id__": "bir-toolu_8"})
        );
        let got = answer(&pre("mcp__my_srv__ping", json!({})), |_| true).expect("an answer");
        assert_eq!(
            got["hookSpecificOutput"]["updatedInput"],
            json!({"__bir_call_id__": "bir-toolu_7"})
        );
    }

    #[test]
    fn the_input_keeps_its_key_order_and_number_spelling() {
        let raw =
            br#"{"hook_event_name":"PreToolUse","tool_name":"mcp__s__t","tool_use_id":"toolu_1",
                       "tool_input": { "zeta": 1.50, "alpha": {"b": 1, "a": 2} } }"#;
        let payload: Value = serde_json::from_slice(raw).expect("json");
        let text = inject_call_id(&payload, raw, |_| true).expect("an answer");
        assert_eq!(
            text,
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{ "zeta": 1.50, "alpha": {"b": 1, "a": 2} ,"__bir_call_id__":"bir-toolu_1"}}}"#
        );
        serde_json::from_str::<Value>(&text).expect("JSON");
    }

    #[test]
    fn nothing_for_built_ins_unbound_servers_odd_inputs_or_other_events() {
        let all = |_: &str| true;
        assert_eq!(answer(&pre("Bash", json!({"command": "ls"})), all), None);
        assert_eq!(
            answer(&pre("mcp__other__echo", json!({})), |s| s == "srv"),
            None
        );
        assert_eq!(answer(&pre("mcp__srv__echo", json!("text")), all), None);
        let already = json!({"message": "hi", "__bir_call_id__": "bir-x"});
        assert_eq!(answer(&pre("mcp__srv__echo", already), all), None);
        let mut post = pre("mcp__srv__echo", json!({}));
        post["hook_event_name"] = json!("PostToolUse");
        assert_eq!(answer(&post, all), None);
        let mut no_id = pre("mcp__srv__echo", json!({}));
        no_id["tool_use_id"] = json!("");
        assert_eq!(answer(&no_id, all), None);
    }

    #[test]
    fn the_server_is_compared_in_claude_codes_spelling() {
        // A proxy configured as `my.server` is `my_server` in tool names.
        let payload = json!({"hook_event_name": "PreToolUse", "tool_name": "mcp__my_server__echo",
                             "tool_use_id": "toolu_1", "tool_input": {},
                             "mcp_server": {"name": "my_server"}});
        let bound = ["my.server".to_owned()];
        let got = answer(&payload, |s| bound.iter().any(|b| join::spelled(b) == s));
        assert!(got.is_some());
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
