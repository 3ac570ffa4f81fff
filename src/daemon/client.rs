//! Finding, starting and talking to the recorder daemon.
//!
//! Used by `bir-hooks` (on every hook, so it is lean: no allocation-heavy
//! parsing, no logger set-up, one loopback connection per request), by the
//! bound proxy and by `bir status`/`down`/`doctor`.
//!
//! Where the daemon is:
//! * `BIR_CONTROL_URL` + `BIR_CONTROL_TOKEN` in the environment (sessions
//!   driven through an SDK): an explicit endpoint; it is never started or
//!   replaced by us.
//! * else `$BIR_HOME/control/daemon.json` (see `discovery.rs`), trusted only
//!   if it passes the file checks, names this build's version and a pid
//!   that is still the daemon (`discovery::is_daemon`: not a process that
//!   was given the pid since). The token is sent only after those checks,
//!   and only to a listener of our own uid (`tcpowner`): a stale file's
//!   port may now belong to someone else.
//!
//! The HTTP here is the smallest HTTP/1.1 that talks to our own daemon:
//! one request per connection (`Connection: close`), `Content-Length`
//! bodies, and one *total* deadline for connect, write and read together.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use super::discovery::{self, Discovery};
use super::tcpowner::{self, Lookup};

/// The largest answer a client reads from the daemon.
const MAX_RESPONSE: usize = 16 * 1024 * 1024;

/// How long a health probe may take inside [`ensure_running`].
const HEALTH_DEADLINE: Duration = Duration::from_millis(300);

/// Where a daemon answers and the token it wants.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// `http://127.0.0.1:<port>` (as published, or from `BIR_CONTROL_URL`).
    pub url: String,
    pub addr: SocketAddr,
    /// The `Host` header value the daemon accepts (`127.0.0.1:<port>`).
    pub host: String,
    pub token: String,
    /// The daemon's pid, when it came from the discovery file.
    pub pid: Option<u32>,
    /// From the discovery file; `None` for an explicit endpoint.
    pub version: Option<String>,
}

/// Why [`lookup`] found no usable daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Missing {
    /// No discovery file.
    None,
    /// A discovery file that names a daemon that is gone or another build.
    Stale(String),
    /// A discovery file refused by the file checks (symlink, mode, owner,
    /// garbage): never followed or trusted.
    Refused(String),
}

impl Endpoint {
    /// The explicit endpoint from `BIR_CONTROL_URL` + `BIR_CONTROL_TOKEN`.
    /// Only loopback URLs are accepted: the token must not leave the host.
    pub(crate) fn from_env() -> Option<Endpoint> {
        let url = std::env::var("BIR_CONTROL_URL").ok()?;
        let token = std::env::var("BIR_CONTROL_TOKEN").ok()?;
        if url.is_empty() || token.is_empty() {
            return None;
        }
        let mut endpoint = Endpoint::from_url(&url, token)?;
        endpoint.url = url;
        Some(endpoint)
    }

    /// `http://127.0.0.1:<port>`, `http://localhost:<port>` or
    /// `http://[::1]:<port>` (a trailing `/` allowed); anything else `None`.
    pub(crate) fn from_url(url: &str, token: String) -> Option<Endpoint> {
        let rest = url.strip_prefix("http://")?;
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = authority.rsplit_once(':')?;
        let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
        let ip: std::net::IpAddr = match host {
            "127.0.0.1" | "localhost" => [127, 0, 0, 1].into(),
            "[::1]" => std::net::Ipv6Addr::LOCALHOST.into(),
            _ => return None,
        };
        Some(Endpoint {
            url: url.to_owned(),
            addr: SocketAddr::new(ip, port),
            host: authority.to_owned(),
            token,
            pid: None,
            version: None,
        })
    }

    fn from_discovery(d: &Discovery) -> Option<Endpoint> {
        let mut endpoint = Endpoint::from_url(&d.url, d.token.clone())?;
        endpoint.pid = Some(d.pid);
        endpoint.version = Some(d.version.clone());
        Some(endpoint)
    }

    /// `POST path` with a JSON body; the status and the body of the answer.
    pub(crate) fn post(
        &self,
        path: &str,
        body: &[u8],
        deadline: Duration,
    ) -> io::Result<(u16, Vec<u8>)> {
        self.request("POST", path, Some(body), deadline)
    }

