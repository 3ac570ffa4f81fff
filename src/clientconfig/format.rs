//! One trait for the two config-file formats bir edits: JSON/JSONC (span
//! edits through `jsonedit`) and Codex TOML (span splices through `codex`).
//!
//! `install` applies a [`FileJob`] and `uninstall` reverses a ledger
//! [`Change`] through [`ConfigFormat`], so neither command asks which
//! format a file is in beyond picking the implementation once.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::entry::{EntryKind, ProxyForm, classify, set_command, wrapped_entry_text};
use super::jsonedit::{Doc, Flavor};
use super::ledger::{self, ACTION_IN_PLACE, ACTION_INSERTED, Change};
use super::vocab::Found;
use crate::codec::sha256_hex;
use crate::error::Error;

/// What `install` and `uninstall` do to one config file, per format.
pub(crate) trait ConfigFormat {
    /// Applies a job's operations to `before`: the new bytes (None: nothing
    /// to change) and the ledger entries (hashes filled in later).
    fn apply(
        &self,
        job: &FileJob,
        form: &ProxyForm,
        before: Option<&[u8]>,
    ) -> Result<(Option<Vec<u8>>, Vec<Change>), Error>;

    /// The hash of the entry at `path` as it is in `bytes`, to tell later
    /// whether it was edited since.
    fn entry_hash(&self, bytes: &[u8], path: &[String]) -> String;

    /// The reverse of one change on `bytes` (the content of `file`): the
    /// new bytes (None: nothing to do) and a note for the user.
    fn reverse(
        &self,
        file: &Path,
        bytes: &[u8],
        c: &Change,
    ) -> Result<(Option<Vec<u8>>, String), Error>;
}

/// A JSON file, or JSONC (comments and trailing commas allowed).
pub(crate) struct Json(pub(crate) Flavor);

/// A Codex `config.toml`.
pub(crate) struct CodexToml;

/// The format a job's file is written in.
pub(crate) fn of_job(job: &FileJob) -> Box<dyn ConfigFormat> {
    if job.toml {
        Box::new(CodexToml)
    } else {
        Box::new(Json(job.flavor))
    }
}

/// The format to read a ledger's file in: TOML by its extension, else
/// JSONC (which accepts plain JSON too; bir only splices, so a file gains
/// no comment it did not have).
pub(crate) fn of_file(file: &Path) -> Box<dyn ConfigFormat> {
    if is_toml(file) {
        Box::new(CodexToml)
    } else {
        Box::new(Json(Flavor::Jsonc))
    }
}

impl ConfigFormat for Json {
    fn apply(
        &self,
        job: &FileJob,
        form: &ProxyForm,
        before: Option<&[u8]>,
    ) -> Result<(Option<Vec<u8>>, Vec<Change>), Error> {
        apply_json(job, form, before)
    }

    fn entry_hash(&self, bytes: &[u8], path: &[String]) -> String {
        json_entry_hash(bytes, self.0, path)
    }

    fn reverse(
        &self,
        file: &Path,
        bytes: &[u8],
        c: &Change,
    ) -> Result<(Option<Vec<u8>>, String), Error> {
        let doc = Doc::parse(bytes, self.0)
            .map_err(|e| Error::failure(format!("{}:{e}; nothing was changed", file.display())))?;
        reverse_json(&doc, c)
    }
}

impl ConfigFormat for CodexToml {
    fn apply(
        &self,
        job: &FileJob,
        form: &ProxyForm,
        before: Option<&[u8]>,
    ) -> Result<(Option<Vec<u8>>, Vec<Change>), Error> {
        apply_toml(job, form, before)
    }

    fn entry_hash(&self, bytes: &[u8], path: &[String]) -> String {
        toml_entry_hash(bytes, path)
    }

    fn reverse(
        &self,
        file: &Path,
        bytes: &[u8],
        c: &Change,
    ) -> Result<(Option<Vec<u8>>, String), Error> {
        reverse_toml(bytes, c)
            .map_err(|e| Error::failure(format!("{}:{e}; nothing was changed", file.display())))
    }
}

fn now() -> String {
    crate::time::rfc3339(SystemTime::now())
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

/// One entry to wrap: a copy at `copy_to` in the job's file, or in place
/// (at `found.path` in the job's file).
pub(crate) struct Op {
    pub(crate) found: Found,
    pub(crate) copy_to: Option<Vec<String>>,
}

/// Everything to do in one file.
pub(crate) struct FileJob {
    pub(crate) file: PathBuf,
    pub(crate) flavor: Flavor,
    /// A Codex TOML file.
    pub(crate) toml: bool,
    pub(crate) client: String,
    pub(crate) project: Option<String>,
    pub(crate) ops: Vec<Op>,
}

/// Applies a job's operations to `before`: the new bytes (None: nothing to
/// change) and the ledger entries (hashes filled in later).
fn apply_json(
    job: &FileJob,
    form: &ProxyForm,
    before: Option<&[u8]>,
) -> Result<(Option<Vec<u8>>, Vec<Change>), Error> {
    let mut changes = Vec::new();
    let mut bytes = before.map_or_else(|| b"{\n}\n".to_vec(), <[u8]>::to_vec);
    for op in &job.ops {
        let doc = Doc::parse(&bytes, job.flavor).map_err(|e| {
            Error::failure(format!("{}:{e}; nothing was changed", job.file.display()))
        })?;
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

/// [`apply_json`] for a Codex TOML file: every op is an in-place wrap.
fn apply_toml(
    job: &FileJob,
    form: &ProxyForm,
    before: Option<&[u8]>,
) -> Result<(Option<Vec<u8>>, Vec<Change>), Error> {
    let Some(before) = before else {
        return Ok((None, Vec::new()));
    };
    let mut text = String::from_utf8(before.to_vec())
        .map_err(|_| Error::failure(format!("{} is not UTF-8", job.file.display())))?;
    let mut changes = Vec::new();
    for op in &job.ops {
        let f = &op.found;
        let current = super::codex::servers(&text).map_err(|e| {
            Error::failure(format!("{}:{e}; nothing was changed", job.file.display()))
        })?;
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
fn toml_entry_hash(bytes: &[u8], path: &[String]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let name = path.last().map(String::as_str).unwrap_or_default();
    super::codex::entry_fingerprint(&text, name)
        .map(|f| sha256_hex(f.as_bytes()))
        .unwrap_or_default()
}

/// [`toml_entry_hash`] for a JSON/JSONC file.
fn json_entry_hash(bytes: &[u8], flavor: Flavor, path: &[String]) -> String {
    let Ok(doc) = Doc::parse(bytes, flavor) else {
        return String::new();
    };
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    doc.root
        .at(&path)
        .map(|n| sha256_hex(doc.raw(n).as_bytes()))
        .unwrap_or_default()
}

fn is_toml(file: &Path) -> bool {
    file.extension().is_some_and(|e| e == "toml")
}

/// [`reverse_json`] for a Codex TOML file.
fn reverse_toml(bytes: &[u8], c: &Change) -> Result<(Option<Vec<u8>>, String), Error> {
    let text =
        String::from_utf8(bytes.to_vec()).map_err(|_| Error::failure("the file is not UTF-8"))?;
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
fn reverse_json(doc: &Doc, c: &Change) -> Result<(Option<Vec<u8>>, String), Error> {
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
        let doc2 =
            Doc::parse(&bytes, doc.flavor).map_err(|e| Error::failure(format!("internal: {e}")))?;
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
