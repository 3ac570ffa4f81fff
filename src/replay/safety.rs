//! The safety gate: which recorded steps replay may execute on its own.
//!
//! Annotations narrow what runs automatically; they never widen it. A step
//! gets the stricter class of its recorded and live annotations; spec
//! defaults fill missing hints (`readOnlyHint` false, `destructiveHint`
//! true, `openWorldHint` true), so a tool with no annotations is
//! destructive. Two modifiers only ever make a class stricter: a read-only
//! tool named with a write verb is demoted to `confirm`, and hints from a
//! server outside the user's own configuration are not trusted at all
//! (every step is `confirm`). A scenario's `safety` override may make a
//! step stricter; it may make one `auto` only when the user trusts the
//! scenario (`--trust-scenario`).

use serde_json::Value;

/// A step's class, from least to most guarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Class {
    /// Read-only: runs by default.
    Auto,
    /// A write that is not destructive: held; runs with `--execute` when
    /// allow-listed or confirmed.
    Confirm,
    /// Destructive (or unannotated): held; runs with `--execute` only when
    /// allowed by exact name and confirmed on a TTY.
    Destructive,
    /// Never runs (denied, unresolved, tool gone, `skip`).
    Blocked,
}

impl Class {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Class::Auto => "auto",
            Class::Confirm => "confirm",
            Class::Destructive => "destructive",
            Class::Blocked => "blocked",
        }
    }
}

/// Verbs with side effects: a tool with one of them as any word of its
/// name is not trusted to be read-only, whatever its hints say. Broad on
/// purpose: a false alarm costs an `--allow`, a miss runs a write unasked.
/// (`add` is left out: arithmetic tools are named so.)
const WRITE_VERBS: &[&str] = &[
    // removing
    "delete",
    "del",
    "remove",
    "rm",
    "rmdir",
    "unlink",
    "drop",
    "truncate",
    "purge",
    "wipe",
    "erase",
    "destroy",
    "clear",
    "prune",
    "shred",
    "evict",
    "flush",
    // sending, publishing
    "push",
    "send",
    "post",
    "put",
    "publish",
    "submit",
    "upload",
    "notify",
    "broadcast",
    "tweet",
    "forward",
    "invite",
    "dispatch",
    "emit",
    // money
    "transfer",
    "pay",
    "refund",
    "withdraw",
    "deposit",
    "buy",
    "purchase",
    "sell",
    "swap",
    "mint",
    "burn",
    "stake",
    // writing, changing
    "write",
    "create",
    "insert",
    "update",
    "upsert",
    "modify",
    "edit",
    "rename",
    "move",
    "mv",
    "cp",
    "replace",
    "overwrite",
    "append",
    "save",
    "revert",
    "rebase",
    "reset",
    "migrate",
    "mkdir",
    "touch",
    "chmod",
    "chown",
    "assign",
    "unassign",
    "approve",
    "reject",
    "reopen",
    "unlock",
    "enable",
    "disable",
    "toggle",
    "cancel",
    "register",
    "unregister",
    "subscribe",
    "unsubscribe",
    "grant",
    "revoke",
    "ban",
    "unblock",
    "encrypt",
    "decrypt",
    "rotate",
    "provision",
    "configure",
    // running
    "run",
    "exec",
    "execute",
    "eval",
    "invoke",
    "spawn",
    "launch",
    "restart",
    "kill",
    "terminate",
    "shutdown",
    "reboot",
    "halt",
    "deploy",
    "undeploy",
    "uninstall",
    "sudo",
];

/// Side-effect verbs that are also common nouns of read-only tools
/// (`get_commit`, `list_builds`, `get_schedule`): they demote a tool unless
/// its name starts with a read verb ([`READ_VERBS`]), where they are the
/// object read, not the action.
const NOUN_VERBS: &[&str] = &[
    "commit", "merge", "patch", "build", "install", "set", "start", "stop", "close", "archive",
    "lock", "block", "schedule", "book", "order", "charge", "invoice", "bill", "trade", "share",
    "sign", "import", "apply", "store", "format", "scale", "trigger", "reply", "comment",
    "message", "mail", "email", "script", "shell", "bash", "sh", "cmd", "command",
];

/// Verbs that make the rest of a name the object read.
const READ_VERBS: &[&str] = &[
    "get",
    "list",
    "read",
    "search",
    "find",
    "fetch",
    "show",
    "view",
    "describe",
    "query",
    "lookup",
    "check",
    "inspect",
    "count",
    "browse",
    "preview",
    "explain",
    "diff",
    "stat",
    "peek",
    "retrieve",
    "summarize",
    "validate",
];

