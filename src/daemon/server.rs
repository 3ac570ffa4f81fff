//! `bir daemon`: the recorder daemon process (started by
//! `client::ensure_running`, detached; not meant to be typed).
//!
//! Concurrency model (chosen by measurement, `bench/README.md`): one
//! accept loop, one short-lived thread per connection, and the engine with
//! its sinks behind one mutex, so every input is handled whole and in
//! arrival order. A ticker thread drives the engine's timers and the idle
//! exit; a signal thread turns SIGTERM/SIGINT/SIGHUP into a clean stop.
//!
//! Start-up invariants:
//! * Exactly one daemon per `$BIR_HOME`: it holds an exclusive `flock` on
//!   `control/daemon.lock` for its whole life; a second one says who holds
//!   it and exits 1 without touching the discovery file.
//! * The port is the same from one start to the next when it is free
//!   (`control/port`), so a URL written into a settings file stays right.
//! * The discovery file is written only after the lock is held and the
//!   port is bound, and replaces whatever stale file was there (a dead
//!   pid's, another build's, garbage, or a symlink — the rename replaces
//!   the link itself, never its target).
//! * It exits when its discovery file no longer names it (checked every
//!   second): nobody could reach it any more.
//! * On the way out every open run is finished (`Engine::shutdown`), the
//!   journals synced, and the discovery file removed if it still names us.
//!
//! Who may use a place (another local user must neither write into this
//! user's runs nor starve its hooks):
//! * A loopback TCP connection whose peer socket belongs to another uid
//!   (`tcpowner`, Linux) is closed at accept, before a byte is read and
//!   before it counts against anything. Root is another uid too.
//! * A connection that has not shown the token yet is *pre-authentication*:
//!   at most [`MAX_PRE_AUTH`] at once (more are answered 503 at once), and
//!   its head (which carries the token) must be in within
//!   [`HEAD_DEADLINE`] of its accept.
//! * Only a connection that passed the token counts against
//!   [`MAX_CONNECTIONS`], the ones served at once.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use super::armed_guides;
use super::discovery::{self, Discovery};
use super::http::{self, Conn, Guard, Limits, Method, Refused, Request};
use super::sinks::Core;
use super::tcpowner::{self, Lookup};
use super::transcripts::TranscriptReader;
use super::uds;
use super::{Health, SessionView, SessionsAnswer};
use crate::bound::hosts::Host;
use crate::bound::process::ProcessId;
use crate::bound::{Engine, EngineConfig, Input, wire};
use crate::cli::Exit;
use crate::error::{Error, ExitStatus};
use crate::home;
use crate::record::store::Store;

/// Authenticated connections served at once; more are refused with 503.
pub(crate) const MAX_CONNECTIONS: usize = 32;
/// Connections still reading their head (not yet authenticated) at once;
/// more are refused with 503. Apart from [`MAX_CONNECTIONS`], so callers
/// that never show a token cannot take the places of the ones that do.
const MAX_PRE_AUTH: usize = 64;
/// From accept to the end of the request's head. Every client of ours
/// writes its head in one go right after connecting; a connection that
/// sends nothing (or a byte at a time) gives its place up after this.
const HEAD_DEADLINE: Duration = Duration::from_secs(1);
/// Default idle period before the daemon exits (`BIR_DAEMON_IDLE_SECS`).
const DEFAULT_IDLE: Duration = Duration::from_secs(900);
/// Default total deadline per request (`BIR_DAEMON_REQUEST_MS`).
const DEFAULT_REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// How often the engine's timers run.
const TICK: Duration = Duration::from_millis(250);
/// Stack of a connection thread: parsing and the engine's work need little.
const CONNECTION_STACK: usize = 512 * 1024;
/// Sessions whose mod claim is remembered at most (the oldest go first:
/// a claim only matters while its session runs).
const MAX_MOD_CLAIMS: usize = 4096;
/// How long a mod instance that holds a session may stay silent before
/// another instance may take the session over.
const MOD_CLAIM_IDLE: Duration = Duration::from_secs(30);

/// Sessions whose recording decision is remembered at most (past it the
/// decisions start over: a session still running is decided again, from
/// its directory, at its next event).
const MAX_SCOPE_DECISIONS: usize = 4096;

/// Which sessions this daemon records (`crate::scope`): a session is
/// decided once, at its first event with a working directory, against the
/// ledger view, which is reloaded only when `installed.json` changed. A
/// session not recorded here gets the empty answer to every hook and
/// nothing of it reaches the engine (no run, no journal, no transcript
/// read).
#[derive(Default)]
struct SessionScope {
    ledger: crate::scope::Cached,
    /// Session id → recorded.
    decided: HashMap<String, bool>,
}

impl SessionScope {
    /// Whether the session `payload` belongs to (of `host`) is recorded.
    /// A payload that names no directory is recorded (it cannot be placed,
    /// and recording is what bir did before it knew scopes).
    fn records(&mut self, home: &Path, host: Host, payload: &serde_json::Value) -> bool {
        let session = host.session_id(payload);
        if let Some(known) = session.as_ref().and_then(|s| self.decided.get(s)) {
            return *known;
        }
        let Some(cwd) = session_cwd(payload) else {
            return true;
        };
        let agent = (host != Host::ClaudeCode).then(|| host.flag());
        let records = self
            .ledger
            .current(home)
            .decide(Path::new(cwd), agent)
            .records();
        if let Some(session) = session {
            if self.decided.len() >= MAX_SCOPE_DECISIONS {
                self.decided.clear();
            }
            self.decided.insert(session, records);
        }
        records
    }

    /// Whether `session` was decided not to be recorded.
    fn declined(&self, session: &str) -> bool {
        self.decided.get(session) == Some(&false)
    }
}

/// The directory a hook payload's session works in: `cwd`, else (Cursor)
/// its first workspace root.
fn session_cwd(payload: &serde_json::Value) -> Option<&str> {
    payload["cwd"]
        .as_str()
        .or_else(|| payload["workspace_roots"][0].as_str())
        .filter(|d| !d.is_empty())
}

