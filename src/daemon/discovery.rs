//! `$BIR_HOME/control/daemon.json`: how a client finds the live daemon.
//!
//! Invariants:
//! * `control/` is a real directory (never a symlink), owned by us, mode
//!   0700; the daemon creates it without following symlinks and tightens
//!   nothing it does not own.
//! * The file is created 0600 with `O_CREAT|O_EXCL|O_NOFOLLOW` under a
//!   temporary name, synced, and renamed over the final name: a reader sees
//!   the old file or the new one, never half of one.
//! * Readers open it with `O_NOFOLLOW|O_NONBLOCK` and `fstat` the open file:
//!   a regular file, ours, no group/other bits, at most [`MAX_BYTES`].
//!   Anything else is refused with the check that failed, never followed.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A discovery file larger than this is not ours.
pub(crate) const MAX_BYTES: u64 = 4096;

/// What the daemon publishes about itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Discovery {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// 64 hex digits (256 bits); every request carries it as a bearer token.
    pub token: String,
    pub pid: u32,
    /// [`daemon_version`] of the binary that runs the daemon.
    pub version: String,
    /// Milliseconds since the Unix epoch.
    pub started_at: u64,
    /// The Unix socket the Claude Code mod reaches the daemon on, when it
    /// could bind one (`uds.rs`); shown by `bir doctor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// When the daemon's process started, as the kernel counts it
    /// ([`process_start`]): with the pid, it names one process, so a pid
    /// the system gave to another process since is told apart. Absent in
    /// files of older builds (and where the OS does not tell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_start: Option<u64>,
}

/// The version a daemon and its clients must share: the crate version and
/// the build, so a rebuilt binary replaces the daemon an older one started.
pub(crate) fn daemon_version() -> String {
    format!("{}+{}", env!("CARGO_PKG_VERSION"), env!("BIR_BUILD"))
}

/// `$BIR_HOME/control`.
pub(crate) fn control_dir(home: &Path) -> PathBuf {
    home.join("control")
}

/// `$BIR_HOME/control/daemon.json`.
pub(crate) fn discovery_path(home: &Path) -> PathBuf {
    control_dir(home).join("daemon.json")
}

/// `$BIR_HOME/control/daemon.lock`: held (`flock`) by the live daemon for
/// its whole life, so a second one can tell it is not alone.
pub(crate) fn lock_path(home: &Path) -> PathBuf {
    control_dir(home).join("daemon.lock")
}

fn my_uid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Checks that `dir` is a private directory of ours (not a symlink).
pub(crate) fn check_private_dir(dir: &Path) -> Result<(), String> {
    let meta = fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if meta.file_type().is_symlink() {
        return Err(format!("{} is a symlink (refused)", dir.display()));
    }
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    check_ours_and_private(dir, &meta, "0700")
}

/// Owned by our uid, and no group or other permission bits.
fn check_ours_and_private(path: &Path, meta: &fs::Metadata, must_be: &str) -> Result<(), String> {
    if meta.uid() != my_uid() {
        return Err(format!(
            "{} belongs to uid {}, not to us",
            path.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{} has mode {:o}; it must be {must_be}",
            path.display(),
            meta.mode() & 0o777
        ));
    }
    Ok(())
}

/// Reads and checks the discovery file. `Ok(None)`: there is none.
/// `Err`: there is one but it is refused (the message names the check).
pub(crate) fn read(home: &Path) -> Result<Option<Discovery>, String> {
    let path = discovery_path(home);
    let Some(text) = read_private(&path)? else {
        return Ok(None);
    };
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|e| format!("{} is not a discovery file ({e})", path.display()))
}

/// Reads a file of `control/` under the discovery file's checks (the
/// directory private and ours; the file regular, ours, 0600 or tighter, at
/// most [`MAX_BYTES`], never through a symlink). `Ok(None)`: not there.
pub(crate) fn read_private(path: &Path) -> Result<Option<Vec<u8>>, String> {
    if let Some(dir) = path.parent() {
        match fs::symlink_metadata(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            _ => check_private_dir(dir)?,
        }
    }
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(format!("{} is a symlink (refused)", path.display()));
        }
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.file_type().is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    check_ours_and_private(path, &meta, "0600")?;
    if meta.len() > MAX_BYTES {
        return Err(format!("{} is too large to be ours", path.display()));
    }
    let mut text = Vec::new();
    file.take(MAX_BYTES)
        .read_to_end(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(text))
}

