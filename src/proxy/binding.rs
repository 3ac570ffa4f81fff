//! Binding: where a proxy's prepared records go — to the recorder daemon
//! (Tier 1, "bound") or into a local run of its own (Tier 2,
//! "standalone") — and the negotiation between the two.
//!
//! ```text
//! observer thread:  StepReport ─▶ Preparation ─▶ ProxyItems ─▶ ReportPath
//!                                                               ├─ DaemonPath (POST /proxy/records)
//!                                                               └─ LocalRun   (journal)
//! finder thread:    (ancestry) ─▶ ensure_running ─▶ POST /proxy/register ─▶ hands the link over
//! ```
//!
//! A proxy binds when its environment names a session:
//! `CLAUDE_CODE_SESSION_ID` (Claude Code sets it for every server it
//! starts), or `BIR_CONTROL_URL` + `BIR_CONTROL_TOKEN` (sessions driven
//! through an SDK; `BIR_SESSION_ID` may name the session); or, when it
//! names none (Codex CLI, Gemini CLI), by its ancestry: it sends its
//! ancestor processes and the daemon binds it to the hooked session whose
//! host process is one of them (`bound::process`). Such a proxy never
//! starts the daemon (the hooks do), and finds it in the `BIR_HOME` its
//! host runs with when its own environment was stripped of it. The finder
//! thread reads that ancestry from `/proc`. `BIR_BIND=off` keeps it
//! standalone.
//!
//! Negotiation (all on the observer thread, which never waits on the
//! daemon except for one bounded post per wake-up; finding and starting
//! the daemon happens on the finder thread):
//! * From its first exchange (the host's `initialize`, once answered) the
//!   proxy looks for the daemon (starting it if need be) and holds
//!   prepared items in memory for up to `BIR_BIND_WAIT_MS` (10 s) from its
//!   start: the host may start servers before its session's first hook.
//!   The finder thread does not exist before: the first answer never
//!   waits for it, nor shares the CPU with it.
//! * Found: it registers, then posts its items, one batch per observer
//!   wake-up. The daemon accepts a registration only for a session its
//!   hooks told it about (else 409): a session without bir's hooks would
//!   have a bound run that nothing ends. While it holds its items the
//!   proxy asks again every 250 ms (the host may start servers before the
//!   session's first hook), then at the usual pace.
//! * Not found in time: the held items go into a local standalone run,
//!   and so do the following ones; the finder looks again every
//!   `BIR_BIND_RETRY_MS` (15 s) and the proxy binds when a daemon answers.
//! * A post that fails (the daemon died, or no longer knows this proxy):
//!   that batch and the following calls go into the standalone run, the
//!   finder revives the daemon in the background, and on rebinding the
//!   number of calls the daemon's run missed is sent as `lost` (the run
//!   becomes lossy there; the standalone run holds those calls).
//!
//! Nothing that reached the proxy is lost by switching: every prepared
//! item is either acknowledged by the daemon or written locally. (A batch
//! whose post timed out may have reached the daemon too: then it is in
//! both places, never in neither.)

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use super::config::ProxyConfig;
use super::off_gate::OffGate;
use crate::bound::process::ProcessId;
use crate::bound::wire::{ProxyItem, ProxyRecords, ProxyRegister, ProxyUnregister};
use crate::observe::step::StepReport;
use crate::observe::{Direction, Sink};
use crate::record::model::{HostInfo, ServerSnapshot};
use crate::record::{LocalRun, Preparation, Recorder, RecorderConfig};

/// The proxy's recording sink: bound (negotiating with the daemon) when
/// its environment names a session, else the standalone [`Recorder`];
/// either way behind the off switch.
pub(crate) fn recording_sink(
    cfg: &ProxyConfig,
    rc: RecorderConfig,
    run: LocalRun,
) -> Box<dyn Sink> {
    let prep = Preparation::new(rc);
    let settings = BindSettings::from_env(&cfg.server_name, cfg.session_id.as_deref());
    // A proxy whose environment names its session reports to its home's
    // daemon (found by the finder at once, no ancestry to read).
    let named_home = settings
        .as_ref()
        .filter(|s| !s.by_ancestry)
        .and_then(|_| crate::home::bir_home());
    match (settings, named_home) {
        (Some(settings), _) if settings.by_ancestry => {
            let home = Arc::new(OnceLock::new());
            let probe_home = Arc::clone(&home);
            let mut sink = BindingSink::new(prep, run, &settings, Lookup::ByAncestry { home });
            // Unknown until the finder has read the ancestry: asked again.
            sink.probe = Some(Box::new(move || {
                let home: &PathBuf = probe_home.get()?;
                Some(crate::daemon::client::discover(home).is_some())
            }));
            Box::new(OffGate::new(sink))
        }
        (Some(settings), Some(home)) => {
            let daemon = HomeDaemon { home, start: true };
            let sink = BindingSink::new(prep, run, &settings, Lookup::Named(Box::new(daemon)));
            Box::new(OffGate::new(sink))
        }
        _ => Box::new(OffGate::new(Recorder::from_parts(prep, run))),
    }
}

