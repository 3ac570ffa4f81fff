//! The daemon as the command line asks about it and stops it: its answer
//! to `GET /sessions`, stopping it and waiting for its exit (a stale one of
//! another build by SIGTERM), whether something else holds its kept port,
//! its live Unix socket. What each finds is data; the commands (`bir
//! down`, `bir status`, `bir doctor`) put it in words.
//!
//! None of these start a daemon: a user asking about it must not create
//! one (it starts on demand when a hook or a proxy needs it).

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use super::client::{self, Endpoint, Missing};
use super::tcpowner::{self, Lookup};
use super::{SessionsAnswer, discovery, uds};

/// How long a status or doctor probe (and the `/shutdown` request) waits
/// for the daemon.
pub(crate) const PROBE: Duration = Duration::from_millis(1500);

/// `GET /sessions`, when the daemon answers it.
pub(crate) fn sessions(endpoint: &Endpoint) -> Option<SessionsAnswer> {
    endpoint
        .get("/sessions", PROBE)
        .ok()
        .filter(|(status, _)| *status == 200)
        .and_then(|(_, body)| serde_json::from_slice::<SessionsAnswer>(&body).ok())
}

/// What [`stop`] did.
#[derive(Debug)]
pub(crate) enum Stop {
    /// `BIR_CONTROL_URL` names the daemon: not ours to stop.
    Given,
    /// No daemon runs (or the stale discovery file vanished meanwhile).
    NotRunning,
    /// The daemon finished its runs on `/shutdown` and exited.
    Stopped { pid: u32 },
    /// A stale discovery file (`why`) named a live daemon of another
    /// build: it exited on SIGTERM.
    StaleStopped { pid: u32, why: String },
    /// A stale discovery file (`why`) named no daemon: it was removed.
    StaleRemoved { why: String },
}

/// Why [`stop`] could not stop the daemon.
#[derive(Debug)]
pub(crate) enum StopFailure {
    /// The discovery file is refused (`client::Missing::Refused`).
    DiscoveryRefused(String),
    /// The daemon answered `/shutdown` with another status than 200.
    Refused { pid: u32, status: u16 },
    /// The daemon did not answer `/shutdown`.
    NoAnswer { pid: u32, err: io::Error },
    /// It took `/shutdown` but is still finishing after the timeout.
    StillFinishing { pid: u32 },
    /// A stale daemon signalled with SIGTERM did not exit in time.
    StaleDidNotExit { pid: u32 },
}

/// Stops the daemon of `home` and waits up to `timeout` for it to exit,
/// then removes its discovery file (only if it still names that pid).
pub(crate) fn stop(home: &Path, timeout: Duration) -> Result<Stop, StopFailure> {
    let endpoint = match client::lookup(home) {
        Ok(e) => e,
        Err(Missing::None) => return Ok(Stop::NotRunning),
        Err(Missing::Stale(why)) => return stop_stale(home, why, timeout),
        Err(Missing::Refused(why)) => return Err(StopFailure::DiscoveryRefused(why)),
    };
    let Some(pid) = endpoint.pid else {
        return Ok(Stop::Given);
    };
    match endpoint.post("/shutdown", b"{}", PROBE) {
        Ok((200, _)) => {}
        Ok((status, _)) => return Err(StopFailure::Refused { pid, status }),
        Err(err) => return Err(StopFailure::NoAnswer { pid, err }),
    }
    if !wait_for_exit(pid, timeout) {
        return Err(StopFailure::StillFinishing { pid });
    }
    discovery::remove_if_ours(home, pid);
    Ok(Stop::Stopped { pid })
}

/// A discovery file naming a dead daemon, or a live one of another build
/// (stopped with SIGTERM, which it handles like `/shutdown`). A pid that
/// is not the daemon any more (`discovery::is_daemon`: the file outlived
/// it and the system gave its pid to another process) is never signalled.
fn stop_stale(home: &Path, why: String, timeout: Duration) -> Result<Stop, StopFailure> {
    let Ok(Some(d)) = discovery::read(home) else {
        return Ok(Stop::NotRunning);
    };
    if discovery::is_daemon(home, &d).is_err() {
        discovery::remove_if_ours(home, d.pid);
        return Ok(Stop::StaleRemoved { why });
    }
    // SAFETY: plain kill(2) on a pid of ours that is still the daemon
    // (is_daemon checked it, and that we may signal it).
    unsafe {
        libc::kill(d.pid as libc::pid_t, libc::SIGTERM);
    }
    if !wait_for_exit(d.pid, timeout) {
        return Err(StopFailure::StaleDidNotExit { pid: d.pid });
    }
    discovery::remove_if_ours(home, d.pid);
    Ok(Stop::StaleStopped { pid: d.pid, why })
}

