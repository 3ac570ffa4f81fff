//! The daemon's Unix socket: where the Claude Code mod (`bir install
//! --mod`) reaches it, and the rules that keep that socket private.
//!
//! The socket carries no token: its permissions are the credential. So
//! where it lives is the security boundary, and every rule below is about
//! making sure nobody else could have put something there first or can
//! reach it now:
//!
//! * **Base directory.** `$XDG_RUNTIME_DIR` when it is set, absolute and
//!   private; else Claude Code's configuration directory
//!   (`$CLAUDE_CONFIG_DIR`, else `$HOME/.claude`). Nothing else — the
//!   system temporary directory and `/tmp` never, nor any directory other
//!   users can write: another user could bind the path first and read what
//!   the session sends, or park a file there and silence the link. A base
//!   is *checked, not trusted*: a symlink, a directory of another uid, or a
//!   group- or world-writable one is passed over ([`check_base`]).
//! * **Directory of our own.** `<base>/bir`, created 0700 and checked again
//!   (ours, a real directory, no group/other bits) before the bind.
//! * **Name.** `<16 hex>.sock`: two FNV-1a passes over `$BIR_HOME` (one
//!   daemon per `$BIR_HOME`, so one socket per daemon), computed the same
//!   way by the mod (`mod/bir-mod/hooks/bir.js`). A base whose whole path
//!   would pass [`MAX_PATH_BYTES`] is skipped rather than truncated.
//! * **Stale or live.** A socket file left at the path is probed: nobody
//!   listening (`ECONNREFUSED`) → stale, removed; a listener that answers
//!   `GET /health` with [`HEALTH_MARKER`] → a live daemon, refused (the
//!   second instance never steals the path); anything else there (a
//!   regular file, a socket of someone else's) is left alone and refused.
//! * **Peer.** Every accepted connection's `SO_PEERCRED` uid must be ours
//!   (checked before a byte is read); the directory's mode already keeps
//!   others out, this is the second lock on the same door.

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The `link` value `GET /health` answers over the socket: how a probe
/// tells a live bir daemon from a stale file or someone else's socket, and
/// how the mod knows it reached bir.
pub(crate) const HEALTH_MARKER: &str = "bir-daemon";

/// The one `Host` a request over the socket may name (the mod's URLs are
/// `http://bir/...`; over a Unix socket the host is only this header).
pub(crate) const SOCKET_HOST: &str = "bir";

/// The longest socket path used, in bytes: Claude Code's
/// `HttpInit.socketPath` says about 100 at most (Linux holds 108).
pub(crate) const MAX_PATH_BYTES: usize = 100;

/// The directory under the base that holds bir's sockets.
const DIR_NAME: &str = "bir";

/// How long a probe of a socket found at our path may take.
const PROBE_DEADLINE: Duration = Duration::from_millis(500);

/// The variables the base is taken from (the mod reads the same ones).
#[derive(Debug, Clone, Default)]
pub(crate) struct BaseEnv {
    pub xdg_runtime_dir: Option<String>,
    pub claude_config_dir: Option<String>,
    pub home: Option<String>,
}

impl BaseEnv {
    pub(crate) fn from_process() -> BaseEnv {
        let var = |n: &str| std::env::var(n).ok();
        BaseEnv {
            xdg_runtime_dir: var("XDG_RUNTIME_DIR"),
            claude_config_dir: var("CLAUDE_CONFIG_DIR"),
            home: var("HOME"),
        }
    }

    /// The bases in the order they are tried (unchecked): the run
    /// directory, then Claude Code's configuration directory. A relative
    /// or empty value names nothing.
    pub(crate) fn candidates(&self) -> Vec<PathBuf> {
        let absolute = |v: &Option<String>| {
            v.as_deref()
                .filter(|s| s.starts_with('/'))
                .map(|s| PathBuf::from(trim_slashes(s)))
        };
        let mut bases = Vec::new();
        if let Some(run) = absolute(&self.xdg_runtime_dir) {
            bases.push(run);
        }
        match absolute(&self.claude_config_dir) {
            Some(config) => bases.push(config),
            None => {
                if let Some(home) = absolute(&self.home) {
                    bases.push(home.join(".claude"));
                }
            }
        }
        bases
    }
}

fn trim_slashes(s: &str) -> &str {
    let t = s.trim_end_matches('/');
    if t.is_empty() { "/" } else { t }
}