/// What every thread of the daemon shares.
struct Daemon {
    core: Mutex<Core>,
    home: PathBuf,
    token: String,
    /// The hook token of `control/hooks.json`, when this daemon listens on
    /// the hook port: it admits hook posts only (`hookaddr`).
    hook_token: Option<String>,
    port: u16,
    pid: u32,
    started_at: SystemTime,
    started: Instant,
    limits: Limits,
    /// Milliseconds after `started` of the last accepted request.
    last_request_ms: AtomicU64,
    /// Connections past the token check, being served.
    open_connections: AtomicUsize,
    /// Connections accepted that have not passed the token check yet.
    pre_auth: AtomicUsize,
    stop: AtomicBool,
    /// The Unix socket the mod reaches us on, when one could be bound.
    socket: Option<PathBuf>,
    /// Which mod instance holds each session's link (session id →
    /// instance): the first to post for a session holds it, any other is
    /// refused with 409 (`claude --resume` of one session in a second
    /// terminal must not interleave two conversations into one run).
    /// A holder silent for [`MOD_CLAIM_IDLE`] lets go: a module the host
    /// reloaded comes back as a new instance and must not stay refused.
    mod_claims: Mutex<HashMap<String, (String, Instant)>>,
    /// Which sessions are recorded here (see [`SessionScope`]).
    scope: Mutex<SessionScope>,
}

impl Daemon {
    fn scope(&self) -> MutexGuard<'_, SessionScope> {
        self.scope.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn core(&self) -> MutexGuard<'_, Core> {
        // A panic while handling one input must not stop the daemon: the
        // engine's state is still the best we have.
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn health(&self) -> Health {
        Health {
            version: discovery::daemon_version(),
            pid: self.pid,
            sessions: self.core().engine.sessions().len(),
            started_at: millis_since_epoch(self.started_at),
        }
    }

    fn touch(&self) {
        let now = self.started.elapsed().as_millis() as u64;
        self.last_request_ms.store(now, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_request_ms.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(last)
    }
}

pub(crate) fn main(_args: &[String]) -> Exit {
    let outcome = home::bir_home()
        .ok_or_else(|| "no home directory (set BIR_HOME or HOME)".to_owned())
        .and_then(|home| run(&home))
        .map(|()| ExitStatus::Success)
        .map_err(Error::failure);
    crate::error::report("bir daemon", outcome).into()
}

fn run(home: &Path) -> Result<(), String> {
    discovery::ensure_control_dir(home).map_err(|e| e.to_string())?;
    let lock = take_lock(home)?;
    let listener = bind_listener(home)?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("bind: {e}"))?
        .port();
    // The HTTP hooks' token, when they post to the port this daemon got.
    let hook_addr = super::hookaddr::read(home).filter(|a| a.port == port);
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("listen: {e}"))?;
    let token = new_token()?;
    let socket = bind_socket(home);
    // Before any thread starts, so all of them inherit the mask.
    block_stop_signals();

    let store = match Store::open(
        &home.join("runs"),
        Arc::new(crate::record::journal::DiskStorage),
    ) {
        Ok(s) => Some(s),
        Err(err) => {
            log::warn!("bound runs will not be stored locally: {err}");
            None
        }
    };
    let mut forwarders: Vec<Box<dyn crate::record::Forwarder>> = Vec::new();
    if let Some(remote) = crate::service::forwarder::ServiceForwarder::from_env() {
        forwarders.push(Box::new(remote));
    }
    if let Some(otlp) = crate::otlp::forwarder::OtlpForwarder::from_env() {
        forwarders.push(Box::new(otlp));
    }
    let reader = TranscriptReader::new(Some(home.join("control").join("transcripts.json")));
    let config = engine_config();
    // A run left open longer ago than a session may stay idle would end at
    // once: only the recent ones are read back.
    let left_window = config.idle_end + config.fingerprint_window;
    let mut core =
        Core::new(Engine::new(config), store, forwarders).with_reader(Arc::clone(&reader));
    let taken = core.take_up_left_runs(left_window);
    if taken > 0 {
        log::info!("{taken} run(s) left open by the last daemon taken up again");
    }
    let started_at = SystemTime::now();
    let daemon = Arc::new(Daemon {
        core: Mutex::new(core),
        home: home.to_owned(),
        token,
        hook_token: hook_addr.map(|a| a.token),
        port,
        pid: std::process::id(),
        started_at,
        started: Instant::now(),
        limits: Limits {
            max_head: 16 * 1024,
            max_fields: 64,
            max_body: super::MAX_HOOK_PAYLOAD,
            deadline: env_duration_ms("BIR_DAEMON_REQUEST_MS", DEFAULT_REQUEST_DEADLINE),
            head_deadline: HEAD_DEADLINE,
        },
        last_request_ms: AtomicU64::new(0),
        open_connections: AtomicUsize::new(0),
        pre_auth: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        socket: socket.as_ref().map(|(path, _, _)| path.clone()),
        mod_claims: Mutex::new(HashMap::new()),
        scope: Mutex::new(SessionScope::default()),
    });
    let published = Discovery {
        url: format!("http://127.0.0.1:{port}"),
        token: daemon.token.clone(),
        pid: daemon.pid,
        version: discovery::daemon_version(),
        started_at: millis_since_epoch(started_at),
        socket: daemon.socket.as_ref().map(|p| p.display().to_string()),
        pid_start: discovery::process_start(daemon.pid),
    };
    discovery::write(home, &published).map_err(|e| format!("discovery file: {e}"))?;
    log::info!("listening on {} (pid {})", published.url, daemon.pid);

    {
        // Each pass's bytes reach the engine under its lock, taken only to
        // hand them over.
        let daemon = Arc::downgrade(&daemon);
        reader
            .start(move |request, bytes| {
                if let Some(daemon) = daemon.upgrade() {
                    let input = Input::TranscriptRead {
                        session_id: request.session_id,
                        agent_id: request.agent_id,
                        offset: request.offset,
                        bytes,
                    };
                    daemon.core().handle(input, SystemTime::now());
                }
            })
            .map_err(|e| format!("cannot start a thread: {e}"))?;
    }
    spawn_signal_watcher(Arc::clone(&daemon));
    let idle = env_duration_secs("BIR_DAEMON_IDLE_SECS", DEFAULT_IDLE);
    let ticker = {
        let daemon = Arc::clone(&daemon);
        std::thread::Builder::new()
            .name("bir-daemon-tick".into())
            .spawn(move || tick_loop(&daemon, idle))
            .map_err(|e| format!("cannot start a thread: {e}"))?
    };
    let unix = socket.as_ref().map(|(_, listener, _)| listener);
    accept_loop(&daemon, &listener, unix);
    drop(listener);
    if let Some((path, listener, inode)) = socket {
        drop(listener);
        uds::remove_if_ours(&path, inode);
    }
    let _ = ticker.join();

    // Let requests already taken finish (each is bounded by its deadline).
    let drain_until = Instant::now() + daemon.limits.deadline;
    while daemon.open_connections.load(Ordering::Acquire) > 0 && Instant::now() < drain_until {
        std::thread::sleep(Duration::from_millis(5));
    }
    daemon.core().shutdown(SystemTime::now());
    reader.stop();
    discovery::remove_if_ours(home, daemon.pid);
    drop(lock);
    log::info!("stopped");
    Ok(())
}

