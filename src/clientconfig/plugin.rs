//! `bir install --mod` / `bir uninstall`: bir's Claude Code plugin (the
//! "mod", a hooks module that streams each turn to the recorder daemon over
//! its Unix socket; the module is `mod/bir-mod/hooks/bir.js`).
//!
//! It goes in through Claude Code's own plugin mechanism, as a local
//! directory marketplace declared in user settings — what `claude plugin
//! marketplace add DIR` + `claude plugin install` write, observed on
//! 2.1.332: `extraKnownMarketplaces.bir-local = {source: {source:
//! "directory", path}}` and `enabledPlugins["bir-mod@bir-local"] = true`.
//! Claude Code then loads the plugin in place from that directory (and
//! records it itself in `plugins/known_marketplaces.json` and
//! `installed_plugins.json` in the background).
//!
//! Invariants:
//! * The marketplace directory is bir's own (`$BIR_HOME/claude-plugins`),
//!   written from the files compiled into this binary: a reinstall brings
//!   the plugin up to this bir's version.
//! * The settings edit is byte-preserving (`jsonedit`) and recorded in the
//!   ledger (`mods`): which parent objects existed, whether bir created the
//!   file. `bir uninstall` removes exactly those keys (and the objects bir
//!   created), the marketplace directory, and Claude Code's own records of
//!   the marketplace and plugin, so no trace of the plugin is left.
//! * Like the hooks, the mod is shared by every project that asked for it;
//!   the last one to uninstall takes it away (`--all`: at once).

use std::cell::Cell;
use std::path::{Path, PathBuf};

use super::atomic;
use super::claude::{Paths, managed_settings_files};
use super::diff;
use super::hook_entries::{NEW_FILE, unreadable_settings};
use super::hook_install::{
    Selection, Shared, UndoWords, forget_in_ledger, record_in_ledger, undo_hook_file,
};
use super::jsonedit::{Doc, Flavor, Node, json_string};
use super::ledger::{self, ModChange};
use crate::codec::sha256_hex;
use crate::error::{Context, Error};
use crate::output::out;

/// The marketplace's name in Claude Code's settings.
pub(crate) const MARKETPLACE: &str = "bir-local";
/// The plugin's name (its manifest's `name`).
pub(crate) const PLUGIN: &str = "bir-mod";
/// `enabledPlugins`' key for it.
pub(crate) const PLUGIN_KEY: &str = "bir-mod@bir-local";

/// The plugin's files, compiled in: (path under the marketplace, bytes).
const FILES: &[(&str, &str)] = &[
    (
        ".claude-plugin/marketplace.json",
        include_str!("../../mod/.claude-plugin/marketplace.json"),
    ),
    (
        "bir-mod/.claude-plugin/plugin.json",
        include_str!("../../mod/bir-mod/.claude-plugin/plugin.json"),
    ),
    (
        "bir-mod/hooks/hooks.json",
        include_str!("../../mod/bir-mod/hooks/hooks.json"),
    ),
    (
        "bir-mod/hooks/bir.js",
        include_str!("../../mod/bir-mod/hooks/bir.js"),
    ),
];

/// `$BIR_HOME/claude-plugins`: the local marketplace.
pub(crate) fn marketplace_dir() -> Result<PathBuf, Error> {
    Ok(crate::home::bir_home()
        .ok_or("cannot find bir's home directory (set BIR_HOME or HOME)")?
        .join("claude-plugins"))
}

