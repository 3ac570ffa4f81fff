//! The daemon's HTTP/1.1: one strict request per connection, read under
//! hard limits, checked in the order listed below.
//!
//! Why our own and not a library: the daemon needs exactly one request
//! shape (a `Content-Length` body, `Connection: close`) and the checks a
//! control server must make *before* it reads a body — an exact `Host`, no
//! `Origin`, the bearer token — plus one *total* deadline per request (an
//! idle timeout lets a client dribble a byte at a time forever). The
//! measurements behind the choice are in `bench/README.md`.
//!
//! Order of checks (each ends the request with a static body, and closes):
//! 1. head larger than [`Limits::max_head`] or too many fields → 431;
//!    the head's deadline ([`Limits::head_deadline`]) or the total one
//!    passed → 408; malformed (bad request line, obs-fold, empty
//!    field name, a field without `:`, not HTTP/1.x) → 400;
//! 2. `Host` missing or not exactly `127.0.0.1:<port>` / `localhost:<port>`
//!    / `[::1]:<port>` → 403; any `Origin` → 403 (before the token: a
//!    browser gets nothing to learn from);
//! 3. bearer token missing or wrong (constant-time compare) → 401; then
//!    the caller's `authenticated` step (the server's cap on connections
//!    served: 503);
//! 4. `OPTIONS`, or a method other than GET/POST → 405; a POST that is not
//!    `application/json` → 415; `Transfer-Encoding` (chunked or any) or two
//!    `Content-Length`s → 400; a POST without length → 411; longer than
//!    [`Limits::max_body`] → 413;
//! 5. the body, within the same deadline.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// A connection the daemon serves: loopback TCP or its Unix socket. Both
/// are read under the same caps and the same total deadline.
pub(crate) trait Conn: Read + Write {
    fn set_read_deadline(&self, left: Option<Duration>) -> io::Result<()>;
}

impl Conn for TcpStream {
    fn set_read_deadline(&self, left: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(left)
    }
}

impl Conn for UnixStream {
    fn set_read_deadline(&self, left: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(left)
    }
}

/// Caps on one request.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub max_head: usize,
    pub max_fields: usize,
    pub max_body: usize,
    /// From the connection's accept to the end of its body.
    pub deadline: Duration,
    /// From the connection's accept to the end of its head (which carries
    /// the token): short, so a connection that sends nothing, or a byte at
    /// a time, gives its place up long before [`Limits::deadline`].
    pub head_deadline: Duration,
}

/// A request that passed every check.
#[derive(Debug)]
pub(crate) struct Request {
    pub method: Method,
    pub path: String,
    pub body: Vec<u8>,
    /// [`INSTANCE_HEADER`]'s value (at most 64 token characters).
    pub instance: Option<String>,
    /// [`OFF_HEADER`] says recording is off for the sender (`BIR_OFF=1` in
    /// the environment of the Claude Code session that posts the hook).
    pub off: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Post,
}

/// What the daemon accepts as the caller's identity.
pub(crate) enum Guard<'a> {
    /// Loopback TCP: `Host` is `127.0.0.1:<port>` (or `localhost`/`[::1]`)
    /// and the bearer token is required; the hook token (`hookaddr`), when
    /// there is one, admits `POST /hook/…` only.
    Loopback {
        port: u16,
        token: &'a str,
        hook_token: Option<&'a str>,
    },
    /// The Unix socket: its permissions (and the peer's uid, checked at
    /// accept) are the credential, so there is no token; `Host` must be
    /// exactly `host`, and `Origin` is refused as on TCP.
    Socket { host: &'a str },
}

/// The request's `x-bir-mod` header (the mod instance that sent it), when
/// it names one.
pub(crate) const INSTANCE_HEADER: &str = "x-bir-mod";

/// The header bir's HTTP hooks carry `$BIR_OFF` of the posting session in
/// (Claude Code interpolates it: `allowedEnvVars`); an HTTP hook carries no
/// environment otherwise.
pub(crate) const OFF_HEADER: &str = "x-bir-off";

/// A refusal: the status to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused(pub u16);

