//! `$BIR_HOME/installed.json` (0600): every change `bir install` made, so
//! `bir uninstall` can reverse exactly bir's own edits.
//!
//! Each change names the file, the keys leading to the entry, what was done
//! (`inserted` a wrapped copy, or `wrapped_in_place`), for an in-place wrap
//! the original `command` and `args` as they were written (arguments that
//! look like credentials are withheld and read back from the wrapped entry
//! on uninstall; `env` and `headers` values are never copied), for a remote
//! entry wrapped in place its original text with every header and env value
//! withheld (uninstall reads them back from the wrapped entry's
//! `BIR_UPSTREAM_HEADERS` and `env`), and the sha256 of the entry and of the file after bir's edit (to
//! tell whether someone edited them since).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::atomic;
use crate::error::Error;
use crate::home::{bir_home, ensure_private_dir};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Ledger {
    pub version: u32,
    #[serde(default)]
    pub changes: Vec<Change>,
    /// Claude Code hooks bir registered, one entry per settings file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<super::hook_entries::HookChange>,
    /// bir's Claude Code plugin (`bir install --mod`), one entry per
    /// settings file that declares it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mods: Vec<ModChange>,
    /// Other agents' hooks (`bir install --client codex|gemini|…`), one
    /// entry per hook file; `client` names the agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_hooks: Vec<super::hook_entries::HookChange>,
    /// Trust entries bir appended to Codex's `config.toml`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codex_trust: Vec<CodexTrust>,
    /// `bir install --everywhere`: sessions are recorded in every
    /// directory, not only in the projects above (`crate::scope` reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub everywhere: Option<crate::scope::Everywhere>,
}

/// A recorded trust of a Codex hook: the bytes bir appended to Codex's
/// `config.toml`, to take out again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CodexTrust {
    pub file: PathBuf,
    pub appended: String,
    #[serde(default)]
    pub created_file: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Change {
    pub client: String,
    pub file: PathBuf,
    /// Keys from the file's top level to the entry.
    pub path: Vec<String>,
    /// `inserted` or `wrapped_in_place`.
    pub action: String,
    pub server: String,
    /// The Claude Code project key, for project-bound changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Where the original entry lives (`local`, `project`, `user`).
    pub source_scope: String,
    /// For `inserted`: how many of the path's parent objects existed before
    /// (the others were created, and are removed again when left empty).
    #[serde(default)]
    pub keep_parents: usize,
    /// For `wrapped_in_place`: the original `command` value, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_command: Option<String>,
    /// For `wrapped_in_place`: the original `args` value, as written (None:
    /// absent, or withheld).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_args: Option<String>,
    #[serde(default)]
    pub args_absent: bool,
    /// The original args held credential-like values: not stored; uninstall
    /// takes them from the wrapped entry.
    #[serde(default)]
    pub args_withheld: bool,
    /// The original entry for the record, minus credential values: every
    /// `env` / `headers` value and credential-like arguments are
    /// `"[withheld]"` (uninstall never needs them: bir does not change those
    /// fields, and reads arguments back from the wrapped entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original: Option<serde_json::Value>,
    /// For a remote entry wrapped in place: the original entry's text with
    /// every `headers` / `env` value `"[withheld]"`; uninstall fills them
    /// back in from the wrapped entry's `env` (`BIR_UPSTREAM_HEADERS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_text: Option<String>,
    pub entry_sha256: String,
    pub file_sha256: String,
    pub at: String,
}

/// `raw` (an entry's JSON text) with credential values withheld.
pub(crate) fn sanitized(raw: &str, args_secret: bool) -> Option<serde_json::Value> {
    let mut v: serde_json::Value = serde_json::from_str(raw).ok()?;
    let obj = v.as_object_mut()?;
    for key in ["env", "headers", "http_headers", "env_http_headers"] {
        if let Some(map) = obj.get_mut(key).and_then(serde_json::Value::as_object_mut) {
            for val in map.values_mut() {
                *val = serde_json::Value::String("[withheld]".into());
            }
        }
    }
    if args_secret && obj.contains_key("args") {
        obj.insert(
            "args".into(),
            serde_json::Value::String("[withheld]".into()),
        );
    }
    Some(v)
}

