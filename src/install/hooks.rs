//! Claude Code hooks: the bound tier's half of `bir install`.
//!
//! `bir install` registers one command hook per hook event Claude Code
//! fires, in user settings (`~/.claude/settings.json`, every session of
//! this user) or, with `--hooks project`, in the project's
//! `.claude/settings.json` (loaded only when Claude Code starts in that
//! very directory, and only once the folder is trusted). Each is a matcher
//! group of its own, appended after the user's groups for that event:
//!
//! ```json
//! "PreToolUse": [ …the user's groups…,
//!   { "hooks": [ { "type": "command", "command": "/home/me/.local/bin/bir-hooks PreToolUse", "timeout": 5 } ] } ]
//! ```
//!
//! The command is the absolute path of the `bir-hooks` link beside the
//! running `bir`, or `<abs path of bir> hooks` where there is no link
//! (`BIR_HOOKS_PATH` overrides the path, like `BIR_PROXY_PATH` for the
//! proxy). It is shell form (Claude Code runs it with `sh -c`), the path
//! quoted when it needs to be, so every Claude Code version runs it.
//!
//! Edits are spans ([`super::jsonedit`]): nothing else in the file moves,
//! and the user's own hooks keep their order. The ledger records, per
//! event, whether bir created the event's array (and what whitespace an
//! empty one held), so `bir uninstall` gives back the file byte for byte.
//! bir recognises its own groups by their command ([`parse_ours`]), never
//! by position, so a group the user added later survives an uninstall.
//!
//! `WorktreeCreate` is left out on purpose: its hook's stdout *replaces*
//! worktree creation, so registering it changes what the host does.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::claude::Paths;
use super::entry::basename;
use super::jsonedit::{Doc, Flavor, Kind, Node, json_string};
use crate::bound::Correlation;
use crate::error::Error;

/// Every hook event Claude Code 2.1.332 fires (CLAUDE-CODE-OBSERVED §6),
/// minus `WorktreeCreate`. An event name a Claude Code version does not
/// know is ignored by it (the others still fire), so the list may run ahead
/// of the installed version.
/// Events bir does not register when its Claude Code mod is installed
/// (`bir install --mod`): measured on a scripted 50-call session
/// (`tests/e2e/bench-mod.sh`), `MessageDisplay` was a quarter of all hook
/// processes (51 of 205, one per message of the model) and brings only the
/// model's text, which the mod's `session.append` rows carry too (and the
/// transcript after each call, when mods are off). Every other event tells
/// something the run needs whether or not the mod runs: a mod can be
/// switched off host-side at any time, and the hooks then record alone.
pub const LEFT_TO_THE_MOD: &[&str] = &["MessageDisplay"];

pub const EVENTS: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "Notification",
    "UserPromptSubmit",
    "UserPromptExpansion",
    "SessionStart",
    "SessionEnd",
    "Stop",
    "StopFailure",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "PreModelSwitch",
    "PostModelSwitch",
    "PermissionRequest",
    "PermissionDenied",
    "Setup",
    "TeammateIdle",
    "TaskCreated",
    "TaskCompleted",
    "Elicitation",
    "ElicitationResult",
    "ConfigChange",
    "WorktreeRemove",
    "InstructionsLoaded",
    "CwdChanged",
    "FileChanged",
    "DirectoryAdded",
    "MessageDisplay",
    "PreSkillShellCommand",
];

/// Seconds Claude Code waits for one hook before going on without it. A
/// hook that cannot reach the recorder gives up well within this by
/// itself; the timeout only bounds a hook that hangs.
pub const TIMEOUT_SECS: u64 = 5;

/// What a brand-new settings file starts as before bir's edit.
pub const NEW_FILE: &[u8] = b"{\n}\n";

/// Which settings file holds the hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookScope {
    /// `~/.claude/settings.json` (or `$CLAUDE_CONFIG_DIR/settings.json`).
    User,
    /// `<project>/.claude/settings.json`.
    Project,
}

impl HookScope {
    /// `--hooks user|project|none` (None: do not register hooks).
    pub fn parse(s: &str) -> Result<Option<HookScope>, Error> {
        match s {
            "user" => Ok(Some(HookScope::User)),
            "project" => Ok(Some(HookScope::Project)),
            "none" | "off" => Ok(None),
            other => Err(Error::usage(format!(
                "--hooks takes user, project or none, not `{other}`"
            ))),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            HookScope::User => "user",
            HookScope::Project => "project",
        }
    }

