//! A remote upstream (`bir-proxy --url`): Streamable HTTP and the legacy
//! HTTP+SSE transport, presented to the relay as a "virtual child".
//!
//! ```text
//! pump_host ──▶ pipe ──▶ transport thread ──POST──▶ server
//!                                  │  (one thread per request, a GET
//!                                  │   stream for server-initiated messages)
//! pump_upstream ◀── pipe ◀── one line per message the server sent
//! ```
//!
//! The relay does not change: the host pump writes lines into one OS pipe,
//! `pump_upstream` reads lines from another, exactly as with a child's stdin
//! and stdout. Everything HTTP lives here.
//!
//! Invariants:
//! * A message is written to the host with the bytes the server sent (the
//!   JSON body or the SSE data), minus framing; raw line breaks between JSON
//!   tokens become spaces so the message stays one line.
//! * The transport answers a request itself only when the server cannot:
//!   unreachable, sign-in needed, an HTTP error, an answer too large, a
//!   2xx without a JSON-RPC answer, a stream that ended unanswered. These
//!   answers never echo the server's body, and name the URL only with its
//!   secrets redacted; a body that is not JSON-RPC is never relayed.
//! * Static headers and the session id go only to the configured origin; a
//!   redirect elsewhere drops them, https→http off loopback is refused.
//!   Neither is ever logged.
//! * Memory per stream is bounded by the message limit.

use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead, BufReader, PipeReader, PipeWriter, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde::Deserialize;
use url::Url;

use super::Event;
use super::config::{ProxyConfig, TransportMode, UpstreamHttpConfig};
use super::modern;
use super::sse::SseReader;
use crate::jsonrpc::message::{self, IdKey, Kind};
use crate::jsonrpc::scan::{self, LineSummary};
use crate::sys::lock;
use crate::urls;

const ACCEPT_BOTH: &str = "application/json, text/event-stream";
/// How long the `DELETE` of the session may take when the host leaves.
const DELETE_TIMEOUT: Duration = Duration::from_secs(2);
/// Reconnecting to a dropped stream without progress stops after this many
/// attempts.
const RESUME_ATTEMPTS: u32 = 5;
/// Longest wait between GET stream reconnects.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long a request waits for a legacy SSE server's `endpoint` event.
const ENDPOINT_WAIT: Duration = Duration::from_secs(10);

/// The pipe ends the relay uses.
pub struct Started {
    /// What the host pump writes to (in place of a child's stdin).
    pub to_upstream_http: PipeWriter,
    /// What `pump_upstream` reads (in place of a child's stdout).
    pub from_upstream_http: PipeReader,
}

/// Starts the transport thread. It sends [`Event::UpstreamHttpClosed`] once the
/// host's side closed and the session was ended.
pub fn start(cfg: &ProxyConfig, events: Sender<Event>) -> io::Result<Started> {
    let Some(http_cfg) = cfg.upstream_http.clone() else {
        return Err(io::Error::other("not a remote upstream"));
    };
    let (host_r, host_w) = io::pipe()?;
    let (srv_r, srv_w) = io::pipe()?;
    let remote = Arc::new(UpstreamHttp::new(http_cfg, cfg.max_message_bytes, srv_w));
    thread::Builder::new()
        .name("bir-http".into())
        .stack_size(512 * 1024)
        .spawn(move || remote.run(host_r, &events))?;
    Ok(Started {
        to_upstream_http: host_w,
        from_upstream_http: srv_r,
    })
}

/// Why a request got no usable HTTP answer.
enum HttpFailure {
    Unreachable(String),
    Refused(String),
}

/// Where an awaited answer goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Deliver {
    Host,
    /// The proxy's own request: the answer is kept, not relayed.
    Swallow,
}

/// How reading an answer ended.
enum Answer {
    /// The awaited response arrived (its bytes when swallowed).
    Answered(Option<Vec<u8>>),
    /// The stream ended without it; the transport already told the host.
    Lost,
}

#[derive(Default)]
struct State {
    session: Option<String>,
    protocol: Option<String>,
    /// Bumped each time a new session replaces an expired one.
    epoch: u64,
    /// The host's `initialize` and `notifications/initialized` lines.
    initialize: Option<Vec<u8>>,
    initialized: Option<Vec<u8>>,
    /// The host's last `logging/setLevel` and live `resources/subscribe`s
    /// (by URI), replayed into a renewed session.
    log_level: Option<Vec<u8>>,
    subscriptions: Vec<(String, Vec<u8>)>,
    /// The transport in use once known (auto mode decides at initialize).
    mode: Option<TransportMode>,
    /// Legacy HTTP+SSE: the endpoint from the `endpoint` event.
    endpoint: Option<Url>,
    /// Legacy HTTP+SSE: the stream ended; requests get an error.
    legacy_closed: bool,
}

struct UpstreamHttp {
    cfg: Arc<UpstreamHttpConfig>,
    max: u64,
    agent: ureq::Agent,
    out: Mutex<PipeWriter>,
    state: Mutex<State>,
    endpoint_ready: Condvar,
    reinit_lock: Mutex<()>,
    closing: AtomicBool,
    /// The Streamable HTTP GET stream was started.
    get_started: AtomicBool,
    /// The legacy HTTP+SSE stream thread is running.
    legacy_started: AtomicBool,
    own_ids: AtomicU64,
    /// 2026-07-28 requests in flight, each cancelled by closing its stream.
    modern_inflight: Mutex<HashMap<IdKey, Arc<Cancel>>>,
    /// `x-mcp-header` annotations learned from `tools/list` answers.
    param_headers: Mutex<modern::ParamHeaders>,
    /// Legacy HTTP+SSE: host requests POSTed and not yet answered on the
    /// stream (answered with an error if the stream ends).
    legacy_pending: Mutex<HashMap<IdKey, Vec<u8>>>,
    /// Legacy HTTP+SSE: ids of the proxy's own replayed requests.
    legacy_swallow: Mutex<HashSet<IdKey>>,
}

/// What to learn from an awaited answer.
#[derive(Clone, Copy)]
enum Learn {
    Nothing,
    /// The negotiated `protocolVersion` (an `initialize` answer).
    Version,
    /// `x-mcp-header` annotations (a `tools/list` answer).
    Tools,
}

/// A host request as the transport sends it.
struct Req {
    method: String,
    is_init: bool,
    /// 2026-07-28: the headers mirroring the body.
    modern: Option<Vec<(String, String)>>,
    cancel: Option<Arc<Cancel>>,
}

impl Req {
    fn plain(method: &str, is_init: bool) -> Req {
        Req {
            method: method.to_string(),
            is_init,
            modern: None,
            cancel: None,
        }
    }

    fn learn(&self) -> Learn {
        match self.method.as_str() {
            "initialize" => Learn::Version,
            "tools/list" => Learn::Tools,
            _ => Learn::Nothing,
        }
    }
}

