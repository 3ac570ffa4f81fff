//! Configured servers as bir reaches them itself, as their client would
//! (`bir replay|verify|scenario check`): the entries of an MCP client
//! config file (`--config FILE`), and the original entries the install
//! ledger kept.
//!
//! A config file is read with `bir install`'s readers (the same formats: a
//! JSON/JSONC map under `mcpServers`, `servers` or `context_servers`, or
//! Codex TOML). Every string bir starts an entry with has `${VAR}`
//! expanded by the rule `bir doctor` uses ([`super::vars`]), so both start
//! the same entry the same way.

use std::path::Path;

use super::clients::{self, Target};
use super::entry::EntryKind;
use super::jsonedit::{Doc, Flavor};
use super::vars::expand_env;
use crate::error::Error;
use crate::replay::targets::{self, ServerSpec};

/// The servers of an MCP client config file. A stdio entry keeps its
/// `env`; an entry bir wrapped is replayed against what it wraps; a remote
/// one by its URL, with its static headers. An entry of another kind is
/// left out (logged).
pub(crate) fn config_servers(path: &Path) -> Result<Vec<(String, ServerSpec)>, Error> {
    if !path.is_file() {
        return Err(Error::usage(format!(
            "--config {}: no such file",
            path.display()
        )));
    }
    let project = std::env::current_dir()
        .map_err(|e| Error::failure("cannot read the working directory").because(e))?;
    let mut found = Vec::new();
    for key in ["mcpServers", "servers", "context_servers"] {
        for target in clients::targets(None, Some(path), key, true, &project)? {
            if let Target::File(cf) = target {
                found.extend(clients::entries(&cf, &[])?);
            }
        }
        if !found.is_empty() {
            break;
        }
    }
    let mut out = Vec::new();
    for (entry, _) in found {
        let fields = |name: &str| entry_strings(&entry.raw, name);
        let target = match entry.kind {
            EntryKind::Stdio { command, args } => ServerSpec::Command {
                argv: std::iter::once(command)
                    .chain(args)
                    .map(|a| expand_env(&a))
                    .collect(),
                env: fields("env"),
            },
            EntryKind::Wrapped(w) => match w.remote {
                Some(r) => targets::remote(&r.url, &r.transport, Vec::new())?,
                None => ServerSpec::Command {
                    argv: std::iter::once(w.command)
                        .chain(w.args)
                        .map(|a| expand_env(&a))
                        .collect(),
                    env: fields("env"),
                },
            },
            EntryKind::Remote { url, transport } => {
                targets::remote(&url, &transport, fields("headers"))?
            }
            EntryKind::Other(why) => {
                log::info!("--config: {} is left out ({why})", entry.name);
                continue;
            }
        };
        out.push((entry.name, target));
    }
    Ok(out)
}

/// The string members of the object `name` in an entry's text (`env`,
/// `headers`), with `${VAR}` expanded from this process's environment by
/// the rule `bir doctor` starts entries with ([`expand_env`]).
fn entry_strings(raw: &str, name: &str) -> Vec<(String, String)> {
    let Ok(doc) = Doc::parse(raw.as_bytes(), Flavor::Jsonc) else {
        return Vec::new();
    };
    let Some(object) = doc.root.get(name) else {
        return Vec::new();
    };
    object
        .members()
        .iter()
        .filter_map(|m| Some((m.key.clone(), expand_env(m.value.as_str()?))))
        .collect()
}

/// The original stdio entry of `server` from `$BIR_HOME/installed.json`.
pub(crate) fn ledger_command(server: &str) -> Option<Vec<String>> {
    super::ledger::read(&crate::home::bir_home()?)?.original_command(server)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config entry's `env` expands `${VAR}` by the rule `bir doctor`
    /// uses (`clientconfig::vars`): a set variable is its value, a default
    /// fills an unset one, and an unset variable without one stays as
    /// written, so `bir replay --config` and `bir doctor` start the same
    /// entry with the same environment.
    #[test]
    fn config_values_expand_variables_as_doctor_does() {
        // PATH is set wherever tests run (setting a variable here would
        // race other tests reading the environment).
        let path = std::env::var("PATH").unwrap_or_default();
        assert!(!path.is_empty());
        let raw = r#"{"command": "srv", "env": {
            "A": "a ${PATH} b",
            "B": "${BIR_REPLAY_UNSET_VAR:-dflt}/x",
            "C": "${BIR_REPLAY_UNSET_VAR}",
            "D": "open ${brace",
            "E": "plain"
        }}"#;
        let env = entry_strings(raw, "env");
        let get = |k: &str| {
            env.iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("A"), Some(format!("a {path} b")));
        assert_eq!(get("B").as_deref(), Some("dflt/x"));
        assert_eq!(get("C").as_deref(), Some("${BIR_REPLAY_UNSET_VAR}"));
        assert_eq!(get("D").as_deref(), Some("open ${brace"));
        assert_eq!(get("E").as_deref(), Some("plain"));
    }
}
