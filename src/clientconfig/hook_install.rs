//! What `bir install`, `bir uninstall`, `bir status` and `bir doctor` do
//! with Claude Code hooks ([`super::hook_entries`] holds the file edits).
//!
//! Registration runs after the MCP servers are wrapped, and only when that
//! succeeded; uninstall takes the hooks away only after every server entry
//! was restored, so a failure part-way leaves the ledger describing the
//! files as they are.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};

use super::atomic;
use super::claude::{Paths, managed_settings_files};
use super::diff;
use super::hook_entries::{
    HookChange, HookForm, HookPlace, HookScope, HttpForm, LEFT_TO_THE_MOD, Planned, TIMEOUT_SECS,
    Transport, events_for, install_edit_with, registered, uninstall_edit,
};
use super::jsonedit::{Doc, Flavor, Node};
use super::ledger;
use crate::bound::Correlation;
use crate::codec::sha256_hex;
use crate::error::{Context, Error};
use crate::output::out;

const CLIENT: &str = "claude-code";

/// A file `bir install` changed: its path and how many events it gained.
pub(crate) type Changed = (PathBuf, usize);

fn settings_doc(file: &Path) -> Option<Doc> {
    let bytes = atomic::read(file).ok()??;
    Doc::parse(&bytes, Flavor::Jsonc).ok()
}

/// Why Claude Code would not run hooks from user or project settings, if
/// managed policy says so.
fn policy_blocks(paths: &Paths) -> Option<String> {
    for file in managed_settings_files(paths) {
        if let Some(doc) = settings_doc(&file) {
            for key in ["allowManagedHooksOnly", "disableAllHooks"] {
                if doc.root.get(key).is_some_and(Node::is_true) {
                    return Some(format!(
                        "managed policy {} sets {key}: Claude Code runs no user or project hooks, so bir registers none (MCP calls are still recorded)",
                        file.display()
                    ));
                }
            }
        }
    }
    None
}

/// One registration of the hooks (`bir install`): where, in which form,
/// and what the rest of the install did.
pub(crate) struct HookInstall<'a> {
    pub paths: &'a Paths,
    pub scope: HookScope,
    /// The project the hooks are registered for (the ledger's users).
    pub project_key: &'a str,
    pub correlation: Option<Correlation>,
    /// Print the diff, write nothing.
    pub dry_run: bool,
    /// bir's Claude Code mod is installed too, and the events it makes
    /// redundant ([`LEFT_TO_THE_MOD`]) are not added.
    pub with_mod: bool,
    /// This install changed something else (a wrapped server), so the
    /// project joins the ledger's users of hooks that are already
    /// registered. Without it, hooks already in place leave the ledger
    /// untouched: an install that reports nothing changed changes nothing,
    /// not even which projects `bir uninstall` elsewhere counts as still
    /// using the hooks.
    pub joins: bool,
}

/// Registers the hooks (`bir install`). Prints its own section. Returns the
/// changed file, if any.
///
/// The phases: managed policy may forbid hooks; the hook form; then
/// either the dry run's diff ([`show_plan`]), or the file written
/// ([`write_hooks`]), the ledger ([`record_hooks`]) and what changed said
/// ([`say_registered`]).
pub(crate) fn install(req: &HookInstall) -> Result<Option<Changed>, Error> {
    let HookInstall {
        paths,
        scope,
        correlation,
        ..
    } = *req;
    let skip: &[&str] = if req.with_mod { LEFT_TO_THE_MOD } else { &[] };
    let file = scope.settings_file(paths);
    out(&format!(
        "Claude Code hooks — {} ({} settings)",
        file.display(),
        scope.label()
    ));
    if let Some(why) = policy_blocks(paths) {
        out(&format!("  not registered: {why}"));
        return Ok(None);
    }
    let form = HookForm {
        correlation,
        http: http_form(paths, scope)?,
        ..HookForm::detect()
    };
    if req.dry_run {
        show_plan(&form, &file, skip)?;
        note_scope(req);
        return Ok(None);
    }
    let (outcome, plan) = write_hooks(&form, &file, skip)?;
    let unlisted = record_hooks(req, &outcome, &plan)?;
    say_registered(req, &form, &plan, unlisted);
    note_scope(req);
    Ok(outcome.changed.then(|| {
        (
            outcome.target,
            plan.events.len() + plan.repointed + plan.reflagged + plan.replaced,
        )
    }))
}

