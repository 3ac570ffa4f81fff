//! Claude Code hooks: the bound tier's half of `bir install`.
//!
//! `bir install` registers one hook per hook event bir needs
//! ([`registered_events`]), in user settings (`~/.claude/settings.json`, every session of
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
//!
//! Two transports (`bir install --hooks http|command`, HTTP the default):
//! * **http** — every event but `SessionStart` and `SessionEnd` is an HTTP
//!   hook that Claude Code POSTs in-process to the daemon's hook port
//!   (`daemon::hookaddr`: a loopback port and a hook token that stay the
//!   same across daemon restarts), with the hook token in an
//!   `Authorization` header and a short timeout:
//!
//!   ```json
//!   { "hooks": [ { "type": "http", "url": "http://127.0.0.1:47113/hook/PreToolUse",
//!       "headers": { "Authorization": "Bearer <hook token>", "X-Bir-Hook": "1",
//!                    "X-Bir-Off": "$BIR_OFF" }, "allowedEnvVars": ["BIR_OFF"], "timeout": 2 } ] }
//!   ```
//!
//!   `SessionStart` (Claude Code refuses HTTP hooks for it) and
//!   `SessionEnd` (once a session) stay command hooks: they start the
//!   daemon when it is not running, so a session whose HTTP hooks found no
//!   daemon is still recovered from its transcript at its end.
//! * **command** — every event runs `bir-hooks <Event>` (above).
//!
//! A group is bir's when its one handler runs a bir hook command, or POSTs
//! to `127.0.0.1:<port>/hook/<Event>` with the `X-Bir-Hook` header.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::claude::Paths;
use super::entry::basename;
use super::jsonedit::{Doc, Flavor, Kind, Member, Node, json_string};
use crate::bound::Correlation;
use crate::bound::host::Host;
use crate::daemon::hookaddr::HookAddr;
use crate::error::Error;

/// Every hook event Claude Code 2.1.332 fires (observed),
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
pub(crate) const LEFT_TO_THE_MOD: &[&str] = &["MessageDisplay"];

pub(crate) const EVENTS: &[&str] = &[
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

/// Events bir does not register: it fires on the hot path (once per model
/// message, a quarter of all hook invocations in a scripted 50-call
/// session, `tests/e2e/bench-mod.sh`), and what it tells is in the
/// transcript the daemon reads anyway. Measured with the real Claude Code
/// on a 40-call session (`bench/hooks_session.py`): every hook invocation
/// costs the host a few milliseconds whatever the hook does, so the events
/// that fire per call decide the session's cost. `MessageDisplay` brings
/// the model's words (the transcript has them, with thinking).
/// `PreToolUse` and `PostToolUse` stay (the live step, the guide's answers,
/// call-id injection, the structured result with its duration).
pub(crate) const LEFT_TO_THE_TRANSCRIPT: &[&str] = &["MessageDisplay"];

/// Events registered only while a guide is armed (`bir guide start` until
/// `bir guide stop`): `PostToolBatch` fires once per model message with
/// tool calls, on the hot path, and the recorder does not need it (each
/// call's `PreToolUse`/`PostToolUse` and the transcript tell the same), but
/// a guide must learn that a step's call did not run (refused, blocked)
/// before the model goes on, which the transcript tells only at the turn's
/// end.
pub(crate) const FOR_GUIDES: &[&str] = &["PostToolBatch"];

/// The matcher of bir's group for `event` (`None`: every tool), with a
/// guide armed (`guides`) or not: `PreToolUse` reaches bir only for the
/// tools [`Host::before_tool_matcher`] names for Claude Code, unless a
/// guide is armed.
///
/// `PreToolUse` fires before every tool call, on the hot path, and each
/// hook the host dispatches costs the session milliseconds whatever the
/// hook does (`bench/hooks_session.py`). For a built-in tool it tells
/// nothing the run lacks: `PostToolUse` carries the same input with the
/// result and the call's duration (so its start), and the transcript the
/// model's words before it; a call refused or blocked before it ran is
/// told from the transcript. It stays for the tools where being early
/// matters:
/// * MCP tools (`mcp__<server>__<tool>`): the call-id injection
///   (`--correlate inject`) must rewrite the call before it is sent;
/// * the subagent tool (`Agent`, `Task` in older versions): a
///   `SubagentStart` is nested under the Agent call still running, which
///   the run knows only from its `PreToolUse`.
///
/// An armed guide answers `PreToolUse` for every tool, so while one is
/// armed the group has no matcher.
pub(crate) fn matcher_of(event: &str, guides: bool) -> Option<&'static str> {
    if event == "PreToolUse" && !guides {
        Host::ClaudeCode.before_tool_matcher()
    } else {
        None
    }
}