/// Whether this proxy's environment names a session it will report to
/// (and binding is not off). A proxy that may bind by its ancestry only
/// (no session named) answers false: most such proxies record standalone
/// (their host has no hooks), and keep what standalone runs have.
pub(crate) fn may_bind(cfg: &ProxyConfig) -> bool {
    BindSettings::from_env(&cfg.server_name, cfg.session_id.as_deref())
        .is_some_and(|s| !s.by_ancestry)
        && crate::home::bir_home().is_some()
}

/// The home of the daemon a proxy bound by ancestry looks for: its own
/// `BIR_HOME` if set, else its host's, else the default.
fn home_by_ancestry(ancestors: &[ProcessId]) -> Option<PathBuf> {
    if std::env::var_os("BIR_HOME").is_some() {
        return crate::home::bir_home();
    }
    home_of_host(ancestors).or_else(crate::home::bir_home)
}

/// `BIR_HOME` as the proxy's host process runs with it: Codex CLI starts
/// its MCP servers with a few variables only (`HOME`, `PATH`, …), so a
/// `BIR_HOME` its hooks see is not in the proxy's environment. Only that
/// one variable is kept of what is read (`/proc/<pid>/environ`, the
/// user's own processes; Linux).
fn home_of_host(ancestors: &[ProcessId]) -> Option<PathBuf> {
    ancestors.iter().take(3).find_map(|a| {
        // The pid is that process only while it has its start time.
        if crate::daemon::discovery::process_start(a.pid) != Some(a.start) {
            return None;
        }
        let environ = std::fs::read(format!("/proc/{}/environ", a.pid)).ok()?;
        environ
            .split(|b| *b == 0)
            .find_map(|var| var.strip_prefix(b"BIR_HOME="))
            .filter(|v| !v.is_empty())
            .map(|v| PathBuf::from(std::ffi::OsStr::from_bytes(v)))
    })
}

/// Default `BIR_BIND_WAIT_MS`: how long items wait for a daemon at start.
const DEFAULT_WAIT: Duration = Duration::from_secs(10);
/// Default `BIR_BIND_RETRY_MS`: how often an unbound proxy looks again.
const DEFAULT_RETRY: Duration = Duration::from_secs(15);
/// How long one attempt to find (or start) the daemon may take.
const ENSURE_BUDGET: Duration = Duration::from_secs(5);
/// The deadline of one post to the daemon (a batch, a registration). The
/// observer thread waits this long at most, once: the post that fails
/// downgrades the proxy.
const POST_DEADLINE: Duration = Duration::from_secs(1);
/// The daemon's answer to a registration for a session whose hooks it has
/// not heard: it records only sessions its hooks tell it about.
const NOT_HOOKED: u16 = 409;
/// How often a proxy asks again while the daemon does not know its session
/// and the proxy still holds its items.
const NOT_HOOKED_RETRY: Duration = Duration::from_millis(250);
/// The deadline of the last post when the proxy ends: it must fit in the
/// observer's shortest shutdown budget (350 ms, after a host's signal)
/// with the standalone write that follows a failure, so that the last
/// calls are never lost.
const FINISH_POST_DEADLINE: Duration = Duration::from_millis(150);
/// A post carries about this many bytes of items at most (the daemon
/// refuses bodies over 8 MiB); a larger batch is sent in several.
const MAX_POST_BYTES: usize = 4 * 1024 * 1024;
/// At most this many calls wait for a daemon; more go standalone at once.
const MAX_HELD_CALLS: usize = 128;
/// A bound proxy posts after this many calls even if the observer has not
/// gone idle yet.
const BATCH_CALLS: usize = 32;

/// How the proxy reaches the daemon (a seam for tests).
pub(crate) trait Daemon: Send + 'static {
    /// A live daemon within `budget`, started if need be.
    fn ensure(&self, budget: Duration) -> Option<Box<dyn Link>>;
}

/// One daemon, found.
pub(crate) trait Link: Send {
    /// `POST path` with a JSON body: the answer's status.
    fn post(&self, path: &str, body: &[u8], deadline: Duration) -> io::Result<u16>;
}

/// The daemon of `$BIR_HOME`, or the explicit one of `BIR_CONTROL_URL`.
pub(crate) struct HomeDaemon {
    pub home: PathBuf,
    /// Start it when it is not running (a proxy whose environment names
    /// its session); a proxy binding by ancestry only looks: its host's
    /// hooks start the daemon, and a host without them needs none.
    pub start: bool,
}

impl Daemon for HomeDaemon {
    fn ensure(&self, budget: Duration) -> Option<Box<dyn Link>> {
        let endpoint = if self.start {
            crate::daemon::client::ensure_running(&self.home, budget)
        } else {
            crate::daemon::client::discover(&self.home)
                .filter(|e| crate::daemon::client::healthy(e, budget.min(POST_DEADLINE)))
        };
        endpoint.map(|endpoint| Box::new(endpoint) as Box<dyn Link>)
    }
}

