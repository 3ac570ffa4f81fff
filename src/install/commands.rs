//! `bir install`, `bir uninstall`, `bir status` (Claude Code).
//!
//! `bir install` wraps every approved server this project's Claude Code
//! sees (stdio servers, and remote ones as [`super::remote_entry`] describes), writing the wrapped copy into the project's **local scope**
//! (`~/.claude.json` → `projects[<key>].mcpServers`), which beats the
//! project (`.mcp.json`) and user scopes: the team's `.mcp.json` and the
//! user scope are never edited. A server already in the local scope is
//! wrapped in place. Every change goes into the ledger; `bir uninstall`
//! reverses exactly those changes.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::atomic;
use super::claude::{self, Paths, Resolved};
use super::diff;
use super::entry::{EntryKind, ProxyForm, classify, set_command, wrapped_entry_text};
use super::jsonedit::{Doc, Flavor, json_string};
use super::ledger::{self, ACTION_IN_PLACE, ACTION_INSERTED, Change};
use super::vocab::{Decision, Found, Scope};
use crate::cli::{Exit, InstallCmd, StatusCmd, UninstallCmd};
use crate::codec::sha256_hex;
use crate::output::out;

const CLIENT: &str = "claude-code";

fn project_dir(p: &Option<PathBuf>) -> PathBuf {
    p.clone()
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")))
}

fn now() -> String {
    crate::time::rfc3339(SystemTime::now())
}

fn fail(cmd: &str, e: &str) -> Exit {
    eprintln!("bir {cmd}: {e}");
    Exit::Code(1)
}

/// Arguments that look like credentials (`--token x`, `KEY=secret`, token
/// shapes) are not copied into the ledger.
fn args_look_secret(args: &[String]) -> bool {
    // Conservative on purpose: withholding costs nothing (uninstall reads the
    // arguments back from the wrapped entry).
    let secret_name = |k: &str| {
        let k = k.to_ascii_lowercase();
        [
            "token",
            "secret",
            "password",
            "passwd",
            "key",
            "auth",
            "credential",
            "cookie",
            "bearer",
        ]
        .iter()
        .any(|w| k.contains(w))
    };
    let redactor = crate::redact::Redactor::new(crate::redact::RedactConfig::default());
    args.iter().enumerate().any(|(i, a)| {
        let flag_before = i > 0 && args[i - 1].starts_with('-') && secret_name(&args[i - 1]);
        let kv = a.split_once('=').is_some_and(|(k, _)| secret_name(k));
        flag_before || kv || matches!(redactor.redact_text(a), std::borrow::Cow::Owned(_))
    })
}

struct Planned {
    found: Found,
    decision: Decision,
}

/// One entry to wrap: a copy at `copy_to` in the job's file, or in place
/// (at `found.path` in the job's file).
struct Op {
    found: Found,
    copy_to: Option<Vec<String>>,
}

/// Everything to do in one file.
struct FileJob {
    file: PathBuf,
    flavor: Flavor,
    /// A Codex TOML file.
    toml: bool,
    client: String,
    project: Option<String>,
    ops: Vec<Op>,
}

