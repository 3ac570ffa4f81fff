//! `bir install`, `bir uninstall`, `bir status` (Claude Code).
//!
//! `bir install` wraps every approved server this project's Claude Code
//! sees (stdio servers, and remote ones as [`crate::clientconfig::remote_entry`] describes), writing the wrapped copy into the project's **local scope**
//! (`~/.claude.json` → `projects[<key>].mcpServers`), which beats the
//! project (`.mcp.json`) and user scopes: the team's `.mcp.json` and the
//! user scope are never edited. A server already in the local scope is
//! wrapped in place. Every change goes into the ledger; `bir uninstall`
//! reverses exactly those changes.
//!
//! The plan of what `bir install` changes (which files, which entries, the
//! hooks) is `clientconfig::plan`, and what `bir uninstall` undoes is
//! `clientconfig::uninstall`; this module reads the flags, calls them and
//! says what changed.

use argh::FromArgs;
use std::path::{Path, PathBuf};

use crate::clientconfig::claude::{self, Paths, Resolved};
use crate::clientconfig::entry::EntryKind;
use crate::clientconfig::hook_install;
use crate::clientconfig::ledger;
use crate::clientconfig::plan::{Applied, InstallPlan, InstallRequest, Planned};
use crate::clientconfig::uninstall::UninstallRequest;
use crate::clientconfig::vocab::{Decision, Found};

use crate::clientconfig::hook_entries::Transport;
use crate::clientconfig::hosthooks;
use crate::error::{Error, ExitStatus};
use crate::output::{escape, out};

/// Wrap this project's MCP servers with bir-proxy (Claude Code).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "install")]
pub(crate) struct InstallCmd {
    /// only this client: claude-code, cursor, vscode, windsurf, gemini,
    /// claude-desktop, zed, codex (default: every one whose config exists)
    #[argh(option)]
    pub client: Option<String>,

    /// wrap only this server (repeatable); also wraps a `.mcp.json` server
    /// Claude Code has not asked about yet (never a rejected one), or a
    /// remote server the client signs in itself
    #[argh(option)]
    pub server: Vec<String>,

    /// the project directory (default: the current directory)
    #[argh(option)]
    pub project: Option<PathBuf>,

    /// print the exact diff and change nothing
    #[argh(switch)]
    pub dry_run: bool,

    /// wrap `.mcp.json` servers in place instead of copying them into the
    /// local scope (also BIR_WRAP_MCP_JSON=1)
    #[argh(switch)]
    pub mcp_json: bool,

    /// wrap the stdio servers of this JSON file (any client) in place
    #[argh(option)]
    pub config: Option<PathBuf>,

    /// with --config: the server map's key (default mcpServers)
    #[argh(option, default = "String::from(\"mcpServers\")")]
    pub map_key: String,

    /// with --config: the file may hold comments and trailing commas
    #[argh(switch)]
    pub jsonc: bool,

    /// where to register the Claude Code hooks that record whole sessions:
    /// user (default: ~/.claude/settings.json), project
    /// (<project>/.claude/settings.json, loaded only when Claude Code starts
    /// in that directory and trusts it) or none
    #[argh(option, default = "String::from(\"user\")")]
    pub hooks: String,

    /// with --client codex|gemini|copilot|cursor|vscode: register that
    /// agent's hooks in its user (default) or project hook file
    #[argh(option)]
    pub scope: Option<String>,

    /// call-id injection for MCP calls of hosts that send no
    /// `_meta["claudecode/toolUseId"]`: inject (PreToolUse adds
    /// `__bir_call_id__` to a bound server's arguments; the server sees it),
    /// off, or meta (the default: never touch arguments). Written on the
    /// PreToolUse hook; without it, what is registered stays
    #[argh(option)]
    pub correlate: Option<String>,

    /// never inject a call id, whatever BIR_CORRELATE says (same as
    /// --correlate off)
    #[argh(switch)]
    pub no_correlation: bool,

    /// wrapped servers start (remote ones: connect) only when a request
    /// needs them
    /// (`bir-proxy --lazy`; applies to the entries this run wraps)
    #[argh(switch)]
    pub lazy: bool,
    /// also install bir's Claude Code plugin (a hooks module that streams
    /// the model's words and each turn's answer to the recorder daemon over
    /// its private Unix socket; Claude Code 2.1.332 or newer)
    #[argh(switch, long = "mod")]
    pub with_mod: bool,

