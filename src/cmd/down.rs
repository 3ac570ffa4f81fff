//! The daemon as the CLI shows and stops it: `bir down`, the "Recorder
//! daemon" lines of `bir status`, and `bir doctor`'s daemon check, in
//! words; what they say is found by `daemon::control` (asking the daemon,
//! stopping it, the kept port's holder, its socket).
//!
//! None of these start a daemon: a user asking about it must not create
//! one (it starts on demand when a hook or a proxy needs it).

use argh::FromArgs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::daemon::Health;
use crate::daemon::client::{self, Missing};
use crate::daemon::control::{self, Holder, PROBE, Stop, StopFailure};

use crate::error::{Error, ExitStatus};
use crate::output::out;

/// Stop the recorder daemon (it finishes every open run first). It starts
/// again on demand when a hook or a proxy needs it.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "down")]
pub(crate) struct DownCmd {
    /// how long to wait for it to exit, in milliseconds (default 10000)
    #[argh(option, default = "10000")]
    pub timeout_ms: u64,
}

/// `bir down`: stops the daemon this `$BIR_HOME` uses, and waits for it.
pub(crate) fn down(cmd: DownCmd) -> Result<ExitStatus, Error> {
    let home = crate::home::bir_home()
        .ok_or_else(|| Error::failure("no home directory (set BIR_HOME or HOME)"))?;
    let said = match control::stop(&home, Duration::from_millis(cmd.timeout_ms)) {
        Ok(Stop::Given) => {
            "The recorder daemon is given by BIR_CONTROL_URL; bir down does not stop it.".to_owned()
        }
        Ok(Stop::NotRunning) => "The recorder daemon is not running.".to_owned(),
        Ok(Stop::Stopped { pid }) => format!("Stopped the recorder daemon (pid {pid})."),
        Ok(Stop::StaleStopped { pid, why }) => {
            format!("Stopped the recorder daemon (pid {pid}, {why}).")
        }
        Ok(Stop::StaleRemoved { why }) => {
            format!("The recorder daemon is not running ({why}); removed its stale discovery file.")
        }
        Err(StopFailure::DiscoveryRefused(why)) => {
            return Err(Error::failure(format!(
                "the discovery file is refused: {why}"
            )));
        }
        Err(StopFailure::Refused { pid, status }) => {
            return Err(Error::failure(format!(
                "the daemon (pid {pid}) refused to stop (HTTP {status})"
            )));
        }
        Err(StopFailure::NoAnswer { pid, err }) => {
            return Err(
                Error::failure(format!("the daemon (pid {pid}) did not answer")).because(err),
            );
        }
        Err(StopFailure::StillFinishing { pid }) => {
            return Err(Error::failure(format!(
                "the daemon (pid {pid}) is still finishing after {} ms",
                cmd.timeout_ms
            )));
        }
        Err(StopFailure::StaleDidNotExit { pid }) => {
            return Err(Error::failure(format!(
                "the daemon (pid {pid}) did not exit"
            )));
        }
    };
    out(&said);
    Ok(ExitStatus::Success)
}

/// The "Recorder daemon" lines of `bir status`.
pub(crate) fn status_lines() -> Vec<String> {
    let Some(home) = crate::home::bir_home() else {
        return vec!["Recorder daemon: no home directory (set BIR_HOME or HOME)".into()];
    };
    let endpoint = match client::lookup(&home) {
        Ok(e) => e,
        Err(missing) => return vec![format!("Recorder daemon: {}", describe_missing(&missing))],
    };
    let Some(answer) = control::sessions(&endpoint) else {
        return vec![format!(
            "Recorder daemon: {} (pid {}) does not answer",
            endpoint.url,
            endpoint.pid.map_or("?".into(), |p| p.to_string())
        )];
    };
    let mut lines = vec![format!(
        "Recorder daemon: running at {} (pid {}, version {}, up {}), {} session(s)",
        endpoint.url,
        answer.daemon.pid,
        answer.daemon.version,
        uptime(&answer.daemon),
        answer.sessions.len()
    )];
    for s in &answer.sessions {
        let proxies = if s.proxies.is_empty() {
            String::new()
        } else {
            format!(", proxies: {}", s.proxies.join(", "))
        };
        lines.push(format!(
            "  session {} → run {} ({} step(s), last event {}, cwd {}{proxies})",
            s.session_id, s.run_id, s.steps, s.last_event_at, s.cwd
        ));
    }
    lines
}