/// Reads one request from `stream`, checking as it goes. `started` is when
/// the connection was accepted: the deadlines count from there.
/// `authenticated` runs once the caller passed the guard's checks and
/// before the body is read (the server moves the connection from its
/// pre-authentication allowance to the served ones there); its refusal
/// ends the request.
pub(crate) fn read_request(
    stream: &mut impl Conn,
    limits: &Limits,
    guard: &Guard<'_>,
    started: Instant,
    authenticated: &mut dyn FnMut() -> Result<(), Refused>,
) -> Result<Request, Refused> {
    let mut buf = Vec::with_capacity(2048);
    let head_deadline = limits.head_deadline.min(limits.deadline);
    let head_end = loop {
        if let Some(end) = memchr::memmem::find(&buf, b"\r\n\r\n") {
            break end;
        }
        if buf.len() > limits.max_head {
            return Err(Refused(431));
        }
        read_some(
            stream,
            &mut buf,
            limits.max_head + 4,
            head_deadline,
            started,
        )?;
    };
    if head_end > limits.max_head {
        return Err(Refused(431));
    }
    let head = std::str::from_utf8(&buf[..head_end]).map_err(|_| Refused(400))?;
    let parsed = parse_head(head, limits)?;
    check_caller(&parsed, guard)?;
    authenticated()?;
    let method = match parsed.method {
        "GET" => Method::Get,
        "POST" => Method::Post,
        _ => return Err(Refused(405)),
    };
    if parsed.transfer_encoding || parsed.content_lengths > 1 {
        return Err(Refused(400));
    }
    let length = match (method, parsed.content_length) {
        (Method::Post, None) => return Err(Refused(411)),
        (Method::Get, Some(n)) if n > 0 => return Err(Refused(400)),
        (_, n) => n.unwrap_or(0),
    };
    if method == Method::Post && !parsed.json {
        return Err(Refused(415));
    }
    if length > limits.max_body {
        return Err(Refused(413));
    }
    let path = parsed.path.to_owned();
    let instance = parsed.instance.map(str::to_owned);
    let off = parsed.off;
    let mut body = buf.split_off(head_end + 4);
    if body.len() > length {
        // Bytes after the body: a pipelined second request, which we do
        // not serve (one request per connection).
        body.truncate(length);
    }
    while body.len() < length {
        read_some(stream, &mut body, length, limits.deadline, started)?;
    }
    Ok(Request {
        method,
        path,
        body,
        instance,
        off,
    })
}

/// Reads what is there into `buf` (never past `cap` bytes in all), within
/// what is left of the deadline.
fn read_some(
    stream: &mut impl Conn,
    buf: &mut Vec<u8>,
    cap: usize,
    deadline: Duration,
    started: Instant,
) -> Result<(), Refused> {
    let left = deadline
        .checked_sub(started.elapsed())
        .filter(|d| !d.is_zero())
        .ok_or(Refused(408))?;
    stream
        .set_read_deadline(Some(left))
        .map_err(|_| Refused(400))?;
    let mut chunk = [0u8; 16 * 1024];
    let want = cap.saturating_sub(buf.len()).clamp(1, chunk.len());
    loop {
        match stream.read(&mut chunk[..want]) {
            Ok(0) => return Err(Refused(400)),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Ok(());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(Refused(408));
            }
            Err(_) => return Err(Refused(400)),
        }
    }
}

struct Head<'a> {
    method: &'a str,
    path: &'a str,
    host: Option<&'a str>,
    hosts: usize,
    origin: bool,
    authorization: Option<&'a str>,
    content_length: Option<usize>,
    content_lengths: usize,
    transfer_encoding: bool,
    json: bool,
    instance: Option<&'a str>,
    off: bool,
}