/// The words of a tool name: split at `_`, `-`, `.`, `/`, `:`, spaces and
/// digits, and where camelCase turns from lower to upper case (`HTMLParser`
/// gives `html`, `parser`), lower-cased.
pub(crate) fn name_words(tool: &str) -> Vec<String> {
    let chars: Vec<char> = tool.chars().collect();
    let mut words = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphabetic() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            continue;
        }
        if c.is_uppercase() && !word.is_empty() {
            let prev_lower = chars[i - 1].is_lowercase();
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let prev_upper = chars[i - 1].is_uppercase();
            if prev_lower || (prev_upper && next_lower) {
                words.push(std::mem::take(&mut word));
            }
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The gate's verdict for one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub class: Class,
    /// `openWorldHint` true (or missing): the tool reaches outside.
    pub external: bool,
    /// Why, in words (for `--dry-run` and the report).
    pub reasons: Vec<String>,
}

/// What the gate needs to know about a step.
pub(crate) struct Facts<'a> {
    pub tool: &'a str,
    pub recorded: Option<&'a Value>,
    /// `None` when the live server was not asked (dry run, schema-only);
    /// `Some(None)` is handled by the caller as `missing-tool`.
    pub live: Option<&'a Value>,
    /// The server is in the user's own configuration.
    pub trusted_server: bool,
    /// `--trust-annotations none`.
    pub trust_none: bool,
    /// The scenario's override, and whether the scenario is trusted.
    pub override_: Option<&'a str>,
    pub trust_scenario: bool,
}

fn hint(annotations: Option<&Value>, name: &str) -> Option<bool> {
    annotations?.get(name)?.as_bool()
}

/// The class one set of annotations gives.
pub(crate) fn class_of(annotations: Option<&Value>) -> Class {
    let read_only = hint(annotations, "readOnlyHint").unwrap_or(false);
    let destructive = hint(annotations, "destructiveHint").unwrap_or(true);
    if read_only {
        Class::Auto
    } else if destructive {
        Class::Destructive
    } else {
        Class::Confirm
    }
}

fn open_world(annotations: Option<&Value>) -> bool {
    hint(annotations, "openWorldHint").unwrap_or(true)
}

/// The first word of `tool` that is a side-effect verb (`git_push`,
/// `bulkDelete`, `remove-file`, `rm`), if any.
pub(crate) fn write_verb(tool: &str) -> Option<String> {
    let words = name_words(tool);
    let reads = words
        .first()
        .is_some_and(|w| READ_VERBS.contains(&w.as_str()));
    words
        .into_iter()
        .find(|w| WRITE_VERBS.contains(&w.as_str()) || (!reads && NOUN_VERBS.contains(&w.as_str())))
}

/// Whether any word of `tool` is a side-effect verb.
pub(crate) fn has_write_verb(tool: &str) -> bool {
    write_verb(tool).is_some()
}

pub(crate) fn judge(f: &Facts) -> Verdict {
    let mut reasons = Vec::new();
    let mut class = class_of(f.recorded);
    let live_class = f.live.map(|l| class_of(Some(l)));
    if let Some(live) = live_class
        && live > class
    {
        reasons.push(format!(
            "live annotations are stricter ({} recorded, {} live)",
            class.name(),
            live.name()
        ));
        class = live;
    }
    let external = open_world(f.recorded) || f.live.is_some_and(|l| open_world(Some(l)));
    match class {
        Class::Auto => reasons.push("readOnlyHint: true".to_owned()),
        Class::Confirm => reasons.push("not read-only, destructiveHint: false".to_owned()),
        Class::Destructive => {
            if f.recorded
                .is_none_or(|a| a.as_object().is_none_or(|o| o.is_empty()))
            {
                reasons.push("no annotations (treated as destructive)".to_owned());
            } else {
                reasons.push("destructive (destructiveHint true or missing)".to_owned());
            }
        }
        Class::Blocked => {}
    }
    if class == Class::Auto
        && let Some(verb) = write_verb(f.tool)
    {
        reasons.push(format!(
            "demoted to confirm: read-only, but {:?} has the write verb {verb:?}",
            f.tool
        ));
        class = Class::Confirm;
    }
    if (f.trust_none || !f.trusted_server) && class < Class::Confirm {
        reasons.push("annotations not trusted here: confirm".to_owned());
        class = Class::Confirm;
    }
    match f.override_ {
        Some("skip") => {
            reasons.push("scenario says skip".to_owned());
            class = Class::Blocked;
        }
        Some("confirm") if class < Class::Confirm => {
            reasons.push("scenario says confirm".to_owned());
            class = Class::Confirm;
        }
        Some("auto") if class != Class::Auto => {
            if f.trust_scenario {
                reasons.push("scenario says auto (trusted with --trust-scenario)".to_owned());
                class = Class::Auto;
            } else {
                reasons.push("scenario says auto: ignored without --trust-scenario".to_owned());
            }
        }
        _ => {}
    }
    Verdict {
        class,
        external,
        reasons,
    }
}