/// How the host cancels a 2026-07-28 request over HTTP: by closing its
/// stream. A thread blocked reading a silent stream would only notice a flag
/// at the server's next event, which may never come (and until then the
/// server does not learn of the cancel), so the connection is shut down.
///
/// Invariant: `cancel` and `began` both take `conn`'s lock, so whichever
/// runs second sees the other: a stream that began is shut down, one that
/// begins after the cancel is not read.
#[derive(Default)]
struct Cancel {
    asked: AtomicBool,
    /// The (local, peer) addresses of the connection the answer streams on.
    conn: Mutex<Option<(SocketAddr, SocketAddr)>>,
}

impl Cancel {
    fn asked(&self) -> bool {
        self.asked.load(Ordering::SeqCst)
    }

    /// The host cancelled: close the stream if it began.
    fn cancel(&self) {
        let conn = lock(&self.conn);
        self.asked.store(true, Ordering::SeqCst);
        if let Some((local, peer)) = *conn {
            shut_down_connection(local, peer);
        }
    }

    /// The answer's event stream began on `resp`'s connection; true if the
    /// request is already cancelled (then the stream is not to be read). A
    /// JSON answer is not registered: it comes whole, and cutting it would
    /// only turn it into an error the host did not ask for.
    fn began(&self, resp: &ureq::Response) -> bool {
        let mut conn = lock(&self.conn);
        *conn = Some((resp.local_addr(), resp.remote_addr()));
        self.asked()
    }
}

/// Shuts down the TCP connection between `local` and `peer`, so that a
/// thread blocked reading it returns (end of stream) at once. ureq 2 does
/// not hand out its sockets: the connection is found among the process's
/// descriptors (Linux `/proc/self/fd`) by its two addresses, which name one
/// connected socket. Elsewhere, or if it is already gone, nothing happens.
fn shut_down_connection(local: SocketAddr, peer: SocketAddr) {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    for entry in fds.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if socket_addr(fd, libc::getsockname) == Some(local)
            && socket_addr(fd, libc::getpeername) == Some(peer)
        {
            // SAFETY: shutdown takes a descriptor number and no memory; on
            // one that is not (or no longer) a socket it fails harmlessly.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
            return;
        }
    }
}

type NameFn =
    unsafe extern "C" fn(libc::c_int, *mut libc::sockaddr, *mut libc::socklen_t) -> libc::c_int;

