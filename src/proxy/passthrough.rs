//! Whether a proxy records at all, decided once at its start, and the
//! cheapest way not to: replacing itself with its server.
//!
//! A proxy does not record when
//! * `BIR_OFF=1` is in its environment, or a `bir off` switch holds for
//!   its directory ([`crate::switch`]); or
//! * it is **passthrough**: its entry is a user-scope entry (one config
//!   file that the client starts in every project) and the project it was
//!   started in was never set up for recording. Precisely: the install
//!   ledger's changes for this server name are all in-place wraps of a
//!   user-scope entry of a client that also has project configs (Claude
//!   Code, Cursor, VS Code, Gemini CLI, Zed, Codex), and no ledger change
//!   names this directory or one above it as its project (`bir install`
//!   notes the project it ran in on every change). Entries of clients with
//!   only a user config (Windsurf, Claude Desktop), `--config` and `bir
//!   wrap` entries, and project or local entries always record: someone
//!   asked for them where they run. So a user who wraps a user-wide server
//!   while in project A gets runs in A (and in any project where `bir
//!   install` also ran) and nothing recorded elsewhere.
//!
//! A stdio proxy that does not record `exec`s its server with the same
//! arguments and environment: the server takes the proxy's place (same
//! pid, same pipes), so it costs nothing. A remote upstream (`--url`)
//! cannot be replaced: that proxy relays and records nothing.

use std::os::unix::process::CommandExt;
use std::path::Path;

use super::config::ProxyConfig;
use crate::clientconfig::ledger::{self, ACTION_IN_PLACE, Change};

/// Clients that start a user-scope entry in every project, and also have
/// project configs where recording can be asked for per project.
const PROJECT_AWARE_CLIENTS: &[&str] =
    &["claude-code", "cursor", "vscode", "gemini", "zed", "codex"];

/// How a proxy starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    Record,
    /// `bir off` files: off now, may be switched on later.
    SwitchedOff,
    /// `BIR_OFF=1` or passthrough: never records in this process.
    NeverRecord,
}

/// Decides at start (reads the environment, two or three switch files and,
/// if there is one, the install ledger).
pub(crate) fn at_start(cfg: &ProxyConfig) -> Start {
    if crate::switch::env_off() {
        return Start::NeverRecord;
    }
    let Some(home) = crate::home::bir_home() else {
        return Start::Record;
    };
    let Ok(cwd) = std::env::current_dir() else {
        return Start::Record;
    };
    if crate::switch::files_off(&home, &cwd) {
        return Start::SwitchedOff;
    }
    match ledger::read(&home) {
        Some(ledger) if is_passthrough(&ledger.changes, &cfg.server_name, &cwd) => {
            log::debug!("a user-scope entry in a project never set up for recording: passthrough");
            Start::NeverRecord
        }
        _ => Start::Record,
    }
}

/// The passthrough rule (see the module docs), on the ledger's changes.
pub(crate) fn is_passthrough(changes: &[Change], server: &str, cwd: &Path) -> bool {
    let mut mine = changes.iter().filter(|c| c.server == server).peekable();
    if mine.peek().is_none() {
        return false;
    }
    let user_wide = mine.all(|c| {
        c.action == ACTION_IN_PLACE
            && c.source_scope == "user"
            && PROJECT_AWARE_CLIENTS.contains(&c.client.as_str())
    });
    if !user_wide {
        return false;
    }
    let set_up = cwd.ancestors().any(|dir| {
        let key = dir.to_string_lossy();
        changes
            .iter()
            .filter_map(|c| c.project.as_deref())
            .any(|p| p.trim_end_matches('/') == key.trim_end_matches('/'))
    });
    !set_up
}

/// Replaces this process with the server (stdio only). Returns only if
/// that failed; the proxy then runs as usual, recording nothing.
pub(crate) fn exec_server(cfg: &ProxyConfig) -> std::io::Error {
    std::process::Command::new(&cfg.program)
        .args(&cfg.args)
        .exec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(client: &str, server: &str, scope: &str, action: &str, project: &str) -> Change {
        Change {
            client: client.into(),
            file: "/home/u/.config/mcp.json".into(),
            path: vec!["mcpServers".into(), server.into()],
            action: action.into(),
            server: server.into(),
            project: Some(project.into()),
            source_scope: scope.into(),
            keep_parents: 0,
            original_command: None,
            original_args: None,
            args_absent: false,
            args_withheld: false,
            original: None,
            original_text: None,
            entry_sha256: String::new(),
            file_sha256: String::new(),
            at: String::new(),
        }
    }

    #[test]
    fn a_user_wide_entry_records_only_where_bir_install_ran() {
        let changes = [change("cursor", "gh", "user", ACTION_IN_PLACE, "/work/a")];
        assert!(!is_passthrough(&changes, "gh", Path::new("/work/a")));
        assert!(!is_passthrough(&changes, "gh", Path::new("/work/a/sub")));
        assert!(is_passthrough(&changes, "gh", Path::new("/work/b")));
        // Another install elsewhere sets that project up too.
        let more = [
            changes[0].clone(),
            change("cursor", "other", "project", ACTION_IN_PLACE, "/work/b"),
        ];
        assert!(!is_passthrough(&more, "gh", Path::new("/work/b")));
    }

    #[test]
    fn entries_someone_asked_for_where_they_run_always_record() {
        let cases = [
            change("cursor", "gh", "project", ACTION_IN_PLACE, "/work/a"),
            change("claude-code", "gh", "user", "inserted", "/work/a"),
            change("windsurf", "gh", "user", ACTION_IN_PLACE, "/work/a"),
            change("config", "gh", "user", ACTION_IN_PLACE, "/work/a"),
            change("manual", "gh", "manual", ACTION_IN_PLACE, "/work/a"),
        ];
        for c in cases {
            assert!(
                !is_passthrough(std::slice::from_ref(&c), "gh", Path::new("/work/b")),
                "{c:?}"
            );
        }
        // A server bir never wrapped (run by hand) records.
        let user = [change("cursor", "gh", "user", ACTION_IN_PLACE, "/work/a")];
        assert!(!is_passthrough(&user, "other", Path::new("/work/b")));
    }
}