/// Project settings load only in some sessions: said after the section.
fn note_scope(req: &HookInstall) {
    if req.scope.place == HookPlace::Project {
        out(&format!(
            "  note: project settings load only when Claude Code starts in {} itself (not a subdirectory), and only once the folder is trusted (the trust dialog; `claude -p` counts as trusted)",
            req.paths.project.display()
        ));
    }
}

/// `--dry-run`: the events that would be registered and the diff.
fn show_plan(form: &HookForm, file: &Path, skip: &[&str]) -> Result<(), Error> {
    let before = atomic::read(file)?;
    let plan = install_edit_with(before.as_deref(), form, file, skip, guides_armed())?;
    if let Some(after) = &plan.bytes {
        out(&format!(
            "  register   {} events → {} (timeout {TIMEOUT_SECS} s)",
            plan.events.len() + plan.repointed,
            form.display()
        ));
        out(&diff::unified(
            &file.display().to_string(),
            before.as_deref().unwrap_or_default(),
            after,
        ));
    } else {
        out(&format!("  registered {} events already", plan.already));
    }
    Ok(())
}

/// The settings file edited (its directory created if need be): what the
/// atomic update did, and the plan it applied.
fn write_hooks(
    form: &HookForm,
    file: &Path,
    skip: &[&str],
) -> Result<(atomic::Outcome, Planned), Error> {
    if let Some(dir) = file.parent()
        && !dir.as_os_str().is_empty()
        && !dir.exists()
    {
        std::fs::create_dir_all(dir).context(|| format!("cannot create {}", dir.display()))?;
    }
    let planned = RefCell::new(None);
    let outcome = atomic::update(file, &mut |before| {
        let plan = install_edit_with(before, form, file, skip, guides_armed())?;
        let bytes = plan.bytes.clone();
        *planned.borrow_mut() = Some(plan);
        Ok(bytes)
    })?;
    Ok((outcome, planned.into_inner().unwrap_or_default()))
}

/// The ledger told what changed, so `bir uninstall` can undo it: this
/// project joins the file's entry, or a new entry is made. True when this
/// project was not listed for hooks already in place (it is now).
fn record_hooks(
    req: &HookInstall,
    outcome: &atomic::Outcome,
    plan: &Planned,
) -> Result<bool, Error> {
    let scope = req.scope;
    let target = outcome.target.clone();
    let file_hash = sha256_hex(&outcome.after);
    let key = req.project_key.to_owned();
    // A project not listed yet joins hooks already in place: sessions are
    // recorded only in the projects the ledger lists (`crate::scope`), so
    // `bir install` here is what makes this project's sessions recorded.
    let unlisted = ledger::load().is_ok_and(|l| {
        l.hooks
            .iter()
            .any(|h| h.file == target && !h.projects.contains(&key))
    });
    let changes_anything = outcome.changed
        || req.joins
        || unlisted
        || !plan.events.is_empty()
        || plan.repointed > 0
        || plan.reflagged > 0
        || plan.replaced > 0;
    if !changes_anything {
        return Ok(false);
    }
    fn hooks(l: &mut ledger::Ledger) -> &mut Vec<HookChange> {
        &mut l.hooks
    }
    record_in_ledger(
        hooks,
        &target,
        &|h| {
            if !h.projects.contains(&key) {
                h.projects.push(key.clone());
            }
            h.events.extend(plan.events.iter().cloned());
            h.transport = scope.transport;
            if outcome.changed {
                h.file_sha256 = file_hash.clone();
            }
        },
        &|| {
            (!plan.events.is_empty()
                || plan.repointed > 0
                || plan.reflagged > 0
                || plan.replaced > 0)
                .then(|| HookChange {
                    client: CLIENT.into(),
                    transport: scope.transport,
                    file: target.clone(),
                    scope: scope.label().into(),
                    projects: vec![key.clone()],
                    created_file: plan.created_file,
                    keep_parents: plan.keep_parents,
                    events: plan.events.clone(),
                    file_sha256: file_hash.clone(),
                    at: crate::time::rfc3339(std::time::SystemTime::now()),
                })
        },
        "`bir uninstall` cannot undo it — remove bir's hook groups by hand",
    )?;
    Ok(unlisted)
}