/// FNV-1a (32 bits) over UTF-16 code units from `basis`: the unit the mod's
/// JavaScript strings are made of, so both sides hash the same sequence.
fn fnv1a32(text: &str, basis: u32) -> u32 {
    text.encode_utf16().fold(basis, |hash, unit| {
        (hash ^ u32::from(unit)).wrapping_mul(0x0100_0193)
    })
}

/// The socket's file name for the daemon of `bir_home`: 16 hex digits (two
/// FNV-1a passes from different offsets) and `.sock`. Trailing slashes do
/// not count, so `/h/` and `/h` name one daemon.
pub(crate) fn socket_name(bir_home: &str) -> String {
    let key = trim_slashes(bir_home);
    format!(
        "{:08x}{:08x}.sock",
        fnv1a32(key, 0x811c_9dc5),
        fnv1a32(key, 0xcbf2_9ce4)
    )
}

fn my_uid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Whether `base` may hold bir's socket directory: a real directory (not a
/// symlink), ours, not writable by group or others, and not the system's
/// temporary directory.
pub(crate) fn check_base(base: &Path) -> Result<(), String> {
    let shown = base.display();
    let tmp = std::env::temp_dir();
    if base == Path::new("/tmp") || base == tmp || base == tmp.join("") {
        return Err(format!(
            "{shown} is the system's temporary directory (refused)"
        ));
    }
    let meta = std::fs::symlink_metadata(base).map_err(|e| format!("{shown}: {e}"))?;
    if meta.file_type().is_symlink() {
        return Err(format!("{shown} is a symlink (refused)"));
    }
    if !meta.is_dir() {
        return Err(format!("{shown} is not a directory"));
    }
    if meta.uid() != my_uid() {
        return Err(format!("{shown} belongs to uid {}, not to us", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{shown} has mode {:o}: writable by group or others (refused)",
            meta.mode() & 0o777
        ));
    }
    Ok(())
}

/// Where the socket for the daemon of `bir_home` goes: the first base that
/// passes [`check_base`] and gives a path of at most [`MAX_PATH_BYTES`].
/// `Err` says why there is none (every reason, base by base).
pub(crate) fn resolve(env: &BaseEnv, bir_home: &str) -> Result<PathBuf, String> {
    let name = socket_name(bir_home);
    let mut refused = Vec::new();
    for base in env.candidates() {
        if let Err(why) = check_base(&base) {
            refused.push(why);
            continue;
        }
        let path = base.join(DIR_NAME).join(&name);
        let len = path.as_os_str().len();
        if len > MAX_PATH_BYTES {
            refused.push(format!(
                "{} is {len} bytes, over {MAX_PATH_BYTES}",
                path.display()
            ));
            continue;
        }
        return Ok(path);
    }
    if refused.is_empty() {
        refused.push("none of XDG_RUNTIME_DIR, CLAUDE_CONFIG_DIR, HOME names a directory".into());
    }
    Err(refused.join("; "))
}

/// The socket directory (`<base>/bir`): created 0700 if missing, then
/// checked like the discovery directory (ours, a real directory, 0700).
fn prepare_dir(dir: &Path) -> Result<(), String> {
    crate::home::ensure_private_dir(dir).map_err(|e| e.to_string())?;
    super::discovery::check_private_dir(dir)
}

/// What was found at the socket's path before binding.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Occupant {
    /// Nothing there.
    Free,
    /// A socket nobody listens on (a dead daemon's): safe to remove.
    Stale,
    /// A bir daemon answers there: a second instance must not take it.
    Live,
    /// Something else (a regular file, a directory, someone else's socket,
    /// a listener that is not bir): never removed.
    Foreign(String),
}

/// Looks at what is at `path` without changing it.
pub(crate) fn occupant(path: &Path) -> Occupant {
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Occupant::Free,
        Err(e) => return Occupant::Foreign(e.to_string()),
        Ok(m) => m,
    };
    if !meta.file_type().is_socket() {
        return Occupant::Foreign("not a socket".into());
    }
    if meta.uid() != my_uid() {
        return Occupant::Foreign(format!("a socket of uid {}", meta.uid()));
    }
    match UnixStream::connect(path) {
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Occupant::Stale,
        Err(e) => Occupant::Foreign(e.to_string()),
        Ok(stream) => match probe(stream) {
            Some(true) => Occupant::Live,
            _ => Occupant::Foreign("a listener that is not a bir daemon".into()),
        },
    }
}