/// Binds 127.0.0.1 on this home's kept port (`discovery::port_path`: hooks
/// that POST name a fixed URL) when it is free; on the first start, on the
/// first free candidate, which is kept; else on a port the kernel gives,
/// and the log (and `bir doctor`) say the kept one is taken.
fn bind_listener(home: &Path) -> Result<TcpListener, String> {
    let bind = |port: u16| TcpListener::bind(("127.0.0.1", port));
    match discovery::preferred_port(home) {
        Some(port) => match bind(port) {
            Ok(listener) => return Ok(listener),
            Err(err) => log::warn!(
                "port {port}, this daemon's own, is not free ({err}): listening on another one \
                 until it is (`bir doctor` says who holds it)"
            ),
        },
        // The first start: a port is chosen and kept (it is free, unless
        // something took it in the meantime).
        None => match discovery::stable_port(home) {
            Ok(port) => match bind(port) {
                Ok(listener) => return Ok(listener),
                Err(err) => log::warn!("port {port} was taken meanwhile ({err})"),
            },
            Err(err) => log::warn!("no port of the daemon's own: {err}"),
        },
    }
    bind(0).map_err(|e| format!("bind: {e}"))
}

/// Binds the Unix socket the mod reaches us on (see `uds`): its path, the
/// listener and the socket file's inode (to remove only our own at exit).
/// `None` when no private base is available or the path is taken: the
/// daemon still serves hooks and proxies over TCP, and the mod stays
/// silent.
fn bind_socket(home: &Path) -> Option<(PathBuf, UnixListener, u64)> {
    use std::os::unix::fs::MetadataExt;
    if std::env::var_os("BIR_DAEMON_SOCKET").is_some_and(|v| v == "off") {
        return None;
    }
    let home = home.to_string_lossy();
    let path = match uds::resolve(&uds::BaseEnv::from_process(), &home) {
        Ok(path) => path,
        Err(why) => {
            log::warn!("no socket for the mod: {why}");
            return None;
        }
    };
    let listener = match uds::bind(&path) {
        Ok(l) => l,
        Err(why) => {
            log::warn!("no socket for the mod: {why}");
            return None;
        }
    };
    if let Err(e) = listener.set_nonblocking(true) {
        log::warn!("no socket for the mod: {e}");
        return None;
    }
    let inode = std::fs::symlink_metadata(&path).map_or(0, |m| m.ino());
    log::info!("mod socket at {}", path.display());
    Some((path, listener, inode))
}

/// The exclusive lock on `control/daemon.lock`, or who holds it.
fn take_lock(home: &Path) -> Result<std::fs::File, String> {
    let path = discovery::lock_path(home);
    let file = home::private_file()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    match home::lock_exclusive(&file, home::Wait::No) {
        Ok(true) => Ok(file),
        Ok(false) => Err(match discovery::read(home) {
            Ok(Some(d)) => format!(
                "another recorder daemon is running for {} (pid {}, {}); `bir down` stops it",
                home.display(),
                d.pid,
                d.url
            ),
            _ => format!(
                "another recorder daemon is starting for {} (it holds {})",
                home.display(),
                path.display()
            ),
        }),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// 256 bits from the OS's CSPRNG, as 64 hex digits.
fn new_token() -> Result<String, String> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "the system's random source failed".to_owned())?;
    Ok(crate::codec::hex_lower(&bytes))
}

fn engine_config() -> EngineConfig {
    let recorder = crate::record::RecorderConfig::from_env(Arc::from("daemon"), None);
    EngineConfig {
        redact: recorder.as_ref().map(|r| r.redact).unwrap_or_default(),
        payload_cap: recorder
            .as_ref()
            .map_or(crate::record::truncate::DEFAULT_CAP, |r| r.payload_cap),
        idle_end: env_duration_secs("BIR_SESSION_IDLE_SECS", Duration::from_secs(1800)),
        // As long as a proxy may hold its reports while it looks for the
        // daemon (see `bound`'s invariants): a longer grace only delays a
        // step's release, never its place in the order.
        join_grace: env_duration_ms("BIR_JOIN_GRACE_MS", Duration::from_secs(10)),
        fingerprint_window: Duration::from_secs(600),
    }
}

fn env_duration_secs(name: &str, default: Duration) -> Duration {
    match std::env::var(name).ok().map(|v| v.trim().parse::<u64>()) {
        Some(Ok(n)) => Duration::from_secs(n),
        Some(Err(_)) => {
            log::warn!("{name} is not a number of seconds; using {default:?}");
            default
        }
        None => default,
    }
}

