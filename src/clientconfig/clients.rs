//! Clients other than Claude Code: one config file each (or one per scope),
//! a server map under a known key, every stdio server (and remote server,
//! see [`super::remote_entry`]) wrapped in place.
//!
//! | client | file(s) | map key | flavor |
//! |---|---|---|---|
//! | `cursor` | `~/.cursor/mcp.json`, `<project>/.cursor/mcp.json` | `mcpServers` | JSON |
//! | `vscode` | `<project>/.vscode/mcp.json`, the user profile's `mcp.json` | `servers` | JSONC |
//! | `windsurf` | `~/.codeium/windsurf/mcp_config.json` | `mcpServers` | JSON |
//! | `gemini` | `~/.gemini/settings.json`, `<project>/.gemini/settings.json` | `mcpServers` | JSON |
//! | `claude-desktop` | `~/Library/Application Support/Claude/claude_desktop_config.json` (macOS), `~/.config/Claude/claude_desktop_config.json` (Linux) | `mcpServers` | JSON |
//! | `zed` | `~/.config/zed/settings.json`, `<project>/.zed/settings.json` | `context_servers` | JSONC |
//!
//! | `codex` | `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`), `<project>/.codex/config.toml` | `[mcp_servers.<name>]` | TOML ([`super::codex`]) |

use std::path::{Path, PathBuf};

use super::atomic;
use super::entry::{EntryKind, classify};
use super::jsonedit::{Doc, Flavor};
use super::vocab::{Client, Decision, Found, Scope};
use crate::error::Error;
use crate::output::out;

/// One config file of one client.
#[derive(Debug, Clone)]
pub(crate) struct ClientFile {
    pub client: String,
    pub label: String,
    pub file: PathBuf,
    pub map_key: String,
    pub flavor: Flavor,
    pub scope: Scope,
    /// A Codex TOML file (`[mcp_servers.<name>]`), not JSON.
    pub toml: bool,
}

/// What `bir install` works on.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    ClaudeCode,
    File(ClientFile),
}

fn file(
    client: &str,
    label: &str,
    file: PathBuf,
    map_key: &str,
    flavor: Flavor,
    scope: Scope,
) -> ClientFile {
    ClientFile {
        client: client.into(),
        label: label.into(),
        file,
        map_key: map_key.into(),
        flavor,
        scope,
        toml: false,
    }
}

/// Every file bir knows for `client`, whether it exists or not.
pub(crate) fn files_of(which: Client, home: &Path, project: &Path) -> Vec<ClientFile> {
    let client = which.name();
    let mac = cfg!(target_os = "macos");
    let config = if mac {
        home.join("Library/Application Support")
    } else {
        std::env::var_os("XDG_CONFIG_HOME")
            .filter(|d| !d.is_empty())
            .map_or_else(|| home.join(".config"), PathBuf::from)
    };
    let (json, jsonc) = (Flavor::Json, Flavor::Jsonc);
    match which {
        Client::Cursor => vec![
            file(
                client,
                "Cursor (user)",
                home.join(".cursor/mcp.json"),
                "mcpServers",
                json,
                Scope::User,
            ),
            file(
                client,
                "Cursor (project)",
                project.join(".cursor/mcp.json"),
                "mcpServers",
                json,
                Scope::Project,
            ),
        ],
        Client::Vscode => vec![
            file(
                client,
                "VS Code (workspace)",
                project.join(".vscode/mcp.json"),
                "servers",
                jsonc,
                Scope::Project,
            ),
            file(
                client,
                "VS Code (user)",
                config.join("Code/User/mcp.json"),
                "servers",
                jsonc,
                Scope::User,
            ),
        ],
        Client::Windsurf => vec![file(
            client,
            "Windsurf",
            home.join(".codeium/windsurf/mcp_config.json"),
            "mcpServers",
            json,
            Scope::User,
        )],
        Client::Gemini => vec![
            file(
                client,
                "Gemini CLI (user)",
                home.join(".gemini/settings.json"),
                "mcpServers",
                json,
                Scope::User,
            ),
            file(
                client,
                "Gemini CLI (project)",
                project.join(".gemini/settings.json"),
                "mcpServers",
                json,
                Scope::Project,
            ),
        ],
        Client::ClaudeDesktop => vec![file(
            client,
            "Claude Desktop",
            config.join("Claude/claude_desktop_config.json"),
            "mcpServers",
            json,
            Scope::User,
        )],
        Client::Zed => vec![
            file(
                client,
                "Zed (user)",
                config.join("zed/settings.json"),
                "context_servers",
                jsonc,
                Scope::User,
            ),
            file(
                client,
                "Zed (project)",
                project.join(".zed/settings.json"),
                "context_servers",
                jsonc,
                Scope::Project,
            ),
        ],
        Client::Codex => {
            let codex_home = std::env::var_os("CODEX_HOME")
                .filter(|d| !d.is_empty())
                .map_or_else(|| home.join(".codex"), PathBuf::from);
            let mut user = file(
                client,
                "Codex (user)",
                codex_home.join("config.toml"),
                "mcp_servers",
                json,
                Scope::User,
            );
            let mut proj = file(
                client,
                "Codex (project)",
                project.join(".codex/config.toml"),
                "mcp_servers",
                json,
                Scope::Project,
            );
            user.toml = true;
            proj.toml = true;
            vec![user, proj]
        }
        // Claude Code has no single file: its adapter is `claude`.
        Client::ClaudeCode => Vec::new(),
    }
}