    /// serve this recorded scenario instead of the --server entries
    /// (`bir-proxy --replay FILE -- original`); `bir uninstall --server
    /// NAME` switches back
    #[argh(option)]
    pub replay: Option<PathBuf>,

    /// record agent sessions in every directory, not only in the projects
    /// bir is installed in (`bir uninstall --everywhere` takes it back)
    #[argh(switch)]
    pub everywhere: bool,
}

/// Undo `bir install`: restore the entries bir wrapped.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "uninstall")]
pub(crate) struct UninstallCmd {
    /// every project on this machine, not just the current one
    #[argh(switch)]
    pub all: bool,

    /// only this server (repeatable)
    #[argh(option)]
    pub server: Vec<String>,

    /// only this client's changes, in every project (e.g. cursor)
    #[argh(option)]
    pub client: Option<String>,

    /// only the changes in this file
    #[argh(option)]
    pub config: Option<PathBuf>,

    /// the project directory (default: the current directory)
    #[argh(option)]
    pub project: Option<PathBuf>,

    /// print the exact diff and change nothing
    #[argh(switch)]
    pub dry_run: bool,

    /// take back `bir install --everywhere` only: sessions are recorded
    /// again only in the projects bir is installed in
    #[argh(switch)]
    pub everywhere: bool,
}

/// Show which MCP servers are wrapped, per client and scope.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "status")]
pub(crate) struct StatusCmd {
    /// the project directory (default: the current directory)
    #[argh(option)]
    pub project: Option<PathBuf>,
}

fn project_dir(p: &Option<PathBuf>) -> PathBuf {
    p.clone()
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")))
}

/// Plans `bir install` for `cmd` (nothing is written): `clientconfig::plan`.
pub(crate) fn plan(cmd: &InstallCmd) -> Result<InstallPlan, Error> {
    let project = project_dir(&cmd.project);
    crate::clientconfig::plan::plan(&InstallRequest {
        project: &project,
        client: cmd.client.as_deref(),
        server: &cmd.server,
        config: cmd.config.as_deref(),
        map_key: &cmd.map_key,
        jsonc: cmd.jsonc,
        mcp_json: cmd.mcp_json,
        hooks: &cmd.hooks,
        correlate: cmd.correlate.as_deref(),
        no_correlation: cmd.no_correlation,
        lazy: cmd.lazy,
        with_mod: cmd.with_mod,
        replay: cmd.replay.as_deref(),
    })
}

/// Prints what [`InstallPlan::apply`] changed, and how to undo and check it.
pub(crate) fn report_applied(applied: &Applied) {
    out("");
    for (file, n) in &applied.files {
        out(&format!(
            "Changed: {} ({n} entr{}). Nothing else in it was touched.",
            file.display(),
            if *n == 1 { "y" } else { "ies" }
        ));
    }
    if let Some((file, n)) = &applied.hooks {
        out(&format!(
            "Changed: {} (bir's hooks for {n} event{}). Nothing else in it was touched.",
            file.display(),
            if *n == 1 { "" } else { "s" }
        ));
    }
    if let Some(file) = &applied.modded {
        out(&format!(
            "Changed: {} (bir's Claude Code plugin declared). Nothing else in it was touched.",
            file.display()
        ));
    }
    out("Undo: bir uninstall   (preview: bir uninstall --dry-run)");
}

pub(crate) fn install(cmd: InstallCmd) -> Result<ExitStatus, Error> {
    if let Some(host) = cmd
        .client
        .as_deref()
        .and_then(crate::clientconfig::hosthooks::host_of_client)
    {
        return install_agent_hooks(&cmd, host);
    }
    let plan = plan(&cmd)?;
    if cmd.dry_run {
        plan.show()?;
        out("(dry run: nothing was written)");
        return Ok(ExitStatus::Success);
    }
    let here = project_dir(&cmd.project);
    let recorded_before = crate::scope::recorded_here(&here);
    let applied = plan.apply()?;
    let chose_everywhere = cmd.everywhere && ledger::choose_everywhere()?;
    let joined = !recorded_before && crate::scope::recorded_here(&here);
    if applied.files.is_empty()
        && applied.hooks.is_none()
        && applied.modded.is_none()
        && !chose_everywhere
        && !joined
    {
        out("\nNothing to change.");
        return Ok(ExitStatus::Success);
    }
    if chose_everywhere {
        out(
            "\nRecording: agent sessions are now recorded in every directory (undo: bir uninstall --everywhere).",
        );
    }
    report_applied(&applied);
    out("Check: bir doctor     Restart the clients' sessions to use the wrapped servers.");
    Ok(ExitStatus::Success)
}