/// A `server/tool` glob (`*` anywhere) against a step.
pub(crate) fn glob_matches(pattern: &str, server: &str, tool: &str) -> bool {
    let subject = format!("{server}/{tool}");
    wildcard(pattern, &subject)
}

fn wildcard(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            text.starts_with(head)
                && (head.len()..=text.len())
                    .any(|i| text.is_char_boundary(i) && wildcard(tail, &text[i..]))
        }
    }
}

/// What `--execute` decides for a held step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Consent {
    /// Allowed without asking (a confirm step matched an allow glob).
    Allowed,
    /// Must be confirmed on a TTY first.
    AskTty,
    /// Not runnable: denied, or destructive and not allowed by exact name.
    Refused,
}

/// `--allow`/`--deny` for a held step. Deny wins; a destructive step needs
/// its exact `server/tool` in the allow list (a glob is not consent to
/// destroy) *and* a TTY confirmation.
pub(crate) fn consent(
    class: Class,
    server: &str,
    tool: &str,
    allow: &[String],
    deny: &[String],
) -> Consent {
    if deny.iter().any(|d| glob_matches(d, server, tool)) {
        return Consent::Refused;
    }
    match class {
        Class::Auto => Consent::Allowed,
        Class::Blocked => Consent::Refused,
        Class::Confirm => {
            if allow.iter().any(|a| glob_matches(a, server, tool)) {
                Consent::Allowed
            } else {
                Consent::AskTty
            }
        }
        Class::Destructive => {
            let exact = format!("{server}/{tool}");
            if allow.contains(&exact) {
                Consent::AskTty
            } else {
                Consent::Refused
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    fn facts<'a>(tool: &'a str, recorded: Option<&'a Value>, live: Option<&'a Value>) -> Facts<'a> {
        Facts {
            tool,
            recorded,
            live,
            trusted_server: true,
            trust_none: false,
            override_: None,
            trust_scenario: false,
        }
    }

    /// All 81 combinations of true / false / missing for the four hints.
    fn all_annotations() -> Vec<Value> {
        let names = [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ];
        let mut out = Vec::new();
        for n in 0..81u32 {
            let mut map = Map::new();
            let mut rest = n;
            for name in names {
                match rest % 3 {
                    0 => {}
                    1 => {
                        map.insert(name.into(), Value::Bool(true));
                    }
                    _ => {
                        map.insert(name.into(), Value::Bool(false));
                    }
                }
                rest /= 3;
            }
            out.push(Value::Object(map));
        }
        out
    }

    #[test]
    fn the_truth_table_over_all_81_hint_combinations() {
        let mut seen = std::collections::BTreeMap::new();
        for a in all_annotations() {
            let ro = a.get("readOnlyHint").and_then(Value::as_bool);
            let de = a.get("destructiveHint").and_then(Value::as_bool);
            let ow = a.get("openWorldHint").and_then(Value::as_bool);
            let v = judge(&facts("lookup", Some(&a), None));
            // Read: auto iff readOnlyHint is true; else destructive unless
            // destructiveHint is false; idempotence never changes a class.
            let want = match (ro, de) {
                (Some(true), _) => Class::Auto,
                (_, Some(false)) => Class::Confirm,
                _ => Class::Destructive,
            };
            assert_eq!(v.class, want, "{a}");
            assert_eq!(v.external, ow != Some(false), "{a}");
            *seen.entry(v.class).or_insert(0) += 1;
        }
        // 27 read-only, 18 confirm (ro false/missing × de false × 9), 36 destructive.
        assert_eq!(seen.get(&Class::Auto), Some(&27));
        assert_eq!(seen.get(&Class::Confirm), Some(&18));
        assert_eq!(seen.get(&Class::Destructive), Some(&36));
    }

    #[test]
    fn the_stricter_of_recorded_and_live_wins_in_every_pairing() {
        let all = all_annotations();
        for r in &all {
            for l in all.iter().step_by(7) {
                let v = judge(&facts("lookup", Some(r), Some(l)));
                assert_eq!(
                    v.class,
                    class_of(Some(r)).max(class_of(Some(l))),
                    "{r} / {l}"
                );
            }
        }
        // No annotations at all: destructive.
        assert_eq!(judge(&facts("x", None, None)).class, Class::Destructive);
        assert_eq!(
            judge(&facts("x", Some(&json!({})), None)).class,
            Class::Destructive
        );
    }

    #[test]
    fn write_verbs_demote_and_untrusted_servers_never_run_alone() {
        let ro = json!({"readOnlyHint": true});
        for name in [
            "delete_everything",
            "createIssue",
            "send-mail",
            "push",
            "PayNow",
        ] {
            let v = judge(&facts(name, Some(&ro), None));
            assert_eq!(v.class, Class::Confirm, "{name}");
            assert!(v.reasons.iter().any(|r| r.contains("write verb")), "{name}");
        }
        for name in [
            "deleted_items_count",
            "postcode",
            "updates",
            "get_item",
            "echo",
        ] {
            assert_eq!(
                judge(&facts(name, Some(&ro), None)).class,
                Class::Auto,
                "{name}"
            );
        }
        let mut f = facts("echo", Some(&ro), None);
        f.trusted_server = false;
        assert_eq!(judge(&f).class, Class::Confirm);
        let mut f = facts("echo", Some(&ro), None);
        f.trust_none = true;
        assert_eq!(judge(&f).class, Class::Confirm);
    }

    /// Any word of the name, however it is spelt, from the broad list:
    /// the names that once ran unprompted because only the first word of a
    /// short list counted.
    #[test]
    fn a_write_verb_anywhere_in_the_name_demotes_a_read_only_claim() {
        let ro = json!({"readOnlyHint": true});
        for name in [
            "git_push",
            "bulk_delete",
            "remove_file",
            "rm",
            "run_command",
            "transfer_funds",
            "bulkDelete",
            "git-push",
            "fs.remove",
            "SendEmail",
            "killProcess",
            "deploy",
            "exec",
            "drop_table",
            "db_write",
            "HTTPPost",
            "repo_commit",
        ] {
            let v = judge(&facts(name, Some(&ro), None));
            assert_eq!(v.class, Class::Confirm, "{name}");
            assert!(v.reasons.iter().any(|r| r.contains("write verb")), "{name}");
        }
        for name in [
            "get_item",
            "list_files",
            "read_file",
            "search",
            "getCommit",
            "list_builds",
            "get_schedule",
            "runtime_info",
            "removal_history",
        ] {
            assert_eq!(
                judge(&facts(name, Some(&ro), None)).class,
                Class::Auto,
                "{name}"
            );
        }
        // A noun-like verb that leads the name is the action.
        assert!(has_write_verb("trigger_build"));
        assert_eq!(
            name_words("HTMLParser_v2-readFile"),
            ["html", "parser", "v", "read", "file"]
        );
    }

    #[test]
    fn a_scenario_override_only_widens_when_trusted() {
        let de = json!({"readOnlyHint": false, "destructiveHint": true});
        let mut f = facts("wipe", Some(&de), None);
        f.override_ = Some("auto");
        assert_eq!(judge(&f).class, Class::Destructive);
        f.trust_scenario = true;
        assert_eq!(judge(&f).class, Class::Auto);
        let ro = json!({"readOnlyHint": true});
        let mut f = facts("echo", Some(&ro), None);
        f.override_ = Some("confirm");
        assert_eq!(judge(&f).class, Class::Confirm);
        f.override_ = Some("skip");
        assert_eq!(judge(&f).class, Class::Blocked);
    }

    #[test]
    fn consent_needs_exact_names_for_destruction_and_deny_wins() {
        let allow = vec!["everything/toggle-*".to_owned(), "fx/delete_key".to_owned()];
        let deny = vec!["fx/kv_*".to_owned()];
        assert_eq!(
            consent(
                Class::Confirm,
                "everything",
                "toggle-simulated-logging",
                &allow,
                &deny
            ),
            Consent::Allowed
        );
        assert_eq!(
            consent(Class::Confirm, "fx", "counter_inc", &allow, &deny),
            Consent::AskTty
        );
        assert_eq!(
            consent(Class::Confirm, "fx", "kv_put", &["fx/*".to_owned()], &deny),
            Consent::Refused
        );
        assert_eq!(
            consent(Class::Destructive, "fx", "delete_key", &allow, &deny),
            Consent::AskTty
        );
        assert_eq!(
            consent(
                Class::Destructive,
                "fx",
                "delete_key",
                &["fx/*".to_owned()],
                &deny
            ),
            Consent::Refused
        );
        assert_eq!(
            consent(
                Class::Destructive,
                "everything",
                "get-annotated-message",
                &["everything/*".to_owned()],
                &[]
            ),
            Consent::Refused
        );
        assert_eq!(
            consent(Class::Blocked, "fx", "add", &["fx/add".to_owned()], &[]),
            Consent::Refused
        );
    }
}