/// bir's Claude Code plugin (`bir install --mod`, `plugin.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ModChange {
    /// The user settings file bir edited.
    pub file: PathBuf,
    /// The marketplace directory bir wrote.
    pub marketplace: PathBuf,
    /// Claude Code's configuration directory (where it keeps its own
    /// plugin records).
    pub config_dir: PathBuf,
    /// Claude Code's `.claude.json` (it counts a plugin's use there).
    #[serde(default)]
    pub claude_json: PathBuf,
    /// Projects that asked for it.
    pub projects: Vec<String>,
    /// bir created the settings file.
    pub created_file: bool,
    /// How many parents of each key existed before (see
    /// `Doc::remove_pruning`): `extraKnownMarketplaces.bir-local`, then
    /// `enabledPlugins.bir-mod@bir-local`.
    pub keep_parents: [usize; 2],
    pub file_sha256: String,
    pub at: String,
}

pub(crate) const ACTION_INSERTED: &str = "inserted";
pub(crate) const ACTION_IN_PLACE: &str = "wrapped_in_place";

/// The ledger's file name under `$BIR_HOME`.
const FILE: &str = crate::scope::LEDGER_FILE;

pub(crate) fn path() -> Result<PathBuf, Error> {
    Ok(bir_home()
        .ok_or("cannot find bir's home directory (set BIR_HOME or HOME)")?
        .join(FILE))
}

/// The ledger under `home`, for the readers that must never fail because
/// of it (a proxy deciding at start whether to record, `bir replay`
/// looking for a server's original command): `None` when it is missing or
/// unreadable. The one reader of the file outside the install commands'
/// own [`load`] and [`modify`].
pub(crate) fn read(home: &Path) -> Option<Ledger> {
    let bytes = std::fs::read(home.join(FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

impl Ledger {
    /// The distinct files bir changed: server entries, hooks and the plugin
    /// alike. With `project` keys, only the changes made for that project
    /// (its server entries, and the hooks and plugin it is a user of).
    /// Files, not entries: a user reads "2 files" as what `bir uninstall`
    /// would give back.
    pub(crate) fn files_changed(&self, project: Option<&[String]>) -> usize {
        let mine =
            |keys: &[String]| project.is_none_or(|want| keys.iter().any(|k| want.contains(k)));
        let mut files: Vec<&Path> = Vec::new();
        let entries = self
            .changes
            .iter()
            .filter(|c| mine(c.project.as_slice()))
            .map(|c| c.file.as_path());
        let hooks = self
            .hooks
            .iter()
            .filter(|h| mine(&h.projects))
            .map(|h| h.file.as_path());
        let mods = self
            .mods
            .iter()
            .filter(|m| mine(&m.projects))
            .map(|m| m.file.as_path());
        for file in entries.chain(hooks).chain(mods) {
            if !files.contains(&file) {
                files.push(file);
            }
        }
        files.len()
    }

    /// The original stdio command of `server` as the ledger kept it (the
    /// first change that has one); `None` when an argument was withheld
    /// (a credential is not in the ledger, so the command cannot be
    /// rebuilt from it).
    pub(crate) fn original_command(&self, server: &str) -> Option<Vec<String>> {
        use serde_json::Value;
        self.changes
            .iter()
            .filter(|c| c.server == server)
            .find_map(|c| {
                let original = c.original.as_ref()?;
                let mut command = vec![original.get("command")?.as_str()?.to_owned()];
                for a in original
                    .get("args")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let a = a.as_str()?;
                    if a == "[withheld]" {
                        return None;
                    }
                    command.push(a.to_owned());
                }
                Some(command)
            })
    }
}

pub(crate) fn load() -> Result<Ledger, Error> {
    let p = path()?;
    match atomic::read(&p)? {
        None => Ok(Ledger {
            version: 1,
            ..Ledger::default()
        }),
        Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "{} is not a valid ledger ({e}); move it aside to continue",
                p.display()
            )
            .into()
        }),
    }
}