/// What the registration changed, in words.
fn say_registered(req: &HookInstall, form: &HookForm, plan: &Planned, unlisted: bool) {
    if !plan.events.is_empty() {
        out(&format!(
            "  registered {} events → {} (timeout {TIMEOUT_SECS} s); your own hooks are untouched",
            plan.events.len(),
            form.display()
        ));
    }
    if plan.repointed > 0 {
        out(&format!(
            "  repointed  {} hook(s) that ran another bir program → {}",
            plan.repointed,
            form.display()
        ));
    }
    if plan.reflagged > 0 {
        out(&format!(
            "  PreToolUse now runs {} (call-id injection: {})",
            form.command("PreToolUse"),
            match form.correlation {
                Some(Correlation::Inject) => "on; the server receives __bir_call_id__",
                _ => "off",
            }
        ));
    }
    if plan.replaced > 0 {
        out(&format!(
            "  replaced   {} hook group(s) of another form (transport, address, or an event bir no longer registers)",
            plan.replaced
        ));
    }
    if plan.events.is_empty() && plan.repointed == 0 && plan.reflagged == 0 && plan.replaced == 0 {
        out(&format!("  already registered ({} events)", plan.already));
    }
    if unlisted {
        out(&format!(
            "  sessions in {} are now recorded (the hooks were registered already)",
            req.paths.project.display()
        ));
    }
    if req.with_mod {
        out(&format!(
            "  left to the mod: {} (the model's words come over the mod link)",
            LEFT_TO_THE_MOD.join(", ")
        ));
    }
}

/// The HTTP side of the hooks for `scope` (`None`: command hooks): the
/// daemon's hook address (chosen now if it is the first time), and where
/// this user's Claude Code settings live, for the guide.
fn http_form(paths: &Paths, scope: HookScope) -> Result<Option<HttpForm>, Error> {
    if scope.transport != Transport::Http {
        return Ok(None);
    }
    let home = crate::home::bir_home().ok_or("no home directory (set BIR_HOME or HOME)")?;
    let addr = crate::daemon::hookaddr::endpoint(&home)
        .context(|| format!("cannot choose the daemon's hook port in {}", home.display()))?;
    let encode =
        |p: &Path| crate::codec::percent_encode(p.as_os_str().as_encoded_bytes(), true, false);
    let pre_tool_query = format!(
        "claude_config={}&claude_managed={}",
        encode(&paths.settings_dir),
        encode(&paths.managed_dir)
    );
    Ok(Some(HttpForm {
        addr,
        pre_tool_query,
    }))
}

/// Whether a guide is armed (`bir guide start` until `bir guide stop`):
/// bir's hooks then also register the events a guide needs
/// (`hook_entries::FOR_GUIDES`).
pub(crate) fn guides_armed() -> bool {
    crate::home::bir_home().is_some_and(|home| !crate::daemon::armed_guides::list(&home).is_empty())
}

/// `bir guide start|stop`: every settings file holding bir's hooks gets
/// (or loses) the events a guide needs, in the place and transport its
/// hooks already have, as [`install`] writes them (the ledger keeps
/// `bir uninstall` exact). Files already in form are left alone; the
/// files changed are returned.
pub(crate) fn follow_guides(project: &Path) -> Result<Vec<PathBuf>, Error> {
    let paths = Paths::from_env(project)?;
    if policy_blocks(&paths).is_some() {
        return Ok(Vec::new());
    }
    let key = super::claude::resolve(&paths)?.local_key;
    let mut changed = Vec::new();
    for f in found(&paths) {
        let place = match f.label {
            "user" => HookPlace::User,
            "project" => HookPlace::Project,
            _ => continue,
        };
        let scope = HookScope {
            place,
            transport: f.transport(),
        };
        if would_change(&paths, scope)?
            && let Some((file, _)) = install(&HookInstall {
                paths: &paths,
                scope,
                project_key: &key,
                correlation: None,
                dry_run: false,
                with_mod: false,
                joins: false,
            })?
        {
            changed.push(file);
        }
    }
    Ok(changed)
}