    /// The settings file of this scope.
    pub fn settings_file(self, paths: &Paths) -> PathBuf {
        match self {
            HookScope::User => paths.settings_dir.join("settings.json"),
            HookScope::Project => paths.project.join(".claude").join("settings.json"),
        }
    }
}

/// How hook entries start `bir-hooks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookForm {
    pub program: PathBuf,
    /// `<program> hooks <Event>` (a plain `bir`), not `<program> <Event>`
    /// (the `bir-hooks` link).
    pub subcommand: bool,
    /// The call-id injection mode written on the `PreToolUse` command
    /// (`--correlate inject`, `--no-correlation`); `None`: keep whatever a
    /// registered hook already says (a new one says nothing).
    pub correlation: Option<Correlation>,
}

/// The words a `PreToolUse` command carries for `mode`.
fn correlation_words(mode: Correlation) -> Vec<String> {
    match mode {
        Correlation::Inject => vec!["--correlate".into(), "inject".into()],
        Correlation::Off => vec!["--no-correlation".into()],
        Correlation::Passive => Vec::new(),
    }
}

/// Whether `words` (after the event) are correlation flags `bir-hooks`
/// reads, and nothing else.
fn correlation_flags(words: &[String]) -> bool {
    let mut rest = words.iter();
    while let Some(w) = rest.next() {
        let ok = match w.as_str() {
            "--no-correlation" => true,
            "--correlate" => rest.next().is_some_and(|m| Correlation::parse(m).is_some()),
            other => other
                .strip_prefix("--correlate=")
                .is_some_and(|m| Correlation::parse(m).is_some()),
        };
        if !ok {
            return false;
        }
    }
    true
}

impl HookForm {
    /// `BIR_HOOKS_PATH`, else the `bir-hooks` link beside the running
    /// executable, else `<this bir> hooks`.
    pub fn detect() -> HookForm {
        if let Some(p) = std::env::var_os("BIR_HOOKS_PATH").filter(|p| !p.is_empty()) {
            let program = PathBuf::from(p);
            let subcommand = basename(&program.to_string_lossy()) != "bir-hooks";
            return HookForm {
                program,
                subcommand,
                correlation: None,
            };
        }
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("bir"));
        if let Some(dir) = exe.parent() {
            let link = dir.join("bir-hooks");
            if link.exists() {
                return HookForm {
                    program: link,
                    subcommand: false,
                    correlation: None,
                };
            }
        }
        HookForm {
            program: exe,
            subcommand: true,
            correlation: None,
        }
    }

    /// The shell command for one event (a new group's).
    pub fn command(&self, event: &str) -> String {
        self.command_with(event, &[])
    }

    /// The command a registered group of bir's should run: this program,
    /// and the correlation flags this form chose, else the ones it has.
    fn command_over(&self, registered: &OurHook) -> String {
        self.command_with(&registered.event, &registered.flags)
    }

    fn command_with(&self, event: &str, kept: &[String]) -> String {
        let mut cmd = shell_quote(&self.program.to_string_lossy());
        if self.subcommand {
            cmd.push_str(" hooks");
        }
        cmd.push(' ');
        cmd.push_str(event);
        let flags = match self.correlation {
            _ if event != "PreToolUse" => Vec::new(),
            Some(mode) => correlation_words(mode),
            None => kept.to_vec(),
        };
        for flag in flags {
            cmd.push(' ');
            cmd.push_str(&shell_quote(&flag));
        }
        cmd
    }

    /// The command with `<Event>` in place of an event name (for output).
    pub fn display(&self) -> String {
        self.command("<Event>")
    }

    /// The matcher group bir appends for `event`, as JSON text.
    pub fn group(&self, event: &str) -> String {
        format!(
            r#"{{"hooks":[{{"type":"command","command":{},"timeout":{TIMEOUT_SECS}}}]}}"#,
            json_string(&self.command(event))
        )
    }
}