/// A socket's own (`getsockname`) or peer (`getpeername`) address, if
/// `fd` is an IP socket.
fn socket_addr(fd: libc::c_int, name: NameFn) -> Option<SocketAddr> {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `storage` is writable for `len` bytes, as the call requires.
    let rc = unsafe { name(fd, (&raw mut storage).cast(), &raw mut len) };
    if rc != 0 {
        return None;
    }
    match libc::c_int::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let v4: libc::sockaddr_in = unsafe { *(&raw const storage).cast() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
            Some(SocketAddr::from((ip, u16::from_be(v4.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let v6: libc::sockaddr_in6 = unsafe { *(&raw const storage).cast() };
            Some(SocketAddr::V6(std::net::SocketAddrV6::new(
                v6.sin6_addr.s6_addr.into(),
                u16::from_be(v6.sin6_port),
                v6.sin6_flowinfo,
                v6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[derive(Deserialize)]
struct InitAnswer {
    result: Option<InitResult>,
}

#[derive(Deserialize)]
struct InitResult {
    #[serde(rename = "protocolVersion")]
    protocol_version: Option<String>,
}

fn header_safe(v: &str) -> bool {
    !v.is_empty() && v.len() <= 256 && v.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// The media type of a `Content-Type` header, lower case and without
/// parameters (`None` when absent; `[unreadable]` when it would not be
/// safe to show in an error message).
fn media_type(header: Option<&str>) -> Option<String> {
    let media = header?.split(';').next().unwrap_or_default().trim();
    if media.is_empty() {
        None
    } else if media.len() <= 100 && media.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        Some(media.to_ascii_lowercase())
    } else {
        Some("[unreadable]".into())
    }
}

fn no_proxy_matches(host: &str) -> bool {
    let list = std::env::var("NO_PROXY")
        .or_else(|_| std::env::var("no_proxy"))
        .unwrap_or_default();
    list.split(',').map(str::trim).any(|entry| {
        let entry = entry.trim_start_matches('.');
        entry == "*"
            || (!entry.is_empty()
                && (host.eq_ignore_ascii_case(entry)
                    || host
                        .to_ascii_lowercase()
                        .ends_with(&format!(".{}", entry.to_ascii_lowercase()))))
    })
}

impl UpstreamHttp {
    fn new(cfg: Arc<UpstreamHttpConfig>, max: u64, out: PipeWriter) -> UpstreamHttp {
        let host = cfg.url.host_str().unwrap_or_default().to_string();
        // ureq 2.12 reads ALL_PROXY / HTTPS_PROXY / HTTP_PROXY but not
        // NO_PROXY: that one is applied here, and loopback never proxies.
        let use_proxy = !urls::is_loopback(&cfg.url) && !no_proxy_matches(&host);
        let agent = ureq::AgentBuilder::new()
            .redirects(0)
            .timeout_connect(cfg.connect_timeout)
            .tls_connector(Arc::new(BoundedTls::new(cfg.connect_timeout)))
            .try_proxy_from_env(use_proxy)
            .user_agent(concat!("bir-proxy/", env!("CARGO_PKG_VERSION")))
            .build();
        UpstreamHttp {
            cfg,
            max,
            agent,
            out: Mutex::new(out),
            state: Mutex::new(State::default()),
            endpoint_ready: Condvar::new(),
            reinit_lock: Mutex::new(()),
            closing: AtomicBool::new(false),
            get_started: AtomicBool::new(false),
            legacy_started: AtomicBool::new(false),
            own_ids: AtomicU64::new(1),
            modern_inflight: Mutex::new(HashMap::new()),
            param_headers: Mutex::new(modern::ParamHeaders::new()),
            legacy_pending: Mutex::new(HashMap::new()),
            legacy_swallow: Mutex::new(HashSet::new()),
        }
    }

    fn redacted(&self) -> String {
        urls::redacted(&self.cfg.url)
    }

    // -- the host's side ---------------------------------------------------

    fn run(self: Arc<Self>, input: PipeReader, events: &Sender<Event>) {
        if self.cfg.mode == TransportMode::Sse {
            lock(&self.state).mode = Some(TransportMode::Sse);
            self.start_legacy_stream();
        }
        let mut reader = BufReader::with_capacity(64 * 1024, input);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            while matches!(line.last(), Some(b'\n' | b'\r')) {
                line.pop();
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            Arc::clone(&self).dispatch(std::mem::take(&mut line));
        }
        self.closing.store(true, Ordering::SeqCst);
        self.end_session();
        let _ = events.send(Event::UpstreamHttpClosed);
    }

    fn dispatch(self: Arc<Self>, body: Vec<u8>) {
        let summary = scan::summarize(&body);
        match Kind::of(&summary) {
            Kind::Request { id, method } => {
                let id = id.to_vec();
                let method = method.into_owned();
                if method == "initialize" {
                    lock(&self.state).initialize = Some(body.clone());
                    // Synchronously: what follows needs the session.
                    self.request(&body, Some(&id), &Req::plain(&method, true));
                    return;
                }
                if matches!(
                    method.as_str(),
                    "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe"
                ) {
                    self.remember_setup(&method, &body);
                }
                let req = match modern::headers_for(&body, &lock(&self.param_headers)) {
                    Some(headers) => {
                        let cancel = Arc::new(Cancel::default());
                        lock(&self.modern_inflight)
                            .insert(IdKey::from_raw(&id), Arc::clone(&cancel));
                        Req {
                            method,
                            is_init: false,
                            modern: Some(headers),
                            cancel: Some(cancel),
                        }
                    }
                    None => Req::plain(&method, false),
                };
                let me = Arc::clone(&self);
                let spawned = thread::Builder::new()
                    .name("bir-http-req".into())
                    .stack_size(256 * 1024)
                    .spawn(move || {
                        let run =
                            std::panic::AssertUnwindSafe(|| me.request(&body, Some(&id), &req));
                        if std::panic::catch_unwind(run).is_err() {
                            // A bug of ours: the host still gets an answer.
                            me.fail(Some(&id), "bir-proxy internal error (see its log)");
                        }
                        if req.modern.is_some() {
                            lock(&me.modern_inflight).remove(&IdKey::from_raw(&id));
                        }
                    });
                if let Err(err) = spawned {
                    log::error!("cannot start a request thread: {err}");
                }
            }
            Kind::Notification { method } if method == "notifications/cancelled" => {
                // 2026-07-28 over HTTP: cancelling is closing the request's
                // stream; the notification itself is not sent.
                if let Some(id) = modern::cancelled_request(&body)
                    && let Some(cancel) = lock(&self.modern_inflight).get(&IdKey::from_raw(&id))
                {
                    cancel.cancel();
                    return;
                }
                self.one_way(&body);
            }
            Kind::Notification { method } => {
                let initialized = method == "notifications/initialized";
                if initialized {
                    lock(&self.state).initialized = Some(body.clone());
                }
                self.one_way(&body);
                if initialized {
                    self.start_get_stream();
                }
            }
            Kind::Batch => {
                let me = Arc::clone(&self);
                let _ = thread::Builder::new()
                    .name("bir-http-req".into())
                    .spawn(move || me.request(&body, None, &Req::plain("", false)));
            }
            _ => self.one_way(&body),
        }
    }

    /// Writes one message to the host (through `pump_upstream`).
    fn emit(&self, msg: &[u8]) {
        let mut out = lock(&self.out);
        let result = if memchr::memchr2(b'\n', b'\r', msg).is_some() {
            let line: Vec<u8> = msg
                .iter()
                .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
                .collect();
            out.write_all(&line)
        } else {
            out.write_all(msg)
        };
        if let Err(err) = result.and_then(|()| out.write_all(b"\n")) {
            log::debug!("the relay stopped reading: {err}");
        }
    }

    /// Answers a host request with an error the proxy made.
    fn fail(&self, id: Option<&[u8]>, text: &str) {
        log::warn!("{text}");
        if let Some(id) = id {
            let mut answer = message::error_response(id, -32000, text);
            answer.pop();
            self.emit(&answer);
        }
    }

    fn failure_text(&self, failure: &HttpFailure) -> String {
        match failure {
            HttpFailure::Unreachable(why) => {
                format!("upstream unreachable: {}: {why}", self.redacted())
            }
            HttpFailure::Refused(why) => format!("upstream refused: {why}"),
        }
    }

    fn status_text(&self, resp: &ureq::Response) -> String {
        let status = resp.status();
        if status == 401 {
            let mut text = "upstream requires sign-in (HTTP 401)".to_string();
            if let Some(url) = resp
                .header("www-authenticate")
                .and_then(resource_metadata)
                .filter(|u| header_safe(u))
            {
                text.push_str(&format!("; resource metadata: {url}"));
            }
            return text;
        }
        if status == 403 {
            let header = resp.header("www-authenticate").unwrap_or_default();
            if auth_param(header, "error").as_deref() == Some("insufficient_scope") {
                let mut text =
                    "upstream requires more access (HTTP 403 insufficient_scope)".to_string();
                if let Some(scope) = auth_param(header, "scope").filter(|s| s.len() <= 512) {
                    let scope: String = scope.chars().filter(|c| !c.is_control()).collect();
                    text.push_str(&format!("; scope: {scope}"));
                }
                return text;
            }
        }
        format!("upstream answered HTTP {status}")
    }

    // -- HTTP ----------------------------------------------------------------

    /// Sends one request, following redirects by hand: credentials (static
    /// headers, session id) only to the configured origin; https → http off
    /// loopback refused.
    fn send(
        &self,
        method: &str,
        url: &Url,
        body: Option<&[u8]>,
        extra: &[(&str, &str)],
        session: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<ureq::Response, HttpFailure> {
        let origin = self.cfg.url.origin();
        let mut url = url.clone();
        let mut credentials = url.origin() == origin;
        for _ in 0..=5 {
            let mut req = self.agent.request_url(method, &url);
            if let Some(t) = timeout {
                req = req.timeout(t);
            }
            for (k, v) in extra {
                req = req.set(k, v);
            }
            if credentials {
                for (k, v) in &self.cfg.headers {
                    req = req.set(k, v);
                }
                if let Some(s) = session {
                    req = req.set("Mcp-Session-Id", s);
                }
            }
            let result = match body {
                Some(b) => req.send_bytes(b),
                None => req.call(),
            };
            let resp = match result {
                Ok(r) => r,
                Err(ureq::Error::Status(_, r)) => r,
                Err(ureq::Error::Transport(t)) => {
                    let why = match std::error::Error::source(&t) {
                        Some(src) => format!("{} ({src})", t.kind()),
                        None => t.kind().to_string(),
                    };
                    return Err(HttpFailure::Unreachable(why));
                }
            };
            if !matches!(resp.status(), 301 | 302 | 303 | 307 | 308) {
                return Ok(resp);
            }
            let Some(next) = resp.header("location").and_then(|l| url.join(l).ok()) else {
                return Ok(resp);
            };
            if let Err(why) = redirect_allowed(&url, &next) {
                return Err(HttpFailure::Refused(why.into()));
            }
            if next.origin() != origin && credentials {
                log::warn!(
                    "the server redirected to another origin: credentials are not sent there"
                );
                credentials = false;
            }
            url = next;
        }
        Err(HttpFailure::Refused("too many redirects".into()))
    }

    /// The headers every MCP POST carries, and the session to send.
    fn post_headers(&self) -> (Option<String>, Option<String>) {
        let st = lock(&self.state);
        (st.session.clone(), st.protocol.clone())
    }

    fn post(
        &self,
        url: &Url,
        body: &[u8],
        with_session: bool,
    ) -> Result<ureq::Response, HttpFailure> {
        let (session, protocol) = if with_session {
            self.post_headers()
        } else {
            (None, None)
        };
        let mut extra: Vec<(&str, &str)> = vec![
            ("Accept", ACCEPT_BOTH),
            ("Content-Type", "application/json"),
        ];
        if let Some(p) = protocol.as_deref() {
            extra.push(("MCP-Protocol-Version", p));
        }
        self.send("POST", url, Some(body), &extra, session.as_deref(), None)
    }

    /// A host request: POST it and deliver its answer.
    fn request(self: &Arc<Self>, body: &[u8], id: Option<&[u8]>, req: &Req) {
        let is_init = req.is_init;
        if let Some(headers) = &req.modern {
            return self.modern_request(body, id, req, headers);
        }
        if self.current_mode() == Some(TransportMode::Sse) {
            self.legacy_post(body, id);
            return;
        }
        let mut retried = false;
        loop {
            let (epoch, had_session) = {
                let st = lock(&self.state);
                (st.epoch, st.session.is_some())
            };
            let resp = match self.post(&self.cfg.url, body, !is_init) {
                Ok(r) => r,
                Err(f) => return self.fail(id, &self.failure_text(&f)),
            };
            let status = resp.status();
            match status {
                202 | 204 => {
                    if id.is_some() {
                        self.fail(id, "upstream accepted the request without answering it");
                    }
                    return;
                }
                200..=299 => {
                    if is_init {
                        let mut st = lock(&self.state);
                        st.mode = Some(TransportMode::Http);
                        st.session = resp
                            .header("mcp-session-id")
                            .filter(|s| header_safe(s))
                            .map(str::to_string);
                    }
                    self.read_answer(resp, id, Deliver::Host, req.learn(), None);
                    return;
                }
                404 if had_session && !is_init && !retried => {
                    retried = true;
                    if !self.reinit(epoch) {
                        return self.fail(id, "upstream session expired and could not be renewed");
                    }
                }
                400 | 404 | 405 if is_init && self.cfg.mode == TransportMode::Auto => {
                    log::info!(
                        "the server answered HTTP {status} to a Streamable HTTP initialize; trying the HTTP+SSE transport"
                    );
                    if self.probe_legacy() {
                        self.legacy_post(body, id);
                    } else {
                        self.fail(id, &self.status_text(&resp));
                    }
                    return;
                }
                _ => return self.fail(id, &self.status_text(&resp)),
            }
        }
    }

    /// A notification or response from the host: POST it, expect 202.
    fn one_way(&self, body: &[u8]) {
        if self.current_mode() == Some(TransportMode::Sse) {
            self.legacy_post(body, None);
            return;
        }
        let mut retried = false;
        loop {
            let epoch = lock(&self.state).epoch;
            match self.post(&self.cfg.url, body, true) {
                Ok(resp) if resp.status() == 404 && !retried => {
                    retried = true;
                    if !self.reinit(epoch) {
                        return;
                    }
                }
                Ok(resp) if resp.status() >= 300 => {
                    log::warn!(
                        "the server refused a notification or response: {}",
                        self.status_text(&resp)
                    );
                    return;
                }
                Ok(resp) => {
                    // Some servers answer with a stream anyway: relay it.
                    if resp.status() == 200 {
                        self.read_answer(resp, None, Deliver::Host, Learn::Nothing, None);
                    }
                    return;
                }
                Err(f) => {
                    log::warn!("{}", self.failure_text(&f));
                    return;
                }
            }
        }
    }

    fn current_mode(&self) -> Option<TransportMode> {
        lock(&self.state).mode
    }

    /// Reads an answer (a JSON body or an SSE stream) until the response to
    /// `want` arrived, relaying everything else.
    fn read_answer(
        &self,
        resp: ureq::Response,
        want: Option<&[u8]>,
        deliver: Deliver,
        learn: Learn,
        cancel: Option<&Cancel>,
    ) -> Answer {
        let media = media_type(resp.header("content-type"));
        if media.as_deref() != Some("text/event-stream") {
            return self.read_json_answer(resp, media, want, deliver, learn);
        }
        if cancel.is_some_and(|c| c.began(&resp)) {
            log::debug!("the host cancelled the request: its stream is not read");
            return Answer::Lost;
        }
        let want_key = want.map(IdKey::from_raw);
        let mut reader = Box::new(BufReader::with_capacity(64 * 1024, resp.into_reader()))
            as Box<dyn BufRead + Send>;
        let mut last_id: Option<String> = None;
        let mut retry = Duration::from_millis(1000);
        let mut attempts = 0u32;
        loop {
            let mut progressed = false;
            let mut sse = SseReader::new(&mut reader, self.max);
            loop {
                let event = match sse.next_event() {
                    Ok(Some(e)) => e,
                    Ok(None) => break,
                    Err(err) => {
                        log::debug!("the answer stream broke: {err}");
                        break;
                    }
                };
                if let Some(ms) = event.retry {
                    retry = Duration::from_millis(ms.min(60_000));
                }
                if let Some(id) = &event.id {
                    last_id = Some(id.clone());
                    progressed = true;
                }
                let Some(summary) = &event.summary else {
                    continue; // a priming event: no data
                };
                let is_want = match (&want_key, Kind::of(summary)) {
                    (Some(w), Kind::Response { id, .. }) => IdKey::from_raw(id) == *w,
                    _ => false,
                };
                if event.oversized {
                    if is_want {
                        // Answered as the awaited request is: an error for
                        // the host's, a log line for the proxy's own.
                        let text = self.too_large_text(event.data_len());
                        return self.lost(want, deliver, &text);
                    }
                    self.oversized(summary, event.data_len());
                    continue;
                }
                if event.data.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                if cancel.is_some_and(Cancel::asked) {
                    log::debug!("the host cancelled the request: its stream is closed");
                    return Answer::Lost;
                }
                if is_want {
                    self.learn(learn, &event.data);
                    if deliver == Deliver::Swallow {
                        return Answer::Answered(Some(event.data));
                    }
                    self.emit(&event.data);
                    return Answer::Answered(None);
                }
                self.emit(&event.data);
            }
            if want.is_none() && deliver == Deliver::Host {
                return Answer::Lost;
            }
            if cancel.is_some_and(Cancel::asked) {
                log::debug!("the host cancelled the request: its stream is closed");
                return Answer::Lost;
            }
            // The stream ended before the answer: resume it (SEP-1699).
            let closed = "upstream closed the stream before answering";
            let Some(resume_from) = last_id.clone() else {
                return self.lost(want, deliver, closed);
            };
            attempts = if progressed { 1 } else { attempts + 1 };
            if attempts > RESUME_ATTEMPTS || self.closing.load(Ordering::SeqCst) {
                return self.lost(want, deliver, closed);
            }
            thread::sleep(retry);
            match self.get(Some(&resume_from)) {
                Ok(resp) if resp.status() == 200 => {
                    reader = Box::new(BufReader::with_capacity(64 * 1024, resp.into_reader()));
                }
                Ok(resp) => {
                    log::debug!("resuming the stream: HTTP {}", resp.status());
                    return self.lost(want, deliver, closed);
                }
                Err(f) => return self.lost(want, deliver, &self.failure_text(&f)),
            }
        }
    }

    /// Reads a whole (non-SSE) answer body. Only a JSON body that parses as
    /// a JSON-RPC message is relayed: anything else (an HTML error page, a
    /// truncated body) would reach the host as a line that is not JSON-RPC
    /// while its request stayed unanswered, so the request gets an error
    /// instead and the body is dropped (it may hold what the host should
    /// not see). A message that is not the awaited response is relayed as
    /// the server sent it, and the request still gets its error.
    fn read_json_answer(
        &self,
        resp: ureq::Response,
        media: Option<String>,
        want: Option<&[u8]>,
        deliver: Deliver,
        learn: Learn,
    ) -> Answer {
        let mut body = Vec::new();
        let read = resp.into_reader().take(self.max + 1).read_to_end(&mut body);
        if let Err(err) = read {
            let text = format!("upstream closed the connection before answering ({err})");
            return self.lost(want, deliver, &text);
        }
        if body.len() as u64 > self.max {
            let text = self.too_large_text(body.len() as u64);
            return self.lost(want, deliver, &text);
        }
        if body.iter().all(u8::is_ascii_whitespace) {
            return self.lost(want, deliver, "upstream answered with an empty body");
        }
        if media.as_deref() != Some("application/json") {
            let what = media.map_or("no Content-Type".into(), |m| format!("Content-Type {m}"));
            let text = format!("upstream answered with {what}, not JSON or an event stream");
            return self.lost(want, deliver, &text);
        }
        let summary = scan::summarize(&body);
        let answers = match (Kind::of(&summary), want) {
            (Kind::Invalid, _) => {
                return self.lost(want, deliver, "upstream answered with invalid JSON");
            }
            (Kind::Unclassified | Kind::Blank, _) => {
                let text = "upstream answered with JSON that is not a JSON-RPC message";
                return self.lost(want, deliver, text);
            }
            (Kind::Response { id, .. }, Some(w)) => IdKey::from_raw(id) == IdKey::from_raw(w),
            (Kind::Batch, _) | (_, None) => true,
            _ => false,
        };
        if !answers {
            if deliver == Deliver::Host {
                self.emit(&body);
            }
            let text = "upstream answered with a message that is not the response to this request";
            return self.lost(want, deliver, text);
        }
        self.learn(learn, &body);
        if deliver == Deliver::Swallow {
            return Answer::Answered(Some(body));
        }
        self.emit(&body);
        Answer::Answered(None)
    }

    /// An awaited answer that will not come. The host's request gets an
    /// error; the proxy's own (swallowed) request only a log line, since
    /// its `bir:` id means nothing to the host and must not reach it.
    fn lost(&self, want: Option<&[u8]>, deliver: Deliver, text: &str) -> Answer {
        match deliver {
            Deliver::Host => self.fail(want, text),
            Deliver::Swallow => log::warn!("{text}"),
        }
        Answer::Lost
    }

    fn too_large_text(&self, size: u64) -> String {
        format!(
            "upstream answer too large ({size} bytes or more; the limit is {} bytes)",
            self.max
        )
    }

    /// A message over the limit that no request on this stream awaits: the
    /// request it answers (the host's) gets an error.
    fn oversized(&self, summary: &LineSummary, size: u64) {
        let text = self.too_large_text(size);
        match Kind::of(summary) {
            Kind::Response { id, .. } => self.fail(Some(id), &text),
            _ => log::warn!(
                "dropped a message from the server over the {}-byte limit",
                self.max
            ),
        }
    }

    fn learn(&self, learn: Learn, answer: &[u8]) {
        match learn {
            Learn::Nothing => {}
            Learn::Version => self.learn_version(answer),
            Learn::Tools => {
                let found = modern::param_headers_of(answer);
                if !found.is_empty() {
                    lock(&self.param_headers).extend(found);
                }
            }
        }
    }

    /// A 2026-07-28 request: no session, the mirrored headers, and a JSON-RPC
    /// error body for this request relayed as the answer it is.
    fn modern_request(
        &self,
        body: &[u8],
        id: Option<&[u8]>,
        req: &Req,
        headers: &[(String, String)],
    ) {
        let mut extra: Vec<(&str, &str)> = vec![
            ("Accept", ACCEPT_BOTH),
            ("Content-Type", "application/json"),
        ];
        extra.extend(headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let resp = match self.send("POST", &self.cfg.url, Some(body), &extra, None, None) {
            Ok(r) => r,
            Err(f) => return self.fail(id, &self.failure_text(&f)),
        };
        let status = resp.status();
        match status {
            202 | 204 => self.fail(id, "upstream accepted the request without answering it"),
            200..=299 => {
                self.read_answer(resp, id, Deliver::Host, req.learn(), req.cancel.as_deref());
            }
            400 | 404 if id.is_some() => {
                let want = id.map(IdKey::from_raw);
                let mut bytes = Vec::new();
                let _ = resp.into_reader().take(64 * 1024).read_to_end(&mut bytes);
                let summary = scan::summarize(&bytes);
                match Kind::of(&summary) {
                    Kind::Response {
                        id: got,
                        is_error: true,
                    } if Some(IdKey::from_raw(got)) == want => self.emit(&bytes),
                    _ => self.fail(id, &format!("upstream answered HTTP {status}")),
                }
            }
            _ => self.fail(id, &self.status_text(&resp)),
        }
    }

    fn learn_version(&self, answer: &[u8]) {
        let version = serde_json::from_slice::<InitAnswer>(answer)
            .ok()
            .and_then(|a| a.result)
            .and_then(|r| r.protocol_version)
            .filter(|v| header_safe(v));
        if let Some(v) = version {
            lock(&self.state).protocol = Some(v);
        }
    }

    fn get(&self, last_event_id: Option<&str>) -> Result<ureq::Response, HttpFailure> {
        let (session, protocol) = self.post_headers();
        let mut extra: Vec<(&str, &str)> = vec![("Accept", "text/event-stream")];
        if let Some(p) = protocol.as_deref() {
            extra.push(("MCP-Protocol-Version", p));
        }
        if let Some(l) = last_event_id {
            extra.push(("Last-Event-ID", l));
        }
        self.send("GET", &self.cfg.url, None, &extra, session.as_deref(), None)
    }

    /// A new session in place of an expired one: the host's `initialize`
    /// under an id of the proxy's (its answer is swallowed), then
    /// `notifications/initialized`. Invisible to the host.
    fn reinit(&self, seen_epoch: u64) -> bool {
        let _guard = lock(&self.reinit_lock);
        let (init, initialized) = {
            let st = lock(&self.state);
            if st.epoch != seen_epoch {
                return true; // another thread renewed it already
            }
            (st.initialize.clone(), st.initialized.clone())
        };
        let Some(init) = init else {
            return false;
        };
        let Some((line, raw_id)) = self.reissue(&init) else {
            return false;
        };
        log::info!("the server's session expired (HTTP 404); starting a new one");
        let resp = match self.post(&self.cfg.url, &line, false) {
            Ok(r) if r.status() == 200 => r,
            Ok(r) => {
                log::warn!("renewing the session: {}", self.status_text(&r));
                return false;
            }
            Err(f) => {
                log::warn!("renewing the session: {}", self.failure_text(&f));
                return false;
            }
        };
        let session = resp
            .header("mcp-session-id")
            .filter(|s| header_safe(s))
            .map(str::to_string);
        let Answer::Answered(Some(answer)) =
            self.read_answer(resp, Some(&raw_id), Deliver::Swallow, Learn::Nothing, None)
        else {
            return false;
        };
        {
            let mut st = lock(&self.state);
            st.session = session;
            st.epoch += 1;
        }
        self.learn_version(&answer);
        if let Some(initialized) = initialized
            && let Err(f) = self.post(&self.cfg.url, &initialized, true)
        {
            log::warn!("renewing the session: {}", self.failure_text(&f));
        }
        // The session state the host set up: log level, subscriptions.
        for line in self.session_setup() {
            let Some((own, raw_id)) = self.reissue(&line) else {
                continue;
            };
            match self.post(&self.cfg.url, &own, true) {
                Ok(r) if r.status() == 200 => {
                    self.read_answer(r, Some(&raw_id), Deliver::Swallow, Learn::Nothing, None);
                }
                Ok(r) => log::warn!("renewing the session: {}", self.status_text(&r)),
                Err(f) => log::warn!("renewing the session: {}", self.failure_text(&f)),
            }
        }
        true
    }

    /// The host's request `line` under a fresh id of the proxy's own
    /// (`bir:reinit-N`), without its newline, and that id as raw JSON.
    fn reissue(&self, line: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        let id = format!(
            "bir:reinit-{}",
            self.own_ids.fetch_add(1, Ordering::Relaxed)
        );
        let mut own = super::with_own_id(line, &id)?;
        own.pop();
        Some((own, serde_json::to_vec(&id).unwrap_or_default()))
    }

    /// The host's last `logging/setLevel` and its live
    /// `resources/subscribe`s, replayed into a new session.
    fn session_setup(&self) -> Vec<Vec<u8>> {
        let st = lock(&self.state);
        st.log_level
            .iter()
            .cloned()
            .chain(st.subscriptions.iter().map(|(_, line)| line.clone()))
            .collect()
    }

    /// Remembers what a new session must be told again.
    fn remember_setup(&self, method: &str, body: &[u8]) {
        #[derive(Deserialize)]
        struct UriParams {
            uri: Option<String>,
        }
        #[derive(Deserialize)]
        struct WithUri {
            params: Option<UriParams>,
        }
        let uri = || {
            serde_json::from_slice::<WithUri>(body)
                .ok()
                .and_then(|m| m.params)
                .and_then(|p| p.uri)
        };
        let mut st = lock(&self.state);
        match method {
            "logging/setLevel" => st.log_level = Some(body.to_vec()),
            "resources/subscribe" => {
                if let Some(uri) = uri() {
                    st.subscriptions.retain(|(u, _)| *u != uri);
                    if st.subscriptions.len() < 1000 {
                        st.subscriptions.push((uri, body.to_vec()));
                    }
                }
            }
            "resources/unsubscribe" => {
                if let Some(uri) = uri() {
                    st.subscriptions.retain(|(u, _)| *u != uri);
                }
            }
            _ => {}
        }
    }

    /// Opens the GET stream for server-initiated messages (once).
    fn start_get_stream(self: &Arc<Self>) {
        if self.current_mode() != Some(TransportMode::Http)
            || self.get_started.swap(true, Ordering::SeqCst)
        {
            return;
        }
        let me = Arc::clone(self);
        let _ = thread::Builder::new()
            .name("bir-http-get".into())
            .stack_size(256 * 1024)
            .spawn(move || me.get_stream_loop());
    }

    fn get_stream_loop(&self) {
        let mut last_id: Option<String> = None;
        let mut failures = 0u32;
        let mut retry = Duration::from_millis(1000);
        loop {
            if self.closing.load(Ordering::SeqCst) {
                return;
            }
            let epoch = lock(&self.state).epoch;
            let mut delivered = false;
            match self.get(last_id.as_deref()) {
                Ok(resp) if resp.status() == 200 => {
                    let mut reader = BufReader::with_capacity(64 * 1024, resp.into_reader());
                    let mut sse = SseReader::new(&mut reader, self.max);
                    while let Ok(Some(event)) = sse.next_event() {
                        if let Some(ms) = event.retry {
                            retry = Duration::from_millis(ms.min(60_000));
                        }
                        if let Some(id) = &event.id {
                            last_id = Some(id.clone());
                        }
                        delivered = true;
                        let Some(summary) = &event.summary else {
                            continue;
                        };
                        if event.oversized {
                            self.oversized(summary, event.data_len());
                        } else if !event.data.iter().all(u8::is_ascii_whitespace) {
                            self.emit(&event.data);
                        }
                    }
                }
                Ok(resp) if resp.status() == 405 => {
                    log::debug!("the server offers no GET stream (HTTP 405)");
                    return;
                }
                Ok(resp) if resp.status() == 404 && lock(&self.state).session.is_some() => {
                    last_id = None;
                    if !self.reinit(epoch) {
                        failures += 1;
                    }
                }
                Ok(resp) => log::debug!("GET stream: HTTP {}", resp.status()),
                Err(f) => log::debug!("GET stream: {}", self.failure_text(&f)),
            }
            failures = if delivered { 0 } else { failures + 1 };
            let wait = if failures == 0 {
                retry
            } else {
                (retry * 2u32.saturating_pow(failures.min(5))).min(MAX_BACKOFF)
            };
            if !self.sleep_unless_closing(wait) {
                return;
            }
        }
    }

    fn sleep_unless_closing(&self, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        while Instant::now() < until {
            if self.closing.load(Ordering::SeqCst) {
                return false;
            }
            thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
        }
        !self.closing.load(Ordering::SeqCst)
    }

    /// The host left: end the session (`DELETE`, bounded).
    fn end_session(&self) {
        let session = lock(&self.state).session.clone();
        let Some(session) = session else {
            return;
        };
        let protocol = lock(&self.state).protocol.clone();
        let mut extra: Vec<(&str, &str)> = Vec::new();
        if let Some(p) = protocol.as_deref() {
            extra.push(("MCP-Protocol-Version", p));
        }
        match self.send(
            "DELETE",
            &self.cfg.url,
            None,
            &extra,
            Some(&session),
            Some(DELETE_TIMEOUT),
        ) {
            Ok(resp) => log::debug!("session ended (HTTP {})", resp.status()),
            Err(f) => log::debug!("ending the session: {}", self.failure_text(&f)),
        }
    }

    // -- legacy HTTP+SSE (2024-11-05) ----------------------------------------

    /// Auto mode: the URL refused a Streamable HTTP initialize. Does it speak
    /// HTTP+SSE (a GET stream whose first event is `endpoint`)? If not, the
    /// transport is left undecided again: later requests get the server's
    /// own answer (not "no HTTP+SSE stream"), the legacy stream stops
    /// polling, and the host's next `initialize` probes afresh (the server
    /// may have been down or redeploying).
    fn probe_legacy(self: &Arc<Self>) -> bool {
        {
            let mut st = lock(&self.state);
            st.mode = Some(TransportMode::Sse);
            st.legacy_closed = false;
        }
        self.start_legacy_stream();
        if self.wait_endpoint().is_some() {
            return true;
        }
        lock(&self.state).mode = None;
        false
    }

    fn start_legacy_stream(self: &Arc<Self>) {
        if self.legacy_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = Arc::clone(self);
        let _ = thread::Builder::new()
            .name("bir-sse".into())
            .stack_size(256 * 1024)
            .spawn(move || me.legacy_stream());
    }

    fn wait_endpoint(&self) -> Option<Url> {
        let deadline = Instant::now() + ENDPOINT_WAIT.max(self.cfg.connect_timeout);
        let mut st = lock(&self.state);
        loop {
            if let Some(e) = &st.endpoint {
                return Some(e.clone());
            }
            if st.legacy_closed {
                return None;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            st = self
                .endpoint_ready
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Legacy: the GET stream, reconnected (with backoff) when it ends. A
    /// new stream is a new session: the host's handshake is replayed to it
    /// (answer swallowed) before requests go to its endpoint; requests the
    /// old one left unanswered get an error.
    ///
    /// It ends when the transport is no longer HTTP+SSE (a failed probe):
    /// `legacy_started` is cleared under the state lock, so a probe that sets
    /// the mode again either finds this thread still going or starts one.
    fn legacy_stream(&self) {
        let mut failures = 0u32;
        let mut replay = false;
        loop {
            if self.closing.load(Ordering::SeqCst) {
                return;
            }
            {
                let st = lock(&self.state);
                if st.mode != Some(TransportMode::Sse) {
                    self.legacy_started.store(false, Ordering::SeqCst);
                    return;
                }
            }
            let resp = match self.send(
                "GET",
                &self.cfg.url,
                None,
                &[("Accept", "text/event-stream")],
                None,
                None,
            ) {
                Ok(r) if r.status() == 200 => Ok(r),
                Ok(r) => Err(self.status_text(&r)),
                Err(f) => Err(self.failure_text(&f)),
            };
            match resp {
                Err(text) => {
                    log::warn!("the HTTP+SSE stream: {text}");
                    failures += 1;
                    lock(&self.state).legacy_closed = true;
                    self.endpoint_ready.notify_all();
                }
                Ok(resp) => {
                    failures = 0;
                    self.read_legacy_stream(resp, replay);
                    replay = true;
                    {
                        let mut st = lock(&self.state);
                        st.endpoint = None;
                    }
                    if self.closing.load(Ordering::SeqCst) {
                        return;
                    }
                    log::warn!("the server closed the HTTP+SSE stream; reconnecting");
                    let pending: Vec<Vec<u8>> = lock(&self.legacy_pending)
                        .drain()
                        .map(|(_, raw)| raw)
                        .collect();
                    for raw in pending {
                        self.fail(
                            Some(&raw),
                            "upstream closed the HTTP+SSE stream before answering",
                        );
                    }
                }
            }
            let wait = (Duration::from_millis(500) * 2u32.saturating_pow(failures.min(6)))
                .min(MAX_BACKOFF);
            if !self.sleep_unless_closing(wait) {
                return;
            }
        }
    }

    fn read_legacy_stream(&self, resp: ureq::Response, replay: bool) {
        let mut reader = BufReader::with_capacity(64 * 1024, resp.into_reader());
        let mut sse = SseReader::new(&mut reader, self.max);
        while let Ok(Some(event)) = sse.next_event() {
            if event.event.as_deref() == Some("endpoint") {
                let target = std::str::from_utf8(&event.data)
                    .ok()
                    .and_then(|d| self.cfg.url.join(d.trim()).ok());
                match target {
                    Some(t) if t.origin() == self.cfg.url.origin() => {
                        if replay {
                            self.legacy_replay(&t);
                        }
                        let mut st = lock(&self.state);
                        st.endpoint = Some(t);
                        st.legacy_closed = false;
                        self.endpoint_ready.notify_all();
                    }
                    _ => log::warn!("ignored an endpoint event naming another origin or no URL"),
                }
                continue;
            }
            let Some(summary) = &event.summary else {
                continue;
            };
            if let Kind::Response { id, .. } = Kind::of(summary) {
                let key = IdKey::from_raw(id);
                if lock(&self.legacy_swallow).remove(&key) {
                    continue; // the answer to the proxy's own replay
                }
                lock(&self.legacy_pending).remove(&key);
            }
            if event.oversized {
                self.oversized(summary, event.data_len());
            } else if !event.data.iter().all(u8::is_ascii_whitespace) {
                self.emit(&event.data);
            }
        }
    }

    /// A new legacy session: the host's `initialize` (under an id of the
    /// proxy's; its answer is swallowed) and `notifications/initialized`.
    fn legacy_replay(&self, endpoint: &Url) {
        let (init, initialized) = {
            let st = lock(&self.state);
            (st.initialize.clone(), st.initialized.clone())
        };
        let Some(init) = init else {
            return;
        };
        let Some((line, raw_id)) = self.reissue(&init) else {
            return;
        };
        lock(&self.legacy_swallow).insert(IdKey::from_raw(&raw_id));
        log::info!("new HTTP+SSE session: replaying the handshake");
        let extra = [("Content-Type", "application/json")];
        let mut setup = Vec::new();
        for line in self.session_setup() {
            if let Some((own, raw_id)) = self.reissue(&line) {
                lock(&self.legacy_swallow).insert(IdKey::from_raw(&raw_id));
                setup.push(own);
            }
        }
        for body in std::iter::once(line).chain(initialized).chain(setup) {
            if let Err(f) = self.send("POST", endpoint, Some(&body), &extra, None, None) {
                log::warn!("replaying the handshake: {}", self.failure_text(&f));
                return;
            }
        }
    }

    /// Legacy: POST a message to the endpoint; the answer comes on the stream.
    fn legacy_post(&self, body: &[u8], id: Option<&[u8]>) {
        let Some(endpoint) = self.wait_endpoint() else {
            let text = format!(
                "upstream unreachable: {}: no HTTP+SSE stream",
                self.redacted()
            );
            return self.fail(id, &text);
        };
        if let Some(id) = id {
            lock(&self.legacy_pending).insert(IdKey::from_raw(id), id.to_vec());
        }
        let extra = [("Content-Type", "application/json")];
        let failed = match self.send("POST", &endpoint, Some(body), &extra, None, None) {
            Ok(resp) if resp.status() < 300 => None,
            Ok(resp) => Some(self.status_text(&resp)),
            Err(f) => Some(self.failure_text(&f)),
        };
        if let Some(text) = failed {
            let still_pending = id.is_some_and(|id| {
                lock(&self.legacy_pending)
                    .remove(&IdKey::from_raw(id))
                    .is_some()
            });
            if still_pending || id.is_none() {
                self.fail(id, &text);
            }
        }
    }
}

/// rustls (webpki roots, TLS 1.2/1.3, ureq's own settings) with the
/// handshake bounded like the TCP connect: ureq 2 bounds only the latter,
/// and a socket read timeout would also cut a slow tool's answer, so it is
/// set for the handshake alone.
struct BoundedTls {
    inner: Arc<ureq::rustls::ClientConfig>,
    timeout: Duration,
}

impl BoundedTls {
    fn new(timeout: Duration) -> BoundedTls {
        use ureq::rustls;
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let config = rustls::ClientConfig::builder_with_provider(
            rustls::crypto::ring::default_provider().into(),
        )
        .with_protocol_versions(&[&rustls::version::TLS12, &rustls::version::TLS13])
        .unwrap_or_else(|_| {
            rustls::ClientConfig::builder_with_provider(
                rustls::crypto::ring::default_provider().into(),
            )
            .with_safe_default_protocol_versions()
            .unwrap_or_else(|_| unreachable!("ring supports TLS 1.2 and 1.3"))
        })
        .with_root_certificates(roots)
        .with_no_client_auth();
        BoundedTls {
            inner: Arc::new(config),
            timeout,
        }
    }
}

impl ureq::TlsConnector for BoundedTls {
    fn connect(
        &self,
        dns_name: &str,
        io: Box<dyn ureq::ReadWrite>,
    ) -> Result<Box<dyn ureq::ReadWrite>, ureq::Error> {
        let before = io.socket().map(|s| (s.read_timeout(), s.write_timeout()));
        if let Some(s) = io.socket() {
            let _ = s.set_read_timeout(Some(self.timeout));
            let _ = s.set_write_timeout(Some(self.timeout));
        }
        let stream = self.inner.connect(dns_name, io)?;
        if let (Some(s), Some((Ok(r), Ok(w)))) = (stream.socket(), before) {
            let _ = s.set_read_timeout(r);
            let _ = s.set_write_timeout(w);
        }
        Ok(stream)
    }
}

/// Whether the transport follows a redirect at all: never from https to
/// plain http (off loopback), never to anything but http(s).
fn redirect_allowed(from: &Url, to: &Url) -> Result<(), &'static str> {
    if !matches!(to.scheme(), "http" | "https") {
        return Err("a redirect to a non-HTTP URL");
    }
    if from.scheme() == "https" && to.scheme() == "http" && !urls::is_loopback(to) {
        return Err("a redirect from https to plain http");
    }
    Ok(())
}

/// `resource_metadata="…"` from a `WWW-Authenticate` header.
fn resource_metadata(header: &str) -> Option<String> {
    auth_param(header, "resource_metadata")
}

/// One `name=value` / `name="value"` parameter of a `WWW-Authenticate`
/// header (matched as a whole word).
fn auth_param(header: &str, name: &str) -> Option<String> {
    let key = format!("{name}=");
    let mut from = 0;
    let at = loop {
        let i = from + header[from..].find(&key)?;
        let word_start = i == 0 || matches!(header.as_bytes()[i - 1], b' ' | b',' | b'\t');
        if word_start {
            break i;
        }
        from = i + key.len();
    };
    let rest = &header[at + key.len()..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split([',', ' ']).next()?,
    };
    Some(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_secrets_in_urls() {
        let u = Url::parse("https://user:pw@mcp.example.com/mcp?token=abc&x=1#access_token=z")
            .expect("url");
        let r = urls::redacted(&u);
        assert_eq!(
            r,
            "https://mcp.example.com/mcp?token=[REDACTED]&x=[REDACTED]#[REDACTED]"
        );
    }

    #[test]
    fn redirects_never_downgrade_off_loopback() {
        let u = |s: &str| Url::parse(s).expect("url");
        let https = u("https://mcp.example.com/mcp");
        assert!(redirect_allowed(&https, &u("https://other.example.com/x")).is_ok());
        assert_eq!(
            redirect_allowed(&https, &u("http://mcp.example.com/mcp")),
            Err("a redirect from https to plain http")
        );
        assert!(redirect_allowed(&https, &u("http://127.0.0.1:9/mcp")).is_ok());
        assert!(redirect_allowed(&https, &u("http://localhost/mcp")).is_ok());
        assert!(redirect_allowed(&https, &u("file:///etc/passwd")).is_err());
    }

    #[test]
    fn media_types_are_bare_and_safe_to_show() {
        let m = |h: Option<&str>| media_type(h);
        assert_eq!(
            m(Some("Application/JSON; charset=utf-8")).as_deref(),
            Some("application/json")
        );
        assert_eq!(
            m(Some(" text/event-stream")).as_deref(),
            Some("text/event-stream")
        );
        assert_eq!(m(Some(" ; x=1")), None);
        assert_eq!(m(None), None);
        assert_eq!(m(Some("text/ht ml")).as_deref(), Some("[unreadable]"));
    }

    #[test]
    fn a_connection_is_shut_down_by_its_addresses() {
        use std::net::{Shutdown, TcpListener, TcpStream};
        use std::os::fd::AsRawFd;
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (mut server, _) = listener.accept().expect("accept");
        let (local, peer) = (
            client.local_addr().expect("local"),
            client.peer_addr().expect("peer"),
        );
        assert_eq!(
            socket_addr(client.as_raw_fd(), libc::getsockname),
            Some(local)
        );
        assert_eq!(
            socket_addr(client.as_raw_fd(), libc::getpeername),
            Some(peer)
        );
        shut_down_connection(local, peer);
        // The server sees the end of the stream; the client cannot read.
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        assert_eq!(server.read(&mut [0u8; 8]).expect("read"), 0);
        assert_eq!((&client).read(&mut [0u8; 8]).expect("read"), 0);
        let _ = client.shutdown(Shutdown::Both);
    }

    #[test]
    fn finds_resource_metadata() {
        assert_eq!(
            resource_metadata(
                r#"Bearer error="invalid_token", resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp", scope="x""#
            )
            .as_deref(),
            Some("https://a.example/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(resource_metadata("Bearer realm=x"), None);
        let h = r#"Bearer error="insufficient_scope", scope="files:read files:write", xscope=no"#;
        assert_eq!(
            auth_param(h, "error").as_deref(),
            Some("insufficient_scope")
        );
        assert_eq!(
            auth_param(h, "scope").as_deref(),
            Some("files:read files:write")
        );
    }
}