fn parse_head<'a>(head: &'a str, limits: &Limits) -> Result<Head<'a>, Refused> {
    let mut lines = head.split("\r\n");
    let request_line = lines.next().ok_or(Refused(400))?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(path), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refused(400));
    };
    if method.is_empty()
        || !method.bytes().all(|b| b.is_ascii_uppercase())
        || !path.starts_with('/')
        || !matches!(version, "HTTP/1.1" | "HTTP/1.0")
    {
        return Err(Refused(400));
    }
    let mut parsed = Head {
        method,
        path,
        host: None,
        hosts: 0,
        origin: false,
        authorization: None,
        content_length: None,
        content_lengths: 0,
        transfer_encoding: false,
        json: false,
        instance: None,
        off: false,
    };
    for (count, line) in lines.enumerate() {
        if count >= limits.max_fields {
            return Err(Refused(431));
        }
        // obs-fold (a continuation line) is refused, as are empty names
        // and names with spaces before the colon.
        if line.starts_with([' ', '\t']) {
            return Err(Refused(400));
        }
        let (name, value) = line.split_once(':').ok_or(Refused(400))?;
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(Refused(400));
        }
        let value = value.trim_matches([' ', '\t']);
        if name.eq_ignore_ascii_case("host") {
            parsed.host = Some(value);
            parsed.hosts += 1;
        } else if name.eq_ignore_ascii_case("origin") {
            parsed.origin = true;
        } else if name.eq_ignore_ascii_case("authorization") {
            parsed.authorization = Some(value);
        } else if name.eq_ignore_ascii_case("content-length") {
            parsed.content_lengths += 1;
            if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(Refused(400));
            }
            // A number too large for usize is over any cap.
            parsed.content_length = Some(value.parse().unwrap_or(usize::MAX));
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            parsed.transfer_encoding = true;
        } else if name.eq_ignore_ascii_case(INSTANCE_HEADER) {
            // An instance id is a short token; anything else names none.
            parsed.instance = Some(value)
                .filter(|v| !v.is_empty() && v.len() <= 64 && v.bytes().all(is_token_byte));
        } else if name.eq_ignore_ascii_case(OFF_HEADER) {
            parsed.off = crate::switch::says_off(value);
        } else if name.eq_ignore_ascii_case("content-type") {
            let media = value.split(';').next().unwrap_or("").trim();
            parsed.json = media.eq_ignore_ascii_case("application/json");
        }
    }
    Ok(parsed)
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Host, Origin, then the token (see the module's order).
fn check_caller(head: &Head<'_>, guard: &Guard<'_>) -> Result<(), Refused> {
    let (port, token) = match guard {
        Guard::Socket { host } => {
            let host_ok = head.hosts == 1 && head.host == Some(host);
            return if host_ok && !head.origin {
                Ok(())
            } else {
                Err(Refused(403))
            };
        }
        Guard::Loopback {
            port,
            token,
            hook_token,
        } => (*port, (*token, *hook_token)),
    };
    let (token, hook_token) = token;
    let host_ok = head.hosts == 1
        && head.host.is_some_and(|host| {
            let Some((name, host_port)) = host.rsplit_once(':') else {
                return false;
            };
            matches!(name, "127.0.0.1" | "localhost" | "[::1]")
                && host_port.parse::<u16>().ok() == Some(port)
                && host_port.bytes().all(|b| b.is_ascii_digit())
        });
    if !host_ok || head.origin {
        return Err(Refused(403));
    }
    let presented = head
        .authorization
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let hook_post = head.method == "POST" && head.path.starts_with("/hook/");
    let by_hook_token = hook_post && hook_token.is_some_and(|t| token_matches(presented, t));
    if !token_matches(presented, token) && !by_hook_token {
        return Err(Refused(401));
    }
    Ok(())
}

/// Constant-time comparison: every byte is looked at whatever the earlier
/// ones were, so the time to refuse a token does not tell how much of it
/// was right. (Only the length may show, and it is public: 64 hex digits.)
pub(crate) fn token_matches(presented: &str, expected: &str) -> bool {
    if presented.len() != expected.len() {
        return false;
    }
    let diff = presented
        .bytes()
        .zip(expected.bytes())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(diff) == 0
}

/// The reason phrase of the statuses the daemon uses.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// Writes one answer and ends the exchange. Errors carry a static body:
/// nothing of the request is echoed back.
pub(crate) fn respond(stream: &mut impl Write, status: u16, body: &[u8]) -> io::Result<()> {
    let body: &[u8] = if status != 200 && body.is_empty() {
        reason(status).as_bytes()
    } else {
        body
    };
    let content_type = if status == 200 {
        "application/json"
    } else {
        "text/plain"
    };
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason(status),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    stream.write_all(&out)?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_head: 16 * 1024,
            max_fields: 64,
            max_body: 1024,
            deadline: Duration::from_secs(30),
            head_deadline: Duration::from_secs(30),
        }
    }

    /// Sends `raw` to a fresh connection and returns what `read_request`
    /// made of it.
    fn serve(raw: Vec<u8>) -> Result<Request, Refused> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let raw = String::from_utf8(raw)
            .expect("utf8")
            .replace("PORT", &port.to_string());
        let client = std::thread::spawn(move || {
            let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            let _ = c.write_all(raw.as_bytes());
            // Keep the connection open until the server is done.
            let mut sink = Vec::new();
            let _ = c.read_to_end(&mut sink);
        });
        let (mut conn, _) = listener.accept().expect("accept");
        let token = "t".repeat(64);
        let hook_token = "h".repeat(64);
        let got = read_request(
            &mut conn,
            &limits(),
            &Guard::Loopback {
                port,
                token: &token,
                hook_token: Some(&hook_token),
            },
            Instant::now(),
            &mut || Ok(()),
        );
        drop(conn);
        client.join().expect("client");
        got
    }

    fn post(extra: &str, body: &str) -> Vec<u8> {
        format!(
            "POST /hook/Stop HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}\r\n{body}",
            "t".repeat(64),
            body.len()
        )
        .into_bytes()
    }

    #[test]
    fn a_good_request_passes() {
        let req = serve(post("", r#"{"a":1}"#)).expect("accepted");
        assert_eq!(req.method, Method::Post);
        assert_eq!(req.path, "/hook/Stop");
        assert_eq!(req.body, br#"{"a":1}"#);
    }

    #[test]
    fn host_origin_and_token_are_checked_in_order() {
        let wrong_host = post("", "{}");
        let wrong_host = String::from_utf8(wrong_host)
            .expect("utf8")
            .replace("127.0.0.1:PORT", "evil.example:PORT");
        assert_eq!(
            serve(wrong_host.into_bytes()).expect_err("refused"),
            Refused(403)
        );
        assert_eq!(
            serve(post("Origin: null\r\n", "{}")).expect_err("refused"),
            Refused(403)
        );
        let bad_token = String::from_utf8(post("", "{}"))
            .expect("utf8")
            .replace(&"t".repeat(64), &format!("{}x", "t".repeat(63)));
        assert_eq!(
            serve(bad_token.into_bytes()).expect_err("refused"),
            Refused(401)
        );
        let other_port = String::from_utf8(post("", "{}"))
            .expect("utf8")
            .replace("127.0.0.1:PORT", "localhost:1");
        assert_eq!(
            serve(other_port.into_bytes()).expect_err("refused"),
            Refused(403)
        );
    }

    /// The hook token admits a hook post and nothing else: not another
    /// route, not a GET.
    #[test]
    fn the_hook_token_opens_hook_posts_only() {
        let with_hook_token = |raw: Vec<u8>| {
            String::from_utf8(raw)
                .expect("utf8")
                .replace(&"t".repeat(64), &"h".repeat(64))
        };
        let req = serve(with_hook_token(post("", "{}")).into_bytes()).expect("hook post");
        assert_eq!(req.path, "/hook/Stop");
        let shutdown = with_hook_token(post("", "{}")).replace("/hook/Stop", "/shutdown");
        assert_eq!(
            serve(shutdown.into_bytes()).expect_err("refused"),
            Refused(401)
        );
        let get = format!(
            "GET /hook/Stop HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nAuthorization: Bearer {}\r\n\r\n",
            "h".repeat(64)
        );
        assert_eq!(serve(get.into_bytes()).expect_err("refused"), Refused(401));
    }

    #[test]
    fn smuggling_shapes_are_refused() {
        assert_eq!(
            serve(post("Transfer-Encoding: chunked\r\n", "{}")).expect_err("refused"),
            Refused(400)
        );
        assert_eq!(
            serve(post("Content-Length: 2\r\n", "{}")).expect_err("refused"),
            Refused(400)
        );
        assert_eq!(
            serve(post(" folded\r\n", "{}")).expect_err("refused"),
            Refused(400)
        );
        assert_eq!(
            serve(post(": empty name\r\n", "{}")).expect_err("refused"),
            Refused(400)
        );
    }

    #[test]
    fn sizes_and_types() {
        let big = "x".repeat(2000);
        assert_eq!(serve(post("", &big)).expect_err("refused"), Refused(413));
        let many: String = (0..100).map(|i| format!("X-{i}: y\r\n")).collect();
        assert_eq!(serve(post(&many, "{}")).expect_err("refused"), Refused(431));
        let huge = format!("X-Big: {}\r\n", "y".repeat(20 * 1024));
        assert_eq!(serve(post(&huge, "{}")).expect_err("refused"), Refused(431));
        let text = String::from_utf8(post("", "{}"))
            .expect("utf8")
            .replace("application/json", "text/plain");
        assert_eq!(serve(text.into_bytes()).expect_err("refused"), Refused(415));
        let options = String::from_utf8(post("", "{}"))
            .expect("utf8")
            .replace("POST", "OPTIONS");
        assert_eq!(
            serve(options.into_bytes()).expect_err("refused"),
            Refused(405)
        );
    }

    /// What `read_request` makes of `raw` sent over a Unix socket pair,
    /// under the socket's guard.
    fn serve_socket(raw: &str) -> Result<Request, Refused> {
        let (mut server, mut client) = UnixStream::pair().expect("pair");
        let raw = raw.to_owned();
        let writer = std::thread::spawn(move || {
            let _ = client.write_all(raw.as_bytes());
            let mut sink = Vec::new();
            let _ = client.read_to_end(&mut sink);
        });
        let got = read_request(
            &mut server,
            &limits(),
            &Guard::Socket { host: "bir" },
            Instant::now(),
            &mut || Ok(()),
        );
        drop(server);
        writer.join().expect("writer");
        got
    }

    fn socket_post(host: &str, extra: &str, body: &str) -> String {
        format!(
            "POST /mod/events HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}\r\n{body}",
            body.len()
        )
    }

    #[test]
    fn the_socket_needs_no_token_but_its_own_host_and_no_origin() {
        let req = serve_socket(&socket_post("bir", "x-bir-mod: m-1\r\n", "{}")).expect("ok");
        assert_eq!(req.path, "/mod/events");
        assert_eq!(req.instance.as_deref(), Some("m-1"));
        let req = serve_socket(&socket_post("bir", "x-bir-mod: a b\r\n", "{}")).expect("ok");
        assert_eq!(req.instance, None, "not a token: names no instance");
        assert_eq!(
            serve_socket(&socket_post("127.0.0.1:1", "", "{}")).expect_err("host"),
            Refused(403)
        );
        assert_eq!(
            serve_socket(&socket_post("bir", "Origin: http://evil\r\n", "{}")).expect_err("origin"),
            Refused(403)
        );
        // The same caps as TCP.
        let big = "x".repeat(2000);
        assert_eq!(
            serve_socket(&socket_post("bir", "", &big)).expect_err("cap"),
            Refused(413)
        );
    }

    #[test]
    fn the_head_has_its_own_short_deadline_and_authentication_comes_after_the_token() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        // One byte, then silence: cut at the head's deadline, long before
        // the total one.
        let mut silent = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        silent.write_all(b"G").expect("write");
        let (mut conn, _) = listener.accept().expect("accept");
        let limits = Limits {
            head_deadline: Duration::from_millis(200),
            ..limits()
        };
        let token = "t".repeat(64);
        let guard = Guard::Loopback {
            port,
            token: &token,
            hook_token: None,
        };
        let mut called = 0;
        let started = Instant::now();
        let got = read_request(&mut conn, &limits, &guard, started, &mut || {
            called += 1;
            Ok(())
        });
        assert_eq!(got.expect_err("cut"), Refused(408));
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "not the total deadline"
        );
        assert_eq!(called, 0, "never authenticated");
        drop(silent);

        // A wrong token never reaches the step; a right one does, and its
        // refusal ends the request.
        for (presented, step, expected) in [
            (format!("{}x", "t".repeat(63)), Ok(()), Refused(401)),
            ("t".repeat(64), Err(Refused(503)), Refused(503)),
        ] {
            let mut client = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            let raw = String::from_utf8(post("", "{}"))
                .expect("utf8")
                .replace("PORT", &port.to_string())
                .replace(&"t".repeat(64), &presented);
            client.write_all(raw.as_bytes()).expect("write");
            let (mut conn, _) = listener.accept().expect("accept");
            let mut called = 0;
            let got = read_request(&mut conn, &limits, &guard, Instant::now(), &mut || {
                called += 1;
                step
            });
            assert_eq!(got.expect_err("refused"), expected);
            assert_eq!(called, usize::from(expected.0 == 503));
        }
    }

    #[test]
    fn constant_time_comparator_is_the_one_used() {
        assert!(token_matches("abc", "abc"));
        assert!(!token_matches("abd", "abc"));
        assert!(!token_matches("ab", "abc"));
        assert!(!token_matches("", "abc"));
    }
}
