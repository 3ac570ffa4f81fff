//! How the proxy's view of an MCP call finds the hook's view of it.
//!
//! In order of trust:
//! 1. `tool_use_id`: Claude Code puts `_meta["claudecode/toolUseId"]` on
//!    every `tools/call`, and it equals the hooks' `tool_use_id`. Exact.
//! 2. An injected call id: for hosts without that `_meta` key, a
//!    `PreToolUse` answer may add `__bir_call_id__ = "bir-<tool_use_id>"`
//!    to the arguments (`updatedInput`); the proxy's recorded arguments
//!    then carry it. Exact too; the key is stripped from what is stored.
//! 3. A fingerprint: `(server, tool, sha256 of the canonical redacted
//!    arguments)`, within the fingerprint window. Ambiguous when identical
//!    calls are in flight together: they are paired first-in, first-out
//!    and the step says `correlation: "fingerprint"`.

use serde_json::Value;

use crate::record::model::{self, Redacted};

/// The argument a `PreToolUse` answer may inject.
pub(crate) const CALL_ID_KEY: &str = "__bir_call_id__";
/// Injected ids are this prefix and the call's `tool_use_id`.
const CALL_ID_PREFIX: &str = "bir-";

/// The correlation mark of a fingerprint join.
pub(crate) const BY_FINGERPRINT: &str = "fingerprint";

/// The id a `PreToolUse` answer injects for call `tool_use_id`.
pub(crate) fn injected_id(tool_use_id: &str) -> String {
    format!("{CALL_ID_PREFIX}{tool_use_id}")
}

/// Removes an injected call id from `args`; returns the `tool_use_id` it
/// names.
pub(crate) fn strip_call_id(args: &mut Value) -> Option<String> {
    call_id(args.as_object_mut()?.remove(CALL_ID_KEY)?)
}

/// [`strip_call_id`] on prepared arguments (a proxy's report).
pub(crate) fn strip_prepared_call_id(args: &mut Redacted<Value>) -> Option<String> {
    call_id(args.remove_key(CALL_ID_KEY)?)
}

/// The call id an injected key held.
fn call_id(held: Value) -> Option<String> {
    let id = held.as_str()?;
    Some(id.strip_prefix(CALL_ID_PREFIX).unwrap_or(id).to_owned())
}

/// The fingerprint of a call: server (as Claude Code spells it in tool
/// names), tool, and the digest of its canonical redacted arguments.
pub(crate) fn fingerprint(server: &str, tool: &str, args_digest: &str) -> String {
    let key = format!("{}\u{0}{tool}\u{0}{args_digest}", spelled(server));
    crate::codec::sha256_hex(key.as_bytes())
}

/// The digest of arguments as both sides compute it: canonical JSON of the
/// redacted arguments without an injected call id.
pub(crate) fn args_digest(redacted_args: &Value) -> String {
    let mut args = redacted_args.clone();
    strip_call_id(&mut args);
    crate::codec::sha256_hex(&model::canonical(&args))
}

/// Claude Code replaces characters outside `[A-Za-z0-9_-]` in server names
/// when it builds `mcp__<server>__<tool>`; a proxy knows the configured
/// name. Both are compared in Claude Code's spelling.
pub(crate) fn spelled(server: &str) -> String {
    server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn call_ids_are_stripped_and_name_the_tool_use() {
        let mut args = json!({"message": "hi", "__bir_call_id__": "bir-toolu_9"});
        assert_eq!(strip_call_id(&mut args).as_deref(), Some("toolu_9"));
        assert_eq!(args, json!({"message": "hi"}));
        assert_eq!(strip_call_id(&mut args), None);
    }

    #[test]
    fn fingerprints_ignore_the_call_id_and_server_spelling() {
        let a = args_digest(&json!({"message": "hi", "__bir_call_id__": "bir-x"}));
        let b = args_digest(&json!({"message": "hi"}));
        assert_eq!(a, b);
        assert_eq!(
            fingerprint("my.server", "echo", &a),
            fingerprint("my_server", "echo", &b)
        );
        assert_ne!(fingerprint("s", "echo", &a), fingerprint("s", "echo2", &a));
        assert_ne!(b, args_digest(&json!({"message": "ho"})));
    }
}
