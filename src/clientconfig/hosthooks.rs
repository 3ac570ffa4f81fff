//! Other agents' hooks: `bir install --client codex|gemini|copilot|cursor|vscode`
//! registers `<bir-hooks> --host <agent> <Event>` for every event that
//! agent's adapter (`bound::hosts`) reads, in the agent's own hook file, at
//! user or project scope. For Codex and Gemini (`--hooks http`, the
//! default) every event runs a [`post_script`] instead: bash builtins that
//! post the payload to the daemon's hook port, no bir process, handing it
//! to `bir-hooks` only when no daemon listens (`--hooks command` keeps
//! `bir-hooks`); either form is recognised as bir's, and installing again
//! converts one into the other.
//!
//! | agent | user file | project file | entry |
//! |---|---|---|---|
//! | Codex CLI | `$CODEX_HOME/hooks.json` (`~/.codex`) | `.codex/hooks.json` | `{"hooks":[{"type":"command","command":…,"timeout":5}]}` (`PreToolUse`: `"matcher"`, [`Host::before_tool_matcher`]) |
//! | Gemini CLI | `~/.gemini/settings.json` | `.gemini/settings.json` | `{"matcher":"*","hooks":[{"type":"command","command":…,"timeout":5000}]}` (`PreCompress`: `"matcher":"manual"`; `BeforeTool`: [`Host::before_tool_matcher`]) |
//! | Copilot CLI | `~/.copilot/hooks/bir.json` | `.github/hooks/bir.json` | `{"type":"command","bash":…,"timeoutSec":5}` |
//! | Cursor | `~/.cursor/hooks.json` | `.cursor/hooks.json` | `{"command":…}` |
//! | VS Code | `~/.copilot/hooks/bir-vscode.json` | `.github/hooks/bir-vscode.json` | `{"type":"command","command":…,"timeout":5}` |
//!
//! Edits are spans ([`super::jsonedit`]): the user's hooks keep their
//! bytes and order; bir's entries are appended to each event's array and
//! recognised by their command (a `bir-hooks … --host <agent>` command or
//! a post script naming that agent), never by position. The ledger
//! (`hostHooks`) records which arrays and parents bir created, so `bir
//! uninstall --client <agent>` gives the file back byte for byte (a file
//! bir created is removed).
//!
//! Codex runs only hooks whose hash the user trusted: see [`codex_trust`].

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};

use super::atomic;
use super::diff;
use super::hook_entries::{
    HookChange, HookEvent, HookForm, HttpForm, Transport, remove_ours, shell_quote, shell_words,
};
use super::hook_install::{
    UndoWords, forget_in_ledger, preview_undo, record_in_ledger, undo_hook_file,
};
use super::jsonedit::{Doc, Flavor, Kind, Node, json_string};
use super::ledger;
use super::post_script;
use crate::bound::hosts::Host;
use crate::codec::sha256_hex;
use crate::daemon::hookaddr::HookAddr;
use crate::error::{Context, Error};
use crate::output::out;

/// Seconds an agent waits for one hook (bir's hook gives up well within).
const TIMEOUT_SECS: u64 = 5;

/// Where an agent's hooks go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    User,
    Project,
}

impl Scope {
    pub(crate) fn parse(word: &str) -> Result<Scope, Error> {
        match word {
            "user" => Ok(Scope::User),
            "project" => Ok(Scope::Project),
            other => Err(Error::usage(format!(
                "--scope takes user or project, not `{other}`"
            ))),
        }
    }
    fn label(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
        }
    }
}

/// The agents `bir install --client` registers hooks for.
pub(crate) fn host_of_client(client: &str) -> Option<Host> {
    match client {
        "codex" => Some(Host::Codex),
        "gemini" | "gemini-cli" => Some(Host::Gemini),
        "copilot" | "copilot-cli" => Some(Host::Copilot),
        "cursor" => Some(Host::Cursor),
        "vscode" | "vs-code" => Some(Host::VsCode),
        _ => None,
    }
}

/// The events bir registers for `host`: every one its adapter reads.
pub(crate) fn events(host: Host) -> &'static [&'static str] {
    match host {
        Host::Codex => &[
            "SessionStart",
            "SessionEnd",
            "UserPromptSubmit",
            "PreToolUse",
            "PermissionRequest",
            "PostToolUse",
            "PreCompact",
            "PostCompact",
            "SubagentStart",
            "SubagentStop",
            "Stop",
            "Interrupt",
        ],
        Host::Gemini => &[
            "SessionStart",
            "SessionEnd",
            "BeforeAgent",
            "AfterAgent",
            "BeforeTool",
            "AfterTool",
            "PreCompress",
            "Notification",
        ],
        Host::Copilot => &[
            "sessionStart",
            "sessionEnd",
            "userPromptSubmitted",
            "preToolUse",
            "postToolUse",
            "errorOccurred",
            "agentStop",
            "subagentStop",
            "preCompact",
        ],
        Host::Cursor => &[
            "sessionStart",
            "sessionEnd",
            "beforeSubmitPrompt",
            "preToolUse",
            "postToolUse",
            "postToolUseFailure",
            "subagentStart",
            "subagentStop",
            "afterAgentThought",
            "afterAgentResponse",
            "stop",
        ],
        Host::VsCode => &[
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "PreCompact",
            "SubagentStart",
            "SubagentStop",
            "Stop",
        ],
        Host::ClaudeCode => &[],
    }
}

/// The hook file of `host` at `scope` (`home`: the user's home; `project`:
/// the project directory).
pub(crate) fn hook_file(host: Host, scope: Scope, home: &Path, project: &Path) -> PathBuf {
    let codex_home = || {
        std::env::var_os("CODEX_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".codex"))
    };
    match (host, scope) {
        (Host::Codex, Scope::User) => codex_home().join("hooks.json"),
        (Host::Codex, Scope::Project) => project.join(".codex/hooks.json"),
        (Host::Gemini, Scope::User) => home.join(".gemini/settings.json"),
        (Host::Gemini, Scope::Project) => project.join(".gemini/settings.json"),
        (Host::Copilot, Scope::User) => home.join(".copilot/hooks/bir.json"),
        (Host::Copilot, Scope::Project) => project.join(".github/hooks/bir.json"),
        (Host::Cursor, Scope::User) => home.join(".cursor/hooks.json"),
        (Host::Cursor, Scope::Project) => project.join(".cursor/hooks.json"),
        (Host::VsCode, Scope::User) => home.join(".copilot/hooks/bir-vscode.json"),
        (Host::VsCode, Scope::Project) => project.join(".github/hooks/bir-vscode.json"),
        (Host::ClaudeCode, _) => home.join(".claude/settings.json"),
    }
}

/// Whether `host`'s events are posted by [`post_script`] under `form`:
/// Codex's and Gemini's, with `--hooks http` (the default). A session's
/// edges too: with the daemon down the script hands the payload to
/// `bir-hooks`, which starts it; with it up, the daemon reads the host's
/// version from the process the script names (`$PPID`), as `bir-hooks`
/// read it from its own ancestry.
fn posted_by_script(form: &HookForm, host: Host) -> Option<&HookAddr> {
    form.http
        .as_ref()
        .filter(|_| matches!(host, Host::Codex | Host::Gemini))
        .map(|h| &h.addr)
}

/// The command an agent runs for `event`.
pub(crate) fn command(form: &HookForm, host: Host, event: &str) -> String {
    let bir_hooks = bir_hooks_command(form, host, event);
    match posted_by_script(form, host) {
        Some(addr) => post_script::script(addr, host, event, &bir_hooks),
        None => bir_hooks,
    }
}

/// `<bir-hooks> --host <agent> <event>`, as a shell command.
fn bir_hooks_command(form: &HookForm, host: Host, event: &str) -> String {
    let mut cmd = shell_quote(&form.program.to_string_lossy());
    if form.subcommand {
        cmd.push_str(" hooks");
    }
    cmd.push_str(" --host ");
    cmd.push_str(host.flag());
    cmd.push(' ');
    cmd.push_str(event);
    cmd
}

/// The hook command in words, for install's output (`<Event>` in place of
/// an event name; a post script is named, not shown).
fn display(form: &HookForm, host: Host) -> String {
    match posted_by_script(form, host) {
        Some(addr) => format!(
            "a bash post to {} (no daemon there: {})",
            addr.url("<Event>"),
            command(
                &HookForm {
                    http: None,
                    ..form.clone()
                },
                host,
                "<Event>"
            )
        ),
        None => command(form, host, "<Event>"),
    }
}

/// Gemini CLI 0.61.0 fires `PreCompress` (`trigger: "auto"`) before every
/// model call and waits for its hooks; only a manual compression is news
/// (the adapter drops the automatic ones). Its matcher for `PreCompress` is
/// the trigger, compared whole: `"manual"` spares the session a hook
/// process per model call.
///
/// `BeforeTool` fires only for the tools [`Host::before_tool_matcher`]
/// names: `AfterTool` carries every other call whole.
fn gemini_matcher(event: &str) -> &'static str {
    match event {
        "PreCompress" => "manual",
        "BeforeTool" => Host::Gemini.before_tool_matcher().unwrap_or("*"),
        _ => "*",
    }
}

