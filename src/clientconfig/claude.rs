//! The Claude Code adapter: where its MCP servers come from, which entry
//! wins, which ones it has approved, and what managed policy allows.
//!
//! Scopes, in Claude Code's precedence (the whole entry of the winning
//! scope is used, matched by name):
//!
//! 1. local — `~/.claude.json` → `projects["<project key>"].mcpServers`
//! 2. project — `<project>/.mcp.json` → `mcpServers`
//! 3. user — `~/.claude.json` → `mcpServers`
//!
//! `CLAUDE_CONFIG_DIR` moves both `~/.claude` and the file
//! (`$CLAUDE_CONFIG_DIR/.claude.json`). Project keys are absolute paths
//! with forward slashes on every OS ([`project_key`]).

use std::path::{Path, PathBuf};

use super::atomic;
use super::entry::{EntryKind, classify};
use super::jsonedit::{Doc, Flavor, Node};
use super::vocab::{Client, Decision, Found, Scope};
use crate::error::Error;

/// Names Claude Code reserves (and skips).
pub(crate) const RESERVED: &[&str] = &[
    "workspace",
    "claude-in-chrome",
    "computer-use",
    "Claude Preview",
    "Claude Browser",
];

/// Where Claude Code keeps things, for one project.
#[derive(Debug, Clone)]
pub(crate) struct Paths {
    pub claude_json: PathBuf,
    pub settings_dir: PathBuf,
    pub managed_dir: PathBuf,
    pub project: PathBuf,
    pub key: String,
}

impl Paths {
    /// From the environment: `CLAUDE_CONFIG_DIR`, `HOME`, and
    /// `BIR_CLAUDE_MANAGED_DIR` (the managed-policy directory; default
    /// `/etc/claude-code`, or `/Library/Application Support/ClaudeCode` on
    /// macOS).
    pub(crate) fn from_env(project: &Path) -> Result<Paths, Error> {
        let home = home::home_dir().ok_or("cannot find the home directory (HOME is not set)")?;
        let (claude_json, settings_dir) = match std::env::var_os("CLAUDE_CONFIG_DIR") {
            Some(d) if !d.is_empty() => {
                let d = PathBuf::from(d);
                (d.join(".claude.json"), d)
            }
            _ => (home.join(".claude.json"), home.join(".claude")),
        };
        let managed_dir = match std::env::var_os("BIR_CLAUDE_MANAGED_DIR") {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ if cfg!(target_os = "macos") => {
                PathBuf::from("/Library/Application Support/ClaudeCode")
            }
            _ => PathBuf::from("/etc/claude-code"),
        };
        let project = std::path::absolute(project)
            .map_err(|e| Error::failure(format!("cannot resolve {}: {e}", project.display())))?;
        let key = project_key(&project.to_string_lossy());
        Ok(Paths {
            claude_json,
            settings_dir,
            managed_dir,
            project,
            key,
        })
    }

    pub(crate) fn mcp_json(&self) -> PathBuf {
        self.project.join(".mcp.json")
    }
}

/// The key Claude Code uses for a project directory in
/// `~/.claude.json` → `projects`: the absolute path with forward slashes
/// (Windows backslashes become `/`), no trailing slash (except a root).
/// The drive letter's case is kept: it follows the launch directory.
pub(crate) fn project_key(path: &str) -> String {
    let mut key = path.replace('\\', "/");
    // `//?/C:/x` (verbatim) → `C:/x`.
    if let Some(rest) = key.strip_prefix("//?/")
        && rest.as_bytes().get(1) == Some(&b':')
    {
        key = rest.to_owned();
    }
    while key.len() > 1 && key.ends_with('/') && !(key.len() == 3 && key.as_bytes()[1] == b':') {
        key.pop();
    }
    key
}

/// The keys to probe when reading: the key itself and, for a Windows path,
/// the other drive-letter case (`c:/…` and `C:/…` can both exist).
pub(crate) fn key_candidates(key: &str) -> Vec<String> {
    let mut out = vec![key.to_owned()];
    let b = key.as_bytes();
    if b.len() >= 2 && b[1] == b':' && b[0].is_ascii_alphabetic() {
        let flipped = if b[0].is_ascii_uppercase() {
            b[0].to_ascii_lowercase()
        } else {
            b[0].to_ascii_uppercase()
        };
        out.push(format!("{}{}", flipped as char, &key[1..]));
    }
    out
}

/// `.mcp.json` approvals, from every settings file that counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Approvals {
    pub enabled: Vec<String>,
    pub disabled: Vec<String>,
    pub enable_all: bool,
    /// Approved only in the project's own settings files, which Claude
    /// Code ignores until the folder is trusted.
    pub untrusted: Vec<String>,
}