/// Applies a job's operations to `before`: the new bytes (None: nothing to
/// change) and the ledger entries (hashes filled in later).
fn apply_ops(
    job: &FileJob,
    form: &ProxyForm,
    before: Option<&[u8]>,
) -> Result<(Option<Vec<u8>>, Vec<Change>), String> {
    let mut changes = Vec::new();
    if job.toml {
        return apply_toml_ops(job, form, before);
    }
    let mut bytes = before.map_or_else(|| b"{\n}\n".to_vec(), <[u8]>::to_vec);
    for op in &job.ops {
        let doc = Doc::parse(&bytes, job.flavor)
            .map_err(|e| format!("{}:{e}; nothing was changed", job.file.display()))?;
        let f = &op.found;
        let mut change = Change {
            client: job.client.clone(),
            file: job.file.clone(),
            path: f.path.clone(),
            action: ACTION_IN_PLACE.into(),
            server: f.name.clone(),
            project: job.project.clone(),
            source_scope: f.scope.label().into(),
            keep_parents: 0,
            original_command: None,
            original_args: None,
            args_absent: false,
            args_withheld: false,
            original: None,
            original_text: None,
            entry_sha256: String::new(),
            file_sha256: String::new(),
            at: now(),
        };
        let secret = match &f.kind {
            EntryKind::Stdio { args, .. } => args_look_secret(args),
            _ => true,
        };
        change.original = ledger::sanitized(&f.raw, secret);
        match &op.copy_to {
            Some(to) => {
                let path: Vec<&str> = to.iter().map(String::as_str).collect();
                if doc.root.at(&path).is_some() {
                    continue; // someone added one meanwhile; theirs wins
                }
                change.keep_parents = doc.existing_parents(&path);
                let text = match &f.kind {
                    EntryKind::Remote { .. } => {
                        super::remote_entry::wrapped_text(&f.raw, form, &f.name, &job.client)?
                    }
                    _ => wrapped_entry_text(&f.raw, form, &f.name)?,
                };
                bytes = doc.set(&path, &text)?;
                change.path = to.clone();
                change.action = ACTION_INSERTED.into();
            }
            None => {
                let path: Vec<&str> = f.path.iter().map(String::as_str).collect();
                let Some(node) = doc.root.at(&path) else {
                    continue;
                };
                let kind = classify(node);
                if let EntryKind::Remote { .. } = kind {
                    let raw = doc.raw(node);
                    if !matches!(f.kind, EntryKind::Remote { .. }) || raw != f.raw {
                        continue; // changed meanwhile
                    }
                    change.original_text = Some(super::remote_entry::template(raw)?);
                    let text = super::remote_entry::wrapped_text(raw, form, &f.name, &job.client)?;
                    bytes = doc.set(&path, &text)?;
                    changes.push(change);
                    continue;
                }
                let EntryKind::Stdio { command, args } = kind else {
                    continue; // changed meanwhile
                };
                change.original_command = node.get("command").map(|n| doc.raw(n).to_owned());
                let args_node = node.get("args");
                change.args_withheld = args_look_secret(&args);
                if !change.args_withheld {
                    change.original_args = args_node.map(|n| doc.raw(n).to_owned());
                }
                change.args_absent = args_node.is_none();
                let new_args = form.args(&f.name, &command, &args);
                bytes = set_command(&doc, &path, &form.command(), Some(&new_args))?;
            }
        }
        changes.push(change);
    }
    let changed = before != Some(&bytes[..]);
    Ok((changed.then_some(bytes), changes))
}

/// [`apply_ops`] for a Codex TOML file: every op is an in-place wrap.
fn apply_toml_ops(
    job: &FileJob,
    form: &ProxyForm,
    before: Option<&[u8]>,
) -> Result<(Option<Vec<u8>>, Vec<Change>), String> {
    let Some(before) = before else {
        return Ok((None, Vec::new()));
    };
    let mut text = String::from_utf8(before.to_vec())
        .map_err(|_| format!("{} is not UTF-8", job.file.display()))?;
    let mut changes = Vec::new();
    for op in &job.ops {
        let f = &op.found;
        let current = super::codex::servers(&text)
            .map_err(|e| format!("{}:{e}; nothing was changed", job.file.display()))?;
        let Some((_, _, EntryKind::Stdio { args, .. })) =
            current.iter().find(|(n, _, _)| *n == f.name)
        else {
            continue; // changed meanwhile
        };
        let secret = args_look_secret(args);
        let w = super::codex::wrap(&text, &f.name, form)?;
        text = w.text;
        changes.push(Change {
            client: job.client.clone(),
            file: job.file.clone(),
            path: f.path.clone(),
            action: ACTION_IN_PLACE.into(),
            server: f.name.clone(),
            project: job.project.clone(),
            source_scope: f.scope.label().into(),
            keep_parents: 0,
            original_command: Some(w.original_command),
            original_args: if secret { None } else { w.original_args },
            args_absent: w.args_absent,
            args_withheld: secret,
            original: ledger::sanitized(&f.raw, secret),
            original_text: None,
            entry_sha256: String::new(),
            file_sha256: String::new(),
            at: now(),
        });
    }
    let changed = text.as_bytes() != before;
    Ok((changed.then(|| text.into_bytes()), changes))
}