/// Creates `control/` (0700, never through a symlink) or takes the one
/// there by the store's rule: ours and a real directory, tightened to 0700
/// if it was looser (readers refuse a loose one; the daemon, its owner,
/// repairs it). Someone else's directory or a symlink is refused.
pub(crate) fn ensure_control_dir(home: &Path) -> io::Result<PathBuf> {
    crate::home::ensure_private_dir(home)?;
    let dir = control_dir(home);
    crate::home::ensure_private_dir(&dir)?;
    check_private_dir(&dir).map_err(io::Error::other)?;
    Ok(dir)
}

/// Publishes `discovery` atomically (see the module's invariants).
pub(crate) fn write(home: &Path, discovery: &Discovery) -> io::Result<()> {
    let body = serde_json::to_vec(discovery).map_err(io::Error::other)?;
    write_private(home, "daemon.json", &body)
}

/// Writes `control/<name>` atomically, 0600, never through a symlink.
pub(crate) fn write_private(home: &Path, name: &str, body: &[u8]) -> io::Result<()> {
    let dir = ensure_control_dir(home)?;
    let tmp = dir.join(format!("{name}.{}.tmp", std::process::id()));
    // A leftover of ours from a crash at this very pid: out of the way.
    let _ = fs::remove_file(&tmp);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    let written = file.write_all(body).and_then(|()| file.sync_all());
    if let Err(err) = written.and_then(|()| fs::rename(&tmp, dir.join(name))) {
        let _ = fs::remove_file(&tmp);
        return Err(err);
    }
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// `$BIR_HOME/control/port`: the daemon's port, kept across restarts
/// (hooks that POST name a fixed URL).
pub(crate) fn port_path(home: &Path) -> PathBuf {
    control_dir(home).join("port")
}

/// Where [`preferred_port`] picks a first port from: below the ephemeral
/// ranges Linux (32768–60999) and macOS (49152–65535) hand to outgoing
/// connections, so a port we keep is not taken by a passing connection.
const PORT_RANGE: std::ops::Range<u16> = 20000..32000;

/// The port this `$BIR_HOME`'s daemon listens on when it can: the one in
/// [`port_path`], or `None` if none was chosen yet (or the file is not
/// ours: refused like the discovery file).
pub(crate) fn preferred_port(home: &Path) -> Option<u16> {
    let path = port_path(home);
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || check_ours_and_private(&path, &meta, "0600").is_err() {
        return None;
    }
    let mut text = String::new();
    file.take(16).read_to_string(&mut text).ok()?;
    text.trim().parse().ok().filter(|p| *p != 0)
}

/// The ports to try, in order, when no port was kept yet: spread by the
/// uid and the home, so two users (or two homes) start apart.
pub(crate) fn port_candidates(home: &Path) -> impl Iterator<Item = u16> {
    let seed = crate::codec::sha256_hex(format!("{}\0{}", my_uid(), home.display()).as_bytes());
    let width = u32::from(PORT_RANGE.end - PORT_RANGE.start);
    let first = u32::from_str_radix(&seed[..8], 16).unwrap_or(0) % width;
    (0..16u32).map(move |i| PORT_RANGE.start + ((first + i * 7919) % width) as u16)
}

/// Keeps `port` as the daemon's port (written like the discovery file).
pub(crate) fn keep_port(home: &Path, port: u16) -> io::Result<()> {
    let dir = ensure_control_dir(home)?;
    let tmp = dir.join(format!("port.{}.tmp", std::process::id()));
    let _ = fs::remove_file(&tmp);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    let written = file
        .write_all(format!("{port}\n").as_bytes())
        .and_then(|()| file.sync_all());
    if let Err(err) = written.and_then(|()| fs::rename(&tmp, port_path(home))) {
        let _ = fs::remove_file(&tmp);
        return Err(err);
    }
    Ok(())
}

/// The daemon's port, for a URL written before the daemon runs (hooks
/// that POST name it): the kept one, or the first free candidate, kept
/// from now on, where the daemon started later listens.
pub(crate) fn stable_port(home: &Path) -> io::Result<u16> {
    if let Some(port) = preferred_port(home) {
        return Ok(port);
    }
    let port = port_candidates(home)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .ok_or_else(|| io::Error::other("none of the daemon's ports is free"))?;
    keep_port(home, port)?;
    Ok(port)
}

/// Whether `d`'s pid is this `$BIR_HOME`'s daemon and not a process that
/// was given the pid since (the file survives crashes and reboots), before
/// anything is sent to its port or a signal to its pid. `Err` says why not.
///
/// With the start time the daemon recorded, the pid and that time must
/// name the running process. A file of an older build has none: the
/// process must then run `bir daemon` with this `BIR_HOME` (its command
/// line and environment, which the client that started it set). Where the
/// OS does not tell (not Linux), a live pid of ours is all there is.
pub(crate) fn is_daemon(home: &Path, d: &Discovery) -> Result<(), String> {
    if !pid_alive(d.pid) {
        return Err(format!("pid {} is not running", d.pid));
    }
    if !cfg!(target_os = "linux") {
        return Ok(());
    }
    let reused = || {
        Err(format!(
            "pid {} is another process now, not the daemon",
            d.pid
        ))
    };
    if let Some(recorded) = d.pid_start {
        return if process_start(d.pid) == Some(recorded) {
            Ok(())
        } else {
            reused()
        };
    }
    let cmdline = fs::read(format!("/proc/{}/cmdline", d.pid)).unwrap_or_default();
    let runs_daemon = cmdline
        .split(|b| *b == 0)
        .nth(1)
        .is_some_and(|arg| arg == b"daemon");
    let wanted = std::path::absolute(home).unwrap_or_else(|_| home.to_owned());
    let mut expected = b"BIR_HOME=".to_vec();
    expected.extend_from_slice(wanted.as_os_str().as_encoded_bytes());
    let environ = fs::read(format!("/proc/{}/environ", d.pid)).unwrap_or_default();
    let this_home = environ.split(|b| *b == 0).any(|v| v == expected.as_slice());
    if runs_daemon && this_home {
        Ok(())
    } else {
        reused()
    }
}

/// When process `pid` started, in clock ticks since boot (`/proc/<pid>/stat`,
/// field 22): with the pid, it names one process. `None` where the OS does
/// not tell.
pub(crate) fn process_start(pid: u32) -> Option<u64> {
    let stat = fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name's closing parenthesis, from the
    // state (field 3): the start time is the 20th of them.
    let after = &stat[memchr::memrchr(b')', &stat)? + 1..];
    let text = std::str::from_utf8(after).ok()?;
    text.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// Removes the discovery file if it still names `pid` (a newer daemon's
/// file is left alone).
pub(crate) fn remove_if_ours(home: &Path, pid: u32) {
    if let Ok(Some(d)) = read(home)
        && d.pid == pid
    {
        let _ = fs::remove_file(discovery_path(home));
    }
}

/// Whether a process with this pid runs and is ours to signal (a pid
/// recycled by another user's process answers EPERM: not our daemon). A
/// zombie — a daemon that exited and was not reaped yet, which happens
/// where nothing reaps orphans — is not alive.
pub(crate) fn pid_alive(pid: u32) -> bool {
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    if unsafe { libc::kill(raw, 0) } != 0 {
        return false;
    }
    !is_zombie(pid)
}

#[cfg(target_os = "linux")]
fn is_zombie(pid: u32) -> bool {
    // The state follows the command name's closing parenthesis.
    std::fs::read(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let after = memchr::memrchr(b')', &stat).map_or(&stat[..0], |i| &stat[i + 1..]);
        after.trim_ascii_start().first() == Some(&b'Z')
    })
}

#[cfg(not(target_os = "linux"))]
fn is_zombie(_pid: u32) -> bool {
    false
}

/// The test suites' one wait (`tests/it/support/wait.rs`), shared by path
/// (each module whose tests wait includes it: no module of the library is
/// test-only, so there is no one place below all of them to put it).
#[cfg(test)]
#[allow(dead_code, unreachable_pub, clippy::duplicate_mod)]
#[path = "../../tests/it/support/wait.rs"]
mod test_wait;

#[cfg(test)]
mod tests {
    use super::test_wait as wait;
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn sample() -> Discovery {
        Discovery {
            url: "http://127.0.0.1:4242".into(),
            token: "ab".repeat(32),
            pid: 7,
            version: daemon_version(),
            started_at: 1,
            socket: None,
            pid_start: None,
        }
    }

    #[test]
    fn written_file_reads_back_and_is_private() {
        let dir = tempdir();
        write(&dir, &sample()).expect("write");
        assert_eq!(read(&dir).expect("read"), Some(sample()));
        let meta = fs::metadata(discovery_path(&dir)).expect("meta");
        assert_eq!(meta.mode() & 0o777, 0o600);
        let meta = fs::metadata(control_dir(&dir)).expect("meta");
        assert_eq!(meta.mode() & 0o777, 0o700);
    }

    #[test]
    fn refuses_symlink_loose_mode_and_garbage() {
        let dir = tempdir();
        write(&dir, &sample()).expect("write");
        let path = discovery_path(&dir);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(read(&dir).expect_err("0644").contains("mode"));
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("chmod");
        let real = dir.join("elsewhere.json");
        fs::rename(&path, &real).expect("move");
        std::os::unix::fs::symlink(&real, &path).expect("symlink");
        assert!(read(&dir).expect_err("symlink").contains("symlink"));
        fs::remove_file(&path).expect("rm");
        fs::write(&path, b"not json").expect("garbage");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("chmod");
        assert!(read(&dir).expect_err("garbage").contains("not a discovery"));
        fs::set_permissions(control_dir(&dir), fs::Permissions::from_mode(0o755)).expect("chmod");
        assert!(read(&dir).expect_err("dir").contains("0700"));
    }

    #[test]
    fn missing_is_none_and_removal_spares_other_pids() {
        let dir = tempdir();
        assert_eq!(read(&dir), Ok(None));
        write(&dir, &sample()).expect("write");
        remove_if_ours(&dir, 8);
        assert!(read(&dir).expect("read").is_some());
        remove_if_ours(&dir, 7);
        assert_eq!(read(&dir), Ok(None));
    }

    #[test]
    fn a_pid_is_the_daemon_only_with_its_start_time() {
        let dir = tempdir();
        let me = std::process::id();
        let start = process_start(me).expect("our start time");
        let mut d = sample();
        d.pid = me;
        d.pid_start = Some(start);
        assert_eq!(is_daemon(&dir, &d), Ok(()));
        d.pid_start = Some(start + 1);
        assert!(
            is_daemon(&dir, &d)
                .expect_err("reused")
                .contains("another process")
        );
        // No start time (an older build's file): this test is not
        // `bir daemon`, so it is not the daemon.
        d.pid_start = None;
        assert!(is_daemon(&dir, &d).is_err());
        d.pid = u32::MAX;
        assert!(
            is_daemon(&dir, &d)
                .expect_err("gone")
                .contains("not running")
        );
    }

    #[test]
    fn a_kept_port_reads_back_and_candidates_stay_in_range() {
        let dir = tempdir();
        assert_eq!(preferred_port(&dir), None);
        keep_port(&dir, 23456).expect("keep");
        assert_eq!(preferred_port(&dir), Some(23456));
        let meta = fs::metadata(port_path(&dir)).expect("meta");
        assert_eq!(meta.mode() & 0o777, 0o600);
        fs::set_permissions(port_path(&dir), fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(preferred_port(&dir), None, "a loose file is not ours");
        let ports: Vec<u16> = port_candidates(&dir).collect();
        assert_eq!(ports.len(), 16);
        assert!(ports.iter().all(|p| PORT_RANGE.contains(p)), "{ports:?}");
        assert_eq!(ports, port_candidates(&dir).collect::<Vec<_>>(), "stable");
        fs::remove_file(port_path(&dir)).expect("rm");
        let chosen = stable_port(&dir).expect("a port");
        assert!(ports.contains(&chosen), "{chosen}");
        assert_eq!(preferred_port(&dir), Some(chosen), "kept");
        assert_eq!(stable_port(&dir).expect("again"), chosen);
    }

    #[test]
    fn liveness() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(0));
        assert!(!pid_alive(u32::MAX));
        // An exited child not yet reaped is a zombie: not alive.
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id();
        wait::poll_until(std::time::Duration::from_secs(30), || !pid_alive(pid));
        assert!(!pid_alive(pid), "exited child still looks alive");
        child.wait().expect("reap");
    }

    fn tempdir() -> PathBuf {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "bir-discovery-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("mkdir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).expect("chmod");
        dir
    }
}