/// What managed (and user/project) policy says about MCP servers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    /// `managed-mcp.json` exists: only its servers load.
    pub managed_mcp: Option<PathBuf>,
    /// `serverCommand` allowlist entries exist somewhere.
    pub allow_by_command: Option<PathBuf>,
    /// `serverUrl` allowlist entries exist somewhere.
    pub allow_by_url: Option<PathBuf>,
    /// `serverUrl` denylist entries exist somewhere.
    pub deny_by_url: Option<PathBuf>,
    pub deny_names: Vec<String>,
    pub deny_commands: Vec<Vec<String>>,
    /// An allowlist of names (empty list: nothing allowed); None: unset.
    pub allow_names: Option<Vec<String>>,
}

/// Everything Claude Code would see for this project.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub paths: Paths,
    /// The key under `projects` holding this project (probed), or the exact
    /// key to create.
    pub local_key: String,
    /// The winning entry per name, in name order.
    pub winners: Vec<Found>,
    /// Entries hidden by a higher scope.
    pub shadowed: Vec<Found>,
    pub approvals: Approvals,
    pub policy: Policy,
}

fn parse_file(path: &Path) -> Result<Option<Doc>, Error> {
    match atomic::read(path)? {
        None => Ok(None),
        Some(bytes) => Doc::parse(&bytes, Flavor::Json).map(Some).map_err(|e| {
            // Claude Code's backups are of `.claude.json` alone; for any
            // other file (`.mcp.json`, settings) the hint would mislead.
            let backups = if path.file_name().is_some_and(|n| n == ".claude.json") {
                " (Claude Code keeps backups in ~/.claude/backups)"
            } else {
                ""
            };
            format!(
                "{}:{e}; bir does not edit a file it cannot parse{backups}",
                path.display()
            )
            .into()
        }),
    }
}

fn strings(node: Option<&Node>) -> Vec<String> {
    node.map(|n| {
        n.items()
            .iter()
            .filter_map(|i| i.as_str().map(str::to_owned))
            .collect()
    })
    .unwrap_or_default()
}

fn collect(doc: &Doc, scope: Scope, path: &[&str], out: &mut Vec<Found>) {
    let Some(map) = doc.root.at(path) else {
        return;
    };
    for m in map.members() {
        let mut p: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        p.push(m.key.clone());
        out.push(Found {
            name: m.key.clone(),
            scope,
            path: p,
            raw: doc.raw(&m.value).to_owned(),
            kind: classify(&m.value),
        });
    }
}

/// Reads every scope, the approvals and the policy.
pub(crate) fn resolve(paths: &Paths) -> Result<Resolved, Error> {
    let claude = parse_file(&paths.claude_json)?;
    let mcp_json = parse_file(&paths.mcp_json())?;
    let mut local_key = paths.key.clone();
    let mut all = Vec::new();
    let mut approvals = Approvals::default();
    if let Some(doc) = &claude {
        if let Some(projects) = doc.root.get("projects") {
            for k in key_candidates(&paths.key) {
                if projects.get(&k).is_some() {
                    local_key = k;
                    break;
                }
            }
        }
        collect(
            doc,
            Scope::Local,
            &["projects", &local_key, "mcpServers"],
            &mut all,
        );
        collect(doc, Scope::User, &["mcpServers"], &mut all);
        if let Some(p) = doc.root.at(&["projects", &local_key]) {
            read_approvals(p, &mut approvals);
        }
    }
    if let Some(doc) = &mcp_json {
        collect(doc, Scope::Project, &["mcpServers"], &mut all);
    }
    let mut policy = Policy::default();
    let mut settings = vec![
        paths.settings_dir.join("settings.json"),
        paths.project.join(".claude/settings.json"),
        paths.project.join(".claude/settings.local.json"),
    ];
    settings.extend(managed_settings_files(paths));
    // Workspace trust is keyed on the git root (or the project itself).
    let trust_root = paths
        .project
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(&paths.project);
    let trusted = claude.as_ref().is_some_and(|doc| {
        key_candidates(&project_key(&trust_root.to_string_lossy()))
            .iter()
            .chain(key_candidates(&paths.key).iter())
            .any(|k| {
                doc.root
                    .at(&["projects", k, "hasTrustDialogAccepted"])
                    .is_some_and(Node::is_true)
            })
    });
    for (i, file) in settings.iter().enumerate() {
        // A settings file Claude Code cannot parse is skipped by it too.
        if let Ok(Some(doc)) = parse_file(file) {
            let project_file = i == 1 || i == 2;
            if project_file && !trusted {
                let mut ignored = Approvals::default();
                read_approvals(&doc.root, &mut ignored);
                approvals.untrusted.extend(ignored.enabled);
                // A rejection is honoured all the same (never wrap it).
                approvals.disabled.extend(ignored.disabled);
                if ignored.enable_all {
                    approvals.untrusted.push("*".into());
                }
            } else {
                read_approvals(&doc.root, &mut approvals);
            }
            read_policy(&doc.root, file, &mut policy);
        }
    }
    let managed_mcp = paths.managed_dir.join("managed-mcp.json");
    if managed_mcp.exists() {
        policy.managed_mcp = Some(managed_mcp);
    }
    all.sort_by(|a, b| a.name.cmp(&b.name).then(a.scope.cmp(&b.scope)));
    let mut winners: Vec<Found> = Vec::new();
    let mut shadowed = Vec::new();
    for f in all {
        if winners.last().is_some_and(|w| w.name == f.name) {
            shadowed.push(f);
        } else {
            winners.push(f);
        }
    }
    Ok(Resolved {
        paths: paths.clone(),
        local_key,
        winners,
        shadowed,
        approvals,
        policy,
    })
}

