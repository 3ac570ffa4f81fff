//! The upstream server process: started without a shell, in a process group
//! of its own, tied to the proxy's life, with its stderr passed through.
//!
//! Invariants:
//! * The child is exactly `command args…` (no shell, no quoting).
//! * It leads its own process group, so the proxy can signal everything it
//!   started, and it receives SIGKILL if the proxy dies (Linux
//!   `PR_SET_PDEATHSIG`). What *it* starts does not inherit that (a server
//!   started through `sh -c`, `npx` or `uvx` is a grandchild), so a
//!   watchdog ([`guard_group`]) kills the whole group once the proxy is
//!   gone, however it went: a killed proxy leaves no orphan.
//! * Its stderr is copied to the proxy's stderr line by line with a
//!   `[name] ` prefix, on a thread of its own, so a chatty server never
//!   blocks on a full pipe because of the relay. The proxy lets the copier
//!   finish (bounded) before it exits, so the server's last lines survive.

use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;

use super::config::ProxyConfig;

/// A started upstream and its pipes.
pub(crate) struct Spawned {
    pub child: Child,
    /// Process id, which is also its process-group id.
    pub pid: i32,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

/// Starts the upstream server.
pub(crate) fn spawn(cfg: &ProxyConfig) -> io::Result<Spawned> {
    let mut cmd = Command::new(&cfg.program);
    cmd.args(&cfg.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs between fork and exec and calls only
    // async-signal-safe functions (setpgid, prctl, getppid, sigprocmask,
    // _exit) on local data.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The proxy died between fork and prctl: do not outlive it.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
            }
            // The proxy blocks the signals it forwards; the server must not
            // inherit that mask.
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (Some(stdin), Some(stdout), Some(stderr)) = pipes else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(io::Error::other("the server's pipes were not created"));
    };
    let pid = child.id() as i32;
    if let Err(err) = guard_group(pid) {
        log::warn!(
            "no watchdog for the server's process group ({err}); if bir-proxy is killed, what the server started may outlive it"
        );
    }
    enlarge_pipe(&stdout);
    Ok(Spawned {
        child,
        pid,
        stdin,
        stdout,
        stderr,
    })
}

/// Starts a watchdog for the process group `pgid`: a forked copy of the
/// proxy that holds nothing but the read end of a pipe whose write end only
/// the proxy holds (close-on-exec, so no server inherits it). When the
/// proxy's process ends, however it ends (SIGKILL included), the pipe
/// reports end of file and the watchdog sends SIGKILL to the group, then
/// exits: nothing the server started outlives the proxy. While the proxy
/// lives, the watchdog only waits in `read`.
///
/// The child runs only async-signal-safe calls (the proxy has threads; a
/// forked copy may use nothing that locks or allocates). It names itself
/// `bir-watchdog` (its argv is still the proxy's). It closes every
/// other descriptor first, so it never keeps the host's pipes open, and
/// leaves the proxy's process group, so signals meant for the proxy's
/// group do not end it before it has done its one job.
fn guard_group(pgid: i32) -> io::Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let [read_end, write_end] = fds;
    // SAFETY: the child branch below calls only async-signal-safe
    // functions (prctl, setpgid, sigprocmask, close, syscall(close_range), read,
    // kill, _exit) on local data, then exits without returning.
    match unsafe { libc::fork() } {
        -1 => {
            let err = io::Error::last_os_error();
            // SAFETY: both descriptors were just opened here.
            unsafe {
                libc::close(read_end);
                libc::close(write_end);
            }
            Err(err)
        }
        0 => unsafe {
            // A name of its own, so `ps` (and a host's process checks) tell
            // it from the proxy whose argv it shares.
            libc::prctl(libc::PR_SET_NAME, c"bir-watchdog".as_ptr(), 0, 0, 0);
            libc::setpgid(0, 0);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            close_all_but(read_end);
            let mut byte = 0u8;
            loop {
                let n = libc::read(read_end, (&raw mut byte).cast(), 1);
                if n < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                break;
            }
            libc::kill(-pgid, libc::SIGKILL);
            libc::_exit(0)
        },
        _watchdog => {
            // SAFETY: the read end is the watchdog's now.
            unsafe { libc::close(read_end) };
            // The write end stays open for the rest of the proxy's life on
            // purpose: its closing, when the process ends, is the signal.
            Ok(())
        }
    }
}

