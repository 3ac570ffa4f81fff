//! What one `bir install` does, planned before anything is written: the
//! file jobs (which entries to wrap, per client file: in place, or copied
//! into Claude Code's local scope), the per-client summaries, where the
//! hooks go, the call-id injection mode and whether the mod comes too.
//! `bir install --dry-run` shows the plan, `bir install` applies it, and
//! `bir setup` shows it, asks, then applies the very same plan (so nothing
//! is edited that was not shown).
//!
//! Applying writes each file atomically ([`super::atomic`]) and records its
//! changes in the ledger right after; the hooks are registered only once
//! the servers are wrapped, and the mod after the hooks.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use super::atomic;
use super::claude::{self, Paths, Resolved};
use super::diff;
use super::entry::{EntryKind, ProxyForm};
use super::format::{self, FileJob, Op};
use super::hook_entries::HookScope;
use super::hook_install;
use super::jsonedit::{Flavor, json_string};
use super::ledger::{self, Change};
use super::vocab::{Decision, Found, Scope};
use crate::bound::Correlation;
use crate::codec::sha256_hex;
use crate::error::Error;
use crate::output::out;

/// The client name Claude Code's changes are filed under in the ledger.
const CLIENT: &str = "claude-code";

/// What `bir install` (or `bir setup`) asks for, as its flags say it.
pub(crate) struct InstallRequest<'a> {
    /// The project directory.
    pub project: &'a Path,
    /// `--client`: only this client (default: every one whose config exists).
    pub client: Option<&'a str>,
    /// `--server`: only these servers.
    pub server: &'a [String],
    /// `--config FILE`, its map key (`--map-key`) and `--jsonc`.
    pub config: Option<&'a Path>,
    pub map_key: &'a str,
    pub jsonc: bool,
    /// `--mcp-json`: wrap `.mcp.json` servers in place.
    pub mcp_json: bool,
    /// `--hooks WORD[,WORD]`.
    pub hooks: &'a str,
    /// `--correlate MODE` and `--no-correlation`.
    pub correlate: Option<&'a str>,
    pub no_correlation: bool,
    /// `--lazy`.
    pub lazy: bool,
    /// `--mod`.
    pub with_mod: bool,
    /// `--replay FILE`: serve this recorded scenario instead.
    pub replay: Option<&'a Path>,
}

/// One Claude Code entry and what `bir install` decides for it.
pub(crate) struct Planned {
    pub found: Found,
    pub decision: Decision,
}

/// Runs the jobs (or, with `dry_run`, prints their diffs). Returns, per
/// changed file, its path and the number of entries changed.
fn run_jobs(
    jobs: &[FileJob],
    form: &ProxyForm,
    dry_run: bool,
) -> Result<Vec<(PathBuf, usize)>, Error> {
    let mut changed_files = Vec::new();
    for job in jobs.iter().filter(|j| !j.ops.is_empty()) {
        if dry_run {
            let before = atomic::read(&job.file)?;
            if let (Some(after), _) = format::of_job(job).apply(job, form, before.as_deref())? {
                out(&diff::unified(
                    &job.file.display().to_string(),
                    before.as_deref().unwrap_or_default(),
                    &after,
                ));
            }
            continue;
        }
        let changes: RefCell<Vec<Change>> = RefCell::new(Vec::new());
        let outcome = atomic::update(&job.file, &mut |before| {
            let (after, c) = format::of_job(job).apply(job, form, before)?;
            *changes.borrow_mut() = c;
            Ok(after)
        })?;
        let mut changes = changes.into_inner();
        if !outcome.changed || changes.is_empty() {
            continue;
        }
        let file_hash = sha256_hex(&outcome.after);
        for c in &mut changes {
            c.entry_sha256 = format::of_job(job).entry_hash(&outcome.after, &c.path);
            c.file_sha256 = file_hash.clone();
            c.file = outcome.target.clone();
        }
        ledger::modify(&mut |l| {
            l.changes
                .retain(|old| !changes.iter().any(|c| c.file == old.file && c.path == old.path));
            l.changes.extend(changes.iter().cloned());
        })
        .map_err(|e| {
            format!(
                "{} was changed, but the ledger could not be written ({e}); `bir uninstall` cannot undo it — restore the entries by hand",
                outcome.target.display()
            )
        })?;
        changed_files.push((outcome.target.clone(), changes.len()));
    }
    Ok(changed_files)
}