/// The managed (policy) settings files: `managed-settings.json`, then the
/// `managed-settings.d/*.json` drop-ins in name order.
pub(crate) fn managed_settings_files(paths: &Paths) -> Vec<PathBuf> {
    let mut files = vec![paths.managed_dir.join("managed-settings.json")];
    if let Ok(dir) = std::fs::read_dir(paths.managed_dir.join("managed-settings.d")) {
        let mut extra: Vec<PathBuf> = dir
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        extra.sort();
        files.extend(extra);
    }
    files
}

fn read_approvals(node: &Node, a: &mut Approvals) {
    a.enabled.extend(strings(node.get("enabledMcpjsonServers")));
    a.disabled
        .extend(strings(node.get("disabledMcpjsonServers")));
    a.enable_all |= node
        .get("enableAllProjectMcpServers")
        .is_some_and(Node::is_true);
}

fn read_policy(root: &Node, file: &Path, p: &mut Policy) {
    if let Some(allow) = root.get("allowedMcpServers") {
        let mut names = Vec::new();
        for item in allow.items() {
            if item.get("serverCommand").is_some() {
                p.allow_by_command.get_or_insert_with(|| file.to_owned());
            }
            if item.get("serverUrl").is_some() {
                p.allow_by_url.get_or_insert_with(|| file.to_owned());
            }
            if let Some(n) = item.get("serverName").and_then(Node::as_str) {
                names.push(n.to_owned());
            }
        }
        p.allow_names.get_or_insert_with(Vec::new).extend(names);
    }
    if let Some(deny) = root.get("deniedMcpServers") {
        for item in deny.items() {
            if let Some(n) = item.get("serverName").and_then(Node::as_str) {
                p.deny_names.push(n.to_owned());
            }
            if let Some(c) = item.get("serverCommand") {
                p.deny_commands.push(strings(Some(c)));
            }
            if item.get("serverUrl").is_some() {
                p.deny_by_url.get_or_insert_with(|| file.to_owned());
            }
        }
    }
}

/// Decides, per winning server, what `bir install` does. `only` restricts
/// to these names (and forces servers not yet approved).
pub(crate) fn decide(r: &Resolved, only: &[String]) -> Vec<(Found, Decision)> {
    let mut out = Vec::new();
    for f in &r.winners {
        if !only.is_empty() && !only.contains(&f.name) {
            continue;
        }
        let forced = only.contains(&f.name);
        let d = decide_one(r, f, forced);
        out.push((f.clone(), d));
    }
    out
}

/// [`decide_one`] for a remote entry: the policy, the approvals, then
/// whether the client signs in itself ([`super::remote_entry::assess`]).
fn decide_remote(r: &Resolved, f: &Found, forced: bool) -> Decision {
    if r.policy.deny_names.contains(&f.name) {
        return Decision::Skip("denied by policy (deniedMcpServers, by name); not wrapped".into());
    }
    if let Some(file) = &r.policy.deny_by_url {
        return Decision::Skip(format!(
            "policy in {} denies MCP servers by URL (deniedMcpServers.serverUrl); a wrapped entry is matched by command, so wrapping could evade the rule: not wrapped",
            file.display()
        ));
    }
    if let Some(file) = r
        .policy
        .allow_by_url
        .as_ref()
        .or(r.policy.allow_by_command.as_ref())
    {
        return Decision::Skip(format!(
            "policy in {} allows MCP servers by URL or command (allowedMcpServers); a wrapped entry would no longer match it, so it is not wrapped",
            file.display()
        ));
    }
    if let Some(names) = &r.policy.allow_names
        && !names.contains(&f.name)
    {
        return Decision::Skip(
            "not in the policy's allowedMcpServers; Claude Code does not load it".into(),
        );
    }
    // A rejection first (never wrapped); then why the client signs in
    // itself, the more lasting reason; then a pending approval.
    let approval = project_approval(r, f, forced);
    if f.scope == Scope::Project
        && r.approvals.disabled.contains(&f.name)
        && let Some(d) = approval
    {
        return d;
    }
    let doc = match Doc::parse(f.raw.as_bytes(), Flavor::Jsonc) {
        Ok(d) => d,
        Err(e) => return Decision::Skip(format!("cannot read the entry ({e})")),
    };
    if let Err(why) = super::remote_entry::assess(&doc.root, Client::ClaudeCode.name(), forced) {
        return Decision::Skip(format!("remote server: {why}"));
    }
    if let Some(d) = approval {
        return d;
    }
    if f.scope == Scope::Local {
        Decision::InPlace
    } else {
        Decision::Copy
    }
}

