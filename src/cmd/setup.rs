//! `bir setup`: the guided first run, over the pieces `bir install` and
//! `bir doctor` are made of (nothing here edits a file itself).
//!
//! 1. Find the MCP clients on this machine (Claude Code and every other
//!    client whose config file exists).
//! 2. Plan `bir install` for them once ([`commands::plan`]) and show the
//!    plan: per client and scope, every server and what happens to it, the
//!    exact diff of each file, and the hooks' section.
//! 3. Ask once (or `--yes`). Without a terminal to ask on and without
//!    `--yes`, refuse (exit 2) having written nothing.
//! 4. Apply **that same plan**: the entries and hook events written are the
//!    ones shown (if a client rewrote its file in between, the same edits
//!    are made to its new contents, as `bir install` does).
//!    Every other agent installed here (Codex, Gemini CLI, Copilot CLI,
//!    Cursor, VS Code) gets its hooks in the same scope (`hosthooks`).
//! 5. Suggest `bir login` when a recording service is configured and no
//!    one is signed in; run `bir doctor`; say where the next run appears.
//!
//! Idempotent: when the plan would change nothing, it says everything is in
//! place, asks nothing and writes nothing.

use argh::FromArgs;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use super::doctor;
use super::install::{self, report_applied};
use crate::clientconfig::claude::Paths;
use crate::clientconfig::clients::{self, Target};
use crate::clientconfig::hook_entries::Transport;
use crate::clientconfig::hosthooks;
use crate::clientconfig::vocab::Client;
use crate::cmd::doctor::DoctorCmd;
use crate::cmd::install::InstallCmd;
use crate::error::{Error, ExitStatus};
use crate::output::out;

/// The guided first run: find the MCP clients here, show what `bir install`
/// would change, ask once, install, check with `bir doctor`.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "setup")]
pub(crate) struct SetupCmd {
    /// make the changes shown without asking (needed without a terminal)
    #[argh(switch)]
    pub yes: bool,

    /// the project directory (default: the current directory)
    #[argh(option)]
    pub project: Option<PathBuf>,

    /// where Claude Code's hooks go: user (default), project or none (as
    /// for `bir install --hooks`)
    #[argh(option, default = "String::from(\"user\")")]
    pub hooks: String,

    /// how long `bir doctor` waits for each server, in milliseconds
    /// (default 15000)
    #[argh(option, default = "15000")]
    pub timeout_ms: u64,

    /// wrapped servers start (remote ones: connect) only when a request
    /// needs them
    /// (`bir install --lazy`)
    #[argh(switch)]
    pub lazy: bool,
}

/// An MCP client found on this machine, and the file that says so.
struct FoundClient {
    label: String,
    file: PathBuf,
}

/// Claude Code counts as present when its config file or its settings
/// directory exists. (Its servers may also come from the project's
/// `.mcp.json`, but a project file alone does not mean Claude Code is
/// installed; hooks are only registered for a Claude Code that is.)
fn claude_code_present(paths: &Paths) -> Option<PathBuf> {
    [&paths.claude_json, &paths.settings_dir]
        .into_iter()
        .find(|p| p.exists())
        .cloned()
}

fn found_clients(project: &Path) -> Result<(Vec<FoundClient>, bool), Error> {
    let mut found = Vec::new();
    let paths = Paths::from_env(project)?;
    let claude = claude_code_present(&paths);
    if let Some(file) = &claude {
        found.push(FoundClient {
            label: "Claude Code".into(),
            file: file.clone(),
        });
    }
    for target in clients::targets(None, None, "mcpServers", false, project)? {
        if let Target::File(cf) = target {
            found.push(FoundClient {
                label: cf.label.clone(),
                file: cf.file.clone(),
            });
        }
    }
    Ok((found, claude.is_some()))
}

/// Whether standard input and standard error are a terminal (the question
/// is written to one and answered on the other).
fn can_ask() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(0) == 1 && libc::isatty(2) == 1 }
}

/// Asks on the terminal; only `y` or `yes` is a yes.
fn ask(question: &str) -> Result<bool, Error> {
    crate::output::prompt(&format!("{question} [y/N] "));
    let _ = io::stderr().flush();
    let mut answer = String::new();
    io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Error::failure(format!("cannot read the answer: {e}")))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