/// The targets of one `bir install`: `--config` alone; `--client` alone;
/// or, with neither, Claude Code plus every other client whose config file
/// exists.
pub(crate) fn targets(
    client: Option<&str>,
    config: Option<&Path>,
    map_key: &str,
    jsonc: bool,
    project: &Path,
) -> Result<Vec<Target>, Error> {
    if let Some(c) = config {
        let path =
            std::path::absolute(c).map_err(|e| Error::failure(format!("{}: {e}", c.display())))?;
        let toml = path.extension().is_some_and(|e| e == "toml");
        let map_key = if toml { "mcp_servers" } else { map_key };
        let mut cf = file(
            "config",
            &format!("{} ({map_key})", path.display()),
            path,
            map_key,
            if jsonc { Flavor::Jsonc } else { Flavor::Json },
            Scope::User,
        );
        cf.toml = toml;
        return Ok(vec![Target::File(cf)]);
    }
    let home = home::home_dir().ok_or("cannot find the home directory (HOME is not set)")?;
    let project = std::path::absolute(project)
        .map_err(|e| Error::failure(format!("{}: {e}", project.display())))?;
    match client {
        Some(c) if Client::ClaudeCode.is(c) => Ok(vec![Target::ClaudeCode]),
        Some(c) if let Some(which) = Client::named(c) => {
            let existing: Vec<Target> = files_of(which, &home, &project)
                .into_iter()
                .filter(|f| f.file.exists())
                .map(Target::File)
                .collect();
            if existing.is_empty() {
                let looked: Vec<String> = files_of(which, &home, &project)
                    .iter()
                    .map(|f| f.file.display().to_string())
                    .collect();
                return Err(Error::failure(format!(
                    "no {c} config found (looked at {})",
                    looked.join(", ")
                )));
            }
            Ok(existing)
        }
        Some(c) => Err(Error::usage(format!(
            "no adapter for client \"{c}\" (known: {}); for any file with an mcpServers-style map use `bir install --config FILE [--map-key KEY]`",
            Client::ALL.map(Client::name).join(", ")
        ))),
        None => {
            let mut out = vec![Target::ClaudeCode];
            for which in &Client::ALL[1..] {
                out.extend(
                    files_of(*which, &home, &project)
                        .into_iter()
                        .filter(|f| f.file.exists())
                        .map(Target::File),
                );
            }
            Ok(out)
        }
    }
}

