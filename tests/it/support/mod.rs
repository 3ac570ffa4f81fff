//! Test support: the `bir` binary under test, temporary homes, and a scripted
//! host that drives a stdio MCP server the way an MCP client would;
//! [`wait`]: waiting on an event with a deadline, the slowness factor time
//! bounds scale with, and the lock timed tests hold; [`http`]: the one HTTP
//! stub server.
//!
//! Tests never touch the network or the real `$HOME`: every child process
//! gets `HOME` and `BIR_HOME` pointing into a fresh temporary directory.
//! Every wait here takes its deadline scaled by [`slowness`].

use std::io::{Read, Write};
use std::os::unix::fs::symlink;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

pub mod http;
pub mod wait;

pub use wait::{eventually, poll_until, scaled, serial, slowness, wait_for, wait_until};

/// The `bir` executable built for this test run.
pub fn bir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_bir"))
}

/// The real peers `scripts/install-peers.sh` installs (npm, PyPI).
pub fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers")
}

/// `path`, or a loud failure naming the script that installs it (real-peer
/// tests never skip).
pub fn require(path: PathBuf) -> PathBuf {
    assert!(
        path.exists(),
        "missing test peer {}: run scripts/install-peers.sh",
        path.display()
    );
    path
}

/// A scratch directory removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("bir-it-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("home")).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }

    /// A `bir-proxy` symlink to the binary under test, inside this dir.
    pub fn proxy_link(&self) -> PathBuf {
        let link = self.join("bir-proxy");
        if !link.exists() {
            symlink(bir(), &link).expect("symlink bir-proxy");
        }
        link
    }

    /// Writes a testpeer script and returns its path.
    pub fn script(&self, name: &str, script: &serde_json::Value) -> PathBuf {
        let path = self.join(name);
        std::fs::write(&path, serde_json::to_vec_pretty(script).expect("json"))
            .expect("write script");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The variables a spawned process inherits from the test process. Nothing
/// else crosses: a child starts from an empty environment, gets these, and
/// then what [`command`] and the test itself set.
///
/// An allow-list, not a deny-list: a developer's `CODEX_HOME`,
/// `CLAUDE_CONFIG_DIR`, `BIR_SERVICE_URL` or a variable some client adds
/// next year would otherwise steer `bir install` at the developer's real
/// files, or a test's recording at a real service.
///
/// * `PATH` — to find `sh`, `tar`, `node`, the shells and helper tools.
/// * `TMPDIR` — where the test process itself puts scratch files.
/// * `LLVM_PROFILE_FILE` — coverage tools collect from spawned binaries.
pub const INHERITED_ENV: [&str; 3] = ["PATH", "TMPDIR", "LLVM_PROFILE_FILE"];

/// A command isolated from the developer's machine: an empty environment
/// plus [`INHERITED_ENV`], with `HOME` and `BIR_HOME` inside `home`, and
/// the signals a host sends at their defaults (see [`isolated`]).
pub fn command(program: impl AsRef<std::ffi::OsStr>, home: &TempDir) -> Command {
    isolated(program, &home.join("home"))
}

/// Like [`command`], for a `HOME` that is not a [`TempDir`]'s (`BIR_HOME` is
/// `<home>/.baseinstrunner`).
///
/// The process starts as a terminal starts a host: SIGHUP, SIGINT, SIGQUIT
/// and SIGTERM at their defaults. A signal the test runner ignores (SIGINT
/// and SIGQUIT in a background job of a non-interactive shell, SIGHUP
/// under `nohup`) would otherwise stay ignored across exec, down to a
/// proxy's server, which then outlives the host's signal with or without
/// bir in between.
pub fn isolated(program: impl AsRef<std::ffi::OsStr>, home: &Path) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(program);
    // SAFETY: `signal` is async-signal-safe; nothing else runs between
    // fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    cmd.env_clear();
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.env("HOME", home)
        .env("BIR_HOME", home.join(".baseinstrunner"));
    cmd
}

/// What a host saw of a session.
#[derive(Debug)]
pub struct Seen {
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub status: ExitStatus,
    pub elapsed: Duration,
}

impl Seen {
    /// The JSON values received, in order (lines that do not parse skipped).
    pub fn messages(&self) -> Vec<serde_json::Value> {
        self.stdout
            .split(|&b| b == b'\n')
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect()
    }

    /// `code N` or `signal N`.
    pub fn exit(&self) -> String {
        describe_status(self.status)
    }
}

pub fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("code {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "unknown".into(),
    }
}

/// Shared buffer of what the child printed on stdout.
#[derive(Default)]
struct Collected {
    bytes: Vec<u8>,
    newlines: usize,
    closed: bool,
}

/// A running host session over a child's stdio.
pub struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<(Mutex<Collected>, Condvar)>,
    err: Arc<Mutex<Vec<u8>>>,
    /// Set once the child's stderr reads end of file.
    err_closed: Arc<AtomicBool>,
    started: Instant,
}

