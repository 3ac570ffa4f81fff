//! `bir uninstall`: undoing what the ledger says bir changed.
//!
//! The phases: the other agents' hooks (`--client`/`--all`); what the
//! ledger says to undo, chosen once ([`Uninstall::select`]); each file
//! restored, newest change first (a file that cannot be restored is
//! reported and the others still go); then the ledger forgets what was
//! restored, and last the Claude Code hooks and the mod go, only when
//! every server entry came back. `--everywhere` takes back only the choice
//! to record every directory, which also goes with the last of bir's
//! hooks.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use super::atomic;
use super::claude::{self, Paths};
use super::diff;
use super::format;
use super::hook_install;
use super::ledger::{self, Change, ModChange};
use crate::error::{self, Error, ExitStatus};
use crate::output::out;

/// What `bir uninstall` asks for, as its flags say it.
pub(crate) struct UninstallRequest<'a> {
    /// `--all`: every project on this machine.
    pub all: bool,
    /// `--server`: only these servers.
    pub server: &'a [String],
    /// `--client`: only this client's changes, in every project.
    pub client: Option<&'a str>,
    /// `--config FILE`: only the changes in this file.
    pub config: Option<&'a Path>,
    /// The project directory (this project's changes, unless one of the
    /// above selects across projects).
    pub project: &'a Path,
    /// `--dry-run`: show the diffs, change nothing.
    pub dry_run: bool,
    /// `--everywhere`: take back recording every directory, only.
    pub everywhere: bool,
}

/// The project keys that mean "this project" for uninstall.
pub(crate) fn this_project_keys(paths: &Paths) -> Vec<String> {
    claude::key_candidates(&paths.key)
}

/// `bir uninstall`: a file it cannot restore is reported and the others
/// are still restored; the exit status then says it failed.
///
/// The phases: the other agents' hooks (`--client`/`--all`); what the
/// ledger says to undo, chosen once ([`Uninstall::select`]); each file
/// restored; then the ledger, and last the Claude Code hooks and the mod.
pub(crate) fn run(cmd: &UninstallRequest<'_>) -> Result<ExitStatus, Error> {
    if cmd.everywhere {
        return take_back_everywhere(cmd.dry_run);
    }
    let status = uninstall_changes(cmd)?;
    if !cmd.dry_run {
        forget_everywhere_when_nothing_is_left()?;
    }
    Ok(status)
}

/// `bir uninstall --everywhere`: sessions are recorded again only where
/// bir is installed; nothing else changes.
fn take_back_everywhere(dry_run: bool) -> Result<ExitStatus, Error> {
    let chosen = ledger::load()?.everywhere;
    let Some(choice) = chosen else {
        out("Nothing to undo: recording everywhere was not chosen (`bir install --everywhere`).");
        return Ok(ExitStatus::Success);
    };
    if dry_run {
        out(&format!(
            "Would take back recording everywhere (chosen {}).\n(dry run: nothing was written)",
            choice.at
        ));
        return Ok(ExitStatus::Success);
    }
    ledger::modify(&mut |l| l.everywhere = None)?;
    out(
        "Recording: agent sessions are now recorded only in the projects bir is installed in (`bir status` in a directory says which applies there).",
    );
    Ok(ExitStatus::Success)
}

/// The choice to record everywhere goes with the last of bir's hooks: an
/// uninstall that leaves no hooks registered leaves no choice behind to
/// surprise a later install.
fn forget_everywhere_when_nothing_is_left() -> Result<(), Error> {
    let Ok(l) = ledger::load() else {
        return Ok(());
    };
    if l.everywhere.is_some() && l.hooks.is_empty() && l.host_hooks.is_empty() && l.mods.is_empty()
    {
        ledger::modify(&mut |l| l.everywhere = None)?;
        out("Recording everywhere was taken back with the last of bir's hooks.");
    }
    Ok(())
}