/// `bir uninstall`: what the flags ask for, undone by
/// `clientconfig::uninstall`.
pub(crate) fn uninstall(cmd: UninstallCmd) -> Result<ExitStatus, Error> {
    let project = project_dir(&cmd.project);
    crate::clientconfig::uninstall::run(&UninstallRequest {
        all: cmd.all,
        server: &cmd.server,
        client: cmd.client.as_deref(),
        config: cmd.config.as_deref(),
        project: &project,
        dry_run: cmd.dry_run,
        everywhere: cmd.everywhere,
    })
}

pub(crate) fn status(cmd: StatusCmd) -> Result<ExitStatus, Error> {
    let paths = Paths::from_env(&project_dir(&cmd.project))?;
    let resolved = claude::resolve(&paths)?;
    let plan: Vec<Planned> = claude::decide(&resolved, &[])
        .into_iter()
        .map(|(found, decision)| Planned { found, decision })
        .collect();
    let width = crate::clientconfig::plan::say_project(&resolved, &plan);
    for p in &plan {
        let f = &p.found;
        let state = match (&f.kind, &p.decision) {
            (EntryKind::Wrapped(w), _) => {
                format!("wrapped    {} scope → {}", f.scope.label(), w.upstream())
            }
            (_, Decision::Skip(why)) => format!("not wrapped ({} scope): {why}", f.scope.label()),
            _ => format!(
                "not wrapped ({} scope): `bir install` would wrap it",
                f.scope.label()
            ),
        };
        out(&format!("  {:<width$}  {state}", f.name));
    }
    for l in crate::clientconfig::hosthooks::status_lines(&paths.project) {
        out(&l);
    }
    if let Ok(targets) =
        crate::clientconfig::clients::targets(None, None, "mcpServers", false, &paths.project)
    {
        for t in targets {
            let crate::clientconfig::clients::Target::File(cf) = t else {
                continue;
            };
            out(&format!("{} — {}", cf.label, cf.file.display()));
            match crate::clientconfig::clients::entries(&cf, &[]) {
                Ok(entries) => {
                    let width = entries
                        .iter()
                        .map(|(f, _)| f.name.len())
                        .max()
                        .unwrap_or(4)
                        .max(4);
                    for (f, d) in entries {
                        let state = match (&f.kind, d) {
                            (EntryKind::Wrapped(w), _) => {
                                format!("wrapped    → {}", w.upstream())
                            }
                            (_, Decision::Skip(why)) => format!("not wrapped: {why}"),
                            _ => "not wrapped: `bir install` would wrap it".to_owned(),
                        };
                        out(&format!("  {:<width$}  {state}", f.name));
                    }
                }
                Err(e) => out(&format!("  {e}")),
            }
        }
    }
    hook_install::status(&paths);
    let off = std::env::var("BIR_RECORDER").is_ok_and(|v| matches!(v.trim(), "off" | "0" | "none"));
    let switched = crate::home::bir_home().zip(std::env::current_dir().ok());
    let switched = switched.and_then(|(home, cwd)| crate::switch::off_because(&home, &cwd));
    out(&format!(
        "Recording: {}",
        if off {
            "off (BIR_RECORDER=off): wrapped servers are relayed, nothing is recorded"
        } else {
            switched.unwrap_or("on")
        }
    ));
    if let Some(home) = crate::home::bir_home() {
        let here = std::path::absolute(&paths.project).unwrap_or_else(|_| paths.project.clone());
        let verdict = crate::scope::View::load(&home).decide(&here, None);
        out(&format!("Recorded here: {}", recorded_here_words(&verdict)));
    }
    match ledger::load() {
        Ok(l) => {
            let keys = crate::clientconfig::uninstall::this_project_keys(&paths);
            let files = |n: usize| format!("{n} file{}", if n == 1 { "" } else { "s" });
            out(&format!(
                "Ledger: bir changed {} for this project, {} on this machine ({})",
                files(l.files_changed(Some(&keys))),
                files(l.files_changed(None)),
                ledger::path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ));
        }
        Err(e) => out(&format!("Ledger: {e}")),
    }
    for line in super::down::status_lines() {
        out(&line);
    }
    Ok(ExitStatus::Success)
}