/// `BIR_WRAP_MCP_JSON=1` (or `--mcp-json`): wrap `.mcp.json` servers in
/// place instead of copying them into the local scope.
fn wrap_mcp_json_in_place(flag: bool) -> bool {
    flag || std::env::var("BIR_WRAP_MCP_JSON").is_ok_and(|v| v.trim() == "1")
}

/// `--correlate MODE` / `--no-correlation`: the call-id injection mode to
/// write on the `PreToolUse` hook (`None`: keep what is registered).
fn correlation_option(
    word: Option<&str>,
    no_correlation: bool,
) -> Result<Option<Correlation>, Error> {
    match (word, no_correlation) {
        (Some(w), true) if Correlation::parse(w) != Some(Correlation::Off) => Err(Error::usage(
            "--no-correlation and --correlate say different things; give one",
        )),
        (_, true) => Ok(Some(Correlation::Off)),
        (None, false) => Ok(None),
        (Some(w), false) => Correlation::parse(w).map(Some).ok_or_else(|| {
            Error::usage(format!("--correlate takes inject, off or meta, not `{w}`"))
        }),
    }
}

/// What one `bir install` would do, computed once: the file jobs (which
/// entries to wrap, per file), the per-client summaries, and where the
/// hooks go. `bir install --dry-run` shows it, `bir install` applies it,
/// and `bir setup` shows it, asks, then applies the very same plan (so
/// nothing is edited that was not shown).
pub(crate) struct InstallPlan {
    jobs: Vec<FileJob>,
    form: ProxyForm,
    summaries: Vec<Box<dyn Fn(bool)>>,
    /// Claude Code's paths and project key, when it is a target: the hooks
    /// are registered there once the servers are wrapped.
    hook_target: Option<(Paths, String)>,
    hook_scope: Option<HookScope>,
    /// The call-id injection mode for the `PreToolUse` hook (`None`: keep
    /// what is registered).
    correlation: Option<Correlation>,
    /// `--mod`: also install bir's Claude Code plugin.
    with_mod: bool,
}