/// The events `bir install` registers while no guide is armed: [`EVENTS`]
/// minus [`LEFT_TO_THE_TRANSCRIPT`] and [`FOR_GUIDES`].
#[cfg(test)]
pub(crate) fn registered_events() -> impl Iterator<Item = &'static str> {
    EVENTS
        .iter()
        .copied()
        .filter(|e| !LEFT_TO_THE_TRANSCRIPT.contains(e) && !FOR_GUIDES.contains(e))
}

/// The events registered with a guide armed (`guides`) or not.
pub(crate) fn events_for(guides: bool) -> impl Iterator<Item = &'static str> {
    EVENTS
        .iter()
        .copied()
        .filter(move |e| !LEFT_TO_THE_TRANSCRIPT.contains(e) && (guides || !FOR_GUIDES.contains(e)))
}

/// Seconds Claude Code waits for one hook before going on without it. A
/// hook that cannot reach the recorder gives up well within this by
/// itself; the timeout only bounds a hook that hangs.
pub(crate) const TIMEOUT_SECS: u64 = 5;

/// Seconds Claude Code waits for an HTTP hook: the daemon answers within
/// milliseconds or not at all (a refused connection fails at once), so a
/// short one bounds a daemon that hangs.
pub(crate) const HTTP_TIMEOUT_SECS: u64 = 2;

/// The header that marks an HTTP hook as bir's.
pub(crate) const HTTP_MARK: &str = "X-Bir-Hook";

/// The header an HTTP hook carries the session's `BIR_OFF` in: Claude Code
/// interpolates `$BIR_OFF` into it (the only environment variable named in
/// the hook's `allowedEnvVars`; an unset one is empty), so `BIR_OFF=1` in
/// the session's environment switches recording off for HTTP hooks as it
/// does for command hooks, which inherit the environment.
pub(crate) const OFF_HEADER: &str = "X-Bir-Off";

/// The events that stay command hooks with `--hooks http`: Claude Code
/// refuses HTTP hooks for `SessionStart`, and both start the daemon when
/// it is not running (once a session each).
pub(crate) const COMMAND_ALWAYS: &[&str] = &["SessionStart", "SessionEnd"];

/// How Claude Code delivers an event to bir.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Transport {
    /// `sh -c 'bir-hooks <Event>'`: a process per event.
    #[default]
    Command,
    /// Claude Code POSTs the payload to the daemon in-process.
    Http,
}

/// What a brand-new settings file starts as before bir's edit.
pub(crate) const NEW_FILE: &[u8] = b"{\n}\n";

/// Which settings file holds the hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookPlace {
    /// `~/.claude/settings.json` (or `$CLAUDE_CONFIG_DIR/settings.json`).
    User,
    /// `<project>/.claude/settings.json`.
    Project,
}

/// Where the hooks go and how they are delivered (`--hooks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HookScope {
    pub place: HookPlace,
    pub transport: Transport,
}

impl HookScope {
    /// `--hooks WORD[,WORD]`: `user` (default) or `project`, and `http`
    /// (default) or `command`, in any order; `none` registers no hooks
    /// (`Ok(None)`).
    pub(crate) fn parse(s: &str) -> Result<Option<HookScope>, Error> {
        let mut scope = HookScope {
            place: HookPlace::User,
            transport: Transport::Http,
        };
        for word in s.split(',').map(str::trim) {
            match word {
                "user" => scope.place = HookPlace::User,
                "project" => scope.place = HookPlace::Project,
                "http" => scope.transport = Transport::Http,
                "command" => scope.transport = Transport::Command,
                "none" | "off" => return Ok(None),
                other => {
                    return Err(Error::usage(format!(
                        "--hooks takes user or project, http or command (e.g. `project,command`), or none, not `{other}`"
                    )));
                }
            }
        }
        Ok(Some(scope))
    }

    pub(crate) fn label(self) -> &'static str {
        match self.place {
            HookPlace::User => "user",
            HookPlace::Project => "project",
        }
    }

    /// The settings file of this scope.
    pub(crate) fn settings_file(self, paths: &Paths) -> PathBuf {
        match self.place {
            HookPlace::User => paths.settings_dir.join("settings.json"),
            HookPlace::Project => paths.project.join(".claude").join("settings.json"),
        }
    }
}

/// How hook entries start `bir-hooks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HookForm {
    pub program: PathBuf,
    /// `<program> hooks <Event>` (a plain `bir`), not `<program> <Event>`
    /// (the `bir-hooks` link).
    pub subcommand: bool,
    /// The call-id injection mode written on the `PreToolUse` command
    /// (`--correlate inject`, `--no-correlation`); `None`: keep whatever a
    /// registered hook already says (a new one says nothing).
    pub correlation: Option<Correlation>,
    /// HTTP hooks to this address for every event but [`COMMAND_ALWAYS`];
    /// `None`: command hooks for all.
    pub http: Option<HttpForm>,
}