/// The hash of an entry as it is in `bytes`, to tell later whether it was
/// edited since.
fn entry_hash(bytes: &[u8], toml: bool, flavor: Flavor, path: &[String]) -> String {
    if toml {
        let text = String::from_utf8_lossy(bytes);
        let name = path.last().map(String::as_str).unwrap_or_default();
        return super::codex::entry_fingerprint(&text, name)
            .map(|f| sha256_hex(f.as_bytes()))
            .unwrap_or_default();
    }
    let Ok(doc) = Doc::parse(bytes, flavor) else {
        return String::new();
    };
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    doc.root
        .at(&path)
        .map(|n| sha256_hex(doc.raw(n).as_bytes()))
        .unwrap_or_default()
}

/// Runs the jobs (or, with `dry_run`, prints their diffs). Returns, per
/// changed file, its path and the number of entries changed.
fn run_jobs(
    jobs: &[FileJob],
    form: &ProxyForm,
    dry_run: bool,
) -> Result<Vec<(PathBuf, usize)>, String> {
    let mut changed_files = Vec::new();
    for job in jobs.iter().filter(|j| !j.ops.is_empty()) {
        if dry_run {
            let before = atomic::read(&job.file)?;
            if let (Some(after), _) = apply_ops(job, form, before.as_deref())? {
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
            let (after, c) = apply_ops(job, form, before)?;
            *changes.borrow_mut() = c;
            Ok(after)
        })?;
        let mut changes = changes.into_inner();
        if !outcome.changed || changes.is_empty() {
            continue;
        }
        let file_hash = sha256_hex(&outcome.after);
        for c in &mut changes {
            c.entry_sha256 = entry_hash(&outcome.after, job.toml, job.flavor, &c.path);
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

pub fn install(cmd: InstallCmd) -> Exit {
    let project = project_dir(&cmd.project);
    let targets = match super::clients::targets(
        cmd.client.as_deref(),
        cmd.config.as_deref(),
        &cmd.map_key,
        cmd.jsonc,
        &project,
    ) {
        Ok(t) => t,
        Err(e) => return fail("install", &e),
    };
    let form = ProxyForm::detect();
    let mut jobs: Vec<FileJob> = Vec::new();
    let mut known_names: Vec<String> = Vec::new();
    let mut summaries: Vec<Box<dyn Fn(bool)>> = Vec::new();
    for target in targets {
        match target {
            super::clients::Target::ClaudeCode => {
                let paths = match Paths::from_env(&project) {
                    Ok(p) => p,
                    Err(e) => return fail("install", &e),
                };
                let resolved = match claude::resolve(&paths) {
                    Ok(r) => r,
                    Err(e) => return fail("install", &e),
                };
                known_names.extend(resolved.winners.iter().map(|f| f.name.clone()));
                let plan: Vec<Planned> = claude::decide(&resolved, &cmd.server)
                    .into_iter()
                    .map(|(found, decision)| Planned { found, decision })
                    .collect();
                let in_place_mcp_json = wrap_mcp_json_in_place(cmd.mcp_json);
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
                let found = match super::clients::entries(&cf, &cmd.server) {
                    Ok(f) => f,
                    Err(e) => return fail("install", &e),
                };
                known_names.extend(found.iter().map(|(f, _)| f.name.clone()));
                let plan: Vec<(Found, Decision)> = found
                    .into_iter()
                    .filter(|(f, _)| cmd.server.is_empty() || cmd.server.contains(&f.name))
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
    for s in &cmd.server {
        if !known_names.contains(s) {
            return fail(
                "install",
                &format!("no MCP server named \"{s}\" in the configs bir looked at"),
            );
        }
    }
    if cmd.dry_run {
        for s in &summaries {
            s(false);
        }
        return match run_jobs(&jobs, &form, true) {
            Ok(_) => {
                out("(dry run: nothing was written)");
                Exit::Code(0)
            }
            Err(e) => fail("install", &e),
        };
    }
    let result = run_jobs(&jobs, &form, false);
    for s in &summaries {
        s(result.is_ok());
    }
    match result {
        Ok(files) if files.is_empty() => {
            out("\nNothing to change.");
            Exit::Code(0)
        }
        Ok(files) => {
            out("");
            for (file, n) in &files {
                out(&format!(
                    "Changed: {} ({n} entr{}). Nothing else in it was touched.",
                    file.display(),
                    if *n == 1 { "y" } else { "ies" }
                ));
            }
            out("Undo: bir uninstall   (preview: bir uninstall --dry-run)");
            out("Check: bir doctor     Restart the clients' sessions to use the wrapped servers.");
            Exit::Code(0)
        }
        Err(e) => fail("install", &e),
    }
}

fn summary(r: &Resolved, plan: &[Planned], applied: bool, in_place_mcp_json: bool) {
    out(&format!(
        "Claude Code — project {} (key {}), {}",
        r.paths.project.display(),
        json_string(&r.local_key),
        r.paths.claude_json.display()
    ));
    if plan.is_empty() {
        out("  no MCP servers configured for this project");
    }
    let width = plan
        .iter()
        .map(|p| p.found.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
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

/// The project keys that mean "this project" for uninstall.
fn this_project_keys(paths: &Paths) -> Vec<String> {
    claude::key_candidates(&paths.key)
}

pub fn uninstall(cmd: UninstallCmd) -> Exit {
    let ledger = match ledger::load() {
        Ok(l) => l,
        Err(e) => return fail("uninstall", &e),
    };
    let by_file = cmd
        .config
        .as_ref()
        .map(|c| atomic::resolve(&std::path::absolute(c).unwrap_or_else(|_| c.clone())));
    let by_file = match by_file {
        Some(Ok(f)) => Some(f),
        Some(Err(e)) => return fail("uninstall", &e),
        None => None,
    };
    let everywhere = cmd.all || cmd.client.is_some() || by_file.is_some();
    let keys = if everywhere {
        Vec::new()
    } else {
        match Paths::from_env(&project_dir(&cmd.project)) {
            Ok(p) => this_project_keys(&p),
            Err(e) => return fail("uninstall", &e),
        }
    };
    let selected: Vec<Change> = ledger
        .changes
        .iter()
        .filter(|c| everywhere || c.project.as_ref().is_some_and(|p| keys.contains(p)))
        .filter(|c| cmd.client.as_ref().is_none_or(|cl| &c.client == cl))
        .filter(|c| by_file.as_ref().is_none_or(|f| &c.file == f))
        .filter(|c| cmd.server.is_empty() || cmd.server.contains(&c.server))
        .cloned()
        .collect();
    if selected.is_empty() {
        out(if cmd.all {
            "Nothing to undo: bir has no recorded changes on this machine."
        } else {
            "Nothing to undo for this project (bir uninstall --all covers every project)."
        });
        return Exit::Code(0);
    }
    let mut files: Vec<PathBuf> = selected.iter().map(|c| c.file.clone()).collect();
    files.sort();
    files.dedup();
    let mut failed = false;
    let mut done: Vec<Change> = Vec::new();
    for file in files {
        let mine: Vec<&Change> = selected.iter().filter(|c| c.file == file).collect();
        let notes: RefCell<Vec<String>> = RefCell::new(Vec::new());
        let resolved_now: RefCell<Vec<Change>> = RefCell::new(Vec::new());
        let mut edit = |before: Option<&[u8]>| -> Result<Option<Vec<u8>>, String> {
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
                let (next, note) = if is_toml(&file) {
                    reverse_toml(&bytes, c)
                        .map_err(|e| format!("{}:{e}; nothing was changed", file.display()))?
                } else {
                    // JSONC accepts plain JSON too; bir only splices, so a
                    // file gains no comment it did not have.
                    let doc = Doc::parse(&bytes, Flavor::Jsonc)
                        .map_err(|e| format!("{}:{e}; nothing was changed", file.display()))?;
                    reverse(&doc, c)?
                };
                if let Some(next) = next {
                    bytes = next;
                }
                notes.borrow_mut().push(note);
                resolved_now.borrow_mut().push((*c).clone());
            }
            Ok((bytes != before).then_some(bytes))
        };
        if cmd.dry_run {
            let before = match atomic::read(&file) {
                Ok(b) => b,
                Err(e) => return fail("uninstall", &e),
            };
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
                    eprintln!("bir uninstall: {e}");
                    failed = true;
                }
            }
            continue;
        }
        match atomic::update(&file, &mut edit) {
            Ok(_) => {
                out(&format!("{}:", file.display()));
                for n in notes.borrow().iter() {
                    out(&format!("  {n}"));
                }
                done.extend(resolved_now.into_inner());
            }
            Err(e) => {
                eprintln!("bir uninstall: {e}");
                failed = true;
            }
        }
    }
    if cmd.dry_run {
        out("(dry run: nothing was written)");
        return Exit::Code(u8::from(failed));
    }
    if let Err(e) = ledger::modify(&mut |l| {
        l.changes.retain(|c| !done.contains(c));
    }) {
        return fail(
            "uninstall",
            &format!("the configs were restored, but the ledger could not be updated: {e}"),
        );
    }
    Exit::Code(u8::from(failed))
}

fn is_toml(file: &Path) -> bool {
    file.extension().is_some_and(|e| e == "toml")
}

/// [`reverse`] for a Codex TOML file.
fn reverse_toml(bytes: &[u8], c: &Change) -> Result<(Option<Vec<u8>>, String), String> {
    let text = String::from_utf8(bytes.to_vec()).map_err(|_| "the file is not UTF-8".to_owned())?;
    let name = c.path.last().map(String::as_str).unwrap_or_default();
    let servers = super::codex::servers(&text)?;
    match servers.iter().find(|(n, _, _)| n == name) {
        None => {
            return Ok((
                None,
                format!("{}: already gone; nothing to restore", c.server),
            ));
        }
        Some((_, _, EntryKind::Wrapped(_))) => {}
        Some(_) => {
            return Ok((
                None,
                format!(
                    "{}: no longer wrapped by bir (changed since); left as it is",
                    c.server
                ),
            ));
        }
    }
    let fingerprint = super::codex::entry_fingerprint(&text, name).unwrap_or_default();
    let edited = sha256_hex(fingerprint.as_bytes()) != c.entry_sha256;
    let exact = !edited && (c.args_absent || c.original_args.is_some());
    let out = if exact {
        super::codex::restore(
            &text,
            name,
            c.original_command.as_deref(),
            c.original_args.as_deref(),
            c.args_absent,
        )?
    } else {
        super::codex::restore(&text, name, None, None, c.args_absent)?
    };
    let note = if exact {
        format!("{}: restored the original entry", c.server)
    } else if edited {
        format!(
            "{}: the entry was edited since install; restored its server command from the current entry",
            c.server
        )
    } else {
        format!(
            "{}: restored the server command (its arguments were read back from the wrapped entry)",
            c.server
        )
    };
    Ok((Some(out.into_bytes()), note))
}

/// The reverse of one change on `doc`: the new bytes (None: nothing to do)
/// and a note for the user.
fn reverse(doc: &Doc, c: &Change) -> Result<(Option<Vec<u8>>, String), String> {
    let path: Vec<&str> = c.path.iter().map(String::as_str).collect();
    let Some(node) = doc.root.at(&path) else {
        return Ok((
            None,
            format!("{}: already gone; nothing to restore", c.server),
        ));
    };
    let EntryKind::Wrapped(wrapped) = classify(node) else {
        return Ok((
            None,
            format!(
                "{}: no longer wrapped by bir (changed since); left as it is",
                c.server
            ),
        ));
    };
    let edited = sha256_hex(doc.raw(node).as_bytes()) != c.entry_sha256;
    if c.action == ACTION_INSERTED {
        let bytes = doc
            .remove_pruning(&path, c.keep_parents)
            .ok_or("internal: entry vanished")?;
        let note = format!(
            "{}: removed the wrapped copy from the local scope{} (the {} scope entry is used again)",
            c.server,
            if edited {
                " (it was edited since install)"
            } else {
                ""
            },
            c.source_scope
        );
        return Ok((Some(bytes), note));
    }
    // A remote entry wrapped in place: the original text, its header
    // values read back from the wrapped entry.
    if let Some(template) = &c.original_text {
        let text = match super::remote_entry::restore(template, node, doc) {
            Ok(t) => t,
            Err(e) => {
                return Ok((
                    None,
                    format!(
                        "{}: cannot restore the original remote entry ({e}); left as it is — put its headers back by hand",
                        c.server
                    ),
                ));
            }
        };
        let bytes = doc.splice(node.start, node.end, &text);
        let note = if edited {
            format!(
                "{}: the entry was edited since install; restored the original remote entry (header values from the current entry)",
                c.server
            )
        } else {
            format!("{}: restored the original entry", c.server)
        };
        return Ok((Some(bytes), note));
    }
    if wrapped.remote.is_some() {
        return Ok((
            None,
            format!(
                "{}: wraps a remote server, but the ledger has no original to restore; left as it is",
                c.server
            ),
        ));
    }
    // Wrapped in place: restore command and args.
    if !edited
        && let Some(cmd_raw) = &c.original_command
        && (c.args_absent || c.original_args.is_some())
    {
        let cmd_node = node.get("command").ok_or("internal: no command")?;
        let bytes = doc.splice(cmd_node.start, cmd_node.end, cmd_raw);
        let doc2 = Doc::parse(&bytes, doc.flavor).map_err(|e| format!("internal: {e}"))?;
        let mut args_path = path.clone();
        args_path.push("args");
        let bytes = match (&c.original_args, doc2.root.at(&args_path)) {
            (Some(raw), Some(n)) => doc2.splice(n.start, n.end, raw),
            (None, Some(_)) if c.args_absent => doc2.remove(&args_path).unwrap_or(bytes),
            _ => bytes,
        };
        return Ok((
            Some(bytes),
            format!("{}: restored the original entry", c.server),
        ));
    }
    // Edited since (or args withheld): take the server command from the
    // wrapped entry as it is now.
    let args = if c.args_absent && wrapped.args.is_empty() {
        None
    } else {
        Some(wrapped.args.as_slice())
    };
    let bytes = set_command(doc, &path, &wrapped.command, args)?;
    let why = if edited {
        "the entry was edited since install; restored its server command from the current entry"
    } else {
        "restored the server command (its arguments were read back from the wrapped entry)"
    };
    Ok((Some(bytes), format!("{}: {why}", c.server)))
}

pub fn status(cmd: StatusCmd) -> Exit {
    let paths = match Paths::from_env(&project_dir(&cmd.project)) {
        Ok(p) => p,
        Err(e) => return fail("status", &e),
    };
    let resolved = match claude::resolve(&paths) {
        Ok(r) => r,
        Err(e) => return fail("status", &e),
    };
    let plan: Vec<Planned> = claude::decide(&resolved, &[])
        .into_iter()
        .map(|(found, decision)| Planned { found, decision })
        .collect();
    out(&format!(
        "Claude Code — project {} (key {}), {}",
        paths.project.display(),
        json_string(&resolved.local_key),
        paths.claude_json.display()
    ));
    if plan.is_empty() {
        out("  no MCP servers configured for this project");
    }
    let width = plan
        .iter()
        .map(|p| p.found.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
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
    if let Ok(targets) = super::clients::targets(None, None, "mcpServers", false, &paths.project) {
        for t in targets {
            let super::clients::Target::File(cf) = t else {
                continue;
            };
            out(&format!("{} — {}", cf.label, cf.file.display()));
            match super::clients::entries(&cf, &[]) {
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
    let off = std::env::var("BIR_RECORDER").is_ok_and(|v| matches!(v.trim(), "off" | "0" | "none"));
    out(&format!(
        "Recording: {}",
        if off {
            "off (BIR_RECORDER=off): wrapped servers are relayed, nothing is recorded"
        } else {
            "on"
        }
    ));
    match ledger::load() {
        Ok(l) => {
            let keys = this_project_keys(&paths);
            let here = l
                .changes
                .iter()
                .filter(|c| c.project.as_ref().is_some_and(|p| keys.contains(p)))
                .count();
            out(&format!(
                "Ledger: {} change(s) by bir here, {} on this machine ({})",
                here,
                l.changes.len(),
                ledger::path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ));
        }
        Err(e) => out(&format!("Ledger: {e}")),
    }
    Exit::Code(0)
}

/// Used by doctor: the resolved Claude Code config for a project.
pub fn resolve_for(project: &Path) -> Result<(Resolved, Vec<(Found, Decision)>), String> {
    let paths = Paths::from_env(project)?;
    let r = claude::resolve(&paths)?;
    let d = claude::decide(&r, &[]);
    Ok((r, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_like_arguments_are_withheld() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(args_look_secret(&s(&["--api-key", "abc"])));
        assert!(args_look_secret(&s(&["--token=abc"])));
        assert!(!args_look_secret(&s(&["-y", "@scope/server", "."])));
    }
}