/// Plans `bir install` for `req` (nothing is written).
pub(crate) fn plan(req: &InstallRequest<'_>) -> Result<InstallPlan, Error> {
    let project = req.project.to_path_buf();
    if let Some(file) = req.replay {
        super::entry::serve_recording(file, req.server)?;
    }
    let targets =
        super::clients::targets(req.client, req.config, req.map_key, req.jsonc, &project)?;
    let hook_scope = HookScope::parse(req.hooks)?;
    let correlation = correlation_option(req.correlate, req.no_correlation)?;
    let mut hook_target: Option<(Paths, String)> = None;
    let mut form = ProxyForm::detect();
    form.lazy = req.lazy;
    let mut jobs: Vec<FileJob> = Vec::new();
    let mut known_names: Vec<String> = Vec::new();
    let mut summaries: Vec<Box<dyn Fn(bool)>> = Vec::new();
    for target in targets {
        match target {
            super::clients::Target::ClaudeCode => {
                let paths = Paths::from_env(&project)?;
                let resolved = claude::resolve(&paths)?;
                known_names.extend(resolved.winners.iter().map(|f| f.name.clone()));
                hook_target = Some((paths.clone(), resolved.local_key.clone()));
                let plan: Vec<Planned> = claude::decide(&resolved, req.server)
                    .into_iter()
                    .map(|(found, decision)| Planned { found, decision })
                    .collect();
                let in_place_mcp_json = wrap_mcp_json_in_place(req.mcp_json);
                let mut local = FileJob {
                    file: paths.claude_json.clone(),
                    flavor: Flavor::Json,
                    toml: false,
                    client: CLIENT.into(),
                    project: Some(resolved.local_key.clone()),
                    ops: Vec::new(),
                };
                let mut mcp = FileJob {
                    file: paths.mcp_json(),
                    flavor: Flavor::Json,
                    toml: false,
                    client: CLIENT.into(),
                    project: Some(resolved.local_key.clone()),
                    ops: Vec::new(),
                };
                for p in &plan {
                    match p.decision {
                        Decision::InPlace => local.ops.push(Op {
                            found: p.found.clone(),
                            copy_to: None,
                        }),
                        Decision::Copy if in_place_mcp_json && p.found.scope == Scope::Project => {
                            mcp.ops.push(Op {
                                found: p.found.clone(),
                                copy_to: None,
                            })
                        }
                        Decision::Copy => local.ops.push(Op {
                            found: p.found.clone(),
                            copy_to: Some(vec![
                                "projects".into(),
                                resolved.local_key.clone(),
                                "mcpServers".into(),
                                p.found.name.clone(),
                            ]),
                        }),
                        _ => {}
                    }
                }
                jobs.push(local);
                jobs.push(mcp);
                summaries.push(Box::new(move |applied| {
                    summary(&resolved, &plan, applied, in_place_mcp_json)
                }));
            }
            super::clients::Target::File(cf) => {
                let found = super::clients::entries(&cf, req.server)?;
                known_names.extend(found.iter().map(|(f, _)| f.name.clone()));
                let plan: Vec<(Found, Decision)> = found
                    .into_iter()
                    .filter(|(f, _)| req.server.is_empty() || req.server.contains(&f.name))
                    .collect();
                jobs.push(FileJob {
                    file: cf.file.clone(),
                    flavor: cf.flavor,
                    toml: cf.toml,
                    client: cf.client.clone(),
                    project: Some(claude::project_key(
                        &std::path::absolute(&project)
                            .unwrap_or(project.clone())
                            .to_string_lossy(),
                    )),
                    ops: plan
                        .iter()
                        .filter(|(_, d)| *d == Decision::InPlace)
                        .map(|(f, _)| Op {
                            found: f.clone(),
                            copy_to: None,
                        })
                        .collect(),
                });
                summaries.push(Box::new(move |applied| {
                    super::clients::summary(&cf, &plan, applied)
                }));
            }
        }
    }
    for s in req.server {
        if !known_names.contains(s) {
            return Err(Error::failure(format!(
                "no MCP server named \"{s}\" in the configs bir looked at"
            )));
        }
    }
    Ok(InstallPlan {
        jobs,
        form,
        summaries,
        hook_target,
        hook_scope,
        correlation,
        with_mod: req.with_mod,
    })
}

/// What applying a plan changed: per file, its path and how many entries;
/// the hooks' settings file and how many events, if it changed.
pub(crate) struct Applied {
    pub files: Vec<(PathBuf, usize)>,
    pub hooks: Option<(PathBuf, usize)>,
    /// The Claude Code settings file that declares bir's plugin (`--mod`).
    pub modded: Option<PathBuf>,
}

impl InstallPlan {
    /// Whether applying the plan would change any file (entries or hooks),
    /// worked out without printing or writing anything.
    pub(crate) fn would_change(&self) -> Result<bool, Error> {
        for job in self.jobs.iter().filter(|j| !j.ops.is_empty()) {
            let before = atomic::read(&job.file)?;
            if let (Some(after), _) =
                format::of_job(job).apply(job, &self.form, before.as_deref())?
                && before.as_deref() != Some(after.as_slice())
            {
                return Ok(true);
            }
        }
        match (&self.hook_target, self.hook_scope) {
            (Some((paths, _)), Some(scope)) => hook_install::would_change(paths, scope),
            _ => Ok(false),
        }
    }

    /// Prints the per-client summaries, the exact diff of every file that
    /// would change, and the hooks' section. Writes nothing.
    pub(crate) fn show(&self) -> Result<(), Error> {
        for s in &self.summaries {
            s(false);
        }
        run_jobs(&self.jobs, &self.form, true)?;
        if let (Some((paths, key)), Some(scope)) = (&self.hook_target, self.hook_scope) {
            hook_install::install(&hook_install::HookInstall {
                paths,
                scope,
                project_key: key,
                correlation: self.correlation,
                dry_run: true,
                with_mod: self.with_mod,
                joins: false,
            })?;
        }
        if let (Some((paths, key)), true) = (&self.hook_target, self.with_mod) {
            super::plugin::install(paths, key, true)?;
        }
        Ok(())
    }