/// What an HTTP hook of bir's says besides its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpForm {
    pub addr: HookAddr,
    /// Query parameters of the `PreToolUse` URL (percent-encoded, without
    /// `?`): where this user's Claude Code settings live, for the guide
    /// (`daemon::guides`), which a command hook reads from its environment.
    pub pre_tool_query: String,
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
    pub(crate) fn detect() -> HookForm {
        if let Some(p) = std::env::var_os("BIR_HOOKS_PATH").filter(|p| !p.is_empty()) {
            let program = PathBuf::from(p);
            let subcommand = basename(&program.to_string_lossy()) != "bir-hooks";
            return HookForm {
                program,
                subcommand,
                correlation: None,
                http: None,
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
                    http: None,
                };
            }
        }
        HookForm {
            program: exe,
            subcommand: true,
            correlation: None,
            http: None,
        }
    }

    /// How this form delivers `event`.
    pub(crate) fn transport_of(&self, event: &str) -> Transport {
        match &self.http {
            Some(_) if !COMMAND_ALWAYS.contains(&event) => Transport::Http,
            _ => Transport::Command,
        }
    }

    /// The URL of `event`'s HTTP hook (with the `PreToolUse` query: the
    /// settings dirs, and `correlate=inject` when asked for).
    fn url(&self, http: &HttpForm, event: &str, kept: &[String]) -> String {
        let mut url = http.addr.url(event);
        if event == "PreToolUse" {
            let inject = match self.correlation {
                Some(mode) => mode == Correlation::Inject,
                None => kept.iter().any(|q| q == "correlate=inject"),
            };
            let mut query: Vec<&str> = Vec::new();
            if inject {
                query.push("correlate=inject");
            }
            if !http.pre_tool_query.is_empty() {
                query.push(&http.pre_tool_query);
            }
            if !query.is_empty() {
                url.push('?');
                url.push_str(&query.join("&"));
            }
        }
        url
    }

    /// The shell command for one event (a new group's).
    pub(crate) fn command(&self, event: &str) -> String {
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
    pub(crate) fn display(&self) -> String {
        match &self.http {
            Some(http) => format!(
                "{} (SessionStart, SessionEnd: {})",
                http.addr.url("<Event>"),
                self.command("<Event>")
            ),
            None => self.command("<Event>"),
        }
    }

    /// The matcher group bir appends for `event` (with `kept`: the flags
    /// or query parameters a registered group of bir's said; `guides`: a
    /// guide is armed, see [`matcher_of`]), as JSON text.
    fn group_with(&self, event: &str, kept: &[String], guides: bool) -> String {
        let matcher = matcher_of(event, guides)
            .map(|m| format!(r#""matcher":{},"#, json_string(m)))
            .unwrap_or_default();
        format!("{{{matcher}\"hooks\":[{}]}}", self.handler(event, kept))
    }

    /// bir's one handler for `event`, as JSON text.
    fn handler(&self, event: &str, kept: &[String]) -> String {
        match (&self.http, self.transport_of(event)) {
            (Some(http), Transport::Http) => format!(
                r#"{{"type":"http","url":{},"headers":{{"Authorization":{},"{HTTP_MARK}":"1","{OFF_HEADER}":"$BIR_OFF"}},"allowedEnvVars":["BIR_OFF"],"timeout":{HTTP_TIMEOUT_SECS}}}"#,
                json_string(&self.url(http, event, kept)),
                json_string(&format!("Bearer {}", http.addr.token)),
            ),
            _ => format!(
                r#"{{"type":"command","command":{},"timeout":{TIMEOUT_SECS}}}"#,
                json_string(&self.command_with(event, kept))
            ),
        }
    }
}

/// `s` as one `sh` word: as is when it holds only characters the shell
/// leaves alone, else in single quotes.
pub(crate) fn shell_quote(s: &str) -> String {
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
pub(crate) fn shell_words(cmd: &str) -> Option<Vec<String>> {
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
pub(crate) struct OurHook {
    /// The program as written (the `bir-hooks` link or `bir`); for an
    /// HTTP hook, `http://127.0.0.1:<port>`.
    pub program: String,
    pub event: String,
    /// Correlation flags after the event (`--correlate inject`,
    /// `--no-correlation`), as written; for an HTTP hook, the URL's query
    /// parameters.
    pub flags: Vec<String>,
    pub transport: Transport,
}

/// `Some` when `url` is a bir hook URL: `http://127.0.0.1:<port>/hook/<Event>`
/// with an optional query.
pub(crate) fn parse_our_url(url: &str) -> Option<OurHook> {
    let rest = url.strip_prefix("http://127.0.0.1:")?;
    let (port, path) = rest.split_once('/')?;
    port.parse::<u16>().ok().filter(|p| *p != 0)?;
    let path = path.strip_prefix("hook/")?;
    let (event, query) = path.split_once('?').unwrap_or((path, ""));
    let valid = !event.is_empty()
        && event
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    valid.then(|| OurHook {
        program: format!("http://127.0.0.1:{port}"),
        event: event.to_owned(),
        flags: query
            .split('&')
            .filter(|q| !q.is_empty())
            .map(str::to_owned)
            .collect(),
        transport: Transport::Http,
    })
}

/// `Some` when `command` is a bir hook command: `<…/bir-hooks> <Event>` or
/// `<…/bir> hooks <Event>`, optionally followed by correlation flags.
pub(crate) fn parse_ours(command: &str) -> Option<OurHook> {
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
        transport: Transport::Command,
    })
}

/// Whether a registered hook asks for call-id injection.
fn says_inject(hook: &OurHook) -> bool {
    match hook.transport {
        Transport::Http => hook.flags.iter().any(|q| q == "correlate=inject"),
        Transport::Command => correlation(&hook.flags) == Some(Correlation::Inject),
    }
}

/// The injection mode command flags name (the last one wins).
fn correlation(flags: &[String]) -> Option<Correlation> {
    let mut mode = None;
    let mut words = flags.iter();
    while let Some(w) = words.next() {
        mode = match w.as_str() {
            "--no-correlation" => Some(Correlation::Off),
            "--correlate" => words.next().and_then(|m| Correlation::parse(m)),
            other => other
                .strip_prefix("--correlate=")
                .and_then(Correlation::parse)
                .or(mode),
        };
    }
    mode
}

/// A matcher group bir wrote: one handler running a bir hook command (or
/// POSTing to bir's hook port with its mark), and no other key but a
/// matcher bir writes ([`matcher_of`]). Groups the user wrote (even ones
/// that also call bir) are never taken for bir's.
fn our_group(group: &Node) -> Option<OurHook> {
    let ours = |m: &Member| m.value.as_str() == matcher_of("PreToolUse", false);
    // In either order: a host that rewrites the file may sort the keys.
    let hooks = match group.members() {
        [hooks] if hooks.key == "hooks" => hooks,
        [matcher, hooks] | [hooks, matcher]
            if matcher.key == "matcher" && hooks.key == "hooks" && ours(matcher) =>
        {
            hooks
        }
        _ => return None,
    };
    let [handler] = hooks.value.items() else {
        return None;
    };
    match handler.get("type").and_then(Node::as_str) {
        Some("command") => parse_ours(handler.get("command").and_then(Node::as_str)?),
        Some("http") => {
            let marked = handler
                .get("headers")
                .is_some_and(|h| h.members().iter().any(|m| m.key == HTTP_MARK));
            if !marked {
                return None;
            }
            parse_our_url(handler.get("url").and_then(Node::as_str)?)
        }
        _ => None,
    }
}

/// A bir group found in a settings file.
#[derive(Debug, Clone)]
pub(crate) struct Registered {
    pub event: String,
    pub hook: OurHook,
    /// The command (or the URL) as written (decoded).
    pub command: String,
    /// The byte span of its `command` string.
    command_span: (usize, usize),
}

/// Every bir group in `doc`, in file order.
pub(crate) fn registered(doc: &Doc) -> Vec<Registered> {
    let mut out = Vec::new();
    let Some(hooks) = doc.root.get("hooks") else {
        return out;
    };
    for m in hooks.members() {
        for group in m.value.items() {
            if let Some(hook) = our_group(group) {
                let field = match hook.transport {
                    Transport::Command => "command",
                    Transport::Http => "url",
                };
                let node = group
                    .get("hooks")
                    .and_then(|h| h.items().first())
                    .and_then(|h| h.get(field));
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
pub(crate) struct HookChange {
    pub client: String,
    pub file: PathBuf,
    /// `user` or `project`.
    pub scope: String,
    /// How the hooks deliver events (`command` for a ledger written before
    /// there was a choice).
    #[serde(default)]
    pub transport: Transport,
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
pub(crate) struct HookEvent {
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
pub(crate) struct Planned {
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
    /// bir groups taken out: another transport or address than this form's
    /// (re-added in this form), or an event bir no longer registers.
    pub replaced: usize,
    /// Events that already had this bir's group.
    pub already: usize,
}

/// Registers every event's group in `before` (None: no file yet). A file
/// that is not a JSON object, or whose `hooks` (or an event's value) has
/// an unexpected type, is refused with nothing changed.
#[cfg(test)]
pub(crate) fn install_edit(
    before: Option<&[u8]>,
    form: &HookForm,
    file: &Path,
) -> Result<Planned, Error> {
    install_edit_skipping(before, form, file, &[])
}

/// The error for a settings file bir cannot edit safely (`what` says
/// where, after the file's path): refused, with nothing changed. Shared by
/// every edit of Claude Code's settings (hooks, the mod).
pub(crate) fn unreadable_settings(file: &Path) -> impl Fn(String) -> Error + '_ {
    move |what: String| {
        Error::failure(format!(
            "{}:{what}; bir does not edit a settings file it cannot read, and nothing was changed",
            file.display()
        ))
    }
}

/// [`install_edit`] without the events in `skip` (their groups are neither
/// added nor removed).
#[cfg(test)]
pub(crate) fn install_edit_skipping(
    before: Option<&[u8]>,
    form: &HookForm,
    file: &Path,
    skip: &[&str],
) -> Result<Planned, Error> {
    install_edit_with(before, form, file, skip, false)
}

/// [`install_edit_skipping`] with the events a guide needs ([`FOR_GUIDES`])
/// registered when `guides`, and taken out when not.
pub(crate) fn install_edit_with(
    before: Option<&[u8]>,
    form: &HookForm,
    file: &Path,
    skip: &[&str],
    guides: bool,
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
    // Take out bir groups this form would not write: an event bir no
    // longer registers, another transport, or an HTTP hook to another
    // address (re-added below, in this form). Last first, so the spans
    // found stay valid.
    let parsed_group = |event: &str, kept: &[String]| {
        serde_json::from_str::<serde_json::Value>(&form.group_with(event, kept, guides)).ok()
    };
    let mut out_of_form: Vec<(String, usize)> = Vec::new();
    let mut inject_kept = false;
    if let Some(hooks) = doc.root.get("hooks") {
        for m in hooks.members() {
            for (index, group) in m.value.items().iter().enumerate() {
                let Some(hook) = our_group(group) else {
                    continue;
                };
                let gone = LEFT_TO_THE_TRANSCRIPT.contains(&m.key.as_str())
                    || (!guides && FOR_GUIDES.contains(&m.key.as_str()));
                let moved = hook.transport != form.transport_of(&m.key);
                let readdressed = hook.transport == Transport::Http
                    && serde_json::from_str::<serde_json::Value>(doc.raw(group)).ok()
                        != parsed_group(&m.key, &hook.flags);
                let rematched =
                    group.get("matcher").and_then(Node::as_str) != matcher_of(&m.key, guides);
                if gone || moved || readdressed || rematched {
                    inject_kept |= m.key == "PreToolUse" && says_inject(&hook);
                    out_of_form.push((m.key.clone(), index));
                }
            }
        }
    }
    for (event, index) in out_of_form.iter().rev() {
        let doc = Doc::parse(&bytes, Flavor::Json).map_err(|e| refuse(e.to_string()))?;
        bytes = doc
            .remove_item(&["hooks", event], *index)
            .ok_or_else(|| refuse(format!(" `hooks.{event}` changed while being edited")))?;
        plan.replaced += 1;
    }
    // Point stale bir command groups (another path, or other correlation
    // flags than the form chose) at this bir, span by span.
    let doc = Doc::parse(&bytes, Flavor::Json).map_err(|e| refuse(e.to_string()))?;
    let mut stale: Vec<Registered> = registered(&doc)
        .into_iter()
        .filter(|r| r.hook.transport == Transport::Command)
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
    // A PreToolUse group taken out keeps what it said about call-id
    // injection in its new form.
    let kept = if inject_kept {
        match form.transport_of("PreToolUse") {
            Transport::Http => vec!["correlate=inject".to_owned()],
            Transport::Command => correlation_words(Correlation::Inject),
        }
    } else {
        Vec::new()
    };
    for event in events_for(guides).filter(|e| !skip.contains(e)) {
        let doc = Doc::parse(&bytes, Flavor::Json).map_err(|e| refuse(e.to_string()))?;
        let path = ["hooks", event];
        match doc.root.at(&path) {
            None => {
                bytes = doc.set(
                    &path,
                    &format!("[{}]", form.group_with(event, &kept, guides)),
                )?;
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
                bytes = doc.push_item(&path, &form.group_with(event, &kept, guides))?;
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
pub(crate) fn uninstall_edit(
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
        bytes = remove_ours(bytes, ev, change.keep_parents, &|g| our_group(g).is_some())?;
    }
    // Nothing but an empty object left in a file bir created.
    let pristine = change.created_file
        && Doc::parse(&bytes, Flavor::Jsonc)
            .is_ok_and(|d| d.root.is_object() && d.root.members().is_empty());
    Ok(((bytes != before).then_some(bytes), pristine))
}

/// Takes every hook `ours` recognises out of the `hooks.<event>` array of
/// `bytes`, the last first (so the indices stay valid). The array, once
/// empty, goes when bir created it (`ev.created`; `keep_parents` as
/// `Doc::remove_pruning` takes it)
/// or gets back the inside it had before bir (`ev.empty_inner`). One
/// implementation for Claude Code's groups and the other agents' entries.
pub(crate) fn remove_ours(
    mut bytes: Vec<u8>,
    ev: &HookEvent,
    keep_parents: usize,
    ours: &dyn Fn(&Node) -> bool,
) -> Result<Vec<u8>, Error> {
    loop {
        let doc = Doc::parse(&bytes, Flavor::Jsonc).map_err(|e| Error::failure(e.to_string()))?;
        let path = ["hooks", ev.event.as_str()];
        let Some(arr) = doc.root.at(&path) else {
            return Ok(bytes);
        };
        let Some(index) = arr.items().iter().rposition(ours) else {
            let (start, end) = (arr.start, arr.end);
            if arr.items().is_empty() {
                if ev.created {
                    bytes = doc
                        .remove_pruning(&path, keep_parents)
                        .ok_or("internal: the hooks entry vanished")?;
                } else if let Some(inner) = &ev.empty_inner {
                    bytes = doc.splice(start + 1, end - 1, inner);
                }
            }
            return Ok(bytes);
        };
        bytes = doc
            .remove_item(&path, index)
            .ok_or("internal: the hook entry vanished")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ledger record of an install into `s.json`.
    fn recorded(events: Vec<HookEvent>, created_file: bool, keep_parents: usize) -> HookChange {
        HookChange {
            client: "claude-code".into(),
            file: "s.json".into(),
            transport: Transport::Command,
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
            http: None,
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
                transport: Transport::Command,
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
        assert_eq!(
            events.len(),
            registered_events()
                .filter(|e| !LEFT_TO_THE_MOD.contains(e))
                .count()
        );
        assert!(!events.contains(&"MessageDisplay"));
        assert!(events.contains(&"PreToolUse") && events.contains(&"PostToolUse"));
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
            assert_eq!(ours.len(), registered_events().count(), "{before}");
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
            assert!(again.bytes.is_none() && again.already == registered_events().count());
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
        assert_eq!(ours.len(), registered_events().count());
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
        assert_eq!(plan.repointed, registered_events().count());
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

    fn http_form(p: &str) -> HookForm {
        HookForm {
            http: Some(HttpForm {
                addr: HookAddr {
                    port: 47113,
                    token: "ab".repeat(32),
                },
                pre_tool_query: "claude_config=%2Fh%2F.claude".into(),
            }),
            ..form(p)
        }
    }

    /// `--hooks http`: every event but SessionStart and SessionEnd is an
    /// HTTP hook to the daemon's hook port with the token header; those
    /// two stay commands. Switching to `command` and back replaces bir's
    /// groups only, an install after Claude Code reformatted the file
    /// changes nothing, and uninstall from either form gives back every
    /// byte.
    #[test]
    fn http_hooks_switch_with_command_hooks_and_uninstall_gives_back_every_byte() {
        let file = Path::new("settings.json");
        let before = "{\n  \"hooks\": {\n    \"Stop\": [{\"hooks\": [{\"type\": \"http\", \"url\": \"http://127.0.0.1:9/hook/Stop\"}]}]\n  }\n}\n";
        let http = http_form("/b/bir-hooks");
        let plan = install_edit(Some(before.as_bytes()), &http, file).expect("install");
        let after = plan.bytes.expect("changed");
        let doc = Doc::parse(&after, Flavor::Json).expect("json");
        let ours = registered(&doc);
        assert_eq!(ours.len(), registered_events().count());
        for r in &ours {
            let want = if COMMAND_ALWAYS.contains(&r.event.as_str()) {
                Transport::Command
            } else {
                Transport::Http
            };
            assert_eq!(r.hook.transport, want, "{}", r.event);
            if want == Transport::Http {
                assert!(
                    r.command
                        .starts_with(&format!("http://127.0.0.1:47113/hook/{}", r.event)),
                    "{}",
                    r.command
                );
            }
        }
        let text = String::from_utf8(after.clone()).expect("utf8");
        assert!(text.contains(&format!("\"Bearer {}\"", "ab".repeat(32))));
        assert!(text.contains("\"X-Bir-Hook\""));
        assert!(text.contains("/hook/PreToolUse?claude_config=%2Fh%2F.claude\""));
        // The user's own HTTP hook (no X-Bir-Hook) is not bir's.
        let stop = doc.root.at(&["hooks", "Stop"]).expect("Stop");
        assert_eq!(stop.items().len(), 2);
        assert!(our_group(&stop.items()[0]).is_none());
        // Claude Code rewrites the file pretty-printed: still recognised.
        let pretty = serde_json::to_string_pretty(
            &serde_json::from_slice::<serde_json::Value>(&after).expect("json"),
        )
        .expect("pretty");
        let again = install_edit(Some(pretty.as_bytes()), &http, file).expect("again");
        assert!(again.bytes.is_none(), "nothing to change");
        // To command hooks: bir's HTTP groups replaced, nothing else.
        let cmd = form("/b/bir-hooks");
        let switched = install_edit(Some(&after), &cmd, file).expect("switch");
        assert_eq!(
            switched.replaced,
            registered_events().count() - COMMAND_ALWAYS.len()
        );
        let switched_bytes = switched.bytes.expect("changed");
        let doc = Doc::parse(&switched_bytes, Flavor::Json).expect("json");
        assert!(
            registered(&doc)
                .iter()
                .all(|r| r.hook.transport == Transport::Command)
        );
        // And back.
        let back = install_edit(Some(&switched_bytes), &http, file).expect("back");
        let back_bytes = back.bytes.expect("changed");
        let mut events = plan.events.clone();
        events.extend(switched.events.clone());
        events.extend(back.events.clone());
        let change = recorded(events, false, plan.keep_parents);
        for state in [&after, &switched_bytes, &back_bytes] {
            let (restored, _) = uninstall_edit(state, &change).expect("uninstall");
            assert_eq!(
                String::from_utf8(restored.expect("changed")).expect("utf8"),
                before
            );
        }
        // Injection asked for on PreToolUse goes into the URL.
        let inject = HookForm {
            correlation: Some(Correlation::Inject),
            ..http_form("/b/bir-hooks")
        };
        let plan = install_edit(Some(&after), &inject, file).expect("inject");
        let text = String::from_utf8(plan.bytes.expect("changed")).expect("utf8");
        assert!(
            text.contains("/hook/PreToolUse?correlate=inject&claude_config="),
            "{text}"
        );
    }

    /// Events bir no longer registers (an install of an older bir) lose
    /// bir's group at the next install; the user's groups stay.
    #[test]
    fn groups_of_events_left_to_the_transcript_are_taken_out() {
        let file = Path::new("s.json");
        let f = form("/b/bir-hooks");
        let old = format!(
            "{{\"hooks\": {{\"MessageDisplay\": [{}, {{\"hooks\": [{{\"type\": \"command\", \"command\": \"mine\"}}]}}]}}}}",
            f.group_with("MessageDisplay", &[], false)
        );
        let plan = install_edit(Some(old.as_bytes()), &f, file).expect("install");
        assert_eq!(plan.replaced, 1);
        let doc = Doc::parse(&plan.bytes.expect("changed"), Flavor::Json).expect("json");
        let md = doc.root.at(&["hooks", "MessageDisplay"]).expect("kept");
        assert_eq!(md.items().len(), 1, "the user's group stays");
        assert!(!registered(&doc).iter().any(|r| r.event == "MessageDisplay"));
    }

    /// `PostToolBatch` is registered only while a guide is armed: added
    /// with one, taken out again without (an older install's group too),
    /// and `bir uninstall` gives the file back byte for byte either way.
    #[test]
    fn post_tool_batch_follows_the_guides() {
        let file = Path::new("s.json");
        let before = "{\n  \"theme\": \"dark\"\n}\n";
        for f in [form("/b/bir-hooks"), http_form("/b/bir-hooks")] {
            let plain =
                install_edit_with(Some(before.as_bytes()), &f, file, &[], false).expect("install");
            let plain_bytes = plain.bytes.clone().expect("changed");
            let doc = Doc::parse(&plain_bytes, Flavor::Json).expect("json");
            assert!(!registered(&doc).iter().any(|r| r.event == "PostToolBatch"));
            assert!(doc.root.at(&["hooks", "PostToolBatch"]).is_none());
            assert!(registered(&doc).iter().any(|r| r.event == "PreToolUse"));

            let guided = install_edit_with(Some(&plain_bytes), &f, file, &[], true).expect("arm");
            let guided_bytes = guided.bytes.clone().expect("changed");
            assert_eq!(
                guided
                    .events
                    .iter()
                    .map(|e| e.event.as_str())
                    .collect::<Vec<_>>(),
                ["PreToolUse", "PostToolBatch"],
                "PreToolUse is written again, for every tool"
            );
            let doc = Doc::parse(&guided_bytes, Flavor::Json).expect("json");
            assert!(registered(&doc).iter().any(|r| r.event == "PostToolBatch"));

            let stopped =
                install_edit_with(Some(&guided_bytes), &f, file, &[], false).expect("stop");
            assert_eq!(
                stopped.replaced, 2,
                "PostToolBatch out, PreToolUse matched again"
            );
            let stopped_bytes = stopped.bytes.clone().expect("changed");
            let doc = Doc::parse(&stopped_bytes, Flavor::Json).expect("json");
            assert!(!registered(&doc).iter().any(|r| r.event == "PostToolBatch"));

            let mut events = plain.events.clone();
            events.extend(guided.events.clone());
            let change = recorded(events, false, plain.keep_parents);
            for state in [&plain_bytes, &guided_bytes, &stopped_bytes] {
                let (restored, _) = uninstall_edit(state, &change).expect("uninstall");
                assert_eq!(
                    String::from_utf8(restored.expect("changed")).expect("utf8"),
                    before
                );
            }
        }
    }

    /// Without a guide, bir's `PreToolUse` reaches it only for MCP tools and
    /// the subagent tool (the built-ins' calls are told by `PostToolUse`
    /// and the transcript); with one armed, for every tool. An install of
    /// an older bir (no matcher) converges to that, and the matcher group
    /// is still recognised as bir's (never the user's matcher groups).
    #[test]
    fn pre_tool_use_reaches_bir_for_mcp_and_agent_tools_unless_a_guide_is_armed() {
        let file = Path::new("s.json");
        for f in [form("/b/bir-hooks"), http_form("/b/bir-hooks")] {
            let matcher = |bytes: &[u8]| {
                let doc = Doc::parse(bytes, Flavor::Json).expect("json");
                let groups = doc.root.at(&["hooks", "PreToolUse"]).expect("registered");
                let ours: Vec<Option<String>> = groups
                    .items()
                    .iter()
                    .filter(|g| our_group(g).is_some())
                    .map(|g| g.get("matcher").and_then(Node::as_str).map(str::to_owned))
                    .collect();
                assert_eq!(ours.len(), 1, "one group of bir's");
                ours.into_iter().next().flatten()
            };
            let plain = install_edit_with(None, &f, file, &[], false).expect("install");
            let plain_bytes = plain.bytes.expect("changed");
            assert_eq!(
                matcher(&plain_bytes).as_deref(),
                matcher_of("PreToolUse", false)
            );
            let again = install_edit_with(Some(&plain_bytes), &f, file, &[], false).expect("again");
            assert!(again.bytes.is_none(), "a matched group is bir's, in form");

            let guided = install_edit_with(Some(&plain_bytes), &f, file, &[], true).expect("arm");
            assert_eq!(matcher(&guided.bytes.expect("changed")), None);

            // An older bir's group, without a matcher, next to a user's
            // matcher group that runs something else.
            let old = format!(
                "{{\"hooks\": {{\"PreToolUse\": [{{\"matcher\": \"Bash\", \"hooks\": [{{\"type\": \"command\", \"command\": \"mine\"}}]}}, {}]}}}}",
                f.group_with("PreToolUse", &[], true)
            );
            let upgraded =
                install_edit_with(Some(old.as_bytes()), &f, file, &[], false).expect("upgrade");
            let upgraded_bytes = upgraded.bytes.expect("changed");
            assert_eq!(
                matcher(&upgraded_bytes).as_deref(),
                matcher_of("PreToolUse", false)
            );
            let doc = Doc::parse(&upgraded_bytes, Flavor::Json).expect("json");
            let groups = doc.root.at(&["hooks", "PreToolUse"]).expect("kept");
            assert_eq!(groups.items().len(), 2, "the user's group stays");
            assert_eq!(
                groups.items()[0].get("matcher").and_then(Node::as_str),
                Some("Bash")
            );
        }
    }

    /// bir's HTTP hooks carry the session's `BIR_OFF` in a header Claude
    /// Code fills in from its environment.
    #[test]
    fn http_hooks_carry_bir_off_from_the_session_environment() {
        let f = http_form("/b/bir-hooks");
        let group: serde_json::Value =
            serde_json::from_str(&f.group_with("PreToolUse", &[], false)).expect("json");
        let hook = &group["hooks"][0];
        assert_eq!(hook["headers"]["X-Bir-Off"], "$BIR_OFF");
        assert_eq!(hook["allowedEnvVars"], serde_json::json!(["BIR_OFF"]));
    }
}