fn env_duration_ms(name: &str, default: Duration) -> Duration {
    match std::env::var(name).ok().map(|v| v.trim().parse::<u64>()) {
        Some(Ok(n)) if n > 0 => Duration::from_millis(n),
        Some(_) => {
            log::warn!("{name} is not a positive number of milliseconds; using {default:?}");
            default
        }
        None => default,
    }
}

fn millis_since_epoch(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// SIGTERM, SIGINT, SIGHUP: the signals that ask the daemon to stop.
fn stop_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

/// Blocks the stop signals in the calling thread (and the threads it
/// starts later): only the watcher takes them, with `sigwait`, so no
/// asynchronous handler ever runs.
fn block_stop_signals() {
    let set = stop_signals();
    // SAFETY: `set` is a valid, initialised signal set.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        log::warn!("cannot block signals (error {rc}); a signal stops the daemon abruptly");
    }
}

/// SIGTERM, SIGINT or SIGHUP: stop cleanly (runs finished, journals synced).
fn spawn_signal_watcher(daemon: Arc<Daemon>) {
    let spawned = std::thread::Builder::new()
        .name("bir-daemon-signals".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            let set = stop_signals();
            let mut sig: libc::c_int = 0;
            // SAFETY: `set` is initialised; `sig` is a valid out pointer.
            while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
            log::info!("signal received: stopping");
            daemon.stop.store(true, Ordering::Release);
        });
    if let Err(err) = spawned {
        log::warn!("cannot start the signal thread: {err}");
    }
}

fn tick_loop(daemon: &Daemon, idle: Duration) {
    let mut ticks: u64 = 0;
    while !daemon.stop.load(Ordering::Acquire) {
        std::thread::sleep(TICK);
        ticks += 1;
        if ticks.is_multiple_of(4) && !still_published(daemon) {
            log::warn!(
                "the discovery file no longer names this daemon (BIR_HOME removed?): exiting"
            );
            daemon.stop.store(true, Ordering::Release);
        }
        let sessions = {
            let mut core = daemon.core();
            core.tick(SystemTime::now());
            // Finished runs waiting for the store keep the daemon up, as
            // open sessions do.
            core.engine.sessions().len() + usize::from(core.waiting_for_store())
        };
        if sessions == 0
            && daemon.open_connections.load(Ordering::Acquire) == 0
            && daemon.idle_for() >= idle
        {
            log::info!("idle for {idle:?} with no open session: exiting");
            daemon.stop.store(true, Ordering::Release);
        }
    }
}

/// Whether `control/daemon.json` still names us. When it does not, no
/// client can find this daemon any more — `$BIR_HOME` was deleted (a test's
/// temporary home, say), or `control/` with its lock, letting another
/// daemon start — so staying up would only record beside the real one.
fn still_published(daemon: &Daemon) -> bool {
    matches!(discovery::read(&daemon.home), Ok(Some(d)) if d.pid == daemon.pid)
}

/// Accepts on both listeners until asked to stop, polling so a stop is
/// noticed within [`TICK`] even when no one connects.
fn accept_loop(daemon: &Arc<Daemon>, listener: &TcpListener, unix: Option<&UnixListener>) {
    let own_uid = uds::own_uid();
    while !daemon.stop.load(Ordering::Acquire) {
        let mut fds = [
            libc::pollfd {
                fd: listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: unix.map_or(-1, |u| u.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds for the duration of the call (a
        // negative fd is ignored by poll).
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, TICK.as_millis() as libc::c_int) };
        if ready <= 0 {
            continue;
        }
        if fds[0].revents != 0 {
            accept_all(
                || listener.accept(),
                |(stream, peer): (TcpStream, SocketAddr)| {
                    // Another user's connection goes before a byte of it is
                    // read and before it counts against any cap.
                    if !tcp_peer_allowed(&stream, peer, own_uid) {
                        return;
                    }
                    let _ = stream.set_nonblocking(false);
                    let _ = stream.set_nodelay(true);
                    admit(daemon, stream, Via::Tcp);
                },
            );
        }
        if let Some(unix) = unix
            && fds[1].revents != 0
        {
            accept_all(
                || unix.accept().map(|(s, _)| s),
                |stream: UnixStream| {
                    let _ = stream.set_nonblocking(false);
                    // The socket's permissions are the credential; the peer's
                    // uid is the second check, before a byte is read.
                    if !uds::peer_allowed(&stream, own_uid) {
                        log::warn!("refused a socket peer of another user");
                        let mut stream = stream;
                        let _ = stream.set_write_timeout(Some(Duration::from_millis(50)));
                        let _ = http::respond(&mut stream, 403, b"");
                        return;
                    }
                    admit(daemon, stream, Via::Socket);
                },
            );
        }
    }
}

/// Whether a loopback TCP peer is this user's: the kernel names our uid as
/// the owner of its socket (`tcpowner`). A peer whose socket is gone is
/// refused; where the OS does not tell (no `/proc/net/tcp`), the token
/// alone decides, and the log says so once.
fn tcp_peer_allowed(stream: &TcpStream, peer: SocketAddr, own_uid: u32) -> bool {
    static SAID: AtomicBool = AtomicBool::new(false);
    let Ok(local) = stream.local_addr() else {
        return false;
    };
    let verdict = match tcpowner::socket_uid(peer, local) {
        Lookup::Owner(uid) if uid == own_uid => return true,
        Lookup::Owner(uid) => format!("refused a connection of uid {uid}"),
        Lookup::NotFound => "refused a connection whose owner the kernel does not list".to_owned(),
        Lookup::Unavailable => {
            if !SAID.swap(true, Ordering::Relaxed) {
                log::warn!("no /proc/net/tcp: TCP peers are not checked by uid, only by token");
            }
            return true;
        }
    };
    // Said once at warn, then at debug: a flood must not fill the log.
    if SAID.swap(true, Ordering::Relaxed) {
        log::debug!("{verdict}");
    } else {
        log::warn!("{verdict} (further refusals are logged at debug level)");
    }
    false
}

/// Accepts every connection waiting on a non-blocking listener.
fn accept_all<S>(mut accept: impl FnMut() -> std::io::Result<S>, mut take: impl FnMut(S)) {
    loop {
        match accept() {
            Ok(stream) => take(stream),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                log::warn!("accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
                break;
            }
        }
    }
}

/// Which listener a connection came in on: it decides the caller check
/// and the routes served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Tcp,
    Socket,
}

/// A connection either listener accepted.
trait Served: Conn + Send + 'static {
    fn set_write_deadline(&self, d: Option<Duration>) -> std::io::Result<()>;
    fn shut_write(&self);
}