/// `s` as one `sh` word: as is when it holds only characters the shell
/// leaves alone, else in single quotes.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%=,".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Splits a shell command into words: blanks separate, `'…'` is literal,
/// `"…"` and a bare backslash escape. `None` for anything more (an
/// unclosed quote, `$`, `;`, a pipe…): such a command is not bir's.
pub fn shell_words(cmd: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = cmd.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if let Some(w) = cur.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '\'' => break,
                        ch => w.push(ch),
                    }
                }
            }
            '"' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => w.push(chars.next()?),
                        '$' | '`' => return None,
                        ch => w.push(ch),
                    }
                }
            }
            '\\' => cur.get_or_insert_with(String::new).push(chars.next()?),
            '$' | '`' | ';' | '|' | '&' | '<' | '>' | '(' | ')' | '\n' => return None,
            ch => cur.get_or_insert_with(String::new).push(ch),
        }
    }
    if let Some(w) = cur {
        words.push(w);
    }
    Some(words)
}

/// One of bir's hook commands, read back from a settings file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OurHook {
    /// The program as written (the `bir-hooks` link or `bir`).
    pub program: String,
    pub event: String,
    /// Correlation flags after the event (`--correlate inject`,
    /// `--no-correlation`), as written.
    pub flags: Vec<String>,
}

/// `Some` when `command` is a bir hook command: `<…/bir-hooks> <Event>` or
/// `<…/bir> hooks <Event>`, optionally followed by correlation flags.
pub fn parse_ours(command: &str) -> Option<OurHook> {
    let words = shell_words(command)?;
    let (program, event, flags) = match words.as_slice() {
        [p, ev, flags @ ..] if basename(p) == "bir-hooks" => (p, ev, flags),
        [p, sub, ev, flags @ ..] if sub == "hooks" && basename(p).starts_with("bir") => {
            (p, ev, flags)
        }
        _ => return None,
    };
    correlation_flags(flags).then(|| OurHook {
        program: program.clone(),
        event: event.clone(),
        flags: flags.to_vec(),
    })
}

/// A matcher group bir wrote: no matcher or other keys, one command
/// handler running a bir hook command. Groups the user wrote (even ones
/// that also call bir) are never taken for bir's.
fn our_group(group: &Node) -> Option<OurHook> {
    let members = group.members();
    if members.len() != 1 || members[0].key != "hooks" {
        return None;
    }
    let [handler] = members[0].value.items() else {
        return None;
    };
    if handler.get("type").and_then(Node::as_str) != Some("command") {
        return None;
    }
    parse_ours(handler.get("command").and_then(Node::as_str)?)
}

/// A bir group found in a settings file.
#[derive(Debug, Clone)]
pub struct Registered {
    pub event: String,
    pub hook: OurHook,
    /// The command as written (decoded).
    pub command: String,
    /// The byte span of its `command` string.
    command_span: (usize, usize),
}

/// Every bir group in `doc`, in file order.
pub fn registered(doc: &Doc) -> Vec<Registered> {
    let mut out = Vec::new();
    let Some(hooks) = doc.root.get("hooks") else {
        return out;
    };
    for m in hooks.members() {
        for group in m.value.items() {
            if let Some(hook) = our_group(group) {
                let node = group
                    .get("hooks")
                    .and_then(|h| h.items().first())
                    .and_then(|h| h.get("command"));
                out.push(Registered {
                    event: m.key.clone(),
                    hook,
                    command: node.and_then(Node::as_str).unwrap_or_default().to_owned(),
                    command_span: node.map_or((0, 0), |c| (c.start, c.end)),
                });
            }
        }
    }
    out
}

/// What `bir install` did to one settings file, for `bir uninstall`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookChange {
    pub client: String,
    pub file: PathBuf,
    /// `user` or `project`.
    pub scope: String,
    /// The project keys whose `bir install` asked for these hooks; uninstall
    /// of one project takes the hooks away only when none is left (user
    /// settings serve every project).
    pub projects: Vec<String>,
    /// The file did not exist: uninstall removes it when nothing but bir's
    /// edit was ever in it.
    #[serde(default)]
    pub created_file: bool,
    /// 1 when the `hooks` object existed before (0: bir created it and
    /// prunes it when it is left empty).
    #[serde(default)]
    pub keep_parents: usize,
    /// The events bir added a group to, in the order it added them.
    pub events: Vec<HookEvent>,
    pub file_sha256: String,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookEvent {
    pub event: String,
    /// bir created the event's array (uninstall removes it when empty).
    #[serde(default)]
    pub created: bool,
    /// The array existed but was empty with this whitespace inside (other
    /// than none): put back when bir's group goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_inner: Option<String>,
}