    /// `GET path`; the status and the body of the answer.
    pub(crate) fn get(&self, path: &str, deadline: Duration) -> io::Result<(u16, Vec<u8>)> {
        self.request("GET", path, None, deadline)
    }

    fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        deadline: Duration,
    ) -> io::Result<(u16, Vec<u8>)> {
        // The path goes into the request line as is: nothing that could end
        // the line or the field early.
        if !path.starts_with('/') || !path.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "request path must be printable ASCII starting with /",
            ));
        }
        let start = Instant::now();
        let left = || {
            deadline
                .checked_sub(start.elapsed())
                .filter(|d| !d.is_zero())
                .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "daemon request deadline"))
        };
        let mut stream = TcpStream::connect_timeout(&self.addr, left()?)?;
        check_listener(&stream)?;
        let _ = stream.set_nodelay(true);
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n",
            self.host, self.token
        )
        .into_bytes();
        if let Some(body) = body {
            request.extend_from_slice(
                format!(
                    "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            );
            request.extend_from_slice(body);
        } else {
            request.extend_from_slice(b"\r\n");
        }
        stream.set_write_timeout(Some(left()?))?;
        stream.write_all(&request)?;
        read_response(&mut stream, left)
    }
}

/// Sends nothing (not the token, not a payload) to a listener of another
/// user: the kernel must name our uid as the owner of the socket listening
/// where we connected (`tcpowner`; a connection takes its owner from it). Where the OS does not tell, the daemon's checks and the
/// discovery file's are all there is.
fn check_listener(stream: &TcpStream) -> io::Result<()> {
    let peer = stream.peer_addr()?;
    let owner = tcpowner::listener_uid(peer);
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let refused = |why: String| Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
    match owner {
        Lookup::Owner(uid) if uid == me => Ok(()),
        Lookup::Unavailable => Ok(()),
        Lookup::Owner(uid) => refused(format!(
            "the listener on {peer} belongs to uid {uid}, not to us: nothing sent"
        )),
        Lookup::NotFound => refused(format!(
            "the kernel names no owner of the listener on {peer}: nothing sent"
        )),
    }
}