impl Served for TcpStream {
    fn set_write_deadline(&self, d: Option<Duration>) -> std::io::Result<()> {
        self.set_write_timeout(d)
    }
    fn shut_write(&self) {
        let _ = self.shutdown(std::net::Shutdown::Write);
    }
}

impl Served for UnixStream {
    fn set_write_deadline(&self, d: Option<Duration>) -> std::io::Result<()> {
        self.set_write_timeout(d)
    }
    fn shut_write(&self) {
        let _ = self.shutdown(std::net::Shutdown::Write);
    }
}

/// A place counted in one of the daemon's allowances, given back on drop.
struct Place<'a>(&'a AtomicUsize);

impl<'a> Place<'a> {
    /// One of `max` places of `count`, if one is free.
    fn take(count: &'a AtomicUsize, max: usize) -> Option<Place<'a>> {
        let taken = count.fetch_add(1, Ordering::AcqRel);
        if taken >= max {
            count.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Place(count))
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves `stream` on its own thread, or refuses it at once when
/// [`MAX_PRE_AUTH`] connections are still reading their heads.
fn admit<S: Served>(daemon: &Arc<Daemon>, mut stream: S, via: Via) {
    let accepted = Instant::now();
    if daemon.pre_auth.fetch_add(1, Ordering::AcqRel) >= MAX_PRE_AUTH {
        daemon.pre_auth.fetch_sub(1, Ordering::AcqRel);
        let _ = stream.set_write_deadline(Some(Duration::from_millis(50)));
        let _ = http::respond(&mut stream, 503, b"");
        return;
    }
    let worker = Arc::clone(daemon);
    let spawned = std::thread::Builder::new()
        .stack_size(CONNECTION_STACK)
        .spawn(move || {
            // The place taken above, now owned by this thread.
            let pre_auth = Place(&worker.pre_auth);
            serve(&worker, stream, accepted, via, pre_auth);
        });
    if let Err(err) = spawned {
        daemon.pre_auth.fetch_sub(1, Ordering::AcqRel);
        log::warn!("cannot start a connection thread: {err}");
    }
}

fn serve<S: Served>(daemon: &Daemon, mut stream: S, accepted: Instant, via: Via, pre_auth: Place) {
    let guard = match via {
        Via::Tcp => Guard::Loopback {
            port: daemon.port,
            token: &daemon.token,
            hook_token: daemon.hook_token.as_deref(),
        },
        Via::Socket => Guard::Socket {
            host: uds::SOCKET_HOST,
        },
    };
    // Past the token, the connection leaves the pre-authentication
    // allowance for a place among the ones served.
    let mut pre_auth = Some(pre_auth);
    let mut served = None;
    let mut authenticated = || {
        drop(pre_auth.take());
        served = Place::take(&daemon.open_connections, MAX_CONNECTIONS);
        served.as_ref().map(|_| ()).ok_or(Refused(503))
    };
    let read = http::read_request(
        &mut stream,
        &daemon.limits,
        &guard,
        accepted,
        &mut authenticated,
    );
    // A refused connection lingers below: its place is free already.
    let _ = pre_auth.take();
    let (status, body) = match read {
        Err(Refused(status)) => (status, Vec::new()),
        Ok(request) if via == Via::Tcp && answers_nothing(&request, &daemon.home) => {
            daemon.touch();
            // Answered before it is handled (the host waits for the answer
            // on every tool call), with the engine's lock already held, so
            // no later input can be handled before this one.
            let mut core = daemon.core();
            let _ = stream.set_write_deadline(Some(Duration::from_secs(2)));
            let _ = http::respond(&mut stream, 200, b"");
            stream.shut_write();
            let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                hook_route(daemon, &mut core, &request.path, &request.body, request.off)
            }));
            if handled.is_err() {
                log::error!("a request failed with an internal error");
            }
            return;
        }
        Ok(request) => {
            daemon.touch();
            let routed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match via {
                Via::Tcp => route(daemon, request),
                Via::Socket => route_socket(daemon, request),
            }));
            routed.unwrap_or_else(|_| {
                log::error!("a request failed with an internal error");
                (500, Vec::new())
            })
        }
    };
    let _ = stream.set_write_deadline(Some(Duration::from_secs(2)));
    let _ = http::respond(&mut stream, status, &body);
    if status != 200 {
        linger(&mut stream);
    }
}