    /// Writes the plan: the entries, then (only if they were written) the
    /// hooks. Prints the summaries as applied.
    pub(crate) fn apply(&self) -> Result<Applied, Error> {
        let result = run_jobs(&self.jobs, &self.form, false);
        for s in &self.summaries {
            s(result.is_ok());
        }
        // The hooks, once the servers are wrapped (a failure there stops
        // here, so nothing half-done is left to explain).
        let files = result?;
        let mut hooks = None;
        if let (Some((paths, key)), Some(scope)) = (&self.hook_target, self.hook_scope) {
            hooks = hook_install::install(&hook_install::HookInstall {
                paths,
                scope,
                project_key: key,
                correlation: self.correlation,
                dry_run: false,
                with_mod: self.with_mod,
                joins: !files.is_empty(),
            })
            .map_err(|e| {
                if files.is_empty() {
                    e
                } else {
                    Error::failure(
                        "the MCP servers were wrapped, but the hooks were not registered",
                    )
                    .because(e)
                }
            })?;
        }
        let mut modded = None;
        if let (Some((paths, key)), true) = (&self.hook_target, self.with_mod) {
            // After the hooks: the mod only adds to what they record.
            modded = super::plugin::install(paths, key, false).map_err(|e| {
                Error::failure(
                    "the hooks were registered, but the Claude Code mod was not installed",
                )
                .because(e)
            })?;
        }
        Ok(Applied {
            files,
            hooks,
            modded,
        })
    }
}

/// The heading of a project's Claude Code entries (`bir install`, `bir
/// status`), or that it has none; the width of their name column.
pub(crate) fn say_project(r: &Resolved, plan: &[Planned]) -> usize {
    out(&format!(
        "Claude Code — project {} (key {}), {}",
        r.paths.project.display(),
        json_string(&r.local_key),
        r.paths.claude_json.display()
    ));
    if plan.is_empty() {
        out("  no MCP servers configured for this project");
    }
    plan.iter()
        .map(|p| p.found.name.len())
        .max()
        .unwrap_or(4)
        .max(4)
}

fn summary(r: &Resolved, plan: &[Planned], applied: bool, in_place_mcp_json: bool) {
    let width = say_project(r, plan);
    for p in plan {
        let f = &p.found;
        let (state, why) = match &p.decision {
            Decision::Copy if in_place_mcp_json && f.scope == Scope::Project => (
                if applied { "wrapped" } else { "wrap" },
                "project scope entry, wrapped in place in .mcp.json (BIR_WRAP_MCP_JSON / --mcp-json)".to_owned(),
            ),
            Decision::Copy => (
                if applied { "wrapped" } else { "wrap" },
                format!(
                    "{} scope entry → wrapped copy in the local scope",
                    f.scope.label()
                ),
            ),
            Decision::InPlace => (
                if applied { "wrapped" } else { "wrap" },
                "local scope entry, wrapped in place".to_owned(),
            ),
            Decision::Already => ("ok", format!("already wrapped ({} scope)", f.scope.label())),
            Decision::Skip(why) => ("skipped", why.clone()),
        };
        let why = match (&f.kind, &p.decision) {
            (EntryKind::Remote { .. }, Decision::Copy | Decision::InPlace) => {
                why + &super::remote_entry::summary_notes(&f.raw, CLIENT)
            }
            _ => why,
        };
        out(&format!("  {state:<8} {:<width$}  {why}", f.name));
    }
    for s in &r.shadowed {
        let winner_is_ours = r.winners.iter().any(|w| {
            w.name == s.name && w.scope == Scope::Local && matches!(w.kind, EntryKind::Wrapped(_))
        });
        if winner_is_ours {
            continue; // the original of bir's own copy
        }
        out(&format!(
            "  {:<8} {:<width$}  {} scope entry, hidden by a higher scope (not used by Claude Code)",
            "hidden",
            s.name,
            s.scope.label()
        ));
    }
}