/// The result of [`install_edit`].
#[derive(Debug, Clone, Default)]
pub struct Planned {
    /// The new bytes (None: nothing to change).
    pub bytes: Option<Vec<u8>>,
    /// Events given a bir group now.
    pub events: Vec<HookEvent>,
    pub keep_parents: usize,
    pub created_file: bool,
    /// bir groups that ran another bir program (a moved or deleted
    /// binary) and now run this one.
    pub repointed: usize,
    /// bir's `PreToolUse` group now says another call-id injection mode.
    pub reflagged: usize,
    /// Events that already had this bir's group.
    pub already: usize,
}

/// Registers every event's group in `before` (None: no file yet). A file
/// that is not a JSON object, or whose `hooks` (or an event's value) has
/// an unexpected type, is refused with nothing changed.
#[cfg(test)]
pub fn install_edit(before: Option<&[u8]>, form: &HookForm, file: &Path) -> Result<Planned, Error> {
    install_edit_skipping(before, form, file, &[])
}

/// The error for a settings file bir cannot edit safely (`what` says
/// where, after the file's path): refused, with nothing changed. Shared by
/// every edit of Claude Code's settings (hooks, the mod).
pub fn unreadable_settings(file: &Path) -> impl Fn(String) -> Error + '_ {
    move |what: String| {
        Error::failure(format!(
            "{}:{what}; bir does not edit a settings file it cannot read, and nothing was changed",
            file.display()
        ))
    }
}

/// [`install_edit`] without the events in `skip` (their groups are neither
/// added nor removed).
pub fn install_edit_skipping(
    before: Option<&[u8]>,
    form: &HookForm,
    file: &Path,
    skip: &[&str],
) -> Result<Planned, Error> {
    let created_file = before.is_none();
    let mut bytes = before.map_or_else(|| NEW_FILE.to_vec(), <[u8]>::to_vec);
    let refuse = unreadable_settings(file);
    let doc = Doc::parse(&bytes, Flavor::Json).map_err(|e| refuse(e.to_string()))?;
    if !doc.root.is_object() {
        return Err(refuse(" the top level is not a JSON object".into()));
    }
    let keep_parents = match doc.root.get("hooks") {
        None => 0,
        Some(h) if h.is_object() => 1,
        Some(_) => return Err(refuse(" `hooks` is not an object".into())),
    };
    let mut plan = Planned {
        keep_parents,
        created_file,
        ..Planned::default()
    };
    // Point stale bir groups (another path, or other correlation flags
    // than the form chose) at this bir, span by span.
    let mut stale: Vec<Registered> = registered(&doc)
        .into_iter()
        .filter(|r| r.command != form.command_over(&r.hook))
        .collect();
    stale.sort_by_key(|r| std::cmp::Reverse(r.command_span.0));
    for r in &stale {
        if r.command_span == (0, 0) {
            continue;
        }
        let doc = Doc::parse(&bytes, Flavor::Json).map_err(|e| refuse(e.to_string()))?;
        bytes = doc.splice(
            r.command_span.0,
            r.command_span.1,
            &json_string(&form.command_over(&r.hook)),
        );
        if Path::new(&r.hook.program) == form.program {
            plan.reflagged += 1;
        } else {
            plan.repointed += 1;
        }
    }
    for &event in EVENTS.iter().filter(|e| !skip.contains(e)) {
        let doc = Doc::parse(&bytes, Flavor::Json).map_err(|e| refuse(e.to_string()))?;
        let path = ["hooks", event];
        match doc.root.at(&path) {
            None => {
                bytes = doc.set(&path, &format!("[{}]", form.group(event)))?;
                plan.events.push(HookEvent {
                    event: event.into(),
                    created: true,
                    empty_inner: None,
                });
            }
            Some(arr) if matches!(arr.kind, Kind::Array(_)) => {
                if arr
                    .items()
                    .iter()
                    .any(|g| our_group(g).is_some_and(|h| h.event == event))
                {
                    plan.already += 1;
                    continue;
                }
                let inner = &doc.text[arr.start + 1..arr.end - 1];
                let empty_inner =
                    (arr.items().is_empty() && !inner.is_empty()).then(|| inner.to_owned());
                bytes = doc.push_item(&path, &form.group(event))?;
                plan.events.push(HookEvent {
                    event: event.into(),
                    created: false,
                    empty_inner,
                });
            }
            Some(_) => return Err(refuse(format!(" `hooks.{event}` is not an array"))),
        }
    }
    let changed = before != Some(&bytes[..]);
    plan.bytes = changed.then_some(bytes);
    Ok(plan)
}