/// Whether [`install`] would change the settings file (quietly: `bir
/// setup` asks this to know whether anything is left to do). A policy that
/// blocks user and project hooks means no change.
pub(crate) fn would_change(paths: &Paths, scope: HookScope) -> Result<bool, Error> {
    if policy_blocks(paths).is_some() {
        return Ok(false);
    }
    let file = scope.settings_file(paths);
    let before = atomic::read(&file)?;
    // `bir setup` installs no mod: every event is bir's hooks' own.
    let form = HookForm {
        http: http_form(paths, scope)?,
        ..HookForm::detect()
    };
    let plan = install_edit_with(before.as_deref(), &form, &file, &[], guides_armed())?;
    Ok(plan.bytes.is_some())
}

/// A change several projects may share (bir's hooks in user settings, the
/// Claude Code mod): kept while any project that asked for it remains.
pub(crate) trait Shared: Clone {
    fn file(&self) -> &Path;
    fn projects(&self) -> &[String];
    fn projects_mut(&mut self) -> &mut Vec<String>;
}

impl Shared for HookChange {
    fn file(&self) -> &Path {
        &self.file
    }
    fn projects(&self) -> &[String] {
        &self.projects
    }
    fn projects_mut(&mut self) -> &mut Vec<String> {
        &mut self.projects
    }
}

/// Which shared changes an uninstall touches, and how.
pub(crate) struct Selection<T = HookChange> {
    /// Reversed in the file.
    pub reverse: Vec<T>,
    /// Kept (another project still wants them); only the ledger forgets
    /// this project.
    pub release: Vec<T>,
}

/// Selects the shared changes for `bir uninstall`: every one with `--all`,
/// else those this project asked for (reversed only when no other project
/// still wants them). `--server`, another `--client`, or a `--config` file
/// other than a settings file select none.
pub(crate) fn select<T: Shared>(
    all: &[T],
    everywhere: bool,
    keys: &[String],
    client: Option<&str>,
    by_file: Option<&Path>,
    servers: &[String],
) -> Selection<T> {
    let mut sel = Selection {
        reverse: Vec::new(),
        release: Vec::new(),
    };
    if !servers.is_empty() || client.is_some_and(|c| c != CLIENT) {
        return sel;
    }
    for h in all {
        if by_file.is_some_and(|f| f != h.file()) {
            continue;
        }
        if everywhere {
            sel.reverse.push(h.clone());
            continue;
        }
        if !h.projects().iter().any(|p| keys.contains(p)) {
            continue;
        }
        if h.projects().iter().all(|p| keys.contains(p)) {
            sel.reverse.push(h.clone());
        } else {
            sel.release.push(h.clone());
        }
    }
    sel
}

/// The ledger's list after an uninstall: the changes `done` (by file) are
/// gone, those `released` no longer name this project's `keys`.
fn forget<T: Shared>(list: &mut Vec<T>, done: &[PathBuf], released: &[PathBuf], keys: &[String]) {
    list.retain(|h| !done.iter().any(|f| f == h.file()));
    for h in list
        .iter_mut()
        .filter(|h| released.iter().any(|f| f == h.file()))
    {
        h.projects_mut().retain(|p| !keys.contains(p));
    }
}

/// After an uninstall, [`forget`] in the ledger's list that `list` picks.
/// False (said on stderr) when the ledger could not be written; `undone`
/// says what was, for that message.
pub(crate) fn forget_in_ledger<T: Shared>(
    list: fn(&mut ledger::Ledger) -> &mut Vec<T>,
    done: &[PathBuf],
    released: &[PathBuf],
    keys: &[String],
    undone: &str,
) -> bool {
    if done.is_empty() && released.is_empty() {
        return true;
    }
    match ledger::modify(&mut |l| forget(list(l), done, released, keys)) {
        Ok(()) => true,
        Err(e) => {
            let why = format!("{undone}, but the ledger could not be updated");
            crate::error::print("bir uninstall", &Error::failure(why).because(e));
            false
        }
    }
}