/// After a refusal the client may still be sending (a body we would not
/// read): read a little and close, so the kernel does not answer its
/// bytes with a reset that could eat our response.
fn linger<S: Served>(stream: &mut S) {
    stream.shut_write();
    let _ = stream.set_read_deadline(Some(Duration::from_millis(100)));
    let mut sink = [0u8; 16 * 1024];
    let mut total = 0;
    let until = Instant::now() + Duration::from_millis(500);
    while total < 2 * 1024 * 1024 && Instant::now() < until {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
}

/// What the Unix socket serves: the liveness probe and the mod's events.
/// Nothing else (no `/shutdown`, no `/hook`): the socket is the mod's.
fn route_socket(daemon: &Daemon, request: Request) -> (u16, Vec<u8>) {
    match (request.method, request.path.as_str()) {
        (Method::Get, "/health") => json(&serde_json::json!({
            "link": uds::HEALTH_MARKER,
            "pid": daemon.pid,
            "version": discovery::daemon_version(),
        })),
        (Method::Post, "/mod/events") => {
            let Ok(batch) = serde_json::from_slice::<wire::ModBatch>(&request.body) else {
                log::debug!("a mod batch did not parse");
                return (400, Vec::new());
            };
            if batch.session_id.is_empty() {
                return (400, Vec::new());
            }
            if daemon.scope().declined(&batch.session_id) {
                // A session not recorded here: taken and dropped.
                return (200, b"{\"ok\":true}".to_vec());
            }
            if let Some(instance) = &request.instance
                && !claim(daemon, &batch.session_id, instance)
            {
                return (
                    409,
                    br#"{"reason":"another mod instance holds this session"}"#.to_vec(),
                );
            }
            daemon.core().handle(Input::Mod(batch), SystemTime::now());
            (200, b"{\"ok\":true}".to_vec())
        }
        _ => (404, Vec::new()),
    }
}

/// Whether `instance` holds (or now takes) session `session`'s mod link.
fn claim(daemon: &Daemon, session: &str, instance: &str) -> bool {
    let mut claims = daemon.mod_claims.lock().unwrap_or_else(|p| p.into_inner());
    let now = Instant::now();
    if let Some((holder, last)) = claims.get_mut(session) {
        if holder == instance {
            *last = now;
            return true;
        }
        if now.duration_since(*last) < MOD_CLAIM_IDLE {
            return false;
        }
    }
    if claims.len() >= MAX_MOD_CLAIMS {
        // Sessions the engine no longer records hold nothing worth keeping.
        let live: std::collections::HashSet<String> = daemon
            .core()
            .engine
            .sessions()
            .into_iter()
            .map(|s| s.session_id)
            .collect();
        claims.retain(|s, _| live.contains(s));
        if claims.len() >= MAX_MOD_CLAIMS {
            claims.clear();
        }
    }
    claims.insert(session.to_owned(), (instance.to_owned(), now));
    true
}

/// Answers an accepted request: `(status, body)`.
fn route(daemon: &Daemon, request: Request) -> (u16, Vec<u8>) {
    let now = SystemTime::now();
    match (request.method, request.path.as_str()) {
        (Method::Get, "/health") => json(&daemon.health()),
        (Method::Get, "/sessions") => {
            let sessions = daemon.core().engine.sessions();
            json(&SessionsAnswer {
                daemon: daemon.health(),
                sessions: sessions.iter().map(SessionView::from).collect(),
            })
        }
        (Method::Post, "/shutdown") => {
            log::info!("asked to stop");
            daemon.stop.store(true, Ordering::Release);
            (200, b"{}".to_vec())
        }
        (Method::Post, path) if path.starts_with("/hook/") => {
            if hook_target(path).is_some_and(|(event, _)| event == "Stop") {
                await_pin_reports(daemon, &request.body);
            }
            let mut core = daemon.core();
            hook_route(daemon, &mut core, path, &request.body, request.off)
        }
        (Method::Post, "/proxy/register") => {
            let Ok(register) = serde_json::from_slice::<wire::ProxyRegister>(&request.body) else {
                log::debug!("a proxy registration did not parse");
                return (400, Vec::new());
            };
            let mut register = register;
            let mut core = daemon.core();
            if register.session_id.is_empty() {
                // The proxy's environment names no session (Codex, Gemini):
                // the session whose host process is its ancestor.
                match core.engine.session_by_ancestry(&register.ancestors) {
                    Some(id) => {
                        log::debug!("proxy {} bound by ancestry to {id}", register.proxy_id);
                        register.session_id = id;
                    }
                    None => return (409, br#"{"reason":"no_session_for_ancestry"}"#.to_vec()),
                }
            }
            if !core.engine.hooked(&register.session_id) {
                // Not (yet) a session this daemon records: the proxy asks
                // again while it negotiates, then records standalone.
                return (409, br#"{"reason":"session_not_hooked"}"#.to_vec());
            }
            core.handle(Input::ProxyRegistered(register), now);
            (200, b"{}".to_vec())
        }
        (Method::Post, "/proxy/records") => {
            let answer = match serde_json::from_slice::<wire::ProxyRecords>(&request.body) {
                Ok(mut records) => {
                    let mut core = daemon.core();
                    if records.session_id.is_empty() {
                        // Bound by ancestry: the session its registration found.
                        match core.engine.session_of_proxy(&records.proxy_id) {
                            Some(id) => records.session_id = id.to_owned(),
                            // Not (or no longer) registered: the proxy
                            // records standalone and registers again.
                            None => return (409, br#"{"reason":"proxy_not_bound"}"#.to_vec()),
                        }
                    }
                    core.handle(Input::ProxyRecords(records), now);
                    (200, b"{}".to_vec())
                }
                Err(err) => {
                    log::debug!("a proxy request did not parse: {err}");
                    (400, Vec::new())
                }
            };
            // A pin the server did not get ends its guide.
            let mut core = daemon.core();
            for (session, call) in core.engine.take_pins_not_applied() {
                if let Some(record) =
                    armed_guides::pin_not_applied(&daemon.home, &session, &call).record
                {
                    core.handle(record, now);
                }
            }
            answer
        }
        (Method::Post, "/proxy/unregister") => {
            proxy_input(&request.body, daemon, now, |r: wire::ProxyUnregister| {
                Input::ProxyGone {
                    proxy_id: r.proxy_id,
                }
            })
        }
        _ => (404, Vec::new()),
    }
}

/// Before a `Stop` that an armed guide may answer: waits (without the
/// engine's lock, so the report can be handled) until the session's
/// pinned calls have been checked against what their servers got, at most
/// [`super::STOP_PATIENCE`]. A guide then hands over rather than nudges
/// toward the next step when the server did not get the pin. The report
/// usually follows the call by milliseconds; a busy machine may delay the
/// proxy's post past the end of the turn.
fn await_pin_reports(daemon: &Daemon, body: &[u8]) {
    #[derive(serde::Deserialize)]
    struct Of {
        session_id: String,
    }
    let Ok(Of { session_id }) = serde_json::from_slice::<Of>(body) else {
        return;
    };
    let until = Instant::now() + super::STOP_PATIENCE;
    while daemon.core().engine.awaits_pin_report(&session_id) {
        if Instant::now() >= until {
            log::debug!("a pinned call's proxy report did not come before Stop");
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `/hook/<Event>[?query]` → (event, query).
fn hook_target(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/hook/")?;
    Some(rest.split_once('?').unwrap_or((rest, "")))
}

/// Whether `request` is a hook post whose answer is empty whatever the
/// engine makes of it: every event but the three an armed guide may answer
/// (`UserPromptSubmit`, `PreToolUse`, `Stop`) — and those too while no
/// guide is armed under `home`, but a `PreToolUse` that asks for call-id
/// injection.
fn answers_nothing(request: &Request, home: &Path) -> bool {
    let Some((event, query)) = hook_target(&request.path) else {
        return false;
    };
    if request.method != Method::Post || event.is_empty() {
        return false;
    }
    if host_of(query).is_some_and(|h| h != Host::ClaudeCode) {
        return true;
    }
    match event {
        "UserPromptSubmit" | "Stop" => !armed_guides::dir(home).is_dir(),
        "PreToolUse" => !asks_injection(query) && !armed_guides::dir(home).is_dir(),
        _ => true,
    }
}

/// `POST /hook/<Event>[?query]` with the engine's lock held: the hook's
/// answer (`(status, body)`). `off`: the post said `BIR_OFF=1` of its
/// session (the HTTP hooks' `X-Bir-Off` header): nothing recorded, nothing
/// answered.
fn hook_route(
    daemon: &Daemon,
    core: &mut Core,
    path: &str,
    body: &[u8],
    off: bool,
) -> (u16, Vec<u8>) {
    if off {
        return (200, Vec::new());
    }
    let now = SystemTime::now();
    let Some((event, query)) = hook_target(path) else {
        return (404, Vec::new());
    };
    if event.is_empty() {
        return (404, Vec::new());
    }
    let Ok(payload) = serde_json::from_slice::<serde_json::Value>(body) else {
        return (400, Vec::new());
    };
    // `bir off` (everywhere, or `--here` for the session's
    // directory): an HTTP hook is posted by Claude Code itself, so
    // the switch a command hook checks is checked here.
    if let Some(cwd) = payload["cwd"].as_str()
        && crate::switch::files_off(&daemon.home, Path::new(cwd))
    {
        return (200, Vec::new());
    }
    // Recorded only where bir is installed (or everywhere by choice): a
    // session elsewhere gets the passthrough answer and leaves nothing.
    let host = host_of(query).unwrap_or(Host::ClaudeCode);
    if !daemon.scope().records(&daemon.home, host, &payload) {
        return (200, Vec::new());
    }
    if let Some(host) = host_of(query).filter(|h| *h != Host::ClaudeCode) {
        // Another agent's hook: recorded, never answered.
        let mut payload = payload;
        if host == Host::Gemini && event == "AfterTool" {
            with_gemini_subagent_chat(&mut payload, body);
        }
        if event == "SessionStart" {
            with_host_version(&mut payload, host, query_value(query, "host_process"));
        }
        let input = Input::HostHook {
            host,
            event: event.to_owned(),
            payload,
            host_process: query_value(query, "host_process").and_then(host_process),
        };
        core.handle(input, now);
        return (200, Vec::new());
    }
    // The hook's stdout: nothing, except what an armed guide
    // answers (`armed_guides.rs`) or the call-id injection its sender
    // asked for (`bir-hooks` under `BIR_CORRELATE=inject`).
    let dirs = armed_guides::SettingsDirs::from_query(query);
    let guided = armed_guides::apply(&daemon.home, &core.engine, event, &payload, &dirs);
    let answer = guided.answer.or_else(|| {
        (event == "PreToolUse" && asks_injection(query))
            .then(|| core.engine.injection(&payload, body))
            .flatten()
    });
    let input = Input::Hook {
        event: event.to_owned(),
        payload,
    };
    core.handle(input, now);
    if let Some(record) = guided.record {
        core.handle(record, now);
    }
    (200, answer.map(String::into_bytes).unwrap_or_default())
}

/// The host process a hook post names: `pid.start` (`bir-hooks` read both
/// from `/proc`), or a bare pid (the post script's `$PPID`), whose start
/// time — and, past a shell or launcher, whose host — the daemon reads
/// from `/proc` itself (`bound::process::host_process_from`). Only a post
/// whose token was accepted gets here.
fn host_process(value: &str) -> Option<ProcessId> {
    if value.contains('.') {
        return ProcessId::from_query(value);
    }
    let pid: u32 = value.parse().ok()?;
    crate::bound::process::host_process_from(pid)
}

/// The agent's version, once a session (`SessionStart`), where only its
/// process says it: read from the process a post script names (a bare
/// pid, its `$PPID`) and its ancestors, unless the poster (`bir-hooks`,
/// which read its own ancestry) added it already.
fn with_host_version(payload: &mut serde_json::Value, host: Host, process: Option<&str>) {
    let field = crate::bound::host::HOST_VERSION_FIELD;
    if payload.get(field).is_some() {
        return;
    }
    let Some(pid) = process.and_then(|p| p.parse::<u32>().ok()) else {
        return;
    };
    if let (Some(version), Some(map)) = (
        crate::bound::host::version_from_process(host, pid),
        payload.as_object_mut(),
    ) {
        map.insert(field.to_owned(), serde_json::Value::String(version));
    }
}

/// A Gemini subagent's words are in a chat file no hook names: its
/// `AfterTool` of `invoke_agent` gets the chat's path
/// (`bound::host::gemini_subagent_chat`), unless the poster (`bir-hooks`)
/// added it already.
fn with_gemini_subagent_chat(payload: &mut serde_json::Value, body: &[u8]) {
    let field = crate::bound::host::AGENT_CHAT_FIELD;
    if payload.get(field).is_some() {
        return;
    }
    if let (Some(chat), Some(map)) = (
        crate::bound::host::gemini_subagent_chat(body),
        payload.as_object_mut(),
    ) {
        map.insert(field.to_owned(), serde_json::Value::String(chat));
    }
}

/// `host=<agent>` among a hook route's query parameters.
fn host_of(query: &str) -> Option<Host> {
    query_value(query, "host").and_then(Host::parse)
}

/// The value of `name=` among a route's query parameters.
fn query_value<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|pair| {
        pair.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('='))
    })
}

/// `correlate=inject` among a hook route's query parameters.
fn asks_injection(query: &str) -> bool {
    query.split('&').any(|pair| pair == "correlate=inject")
}

fn proxy_input<T: serde::de::DeserializeOwned>(
    body: &[u8],
    daemon: &Daemon,
    now: SystemTime,
    into: impl FnOnce(T) -> Input,
) -> (u16, Vec<u8>) {
    match serde_json::from_slice::<T>(body) {
        Ok(parsed) => {
            daemon.core().handle(into(parsed), now);
            (200, b"{}".to_vec())
        }
        Err(err) => {
            log::debug!("a proxy request did not parse: {err}");
            (400, Vec::new())
        }
    }
}

fn json<T: Serialize>(value: &T) -> (u16, Vec<u8>) {
    match serde_json::to_vec(value) {
        Ok(body) => (200, body),
        Err(_) => (500, Vec::new()),
    }
}

/// `$BIR_HOME/logs/daemon.log`, where the daemon's stderr goes.
pub(crate) fn log_path(home: &Path) -> PathBuf {
    home.join("logs").join("daemon.log")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A post script names only `$PPID`: the daemon reads the start time
    /// (and walks past a shell) itself; `bir-hooks`' `pid.start` is taken
    /// as it is; anything else names no process.
    #[test]
    fn a_hook_posts_host_process_is_read_from_a_bare_pid() {
        let me = std::process::id();
        if let Some(found) = host_process(&me.to_string()) {
            assert_eq!(found.pid, me);
            assert_eq!(host_process(&found.to_query()), Some(found));
        }
        assert_eq!(
            host_process("12.34"),
            Some(ProcessId { pid: 12, start: 34 })
        );
        assert_eq!(host_process("x"), None);
        assert_eq!(host_process(""), None);
        assert_eq!(host_process(&u32::MAX.to_string()), None);
    }

    /// A post script's `SessionStart` names only a pid (its `$PPID`, the
    /// agent): the daemon reads the agent's version from that process's
    /// script, as `bir-hooks` read it from its own ancestry; a version the
    /// poster gave stays, and a pid that is no agent adds nothing.
    #[test]
    fn a_session_starts_host_version_is_read_from_the_process_a_post_names() {
        let dir = std::env::temp_dir().join(format!("bir-daemon-version-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = dir.join("node_modules/@google/gemini-cli");
        std::fs::create_dir_all(root.join("bundle")).expect("dirs");
        std::fs::write(
            root.join("package.json"),
            r#"{"name":"@google/gemini-cli","version":"0.61.0"}"#,
        )
        .expect("package.json");
        let script = root.join("bundle/gemini.js");
        // A stand-in for the agent: a process whose command line names the
        // script by its absolute path, as `node /…/bundle/gemini.js` does.
        std::fs::write(&script, "read -r _\n").expect("script");
        let mut agent = std::process::Command::new("/bin/sh")
            .arg(&script)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let pid = agent.id().to_string();
        let field = crate::bound::host::HOST_VERSION_FIELD;
        let mut payload = serde_json::json!({"session_id": "s", "source": "startup"});
        // Wait for the child's exec (its command line names the script).
        let named = (0..500).any(|_| {
            let line = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let found = String::from_utf8_lossy(&line).contains("gemini.js");
            if !found {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            found
        });
        assert!(named, "the stand-in never ran its script");
        with_host_version(&mut payload, Host::Gemini, Some(&pid));
        let mut given = serde_json::json!({"session_id": "s", field: "0.1.0"});
        with_host_version(&mut given, Host::Gemini, Some(&pid));
        let mut not_an_agent = serde_json::json!({"session_id": "s"});
        with_host_version(
            &mut not_an_agent,
            Host::Gemini,
            Some(&std::process::id().to_string()),
        );
        drop(agent.stdin.take());
        let _ = agent.wait();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(payload[field], "0.61.0", "{payload}");
        assert_eq!(given[field], "0.1.0");
        assert!(not_an_agent.get(field).is_none(), "{not_an_agent}");
    }

    #[test]
    fn a_gemini_subagents_chat_is_found_for_a_post_that_names_none() {
        let dir = std::env::temp_dir().join(format!("bir-daemon-chat-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("chats/sess-1")).expect("dirs");
        std::fs::write(dir.join("chats/sess-1/agent.jsonl"), "{}\n").expect("chat");
        let body = serde_json::to_vec(&serde_json::json!({
            "tool_name": "invoke_agent",
            "session_id": "sess-1",
            "transcript_path": dir.join("chats/main.jsonl"),
        }))
        .expect("json");
        let mut payload: serde_json::Value = serde_json::from_slice(&body).expect("json");
        with_gemini_subagent_chat(&mut payload, &body);
        let field = crate::bound::host::AGENT_CHAT_FIELD;
        assert!(
            payload[field]
                .as_str()
                .is_some_and(|p| p.ends_with("sess-1/agent.jsonl")),
            "{payload}"
        );
        // What the poster named already stays.
        payload[field] = serde_json::json!("/named/by/bir-hooks.jsonl");
        with_gemini_subagent_chat(&mut payload, &body);
        assert_eq!(payload[field], "/named/by/bir-hooks.jsonl");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