/// Takes bir's groups of `change` out of `before`. Returns the new bytes
/// (None: nothing to change) and whether the file is now exactly what bir
/// created, so it can be removed.
pub fn uninstall_edit(
    before: &[u8],
    change: &HookChange,
) -> Result<(Option<Vec<u8>>, bool), Error> {
    let mut bytes = before.to_vec();
    // bir groups under events the ledger does not name (ones an install
    // repointed, or that lost their ledger entry): the groups go, the
    // arrays stay (nothing says bir made them).
    let doc = Doc::parse(&bytes, Flavor::Jsonc).map_err(|e| Error::failure(e.to_string()))?;
    let mut unrecorded: Vec<HookEvent> = registered(&doc)
        .into_iter()
        .filter(|r| !change.events.iter().any(|c| c.event == r.event))
        .map(|r| HookEvent {
            event: r.event,
            created: false,
            empty_inner: None,
        })
        .collect();
    unrecorded.dedup();
    for ev in unrecorded.iter().chain(change.events.iter().rev()) {
        // Every bir group of this event (newest first keeps indices valid).
        loop {
            let doc =
                Doc::parse(&bytes, Flavor::Jsonc).map_err(|e| Error::failure(e.to_string()))?;
            let path = ["hooks", ev.event.as_str()];
            let Some(arr) = doc.root.at(&path) else {
                break;
            };
            let Some(index) = arr.items().iter().rposition(|g| our_group(g).is_some()) else {
                let (start, end) = (arr.start, arr.end);
                if arr.items().is_empty() {
                    if ev.created {
                        bytes = doc
                            .remove_pruning(&path, change.keep_parents)
                            .ok_or("internal: the hooks entry vanished")?;
                    } else if let Some(inner) = &ev.empty_inner {
                        bytes = doc.splice(start + 1, end - 1, inner);
                    }
                }
                break;
            };
            bytes = doc
                .remove_item(&path, index)
                .ok_or("internal: the hook group vanished")?;
        }
    }
    // Nothing but an empty object left in a file bir created.
    let pristine = change.created_file
        && Doc::parse(&bytes, Flavor::Jsonc)
            .is_ok_and(|d| d.root.is_object() && d.root.members().is_empty());
    Ok(((bytes != before).then_some(bytes), pristine))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ledger record of an install into `s.json`.
    fn recorded(events: Vec<HookEvent>, created_file: bool, keep_parents: usize) -> HookChange {
        HookChange {
            client: "claude-code".into(),
            file: "s.json".into(),
            scope: "user".into(),
            projects: vec![],
            created_file,
            keep_parents,
            events,
            file_sha256: String::new(),
            at: String::new(),
        }
    }

    fn form(p: &str) -> HookForm {
        HookForm {
            program: PathBuf::from(p),
            subcommand: basename(p) != "bir-hooks",
            correlation: None,
        }
    }

    #[test]
    fn commands_are_quoted_for_sh_and_read_back() {
        let f = form("/opt/my tools/bir");
        assert_eq!(f.command("Stop"), "'/opt/my tools/bir' hooks Stop");
        assert_eq!(
            parse_ours(&f.command("Stop")),
            Some(OurHook {
                program: "/opt/my tools/bir".into(),
                event: "Stop".into(),
                flags: Vec::new(),
            })
        );
        let f = form("/usr/local/bin/bir-hooks");
        assert_eq!(
            f.command("PreToolUse"),
            "/usr/local/bin/bir-hooks PreToolUse"
        );
        assert_eq!(
            parse_ours("\"/x/bir-hooks\" Stop").map(|h| h.program),
            Some("/x/bir-hooks".into())
        );
        assert_eq!(shell_quote("/a/it's"), r"'/a/it'\''s'");
        assert_eq!(
            parse_ours(&form("/a/it's/bir").command("X")).map(|h| h.program),
            Some("/a/it's/bir".into())
        );
        // Not bir's: other programs, pipes, extra words.
        for cmd in [
            "python3 hook.py Stop",
            "/x/bir-hooks Stop | tee log",
            "/x/bir-hooks Stop extra",
            "/x/bir proxy Stop",
            "$HOME/bir-hooks Stop",
            "'/x/bir-hooks Stop",
        ] {
            assert_eq!(parse_ours(cmd), None, "{cmd}");
        }
    }

    #[test]
    fn with_the_mod_the_events_it_carries_are_not_registered() {
        let f = form("/b/bir-hooks");
        let file = Path::new("settings.json");
        let plan = install_edit_skipping(None, &f, file, LEFT_TO_THE_MOD).expect("edit");
        let events: Vec<&str> = plan.events.iter().map(|e| e.event.as_str()).collect();
        assert_eq!(events.len(), EVENTS.len() - LEFT_TO_THE_MOD.len());
        assert!(!events.contains(&"MessageDisplay"));
        assert!(events.contains(&"PreToolUse") && events.contains(&"PostToolBatch"));
        // Registered before without the mod: left as it is, not removed.
        let full = install_edit(None, &f, file)
            .expect("edit")
            .bytes
            .expect("bytes");
        let again = install_edit_skipping(Some(&full), &f, file, LEFT_TO_THE_MOD).expect("edit");
        assert!(again.bytes.is_none(), "nothing to add, nothing taken away");
    }

    #[test]
    fn install_then_uninstall_gives_back_every_byte() {
        let f = form("/b/bir-hooks");
        let file = Path::new("settings.json");
        for before in [
            "{\n  \"theme\": \"dark\"\n}\n",
            "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"mine\"}]}], \"PreToolUse\": []}}",
            "{\n\t\"hooks\": {\n\t\t\"Stop\": [ ]\n\t}\n}",
            "{}",
        ] {
            let plan = install_edit(Some(before.as_bytes()), &f, file).expect("install");
            let after = plan.bytes.expect("changed");
            let doc = Doc::parse(&after, Flavor::Json).expect("valid JSON");
            let ours = registered(&doc);
            assert_eq!(ours.len(), EVENTS.len(), "{before}");
            assert!(!ours.iter().any(|r| r.event == "WorktreeCreate"));
            // The user's hook stays first.
            if before.contains("mine") {
                let stop = doc.root.at(&["hooks", "Stop"]).expect("Stop");
                assert_eq!(
                    doc.raw(&stop.items()[0]),
                    "{\"hooks\": [{\"type\": \"command\", \"command\": \"mine\"}]}"
                );
            }
            // Idempotent.
            let again = install_edit(Some(&after), &f, file).expect("again");
            assert!(again.bytes.is_none() && again.already == EVENTS.len());
            let change = recorded(plan.events.clone(), false, plan.keep_parents);
            let (back, pristine) = uninstall_edit(&after, &change).expect("uninstall");
            assert_eq!(
                String::from_utf8(back.expect("changed")).expect("utf8"),
                before
            );
            assert!(!pristine);
        }
        // No file: created, and recognised as pristine after uninstall.
        let plan = install_edit(None, &f, file).expect("install");
        assert!(plan.created_file);
        let change = recorded(plan.events, true, plan.keep_parents);
        let (back, pristine) =
            uninstall_edit(&plan.bytes.expect("bytes"), &change).expect("uninstall");
        assert_eq!(back.as_deref(), Some(&b"{}\n"[..]));
        assert!(pristine);
    }

    /// `bir install --correlate inject` writes the flag on PreToolUse only;
    /// a later plain `bir install` keeps it, `--correlate meta` takes it
    /// away, and uninstall still gives back every byte.
    #[test]
    fn the_correlation_flag_rides_on_pre_tool_use_and_is_kept_until_changed() {
        let file = Path::new("settings.json");
        let before = "{\n  \"theme\": \"dark\"\n}\n";
        let inject = HookForm {
            correlation: Some(Correlation::Inject),
            ..form("/b/bir-hooks")
        };
        let plan = install_edit(Some(before.as_bytes()), &inject, file).expect("install");
        let after = plan.bytes.expect("changed");
        let doc = Doc::parse(&after, Flavor::Json).expect("json");
        let ours = registered(&doc);
        assert_eq!(ours.len(), EVENTS.len());
        for r in &ours {
            if r.event == "PreToolUse" {
                assert_eq!(r.command, "/b/bir-hooks PreToolUse --correlate inject");
                assert_eq!(r.hook.flags, ["--correlate", "inject"]);
            } else {
                assert_eq!(r.command, format!("/b/bir-hooks {}", r.event));
            }
        }
        // A plain install keeps it.
        let again = install_edit(Some(&after), &form("/b/bir-hooks"), file).expect("again");
        assert!(again.bytes.is_none(), "nothing to change");
        // `--no-correlation` rewrites that one command, nothing else.
        let off = HookForm {
            correlation: Some(Correlation::Off),
            ..form("/b/bir-hooks")
        };
        let plan_off = install_edit(Some(&after), &off, file).expect("off");
        assert_eq!((plan_off.reflagged, plan_off.repointed), (1, 0));
        let off_bytes = plan_off.bytes.expect("changed");
        let text = String::from_utf8(off_bytes.clone()).expect("utf8");
        assert!(
            text.contains("\"/b/bir-hooks PreToolUse --no-correlation\""),
            "{text}"
        );
        assert_eq!(
            text.len(),
            String::from_utf8_lossy(&after).len() - "--correlate inject".len()
                + "--no-correlation".len()
        );
        // `--correlate meta`: the plain command again.
        let meta = HookForm {
            correlation: Some(Correlation::Passive),
            ..form("/b/bir-hooks")
        };
        let plain = install_edit(Some(&off_bytes), &meta, file).expect("meta");
        let plain = plain.bytes.expect("changed");
        let fresh =
            install_edit(Some(before.as_bytes()), &form("/b/bir-hooks"), file).expect("fresh");
        assert_eq!(plain, fresh.bytes.expect("bytes"));
        // Uninstall from any of them gives the user's file back.
        let change = recorded(plan.events.clone(), false, plan.keep_parents);
        for state in [&after, &off_bytes] {
            let (back, _) = uninstall_edit(state, &change).expect("uninstall");
            assert_eq!(
                String::from_utf8(back.expect("changed")).expect("utf8"),
                before
            );
        }
        // Other words after the event are not bir's flags: not bir's group.
        assert!(parse_ours("/b/bir-hooks PreToolUse --correlate sometimes").is_none());
        assert!(parse_ours("/b/bir-hooks PreToolUse --verbose").is_none());
        assert_eq!(
            parse_ours("/b/bir hooks PreToolUse --correlate=off").map(|h| h.flags),
            Some(vec!["--correlate=off".to_owned()])
        );
    }

    #[test]
    fn a_stale_path_is_repointed_and_bad_files_are_refused() {
        let old = form("/gone/bir-hooks");
        let new = form("/new/bir");
        let file = Path::new("s.json");
        let plan = install_edit(Some(b"{}"), &old, file).expect("install");
        let after = plan.bytes.expect("bytes");
        let plan = install_edit(Some(&after), &new, file).expect("repoint");
        assert_eq!(plan.repointed, EVENTS.len());
        let repointed = plan.bytes.expect("bytes");
        let doc = Doc::parse(&repointed, Flavor::Json).expect("json");
        assert!(
            registered(&doc)
                .iter()
                .all(|r| r.hook.program == "/new/bir")
        );
        // With no ledger record of the events (lost), uninstall still takes
        // bir's groups out, and leaves the arrays.
        let change = recorded(vec![], false, 1);
        let (back, _) = uninstall_edit(&repointed, &change).expect("uninstall");
        let doc = Doc::parse(&back.expect("changed"), Flavor::Json).expect("json");
        assert!(registered(&doc).is_empty());
        assert_eq!(
            doc.root.at(&["hooks", "Stop"]).map(|a| a.items().len()),
            Some(0)
        );
        for bad in [
            "{",
            "[]",
            "{\"hooks\": []}",
            "{\"hooks\": {\"Stop\": {}}}",
            "{\"a\": 1,}",
        ] {
            let err = install_edit(Some(bad.as_bytes()), &new, file).expect_err(bad);
            assert!(err.to_string().contains("nothing was changed"), "{err}");
        }
    }
}