pub(crate) fn main(cmd: SetupCmd) -> Result<ExitStatus, Error> {
    let project = cmd
        .project
        .clone()
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")));
    let (found, claude) = found_clients(&project)?;
    if found.is_empty() {
        let others: Vec<&str> = Client::ALL[1..].iter().map(|c| c.name()).collect();
        out(&format!(
            "No MCP client found on this machine (looked for Claude Code's ~/.claude.json and ~/.claude/, and the config files of {}).\nInstall a client and run `bir setup` again, or wrap a server by hand: `bir wrap --help`.\nNothing was changed.",
            others.join(", ")
        ));
        return Ok(ExitStatus::Failure);
    }
    out("MCP clients on this machine:");
    for c in &found {
        out(&format!("  {:<16} {}", c.label, c.file.display()));
    }
    out("");
    let install = InstallCmd {
        client: None,
        server: Vec::new(),
        project: Some(project.clone()),
        dry_run: false,
        mcp_json: false,
        config: None,
        map_key: "mcpServers".into(),
        jsonc: false,
        correlate: None,
        no_correlation: false,
        with_mod: false,
        replay: None,
        // No hooks for a Claude Code that is not installed.
        hooks: if claude {
            cmd.hooks.clone()
        } else {
            "none".into()
        },
        lazy: cmd.lazy,
        scope: None,
        everywhere: false,
    };
    let plan = install::plan(&install)?;
    // Every other agent installed here gets its hooks too (where `--hooks`
    // says; none with `--hooks none`), shown before the one question.
    let agent_scope = match cmd.hooks.as_str() {
        "user" => Some(hosthooks::Scope::User),
        "project" => Some(hosthooks::Scope::Project),
        _ => None,
    };
    let agents: Vec<_> = agent_scope
        .map(|scope| {
            hosthooks::agents_present()
                .into_iter()
                .filter(|h| hosthooks::would_change(*h, scope, &project))
                .map(|h| (h, scope))
                .collect()
        })
        .unwrap_or_default();
    let pending = plan.would_change()? || !agents.is_empty();
    plan.show()?;
    for (host, scope) in &agents {
        hosthooks::install(*host, *scope, Transport::Http, &project, true)?;
    }
    if pending {
        out("");
        if !cmd.yes {
            if !can_ask() {
                return Err(Error::usage(
                    "nothing was changed: this is not a terminal, so bir cannot ask. Read the changes above, then run `bir setup --yes` to make them",
                ));
            }
            if !ask("Make these changes?")? {
                out("Nothing was changed.");
                return Ok(ExitStatus::Success);
            }
        }
        let applied = plan.apply()?;
        report_applied(&applied);
        for (host, scope) in &agents {
            hosthooks::install(*host, *scope, Transport::Http, &project, false)?;
        }
    } else {
        out("\nEverything is in place: nothing to change.");
    }
    offer_login();
    out("\nChecking every wrapped server (bir doctor):");
    let doctor = doctor::main(DoctorCmd {
        project: Some(project),
        client: None,
        timeout_ms: cmd.timeout_ms,
    })?;
    out("\nRestart your client's session: from then on, each session is recorded.");
    out("  bir runs                   the runs recorded, newest first");
    out("  bir runs show latest       the latest run, step by step");
    out("  bir investigate latest     what went wrong or changed in it");
    out("  bir report                 a report to open in a browser");
    Ok(doctor)
}

/// A recording service is configured (`BIR_SERVICE_URL`) but nobody is
/// signed in to it: say how to.
fn offer_login() {
    let Some(url) = crate::service::url::service_url_from_env() else {
        return;
    };
    let signed_in = crate::service::credentials::credentials_path()
        .and_then(|p| crate::service::credentials::load(&p).ok().flatten())
        .is_some();
    if signed_in {
        out(&format!(
            "\nRecording service {}: signed in (runs are sent there too).",
            crate::urls::display(&url)
        ));
    } else {
        out(&format!(
            "\nA recording service is configured ({}), but you are not signed in: `bir login` to send runs there too (they are recorded locally either way).",
            crate::urls::display(&url)
        ));
    }
}