/// Whether `pid` exited within `timeout` (looked at every 10 ms).
fn wait_for_exit(pid: u32, timeout: Duration) -> bool {
    let start = Instant::now();
    while discovery::pid_alive(pid) {
        if start.elapsed() >= timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Something other than the daemon holding its kept port.
#[derive(Debug)]
pub(crate) struct PortProblem {
    /// The daemon's kept port (`discovery::port_path`), the one a settings
    /// file's hook URL names.
    pub kept: u16,
    pub holder: Holder,
    /// The port the running daemon listens on instead (`None`: no daemon
    /// runs; it will listen on another port).
    pub daemon_port: Option<u16>,
}

/// Who holds the kept port.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    /// Another program of this user.
    Mine,
    /// Another user's program.
    OtherUser(u32),
    /// Some program: the OS does not tell whose, but the daemon runs
    /// elsewhere, so something does.
    Unknown,
}

/// The daemon's kept port when something else holds it: who, and where
/// the daemon listens instead. `None` when the daemon holds it, nobody
/// does, or the OS cannot tell and no daemon runs.
pub(crate) fn port_problem(home: &Path) -> Option<PortProblem> {
    let kept = discovery::preferred_port(home)?;
    let live = client::lookup(home).ok().filter(|e| e.pid.is_some());
    if live.as_ref().is_some_and(|e| e.addr.port() == kept) {
        return None;
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let holder = match tcpowner::listener_uid(([127, 0, 0, 1], kept).into()) {
        Lookup::Owner(uid) if uid == me => Holder::Mine,
        Lookup::Owner(uid) => Holder::OtherUser(uid),
        Lookup::NotFound => return None,
        Lookup::Unavailable if live.is_some() => Holder::Unknown,
        Lookup::Unavailable => return None,
    };
    Some(PortProblem {
        kept,
        holder,
        daemon_port: live.map(|e| e.addr.port()),
    })
}

/// The running daemon's Unix socket (the mod's link), when the discovery
/// file names a live daemon and a socket that answers the health marker.
pub(crate) fn live_socket(home: &Path) -> Option<String> {
    let d = match discovery::read(home) {
        Ok(Some(d)) if discovery::pid_alive(d.pid) => d,
        _ => return None,
    };
    let path = d.socket?;
    (uds::occupant(Path::new(&path)) == uds::Occupant::Live).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::discovery::Discovery;
    use std::os::unix::fs::PermissionsExt;

    fn home(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("bir-control-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        dir
    }

    fn discovery_of(pid: u32, pid_start: Option<u64>) -> Discovery {
        Discovery {
            url: "http://127.0.0.1:9".into(),
            token: "ab".repeat(32),
            pid,
            version: discovery::daemon_version(),
            started_at: 1,
            socket: None,
            pid_start,
        }
    }

    #[test]
    fn stopping_no_daemon_does_nothing() {
        let home = home("none");
        assert!(
            matches!(stop(&home, Duration::from_secs(1)), Ok(Stop::NotRunning)),
            "no discovery file: nothing runs"
        );
        assert!(port_problem(&home).is_none(), "no kept port yet");
        assert!(live_socket(&home).is_none());
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn a_stale_file_naming_another_process_is_removed_and_nothing_signalled() {
        let home = home("stale");
        // This test's own process, with a start time that is not its own:
        // the pid is alive but is not the daemon the file names. Signalling
        // it would end this test.
        discovery::write(&home, &discovery_of(std::process::id(), Some(1))).expect("write");
        let stopped = stop(&home, Duration::from_secs(1));
        let Ok(Stop::StaleRemoved { why }) = stopped else {
            panic!("a stale file is removed: {stopped:?}");
        };
        assert!(why.contains("another process"), "{why}");
        assert_eq!(discovery::read(&home).ok(), Some(None), "the file is gone");
        assert!(live_socket(&home).is_none());
        let _ = std::fs::remove_dir_all(&home);
    }
}