/// The one ledger write of an install (Claude Code's hooks, the mod,
/// other agents' hooks): in the list `list` picks, the entry for `file`
/// is updated (`update`), or, when there is none, `new` makes one
/// (`None`: nothing to add). When the ledger cannot be written the error
/// says that `file` was changed, and what to remove by hand (`by_hand`),
/// since `bir uninstall` cannot undo it.
pub(crate) fn record_in_ledger<T: Shared>(
    list: fn(&mut ledger::Ledger) -> &mut Vec<T>,
    file: &Path,
    update: &dyn Fn(&mut T),
    new: &dyn Fn() -> Option<T>,
    by_hand: &str,
) -> Result<(), Error> {
    ledger::modify(&mut |l| {
        let entries = list(l);
        match entries.iter_mut().find(|e| e.file() == file) {
            Some(e) => update(e),
            None => entries.extend(new()),
        }
    })
    .map_err(|e| {
        Error::failure(format!(
            "{} was changed, but the ledger could not be written; {by_hand}",
            file.display()
        ))
        .because(e)
    })
}

/// `bir uninstall --dry-run` for one file of hooks (`label`: whose): the
/// diff undoing them would make, or that none of bir's are left in it.
/// False when the file could not be read or edited (said on stderr).
pub(crate) fn preview_undo(
    file: &Path,
    label: &str,
    events: usize,
    edit: &mut atomic::Edit<'_>,
) -> bool {
    match atomic::read(file).and_then(|b| Ok((edit(b.as_deref())?, b))) {
        Ok((Some(after), Some(before))) => {
            out(&format!("  {label}: {events} events"));
            out(&diff::unified(&file.display().to_string(), &before, &after));
        }
        Ok(_) => out(&format!("  {label}: none left in {}", file.display())),
        Err(e) => {
            crate::error::print("bir uninstall", &e);
            return false;
        }
    }
    true
}

/// What [`undo_hook_file`] says of one file, after `  <label>: `.
pub(crate) struct UndoWords<'a> {
    /// Whose entries: `Claude Code hooks`, `Codex hooks`, `Claude Code mod`.
    pub(crate) label: &'a str,
    /// When bir's entries were taken out of the file.
    pub(crate) removed: String,
    /// When the file was left as it was (nothing of bir's in it).
    pub(crate) none_left: String,
}

/// `bir uninstall` for one file bir added entries to (hooks, the mod):
/// applies `edit` atomically, and removes the file when `pristine` says
/// (set by `edit`) that it held nothing but bir's (bir had created it),
/// saying on stdout which of the three happened. True when the file was
/// undone (the caller forgets it in the ledger); false when it could not
/// be read or written (said on stderr), the file then as it was.
pub(crate) fn undo_hook_file(
    file: &Path,
    edit: &mut atomic::Edit<'_>,
    pristine: &Cell<bool>,
    words: &UndoWords<'_>,
) -> bool {
    match atomic::update(file, edit) {
        Ok(outcome) => {
            let label = words.label;
            out(&format!("{}:", file.display()));
            if pristine.get() {
                // The file held nothing but bir's: it goes, as it was not
                // there before `bir install`.
                let _ = std::fs::remove_file(&outcome.target);
                out(&format!("  {label}: removed (bir had created this file)"));
            } else if outcome.changed {
                out(&format!("  {label}: {}", words.removed));
            } else {
                out(&format!("  {label}: {}", words.none_left));
            }
            true
        }
        Err(e) => {
            crate::error::print("bir uninstall", &e);
            false
        }
    }
}

