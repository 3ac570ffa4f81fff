//! Where sessions are recorded. The hooks bir registers are user-wide
//! (Claude Code's `~/.claude/settings.json`, other agents' user hook
//! files), so they fire in every project; a session is recorded only
//! where bir is installed:
//!
//! * in a project `bir install` ran for (the project keys the ledger,
//!   `$BIR_HOME/installed.json`, lists for its server entries, hooks and
//!   plugin), the session's directory being that project or below it;
//! * everywhere, when the user chose it (`bir install --everywhere`: the
//!   ledger's `everywhere`, with the date of the choice);
//! * everywhere, when there is no ledger at all: the hooks were registered
//!   by hand, not by `bir install`, so there is no list to go by (a ledger
//!   bir cannot read counts the same: recording is not dropped silently
//!   over a damaged file, and `bir status` says it is damaged).
//!
//! Elsewhere the hook gets the passthrough answer at once and nothing is
//! stored. The daemon decides once per session, at its first event, from
//! the payload's `cwd`, against a [`View`] it keeps and reloads when the
//! ledger file changes ([`Cached`]): one `stat` per new session. A wrapped
//! MCP server is not subject to this: its entry is in the project's own
//! config, so it is installed there by definition and its proxy records.
//!
//! This is a reader of a part of the ledger (the project keys and the
//! choice), kept below the daemon; `clientconfig::ledger` owns the file
//! and writes [`Everywhere`] through this module's type.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The ledger's file name under `$BIR_HOME` (`clientconfig::ledger` owns it).
pub(crate) const LEDGER_FILE: &str = "installed.json";

/// `bir install --everywhere`: the user chose to record sessions in every
/// directory, on this date.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Everywhere {
    /// When the choice was made (RFC 3339).
    pub at: String,
}

/// What the ledger says about where to record.
#[derive(Debug, Clone, Default)]
pub(crate) struct View {
    /// `None`: no ledger (or one bir cannot read): hooks registered by
    /// hand, recorded everywhere.
    listed: Option<Listed>,
}

#[derive(Debug, Clone, Default)]
struct Listed {
    everywhere: Option<Everywhere>,
    /// The installed project directories, as written and resolved.
    projects: Vec<PathBuf>,
    /// Agents whose hooks were registered before bir kept their projects
    /// (their sessions are recorded everywhere, as they were).
    agents_everywhere: Vec<String>,
}

/// Whether a session in some directory is recorded, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// bir is installed in this project (this directory or an ancestor).
    Installed(PathBuf),
    /// The user chose to record everywhere (`bir install --everywhere`).
    Everywhere(String),
    /// No ledger: hooks registered by hand record everywhere.
    NoLedger,
    /// This agent's hooks predate the project list: recorded everywhere.
    AgentEverywhere,
    /// Not recorded: bir is installed in these projects only.
    Elsewhere(Vec<PathBuf>),
}

impl Verdict {
    pub(crate) fn records(&self) -> bool {
        !matches!(self, Verdict::Elsewhere(_))
    }
}

/// The parts of the ledger this module reads (the rest is ignored).
#[derive(Deserialize)]
struct LedgerPart {
    #[serde(default)]
    everywhere: Option<Everywhere>,
    #[serde(default)]
    changes: Vec<ChangePart>,
    #[serde(default)]
    hooks: Vec<SharedPart>,
    #[serde(default)]
    mods: Vec<SharedPart>,
    #[serde(default)]
    host_hooks: Vec<SharedPart>,
}

#[derive(Deserialize)]
struct ChangePart {
    #[serde(default)]
    project: Option<String>,
}

#[derive(Deserialize)]
struct SharedPart {
    #[serde(default)]
    client: String,
    #[serde(default)]
    projects: Vec<String>,
}

/// Whether a Claude Code session in `dir` is recorded, by this user's
/// ledger as it is now (`bir install` says when that changed).
pub(crate) fn recorded_here(dir: &Path) -> bool {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    crate::home::bir_home().is_some_and(|home| View::load(&home).decide(&dir, None).records())
}

impl View {
    /// The view of the ledger under `home`.
    pub(crate) fn load(home: &Path) -> View {
        let part = std::fs::read(home.join(LEDGER_FILE))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<LedgerPart>(&bytes).ok());
        View {
            listed: part.map(Listed::from),
        }
    }

    /// Whether a session of `agent` (`None`: Claude Code) working in `cwd`
    /// is recorded. `cwd` is matched as given and with its symlinks
    /// resolved, against each installed project and its subdirectories.
    pub(crate) fn decide(&self, cwd: &Path, agent: Option<&str>) -> Verdict {
        let Some(listed) = &self.listed else {
            return Verdict::NoLedger;
        };
        if let Some(e) = &listed.everywhere {
            return Verdict::Everywhere(e.at.clone());
        }
        let real = std::fs::canonicalize(cwd).ok();
        let inside =
            |p: &PathBuf| cwd.starts_with(p) || real.as_ref().is_some_and(|r| r.starts_with(p));
        if let Some(p) = listed.projects.iter().find(|p| inside(p)) {
            return Verdict::Installed(p.clone());
        }
        if agent.is_some_and(|a| listed.agents_everywhere.iter().any(|x| x == a)) {
            return Verdict::AgentEverywhere;
        }
        let mut shown: Vec<PathBuf> = Vec::new();
        for p in &listed.projects {
            if !shown.contains(p) {
                shown.push(p.clone());
            }
        }
        Verdict::Elsewhere(shown)
    }
}