/// Reads one answer: up to `Content-Length` bytes of body if the header is
/// there, else to the end of the connection.
fn read_response(
    stream: &mut TcpStream,
    left: impl Fn() -> io::Result<Duration>,
) -> io::Result<(u16, Vec<u8>)> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 8192];
    let mut head: Option<(u16, usize, Option<usize>)> = None;
    loop {
        if head.is_none()
            && let Some(end) = memchr::memmem::find(&buf, b"\r\n\r\n")
        {
            let (status, length) = parse_head(&buf[..end]).ok_or_else(|| bad("bad answer"))?;
            head = Some((status, end + 4, length));
        }
        if let Some((status, body_at, Some(length))) = head
            && buf.len() >= body_at + length
        {
            return Ok((status, buf[body_at..body_at + length].to_vec()));
        }
        stream.set_read_timeout(Some(left()?))?;
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::Error::new(io::ErrorKind::TimedOut, e));
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            return match head {
                Some((status, body_at, None)) => Ok((status, buf[body_at..].to_vec())),
                _ => Err(bad("answer cut short")),
            };
        }
        if buf.len() + n > MAX_RESPONSE {
            return Err(bad("answer too large"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The status and `Content-Length` of a response head.
fn parse_head(head: &[u8]) -> Option<(u16, Option<usize>)> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next()?;
    let mut parts = status_line.splitn(3, ' ');
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status: u16 = parts.next()?.parse().ok()?;
    let mut length = None;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        if name.trim().eq_ignore_ascii_case("content-length") {
            length = Some(value.trim().parse().ok()?);
        }
    }
    Some((status, length))
}

/// The daemon to talk to, or why there is none. No network: the explicit
/// endpoint from the environment, else a discovery file that passes the
/// file checks, names this build and a live pid.
pub(crate) fn lookup(home: &Path) -> Result<Endpoint, Missing> {
    if let Some(endpoint) = Endpoint::from_env() {
        return Ok(endpoint);
    }
    let d = match discovery::read(home) {
        Ok(Some(d)) => d,
        Ok(None) => return Err(Missing::None),
        Err(why) => return Err(Missing::Refused(why)),
    };
    // A stale file's pid may belong to another process now: nothing goes
    // to its port unless the pid is still the daemon.
    if let Err(why) = discovery::is_daemon(home, &d) {
        return Err(Missing::Stale(why));
    }
    if d.version != discovery::daemon_version() {
        return Err(Missing::Stale(format!(
            "pid {} runs version {}, not {}",
            d.pid,
            d.version,
            discovery::daemon_version()
        )));
    }
    Endpoint::from_discovery(&d)
        .ok_or_else(|| Missing::Refused(format!("url {:?} is not a loopback URL", d.url)))
}

/// The live daemon's endpoint, without any network check (see [`lookup`]).
pub(crate) fn discover(home: &Path) -> Option<Endpoint> {
    lookup(home).ok()
}

/// Whether `endpoint` answers `GET /health` as the daemon it claims to be.
pub(crate) fn healthy(endpoint: &Endpoint, deadline: Duration) -> bool {
    match endpoint.get("/health", deadline) {
        Ok((200, body)) => {
            let Ok(health) = serde_json::from_slice::<super::Health>(&body) else {
                return false;
            };
            endpoint.pid.is_none_or(|pid| pid == health.pid)
        }
        _ => false,
    }
}

/// A healthy daemon within `budget`: the one running, or one started now.
///
/// A daemon of another build that is still alive is asked to stop first
/// (it holds the lock the new one needs). Concurrent callers may each start
/// one; the daemons' lock lets exactly one live and the others exit.
pub(crate) fn ensure_running(home: &Path, budget: Duration) -> Option<Endpoint> {
    let start = Instant::now();
    let left = || budget.checked_sub(start.elapsed()).filter(|d| !d.is_zero());
    if let Some(endpoint) = Endpoint::from_env() {
        let probe = left()?.min(HEALTH_DEADLINE);
        return healthy(&endpoint, probe).then_some(endpoint);
    }
    match lookup(home) {
        Ok(endpoint) => {
            if healthy(&endpoint, left()?.min(HEALTH_DEADLINE)) {
                return Some(endpoint);
            }
        }
        Err(Missing::Stale(why)) => {
            log::debug!("recorder daemon: stale discovery ({why})");
            retire_other_build(home, left()?);
        }
        Err(Missing::Refused(why)) => log::debug!("recorder daemon: discovery refused: {why}"),
        Err(Missing::None) => {}
    }
    let before = file_identity(&discovery::discovery_path(home));
    if let Err(err) = spawn(home) {
        log::debug!("recorder daemon: could not start: {err}");
        return None;
    }
    loop {
        // Only a file published since (a daemon publishes by rename: a new
        // inode). The one there before was refused or stale; it may pass
        // the checks for a moment while the new daemon repairs the
        // directory, and must still not be trusted.
        if file_identity(&discovery::discovery_path(home)) != before
            && let Ok(endpoint) = lookup(home)
            && healthy(&endpoint, left()?.min(HEALTH_DEADLINE))
        {
            return Some(endpoint);
        }
        std::thread::sleep(left()?.min(Duration::from_millis(5)));
    }
}

/// Which file `path` is (device and inode, not following a symlink).
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// A live daemon of another build: asked to stop, and waited for (within
/// `budget`), so the new one can take the lock.
fn retire_other_build(home: &Path, budget: Duration) {
    let Ok(Some(d)) = discovery::read(home) else {
        return;
    };
    if discovery::is_daemon(home, &d).is_err() {
        return;
    }
    let Some(mut endpoint) = Endpoint::from_discovery(&d) else {
        return;
    };
    endpoint.pid = Some(d.pid);
    let start = Instant::now();
    if !healthy(&endpoint, budget.min(HEALTH_DEADLINE)) {
        return;
    }
    let _ = endpoint.post("/shutdown", b"{}", budget.min(HEALTH_DEADLINE));
    while discovery::pid_alive(d.pid) && start.elapsed() < budget {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Starts `bir daemon` detached: its own session (no terminal, no signal
/// from the hook's process group), working directory `/`, stdin from
/// /dev/null, stdout and stderr appended to `$BIR_HOME/logs/daemon.log`.
/// The environment is inherited on purpose, not scrubbed: the redactor's
/// known-value layer learns the session's secret values (API keys) from it,
/// and the recording service's settings (`BIR_SERVICE_URL`, …) come from it.
fn spawn(home: &Path) -> io::Result<()> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    crate::home::ensure_private_dir(home)?;
    let log_path = super::server::log_path(home);
    if let Some(logs) = log_path.parent() {
        crate::home::ensure_private_dir(logs)?;
    }
    let log = crate::home::private_file()
        .create(true)
        .append(true)
        .open(&log_path)?;
    let exe = std::env::current_exe()?;
    // The daemon works from `/` (it must not hold a project directory busy),
    // so the home it is given must not be relative.
    let home = std::path::absolute(home)?;
    let mut command = Command::new(exe);
    command
        // `bir daemon`, whatever name started us (`bir-hooks`, `bir-proxy`).
        .arg0("bir")
        .arg("daemon")
        .env("BIR_HOME", &home)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; nothing else runs in the child
    // between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    // Reaped by a thread so a long-lived caller (a proxy) leaves no zombie;
    // a short-lived one (a hook) exits first and the daemon is re-parented.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_urls() {
        let ok = Endpoint::from_url("http://127.0.0.1:8123", "t".into()).expect("loopback");
        assert_eq!(ok.host, "127.0.0.1:8123");
        assert_eq!(ok.addr, "127.0.0.1:8123".parse().expect("addr"));
        let local = Endpoint::from_url("http://localhost:9/", "t".into()).expect("localhost");
        assert_eq!(local.host, "localhost:9");
        assert!(Endpoint::from_url("http://[::1]:9", "t".into()).is_some());
        for bad in [
            "https://127.0.0.1:8123",
            "http://10.0.0.1:8123",
            "http://127.0.0.1",
            "http://127.0.0.1:0",
            "http://evil.example:80",
            "http://127.0.0.1:80/path",
        ] {
            assert!(Endpoint::from_url(bad, "t".into()).is_none(), "{bad}");
        }
    }

    #[test]
    fn response_heads() {
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 12"),
            Some((200, Some(12)))
        );
        assert_eq!(parse_head(b"HTTP/1.1 401 Unauthorized"), Some((401, None)));
        assert_eq!(parse_head(b"SSH-2.0 hello"), None);
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x"), None);
    }

    #[test]
    fn request_path_cannot_inject() {
        let e = Endpoint::from_url("http://127.0.0.1:1", "t".into()).expect("endpoint");
        let err = e
            .post("/hook/A\r\nX: y", b"{}", Duration::from_millis(50))
            .expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn talks_to_a_server_within_the_deadline() {
        use std::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            let mut seen = Vec::new();
            let mut chunk = [0u8; 1024];
            while memchr::memmem::find(&seen, b"\r\n\r\n{\"a\":1}").is_none() {
                let n = conn.read(&mut chunk).expect("read");
                assert!(n > 0, "client closed early");
                seen.extend_from_slice(&chunk[..n]);
            }
            conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
                .expect("write");
            String::from_utf8(seen).expect("utf8")
        });
        let e = Endpoint::from_url(&format!("http://127.0.0.1:{port}"), "sekrit".into())
            .expect("endpoint");
        let (status, body) = e
            .post("/hook/Stop", br#"{"a":1}"#, Duration::from_secs(20))
            .expect("post");
        assert_eq!((status, body.as_slice()), (200, &b"hi"[..]));
        let seen = server.join().expect("server");
        assert!(seen.starts_with("POST /hook/Stop HTTP/1.1\r\n"), "{seen}");
        assert!(
            seen.contains(&format!("Host: 127.0.0.1:{port}\r\n")),
            "{seen}"
        );
        assert!(seen.contains("Authorization: Bearer sekrit\r\n"), "{seen}");
        assert!(seen.contains("Content-Length: 7\r\n"), "{seen}");
    }

    #[test]
    fn a_silent_server_is_cut_at_the_deadline() {
        use std::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let e =
            Endpoint::from_url(&format!("http://127.0.0.1:{port}"), "t".into()).expect("endpoint");
        // Accepted by the kernel's backlog, never answered.
        let err = e
            .get("/health", Duration::from_millis(200))
            .expect_err("no answer");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        drop(listener);
    }
}