/// The entries of a client file and what install does with each; `forced`
/// names the servers `--server` named (a remote server the client signs in
/// itself is wrapped only then).
pub(crate) fn entries(cf: &ClientFile, forced: &[String]) -> Result<Vec<(Found, Decision)>, Error> {
    let Some(bytes) = atomic::read(&cf.file)? else {
        return Ok(Vec::new());
    };
    if cf.toml {
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::failure(format!("{} is not UTF-8", cf.file.display())))?;
        let servers = super::codex::servers(&text).map_err(|e| {
            format!(
                "{}:{e}; bir does not edit a file it cannot parse",
                cf.file.display()
            )
        })?;
        return Ok(servers
            .into_iter()
            .map(|(name, json, kind)| {
                let decision =
                    decision_for(&kind, &json, Client::Codex.name(), forced.contains(&name));
                (
                    Found {
                        name: name.clone(),
                        scope: cf.scope,
                        path: vec![cf.map_key.clone(), name],
                        raw: json,
                        kind,
                    },
                    decision,
                )
            })
            .collect());
    }
    let doc = Doc::parse(&bytes, cf.flavor).map_err(|e| {
        let hint = if cf.flavor == Flavor::Json && e.message.contains("comments") {
            " (if this client accepts comments, pass --jsonc)"
        } else {
            ""
        };
        format!(
            "{}:{e}{hint}; bir does not edit a file it cannot parse",
            cf.file.display()
        )
    })?;
    let Some(map) = doc.root.get(&cf.map_key) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for m in map.members() {
        let kind = classify(&m.value);
        let decision = decision_for(
            &kind,
            doc.raw(&m.value),
            &cf.client,
            forced.contains(&m.key),
        );
        out.push((
            Found {
                name: m.key.clone(),
                scope: cf.scope,
                path: vec![cf.map_key.clone(), m.key.clone()],
                raw: doc.raw(&m.value).to_owned(),
                kind,
            },
            decision,
        ));
    }
    Ok(out)
}

fn decision_for(kind: &EntryKind, raw: &str, client: &str, forced: bool) -> Decision {
    match kind {
        EntryKind::Stdio { .. } => Decision::InPlace,
        EntryKind::Wrapped(_) => Decision::Already,
        EntryKind::Remote { .. } => {
            let assessed = Doc::parse(raw.as_bytes(), Flavor::Jsonc)
                .map_err(|e| Error::failure(format!("cannot read the entry ({e})")))
                .and_then(|d| super::remote_entry::assess(&d.root, client, forced));
            match assessed {
                Ok(_) => Decision::InPlace,
                Err(why) => Decision::Skip(format!("remote server: {why}")),
            }
        }
        EntryKind::Other(why) => Decision::Skip(format!("not a stdio server bir can wrap ({why})")),
    }
}

pub(crate) fn summary(cf: &ClientFile, plan: &[(Found, Decision)], applied: bool) {
    out(&format!("{} — {}", cf.label, cf.file.display()));
    if plan.is_empty() {
        out("  no MCP servers in it");
    }
    let width = plan
        .iter()
        .map(|(f, _)| f.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    for (f, d) in plan {
        let (state, why) = match d {
            Decision::InPlace | Decision::Copy => (
                if applied { "wrapped" } else { "wrap" },
                if cf.scope == Scope::Project {
                    "wrapped in place (a project file: it may be shared in your repository)"
                        .to_owned()
                } else {
                    "wrapped in place".to_owned()
                },
            ),
            Decision::Already => ("ok", "already wrapped".to_owned()),
            Decision::Skip(why) => ("skipped", why.clone()),
        };
        let why = match (&f.kind, d) {
            (EntryKind::Remote { .. }, Decision::InPlace | Decision::Copy) => {
                why + &super::remote_entry::summary_notes(&f.raw, &cf.client)
            }
            _ => why,
        };
        out(&format!("  {state:<8} {:<width$}  {why}", f.name));
    }
}
