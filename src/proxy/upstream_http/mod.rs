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

mod legacy_sse;
mod policy;
mod socket;
mod streamable;

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
use crate::locks::lock;
use crate::replay::runner::Connector;
use crate::replay::targets::RemoteServer;
use crate::urls;
use policy::{
    BoundedTls, auth_param, header_safe, media_type, no_proxy_matches, redirect_allowed,
    resource_metadata,
};
use socket::shut_down_connection;

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
pub(crate) struct Started {
    /// What the host pump writes to (in place of a child's stdin).
    pub to_upstream_http: PipeWriter,
    /// What `pump_upstream` reads (in place of a child's stdout).
    pub from_upstream_http: PipeReader,
}

/// Starts the transport thread. It sends [`Event::UpstreamHttpClosed`] once the
/// host's side closed and the session was ended.
pub(crate) fn start(cfg: &ProxyConfig, events: Sender<Event>) -> io::Result<Started> {
    let Some(http_cfg) = cfg.upstream_http.clone() else {
        return Err(io::Error::other("not a remote upstream"));
    };
    start_with(http_cfg, cfg.max_message_bytes, events)
}

/// The transport alone, for bir's own MCP client (`bir replay` and `bir
/// verify` against a remote server): write one message per line, read one
/// per line; closing the writer ends the session. Nobody listens for the
/// closing event.
pub(crate) fn connect(http_cfg: UpstreamHttpConfig, max_message_bytes: u64) -> io::Result<Started> {
    let (events, _unheard) = std::sync::mpsc::channel();
    start_with(Arc::new(http_cfg), max_message_bytes, events)
}

/// A remote server for bir's own MCP client (`bir replay|verify|scenario
/// check`) as a [`Connector`]: each connection is a fresh session through
/// [`connect`], with the default connect timeout and message limit.
/// `remote.transport` as a client config names it: `http`,
/// `streamable-http` or `streamableHttp`, `sse`; anything else is auto.
pub(crate) fn replay_connector(remote: &RemoteServer) -> Connector {
    let mode = match remote.transport.as_str() {
        "http" | "streamable-http" | "streamableHttp" => TransportMode::Http,
        "sse" => TransportMode::Sse,
        _ => TransportMode::Auto,
    };
    let cfg = UpstreamHttpConfig {
        url: remote.url.clone(),
        mode,
        headers: remote.headers.clone(),
        connect_timeout: Duration::from_millis(super::config::DEFAULT_CONNECT_TIMEOUT_MS),
        session_note: Default::default(),
    };
    Arc::new(move || {
        let pipes = connect(cfg.clone(), super::config::DEFAULT_MAX_MESSAGE_BYTES)
            .map_err(|e| format!("cannot open the HTTP transport: {e}"))?;
        Ok((
            Box::new(pipes.to_upstream_http) as Box<dyn Write + Send>,
            Box::new(pipes.from_upstream_http) as Box<dyn Read + Send>,
        ))
    })
}

fn start_with(
    http_cfg: Arc<UpstreamHttpConfig>,
    max_message_bytes: u64,
    events: Sender<Event>,
) -> io::Result<Started> {
    let (host_r, host_w) = io::pipe()?;
    let (srv_r, srv_w) = io::pipe()?;
    let remote = Arc::new(UpstreamHttp::new(http_cfg, max_message_bytes, srv_w));
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

#[derive(Deserialize)]
struct InitAnswer {
    result: Option<InitResult>,
}

#[derive(Deserialize)]
struct InitResult {
    #[serde(rename = "protocolVersion")]
    protocol_version: Option<String>,
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
                        self.cfg.session_note.set(st.session.as_deref());
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
}