/// Closes every descriptor except `keep` (in a forked child: async-signal
/// safe, no allocation).
///
/// # Safety
/// Only for a process about to do nothing but its own small job: it takes
/// away every descriptor, including the standard ones.
unsafe fn close_all_but(keep: libc::c_int) {
    let keep = keep as libc::c_uint;
    // SAFETY: close_range takes plain integers; a failure (an old kernel)
    // falls back to closing one by one.
    let ranged = unsafe {
        (keep == 0 || libc::syscall(libc::SYS_close_range, 0u32, keep - 1, 0u32) == 0)
            && libc::syscall(libc::SYS_close_range, keep + 1, u32::MAX, 0u32) == 0
    };
    if !ranged {
        for fd in 0..65_536u32 {
            if fd != keep {
                // SAFETY: closing a descriptor that is not open is harmless.
                unsafe { libc::close(fd as libc::c_int) };
            }
        }
    }
}

/// Why the server could not start, for a user: the OS's reason, and what
/// it means where the OS misleads. `execve` says "No such file or
/// directory" of a script whose `#!` interpreter is missing (the script is
/// right there) and of a name not on PATH, "Permission denied" of a
/// directory; the file, or the PATH, is what to fix.
pub(crate) fn start_error(program: &str, err: &io::Error) -> String {
    let hint = match locate(program) {
        Some(path) => what_is_wrong(&path, err),
        None if err.kind() == io::ErrorKind::NotFound => {
            Some(format!("'{program}' is not on PATH"))
        }
        None => None,
    };
    match hint {
        Some(hint) => format!("{err}; {hint}"),
        None => err.to_string(),
    }
}

/// The file `program` runs: itself when it holds a slash, else the first
/// match on PATH (where `execvp` looks).
fn locate(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.exists())
}

/// What is wrong with an existing file `execve` refused, when its error
/// does not say it; `None` where the error is already the whole story.
fn what_is_wrong(path: &Path, err: &io::Error) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    let shown = path.display();
    if meta.is_dir() {
        return Some(format!("'{shown}' is a directory"));
    }
    match err.raw_os_error()? {
        libc::EACCES if meta.permissions().mode() & 0o111 == 0 => {
            Some(format!("'{shown}' is not executable (chmod +x)"))
        }
        libc::ENOENT => Some(match interpreter(path) {
            Some(interpreter) => {
                format!("'{shown}' exists, but its interpreter '{interpreter}' (line 1) does not")
            }
            None => format!(
                "'{shown}' exists, but the loader it needs does not (built for another system?)"
            ),
        }),
        _ => None,
    }
}

/// The interpreter a `#!` line names, if the file starts with one.
fn interpreter(path: &Path) -> Option<String> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next().unwrap_or(line);
    let name = line
        .split(u8::is_ascii_whitespace)
        .find(|w| !w.is_empty())?;
    Some(String::from_utf8_lossy(name).into_owned())
}

/// The capacity asked for the server's stdout pipe. A default pipe holds
/// 64 KiB, so a 10 MiB answer costs the server and the proxy 160 wake-ups
/// each; at 1 MiB (the most an unprivileged process may ask for, by
/// default) it costs 10.
const UPSTREAM_PIPE_BYTES: libc::c_int = 1024 * 1024;

/// Best effort: a system with a lower `pipe-max-size` keeps the default.
fn enlarge_pipe(pipe: &impl std::os::fd::AsRawFd) {
    #[cfg(target_os = "linux")]
    // SAFETY: fcntl on a descriptor we own, with an integer argument.
    unsafe {
        libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, UPSTREAM_PIPE_BYTES);
    }
}

/// Copies the server's stderr to ours, each line prefixed with `[name] `.
///
/// The returned receiver disconnects once everything the server wrote has
/// been passed on (its stderr closed, or the copier could not start): the
/// proxy waits on it, bounded, before it exits, because a server's last
/// lines (why it failed) are the ones a user needs, and a proxy that exits
/// first loses whatever the copier had not written yet.
pub(crate) fn spawn_stderr_copier(name: &str, mut from: ChildStderr) -> Receiver<()> {
    let prefix = format!("[{name}] ").into_bytes();
    let (copying, copied) = mpsc::channel::<()>();
    let spawned = thread::Builder::new()
        .name("bir-stderr".into())
        .stack_size(128 * 1024)
        .spawn(move || {
            // Dropped when the thread ends: that is the signal.
            let _copying = copying;
            let mut buf = vec![0u8; 16 * 1024];
            let mut at_line_start = true;
            let mut out = Vec::with_capacity(buf.len() + 256);
            loop {
                let n = match from.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                out.clear();
                for line in buf[..n].split_inclusive(|&b| b == b'\n') {
                    if at_line_start {
                        out.extend_from_slice(&prefix);
                    }
                    out.extend_from_slice(line);
                    at_line_start = line.ends_with(b"\n");
                }
                // If our own stderr is gone, keep draining the server's.
                let _ = io::stderr().lock().write_all(&out);
            }
            if !at_line_start {
                let _ = io::stderr().lock().write_all(b"\n");
            }
        });
    if let Err(err) = spawned {
        log::warn!("cannot copy the server's stderr: {err}");
    }
    copied
}