/// For a `.mcp.json` server: a skip when Claude Code has rejected it or
/// not approved it (unless forced).
fn project_approval(r: &Resolved, f: &Found, forced: bool) -> Option<Decision> {
    if f.scope != Scope::Project {
        return None;
    }
    if r.approvals.disabled.contains(&f.name) {
        return Some(Decision::Skip(
            "rejected in Claude Code (disabledMcpjsonServers); never wrapped — approve it in Claude Code first".into(),
        ));
    }
    let approved = r.approvals.enable_all || r.approvals.enabled.contains(&f.name);
    let untrusted = r
        .approvals
        .untrusted
        .iter()
        .any(|n| n == "*" || *n == f.name);
    if !approved && !forced && untrusted {
        return Some(Decision::Skip(format!(
            "approved only in this project's .claude settings, which Claude Code ignores until the folder is trusted (accept the trust dialog), or run `bir install --server {}`",
            f.name
        )));
    }
    if !approved && !forced {
        return Some(Decision::Skip(format!(
            "not approved in Claude Code yet; approve it there, or run `bir install --server {}` to wrap it anyway",
            f.name
        )));
    }
    None
}

fn decide_one(r: &Resolved, f: &Found, forced: bool) -> Decision {
    if let Some(m) = &r.policy.managed_mcp {
        return Decision::Skip(format!(
            "managed policy {} controls MCP servers exclusively; bir wraps nothing on this machine",
            m.display()
        ));
    }
    if RESERVED.contains(&f.name.as_str()) {
        return Decision::Skip("a reserved name; Claude Code skips this server".into());
    }
    match &f.kind {
        EntryKind::Wrapped(_) => return Decision::Already,
        EntryKind::Remote { .. } => return decide_remote(r, f, forced),
        EntryKind::Other(why) => {
            return Decision::Skip(format!("not a stdio server bir can wrap ({why})"));
        }
        EntryKind::Stdio { .. } => {}
    }
    let EntryKind::Stdio { command, args } = &f.kind else {
        return Decision::Skip("internal".into());
    };
    if r.policy.deny_names.contains(&f.name) {
        return Decision::Skip("denied by policy (deniedMcpServers, by name); not wrapped".into());
    }
    let mut full = vec![command.clone()];
    full.extend(args.iter().cloned());
    if r.policy.deny_commands.contains(&full) {
        return Decision::Skip(
            "denied by policy (deniedMcpServers, by command); wrapping would evade the rule, so it is not wrapped".into(),
        );
    }
    if let Some(file) = &r.policy.allow_by_command {
        return Decision::Skip(format!(
            "policy in {} allows MCP servers by exact command (allowedMcpServers.serverCommand); a wrapped command would be blocked, so it is not wrapped",
            file.display()
        ));
    }
    if let Some(names) = &r.policy.allow_names
        && !names.contains(&f.name)
    {
        return Decision::Skip(
            "not in the policy's allowedMcpServers; Claude Code does not load it".into(),
        );
    }
    if let Some(d) = project_approval(r, f, forced) {
        return d;
    }
    if f.scope == Scope::Local {
        Decision::InPlace
    } else {
        Decision::Copy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_keys_follow_claude_codes_rules() {
        assert_eq!(project_key("/home/me/app"), "/home/me/app");
        assert_eq!(project_key("/home/me/app/"), "/home/me/app");
        assert_eq!(project_key("/"), "/");
        assert_eq!(project_key(r"C:\Users\me\app"), "C:/Users/me/app");
        assert_eq!(project_key(r"c:\Users\me\app\"), "c:/Users/me/app");
        assert_eq!(project_key(r"C:\"), "C:/");
        assert_eq!(project_key(r"\\?\C:\Users\me"), "C:/Users/me");
        assert_eq!(project_key(r"\\server\share\app"), "//server/share/app");
        assert_eq!(key_candidates("C:/a"), vec!["C:/a", "c:/a"]);
        assert_eq!(key_candidates("c:/a"), vec!["c:/a", "C:/a"]);
        assert_eq!(key_candidates("/a"), vec!["/a"]);
    }
}