fn uptime(h: &Health) -> String {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let secs = now.saturating_sub(h.started_at) / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m{}s", secs / 60, secs % 60),
        _ => format!("{}h{}m", secs / 3600, (secs % 3600) / 60),
    }
}

fn describe_missing(missing: &Missing) -> String {
    match missing {
        Missing::None => "not running (starts on demand)".into(),
        Missing::Stale(why) => {
            format!("not running; stale discovery file ({why}), replaced at the next start")
        }
        Missing::Refused(why) => format!("PROBLEM: discovery file refused: {why}"),
    }
}

/// `bir doctor`'s check: the line, and whether it is fine.
pub(crate) fn doctor_line() -> (String, bool) {
    let Some(home) = crate::home::bir_home() else {
        return ("recorder daemon: no home directory".into(), true);
    };
    let (line, ok) = daemon_line(&home);
    match port_problem(&home) {
        Some(problem) => (format!("{line}\n{problem}"), false),
        None => (line, ok),
    }
}

/// The daemon's kept port (`control::port_problem`) when something else
/// holds it, in words: who, and what follows.
fn port_problem(home: &Path) -> Option<String> {
    let problem = control::port_problem(home)?;
    let holder = match problem.holder {
        Holder::Mine => "another program of yours".to_owned(),
        Holder::OtherUser(uid) => format!("uid {uid}, another user"),
        Holder::Unknown => "another program".to_owned(),
    };
    let now = match problem.daemon_port {
        Some(port) => format!("the daemon listens on port {port} instead"),
        None => "the daemon will listen on another port".to_owned(),
    };
    Some(format!(
        "recorder daemon: PROBLEM: port {}, the daemon's own (hooks that POST to the \
         daemon name it), is held by {holder}; {now}, so those hooks reach the wrong \
         listener or none: stop what holds the port and run `bir down`",
        problem.kept
    ))
}

fn daemon_line(home: &Path) -> (String, bool) {
    match client::lookup(home) {
        Ok(endpoint) => {
            if client::healthy(&endpoint, PROBE) {
                (
                    format!(
                        "recorder daemon: healthy at {} (pid {})",
                        endpoint.url,
                        endpoint.pid.map_or("?".into(), |p| p.to_string())
                    ),
                    true,
                )
            } else {
                (
                    format!(
                        "recorder daemon: PROBLEM: {} does not answer its health check",
                        endpoint.url
                    ),
                    false,
                )
            }
        }
        Err(m @ Missing::Refused(_)) => {
            (format!("recorder daemon: {}", describe_missing(&m)), false)
        }
        Err(m) => (format!("recorder daemon: {}", describe_missing(&m)), true),
    }
}

/// `bir doctor`'s live check: for each session the running daemon records,
/// whether each server wrapped for `project` (`wrapped`: the names of
/// Claude Code's wrapped entries there) has a proxy bound to it. The lines,
/// and how many problems they name.
///
/// Only sessions started in `project` are held to its list: a session
/// elsewhere has other servers, and shows just the proxies bound to it. A
/// wrapped server without a bound proxy in a live session of this project
/// is a problem: its calls are told from the hooks alone (no server result,
/// no duration), or its proxy records a standalone run beside the
/// session's. No daemon, or one that does not answer, adds nothing here
/// (the daemon check above says so).
pub(crate) fn doctor_sessions(project: &Path, wrapped: &[String]) -> (Vec<String>, usize) {
    let Some(home) = crate::home::bir_home() else {
        return (Vec::new(), 0);
    };
    let Some(answer) = client::lookup(&home)
        .ok()
        .and_then(|e| control::sessions(&e))
    else {
        return (Vec::new(), 0);
    };
    session_lines(&answer.sessions, project, wrapped)
}