/// The two settings keys, with their values for `dir`.
fn keys(dir: &Path) -> [([&'static str; 2], String); 2] {
    let source = format!(
        "{{\"source\": {{\"source\": \"directory\", \"path\": {}}}}}",
        json_string(&dir.display().to_string())
    );
    [
        (["extraKnownMarketplaces", MARKETPLACE], source),
        (["enabledPlugins", PLUGIN_KEY], "true".to_owned()),
    ]
}

/// What an install edit does to a settings file.
#[derive(Debug, Default)]
struct Plan {
    bytes: Option<Vec<u8>>,
    keep_parents: [usize; 2],
    created_file: bool,
}

fn install_edit(before: Option<&[u8]>, dir: &Path, file: &Path) -> Result<Plan, Error> {
    let created_file = before.is_none();
    let mut bytes = before.map_or_else(|| NEW_FILE.to_vec(), <[u8]>::to_vec);
    let refuse = unreadable_settings(file);
    let mut plan = Plan {
        created_file,
        ..Plan::default()
    };
    for (i, (path, value)) in keys(dir).iter().enumerate() {
        let doc = Doc::parse(&bytes, Flavor::Json).map_err(|e| refuse(e.to_string()))?;
        if !doc.root.is_object() {
            return Err(refuse(" the top level is not a JSON object".into()));
        }
        plan.keep_parents[i] = doc.existing_parents(path);
        let wanted = Doc::parse(value.as_bytes(), Flavor::Json)
            .map_err(|e| Error::failure(format!("internal: {e}")))?;
        let same = doc
            .root
            .at(path)
            .is_some_and(|n| same_json(&doc, n, &wanted, &wanted.root));
        if !same {
            bytes = doc.set(path, value)?;
        }
    }
    plan.bytes = (before != Some(&bytes[..])).then_some(bytes);
    Ok(plan)
}

/// Whether two nodes hold the same JSON (layout aside).
fn same_json(a: &Doc, an: &Node, b: &Doc, bn: &Node) -> bool {
    let parse = |d: &Doc, n: &Node| serde_json::from_str::<serde_json::Value>(d.raw(n)).ok();
    parse(a, an).is_some() && parse(a, an) == parse(b, bn)
}

/// Writes the plugin's files into `dir` (0700, bir's own).
fn write_files(dir: &Path) -> Result<(), Error> {
    crate::home::ensure_private_dir(dir).context(|| format!("cannot create {}", dir.display()))?;
    for (rel, text) in FILES {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            crate::home::ensure_private_dir(parent)
                .context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Why Claude Code would load no hooks module from user settings, if
/// managed policy says so.
fn policy_blocks(paths: &Paths) -> Option<String> {
    for file in managed_settings_files(paths) {
        let Some(bytes) = atomic::read(&file).ok().flatten() else {
            continue;
        };
        let Ok(doc) = Doc::parse(&bytes, Flavor::Jsonc) else {
            continue;
        };
        for key in ["allowManagedHooksOnly", "disableAllHooks"] {
            if doc.root.get(key).is_some_and(Node::is_true) {
                return Some(format!(
                    "managed policy {} sets {key}: Claude Code loads no hooks modules from user plugins",
                    file.display()
                ));
            }
        }
    }
    None
}

/// `bir install --mod`: writes the plugin and declares it in user settings.
/// Prints its own section. Returns the settings file when it changed.
pub(crate) fn install(
    paths: &Paths,
    project_key: &str,
    dry_run: bool,
) -> Result<Option<PathBuf>, Error> {
    let file = paths.settings_dir.join("settings.json");
    let dir = marketplace_dir()?;
    out(&format!(
        "Claude Code mod — plugin {PLUGIN_KEY} from {} (declared in {})",
        dir.display(),
        file.display()
    ));
    if let Some(why) = policy_blocks(paths) {
        out(&format!("  not installed: {why}"));
        return Ok(None);
    }
    if dry_run {
        let before = atomic::read(&file)?;
        let plan = install_edit(before.as_deref(), &dir, &file)?;
        out(&format!(
            "  write      {} files into {}",
            FILES.len(),
            dir.display()
        ));
        match &plan.bytes {
            Some(after) => out(&diff::unified(
                &file.display().to_string(),
                before.as_deref().unwrap_or_default(),
                after,
            )),
            None => out("  declared already"),
        }
        return Ok(None);
    }
    write_files(&dir)?;
    if let Some(parent) = file.parent()
        && !parent.as_os_str().is_empty()
        && !parent.exists()
    {
        std::fs::create_dir_all(parent)
            .context(|| format!("cannot create {}", parent.display()))?;
    }
    let mut planned = None;
    let outcome = atomic::update(&file, &mut |before| {
        let plan = install_edit(before, &dir, &file)?;
        let bytes = plan.bytes.clone();
        planned = Some(plan);
        Ok(bytes)
    })?;
    let plan = planned.unwrap_or_default();
    let key = project_key.to_owned();
    let target = outcome.target.clone();
    let hash = sha256_hex(&outcome.after);
    fn mods(l: &mut ledger::Ledger) -> &mut Vec<ModChange> {
        &mut l.mods
    }
    record_in_ledger(
        mods,
        &target,
        &|m| {
            if !m.projects.contains(&key) {
                m.projects.push(key.clone());
            }
            m.marketplace = dir.clone();
            if outcome.changed {
                m.file_sha256 = hash.clone();
            }
        },
        &|| {
            Some(ModChange {
                file: target.clone(),
                marketplace: dir.clone(),
                config_dir: paths.settings_dir.clone(),
                claude_json: paths.claude_json.clone(),
                projects: vec![key.clone()],
                created_file: plan.created_file,
                keep_parents: plan.keep_parents,
                file_sha256: hash.clone(),
                at: crate::time::rfc3339(std::time::SystemTime::now()),
            })
        },
        &format!(
            "`bir uninstall` cannot undo it — remove `{PLUGIN_KEY}` and `{MARKETPLACE}` by hand"
        ),
    )?;
    if outcome.changed {
        out(&format!(
            "  installed  {PLUGIN_KEY}: Claude Code loads it at the next session start (2.1.332 or newer; older ones ignore it)"
        ));
    } else {
        out(&format!(
            "  already declared; plugin files refreshed in {}",
            dir.display()
        ));
    }
    Ok(outcome.changed.then_some(target))
}

impl Shared for ModChange {
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

/// The settings file without bir's two keys (and the objects bir created
/// for them). `None`: nothing of bir's is there.
fn uninstall_edit(before: &[u8], m: &ModChange) -> Result<Option<Vec<u8>>, Error> {
    let mut bytes = before.to_vec();
    for (i, (path, _)) in keys(&m.marketplace).iter().enumerate() {
        let doc = Doc::parse(&bytes, Flavor::Json).map_err(|e| {
            Error::failure(format!("{}:{e}; nothing was changed", m.file.display()))
        })?;
        if doc.root.at(path).is_none() {
            continue;
        }
        if let Some(next) = doc.remove_pruning(path, m.keep_parents[i]) {
            bytes = next;
        }
    }
    Ok((bytes != before).then_some(bytes))
}

/// Removes Claude Code's own records of the marketplace and the plugin
/// (what its background reconcile wrote after the first session): the
/// entries in `plugins/known_marketplaces.json`,
/// `plugins/installed_plugins.json` and `.claude.json`'s `pluginUsage`,
/// and its copy in `plugins/cache`.
fn forget_host_records(m: &ModChange) -> Vec<String> {
    let mut notes = Vec::new();
    let plugins = m.config_dir.join("plugins");
    let mut edits: Vec<(PathBuf, Vec<&str>)> = vec![
        (plugins.join("known_marketplaces.json"), vec![MARKETPLACE]),
        (
            plugins.join("installed_plugins.json"),
            vec!["plugins", PLUGIN_KEY],
        ),
    ];
    if !m.claude_json.as_os_str().is_empty() {
        edits.push((m.claude_json.clone(), vec!["pluginUsage", PLUGIN_KEY]));
    }
    for (file, path) in edits {
        let result = atomic::update(&file, &mut |before| {
            let Some(before) = before else {
                return Ok(None);
            };
            let Ok(doc) = Doc::parse(before, Flavor::Json) else {
                return Ok(None);
            };
            Ok(doc.remove(&path))
        });
        match result {
            Ok(o) if o.changed => notes.push(format!(
                "  Claude Code's record in {}: removed",
                file.display()
            )),
            Ok(_) => {}
            Err(e) => notes.push(format!("  {}: {e}", file.display())),
        }
    }
    let cache = plugins.join("cache").join(MARKETPLACE);
    if std::fs::symlink_metadata(&cache).is_ok_and(|m| m.is_dir()) {
        match std::fs::remove_dir_all(&cache) {
            Ok(()) => notes.push(format!("  Claude Code's copy {}: removed", cache.display())),
            Err(e) => notes.push(format!("  {}: {e}", cache.display())),
        }
    }
    notes
}

/// `bir uninstall`: takes the selected mods away. Returns false when
/// something failed (said on stderr).
pub(crate) fn uninstall(sel: &Selection<ModChange>, keys: &[String], dry_run: bool) -> bool {
    let mut ok = true;
    let mut done: Vec<PathBuf> = Vec::new();
    for m in &sel.release {
        out(&format!("{}:", m.file.display()));
        out(
            "  Claude Code mod: kept (other projects installed it too); `bir uninstall --all` removes it",
        );
    }
    for m in &sel.reverse {
        if dry_run {
            match atomic::read(&m.file)
                .and_then(|b| Ok((b.clone(), b.map(|b| uninstall_edit(&b, m)).transpose()?)))
            {
                Ok((Some(before), Some(Some(after)))) => {
                    out(&format!(
                        "  Claude Code mod: {PLUGIN_KEY}, and {}",
                        m.marketplace.display()
                    ));
                    out(&diff::unified(
                        &m.file.display().to_string(),
                        &before,
                        &after,
                    ));
                }
                Ok(_) => out(&format!(
                    "  Claude Code mod: not declared in {}",
                    m.file.display()
                )),
                Err(e) => {
                    crate::error::print("bir uninstall", &e);
                    ok = false;
                }
            }
            continue;
        }
        let emptied = Cell::new(false);
        let mut edit = |before: Option<&[u8]>| -> Result<Option<Vec<u8>>, Error> {
            let Some(before) = before else {
                return Ok(None);
            };
            let after = uninstall_edit(before, m)?;
            emptied.set(
                m.created_file
                    && after
                        .as_deref()
                        .and_then(|a| Doc::parse(a, Flavor::Json).ok())
                        .is_some_and(|d| d.root.members().is_empty()),
            );
            Ok(after)
        };
        let words = UndoWords {
            label: "Claude Code mod",
            removed: format!("removed {PLUGIN_KEY}; everything else is as it was"),
            none_left: "not declared any more".to_owned(),
        };
        if !undo_hook_file(&m.file, &mut edit, &emptied, &words) {
            ok = false;
            continue;
        }
        for note in forget_host_records(m) {
            out(&note);
        }
        if m.marketplace.exists() {
            match std::fs::remove_dir_all(&m.marketplace) {
                Ok(()) => out(&format!(
                    "  plugin files {}: removed",
                    m.marketplace.display()
                )),
                Err(e) => {
                    crate::error::print(
                        "bir uninstall",
                        &Error::failure(format!("cannot remove {}: {e}", m.marketplace.display())),
                    );
                    ok = false;
                }
            }
        }
        done.push(m.file.clone());
    }
    if dry_run {
        return ok;
    }
    let released: Vec<PathBuf> = sel.release.iter().map(|m| m.file.clone()).collect();
    fn mods(l: &mut ledger::Ledger) -> &mut Vec<ModChange> {
        &mut l.mods
    }
    ok & forget_in_ledger(mods, &done, &released, keys, "the mod was removed")
}

/// Whether bir's mod is declared and enabled in `paths`' user settings.
fn declared(paths: &Paths) -> Option<PathBuf> {
    let file = paths.settings_dir.join("settings.json");
    let bytes = atomic::read(&file).ok()??;
    let doc = Doc::parse(&bytes, Flavor::Jsonc).ok()?;
    let enabled = doc
        .root
        .at(&["enabledPlugins", PLUGIN_KEY])
        .is_some_and(Node::is_true);
    let source = doc
        .root
        .at(&["extraKnownMarketplaces", MARKETPLACE, "source", "path"])?;
    enabled.then(|| PathBuf::from(source.as_str().unwrap_or_default()))
}

/// Whether bir's mod is declared in `paths`' user settings (its hooks
/// module then carries what [`super::hook_entries::LEFT_TO_THE_MOD`] would).
pub(crate) fn installed(paths: &Paths) -> bool {
    declared(paths).is_some()
}

/// Whether the user's settings switch every hook (and so every module) off.
fn hooks_disabled(paths: &Paths) -> Option<String> {
    if let Some(why) = policy_blocks(paths) {
        return Some(why);
    }
    let file = paths.settings_dir.join("settings.json");
    let bytes = atomic::read(&file).ok()??;
    let doc = Doc::parse(&bytes, Flavor::Jsonc).ok()?;
    doc.root
        .get("disableAllHooks")
        .is_some_and(Node::is_true)
        .then(|| format!("{} sets disableAllHooks", file.display()))
}

/// `bir status` / `bir doctor`: which path records Claude Code's words —
/// the mod link (live, over the daemon's socket) or the hooks + transcript
/// fallback — and the problems that stop the mod. `socket`: the running
/// daemon's, if any.
pub(crate) fn doctor(paths: &Paths, socket: Option<&str>) -> (Vec<String>, usize) {
    let mut lines = Vec::new();
    let mut problems = 0;
    let Some(dir) = declared(paths) else {
        lines.push("Mod: not installed: the model's words come from the hooks and the transcript after each call (`bir install --mod` streams them live)".to_owned());
        return (lines, 0);
    };
    let module = dir.join(PLUGIN).join("hooks").join("bir.js");
    if !module.is_file() {
        problems += 1;
        lines.push(format!(
            "Mod: PROBLEM: declared, but {} is missing; run `bir install --mod` again",
            module.display()
        ));
        return (lines, problems);
    }
    if let Some(why) = hooks_disabled(paths) {
        lines.push(format!(
            "Mod: installed but off ({why}): recording falls back to the hooks and the transcript"
        ));
        return (lines, problems);
    }
    match socket {
        Some(path) => lines.push(format!(
            "Mod: active path: mod link + hooks (the model's words arrive live over {path}); without it (mods off, older Claude Code, --bare) the hooks and the transcript record the same steps"
        )),
        None => lines.push(
            "Mod: installed; the daemon is not running (or has no socket): until it is, sessions are recorded by the hooks and the transcript".to_owned(),
        ),
    }
    (lines, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(file: &str, before: Option<&[u8]>, dir: &Path) -> (Vec<u8>, ModChange) {
        let plan = install_edit(before, dir, Path::new(file)).expect("edit");
        let after = plan.bytes.expect("changed");
        let m = ModChange {
            file: file.into(),
            marketplace: dir.to_owned(),
            config_dir: "/c".into(),
            claude_json: "/c/.claude.json".into(),
            projects: vec!["/p".into()],
            created_file: plan.created_file,
            keep_parents: plan.keep_parents,
            file_sha256: String::new(),
            at: String::new(),
        };
        (after, m)
    }

    #[test]
    fn install_declares_the_marketplace_and_uninstall_gives_the_bytes_back() {
        let dir = Path::new("/h/.baseinstrunner/claude-plugins");
        let before = b"{\n  \"model\": \"opus\",\n  \"enabledPlugins\": {\"x@y\": true}\n}\n";
        let (after, m) = change("/c/settings.json", Some(before), dir);
        let v: serde_json::Value = serde_json::from_slice(&after).expect("json");
        assert_eq!(v["enabledPlugins"][PLUGIN_KEY], true);
        assert_eq!(
            v["enabledPlugins"]["x@y"], true,
            "the user's own plugin stays"
        );
        assert_eq!(
            v["extraKnownMarketplaces"][MARKETPLACE]["source"],
            serde_json::json!({"source": "directory", "path": dir.display().to_string()})
        );
        assert_eq!(m.keep_parents, [0, 1]);
        // Installing again changes nothing.
        let again = install_edit(Some(&after), dir, Path::new("/c/settings.json")).expect("edit");
        assert!(again.bytes.is_none());
        let back = uninstall_edit(&after, &m).expect("edit").expect("changed");
        assert_eq!(
            String::from_utf8_lossy(&back),
            String::from_utf8_lossy(before)
        );
    }

    #[test]
    fn a_file_bir_created_is_left_empty_and_a_refused_file_is_untouched() {
        let dir = Path::new("/d");
        let (after, m) = change("/c/settings.json", None, dir);
        assert!(m.created_file);
        let back = uninstall_edit(&after, &m).expect("edit").expect("changed");
        let doc = Doc::parse(&back, Flavor::Json).expect("json");
        assert!(
            doc.root.members().is_empty(),
            "{}",
            String::from_utf8_lossy(&back)
        );
        let err =
            install_edit(Some(b"[1]"), dir, Path::new("/c/settings.json")).expect_err("array");
        assert!(err.to_string().contains("not a JSON object"), "{err}");
        assert!(install_edit(Some(b"{not json"), dir, Path::new("/f")).is_err());
    }

    #[test]
    fn the_module_compiled_in_keeps_the_module_rules() {
        let (_, js) = FILES
            .iter()
            .find(|(p, _)| p.ends_with("bir.js"))
            .expect("module");
        assert!(!js.contains("require("), "no require");
        assert!(!js.contains("import("), "no dynamic import");
        // Every hook hands the event on untouched.
        let hooks = js.matches("on(\"").count();
        assert_eq!(hooks, 3, "the measured set: append, complete, end");
        assert_eq!(
            js.matches("return next(e);").count() + js.matches("return result;").count(),
            hooks
        );
        // A streaming event would need an async generator handing the
        // stream on.
        if js.contains("on(\"turn.step\"") {
            assert!(js.contains("async function* ($, e, next)"));
            assert!(js.contains("return yield* next(e);"));
        }
        let manifest: serde_json::Value = serde_json::from_str(
            FILES
                .iter()
                .find(|(p, _)| p.ends_with("plugin.json"))
                .expect("manifest")
                .1,
        )
        .expect("json");
        assert_eq!(manifest["name"], PLUGIN);
        let market: serde_json::Value = serde_json::from_str(
            FILES
                .iter()
                .find(|(p, _)| p.ends_with("marketplace.json"))
                .expect("market")
                .1,
        )
        .expect("json");
        assert_eq!(market["name"], MARKETPLACE);
        assert_eq!(market["plugins"][0]["name"], PLUGIN);
    }

    #[test]
    fn selection_follows_the_projects_that_asked() {
        let m = |projects: &[&str]| ModChange {
            file: "/c/settings.json".into(),
            marketplace: "/d".into(),
            config_dir: "/c".into(),
            claude_json: "/c/.claude.json".into(),
            projects: projects.iter().map(|p| p.to_string()).collect(),
            created_file: false,
            keep_parents: [0, 0],
            file_sha256: String::new(),
            at: String::new(),
        };
        let here = ["/a".to_owned()];
        use super::super::hook_install::select;
        let s = select(&[m(&["/a", "/b"])], false, &here, None, None, &[]);
        assert!(s.reverse.is_empty() && s.release.len() == 1);
        let s = select(&[m(&["/a"])], false, &here, None, None, &[]);
        assert_eq!(s.reverse.len(), 1);
        let s = select(&[m(&["/b"])], true, &here, None, None, &[]);
        assert_eq!(s.reverse.len(), 1, "--all");
        let s = select(&[m(&["/a"])], false, &here, None, None, &["srv".to_owned()]);
        assert!(s.reverse.is_empty() && s.release.is_empty(), "--server");
    }
}