/// `bir install --everywhere`: records the choice to record every
/// directory; whether it was new.
pub(crate) fn choose_everywhere() -> Result<bool, Error> {
    let mut new = false;
    modify(&mut |l| {
        if l.everywhere.is_none() {
            l.everywhere = Some(crate::scope::Everywhere {
                at: crate::time::rfc3339(std::time::SystemTime::now()),
            });
            new = true;
        }
    })?;
    Ok(new)
}

/// Applies `f` to the ledger on disk (read, change, atomic write, 0600).
pub(crate) fn modify(f: &mut dyn FnMut(&mut Ledger)) -> Result<(), Error> {
    let p = path()?;
    if let Some(dir) = p.parent() {
        ensure_private_dir(dir).map_err(|e| Error::failure(e.to_string()))?;
    }
    atomic::update(&p, &mut |before| {
        let mut ledger: Ledger = match before {
            None => Ledger::default(),
            Some(b) => serde_json::from_slice(b).map_err(|e| {
                Error::failure(format!(
                    "{} is not a valid ledger ({e}); move it aside to continue",
                    p.display()
                ))
            })?,
        };
        ledger.version = 1;
        f(&mut ledger);
        let mut text =
            serde_json::to_vec_pretty(&ledger).map_err(|e| Error::failure(e.to_string()))?;
        text.push(b'\n');
        Ok((before != Some(&text[..])).then_some(text))
    })?;
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(server: &str, original: serde_json::Value) -> Change {
        Change {
            client: "cursor".into(),
            file: "/home/u/.cursor/mcp.json".into(),
            path: vec!["mcpServers".into(), server.into()],
            action: ACTION_IN_PLACE.into(),
            server: server.into(),
            project: Some("/work/a".into()),
            source_scope: "user".into(),
            keep_parents: 0,
            original_command: Some("npx".into()),
            original_args: None,
            args_absent: false,
            args_withheld: false,
            original: Some(original),
            original_text: None,
            entry_sha256: String::new(),
            file_sha256: String::new(),
            at: String::new(),
        }
    }

    /// The one reader every other layer uses reads what `bir install`
    /// writes, and turns a missing or damaged ledger into nothing rather
    /// than an error (a proxy must start whatever the file holds).
    #[test]
    fn read_takes_what_install_writes_and_nothing_from_a_damaged_file() {
        let home = std::env::temp_dir().join(format!("bir-ledger-read-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(&home).expect("mkdir");
        assert!(read(&home).is_none(), "no ledger yet");
        let ledger = Ledger {
            version: 1,
            changes: vec![change(
                "gh",
                serde_json::json!({"command": "npx", "args": ["-y", "server-gh"]}),
            )],
            ..Ledger::default()
        };
        std::fs::write(home.join(FILE), serde_json::to_vec(&ledger).expect("json")).expect("write");
        let back = read(&home).expect("read back");
        assert_eq!(back.changes, ledger.changes);
        std::fs::write(home.join(FILE), b"{not json").expect("write");
        assert!(read(&home).is_none(), "a damaged ledger reads as none");
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn the_original_command_is_not_guessed_when_an_argument_was_withheld() {
        let ledger = Ledger {
            version: 1,
            changes: vec![
                change(
                    "gh",
                    serde_json::json!({"command": "npx", "args": ["-y", "gh"]}),
                ),
                change(
                    "db",
                    serde_json::json!({"command": "db", "args": ["[withheld]"]}),
                ),
            ],
            ..Ledger::default()
        };
        assert_eq!(
            ledger.original_command("gh"),
            Some(vec!["npx".to_owned(), "-y".to_owned(), "gh".to_owned()])
        );
        assert_eq!(ledger.original_command("db"), None);
        assert_eq!(ledger.original_command("other"), None);
    }
}