impl Link for crate::daemon::client::Endpoint {
    fn post(&self, path: &str, body: &[u8], deadline: Duration) -> io::Result<u16> {
        crate::daemon::client::Endpoint::post(self, path, body, deadline).map(|(status, _)| status)
    }
}

/// Who this proxy is, for the daemon.
#[derive(Clone)]
pub(crate) struct Identity {
    pub proxy_id: String,
    pub session_id: String,
    pub server_name: String,
}

/// The binding's settings, read once from the environment.
#[derive(Clone)]
pub(crate) struct BindSettings {
    pub identity: Identity,
    pub wait: Duration,
    pub retry: Duration,
    /// The environment names no session (`identity.session_id` is empty):
    /// the daemon finds the session by this proxy's ancestor processes,
    /// which the finder thread reads.
    pub by_ancestry: bool,
}

impl BindSettings {
    /// `None` when this proxy should not bind (no session named, or
    /// `BIR_BIND=off`).
    pub(crate) fn from_env(server_name: &str, session_id: Option<&str>) -> Option<BindSettings> {
        if std::env::var("BIR_BIND").is_ok_and(|v| matches!(v.trim(), "off" | "0" | "no")) {
            return None;
        }
        let explicit = ["BIR_CONTROL_URL", "BIR_CONTROL_TOKEN"]
            .iter()
            .all(|name| std::env::var(name).is_ok_and(|v| !v.is_empty()));
        let mut by_ancestry = false;
        let session_id = match session_id {
            Some(id) => id.to_owned(),
            None if explicit => std::env::var("BIR_SESSION_ID").unwrap_or_default(),
            // The ancestry is read from `/proc`.
            None if cfg!(target_os = "linux") => {
                by_ancestry = true;
                String::new()
            }
            None => return None,
        };
        let millis = |name: &str, default: Duration| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map_or(default, Duration::from_millis)
        };
        Some(BindSettings {
            identity: Identity {
                proxy_id: crate::record::model::uuid_v4(),
                session_id,
                server_name: server_name.to_owned(),
            },
            wait: millis("BIR_BIND_WAIT_MS", DEFAULT_WAIT),
            retry: millis("BIR_BIND_RETRY_MS", DEFAULT_RETRY),
            by_ancestry,
        })
    }
}

/// A report path: where prepared items go. Two implementations, switched
/// between at run time: [`LocalRun`] (Tier 2) and [`DaemonPath`] (Tier 1).
pub(crate) trait ReportPath {
    /// Delivers `items`, draining what was delivered; false when the
    /// destination is gone (what is left in `items` did not reach it).
    fn deliver(&mut self, prep: &Preparation, items: &mut Vec<ProxyItem>) -> bool;
}

impl ReportPath for LocalRun {
    fn deliver(&mut self, prep: &Preparation, items: &mut Vec<ProxyItem>) -> bool {
        for item in items.drain(..) {
            self.write(prep, item);
        }
        true
    }
}

/// Tier 1: posts to the daemon this proxy registered with.
pub(crate) struct DaemonPath {
    link: Box<dyn Link>,
    identity: Identity,
    /// Calls the daemon's run does not have (recorded standalone while
    /// unbound), not yet reported to it.
    lost: u64,
    /// Per post ([`POST_DEADLINE`]; shorter when the proxy ends).
    deadline: Duration,
}

impl DaemonPath {
    fn post_records(&mut self, items: &[ProxyItem], deadline: Duration) -> bool {
        let body = ProxyRecords {
            proxy_id: self.identity.proxy_id.clone(),
            session_id: self.identity.session_id.clone(),
            server_name: self.identity.server_name.clone(),
            items: items.to_vec(),
            lost: self.lost,
        };
        let Ok(json) = serde_json::to_vec(&body) else {
            return false;
        };
        match self.link.post("/proxy/records", &json, deadline) {
            Ok(status) if (200..300).contains(&status) => {
                self.lost = 0;
                true
            }
            Ok(status) => {
                log::debug!("recorder daemon refused records ({status})");
                false
            }
            Err(err) => {
                log::debug!("recorder daemon unreachable: {err}");
                false
            }
        }
    }

    fn unregister(&self) {
        let body = ProxyUnregister {
            proxy_id: self.identity.proxy_id.clone(),
        };
        if let Ok(json) = serde_json::to_vec(&body) {
            let _ = self
                .link
                .post("/proxy/unregister", &json, FINISH_POST_DEADLINE);
        }
    }
}

impl ReportPath for DaemonPath {
    fn deliver(&mut self, _prep: &Preparation, items: &mut Vec<ProxyItem>) -> bool {
        if items.is_empty() {
            return self.lost == 0 || self.post_records(&[], self.deadline);
        }
        while !items.is_empty() {
            let n = fitting(items, MAX_POST_BYTES);
            if !self.post_records(&items[..n], self.deadline) {
                return false;
            }
            items.drain(..n);
        }
        true
    }
}