impl From<LedgerPart> for Listed {
    fn from(l: LedgerPart) -> Listed {
        let mut projects: Vec<PathBuf> = Vec::new();
        let mut add = |key: &str| {
            if key.is_empty() {
                return;
            }
            let p = PathBuf::from(key);
            let real = std::fs::canonicalize(&p).ok();
            for p in std::iter::once(p).chain(real) {
                if !projects.contains(&p) {
                    projects.push(p);
                }
            }
        };
        for c in &l.changes {
            if let Some(p) = &c.project {
                add(p);
            }
        }
        for s in l.hooks.iter().chain(&l.mods).chain(&l.host_hooks) {
            for p in &s.projects {
                add(p);
            }
        }
        let agents_everywhere = l
            .host_hooks
            .iter()
            .filter(|h| h.projects.is_empty())
            .map(|h| h.client.clone())
            .collect();
        Listed {
            everywhere: l.everywhere,
            projects,
            agents_everywhere,
        }
    }
}

/// A [`View`] kept between sessions and reloaded when the ledger file
/// changes (its size, modification time or inode).
#[derive(Debug, Default)]
pub(crate) struct Cached {
    view: View,
    stamp: Option<Option<(u64, i64, i64, u64)>>,
}

impl Cached {
    /// The current view of the ledger under `home`: one `stat`, and a read
    /// only when the file changed since the last call.
    pub(crate) fn current(&mut self, home: &Path) -> &View {
        let stamp = std::fs::metadata(home.join(LEDGER_FILE))
            .ok()
            .map(|m| (m.len(), m.mtime(), m.mtime_nsec(), m.ino()));
        if self.stamp.as_ref() != Some(&stamp) {
            self.view = View::load(home);
            self.stamp = Some(stamp);
        }
        &self.view
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home(name: &str, ledger: Option<&str>) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bir-scope-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        if let Some(text) = ledger {
            std::fs::write(dir.join(LEDGER_FILE), text).expect("write");
        }
        dir
    }

    #[test]
    fn a_session_is_recorded_in_installed_projects_and_below_them_only() {
        let h = home(
            "projects",
            Some(r#"{"version":1,"hooks":[{"client":"claude-code","projects":["/work/a"]}]}"#),
        );
        let view = View::load(&h);
        assert_eq!(
            view.decide(Path::new("/work/a/src"), None),
            Verdict::Installed("/work/a".into())
        );
        assert_eq!(
            view.decide(Path::new("/work/ab"), None),
            Verdict::Elsewhere(vec!["/work/a".into()])
        );
        assert!(!view.decide(Path::new("/work"), None).records());
        let _ = std::fs::remove_dir_all(&h);
    }

    #[test]
    fn everywhere_by_choice_by_hand_and_for_agents_installed_before_projects_were_kept() {
        let h = home(
            "everywhere",
            Some(r#"{"version":1,"everywhere":{"at":"2026-12-03T10:00:00Z"}}"#),
        );
        assert_eq!(
            View::load(&h).decide(Path::new("/tmp"), None),
            Verdict::Everywhere("2026-12-03T10:00:00Z".into())
        );
        let none = home("none", None);
        assert_eq!(
            View::load(&none).decide(Path::new("/tmp"), None),
            Verdict::NoLedger
        );
        let legacy = home(
            "legacy",
            Some(r#"{"version":1,"host_hooks":[{"client":"codex","projects":[]}]}"#),
        );
        let view = View::load(&legacy);
        assert_eq!(
            view.decide(Path::new("/tmp"), Some("codex")),
            Verdict::AgentEverywhere
        );
        assert!(!view.decide(Path::new("/tmp"), None).records());
        assert!(!view.decide(Path::new("/tmp"), Some("gemini")).records());
        for d in [h, none, legacy] {
            let _ = std::fs::remove_dir_all(&d);
        }
    }

    #[test]
    fn the_cached_view_follows_the_ledger_file() {
        let h = home("cached", Some(r#"{"version":1}"#));
        let mut cached = Cached::default();
        assert!(!cached.current(&h).decide(Path::new("/p"), None).records());
        std::fs::write(
            h.join(LEDGER_FILE),
            r#"{"version":1,"changes":[{"project":"/p"}]}"#,
        )
        .expect("write");
        assert!(cached.current(&h).decide(Path::new("/p"), None).records());
        std::fs::remove_file(h.join(LEDGER_FILE)).expect("rm");
        assert_eq!(
            cached.current(&h).decide(Path::new("/q"), None),
            Verdict::NoLedger
        );
        let _ = std::fs::remove_dir_all(&h);
    }
}