/// `GET /health` over `stream`: whether the answer carries our marker
/// (`None`: no answer in time).
fn probe(mut stream: UnixStream) -> Option<bool> {
    stream.set_read_timeout(Some(PROBE_DEADLINE)).ok()?;
    stream.set_write_timeout(Some(PROBE_DEADLINE)).ok()?;
    let request =
        format!("GET /health HTTP/1.1\r\nHost: {SOCKET_HOST}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = Vec::new();
    let _ = stream.take(64 * 1024).read_to_end(&mut answer);
    let marker = format!("\"link\":\"{HEALTH_MARKER}\"");
    Some(memchr::memmem::find(&answer, marker.as_bytes()).is_some())
}

/// Binds the daemon's socket at `path` by the rules above. A stale socket
/// is removed first; a live daemon or anything foreign is refused.
pub(crate) fn bind(path: &Path) -> Result<UnixListener, String> {
    let dir = path
        .parent()
        .ok_or_else(|| format!("{} has no directory", path.display()))?;
    prepare_dir(dir)?;
    match occupant(path) {
        Occupant::Free => {}
        Occupant::Stale => {
            log::info!("removing a stale socket at {}", path.display());
            std::fs::remove_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Occupant::Live => {
            return Err(format!(
                "another bir daemon answers at {} (refused: one instance per socket)",
                path.display()
            ));
        }
        Occupant::Foreign(what) => {
            return Err(format!(
                "{} is taken by something else ({what}); left alone",
                path.display()
            ));
        }
    }
    let listener = UnixListener::bind(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // The directory is what keeps others out; the socket's own mode says
    // the same, for a reader of `ls -l`.
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    Ok(listener)
}

/// The uid of the process at the other end of `stream` (`SO_PEERCRED`).
pub(crate) fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is a valid, writable ucred and `len` its size.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Whether the peer of `stream` may talk to the daemon: the same uid as
/// `expected` (the daemon's own).
pub(crate) fn peer_allowed(stream: &UnixStream, expected: u32) -> bool {
    matches!(peer_uid(stream), Ok(uid) if uid == expected)
}

/// The daemon's own uid, the one a peer must have.
pub(crate) fn own_uid() -> u32 {
    my_uid()
}

/// Removes the socket at `path` if it is still ours to remove: a socket
/// file (never anything else), which a newer daemon has not replaced
/// (`inode` is the one we bound).
pub(crate) fn remove_if_ours(path: &Path, inode: u64) {
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && meta.file_type().is_socket()
        && meta.ino() == inode
    {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(tag: &str) -> PathBuf {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        // Under the current directory (the crate), not /tmp: the checks
        // refuse the system temporary directory by design.
        let dir = std::env::current_dir()
            .expect("cwd")
            .join("target")
            .join(format!(
                "uds-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        dir
    }

    fn env_with(xdg: Option<&Path>, config: Option<&Path>, home: Option<&Path>) -> BaseEnv {
        let s = |p: Option<&Path>| p.map(|p| p.display().to_string());
        BaseEnv {
            xdg_runtime_dir: s(xdg),
            claude_config_dir: s(config),
            home: s(home),
        }
    }

    #[test]
    fn names_are_short_hashes_of_bir_home() {
        let a = socket_name("/home/u/.baseinstrunner");
        assert_eq!(a.len(), 16 + ".sock".len());
        assert!(a[..16].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(a, socket_name("/home/u/.baseinstrunner/"));
        assert_ne!(a, socket_name("/home/v/.baseinstrunner"));
        // The two halves are different hashes, not one repeated.
        assert_ne!(a[..8], a[8..16]);
        // FNV-1a's published value for "a" (32-bit, offset basis 0x811c9dc5).
        assert_eq!(fnv1a32("a", 0x811c_9dc5), 0xe40c_292c);
    }

    #[test]
    fn bases_in_order_and_relative_ones_ignored() {
        let env = BaseEnv {
            xdg_runtime_dir: Some("/run/user/1".into()),
            claude_config_dir: None,
            home: Some("/home/u/".into()),
        };
        assert_eq!(
            env.candidates(),
            [
                PathBuf::from("/run/user/1"),
                PathBuf::from("/home/u/.claude")
            ]
        );
        let env = BaseEnv {
            xdg_runtime_dir: Some("relative/run".into()),
            claude_config_dir: Some("/cfg".into()),
            home: Some("/home/u".into()),
        };
        assert_eq!(env.candidates(), [PathBuf::from("/cfg")]);
        assert!(BaseEnv::default().candidates().is_empty());
    }

    #[test]
    fn private_base_is_used_and_loose_or_linked_ones_are_passed_over() {
        let t = tempdir("base");
        let run = t.join("run");
        let config = t.join("cfg");
        for d in [&run, &config] {
            std::fs::create_dir(d).expect("mkdir");
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        }
        let path = resolve(&env_with(Some(&run), Some(&config), None), "/h").expect("resolved");
        assert_eq!(path, run.join("bir").join(socket_name("/h")));

        // Group-writable run dir: refused, the config dir is used.
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o770)).expect("chmod");
        assert!(check_base(&run).expect_err("loose").contains("writable"));
        let path = resolve(&env_with(Some(&run), Some(&config), None), "/h").expect("resolved");
        assert!(path.starts_with(&config), "{}", path.display());

        // World-writable: refused too.
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o703)).expect("chmod");
        assert!(check_base(&run).is_err());

        // A symlink to a private dir: refused (checked, not followed).
        let link = t.join("link");
        std::os::unix::fs::symlink(&config, &link).expect("symlink");
        assert!(check_base(&link).expect_err("link").contains("symlink"));
        let err = resolve(&env_with(Some(&link), None, None), "/h").expect_err("no base");
        assert!(err.contains("symlink"), "{err}");

        // The system temporary directory and /tmp, never.
        assert!(check_base(Path::new("/tmp")).is_err());
        assert!(check_base(&std::env::temp_dir()).is_err());
        let _ = std::fs::remove_dir_all(&t);
    }

    #[test]
    fn a_path_over_the_limit_skips_that_base() {
        let t = tempdir("long");
        let long = t.join("x".repeat(90));
        std::fs::create_dir(&long).expect("mkdir");
        std::fs::set_permissions(&long, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let err = resolve(&env_with(Some(&long), None, None), "/h").expect_err("too long");
        assert!(err.contains("over 100"), "{err}");
        let short = t.join("s");
        std::fs::create_dir(&short).expect("mkdir");
        std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let path = resolve(&env_with(Some(&long), Some(&short), None), "/h").expect("short");
        assert!(path.as_os_str().len() <= MAX_PATH_BYTES);
        assert!(path.starts_with(&short));
        let _ = std::fs::remove_dir_all(&t);
    }

    #[test]
    fn stale_sockets_are_replaced_and_foreign_files_left_alone() {
        let t = tempdir("stale");
        let dir = t.join("bir");
        let path = dir.join("s.sock");
        assert_eq!(occupant(&path), Occupant::Free);
        // A socket whose listener is gone.
        let first = bind(&path).expect("bind");
        drop(first);
        assert_eq!(occupant(&path), Occupant::Stale);
        let second = bind(&path).expect("a stale socket is replaced");
        let meta = std::fs::metadata(&path).expect("meta");
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(&dir).expect("dir").mode() & 0o777, 0o700);
        drop(second);
        // A regular file at the path: never removed.
        std::fs::remove_file(&path).expect("rm");
        std::fs::write(&path, b"not a socket").expect("write");
        assert!(matches!(occupant(&path), Occupant::Foreign(_)));
        assert!(bind(&path).is_err());
        assert_eq!(std::fs::read(&path).expect("kept"), b"not a socket");
        let _ = std::fs::remove_dir_all(&t);
    }

    #[test]
    fn a_live_daemon_is_not_displaced_and_a_mute_listener_is_foreign() {
        let t = tempdir("live");
        let path = t.join("bir").join("l.sock");
        let listener = bind(&path).expect("bind");
        // Answer one probe like a live daemon.
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf);
            let body = format!("{{\"link\":\"{HEALTH_MARKER}\"}}");
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            listener
        });
        let err = bind(&path).expect_err("a live daemon holds it");
        assert!(err.contains("another bir daemon"), "{err}");
        let listener = server.join().expect("server");
        // A listener that answers something else is not ours to remove.
        let mute = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
            listener
        });
        assert!(matches!(occupant(&path), Occupant::Foreign(_)));
        drop(mute.join().expect("mute"));
        let _ = std::fs::remove_dir_all(&t);
    }

    #[test]
    fn peer_credentials_name_the_connecting_uid() {
        let (a, _b) = UnixStream::pair().expect("pair");
        assert_eq!(peer_uid(&a).expect("cred"), own_uid());
        assert!(peer_allowed(&a, own_uid()));
        assert!(!peer_allowed(&a, own_uid().wrapping_add(1)));
    }
}