impl Host {
    pub fn start(mut cmd: Command) -> Host {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn host target");
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().expect("stdout");
        let mut stderr = child.stderr.take().expect("stderr");
        let out = Arc::new((Mutex::new(Collected::default()), Condvar::new()));
        let out2 = Arc::clone(&out);
        thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = stdout.read(&mut buf).unwrap_or(0);
                let (lock, cv) = &*out2;
                let mut c = lock.lock().expect("lock");
                if n == 0 {
                    c.closed = true;
                    cv.notify_all();
                    return;
                }
                c.newlines += buf[..n].iter().filter(|&&b| b == b'\n').count();
                c.bytes.extend_from_slice(&buf[..n]);
                cv.notify_all();
            }
        });
        let err = Arc::new(Mutex::new(Vec::new()));
        let err2 = Arc::clone(&err);
        let err_closed = Arc::new(AtomicBool::new(false));
        let err_closed2 = Arc::clone(&err_closed);
        thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = stderr.read(&mut buf).unwrap_or(0);
                if n == 0 {
                    err_closed2.store(true, Ordering::SeqCst);
                    return;
                }
                err2.lock().expect("lock").extend_from_slice(&buf[..n]);
            }
        });
        Host {
            child,
            stdin,
            out,
            err,
            err_closed,
            started: Instant::now(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(bytes);
            let _ = stdin.flush();
        }
    }

    pub fn send(&mut self, msg: &serde_json::Value) {
        let mut line = serde_json::to_vec(msg).expect("json");
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// Waits until at least `n` lines arrived on stdout in total.
    pub fn wait_lines(&self, n: usize, timeout: Duration) -> bool {
        let (lock, cv) = &*self.out;
        let deadline = Instant::now() + scaled(timeout);
        let mut c = lock.lock().expect("lock");
        while c.newlines < n && !c.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            c = cv.wait_timeout(c, left).expect("wait").0;
        }
        c.newlines >= n
    }

    /// Waits until the child's stdout reads end of file.
    pub fn wait_stdout_closed(&self, timeout: Duration) -> bool {
        let (lock, cv) = &*self.out;
        let deadline = Instant::now() + scaled(timeout);
        let mut c = lock.lock().expect("lock");
        while !c.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            c = cv.wait_timeout(c, left).expect("lock").0;
        }
        true
    }

    pub fn stdout_so_far(&self) -> Vec<u8> {
        self.out.0.lock().expect("lock").bytes.clone()
    }

    pub fn stderr_so_far(&self) -> String {
        String::from_utf8_lossy(&self.err.lock().expect("lock")).into_owned()
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }

    /// Waits up to `timeout` for the child to exit on its own, with its
    /// stdin still open (so a signal test is not raced by end of input).
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        poll_until(timeout, || matches!(self.child.try_wait(), Ok(Some(_))))
    }

    /// Waits for the child to exit (killing it after `timeout`) and returns
    /// everything seen.
    pub fn finish(mut self, timeout: Duration) -> Seen {
        self.stdin = None;
        let status = match eventually(timeout, || self.child.try_wait().ok().flatten()) {
            Some(status) => status,
            None => {
                let _ = self.child.kill();
                let status = self.child.wait().expect("wait");
                panic!(
                    "the process did not exit within {:?} (killed: {status:?}); stderr:\n{}",
                    scaled(timeout),
                    self.stderr_so_far()
                );
            }
        };
        let elapsed = self.started.elapsed();
        // Let the reader threads drain the pipes. A grandchild that kept
        // them open (a server's own child) holds them past the exit: the
        // drain then gives up, non-fatally.
        let (lock, cv) = &*self.out;
        let mut c = lock.lock().expect("lock");
        let drain_deadline = Instant::now() + Duration::from_secs(5);
        while !c.closed && Instant::now() < drain_deadline {
            c = cv
                .wait_timeout(c, Duration::from_millis(50))
                .expect("wait")
                .0;
        }
        let stdout = c.bytes.clone();
        drop(c);
        let err_closed = Arc::clone(&self.err_closed);
        poll_until(Duration::from_secs(1), || err_closed.load(Ordering::SeqCst));
        Seen {
            stdout,
            stderr: self.stderr_so_far(),
            status,
            elapsed,
        }
    }
}

/// True while a process with this pid exists (and is not a zombie).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits until `pid` is gone, up to `timeout`.
pub fn wait_gone(pid: i32, timeout: Duration) -> bool {
    poll_until(timeout, || !alive(pid))
}

/// Reads a pid written by a testpeer `pidfile` action, waiting for it.
pub fn read_pid(path: &Path, timeout: Duration) -> i32 {
    wait_for(
        &format!("a pid file at {}", path.display()),
        timeout,
        || std::fs::read_to_string(path).ok()?.trim().parse().ok(),
    )
}

/// The peak memory a live process allocated itself, in KiB (`VmHWM` less
/// `RssFile`; see below).
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in /proc/{pid}/status"))
    };
    // The high-water mark less the pages mapped from files (the executable
    // and its libraries): those grow with the size of a debug build, not
    // with anything the process holds, and are never freed before exit, so
    // what remains is the peak of the memory the process itself allocated.
    field("VmHWM:").saturating_sub(field("RssFile:"))
}

/// What `bir runs export latest` prints once the latest run in `home` is
/// finished (its `finish` set), asked again until `timeout` (scaled); the
/// test fails otherwise. Recording is asynchronous: a run finishes a
/// moment after the session that made it ended.
pub fn finished_export(home: &TempDir, timeout: Duration) -> serde_json::Value {
    wait_for(
        "a finished run from `bir runs export latest`",
        timeout,
        || {
            let out = command(bir(), home)
                .args(["runs", "export", "latest"])
                .output()
                .ok()?;
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            (out.status.success() && !doc["finish"].is_null()).then_some(doc)
        },
    )
}

/// Bytes a process has read so far (`rchar` of `/proc/<pid>/io`).
pub fn bytes_read_by(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("rchar:").map(|v| v.trim().parse().ok()))
        })
        .flatten()
        .unwrap_or(0)
}