/// Undoes the selected hook changes (`bir uninstall`). Returns false when
/// something failed (said on stderr).
pub(crate) fn uninstall(sel: &Selection, keys: &[String], dry_run: bool) -> bool {
    let mut ok = true;
    let mut done: Vec<PathBuf> = Vec::new();
    for h in &sel.release {
        out(&format!("{}:", h.file.display()));
        out(&format!(
            "  Claude Code hooks: kept (other projects installed them too: {}); `bir uninstall --all` removes them",
            h.projects
                .iter()
                .filter(|p| !keys.contains(p))
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for h in &sel.reverse {
        let remove_file = Cell::new(false);
        let mut edit = |before: Option<&[u8]>| -> Result<Option<Vec<u8>>, Error> {
            let Some(before) = before else {
                return Ok(None);
            };
            let (after, pristine) = uninstall_edit(before, h).map_err(|e| {
                Error::failure(format!("{}:{e}; nothing was changed", h.file.display()))
            })?;
            remove_file.set(pristine);
            Ok(after)
        };
        if dry_run {
            ok &= preview_undo(&h.file, "Claude Code hooks", h.events.len(), &mut edit);
            continue;
        }
        let words = UndoWords {
            label: "Claude Code hooks",
            removed: format!(
                "removed bir's groups ({} events); everything else is as it was",
                h.events.len()
            ),
            none_left: "none left to remove".to_owned(),
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
    let released: Vec<PathBuf> = sel.release.iter().map(|h| h.file.clone()).collect();
    fn hooks(l: &mut ledger::Ledger) -> &mut Vec<HookChange> {
        &mut l.hooks
    }
    ok &= forget_in_ledger(hooks, &done, &released, keys, "the hooks were removed");
    ok
}

/// The settings files Claude Code reads hooks from for this project (user,
/// project, local), with a label.
fn hook_files(paths: &Paths) -> Vec<(PathBuf, &'static str)> {
    vec![
        (paths.settings_dir.join("settings.json"), "user"),
        (paths.project.join(".claude/settings.json"), "project"),
        (paths.project.join(".claude/settings.local.json"), "local"),
    ]
}

/// bir's hooks in one settings file: the events and the programs they run.
struct InFile {
    file: PathBuf,
    label: &'static str,
    events: Vec<String>,
    /// Command hooks' programs.
    programs: Vec<String>,
    /// HTTP hooks' targets (`http://127.0.0.1:<port>`).
    targets: Vec<String>,
    /// Events delivered over HTTP.
    http_events: usize,
}

fn found(paths: &Paths) -> Vec<InFile> {
    let mut outv = Vec::new();
    for (file, label) in hook_files(paths) {
        let Some(doc) = settings_doc(&file) else {
            continue;
        };
        let regs = registered(&doc);
        if regs.is_empty() {
            continue;
        }
        let mut events: Vec<String> = regs.iter().map(|r| r.event.clone()).collect();
        events.sort();
        events.dedup();
        let of = |t: Transport| {
            let mut v: Vec<String> = regs
                .iter()
                .filter(|r| r.hook.transport == t)
                .map(|r| r.hook.program.clone())
                .collect();
            v.sort();
            v.dedup();
            v
        };
        outv.push(InFile {
            file,
            label,
            events,
            programs: of(Transport::Command),
            targets: of(Transport::Http),
            http_events: regs
                .iter()
                .filter(|r| r.hook.transport == Transport::Http)
                .count(),
        });
    }
    outv
}

impl InFile {
    /// `http` when any event goes over HTTP, else `command`.
    fn transport(&self) -> Transport {
        if self.http_events > 0 {
            Transport::Http
        } else {
            Transport::Command
        }
    }

    fn delivery(&self) -> String {
        match self.transport() {
            Transport::Http => format!(
                "{} over HTTP → {}, the rest as commands → {}",
                self.http_events,
                self.targets.join(", "),
                self.programs.join(", ")
            ),
            Transport::Command => format!("as commands → {}", self.programs.join(", ")),
        }
    }
}

/// `bir status`: one line per settings file with bir hooks.
pub(crate) fn status(paths: &Paths) {
    let files = found(paths);
    if files.is_empty() {
        out(
            "Hooks: not registered: only MCP calls are recorded (`bir install` registers the Claude Code hooks that record whole sessions)",
        );
        return;
    }
    for f in files {
        out(&format!(
            "Hooks: installed in {} ({} settings): {} of {} events, {}",
            f.file.display(),
            f.label,
            f.events.len(),
            events_for(guides_armed()).count(),
            f.delivery()
        ));
    }
}

/// `bir doctor`: lines to print and the number of problems. Hooks that run
/// a program that is gone, or another bir than this one, are problems; so
/// are HTTP hooks to a port the daemon does not listen on.
pub(crate) fn doctor(paths: &Paths, left_to_the_mod: bool) -> (Vec<String>, usize) {
    let all = events_for(guides_armed()).count();
    // With the mod installed, the events it makes redundant are not missing.
    let skipped = if left_to_the_mod {
        events_for(guides_armed())
            .filter(|e| LEFT_TO_THE_MOD.contains(e))
            .count()
    } else {
        0
    };
    let expected = all - skipped;
    let mut lines = Vec::new();
    let mut problems = 0;
    let files = found(paths);
    if files.is_empty() {
        lines.push("Hooks: not registered (only MCP calls are recorded; run `bir install` to record whole Claude Code sessions)".to_owned());
        return (lines, 0);
    }
    let this = HookForm::detect();
    let this_real = std::fs::canonicalize(&this.program).ok();
    let home = crate::home::bir_home();
    for f in &files {
        let where_ = format!("{} ({} settings)", f.file.display(), f.label);
        for program in &f.programs {
            let real = std::fs::canonicalize(program).ok();
            let line = match real {
                None => {
                    problems += 1;
                    format!(
                        "Hooks: PROBLEM: {where_} runs {program}, which does not exist: every hook call fails. Run `bir install` again to point them at {}",
                        this.program.display()
                    )
                }
                Some(r) if Some(&r) != this_real.as_ref() => {
                    problems += 1;
                    format!(
                        "Hooks: PROBLEM: {where_} runs {program}, not this bir ({}). Run `bir install` again to point them here",
                        this.program.display()
                    )
                }
                Some(_) if f.events.len() < expected => format!(
                    "Hooks: ok: {where_}: {} of {all} events → {program} (this bir); `bir install` adds the missing ones",
                    f.events.len(),
                ),
                Some(_) if f.events.len() < all => format!(
                    "Hooks: ok: {where_}: {} of {all} events → {program} (this bir; {} left to the mod)",
                    f.events.len(),
                    LEFT_TO_THE_MOD.join(", ")
                ),
                Some(_) => format!("Hooks: ok: {where_}: all {all} events → {program} (this bir)"),
            };
            lines.push(line);
        }
        for target in &f.targets {
            let chosen = home.as_deref().and_then(crate::daemon::hookaddr::read);
            let ours = chosen
                .as_ref()
                .is_some_and(|a| *target == format!("http://127.0.0.1:{}", a.port));
            if !ours {
                problems += 1;
                lines.push(format!(
                    "Hooks: PROBLEM: {where_} posts to {target}, which is not this bir's hook address ({}); run `bir install` again",
                    chosen.map_or("none chosen".to_owned(), |a| format!("http://127.0.0.1:{}", a.port))
                ));
            }
        }
    }
    if let Some(home) = &home {
        lines.extend(live_path(home, &files, &this));
    }
    (lines, problems)
}

/// Which path delivers the hooks now, and what one hook costs on it,
/// measured here: over HTTP the daemon's answer on the hook port (what
/// Claude Code waits for), for commands the hook process's start as well.
/// A daemon that is not running is no problem (the next session starts it;
/// its transcript covers what HTTP hooks miss meanwhile).
fn live_path(home: &Path, files: &[InFile], this: &HookForm) -> Vec<String> {
    let http = files.iter().any(|f| f.transport() == Transport::Http);
    let endpoint = crate::daemon::client::discover(home);
    let answer = endpoint.as_ref().and_then(|e| time_health(e, 15));
    let mut lines = Vec::new();
    if http {
        let chosen = crate::daemon::hookaddr::read(home);
        let on_port = match (&endpoint, &chosen) {
            (Some(e), Some(a)) => e.addr.port() == a.port,
            _ => false,
        };
        lines.push(match (&endpoint, on_port, answer) {
            (Some(_), true, Some(ms)) => format!(
                "Hooks: live path: http (the daemon answers on the hook port); measured cost per hook: {ms:.2} ms for the daemon's answer (median of 15), plus Claude Code's own dispatch"
            ),
            (Some(e), false, _) => format!(
                "Hooks: live path: none for HTTP hooks: the daemon listens on {} (the hook port {} was taken when it started); `bir down` and the next session start it there. Sessions meanwhile are recovered from their transcripts",
                e.url,
                chosen.map_or(0, |a| a.port)
            ),
            _ => "Hooks: live path: http, daemon not running (SessionStart starts it; what HTTP hooks miss is recovered from the transcript)".to_owned(),
        });
    } else {
        let start = time_process(this, 5);
        lines.push(format!(
            "Hooks: live path: command; measured cost per hook: {} process start + {} daemon answer (medians)",
            start.map_or("?".to_owned(), |ms| format!("{ms:.2} ms")),
            answer.map_or("? (daemon not running)".to_owned(), |ms| format!("{ms:.2} ms"))
        ));
    }
    lines
}

/// The median time of `n` `GET /health` answers, in milliseconds.
fn time_health(endpoint: &crate::daemon::client::Endpoint, n: usize) -> Option<f64> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = std::time::Instant::now();
        let (status, _) = endpoint
            .get("/health", std::time::Duration::from_millis(500))
            .ok()?;
        if status != 200 {
            return None;
        }
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    median(times)
}

/// The median time of `n` starts of the hook program (`--version`, as
/// Claude Code starts it: through `sh -c`), in milliseconds.
fn time_process(form: &HookForm, n: usize) -> Option<f64> {
    let cmd = form.command("--version");
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = std::time::Instant::now();
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(&cmd)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        if !status.success() {
            return None;
        }
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    median(times)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(file: &str, projects: &[&str]) -> HookChange {
        HookChange {
            client: CLIENT.into(),
            file: PathBuf::from(file),
            transport: Transport::Command,
            scope: "user".into(),
            projects: projects.iter().map(|p| p.to_string()).collect(),
            created_file: false,
            keep_parents: 0,
            events: Vec::new(),
            file_sha256: String::new(),
            at: String::new(),
        }
    }

    fn files(v: &[HookChange]) -> Vec<String> {
        v.iter().map(|h| h.file.display().to_string()).collect()
    }

    #[test]
    fn uninstall_selects_hooks_by_project_client_and_file() {
        let all = [
            change("/u/settings.json", &["/a", "/b"]),
            change("/a/.claude/settings.json", &["/a"]),
            change("/c/.claude/settings.json", &["/c"]),
        ];
        let here = vec!["/a".to_owned()];
        // This project: its own file goes; the shared one is only released.
        let s = select(&all, false, &here, None, None, &[]);
        assert_eq!(files(&s.reverse), ["/a/.claude/settings.json"]);
        assert_eq!(files(&s.release), ["/u/settings.json"]);
        // Another project sharing it releases it too; the last one takes
        // it away.
        let s = select(&all, false, &["/b".to_owned()], None, None, &[]);
        assert_eq!(files(&s.release), ["/u/settings.json"]);
        assert!(s.reverse.is_empty(), "/b shares it with /a");
        let solo = [change("/u/settings.json", &["/b"])];
        let s = select(&solo, false, &["/b".to_owned()], None, None, &[]);
        assert_eq!(files(&s.reverse), ["/u/settings.json"]);
        // --all: everything; --config FILE: that file only.
        assert_eq!(select(&all, true, &[], None, None, &[]).reverse.len(), 3);
        let only = Path::new("/c/.claude/settings.json");
        let s = select(&all, true, &[], None, Some(only), &[]);
        assert_eq!(files(&s.reverse), ["/c/.claude/settings.json"]);
        // --server or another client: hooks are no server and no other
        // client's.
        let s = select(&all, true, &[], None, None, &["x".to_owned()]);
        assert!(s.reverse.is_empty() && s.release.is_empty());
        let s = select(&all, true, &[], Some("cursor"), None, &[]);
        assert!(s.reverse.is_empty() && s.release.is_empty());
        let s = select(&all, true, &[], Some("claude-code"), None, &[]);
        assert_eq!(s.reverse.len(), 3);
    }
}