fn uninstall_changes(cmd: &UninstallRequest<'_>) -> Result<ExitStatus, Error> {
    let host_client = cmd.client.and_then(super::hosthooks::host_of_client);
    let hosts_ok = if cmd.all || host_client.is_some() {
        super::hosthooks::uninstall(cmd.client, cmd.dry_run)
    } else {
        true
    };
    let mut undo = Uninstall::select(cmd)?;
    if undo.is_empty() {
        if host_client.is_some() {
            return Ok(ExitStatus::failure_if(!hosts_ok));
        }
        out(if cmd.all {
            "Nothing to undo: bir has no recorded changes on this machine."
        } else {
            "Nothing to undo for this project (bir uninstall --all covers every project)."
        });
        return Ok(ExitStatus::Success);
    }
    undo.restore_files()?;
    if cmd.dry_run {
        undo.show_hooks_and_mod();
        out("(dry run: nothing was written)");
        return Ok(ExitStatus::failure_if(undo.failed || !hosts_ok));
    }
    undo.forget_restored()?;
    undo.remove_hooks_and_mod();
    Ok(ExitStatus::failure_if(undo.failed || !hosts_ok))
}

/// One `bir uninstall`: the ledger's changes it undoes, and how far it got.
struct Uninstall {
    dry_run: bool,
    /// The project keys that mean "this project" (empty when the
    /// selection is not by project).
    keys: Vec<String>,
    /// The server entries to restore.
    changes: Vec<Change>,
    hooks: hook_install::Selection,
    mods: hook_install::Selection<ModChange>,
    /// The changes restored (or whose file is gone): the ledger forgets them.
    done: Vec<Change>,
    /// A file could not be restored, or hooks or the mod not removed.
    failed: bool,
}

impl Uninstall {
    /// What the flags select from the ledger: every project's changes
    /// (`--all`, `--client`, `--config`) or this project's, narrowed by
    /// client, file and server.
    fn select(cmd: &UninstallRequest<'_>) -> Result<Uninstall, Error> {
        let ledger = ledger::load()?;
        let by_file = cmd
            .config
            .map(|c| atomic::resolve(&std::path::absolute(c).unwrap_or_else(|_| c.to_path_buf())));
        let by_file = match by_file {
            Some(Ok(f)) => Some(f),
            Some(Err(e)) => return Err(e),
            None => None,
        };
        let everywhere = cmd.all || cmd.client.is_some() || by_file.is_some();
        let keys = if everywhere {
            Vec::new()
        } else {
            match Paths::from_env(cmd.project) {
                Ok(p) => this_project_keys(&p),
                Err(e) => return Err(e),
            }
        };
        let changes: Vec<Change> = ledger
            .changes
            .iter()
            .filter(|c| everywhere || c.project.as_ref().is_some_and(|p| keys.contains(p)))
            .filter(|c| cmd.client.is_none_or(|cl| c.client == cl))
            .filter(|c| by_file.as_ref().is_none_or(|f| &c.file == f))
            .filter(|c| cmd.server.is_empty() || cmd.server.contains(&c.server))
            .cloned()
            .collect();
        let hooks = hook_install::select(
            &ledger.hooks,
            everywhere,
            &keys,
            cmd.client,
            by_file.as_deref(),
            cmd.server,
        );
        let mods = hook_install::select(
            &ledger.mods,
            everywhere,
            &keys,
            cmd.client,
            by_file.as_deref(),
            cmd.server,
        );
        Ok(Uninstall {
            dry_run: cmd.dry_run,
            keys,
            changes,
            hooks,
            mods,
            done: Vec::new(),
            failed: false,
        })
    }

    /// Nothing selected: no server entry, hook or mod to undo.
    fn is_empty(&self) -> bool {
        self.changes.is_empty()
            && self.hooks.reverse.is_empty()
            && self.hooks.release.is_empty()
            && self.mods.reverse.is_empty()
            && self.mods.release.is_empty()
    }