/// How many leading items fit in one post of about `budget` bytes (at
/// least one: an item larger than that goes alone).
fn fitting(items: &[ProxyItem], budget: usize) -> usize {
    let mut used = 0;
    for (i, item) in items.iter().enumerate() {
        let mut size = CountingWriter(0);
        let _ = serde_json::to_writer(&mut size, item);
        if i > 0 && used + size.0 > budget {
            return i;
        }
        used += size.0 + 1;
    }
    items.len()
}

/// Measures serialised JSON without keeping it.
struct CountingWriter(usize);

impl io::Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where the proxy's records go right now.
enum Tier {
    /// Looking for the daemon; items are held until `until`.
    Negotiating {
        until: Instant,
    },
    Bound(DaemonPath),
    Standalone,
}

/// The finder thread's side of the conversation.
struct Finder {
    /// A registered link, each time the finder (re)binds.
    found: Receiver<Box<dyn Link>>,
    /// Asks the finder to look (again) now: the daemon stopped answering.
    look: Sender<()>,
}

/// How the finder finds its daemon.
pub(crate) enum Lookup {
    /// The environment named the session, and so the daemon.
    Named(Box<dyn Daemon>),
    /// By this proxy's ancestry, read on the finder thread: the daemon of
    /// the home found then (set into `home`, for the sink's probe), never
    /// started. No ancestry, no home: the finder ends, and the sink records
    /// standalone.
    ByAncestry { home: Arc<OnceLock<PathBuf>> },
}

impl Lookup {
    /// The daemon, and the ancestors to register with: on the finder
    /// thread.
    fn resolve(self) -> Option<(Box<dyn Daemon>, Vec<ProcessId>)> {
        match self {
            Lookup::Named(daemon) => Some((daemon, Vec::new())),
            Lookup::ByAncestry { home: found } => {
                let ancestors = crate::bound::process::ancestors();
                if ancestors.is_empty() {
                    log::debug!("no ancestry to bind by; recording standalone");
                    return None;
                }
                let home = home_by_ancestry(&ancestors)?;
                let _ = found.set(home.clone());
                let daemon = HomeDaemon { home, start: false };
                Some((Box::new(daemon), ancestors))
            }
        }
    }
}

/// Starts the finder: it looks at once, and while unbound every `retry`.
fn start_finder(lookup: Lookup, settings: &BindSettings) -> Option<Finder> {
    let (found_tx, found) = mpsc::channel();
    let (look, look_rx) = mpsc::channel();
    let mut register = ProxyRegister {
        proxy_id: settings.identity.proxy_id.clone(),
        session_id: settings.identity.session_id.clone(),
        server_name: settings.identity.server_name.clone(),
        pid: std::process::id(),
        cwd: std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        bir_version: env!("CARGO_PKG_VERSION").into(),
        // Registration happens before the host's `initialize`; the name the
        // host gave itself in the environment is what is known then.
        host: std::env::var("AI_AGENT")
            .ok()
            .and_then(|v| host_from_ai_agent(&v)),
        ancestors: Vec::new(),
    };
    let retry = settings.retry;
    let wait = settings.wait;
    // By ancestry the daemon is only looked for (the host's first hook
    // starts it, maybe after the host started this server): look often
    // while the items are held.
    let by_ancestry = settings.by_ancestry;
    let spawned = thread::Builder::new()
        .name("bir-bind".into())
        .spawn(move || {
            // First the ancestry, at normal priority: until it is read, a
            // proxy bound by it cannot tell whether a daemon runs, and
            // holds its calls in memory. Then the network, giving way.
            let resolved = lookup.resolve();
            crate::observe::give_way_to_the_relay();
            let Some((daemon, ancestors)) = resolved else {
                return;
            };
            register.ancestors = ancestors;
            let Ok(body) = serde_json::to_vec(&register) else {
                return;
            };
            run_finder(
                &*daemon,
                &body,
                &look_rx,
                &found_tx,
                retry,
                wait,
                by_ancestry,
            );
        });
    match spawned {
        Ok(_) => Some(Finder { found, look }),
        Err(err) => {
            log::warn!("cannot look for the recorder daemon: {err}; recording standalone");
            None
        }
    }
}

/// `AI_AGENT=claude-code_2-1-332_harness` (Claude Code's form:
/// `<app>_<version, dashes for dots>_<role>`) → `claude-code` `2.1.332`.
fn host_from_ai_agent(value: &str) -> Option<HostInfo> {
    let mut parts = value.split('_');
    let app = parts.next().filter(|a| !a.is_empty())?;
    let version = parts
        .next()
        .filter(|v| v.bytes().all(|b| b.is_ascii_digit() || b == b'-'))
        .map(|v| v.replace('-', "."))
        .unwrap_or_default();
    Some(HostInfo {
        app: app.to_owned(),
        version,
    })
}

