//! Which host session a proxy belongs to when its environment names none.
//!
//! Claude Code tells every MCP server its session (`CLAUDE_CODE_SESSION_ID`);
//! Codex CLI and Gemini CLI tell it nothing. What they do share is a
//! process: the agent starts its MCP servers itself and runs its hook
//! commands itself (through a shell). So
//!
//! * `bir-hooks` names its *host process*: its nearest ancestor that is not
//!   a shell or a launcher (`sh -c`, `env`, …), as (pid, start time);
//! * a proxy with no session in its environment names its ancestors, each
//!   as (pid, start time), nearest first;
//! * the daemon binds the proxy to the live session whose host process is
//!   among them, the nearest if several are (an agent started by another
//!   agent's shell tool: the inner one's servers are the inner one's).
//!
//! A pid names a process only with its start time (`/proc/<pid>/stat`
//! field 22): a pid the kernel reused for another process after the
//! host exited never matches. Linux only (`/proc`); elsewhere nothing is
//! named and such a proxy records standalone, as before.

use serde::{Deserialize, Serialize};

/// One process: its pid and when it started (clock ticks since boot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct ProcessId {
    pub pid: u32,
    pub start: u64,
}

impl ProcessId {
    /// `pid.start`, as it travels in a hook route's query.
    pub(crate) fn to_query(self) -> String {
        format!("{}.{}", self.pid, self.start)
    }

    pub(crate) fn from_query(value: &str) -> Option<ProcessId> {
        let (pid, start) = value.split_once('.')?;
        Some(ProcessId {
            pid: pid.parse().ok()?,
            start: start.parse().ok()?,
        })
    }
}

/// How far up a proxy looks for its host (a host may start a server
/// through `npx`, a shell and a wrapper or two).
pub(crate) const MAX_ANCESTORS: usize = 8;

/// Programs that stand between an agent and the command it runs: a hook
/// command runs as `<shell> -c '<command>'`, maybe through `env` or
/// `timeout`. The host process is the first ancestor not among them.
const LAUNCHERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "busybox", "env", "timeout", "nice",
    "nohup", "stdbuf", "setsid",
];

/// What `/proc/<pid>/stat` says of a process: its command name, parent
/// and start time.
struct Stat {
    comm: String,
    parent: u32,
    start: u64,
}

fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_owned();
    // After the name: state (3), ppid (4), …, starttime (22).
    let mut rest = text.get(close + 1..)?.split_ascii_whitespace();
    let parent = rest.nth(1)?.parse().ok()?;
    let start = rest.nth(17)?.parse().ok()?;
    Some(Stat {
        comm,
        parent,
        start,
    })
}

/// The ancestors of this process, nearest (its parent) first, at most
/// [`MAX_ANCESTORS`]; stops below init. Empty where `/proc` is not there.
pub(crate) fn ancestors() -> Vec<ProcessId> {
    let mut out = Vec::new();
    let mut pid = std::os::unix::process::parent_id();
    while pid > 1 && out.len() < MAX_ANCESTORS {
        let Some(s) = stat(pid) else { break };
        out.push(ProcessId {
            pid,
            start: s.start,
        });
        pid = s.parent;
    }
    out
}

/// The process that ran this hook: the nearest ancestor that is not a
/// shell or launcher ([`LAUNCHERS`]). `None` where `/proc` is not there.
pub(crate) fn host_process() -> Option<ProcessId> {
    host_process_from(std::os::unix::process::parent_id())
}

/// The host process of a hook whose shell's parent is `pid` (what a hook
/// posted by a shell script names as `$PPID`): `pid` itself unless it is
/// a shell or launcher ([`LAUNCHERS`]), else its nearest ancestor that is
/// not, each with its start time read from `/proc` here — the poster
/// names only a pid, and a pid alone names no process. `None` where
/// `/proc` is not there or no such process lives.
pub(crate) fn host_process_from(pid: u32) -> Option<ProcessId> {
    let mut pid = pid;
    for _ in 0..MAX_ANCESTORS {
        if pid <= 1 {
            return None;
        }
        let s = stat(pid)?;
        if !LAUNCHERS.contains(&s.comm.as_str()) {
            return Some(ProcessId {
                pid,
                start: s.start,
            });
        }
        pid = s.parent;
    }
    None
}