/// The `matcher` of bir's entry for `event` (None: the entry has none).
/// Codex's `PreToolUse` fires only for the tools
/// [`Host::before_tool_matcher`] names: `PostToolUse` carries every other
/// call whole.
fn matcher(host: Host, event: &str) -> Option<&'static str> {
    match (host, event) {
        (Host::Gemini, _) => Some(gemini_matcher(event)),
        (Host::Codex, "PreToolUse") => host.before_tool_matcher(),
        _ => None,
    }
}

/// The entry bir appends to `event`'s array, as JSON text.
fn entry(form: &HookForm, host: Host, event: &str) -> String {
    let cmd = json_string(&command(form, host, event));
    match host {
        Host::Copilot => {
            format!(r#"{{"type":"command","bash":{cmd},"timeoutSec":{TIMEOUT_SECS}}}"#)
        }
        Host::Cursor => format!(r#"{{"command":{cmd}}}"#),
        _ => {
            // Gemini counts its timeout in milliseconds.
            let timeout = match host {
                Host::Gemini => TIMEOUT_SECS * 1000,
                _ => TIMEOUT_SECS,
            };
            let hooks =
                format!(r#""hooks":[{{"type":"command","command":{cmd},"timeout":{timeout}}}]"#);
            match matcher(host, event) {
                Some(m) => format!(r#"{{"matcher":{},{hooks}}}"#, json_string(m)),
                None => format!("{{{hooks}}}"),
            }
        }
    }
}

/// What a new hook file starts as.
fn new_file(host: Host) -> &'static [u8] {
    match host {
        Host::Copilot | Host::Cursor => b"{\n  \"version\": 1\n}\n",
        _ => b"{\n}\n",
    }
}

/// `Some(event)` when `command` is a bir hook command for `host`: a
/// `bir-hooks --host <agent> <Event>` command or a [`post_script`].
fn ours(command: &str, host: Host) -> Option<String> {
    if let Some((event, word)) = post_script::parse(command) {
        return (Host::parse(&word) == Some(host)).then_some(event);
    }
    let words = shell_words(command)?;
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_owned();
    let rest = match words.as_slice() {
        [p, rest @ ..] if base(p) == "bir-hooks" => rest,
        [p, sub, rest @ ..] if sub == "hooks" && base(p).starts_with("bir") => rest,
        _ => return None,
    };
    match rest {
        [flag, h, event] if flag == "--host" && Host::parse(h) == Some(host) => Some(event.clone()),
        _ => None,
    }
}

/// The command of one of bir's entries (a grouped entry's one hook, or a
/// direct entry's `command`/`bash`).
fn entry_command(node: &Node) -> Option<&str> {
    let direct = ["command", "bash"]
        .iter()
        .find_map(|k| node.get(k).and_then(Node::as_str));
    direct.or_else(|| {
        node.get("hooks")
            .and_then(|hs| hs.items().first())
            .and_then(|h| h.get("command"))
            .and_then(Node::as_str)
    })
}

/// Whether an entry of an event's array is one bir wrote for `host`.
fn our_entry(node: &Node, host: Host) -> bool {
    let direct = ["command", "bash"]
        .iter()
        .filter_map(|k| node.get(k).and_then(Node::as_str))
        .any(|c| ours(c, host).is_some());
    let grouped = node.get("hooks").is_some_and(|hs| {
        hs.items().len() == 1
            && hs.items()[0]
                .get("command")
                .and_then(Node::as_str)
                .is_some_and(|c| ours(c, host).is_some())
    });
    direct || grouped
}

fn flavor(host: Host) -> Flavor {
    match host {
        // Gemini's settings.json may hold comments.
        Host::Gemini => Flavor::Jsonc,
        _ => Flavor::Json,
    }
}

/// The result of [`install_edit`].
#[derive(Debug, Default)]
pub(crate) struct Planned {
    pub bytes: Option<Vec<u8>>,
    pub events: Vec<HookEvent>,
    pub keep_parents: usize,
    pub created_file: bool,
    pub already: usize,
    /// bir's entries rewritten to today's form (their matcher).
    pub updated: usize,
}

/// Appends bir's entry to every event of `host` in `before` (None: no file
/// yet). A file that is not a JSON object, or whose `hooks` or an event's
/// value has another type, is refused with nothing changed.
pub(crate) fn install_edit(
    before: Option<&[u8]>,
    form: &HookForm,
    host: Host,
    file: &Path,
) -> Result<Planned, Error> {
    let created_file = before.is_none();
    let mut bytes = before.map_or_else(|| new_file(host).to_vec(), <[u8]>::to_vec);
    let refuse = |what: String| {
        Error::failure(format!(
            "{}:{what}; bir does not edit a hook file it cannot read, and nothing was changed",
            file.display()
        ))
    };
    let doc = Doc::parse(&bytes, flavor(host)).map_err(|e| refuse(e.to_string()))?;
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
    for &event in events(host) {
        let doc = Doc::parse(&bytes, flavor(host)).map_err(|e| refuse(e.to_string()))?;
        let path = ["hooks", event];
        match doc.root.at(&path) {
            None => {
                bytes = doc.set(&path, &format!("[{}]", entry(form, host, event)))?;
                plan.events.push(HookEvent {
                    event: event.into(),
                    created: true,
                    empty_inner: None,
                });
            }
            Some(arr) if matches!(arr.kind, Kind::Array(_)) => {
                if let Some(index) = arr.items().iter().position(|e| our_entry(e, host)) {
                    // An entry an older bir wrote with another matcher
                    // (Gemini's `BeforeTool` and Codex's `PreToolUse` once
                    // matched every tool) is replaced by today's, at the
                    // array's end: uninstall takes bir's entries out
                    // wherever they are, so its bytes stay exact.
                    let have = arr.items()[index].get("matcher").and_then(Node::as_str);
                    if have == matcher(host, event)
                        && entry_command(&arr.items()[index])
                            .is_none_or(|c| c == command(form, host, event))
                    {
                        plan.already += 1;
                        continue;
                    }
                    let without = doc
                        .remove_item(&path, index)
                        .ok_or_else(|| refuse(format!(" `hooks.{event}` changed under bir")))?;
                    let doc =
                        Doc::parse(&without, flavor(host)).map_err(|e| refuse(e.to_string()))?;
                    bytes = doc
                        .push_item(&path, &entry(form, host, event))
                        .map_err(refuse)?;
                    plan.updated += 1;
                    continue;
                }
                let inner = &doc.text[arr.start + 1..arr.end - 1];
                let empty_inner =
                    (arr.items().is_empty() && !inner.is_empty()).then(|| inner.to_owned());
                bytes = doc
                    .push_item(&path, &entry(form, host, event))
                    .map_err(refuse)?;
                plan.events.push(HookEvent {
                    event: event.into(),
                    created: false,
                    empty_inner,
                });
            }
            Some(_) => return Err(refuse(format!(" `hooks.{event}` is not an array"))),
        }
    }
    plan.bytes = (before != Some(&bytes[..])).then_some(bytes);
    Ok(plan)
}

/// Takes bir's entries of `change` out of `before`: the new bytes (None:
/// nothing to change) and whether the file is now what bir created (it is
/// then removed).
pub(crate) fn uninstall_edit(
    before: &[u8],
    host: Host,
    change: &HookChange,
) -> Result<(Option<Vec<u8>>, bool), Error> {
    let mut bytes = before.to_vec();
    for ev in change.events.iter().rev() {
        bytes = remove_ours(bytes, ev, change.keep_parents, &|e| our_entry(e, host))?;
    }
    // Nothing but what a new file starts with is left in a file bir
    // created: it goes.
    let pristine = change.created_file
        && Doc::parse(&bytes, Flavor::Jsonc).is_ok_and(|d| {
            d.root.is_object()
                && d.root
                    .members()
                    .iter()
                    .all(|m| m.key == "version" && matches!(host, Host::Copilot | Host::Cursor))
        });
    Ok(((bytes != before).then_some(bytes), pristine))
}

/// `bir install --client <agent>`: registers the hooks (and, for Codex,
/// gets them trusted). Prints what it does; writes nothing on `dry_run`.
pub(crate) fn install(
    host: Host,
    scope: Scope,
    transport: Transport,
    project: &Path,
    dry_run: bool,
) -> Result<bool, Error> {
    let home = home::home_dir().ok_or_else(|| Error::failure("no home directory"))?;
    let file = hook_file(host, scope, &home, project);
    // A preview writes nothing: not even the hook address the install
    // would choose (its port and token are shown as placeholders then).
    let form = match hook_form(host, transport, !dry_run) {
        Err(_) if dry_run => {
            let mut form = HookForm::detect();
            if transport == Transport::Http && matches!(host, Host::Codex | Host::Gemini) {
                form.http = Some(HttpForm {
                    addr: HookAddr {
                        port: 0,
                        token: "<hook token, chosen at install>".into(),
                    },
                    pre_tool_query: String::new(),
                });
            }
            form
        }
        other => other?,
    };
    out(&format!(
        "{} hooks — {} ({} scope)",
        host.app(),
        file.display(),
        scope.label()
    ));
    if dry_run {
        let before = atomic::read(&file)?;
        let plan = install_edit(before.as_deref(), &form, host, &file)?;
        match &plan.bytes {
            Some(after) => {
                out(&format!(
                    "  register   {} events → {}{}",
                    plan.events.len(),
                    display(&form, host),
                    if plan.updated > 0 {
                        format!(" (and update {} of bir's)", plan.updated)
                    } else {
                        String::new()
                    }
                ));
                out(&diff::unified(
                    &file.display().to_string(),
                    before.as_deref().unwrap_or_default(),
                    after,
                ));
            }
            None => out(&format!("  registered {} events already", plan.already)),
        }
        return Ok(false);
    }
    if let Some(dir) = file.parent()
        && !dir.exists()
    {
        std::fs::create_dir_all(dir).context(|| format!("cannot create {}", dir.display()))?;
    }
    let planned = RefCell::new(None);
    let outcome = atomic::update(&file, &mut |before| {
        let plan = install_edit(before, &form, host, &file)?;
        let bytes = plan.bytes.clone();
        *planned.borrow_mut() = Some(plan);
        Ok(bytes)
    })?;
    let plan = planned.into_inner().unwrap_or_default();
    let target = outcome.target.clone();
    // The project the install ran in: sessions are recorded there (and
    // below it), as for Claude Code (`crate::scope`).
    let key = super::claude::project_key(&project.to_string_lossy());
    let listed = ledger::load().is_ok_and(|l| {
        l.host_hooks
            .iter()
            .any(|h| h.file == target && h.projects.contains(&key))
    });
    let mut joined = false;
    if plan.events.is_empty() && !listed && plan.already > 0 {
        ledger::modify(&mut |l| {
            if let Some(h) = l.host_hooks.iter_mut().find(|h| h.file == target)
                && !h.projects.contains(&key)
            {
                h.projects.push(key.clone());
                joined = true;
            }
        })?;
        if joined {
            out(&format!(
                "  sessions in {} are now recorded (the hooks were registered already)",
                project.display()
            ));
        }
    }
    if !plan.events.is_empty() {
        let file_hash = sha256_hex(&outcome.after);
        record_in_ledger(
            host_hooks,
            &target,
            &|h| {
                h.events.extend(plan.events.iter().cloned());
                h.file_sha256 = file_hash.clone();
                if !h.projects.contains(&key) {
                    h.projects.push(key.clone());
                }
            },
            &|| {
                Some(HookChange {
                    client: host.flag().into(),
                    file: target.clone(),
                    scope: scope.label().into(),
                    transport: if posted_by_script(&form, host).is_some() {
                        Transport::Http
                    } else {
                        Transport::Command
                    },
                    projects: vec![key.clone()],
                    created_file: plan.created_file,
                    keep_parents: plan.keep_parents,
                    events: plan.events.clone(),
                    file_sha256: file_hash.clone(),
                    at: crate::time::rfc3339(std::time::SystemTime::now()),
                })
            },
            "remove bir's hooks from it by hand",
        )?;
        out(&format!(
            "  registered {} events → {}; your own hooks are untouched",
            plan.events.len(),
            display(&form, host)
        ));
    } else if plan.updated > 0 {
        out(&format!(
            "  updated {} of bir's hooks to today's form → {}; your own hooks are untouched",
            plan.updated,
            display(&form, host)
        ));
    } else {
        out(&format!("  already registered ({} events)", plan.already));
    }
    if host == Host::Codex {
        codex_trust::trust(&target, project);
    }
    if host == Host::Gemini && scope == Scope::Project {
        out("  note: Gemini CLI ignores project hooks in folders it does not trust");
    }
    Ok(outcome.changed || joined)
}

/// The form of `host`'s hooks for `transport`: with [`Transport::Http`]
/// (the default) Codex and Gemini post by [`post_script`] to the daemon's
/// hook address (`daemon::hookaddr`, chosen now the first time when
/// `choose`, else only read: `None` then when none was chosen yet); every
/// other agent, and `--hooks command`, runs `bir-hooks`.
fn hook_form(host: Host, transport: Transport, choose: bool) -> Result<HookForm, Error> {
    let mut form = HookForm::detect();
    if transport == Transport::Http && matches!(host, Host::Codex | Host::Gemini) {
        let home = crate::home::bir_home().ok_or("no home directory (set BIR_HOME or HOME)")?;
        let addr = if choose {
            crate::daemon::hookaddr::endpoint(&home)
                .context(|| format!("cannot choose the daemon's hook port in {}", home.display()))?
        } else {
            crate::daemon::hookaddr::read(&home).ok_or("no hook address chosen yet")?
        };
        form.http = Some(HttpForm {
            addr,
            pre_tool_query: String::new(),
        });
    }
    Ok(form)
}

/// `--hooks WORD[,WORD]` for another agent: `user` (default) or
/// `project`, and `http` (default: Codex and Gemini post by a bash script)
/// or `command` (`bir-hooks` for every event), in any order; `none`
/// registers no hooks (`Ok(None)`).
pub(crate) fn parse_hooks(words: &str) -> Result<Option<(Scope, Transport)>, Error> {
    let mut scope = Scope::User;
    let mut transport = Transport::Http;
    for word in words.split(',').map(str::trim) {
        match word {
            "http" => transport = Transport::Http,
            "command" => transport = Transport::Command,
            "none" | "off" => return Ok(None),
            other => {
                scope = Scope::parse(other).map_err(|_| {
                    Error::usage(format!(
                        "--hooks takes user or project, http or command (e.g. `project,command`), or none, not `{other}`"
                    ))
                })?
            }
        }
    }
    Ok(Some((scope, transport)))
}

/// `bir uninstall --client <agent>` (or every agent, `client` None):
/// takes bir's hooks out again. Returns false when something could not be
/// restored (reported).
pub(crate) fn uninstall(client: Option<&str>, dry_run: bool) -> bool {
    let Ok(ledger) = ledger::load() else {
        return true;
    };
    let selected: Vec<HookChange> = ledger
        .host_hooks
        .iter()
        .filter(|h| client.is_none_or(|c| host_of_client(c).is_some_and(|x| x.flag() == h.client)))
        .cloned()
        .collect();
    let mut ok = true;
    let mut done = Vec::new();
    for h in &selected {
        let Some(host) = Host::parse(&h.client) else {
            continue;
        };
        let remove_file = Cell::new(false);
        let mut edit = |before: Option<&[u8]>| -> Result<Option<Vec<u8>>, Error> {
            let Some(before) = before else {
                return Ok(None);
            };
            let (after, pristine) = uninstall_edit(before, host, h).map_err(|e| {
                Error::failure(format!("{}:{e}; nothing was changed", h.file.display()))
            })?;
            remove_file.set(pristine);
            Ok(after)
        };
        let label = format!("{} hooks", host.app());
        if dry_run {
            ok &= preview_undo(&h.file, &label, h.events.len(), &mut edit);
            continue;
        }
        // Said the same whether or not the file changed.
        let removed = "removed bir's entries; everything else is as it was";
        let words = UndoWords {
            label: &label,
            removed: removed.to_owned(),
            none_left: removed.to_owned(),
        };
        if undo_hook_file(&h.file, &mut edit, &remove_file, &words) {
            done.push(h.file.clone());
        } else {
            ok = false;
        }
    }
    if dry_run {
        return ok;
    }
    if client.is_none_or(|c| host_of_client(c) == Some(Host::Codex)) {
        ok &= codex_trust::untrust();
    }
    ok &= forget_in_ledger(host_hooks, &done, &[], &[], "the hooks were removed");
    ok
}

/// The ledger's list of other agents' hooks.
fn host_hooks(l: &mut ledger::Ledger) -> &mut Vec<HookChange> {
    &mut l.host_hooks
}

/// Whether bir's hooks for `host` are registered in any of its files
/// (`bir doctor`, `bir status`).
pub(crate) fn registered_files(host: Host, project: &Path) -> Vec<PathBuf> {
    let Some(home) = home::home_dir() else {
        return Vec::new();
    };
    [Scope::User, Scope::Project]
        .into_iter()
        .map(|s| hook_file(host, s, &home, project))
        .filter(|f| {
            atomic::read(f).ok().flatten().is_some_and(|b| {
                Doc::parse(&b, Flavor::Jsonc).is_ok_and(|d| {
                    d.root.get("hooks").is_some_and(|hs| {
                        hs.members()
                            .iter()
                            .any(|m| m.value.items().iter().any(|e| our_entry(e, host)))
                    })
                })
            })
        })
        .collect()
}

/// The agents installed for this user (their user directory exists), for
/// `bir setup` to offer: Codex (`$CODEX_HOME`, `~/.codex`), Gemini CLI
/// (`~/.gemini`), Copilot CLI (`~/.copilot`), Cursor (`~/.cursor`), VS Code
/// (`~/.vscode`).
pub(crate) fn agents_present() -> Vec<Host> {
    let Some(home) = home::home_dir() else {
        return Vec::new();
    };
    let codex_home = std::env::var_os("CODEX_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".codex"));
    [
        (Host::Codex, codex_home),
        (Host::Gemini, home.join(".gemini")),
        (Host::Copilot, home.join(".copilot")),
        (Host::Cursor, home.join(".cursor")),
        (Host::VsCode, home.join(".vscode")),
    ]
    .into_iter()
    .filter(|(_, dir)| dir.is_dir())
    .map(|(host, _)| host)
    .collect()
}

/// Whether [`install`] would change `host`'s hook file (quietly).
pub(crate) fn would_change(host: Host, scope: Scope, project: &Path) -> bool {
    let Some(home) = home::home_dir() else {
        return false;
    };
    let file = hook_file(host, scope, &home, project);
    // No hook address chosen yet: the install would choose one and write
    // the hooks that post to it.
    let Ok(form) = hook_form(host, Transport::Http, false) else {
        return true;
    };
    atomic::read(&file).ok().is_some_and(|before| {
        install_edit(before.as_deref(), &form, host, &file).is_ok_and(|p| p.bytes.is_some())
    })
}

/// `bir doctor` / `bir status`: one line per agent whose hooks bir
/// registered (in its user or this project's hook file).
pub(crate) fn status_lines(project: &Path) -> Vec<String> {
    // Read once, for the first agent whose hooks are registered.
    let loaded = std::cell::OnceCell::new();
    let runs = || loaded.get_or_init(newest_bound_runs).as_slice();
    [
        Host::Codex,
        Host::Gemini,
        Host::Copilot,
        Host::Cursor,
        Host::VsCode,
    ]
    .into_iter()
    .filter_map(|host| {
        let files = registered_files(host, project);
        (!files.is_empty()).then(|| {
            let list: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            vec![
                format!(
                    "{} hooks: registered in {} (sessions are recorded whole, as `{}` runs)",
                    host.app(),
                    list.join(", "),
                    host.app()
                ),
                format!("  {}", last_session_line(host, runs())),
            ]
        })
    })
    .flatten()
    .collect()
}

/// How many of the newest bound runs are read to find each agent's last
/// session (a status line must stay quick on a large store).
const LAST_SESSION_SCAN: usize = 50;

/// What an agent's last recorded session says of its binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LastSession {
    pub run_id: String,
    pub session_id: String,
    pub started_at: String,
    pub steps: usize,
    /// MCP calls joined to the wire live by a call id (Claude Code's
    /// `toolUseId`, Codex's `_meta.callId`).
    pub joined_by_id: usize,
    /// MCP calls joined to the wire live by the fingerprint fallback
    /// (server, tool, arguments, time).
    pub joined_by_fingerprint: usize,
    /// MCP calls told from the hooks only (no bound proxy's view of them).
    pub hooks_only: usize,
}

/// The newest bound run of `app` (`Host::app`) among `runs` (any order).
pub(crate) fn last_session(
    app: &str,
    runs: &[crate::record::store::LoadedRun],
) -> Option<LastSession> {
    use crate::record::model::{StepKind, StepType};
    let run = runs
        .iter()
        .filter(|r| {
            r.header.as_ref().is_some_and(|h| {
                h.metadata.tier == "bound"
                    && h.metadata.host.as_ref().is_some_and(|host| host.app == app)
            })
        })
        .max_by(|a, b| {
            let at = |r: &crate::record::store::LoadedRun| {
                r.header.as_ref().map(|h| h.started_at.clone())
            };
            at(a).cmp(&at(b))
        })?;
    let header = run.header.as_ref()?;
    let mut last = LastSession {
        run_id: header.id.clone(),
        session_id: header.metadata.session_id.clone().unwrap_or_default(),
        started_at: header.started_at.clone(),
        steps: run
            .steps
            .iter()
            .filter(|s| s.step_type == StepType::ToolSelected)
            .count(),
        joined_by_id: 0,
        joined_by_fingerprint: 0,
        hooks_only: 0,
    };
    for step in &run.steps {
        if step.step_type != StepType::ToolResponse || step.kind != Some(StepKind::Mcp) {
            continue;
        }
        // Only a bound proxy's view carries the wire's JSON-RPC id.
        match (&step.request_id, step.correlation.as_deref()) {
            (None, _) => last.hooks_only += 1,
            (Some(_), Some("fingerprint")) => last.joined_by_fingerprint += 1,
            (Some(_), _) => last.joined_by_id += 1,
        }
    }
    Some(last)
}

/// `last session: …` for `bir status` and `bir doctor`: whether the
/// agent's last session was recorded, and how its MCP calls were joined.
pub(crate) fn last_session_line(host: Host, runs: &[crate::record::store::LoadedRun]) -> String {
    match last_session(host.app(), runs) {
        None => "last session: none recorded yet".to_owned(),
        Some(last) => describe_last_session(&last),
    }
}

pub(crate) fn describe_last_session(last: &LastSession) -> String {
    let mcp = last.joined_by_id + last.joined_by_fingerprint + last.hooks_only;
    let joins = if mcp == 0 {
        "no MCP calls".to_owned()
    } else {
        let mut parts = Vec::new();
        if last.joined_by_id > 0 {
            parts.push(format!("{} joined live by call id", last.joined_by_id));
        }
        if last.joined_by_fingerprint > 0 {
            parts.push(format!(
                "{} joined live by fingerprint",
                last.joined_by_fingerprint
            ));
        }
        if last.hooks_only > 0 {
            parts.push(format!(
                "{} from the hooks only (no bound proxy saw them)",
                last.hooks_only
            ));
        }
        format!("MCP calls: {}", parts.join(", "))
    };
    let short = |s: &str| s.chars().take(8).collect::<String>();
    format!(
        "last session: {} at {} (run {}), {} steps, {}",
        short(&last.session_id),
        last.started_at,
        last.run_id,
        last.steps,
        joins
    )
}

/// The newest bound runs of the store ([`LAST_SESSION_SCAN`] at most).
fn newest_bound_runs() -> Vec<crate::record::store::LoadedRun> {
    let Ok(store) = crate::record::store::Store::open_default() else {
        return Vec::new();
    };
    let Ok(mut summaries) = store.summaries() else {
        return Vec::new();
    };
    summaries.retain(|s| s.tier == "bound");
    summaries.sort_by(|a, b| b.started_at.cmp(&a.started_at));
    summaries
        .iter()
        .take(LAST_SESSION_SCAN)
        .filter_map(|s| store.find(&s.id).ok())
        .collect()
}

/// Codex runs a hook only when `config.toml` trusts its current hash
/// (`[hooks.state."<key>"] trusted_hash = "sha256:…"`; observed on Codex). bir
/// asks Codex itself for each hook's key and hash (`codex app-server`:
/// `initialize`, `hooks/list {cwds}`) and appends the tables for bir's own
/// hooks, byte-preserving; uninstall removes exactly those bytes. Without a
/// `codex` program (`BIR_CODEX_PATH`, else `codex` on PATH) it says how to
/// trust them by hand.
pub(crate) mod codex_trust {
    use std::io::{BufRead, BufReader, Write};
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use serde_json::{Value, json};

    use super::ours;
    use crate::bound::hosts::Host;
    use crate::clientconfig::ledger::CodexTrust;
    use crate::clientconfig::{atomic, codex, ledger};
    use crate::output::out;

    /// How long Codex's app server may take to list hooks.
    const BUDGET: Duration = Duration::from_secs(20);

    fn codex_home() -> Option<PathBuf> {
        std::env::var_os("CODEX_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| home::home_dir().map(|h| h.join(".codex")))
    }

    fn manual() {
        out(
            "  Codex runs only trusted hooks: trust bir's in Codex (`/hooks`), or run `codex exec --dangerously-bypass-hook-trust`",
        );
    }

    /// Asks `codex app-server` for the hooks it sees from `cwd`.
    fn list_hooks(cwd: &Path) -> Option<Vec<Value>> {
        let program = std::env::var_os("BIR_CODEX_PATH")
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "codex".into());
        let mut child = Command::new(program)
            .arg("app-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut stdin = child.stdin.take()?;
        let stdout = child.stdout.take()?;
        let requests = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"clientInfo": {"name": "bir", "version": env!("CARGO_PKG_VERSION")}}}),
            json!({"jsonrpc": "2.0", "method": "initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "hooks/list",
                   "params": {"cwds": [cwd.to_string_lossy()]}}),
        ];
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && v["id"] == 2
                {
                    let _ = tx.send(v);
                    return;
                }
            }
        });
        for r in &requests {
            let _ = writeln!(stdin, "{r}");
        }
        let _ = stdin.flush();
        let deadline = Instant::now() + BUDGET;
        let answer = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();
        let answer = answer.ok()?;
        let hooks = answer["result"]["data"]
            .as_array()?
            .iter()
            .flat_map(|entry| entry["hooks"].as_array().cloned().unwrap_or_default())
            .collect();
        Some(hooks)
    }

    /// Trusts bir's hooks registered in `hooks_file`.
    pub(crate) fn trust(hooks_file: &Path, project: &Path) {
        let Some(config) = codex_home().map(|h| h.join("config.toml")) else {
            return manual();
        };
        let Some(hooks) = list_hooks(project) else {
            return manual();
        };
        let ours_untrusted: Vec<(String, String)> = hooks
            .iter()
            .filter(|h| {
                h["command"]
                    .as_str()
                    .is_some_and(|c| ours(c, Host::Codex).is_some())
                    && h["trustStatus"] != "trusted"
                    && h["sourcePath"]
                        .as_str()
                        .is_none_or(|p| Path::new(p) == hooks_file)
            })
            .filter_map(|h| {
                Some((
                    h["key"].as_str()?.to_owned(),
                    h["currentHash"].as_str()?.to_owned(),
                ))
            })
            .collect();
        if ours_untrusted.is_empty() {
            out("  Codex trusts bir's hooks already");
            return;
        }
        let before = match atomic::read(&config) {
            Ok(b) => b,
            Err(e) => {
                crate::error::print("bir install", &e);
                return manual();
            }
        };
        let read = before
            .as_deref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default();
        // A hook of bir's whose command bir changed (its post script in
        // place of `bir-hooks`, or back) keeps its key and gets a new hash:
        // the table bir appended for it takes the new hash in place (same
        // length), in the file and in the ledger's record of what bir
        // appended, so `bir uninstall` still takes out exactly those bytes.
        let mut text = read.clone();
        let mut records = ledger::load().map(|l| l.codex_trust).unwrap_or_default();
        records.retain(|r| r.file == config);
        let mut rehashed = Vec::new();
        let mut appended = String::new();
        if !text.is_empty() && !text.ends_with('\n') {
            appended.push('\n');
        }
        for (key, hash) in &ours_untrusted {
            let table = format!("[hooks.state.{}]", codex::toml_string(key));
            if let Some((old, new)) = rehash(&text, &records, &table, hash) {
                if let Some(at) = text.rfind(&old) {
                    text.replace_range(at..at + old.len(), &new);
                }
                for r in records.iter_mut().filter(|r| r.appended == old) {
                    r.appended = new.clone();
                }
                rehashed.push((old, new));
                continue;
            }
            if text.contains(&table) {
                out(&format!(
                    "  Codex has a trust entry for {key} already (another hash): trust bir's hook in Codex (`/hooks`)"
                ));
                continue;
            }
            appended.push_str(&format!(
                "\n[hooks.state.{}]\ntrusted_hash = {}\n",
                codex::toml_string(key),
                codex::toml_string(hash)
            ));
        }
        if !appended.contains("trusted_hash") && rehashed.is_empty() {
            return;
        }
        if !appended.contains("trusted_hash") {
            appended.clear();
        }
        let after = format!("{text}{appended}");
        if codex::parse(&after).is_err() {
            out("  could not add the trust entries to Codex's config.toml without breaking it");
            return manual();
        }
        let created_file = before.is_none();
        let write = atomic::update(&config, &mut |b| {
            let now = b.map(|b| String::from_utf8_lossy(b).into_owned());
            if now.as_deref().unwrap_or_default() != read {
                return Err(crate::error::Error::failure(
                    "config.toml changed while bir read it",
                ));
            }
            Ok(Some(after.clone().into_bytes()))
        });
        if let Err(e) = write {
            crate::error::print("bir install", &e);
            return manual();
        }
        let record = CodexTrust {
            file: config.clone(),
            appended,
            created_file,
        };
        let pushed = record.appended.contains("trusted_hash");
        if let Err(e) = ledger::modify(&mut |l| {
            for (old, new) in &rehashed {
                for r in l
                    .codex_trust
                    .iter_mut()
                    .filter(|r| r.file == config && &r.appended == old)
                {
                    r.appended = new.clone();
                }
            }
            if pushed {
                l.codex_trust.push(record.clone());
            }
        }) {
            crate::error::print("bir install", &e);
        }
        out(&format!(
            "  trusted {} hook(s) in {} (hooks.state.*.trusted_hash)",
            ours_untrusted.len(),
            config.display()
        ));
    }

    /// The record of what bir appended (`records`) that holds `table` of
    /// `text` with another hash: `(appended, appended with `hash`)`, when
    /// that record is still in `text` whole.
    pub(super) fn rehash(
        text: &str,
        records: &[CodexTrust],
        table: &str,
        hash: &str,
    ) -> Option<(String, String)> {
        let head = format!("{table}\ntrusted_hash = ");
        records.iter().find_map(|r| {
            if !text.contains(&r.appended) {
                return None;
            }
            let at = r.appended.find(&head)? + head.len();
            let end = at + r.appended[at..].find('\n')?;
            let quoted = codex::toml_string(hash);
            if r.appended[at..end] == quoted {
                return None;
            }
            let mut new = r.appended.clone();
            new.replace_range(at..end, &quoted);
            Some((r.appended.clone(), new))
        })
    }

    /// Takes out every trust entry bir appended.
    pub(crate) fn untrust() -> bool {
        let Ok(l) = ledger::load() else {
            return true;
        };
        let mut ok = true;
        let mut done = Vec::new();
        for t in &l.codex_trust {
            let remove_file = std::cell::Cell::new(false);
            let result = atomic::update(&t.file, &mut |b| {
                let Some(b) = b else {
                    return Ok(None);
                };
                let text = String::from_utf8_lossy(b).into_owned();
                let Some(at) = text.rfind(&t.appended) else {
                    return Ok(None);
                };
                let mut after = text.clone();
                after.replace_range(at..at + t.appended.len(), "");
                remove_file.set(t.created_file && after.is_empty());
                Ok(Some(after.into_bytes()))
            });
            match result {
                Ok(outcome) => {
                    if remove_file.get() {
                        let _ = std::fs::remove_file(&outcome.target);
                    }
                    if outcome.changed {
                        out(&format!(
                            "{}:\n  Codex hook trust: removed bir's entries",
                            t.file.display()
                        ));
                    }
                    done.push(t.clone());
                }
                Err(e) => {
                    crate::error::print("bir uninstall", &e);
                    ok = false;
                }
            }
        }
        if !done.is_empty() {
            let _ = ledger::modify(&mut |l| l.codex_trust.retain(|t| !done.contains(t)));
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bound run of `app` started at `at`, with MCP responses as
    /// (requestId present, correlation) pairs.
    fn bound_run(
        app: &str,
        at: &str,
        session: &str,
        mcp: &[(bool, Option<&str>)],
    ) -> crate::record::store::LoadedRun {
        let mut run = crate::record::store::LoadedRun::default();
        let header = serde_json::json!({"seq": 1, "event": {"kind": "run_started", "data": {
            "id": format!("run_{session}"), "startedAt": at,
            "metadata": {"recorder": "bir", "tier": "bound", "host": {"app": app, "version": "1"},
                "wrappedServers": [], "cwd": "/p", "sessionId": session, "birVersion": "t", "lossy": false}}}});
        run.absorb(header.to_string().as_bytes());
        for (n, (live, correlation)) in mcp.iter().enumerate() {
            for ty in ["tool_selected", "tool_response"] {
                let mut step = serde_json::json!({"id": format!("s{n}{ty}"), "stepIndex": n * 2 + 1, "type": ty,
                    "qualifiedName": "mcp__everything__echo", "serverName": "everything", "toolName": "echo",
                    "startedAt": at, "isError": false, "kind": "mcp", "toolUseId": format!("t{n}")});
                if ty == "tool_response" {
                    if *live {
                        step["requestId"] = serde_json::json!(n);
                    }
                    if let Some(c) = correlation {
                        step["correlation"] = serde_json::json!(c);
                    }
                }
                let record =
                    serde_json::json!({"seq": n * 2 + 2, "event": {"kind": "step", "data": step}});
                run.absorb(record.to_string().as_bytes());
            }
        }
        run
    }

    #[test]
    fn geminis_automatic_compression_runs_no_hook_of_birs() {
        // Gemini compares a PreCompress matcher with the trigger, whole.
        let pre = entry(&form(), Host::Gemini, "PreCompress");
        let doc: serde_json::Value = serde_json::from_str(&pre).expect("json");
        assert_eq!(doc["matcher"], "manual");
        let tool = entry(&form(), Host::Gemini, "AfterTool");
        let doc: serde_json::Value = serde_json::from_str(&tool).expect("json");
        assert_eq!(doc["matcher"], "*");
    }

    #[test]
    fn the_before_tool_hook_fires_only_for_mcp_and_agent_tools() {
        // Every other call is whole in its after-tool hook: one hook
        // process per built-in call instead of two.
        let matches = |host: Host, event: &str, tool: &str| {
            let doc: serde_json::Value =
                serde_json::from_str(&entry(&form(), host, event)).expect("json");
            match doc["matcher"].as_str() {
                None | Some("*") => true,
                Some(m) => regex::Regex::new(m).expect("regex").is_match(tool),
            }
        };
        for (host, before, after, builtins, kept) in [
            (
                Host::Gemini,
                "BeforeTool",
                "AfterTool",
                &["run_shell_command", "read_file", "complete_task"][..],
                &[
                    "mcp_everything_echo",
                    "mcp_everything_get-sum",
                    "invoke_agent",
                ][..],
            ),
            (
                Host::Codex,
                "PreToolUse",
                "PostToolUse",
                &["Bash", "apply_patch", "read_file"][..],
                &[
                    "mcp__everything__echo",
                    "spawn_agent",
                    "multi_agent_v1wait_agent",
                ][..],
            ),
        ] {
            for tool in builtins {
                assert!(!matches(host, before, tool), "{host:?} {tool}");
                assert!(matches(host, after, tool), "{host:?} {tool}");
            }
            for tool in kept {
                assert!(matches(host, before, tool), "{host:?} {tool}");
                assert!(matches(host, after, tool), "{host:?} {tool}");
            }
        }
    }

    /// A hook file an older bir wrote (its before-tool hook for every
    /// tool): installing again makes that entry today's, in its place, and
    /// uninstall with the older install's ledger record still gives every
    /// byte back.
    #[test]
    fn installing_again_converges_an_older_birs_before_tool_hook() {
        for (host, event) in [(Host::Gemini, "BeforeTool"), (Host::Codex, "PreToolUse")] {
            let before = "{\n  \"hooks\": {\n    \"Stop\": []\n  }\n}\n";
            let plan = install_edit(Some(before.as_bytes()), &form(), host, Path::new("f.json"))
                .expect("install");
            let now = String::from_utf8(plan.bytes.clone().expect("changed")).expect("utf8");
            let m = host.before_tool_matcher().expect("matcher");
            let quoted = format!("\"matcher\": {}", json_string(m));
            assert_eq!(now.matches(&quoted).count(), 1, "{now}");
            // What the older bir wrote: every tool.
            let older = match host {
                Host::Gemini => now.replace(&quoted, "\"matcher\": \"*\""),
                _ => regex::Regex::new(&format!(r"{}[ \t\n]*,[ \t\n]*", regex::escape(&quoted)))
                    .expect("regex")
                    .replace(&now, "")
                    .into_owned(),
            };
            assert!(!older.contains(m), "{older}");
            let again = install_edit(Some(older.as_bytes()), &form(), host, Path::new("f.json"))
                .expect("again");
            assert!(again.events.is_empty(), "{host:?}");
            assert_eq!(again.updated, 1, "{host:?} {event}");
            let converged = again.bytes.expect("changed");
            let text = String::from_utf8(converged.clone()).expect("utf8");
            assert_eq!(text.matches(&quoted).count(), 1, "{text}");
            assert_eq!(
                text.matches("bir-hooks").count(),
                now.matches("bir-hooks").count()
            );
            // Converged: a third install changes nothing.
            let third =
                install_edit(Some(&converged), &form(), host, Path::new("f.json")).expect("3rd");
            assert!(third.bytes.is_none() && third.updated == 0, "{host:?}");
            let (restored, _) =
                uninstall_edit(&converged, host, &change(host, &plan)).expect("uninstall");
            assert_eq!(
                String::from_utf8(restored.expect("changed")).expect("utf8"),
                before,
                "{host:?}"
            );
        }
    }

    #[test]
    fn the_last_session_of_each_agent_says_how_its_mcp_calls_were_joined() {
        let runs = vec![
            bound_run(
                "gemini-cli",
                "2026-12-03T10:00:00.000Z",
                "gemini-old",
                &[(false, None)],
            ),
            bound_run(
                "gemini-cli",
                "2026-12-03T11:00:00.000Z",
                "gemini-new-session",
                &[
                    (true, Some("fingerprint")),
                    (true, Some("fingerprint")),
                    (false, None),
                ],
            ),
            bound_run(
                "codex",
                "2026-12-03T09:00:00.000Z",
                "codex-one",
                &[(true, None)],
            ),
        ];
        let gemini = last_session("gemini-cli", &runs).expect("a gemini session");
        assert_eq!(gemini.session_id, "gemini-new-session");
        assert_eq!(gemini.steps, 3);
        assert_eq!(
            (
                gemini.joined_by_id,
                gemini.joined_by_fingerprint,
                gemini.hooks_only
            ),
            (0, 2, 1)
        );
        let line = describe_last_session(&gemini);
        assert!(line.contains("gemini-n"), "{line}");
        assert!(line.contains("2 joined live by fingerprint"), "{line}");
        assert!(line.contains("1 from the hooks only"), "{line}");
        let codex = last_session("codex", &runs).expect("a codex session");
        assert_eq!((codex.joined_by_id, codex.hooks_only), (1, 0));
        assert!(describe_last_session(&codex).contains("1 joined live by call id"));
        assert_eq!(last_session("cursor", &runs), None);
    }

    fn form() -> HookForm {
        HookForm {
            program: PathBuf::from("/opt/bir/bin/bir-hooks"),
            subcommand: false,
            correlation: None,
            http: None,
        }
    }

    fn change(host: Host, plan: &Planned) -> HookChange {
        HookChange {
            client: host.flag().into(),
            file: "f.json".into(),
            scope: "user".into(),
            transport: crate::clientconfig::hook_entries::Transport::Command,
            projects: vec![],
            created_file: plan.created_file,
            keep_parents: plan.keep_parents,
            events: plan.events.clone(),
            file_sha256: String::new(),
            at: String::new(),
        }
    }

    /// Each agent's hook file as its users write them: bir's install and
    /// uninstall give every byte back.
    #[test]
    fn install_then_uninstall_gives_back_every_byte_for_every_agent() {
        let fixtures: &[(Host, &str)] = &[
            (
                Host::Codex,
                "{\n  \"hooks\": {\n    \"Stop\": [ { \"hooks\": [ { \"type\": \"command\", \"command\": \"notify-send done\" } ] } ],\n    \"PreToolUse\": []\n  }\n}\n",
            ),
            (
                Host::Gemini,
                "// my settings\n{\n  \"general\": {\"enableAutoUpdate\": false},\n  \"hooks\": {\n    \"BeforeTool\": [\n      {\"matcher\": \"run_shell_command\", \"hooks\": [{\"type\": \"command\", \"command\": \"./guard.sh\"}]}\n    ]\n  }\n}\n",
            ),
            (
                Host::Cursor,
                "{\n  \"version\": 1,\n  \"hooks\": {\n    \"afterFileEdit\": [{ \"command\": \"./format.sh\" }]\n  }\n}\n",
            ),
            (
                Host::Copilot,
                "{\"version\":1,\"hooks\":{\"preToolUse\":[{\"type\":\"command\",\"bash\":\"./audit.sh\"}]}}",
            ),
            (Host::VsCode, "{\n\t\"hooks\": {}\n}"),
        ];
        for (host, before) in fixtures {
            let plan = install_edit(Some(before.as_bytes()), &form(), *host, Path::new("f.json"))
                .expect("install");
            let after = plan.bytes.clone().expect("changed");
            let text = String::from_utf8(after.clone()).expect("utf8");
            assert!(
                text.contains(&format!("/opt/bir/bin/bir-hooks --host {}", host.flag())),
                "{host:?}: {text}"
            );
            // The user's own entries are still there, untouched.
            for keep in [
                "notify-send done",
                "./guard.sh",
                "./format.sh",
                "./audit.sh",
            ] {
                assert_eq!(
                    before.contains(keep),
                    text.contains(keep),
                    "{host:?} {keep}"
                );
            }
            assert_eq!(plan.events.len(), events(*host).len(), "{host:?}");
            // A second install changes nothing.
            let again =
                install_edit(Some(&after), &form(), *host, Path::new("f.json")).expect("again");
            assert!(again.bytes.is_none(), "{host:?}");
            assert_eq!(again.already, events(*host).len());
            let (restored, pristine) =
                uninstall_edit(&after, *host, &change(*host, &plan)).expect("uninstall");
            assert_eq!(
                String::from_utf8(restored.expect("changed")).expect("utf8"),
                *before,
                "{host:?}"
            );
            assert!(!pristine);
        }
    }

    #[test]
    fn a_file_bir_created_is_pristine_after_uninstall() {
        for host in [
            Host::Codex,
            Host::Gemini,
            Host::Copilot,
            Host::Cursor,
            Host::VsCode,
        ] {
            let plan = install_edit(None, &form(), host, Path::new("f.json")).expect("install");
            let after = plan.bytes.clone().expect("bytes");
            let parsed: serde_json::Value = serde_json::from_slice(&after).expect("json");
            let first = events(host)[0];
            assert!(parsed["hooks"][first].is_array(), "{host:?}: {parsed}");
            let (restored, pristine) =
                uninstall_edit(&after, host, &change(host, &plan)).expect("uninstall");
            let left: serde_json::Value =
                serde_json::from_slice(&restored.expect("changed")).expect("json");
            assert!(left.get("hooks").is_none(), "{host:?}: {left}");
            assert!(pristine, "{host:?}");
        }
    }

    fn posting_form() -> HookForm {
        HookForm {
            http: Some(HttpForm {
                addr: HookAddr {
                    port: 47113,
                    token: "cd".repeat(32),
                },
                pre_tool_query: String::new(),
            }),
            ..form()
        }
    }

    /// `--hooks http` (the default) for Codex and Gemini: every event is a
    /// post script; installing again over the
    /// `bir-hooks` form converts it, `--hooks command` converts it back,
    /// and uninstall gives the user's file back byte for byte whichever
    /// form is in it.
    #[test]
    fn codex_and_gemini_post_by_script_and_uninstall_gives_back_every_byte() {
        for host in [Host::Codex, Host::Gemini] {
            let before = "{\n  \"hooks\": {\n    \"Stop\": [ { \"hooks\": [ { \"type\": \"command\", \"command\": \"notify-send done\" } ] } ]\n  }\n}\n";
            let plan = install_edit(
                Some(before.as_bytes()),
                &posting_form(),
                host,
                Path::new("f.json"),
            )
            .expect("install");
            let after = plan.bytes.clone().expect("changed");
            let doc: serde_json::Value = serde_json::from_slice(&after).expect("json");
            for &event in events(host) {
                let ours_here: Vec<&str> = doc["hooks"][event]
                    .as_array()
                    .expect("array")
                    .iter()
                    .filter_map(|e| e["hooks"][0]["command"].as_str())
                    .filter(|c| ours(c, host).as_deref() == Some(event))
                    .collect();
                assert_eq!(ours_here.len(), 1, "{host:?} {event}: {doc}");
                assert!(
                    post_script::parse(ours_here[0]).is_some(),
                    "{host:?} {event}"
                );
                // With no daemon there, the script hands the payload to
                // bir-hooks, which starts one.
                assert!(
                    ours_here[0].contains(&format!(
                        "|/opt/bir/bin/bir-hooks --host {} {event} >/dev/null;",
                        host.flag()
                    )),
                    "{}",
                    ours_here[0]
                );
                // Not the other agent's.
                let other = if host == Host::Codex {
                    Host::Gemini
                } else {
                    Host::Codex
                };
                assert_eq!(ours(ours_here[0], other), None);
            }
            // Installed again: nothing to change.
            let again = install_edit(Some(&after), &posting_form(), host, Path::new("f.json"))
                .expect("again");
            assert!(again.bytes.is_none(), "{host:?}");
            // `--hooks command`: back to bir-hooks for every event …
            let back = install_edit(Some(&after), &form(), host, Path::new("f.json"))
                .expect("command form");
            let n = events(host).len();
            assert_eq!(back.updated, n, "{host:?}");
            let commands = back.bytes.expect("changed");
            let text = String::from_utf8(commands.clone()).expect("utf8");
            assert!(!text.contains("/dev/tcp/"), "{text}");
            // … and forward again.
            let forward = install_edit(Some(&commands), &posting_form(), host, Path::new("f.json"))
                .expect("http form");
            assert_eq!(forward.updated, n, "{host:?}");
            let posting = forward.bytes.expect("changed");
            // Uninstall (the first install's ledger record) from either form.
            for file in [&after, &commands, &posting] {
                let (restored, _) =
                    uninstall_edit(file, host, &change(host, &plan)).expect("uninstall");
                assert_eq!(
                    String::from_utf8(restored.expect("changed")).expect("utf8"),
                    before,
                    "{host:?}"
                );
            }
        }
    }

    #[test]
    fn other_agents_keep_the_command_form_whatever_the_transport() {
        for host in [Host::Copilot, Host::Cursor, Host::VsCode] {
            let plan =
                install_edit(None, &posting_form(), host, Path::new("f.json")).expect("install");
            let text = String::from_utf8(plan.bytes.expect("bytes")).expect("utf8");
            assert!(!text.contains("/dev/tcp/"), "{host:?}");
            assert!(text.contains("bir-hooks --host"), "{host:?}");
        }
    }

    #[test]
    fn hooks_words_for_other_agents() {
        let parsed = |w: &str| parse_hooks(w).expect("parses");
        assert_eq!(parsed("user"), Some((Scope::User, Transport::Http)));
        assert_eq!(
            parsed("project,command"),
            Some((Scope::Project, Transport::Command))
        );
        assert_eq!(parsed("command"), Some((Scope::User, Transport::Command)));
        assert_eq!(parsed("none"), None);
        assert!(parse_hooks("everywhere").is_err());
    }

    /// A hook of bir's whose command changed keeps its Codex key: the
    /// table bir appended takes the new hash in place, and only a table
    /// bir appended (still in the file whole) does.
    #[test]
    fn codex_trust_rehashes_only_the_tables_bir_appended() {
        use crate::clientconfig::ledger::CodexTrust;
        let old = format!("sha256:{}", "a".repeat(64));
        let new = format!("sha256:{}", "b".repeat(64));
        let appended = format!(
            "\n[hooks.state.\"h.json:stop:0:0\"]\ntrusted_hash = \"{old}\"\n\n[hooks.state.\"h.json:pre_tool_use:0:0\"]\ntrusted_hash = \"{old}\"\n"
        );
        let text = format!("model = \"x\"\n{appended}");
        let records = vec![CodexTrust {
            file: "config.toml".into(),
            appended: appended.clone(),
            created_file: false,
        }];
        let table = "[hooks.state.\"h.json:stop:0:0\"]";
        let (was, now) = codex_trust::rehash(&text, &records, table, &new).expect("ours");
        assert_eq!(was, appended);
        assert_eq!(now.len(), appended.len());
        assert_eq!(now.matches(&new).count(), 1, "{now}");
        assert!(
            now.contains(&format!("stop:0:0\"]\ntrusted_hash = \"{new}\"")),
            "{now}"
        );
        // The same hash: nothing to do; a table bir did not append: not ours.
        assert_eq!(codex_trust::rehash(&text, &records, table, &old), None);
        assert_eq!(
            codex_trust::rehash(&text, &records, "[hooks.state.\"user:0\"]", &new),
            None
        );
        // The user edited bir's lines: bir leaves them alone.
        let edited = text.replace("pre_tool_use", "post_tool_use");
        assert_eq!(codex_trust::rehash(&edited, &records, table, &new), None);
    }

    #[test]
    fn only_bir_commands_for_that_agent_are_bir_entries() {
        assert_eq!(
            ours("/opt/bir-hooks --host codex Stop", Host::Codex).as_deref(),
            Some("Stop")
        );
        assert_eq!(
            ours("'/a b/bir' hooks --host gemini BeforeTool", Host::Gemini).as_deref(),
            Some("BeforeTool")
        );
        assert_eq!(ours("/opt/bir-hooks --host codex Stop", Host::Gemini), None);
        assert_eq!(ours("/opt/bir-hooks Stop", Host::Codex), None);
        assert_eq!(
            ours("./my-bir-hooks-wrapper --host codex Stop", Host::Codex),
            None
        );
    }

    #[test]
    fn a_file_of_another_shape_is_refused_untouched() {
        let err = install_edit(Some(b"[1]"), &form(), Host::Codex, Path::new("f.json"));
        assert!(err.is_err());
        let err = install_edit(
            Some(b"{\"hooks\": {\"Stop\": {}}}"),
            &form(),
            Host::Codex,
            Path::new("f.json"),
        );
        assert!(err.is_err());
    }
}