fn run_finder(
    daemon: &dyn Daemon,
    register: &[u8],
    look: &Receiver<()>,
    found: &Sender<Box<dyn Link>>,
    retry: Duration,
    wait: Duration,
    by_ancestry: bool,
) {
    let negotiating_until = Instant::now() + wait;
    loop {
        let mut pause = retry;
        if by_ancestry && Instant::now() < negotiating_until {
            pause = retry.min(NOT_HOOKED_RETRY);
        }
        if let Some(link) = daemon.ensure(ENSURE_BUDGET) {
            match link.post("/proxy/register", register, POST_DEADLINE) {
                Ok(status) if (200..300).contains(&status) => {
                    if found.send(link).is_err() {
                        return;
                    }
                    // Bound: wait until the proxy says the daemon is gone.
                    if look.recv().is_err() {
                        return;
                    }
                    continue;
                }
                Ok(NOT_HOOKED) => {
                    // The daemon has not heard this session's hooks yet (a
                    // proxy may start before the first hook arrives), or
                    // never will (hooks not installed): ask again soon
                    // while the proxy still holds its items, then at the
                    // usual pace.
                    if Instant::now() < negotiating_until {
                        pause = retry.min(NOT_HOOKED_RETRY);
                    }
                    log::debug!("recorder daemon does not record this session (yet)");
                }
                Ok(status) => log::debug!("recorder daemon refused the registration ({status})"),
                Err(err) => log::debug!("recorder daemon registration failed: {err}"),
            }
        }
        match look.recv_timeout(pause) {
            Ok(()) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Where the finder thread is.
enum Finding {
    /// Not started: it starts with the first exchange the observer
    /// delivers, after the relay passed the host's `initialize` answer on,
    /// so that a proxy's start never waits for (or competes with) a thread
    /// the first answer does not need.
    NotYet(Box<(Lookup, BindSettings)>),
    Looking(Finder),
    /// Ended (nothing to look for, or it could not start), or the proxy
    /// finished: nothing more will bind.
    Over,
}

/// The observer sink of a proxy that may bind: prepares once, then sends
/// to the daemon or writes locally (see the module docs).
pub(crate) struct BindingSink {
    prep: Preparation,
    local: LocalRun,
    tier: Tier,
    finding: Finding,
    /// Items prepared since the last delivery (held while negotiating).
    items: Vec<ProxyItem>,
    /// The latest snapshot, sent first whenever the proxy (re)binds.
    snapshot: Option<ServerSnapshot>,
    identity: Identity,
    /// Calls written standalone since the proxy was last bound: the
    /// daemon's run does not have them (reported as `lost` on binding).
    missed: u64,
    /// Binding by ancestry: whether a daemon runs now (its discovery file
    /// names a live process; no network). Asked when the first call
    /// arrives while negotiating: the agent's hooks ran before any call
    /// and started the daemon if they are bir's, so with none running
    /// the calls go to the standalone run at once rather than wait in
    /// memory (where a kill would lose them). `None` from it: not known
    /// yet (the finder has not read the ancestry); asked again.
    probe: Option<Box<dyn Fn() -> Option<bool> + Send>>,
}

impl BindingSink {
    pub(crate) fn new(
        prep: Preparation,
        local: LocalRun,
        settings: &BindSettings,
        lookup: Lookup,
    ) -> BindingSink {
        BindingSink {
            prep,
            local,
            tier: Tier::Negotiating {
                until: Instant::now() + settings.wait,
            },
            finding: Finding::NotYet(Box::new((lookup, settings.clone()))),
            items: Vec::new(),
            snapshot: None,
            identity: settings.identity.clone(),
            missed: 0,
            probe: None,
        }
    }

    /// Starts the finder, once (see [`Finding::NotYet`]).
    fn start_looking(&mut self) {
        if !matches!(self.finding, Finding::NotYet(_)) {
            return;
        }
        if let Finding::NotYet(unstarted) = std::mem::replace(&mut self.finding, Finding::Over) {
            let (lookup, settings) = *unstarted;
            if let Some(finder) = start_finder(lookup, &settings) {
                self.finding = Finding::Looking(finder);
            }
        }
    }

    fn note_snapshots(&mut self, from: usize) {
        for item in &self.items[from..] {
            if let ProxyItem::Snapshot(s) = item {
                self.snapshot = Some((**s).clone());
            }
        }
    }

    /// Moves on: binds when the finder found a daemon, gives up waiting
    /// when the window closed, posts what is due. `idle`: the observer has
    /// nothing queued (post now rather than wait for a fuller batch).
    fn advance(&mut self, idle: bool) {
        if let Some(link) = self.try_found() {
            self.bind(link);
        }
        match &mut self.tier {
            Tier::Negotiating { until } => {
                let held = calls_in(&self.items);
                let mut no_daemon = false;
                if held > 0
                    && let Some(running) = self.probe.as_ref().and_then(|probe| probe())
                {
                    self.probe = None;
                    no_daemon = !running;
                }
                // The finder ended without a daemon to look for (no
                // ancestry, no home), or could not start: nothing can bind.
                let no_finder = matches!(self.finding, Finding::Over);
                if no_finder || no_daemon || Instant::now() >= *until || held > MAX_HELD_CALLS {
                    log::debug!("no recorder daemon answered; recording standalone");
                    self.tier = Tier::Standalone;
                    self.write_local();
                }
            }
            Tier::Bound(path) => {
                if idle || calls_in(&self.items) >= BATCH_CALLS {
                    let mut items = std::mem::take(&mut self.items);
                    if path.deliver(&self.prep, &mut items) {
                        self.items = items;
                    } else {
                        // The daemon is gone: these and the following calls
                        // go into the standalone run; the daemon is revived
                        // in the background and told what it missed.
                        log::info!("recorder daemon stopped answering; recording standalone");
                        self.missed += path.lost;
                        self.items = items;
                        self.tier = Tier::Standalone;
                        self.write_local();
                        if let Finding::Looking(finder) = &self.finding {
                            let _ = finder.look.send(());
                        }
                    }
                }
            }
            Tier::Standalone => self.write_local(),
        }
    }

    fn try_found(&mut self) -> Option<Box<dyn Link>> {
        let Finding::Looking(finder) = &self.finding else {
            return None;
        };
        let mut latest = None;
        loop {
            match finder.found.try_recv() {
                Ok(link) => latest = Some(link),
                Err(TryRecvError::Empty) => return latest,
                Err(TryRecvError::Disconnected) => {
                    self.finding = Finding::Over;
                    return latest;
                }
            }
        }
    }

    fn bind(&mut self, link: Box<dyn Link>) {
        log::debug!("bound to the recorder daemon");
        self.tier = Tier::Bound(DaemonPath {
            link,
            identity: self.identity.clone(),
            lost: self.missed,
            deadline: POST_DEADLINE,
        });
        self.missed = 0;
        // The daemon's run gets the server's snapshot before any call.
        if let Some(snapshot) = &self.snapshot
            && !matches!(self.items.first(), Some(ProxyItem::Snapshot(_)))
        {
            self.items
                .insert(0, ProxyItem::Snapshot(Box::new(snapshot.clone())));
        }
    }

    /// Writes the pending items into the standalone run; the calls among
    /// them are ones the daemon's run will not have.
    fn write_local(&mut self) {
        if self.items.is_empty() {
            return;
        }
        self.missed += calls_in(&self.items) as u64;
        let mut items = std::mem::take(&mut self.items);
        self.local.deliver(&self.prep, &mut items);
        self.items = items;
    }
}

fn calls_in(items: &[ProxyItem]) -> usize {
    items
        .iter()
        .filter(|i| matches!(i, ProxyItem::Call { .. }))
        .count()
}

impl Sink for BindingSink {
    fn message(&mut self, _: SystemTime, _: Direction, _: &[u8], _: Option<u64>) {}

    fn exchange(&mut self, method: &str, request: &[u8], response: &[u8]) {
        self.start_looking();
        let from = self.items.len();
        self.prep
            .exchange(method, request, response, &mut self.items);
        self.note_snapshots(from);
        self.advance(false);
    }

    fn step(&mut self, step: &StepReport) {
        self.start_looking();
        let from = self.items.len();
        self.prep.call(step, &mut self.items);
        self.note_snapshots(from);
        self.advance(false);
    }

    fn event(&mut self, _: SystemTime, _: &str) {}

    fn flush(&mut self) {
        self.advance(true);
        self.local.flush();
    }

    /// Nothing held, no negotiation under way, the local run on disk. (A
    /// daemon the finder finds meanwhile is bound with the next
    /// observation: there is nothing to send it before.)
    fn settled(&self) -> bool {
        self.items.is_empty()
            && !matches!(self.tier, Tier::Negotiating { .. })
            && self.local.settled()
    }

    fn finish(&mut self, dropped: u64) {
        if let Some(link) = self.try_found() {
            self.bind(link);
        }
        let mut bound = false;
        match std::mem::replace(&mut self.tier, Tier::Standalone) {
            Tier::Bound(mut path) => {
                bound = true;
                path.lost += dropped;
                path.deadline = FINISH_POST_DEADLINE;
                let mut items = std::mem::take(&mut self.items);
                if path.deliver(&self.prep, &mut items) {
                    path.unregister();
                }
                self.items = items;
            }
            Tier::Negotiating { .. } | Tier::Standalone => {}
        }
        // Whatever the daemon did not take ends in the standalone run.
        self.write_local();
        if !bound {
            self.local.open_for_loss(&self.prep, dropped);
        }
        self.local.finish(dropped);
        self.finding = Finding::Over;
    }
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
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::observe::step::{CallOutcome, ObservedBody, ToolCallObserved};

    /// Posts a fake daemon received: (path, body).
    type Posts = Arc<Mutex<Vec<(String, serde_json::Value)>>>;

    /// A daemon that is there unless `down`, and refuses posts while down.
    struct FakeDaemon {
        posts: Posts,
        down: Arc<AtomicBool>,
    }

    struct FakeLink {
        posts: Posts,
        down: Arc<AtomicBool>,
    }

    impl Daemon for FakeDaemon {
        fn ensure(&self, _budget: Duration) -> Option<Box<dyn Link>> {
            (!self.down.load(Ordering::SeqCst)).then(|| {
                Box::new(FakeLink {
                    posts: Arc::clone(&self.posts),
                    down: Arc::clone(&self.down),
                }) as Box<dyn Link>
            })
        }
    }

    impl Link for FakeLink {
        fn post(&self, path: &str, body: &[u8], _deadline: Duration) -> io::Result<u16> {
            if self.down.load(Ordering::SeqCst) {
                return Err(io::Error::from(io::ErrorKind::ConnectionRefused));
            }
            let body = serde_json::from_slice(body).unwrap_or_default();
            self.posts
                .lock()
                .expect("lock")
                .push((path.to_owned(), body));
            Ok(200)
        }
    }

    fn sink(wait: Duration, down: bool) -> (BindingSink, Posts, Arc<AtomicBool>) {
        let cfg = RecorderConfig::for_tests();
        let settings = BindSettings {
            identity: Identity {
                proxy_id: "p1".into(),
                session_id: "sess".into(),
                server_name: "peer".into(),
            },
            wait,
            retry: Duration::from_millis(10),
            by_ancestry: false,
        };
        let posts = Posts::default();
        let down = Arc::new(AtomicBool::new(down));
        let daemon = FakeDaemon {
            posts: Arc::clone(&posts),
            down: Arc::clone(&down),
        };
        let sink = BindingSink::new(
            Preparation::new(cfg.clone()),
            LocalRun::new(cfg, None),
            &settings,
            Lookup::Named(Box::new(daemon)),
        );
        (sink, posts, down)
    }

    fn report(n: u64) -> StepReport {
        StepReport::from_observed(&ToolCallObserved {
            server_name: Arc::from("peer"),
            session_id: Some(Arc::from("sess")),
            started: Instant::now(),
            duration: Duration::from_millis(1),
            request: ObservedBody::Whole(
                format!(
                r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"t","arguments":{{"n":{n}}},"_meta":{{"claudecode/toolUseId":"toolu_{n}"}}}}}}"#
            )
            .into_bytes(),
            ),
            raw_id: crate::jsonrpc::inline_bytes::SmallBytes::new(n.to_string().as_bytes()),
            response: Some(ObservedBody::Whole(
                format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"content":[]}}}}"#).into_bytes(),
            )),
            outcome: CallOutcome::Answered,
            response_bytes: None,
            id_shared: false,
            traceparent: None,
            session_epoch: 0,
        })
    }

    /// Flushes (as the observer does when idle) until `done` holds.
    fn flush_until(sink: &mut BindingSink, done: impl Fn(&BindingSink) -> bool) {
        wait::wait_until("the condition", Duration::from_secs(20), || {
            done(sink) || {
                sink.flush();
                false
            }
        });
    }

    fn posted_calls(posts: &Posts) -> Vec<String> {
        posts
            .lock()
            .expect("lock")
            .iter()
            .filter(|(p, _)| p == "/proxy/records")
            .flat_map(|(_, b)| b["items"].as_array().cloned().unwrap_or_default())
            .filter(|i| i["kind"] == "call")
            .map(|i| {
                i["data"]["selected"]["toolUseId"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn a_large_batch_is_posted_in_pieces_under_the_budget() {
        let items: Vec<ProxyItem> = (0..5)
            .map(|n| {
                let mut out = Vec::new();
                let mut prep = Preparation::new(RecorderConfig {
                    session_id: None,
                    ..RecorderConfig::for_tests()
                });
                prep.call(&report(n), &mut out);
                out.pop().expect("a call")
            })
            .collect();
        let one = serde_json::to_vec(&items[0]).expect("json").len();
        assert_eq!(fitting(&items, 10 * one), 5);
        assert_eq!(fitting(&items, 2 * one + 10), 2);
        assert_eq!(
            fitting(&items, 1),
            1,
            "an item larger than the budget goes alone"
        );
    }

    #[test]
    fn the_host_is_read_from_ai_agent() {
        let host = host_from_ai_agent("claude-code_2-1-332_harness").expect("host");
        assert_eq!(
            (host.app.as_str(), host.version.as_str()),
            ("claude-code", "2.1.332")
        );
        let host = host_from_ai_agent("cursor").expect("host");
        assert_eq!((host.app.as_str(), host.version.as_str()), ("cursor", ""));
        assert!(host_from_ai_agent("").is_none());
    }

    #[test]
    fn calls_held_while_looking_reach_the_daemon_once_bound() {
        let (mut sink, posts, _down) = sink(Duration::from_secs(600), false);
        // Nothing looks for the daemon before the first exchange.
        sink.flush();
        assert!(
            matches!(sink.finding, Finding::NotYet(_))
                && matches!(sink.tier, Tier::Negotiating { .. })
        );
        assert!(posts.lock().expect("lock").is_empty());
        sink.step(&report(1));
        flush_until(&mut sink, |s| matches!(s.tier, Tier::Bound(_)));
        flush_until(&mut sink, |_| !posted_calls(&posts).is_empty());
        assert_eq!(posted_calls(&posts), ["toolu_1"]);
        assert!(sink.local.run_id().is_none(), "nothing standalone");
        sink.finish(0);
        let paths: Vec<String> = posts
            .lock()
            .expect("lock")
            .iter()
            .map(|(p, _)| p.clone())
            .collect();
        assert_eq!(paths.first().map(String::as_str), Some("/proxy/register"));
        assert_eq!(paths.last().map(String::as_str), Some("/proxy/unregister"));
    }

    #[test]
    fn by_ancestry_with_no_daemon_running_a_call_goes_standalone_at_once() {
        // The daemon is down and the window long: a proxy whose session is
        // named waits; one binding by ancestry writes its call at once.
        let (mut sink, _posts, _down) = sink(Duration::from_secs(600), true);
        sink.probe = Some(Box::new(|| Some(false)));
        sink.step(&report(1));
        assert!(matches!(sink.tier, Tier::Standalone));
        assert_eq!(sink.local.tool_calls(), 1, "on disk, not held in memory");
        sink.finish(0);
    }

    #[test]
    fn by_ancestry_with_a_daemon_running_calls_wait_for_the_binding() {
        let (mut sink, posts, _down) = sink(Duration::from_secs(600), false);
        sink.probe = Some(Box::new(|| Some(true)));
        sink.step(&report(1));
        flush_until(&mut sink, |_| !posted_calls(&posts).is_empty());
        assert_eq!(posted_calls(&posts), ["toolu_1"]);
        assert!(sink.local.run_id().is_none(), "nothing standalone");
        sink.finish(0);
    }

    #[test]
    fn by_ancestry_a_probe_that_cannot_tell_yet_is_asked_again() {
        let (mut sink, _posts, _down) = sink(Duration::from_secs(600), true);
        let asked = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let count = Arc::clone(&asked);
        // Not known at the first call (the finder is still reading the
        // ancestry), no daemon at the second.
        sink.probe = Some(Box::new(move || {
            (count.fetch_add(1, Ordering::SeqCst) > 0).then_some(false)
        }));
        sink.step(&report(1));
        assert!(matches!(sink.tier, Tier::Negotiating { .. }));
        sink.step(&report(2));
        assert!(matches!(sink.tier, Tier::Standalone));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        assert_eq!(sink.local.tool_calls(), 2, "both on disk");
        sink.finish(0);
    }

    #[test]
    fn a_finder_that_ended_with_nothing_to_look_for_leaves_the_calls_standalone() {
        // What a proxy bound by ancestry does where it has no ancestry or
        // no home: its finder ends at once; nothing waits for a daemon.
        let (mut sink, _posts, _down) = sink(Duration::from_secs(600), true);
        // A finder whose thread returned: its channels' far ends are gone.
        let (gone, found) = mpsc::channel::<Box<dyn Link>>();
        drop(gone);
        let (look, _) = mpsc::channel();
        sink.finding = Finding::Looking(Finder { found, look });
        sink.step(&report(1));
        assert!(matches!(sink.tier, Tier::Standalone));
        assert_eq!(sink.local.tool_calls(), 1);
        sink.finish(0);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_ancestry_is_read_on_the_finder_side_and_names_the_home() {
        let home = Arc::new(OnceLock::new());
        let lookup = Lookup::ByAncestry {
            home: Arc::clone(&home),
        };
        let (_daemon, ancestors) = lookup.resolve().expect("a test has a parent");
        assert_eq!(
            ancestors.first().map(|a| a.pid),
            Some(std::os::unix::process::parent_id()),
            "nearest first"
        );
        assert!(home.get().is_some(), "the probe's home is known now");
    }

    #[test]
    fn no_daemon_means_standalone_after_the_wait_then_a_late_bind_reports_what_it_missed() {
        let (mut sink, posts, down) = sink(Duration::from_millis(20), true);
        sink.step(&report(1));
        flush_until(&mut sink, |s| matches!(s.tier, Tier::Standalone));
        assert!(sink.local.run_id().is_some(), "call 1 went standalone");
        sink.step(&report(2));
        down.store(false, Ordering::SeqCst);
        flush_until(&mut sink, |s| matches!(s.tier, Tier::Bound(_)));
        sink.step(&report(3));
        sink.flush();
        assert_eq!(posted_calls(&posts), ["toolu_3"]);
        let lost: u64 = posts
            .lock()
            .expect("lock")
            .iter()
            .filter(|(p, _)| p == "/proxy/records")
            .map(|(_, b)| b["lost"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(lost, 2, "calls 1 and 2 are only in the standalone run");

        // The daemon dies: call 4 goes standalone, nothing is dropped.
        down.store(true, Ordering::SeqCst);
        sink.step(&report(4));
        sink.flush();
        assert!(matches!(sink.tier, Tier::Standalone));
        assert_eq!(sink.local.tool_calls(), 3);
        sink.finish(0);
    }
}