fn session_lines(
    sessions: &[crate::daemon::SessionView],
    project: &Path,
    wrapped: &[String],
) -> (Vec<String>, usize) {
    if sessions.is_empty() {
        return (
            vec!["  no live session (a Claude Code session with bir's hooks shows here)".into()],
            0,
        );
    }
    let here = same_dir_key(project);
    let mut lines = Vec::new();
    let mut problems = 0;
    for s in sessions {
        let in_project = !s.cwd.is_empty() && same_dir_key(Path::new(&s.cwd)) == here;
        lines.push(format!(
            "  live session {} in {}{} (run {}, {} step(s))",
            s.session_id,
            if s.cwd.is_empty() { "?" } else { &s.cwd },
            if in_project { " (this project)" } else { "" },
            s.run_id,
            s.steps
        ));
        if !in_project || wrapped.is_empty() {
            lines.push(if s.proxies.is_empty() {
                "    no proxy bound".to_owned()
            } else {
                format!("    proxies bound: {}", s.proxies.join(", "))
            });
            continue;
        }
        let width = wrapped
            .iter()
            .chain(&s.proxies)
            .map(String::len)
            .max()
            .unwrap_or(4);
        for name in wrapped {
            if s.proxies.contains(name) {
                lines.push(format!("    {name:<width$}  bound"));
            } else {
                problems += 1;
                lines.push(format!(
                    "    {name:<width$}  PROBLEM: not bound: its calls get no server result in this run \
                     (was the session started before `bir install`, or with recording off? restart it)"
                ));
            }
        }
        for extra in s.proxies.iter().filter(|p| !wrapped.contains(p)) {
            lines.push(format!(
                "    {extra:<width$}  bound (not a wrapped entry of this project)"
            ));
        }
    }
    (lines, problems)
}

/// A directory as compared between a session's cwd and the project:
/// canonical when it exists, else as written.
fn same_dir_key(dir: &Path) -> std::path::PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned())
}

/// The running daemon's Unix socket (the mod's link), when the discovery
/// file names a live daemon and a socket that answers the health marker
/// (`control::live_socket`). `bir doctor` says from it which path records
/// the model's words.
pub(crate) fn live_socket() -> Option<String> {
    control::live_socket(&crate::home::bir_home()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::SessionView;

    fn session(id: &str, cwd: &str, proxies: &[&str]) -> SessionView {
        SessionView {
            session_id: id.into(),
            run_id: format!("run_{id}"),
            cwd: cwd.into(),
            steps: 3,
            proxies: proxies.iter().map(|p| p.to_string()).collect(),
            last_event_at: "2026-12-01T23:00:00.000Z".into(),
        }
    }

    #[test]
    fn each_wrapped_server_of_a_session_here_is_bound_or_a_problem() {
        let project = Path::new("/nonexistent/proj");
        let wrapped = vec!["peer".to_owned(), "github".to_owned()];
        let sessions = vec![
            session("s1", "/nonexistent/proj", &["peer", "extra"]),
            session("s2", "/elsewhere", &["other"]),
            session("s3", "/elsewhere/2", &[]),
        ];
        let (lines, problems) = session_lines(&sessions, project, &wrapped);
        let text = lines.join("\n");
        assert_eq!(problems, 1, "{text}");
        assert!(
            text.contains(
                "live session s1 in /nonexistent/proj (this project) (run run_s1, 3 step(s))"
            ),
            "{text}"
        );
        assert!(text.contains("    peer    bound\n"), "{text}");
        assert!(text.contains("    github  PROBLEM: not bound"), "{text}");
        assert!(
            text.contains("    extra   bound (not a wrapped entry of this project)"),
            "{text}"
        );
        assert!(
            text.contains(
                "live session s2 in /elsewhere (run run_s2, 3 step(s))\n    proxies bound: other"
            ),
            "{text}"
        );
        assert!(
            text.ends_with(
                "live session s3 in /elsewhere/2 (run run_s3, 3 step(s))\n    no proxy bound"
            ),
            "{text}"
        );

        let (lines, problems) = session_lines(&[], project, &wrapped);
        assert_eq!(problems, 0);
        assert!(lines[0].contains("no live session"));
    }
}