    /// Every file with selected changes, restored (or, `--dry-run`, its
    /// diff shown); one that fails is reported and the others still go.
    /// `Err`: a file could not be read for `--dry-run`'s diff.
    fn restore_files(&mut self) -> Result<(), Error> {
        let mut files: Vec<PathBuf> = self.changes.iter().map(|c| c.file.clone()).collect();
        files.sort();
        files.dedup();
        for file in files {
            self.restore_file(file)?;
        }
        Ok(())
    }

    /// One file's selected changes reversed, newest first.
    fn restore_file(&mut self, file: PathBuf) -> Result<(), Error> {
        let mine: Vec<&Change> = self.changes.iter().filter(|c| c.file == file).collect();
        let notes: RefCell<Vec<String>> = RefCell::new(Vec::new());
        let resolved_now: RefCell<Vec<Change>> = RefCell::new(Vec::new());
        let mut edit = |before: Option<&[u8]>| -> Result<Option<Vec<u8>>, Error> {
            notes.borrow_mut().clear();
            resolved_now.borrow_mut().clear();
            let Some(before) = before else {
                for c in &mine {
                    notes.borrow_mut().push(format!(
                        "{}: the file is gone; nothing to restore",
                        c.server
                    ));
                    resolved_now.borrow_mut().push((*c).clone());
                }
                return Ok(None);
            };
            let mut bytes = before.to_vec();
            // Newest first, the inverse of install: the objects an earlier
            // change created are pruned once the changes after it are gone.
            for c in mine.iter().rev() {
                let (next, note) = format::of_file(&file).reverse(&file, &bytes, c)?;
                if let Some(next) = next {
                    bytes = next;
                }
                notes.borrow_mut().push(note);
                resolved_now.borrow_mut().push((*c).clone());
            }
            Ok((bytes != before).then_some(bytes))
        };
        if self.dry_run {
            let before = atomic::read(&file)?;
            match edit(before.as_deref()) {
                Ok(after) => {
                    for n in notes.borrow().iter() {
                        out(&format!("  {n}"));
                    }
                    if let (Some(b), Some(a)) = (before, after) {
                        out(&diff::unified(&file.display().to_string(), &b, &a));
                    }
                }
                Err(e) => {
                    error::print("bir uninstall", &e);
                    self.failed = true;
                }
            }
            return Ok(());
        }
        match atomic::update(&file, &mut edit) {
            Ok(_) => {
                out(&format!("{}:", file.display()));
                for n in notes.borrow().iter() {
                    out(&format!("  {n}"));
                }
                self.done.extend(resolved_now.into_inner());
            }
            Err(e) => {
                error::print("bir uninstall", &e);
                self.failed = true;
            }
        }
        Ok(())
    }

    /// `--dry-run`: what would become of the hooks and the mod.
    fn show_hooks_and_mod(&mut self) {
        if !hook_install::uninstall(&self.hooks, &self.keys, true) {
            self.failed = true;
        }
        if !super::plugin::uninstall(&self.mods, &self.keys, true) {
            self.failed = true;
        }
    }

    /// The ledger forgets the changes restored.
    fn forget_restored(&self) -> Result<(), Error> {
        if !self.done.is_empty()
            && let Err(e) = ledger::modify(&mut |l| {
                l.changes.retain(|c| !self.done.contains(c));
            })
        {
            return Err(Error::failure(
                "the configs were restored, but the ledger could not be updated",
            )
            .because(e));
        }
        Ok(())
    }

    /// The hooks go last, and only when every server entry came back: a
    /// failure leaves them (and their ledger entries) for the next run.
    /// The mod goes with the hooks (it only adds to what they record).
    fn remove_hooks_and_mod(&mut self) {
        if self.failed {
            if !self.hooks.reverse.is_empty() {
                crate::error::print(
                    "bir uninstall",
                    &Error::failure(
                        "the Claude Code hooks were left registered; run `bir uninstall` again once the error above is fixed",
                    ),
                );
            }
        } else if !hook_install::uninstall(&self.hooks, &self.keys, false) {
            self.failed = true;
        }
        if !self.failed && !super::plugin::uninstall(&self.mods, &self.keys, false) {
            self.failed = true;
        }
    }
}