/// `bir status`'s answer to "are sessions in this directory recorded?".
fn recorded_here_words(verdict: &crate::scope::Verdict) -> String {
    use crate::scope::Verdict;
    match verdict {
        Verdict::Installed(p) if p.as_os_str().is_empty() => {
            "yes, bir is installed in this project".to_owned()
        }
        Verdict::Installed(p) => format!(
            "yes, bir is installed in this project ({})",
            escape(&p.display().to_string())
        ),
        Verdict::Everywhere(at) => format!(
            "yes: everywhere, by your choice on {} (`bir uninstall --everywhere` takes it back)",
            at.get(..10).unwrap_or(at)
        ),
        Verdict::NoLedger => {
            "no `bir install` on this machine yet (hooks you registered by hand record everywhere)"
                .to_owned()
        }
        Verdict::AgentEverywhere => "yes, for that agent everywhere".to_owned(),
        Verdict::Elsewhere(projects) if projects.is_empty() => {
            "no: bir is installed in no project; `bir install` here or `bir install --everywhere`"
                .to_owned()
        }
        Verdict::Elsewhere(projects) => {
            let list: Vec<String> = projects
                .iter()
                .map(|p| escape(&p.display().to_string()))
                .collect();
            format!(
                "no: bir is installed in {}; `bir install` here or `bir install --everywhere`",
                list.join(", ")
            )
        }
    }
}

/// Used by doctor: the resolved Claude Code config for a project.
pub(crate) fn resolve_for(project: &Path) -> Result<(Resolved, Vec<(Found, Decision)>), Error> {
    let paths = Paths::from_env(project)?;
    let r = claude::resolve(&paths)?;
    let d = claude::decide(&r, &[]);
    Ok((r, d))
}

/// `bir install --client <agent>`: wraps the agent's MCP servers as
/// before (when it has any), then registers its hooks (`--scope`, else
/// `--hooks`: user, project or none).
fn install_agent_hooks(
    cmd: &InstallCmd,
    host: crate::bound::hosts::Host,
) -> Result<crate::error::ExitStatus, Error> {
    let hooks = hosthooks::parse_hooks(&cmd.hooks)?;
    let scope = match cmd.scope.as_deref() {
        Some(word) => Some((
            hosthooks::Scope::parse(word)?,
            hooks.map_or(Transport::Http, |(_, t)| t),
        )),
        None => hooks,
    };
    // A config bir cannot read is refused before any hook is registered.
    let mut changed = wrap_agent_servers(cmd)?;
    if let Some((scope, transport)) = scope {
        let project = project_dir(&cmd.project);
        let project = std::path::absolute(&project).unwrap_or(project);
        changed |= hosthooks::install(host, scope, transport, &project, cmd.dry_run)?;
    }
    if cmd.everywhere && !cmd.dry_run && ledger::choose_everywhere()? {
        out(
            "Recording: agent sessions are now recorded in every directory (undo: bir uninstall --everywhere).",
        );
        changed = true;
    }
    if cmd.dry_run {
        out("(dry run: nothing was written)");
    } else if changed {
        out(&format!("Undo: bir uninstall --client {}", host.flag()));
    } else {
        out("\nNothing to change.");
    }
    Ok(crate::error::ExitStatus::Success)
}

/// The MCP wrapping half of `bir install --client <agent>`: shows
/// (`--dry-run`) or applies the plan, and says whether it changed a file.
/// An agent without an MCP config (or none bir can wrap) still gets its
/// hooks; a config bir cannot read stops here.
fn wrap_agent_servers(cmd: &InstallCmd) -> Result<bool, Error> {
    let project = project_dir(&cmd.project);
    let targets = crate::clientconfig::clients::targets(
        cmd.client.as_deref(),
        cmd.config.as_deref(),
        &cmd.map_key,
        cmd.jsonc,
        &project,
    );
    if let Err(e) = targets {
        out(&format!("No MCP servers to wrap: {e}"));
        return Ok(false);
    }
    let p = plan(cmd)?;
    if cmd.dry_run {
        p.show()?;
        return Ok(false);
    }
    let applied = p.apply()?;
    if !applied.files.is_empty() {
        report_applied(&applied);
    }
    Ok(!applied.files.is_empty())
}