/// The session whose host process is the nearest of `ancestors` (a
/// proxy's, nearest first) among `hosts` (each live session's id and host
/// process). `None` when no ancestor is a host; a pid is the same process
/// only with the same start time.
pub(crate) fn session_of<'a>(
    ancestors: &[ProcessId],
    hosts: &[(&'a str, ProcessId)],
) -> Option<&'a str> {
    // Two live sessions of one process (a host that runs sessions one after
    // the other, the first not ended yet): the caller lists the most recent
    // first, and the first listed wins.
    ancestors
        .iter()
        .find_map(|a| hosts.iter().find(|(_, h)| h == a).map(|(id, _)| *id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, start: u64) -> ProcessId {
        ProcessId { pid, start }
    }

    #[test]
    fn a_proxy_binds_to_the_session_whose_host_is_its_ancestor() {
        let hosts = [("gemini-a", p(200, 7)), ("codex-b", p(300, 9))];
        // proxy → codex (300) → node wrapper (299) → shell (10)
        let chain = [p(300, 9), p(299, 8), p(10, 1)];
        assert_eq!(session_of(&chain, &hosts), Some("codex-b"));
        // A proxy of another agent started from the same shell: no host.
        let other = [p(400, 12), p(10, 1)];
        assert_eq!(session_of(&other, &hosts), None);
    }

    #[test]
    fn a_reused_pid_never_matches() {
        // The host (pid 300, started at tick 9) exited; the kernel gave pid
        // 300 to another program that started a proxy.
        let hosts = [("codex-old", p(300, 9))];
        let chain = [p(300, 5000), p(10, 1)];
        assert_eq!(session_of(&chain, &hosts), None);
    }

    #[test]
    fn the_nearest_host_wins_when_agents_nest() {
        // Gemini (200) ran Codex (300) through its shell tool; Codex's server.
        let hosts = [("gemini-outer", p(200, 7)), ("codex-inner", p(300, 9))];
        let chain = [p(300, 9), p(250, 8), p(200, 7)];
        assert_eq!(session_of(&chain, &hosts), Some("codex-inner"));
    }

    #[test]
    fn a_process_id_travels_in_a_query() {
        let id = p(4242, 123_456);
        assert_eq!(ProcessId::from_query(&id.to_query()), Some(id));
        assert_eq!(ProcessId::from_query("4242"), None);
        assert_eq!(ProcessId::from_query("x.1"), None);
    }

    #[test]
    fn a_pid_names_its_host_process_with_its_start_time() {
        // A shell between the pid and its host is passed over, as it is
        // for a hook run through `bash -c`.
        let Some(me) = stat(std::process::id()) else {
            return; // no /proc here
        };
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "read -r line"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let found = host_process_from(shell.id());
        drop(shell.stdin.take());
        let _ = shell.wait();
        assert_eq!(
            found,
            Some(ProcessId {
                pid: std::process::id(),
                start: me.start
            })
        );
        assert_eq!(host_process_from(0), None);
        assert_eq!(host_process_from(u32::MAX), None);
    }

    #[test]
    fn this_process_has_ancestors_and_a_host_process() {
        // The test runner's parent (cargo, or a shell) is alive while it runs.
        let chain = ancestors();
        assert!(!chain.is_empty(), "no ancestors read from /proc");
        assert_eq!(chain[0].pid, std::os::unix::process::parent_id());
        // (None only when every ancestor below init is a shell.)
        if let Some(host) = host_process() {
            assert!(chain.contains(&host), "{host:?} not among {chain:?}");
        }
    }
}
