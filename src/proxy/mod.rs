//! `bir-proxy`: a stdio MCP proxy that relays every byte and reports every
//! `tools/call`.
//!
//! ```text
//! host stdin ──▶ pump_host ──▶ upstream stdin        (relay.rs)
//! host stdout ◀── pump_upstream ◀── upstream stdout  (relay.rs)
//!                    │ observations (after the write)
//!                    ▼
//!                 Observer ──▶ sinks: transcript; the recorder behind the
//!                                  off switch (off_gate.rs), bound to the
//!                                  daemon or standalone (binding.rs)
//! ```
//!
//! A proxy that will not record (`BIR_OFF=1`, `bir off`, a user-scope entry
//! in a project never set up: passthrough.rs) replaces itself with its
//! stdio server at start (`exec`).
//!
//! This module owns the lifecycle: it starts the upstream and the threads,
//! then runs one loop over [`Event`]s (signals, end of input, upstream exit)
//! and decides when and how the proxy ends.
//!
//! Invariants (see also ARCHITECTURE.md):
//! * Exit parity: the proxy ends the way its upstream ended — same exit
//!   code, or the same signal re-raised — so the host sees what it would
//!   have seen without bir.
//! * A host signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) is passed to the
//!   upstream's process group at once; the proxy then leaves as soon as the
//!   upstream is gone, or kills its group after `SIGNAL_GRACE`. Nothing on
//!   the way out waits for the host to read: its side is closed without
//!   the lock a pump blocked on a full stdout holds (`Shared::close_host`). Claude Code sends SIGINT and SIGTERM ~100 ms later:
//!   the only waiting of our own in that path is finishing the recording,
//!   after the host's stdout is closed and bounded to fit before the
//!   host's SIGKILL (`OBSERVER_DEADLINE_SIGNALLED`).
//! * Host end of input: the upstream's stdin is closed, then SIGTERM after
//!   2 s, SIGKILL 2 s later (the MCP SDK clients' schedule). A wait on the
//!   pipes (that schedule, the server's stdout after its exit, the last
//!   write to the host) starts over while the host keeps taking bytes: a
//!   slow reader gets every byte, as from the server's own pipe; a host
//!   that stopped reading still ends the proxy on schedule.
//! * An upstream that exits on its own while requests are pending gets them
//!   answered by the proxy (`MCP server "<name>" is not available`). When
//!   the host ended the session (signal, end of input), nothing is added.

pub(crate) mod binding;
pub(crate) mod config;
pub(crate) mod inflight;
pub(crate) mod lazy;
pub(crate) mod modern;
pub(crate) mod off_gate;
pub(crate) mod passthrough;
pub(crate) mod relay;
pub(crate) mod signals;
pub(crate) mod sse;
pub(crate) mod traceparent;
pub(crate) mod upstream;
pub(crate) mod upstream_http;

use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use crate::cli::Role;
use crate::cli::{Exit, parse_args, print_version};
use crate::error::{self, Error, ExitStatus as Status};
use crate::locks::lock;
use crate::observe::step::CallOutcome;
use crate::observe::transcript::Transcript;
use crate::observe::{Observer, Sink};
use crate::proxy::config::ProxyArgs;
use crate::record::store::Store;
use crate::record::{LocalRun, RecorderConfig};
use crate::service::forwarder::ServiceForwarder;
use config::{ProxyConfig, UpstreamHttpConfig};
use inflight::HostRequest;
use relay::Shared;

/// How long a closed stdin gets before SIGTERM, and SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// Ending without a signal: how long the host may take no byte of what is
/// still being written to it before it counts as no longer reading.
const HOST_READ_STALL: Duration = Duration::from_secs(1);
/// After the upstream exited, how long to wait for its stdout to close (a
/// process it started may still hold it open).
const STDOUT_GRACE: Duration = Duration::from_millis(500);
/// After a host signal, how long the server (a child) gets to exit before
/// its process group is killed and the proxy leaves: a host's signal ends
/// the proxy within 2 s, whatever the server or the pipes do.
const SIGNAL_GRACE: Duration = Duration::from_millis(1500);
/// A remote upstream: how long a host signal waits for the session's DELETE.
const REMOTE_SIGNAL_GRACE: Duration = Duration::from_millis(1500);
/// The most time the proxy spends finishing its recording (and copying the
/// server's last stderr lines) when it ends, after the host's stdout is
/// closed: the host has seen the session end and owes us nothing more.
/// Signals are blocked and consumed by the signal thread meanwhile, so a
/// second SIGINT or SIGTERM does not cut it short. Ended by end of input,
/// the host waits 2 s before SIGTERM (the MCP SDKs' schedule) and SIGKILL
/// comes 2 s later; ended by a signal (Claude Code: SIGINT, SIGTERM ~100 ms
/// later, SIGKILL some 400 ms after that), the budget is the window before
/// the SIGKILL. The work is done at normal priority
/// ([`Observer::finish`]): on a saturated CPU it still gets its share.
/// Past the budget only a write or post under way is waited for (a SIGKILL
/// meanwhile loses no more than giving up at once would).
const OBSERVER_DEADLINE: Duration = Duration::from_millis(1500);
const OBSERVER_DEADLINE_SIGNALLED: Duration = Duration::from_millis(350);

/// What the lifecycle loop reacts to.
#[derive(Debug)]
pub(crate) enum Event {
    /// The proxy received a signal to pass on.
    Signal(i32),
    /// The host closed the proxy's stdin.
    HostEof,
    /// Writing to the host failed: it is gone.
    HostGone,
    /// The upstream of this generation closed its stdout.
    UpstreamEof { generation: u32 },
    /// The upstream of this generation exited.
    UpstreamExited { generation: u32, status: ExitStatus },
    /// A remote upstream's transport finished after the host left (the
    /// session was ended).
    UpstreamHttpClosed,
    /// `--lazy`: a host request needs the server, not started yet. The
    /// sender is dropped (or sent to) once its handshake is done or failed.
    WakeUpstream(Sender<()>),
    /// The server answered one of the proxy's own requests whose answer
    /// the lifecycle loop waits for (`--lazy`: the replayed handshake, the
    /// tools check).
    OwnAnswer { id: &'static str, answer: Vec<u8> },
}

/// `--lazy`: the id of the replayed `initialize` and of the tools check.
const LAZY_INIT_ID: &str = "bir:lazy-initialize";
const LAZY_TOOLS_ID: &str = "bir:lazy-tools";

/// Runs `bir-proxy` with the arguments after the program name.
pub(crate) fn main(args: &[String]) -> Exit {
    let parsed: ProxyArgs = match parse_args(Role::Proxy.program_name(), args) {
        Ok(p) => p,
        Err(exit) => return exit,
    };
    if parsed.version {
        return print_version("bir-proxy");
    }
    if let Some(recording) = &parsed.replay {
        // `--replay FILE [-- real cmd]`: the recording answers instead of a
        // server (the command after `--` serves `--on-miss passthrough`).
        // A host's SIGINT/SIGTERM ends the session like the end of input
        // (the mock's run is finished), then the proxy dies of it.
        let mut input = std::io::BufReader::new(signals::InputUntilSignal::start());
        let outcome = crate::replay::serve_mock(
            &crate::replay::ServeRequest {
                source: recording,
                server: parsed.server_name.as_deref(),
                match_mode: parsed.match_mode.as_deref(),
                repeats: "error",
                on_miss: &parsed.on_miss,
                require_all: false,
                strict_redaction: false,
                max_age: None,
                expired_error: false,
                upstream: &parsed.command,
                live_check: false,
                record: true,
            },
            &mut input,
        );
        if let Some(sig) = input.get_ref().signal() {
            signals::die_of(sig);
        }
        return error::report("bir-proxy", outcome).into();
    }
    let cfg = match ProxyConfig::resolve(parsed) {
        Ok(cfg) => cfg,
        Err(err) => {
            return error::report("bir-proxy", Err(Error::usage(err.0))).into();
        }
    };
    crate::logging::set_server_name(&cfg.server_name);
    let start = passthrough::at_start(&cfg);
    // (A `--transcript` someone asked for is still written: no exec then.)
    if start != passthrough::Start::Record
        && cfg.upstream_http.is_none()
        && cfg.transcript.is_none()
    {
        // Recording is off: the server takes our place. Before any thread
        // exists and before signals are blocked (exec keeps the mask).
        let err = passthrough::exec_server(&cfg);
        log::warn!(
            "could not replace the proxy with the server ({err}); relaying without recording"
        );
    }
    // Before any thread exists, so that every thread inherits the mask.
    signals::block_forwarded();
    let (observer, traceparent) = start_observer(&cfg, start);
    let (tx, rx) = mpsc::channel();
    signals::spawn_watcher(tx.clone());
    let gate = lazy::gate_for(&cfg);
    let mut shared = Shared::new(cfg, observer);
    shared.traceparent = traceparent;
    let shared = Arc::new(shared);
    lock(&shared.lazy).dormant = gate;
    Session::new(shared, tx, rx).run()
}

/// The credentials bir sends a remote upstream: its header values (and the
/// credential alone where a scheme precedes it, `Bearer <token>`), the URL's
/// password and its secret-named query values. A server that echoes one
/// echoes it without the name that marks it.
fn upstream_http_credentials(remote: &UpstreamHttpConfig) -> Vec<String> {
    let mut values = Vec::new();
    for (_, value) in &remote.headers {
        let value = value.trim();
        values.push(value.to_owned());
        if let Some((_, credential)) = value.rsplit_once(' ') {
            values.push(credential.to_owned());
        }
    }
    values.extend(remote.url.password().map(str::to_owned));
    for (name, value) in remote.url.query_pairs() {
        if crate::redact::is_secret_key(&name, false) {
            values.push(value.into_owned());
        }
    }
    values
}

/// The observer and its sinks; and, when `BIR_OTLP_TRACEPARENT=1` applies
/// (see `proxy::traceparent`), what the relay needs to add `traceparent`s.
fn start_observer(
    cfg: &ProxyConfig,
    start: passthrough::Start,
) -> (Observer, Option<traceparent::Traceparent>) {
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    let mut traceparent = None;
    let recorder_config = match start {
        passthrough::Start::NeverRecord => None,
        _ => RecorderConfig::from_env(cfg.server_name.clone(), cfg.session_id.clone()),
    };
    if let Some(mut rc) = recorder_config {
        match &cfg.upstream_http {
            Some(remote) => {
                rc.known_secrets = upstream_http_credentials(remote);
                // Streamable HTTP and the legacy HTTP+SSE both run on TCP.
                rc.transport = Some("tcp");
                rc.upstream_session = Some(remote.session_note.clone());
            }
            None => rc.transport = Some("pipe"),
        }
        // Local and remote alike: what `--lazy` finds this server's snapshot by.
        rc.command_digest = Some(lazy::command_digest(cfg));
        let store = match Store::open_default() {
            Ok(store) => Some(store),
            Err(err) => {
                log::warn!("runs will not be stored: {err}");
                None
            }
        };
        // OpenTelemetry, when BIR_OTLP=1 or BIR_OTLP_ENDPOINT asks for it.
        let otlp_cfg = crate::otlp::forwarder::OtlpForwarder::config_from_env();
        if otlp_cfg.as_ref().is_some_and(|c| c.traceparent) {
            if binding::may_bind(cfg) {
                log::info!(
                    "BIR_OTLP_TRACEPARENT is not applied: this proxy may report to the recorder daemon, whose run is not known when a call is relayed"
                );
            } else {
                // The run's id, hence its trace, fixed before any call.
                let run_id = crate::record::model::new_run_id();
                rc.run_id = Some(run_id.clone());
                traceparent = Some(traceparent::Traceparent::new(run_id));
            }
        }
        let mut run = LocalRun::new(rc.clone(), store);
        // The recording service, when BIR_SERVICE_URL or `bir login` names one.
        if let Some(remote) = ServiceForwarder::from_env() {
            run.add_forwarder(Box::new(remote));
        }
        if let Some(otlp) = otlp_cfg.and_then(|c| {
            crate::otlp::forwarder::OtlpForwarder::start(c, Store::open_default().ok())
        }) {
            run.add_forwarder(Box::new(otlp));
        }
        sinks.push(binding::recording_sink(cfg, rc, run));
    }
    if let Some(path) = &cfg.transcript {
        match Transcript::create(path) {
            Ok(t) => sinks.push(Box::new(t)),
            Err(err) => log::warn!("no transcript: cannot open {}: {err}", path.display()),
        }
    }
    (
        Observer::start(sinks, cfg.transcript.is_some()),
        traceparent,
    )
}

/// Escalation steps while waiting for the upstream to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timer {
    SendTerm,
    SendKill,
    GiveUp,
    StdoutGrace,
    /// The server closed its stdout and has not exited: after this grace
    /// (an exiting server's stdout closes just before it is reaped), it is
    /// treated as gone.
    SilentServer,
    /// The host's signal (passed on) has not ended the server within
    /// [`SIGNAL_GRACE`]: kill its group and die of the signal.
    SignalKill(i32),
}

/// The lifecycle state of one proxy process.
struct Session {
    shared: Arc<Shared>,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    /// Bumped at each (re)start; events of older upstreams are ignored.
    generation: u32,
    /// The current upstream's pid (= its process group), while it runs.
    pid: Option<i32>,
    exited: Option<ExitStatus>,
    stdout_closed: bool,
    restarts_left: u8,
    host_eof: bool,
    /// The host sent a signal: it is stopping us, nothing more to answer.
    signalled: bool,
    /// The last exit status, for a proxy that stays up after the upstream.
    dead_status: Option<Exit>,
    /// A remote upstream: how to end once its session is ended.
    upstream_http_exit: Option<Exit>,
    /// Disconnects when the current upstream's stderr is copied out.
    stderr_copied: Option<Receiver<()>>,
    timer: Option<(Instant, Timer)>,
    /// The host's bytes taken (`relay::host_bytes_taken`) when a timer that
    /// waits on the pipes was armed: it moved meanwhile, the host is still
    /// reading what the server sent and the timer waits again.
    host_taken_at_timer: u64,
    /// `--lazy`: host pumps waiting for the server's handshake; released
    /// (dropped) when it is done or the server is gone.
    wake_waiters: Vec<Sender<()>>,
}

impl Session {
    fn new(shared: Arc<Shared>, tx: Sender<Event>, rx: Receiver<Event>) -> Session {
        let restarts_left = u8::from(shared.cfg.restart);
        Session {
            shared,
            tx,
            rx,
            generation: 0,
            pid: None,
            exited: None,
            stdout_closed: false,
            restarts_left,
            host_eof: false,
            signalled: false,
            dead_status: None,
            upstream_http_exit: None,
            stderr_copied: None,
            timer: None,
            host_taken_at_timer: 0,
            wake_waiters: Vec::new(),
        }
    }

    fn run(mut self) -> Exit {
        let dormant = lock(&self.shared.lazy).dormant.is_some();
        if dormant {
            log::debug!("--lazy: answering from the last snapshot; the server starts when needed");
        } else if let Err(err) = self.start_upstream() {
            crate::output::note(&format!(
                "bir-proxy[{}]: cannot start '{}': {}",
                self.shared.cfg.server_name,
                self.command_line(),
                upstream::start_error(&self.shared.cfg.program, &err)
            ));
            if !self.shared.cfg.stay_up {
                return self.finish(Exit::from(Status::Failure));
            }
            let _ = lock(&self.shared.inflight).upstream_died();
            self.dead_status = Some(Exit::from(Status::Failure));
        }
        self.start_host_pump();
        loop {
            let event = match self.timer {
                Some((at, _)) => match self
                    .rx
                    .recv_timeout(at.saturating_duration_since(Instant::now()))
                {
                    Ok(event) => Some(event),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => {
                        return self.finish(Exit::from(Status::Failure));
                    }
                },
                None => match self.rx.recv() {
                    Ok(event) => Some(event),
                    Err(_) => return self.finish(Exit::from(Status::Failure)),
                },
            };
            let outcome = match event {
                Some(event) => self.on_event(event),
                None => self.on_timer(),
            };
            if let Some(exit) = outcome {
                return self.finish(exit);
            }
        }
    }

    fn command_line(&self) -> String {
        std::iter::once(self.shared.cfg.program.as_str())
            .chain(self.shared.cfg.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Starts (or restarts) the upstream and its threads.
    fn start_upstream(&mut self) -> std::io::Result<()> {
        if self.shared.cfg.upstream_http.is_some() {
            return self.start_upstream_http();
        }
        let spawned = upstream::spawn(&self.shared.cfg)?;
        self.generation += 1;
        let generation = self.generation;
        self.pid = Some(spawned.pid);
        self.exited = None;
        self.stdout_closed = false;
        *lock(&self.shared.upstream_in) = Some(Box::new(spawned.stdin));
        self.stderr_copied = Some(upstream::spawn_stderr_copier(
            &self.shared.cfg.server_name,
            spawned.stderr,
        ));

        let (shared, tx) = (Arc::clone(&self.shared), self.tx.clone());
        let stdout = spawned.stdout;
        self.spawn_thread("bir-from-server", move || {
            relay::pump_upstream(&shared, &tx, stdout, generation);
        })?;
        let tx = self.tx.clone();
        let mut child = spawned.child;
        self.spawn_thread("bir-wait", move || {
            if let Ok(status) = child.wait() {
                let _ = tx.send(Event::UpstreamExited { generation, status });
            }
        })?;
        Ok(())
    }

    /// A remote upstream: the HTTP transport behind two pipes. It never
    /// exits on its own: unreachable, it answers each request with an error.
    fn start_upstream_http(&mut self) -> std::io::Result<()> {
        let started = upstream_http::start(&self.shared.cfg, self.tx.clone())?;
        self.generation += 1;
        let generation = self.generation;
        *lock(&self.shared.upstream_in) = Some(Box::new(started.to_upstream_http));
        let (shared, tx) = (Arc::clone(&self.shared), self.tx.clone());
        let from = started.from_upstream_http;
        self.spawn_thread("bir-from-server", move || {
            relay::pump_upstream(&shared, &tx, from, generation);
        })
    }

    /// Whether an upstream was ever started (a child spawned, or the
    /// HTTP transport begun): with `--lazy`, perhaps not yet.
    fn started(&self) -> bool {
        self.generation > 0
    }

    fn start_host_pump(&self) {
        let (shared, tx) = (Arc::clone(&self.shared), self.tx.clone());
        if let Err(err) = self.spawn_thread("bir-from-host", move || relay::pump_host(&shared, &tx))
        {
            log::error!("cannot start the relay: {err}");
        }
    }

    fn spawn_thread(
        &self,
        name: &str,
        body: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<()> {
        thread::Builder::new()
            .name(name.into())
            .stack_size(512 * 1024)
            .spawn(body)
            .map(|_| ())
    }

    fn on_event(&mut self, event: Event) -> Option<Exit> {
        match event {
            Event::Signal(sig) if self.shared.cfg.upstream_http.is_some() => {
                // `--lazy`, never connected: no remote session to end.
                if self.signalled || !self.started() {
                    return Some(Exit::Signal(sig));
                }
                // A remote session is ended (DELETE, bounded) before dying
                // of the signal; a second signal ends at once.
                log::debug!("received signal {sig}; ending the remote session");
                self.signalled = true;
                self.upstream_http_exit = Some(Exit::Signal(sig));
                *lock(&self.shared.upstream_in) = None;
                self.timer = Some((Instant::now() + REMOTE_SIGNAL_GRACE, Timer::GiveUp));
                None
            }
            Event::Signal(sig) => {
                log::debug!("received signal {sig}; passing it on to the server");
                self.signalled = true;
                match (self.pid, self.exited) {
                    (Some(pid), None) => {
                        signals::send_to_group(pid, sig);
                        if !matches!(self.timer, Some((_, Timer::SignalKill(_)))) {
                            self.timer =
                                Some((Instant::now() + SIGNAL_GRACE, Timer::SignalKill(sig)));
                        }
                    }
                    // The server has exited and something it started still
                    // holds its stdout: stop that, and end the way the
                    // server ended (what the host would have seen).
                    (Some(pid), Some(status)) if self.dead_status.is_none() => {
                        signals::send_to_group(pid, sig);
                        return Some(exit_of(status));
                    }
                    // Nothing left to stop: end now, the way we were told to.
                    _ => return Some(self.dead_status.unwrap_or(Exit::Signal(sig))),
                }
                None
            }
            Event::HostEof | Event::HostGone => {
                if self.host_eof {
                    return None;
                }
                self.host_eof = true;
                // `--lazy`, the server never needed: nothing to stop.
                if !self.started() && self.dead_status.is_none() {
                    return Some(Exit::from(Status::Success));
                }
                // Closing the upstream's stdin is how MCP asks a stdio server to stop.
                *lock(&self.shared.upstream_in) = None;
                if let Some(status) = self.dead_status {
                    return Some(status);
                }
                if self.exited.is_none() && self.pid.is_some() {
                    self.arm_while_host_reads(STOP_GRACE, Timer::SendTerm);
                }
                if self.shared.cfg.upstream_http.is_some() {
                    // The transport ends the session (bounded), then says so.
                    self.timer = Some((Instant::now() + 2 * STOP_GRACE, Timer::GiveUp));
                }
                None
            }
            Event::UpstreamHttpClosed => Some(
                self.upstream_http_exit
                    .unwrap_or(Exit::from(Status::Success)),
            ),
            Event::UpstreamEof { generation } if generation == self.generation => {
                self.stdout_closed = true;
                match self.exited {
                    Some(status) => self.upstream_ended(status),
                    None => {
                        if self.shared.cfg.upstream_http.is_none()
                            && !self.host_eof
                            && !self.signalled
                            && self.timer.is_none()
                        {
                            self.timer = Some((Instant::now() + STDOUT_GRACE, Timer::SilentServer));
                        }
                        None
                    }
                }
            }
            Event::UpstreamExited { generation, status } if generation == self.generation => {
                self.exited = Some(status);
                if self.stdout_closed {
                    self.upstream_ended(status)
                } else {
                    self.arm_while_host_reads(STDOUT_GRACE, Timer::StdoutGrace);
                    None
                }
            }
            Event::UpstreamEof { .. } | Event::UpstreamExited { .. } => None,
            Event::WakeUpstream(done) => {
                self.wake(done);
                None
            }
            Event::OwnAnswer { id, answer } => {
                self.on_own_answer(id, &answer);
                None
            }
        }
    }

    /// `--lazy`: starts the server a host request needs, and replays the
    /// handshake the host had with the snapshot (its `initialize` under
    /// the proxy's own id; `initialized` once that is answered). `done` is
    /// released when the handshake is over, or at once when there is none
    /// to replay (the host's own `initialize` is on its way) or the server
    /// cannot start (the pending request is then answered as for a dead
    /// server).
    fn wake(&mut self, done: Sender<()>) {
        if self.started() || self.dead_status.is_some() || self.host_eof || self.signalled {
            return;
        }
        if let Err(err) = self.start_upstream() {
            crate::output::note(&format!(
                "bir-proxy[{}]: cannot start '{}': {}",
                self.shared.cfg.server_name,
                self.command_line(),
                upstream::start_error(&self.shared.cfg.program, &err)
            ));
            let pending = lock(&self.shared.inflight).upstream_died();
            self.dead_status = Some(Exit::from(Status::Failure));
            self.answer_as_gone(pending);
            return;
        }
        self.shared
            .observer
            .event("--lazy: server started on demand");
        let replay = lock(&self.shared.lazy).answered_initialize;
        let initialize = lock(&self.shared.handshake).initialize.clone();
        let line = initialize.and_then(|i| with_own_id(&i, LAZY_INIT_ID));
        match (replay, line) {
            (true, Some(line)) => {
                lock(&self.shared.inflight).insert_own_reported(LAZY_INIT_ID);
                self.shared.write_to_upstream(&line);
                self.shared
                    .observer
                    .message(crate::observe::Direction::ProxyToServer, &line);
                self.wake_waiters.push(done);
            }
            (true, None) => {
                log::warn!("--lazy: cannot replay the host's initialize (it does not parse)");
            }
            (false, _) => {}
        }
    }

    /// `--lazy`: the server answered the replayed `initialize` (send the
    /// host's `initialized`, check the tools, let the host's requests go)
    /// or the tools check (tell the host if its tools are out of date).
    fn on_own_answer(&mut self, id: &str, answer: &[u8]) {
        if id == LAZY_INIT_ID {
            let initialized = lock(&self.shared.handshake).initialized.clone();
            if let Some(line) = initialized {
                self.shared.write_to_upstream(&line);
            }
            if lock(&self.shared.lazy).tools_given.is_some() {
                self.ask_tools_page(None);
            }
            for waiter in self.wake_waiters.drain(..) {
                let _ = waiter.send(());
            }
        } else if id == LAZY_TOOLS_ID {
            let step = lock(&self.shared.lazy)
                .tools_given
                .as_mut()
                .map(|check| check.on_answer(answer));
            match step {
                Some(lazy::CheckStep::Next(cursor)) => self.ask_tools_page(Some(&cursor)),
                Some(lazy::CheckStep::Differ) => {
                    lock(&self.shared.lazy).tools_given = None;
                    log::info!(
                        "--lazy: the server's tools differ from its last snapshot; telling the host"
                    );
                    self.shared.write_to_host(
                        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n",
                        &self.tx,
                    );
                }
                Some(lazy::CheckStep::Same) | None => lock(&self.shared.lazy).tools_given = None,
            }
        }
    }

    /// `--lazy`: asks the started server for a page of its tools (the
    /// first, or the one at `cursor`, JSON text), under the proxy's own id.
    fn ask_tools_page(&self, cursor: Option<&str>) {
        let params = cursor.map_or(String::new(), |c| format!(",\"params\":{{\"cursor\":{c}}}"));
        let ask = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"{LAZY_TOOLS_ID}\",\"method\":\"tools/list\"{params}}}\n"
        );
        lock(&self.shared.inflight).insert_own_reported(LAZY_TOOLS_ID);
        self.shared.write_to_upstream(ask.as_bytes());
    }

    /// Arms a timer that waits on the pipes (see `host_taken_at_timer`).
    fn arm_while_host_reads(&mut self, after: Duration, timer: Timer) {
        self.host_taken_at_timer = relay::host_bytes_taken();
        self.timer = Some((Instant::now() + after, timer));
    }

    fn on_timer(&mut self) -> Option<Exit> {
        let (_, timer) = self.timer.take()?;
        let pid = self.pid.unwrap_or(0);
        // The server's output is still on its way to a host that reads it
        // (slowly: a loaded machine, a large answer): that is neither a
        // server that will not stop nor a stdout held by something else.
        // Without bir the host would get every byte; so it does here.
        if let Timer::SendTerm | Timer::StdoutGrace = timer
            && relay::host_bytes_taken() != self.host_taken_at_timer
        {
            let after = match timer {
                Timer::SendTerm => STOP_GRACE,
                _ => STDOUT_GRACE,
            };
            self.arm_while_host_reads(after, timer);
            return None;
        }
        match timer {
            Timer::SendTerm => {
                log::debug!("server still running {STOP_GRACE:?} after its stdin closed: SIGTERM");
                signals::send_to_group(pid, libc::SIGTERM);
                self.timer = Some((Instant::now() + STOP_GRACE, Timer::SendKill));
                None
            }
            Timer::SendKill => {
                log::warn!("server ignored SIGTERM for {STOP_GRACE:?}: SIGKILL");
                signals::send_to_group(pid, libc::SIGKILL);
                self.timer = Some((Instant::now() + STOP_GRACE, Timer::GiveUp));
                None
            }
            Timer::GiveUp if self.shared.cfg.upstream_http.is_some() => {
                log::debug!("the remote session did not end in time; leaving");
                Some(
                    self.upstream_http_exit
                        .unwrap_or(Exit::from(Status::Success)),
                )
            }
            Timer::GiveUp => {
                log::error!("server did not exit after SIGKILL; leaving");
                Some(Exit::from(Status::Failure))
            }
            Timer::SignalKill(sig) => {
                log::warn!(
                    "server still running {SIGNAL_GRACE:?} after the host's signal: SIGKILL; leaving"
                );
                signals::send_to_group(pid, libc::SIGKILL);
                Some(Exit::Signal(sig))
            }
            Timer::SilentServer => {
                if self.exited.is_none() {
                    self.server_went_silent();
                }
                None
            }
            Timer::StdoutGrace => {
                // The server is gone but something it started holds its
                // stdout: stop that too, and carry on without it.
                signals::send_to_group(pid, libc::SIGTERM);
                self.exited.and_then(|status| self.upstream_ended(status))
            }
        }
    }

    /// The upstream has exited and its output is drained. Decides whether
    /// the proxy ends, restarts the upstream, or stays up.
    fn upstream_ended(&mut self, status: ExitStatus) -> Option<Exit> {
        self.timer = None;
        self.wake_waiters.clear();
        let exit = exit_of(status);
        let pending = lock(&self.shared.inflight).upstream_died();
        *lock(&self.shared.upstream_in) = None;
        self.shared
            .observer
            .event(format!("upstream exited ({})", describe(status)));
        // When the host itself ended the session (a signal, or closing our
        // stdin), the server exiting is what it asked for: the host sees
        // exactly what it would see without bir. Otherwise the server died
        // on its own, and each pending request gets an answer.
        if !self.signalled && !self.host_eof {
            if !pending.is_empty() {
                log::warn!(
                    "the server exited ({}) with {} request(s) unanswered; answering them",
                    describe(status),
                    pending.len()
                );
            }
            self.answer_as_gone(pending);
        } else {
            self.record_session_ended(pending);
        }
        if self.signalled || self.host_eof {
            return Some(exit);
        }
        log::warn!("the server exited unexpectedly ({})", describe(status));
        if self.restarts_left > 0 {
            self.restarts_left -= 1;
            match self.restart() {
                Ok(()) => return None,
                Err(err) => log::error!("restarting the server failed: {err}"),
            }
        }
        if self.shared.cfg.stay_up {
            log::warn!("BIR_PROXY_STAY_UP=1: staying up; every request is answered with an error");
            self.dead_status = Some(exit);
            return None;
        }
        Some(exit)
    }

    /// Requests the upstream will never answer: each gets the answer the
    /// proxy gives in place of a dead server, and a `tools/call` is
    /// recorded as `upstream_gone`.
    fn answer_as_gone(&self, pending: Vec<HostRequest>) {
        for request in pending {
            let answer = self.shared.unavailable_answer(&request);
            self.shared.write_to_host(&answer, &self.tx);
            self.shared.observe_unanswered_call(
                request,
                CallOutcome::UpstreamGone,
                None,
                Instant::now(),
            );
        }
    }

    /// The server closed its stdout but keeps running: it can answer
    /// nothing more. Without bir the host would have read end of file, so
    /// that is what it gets (after an answer, as for a dead server, to each
    /// request still waiting). With `--restart` the server is stopped, so
    /// that its exit restarts it; with stay-up the proxy answers every
    /// request itself from now on, as after a death.
    fn server_went_silent(&mut self) {
        let pending = lock(&self.shared.inflight).upstream_died();
        log::warn!(
            "the server closed its stdout but is still running; {} request(s) unanswered",
            pending.len()
        );
        self.shared
            .observer
            .event("upstream closed its stdout while running");
        self.answer_as_gone(pending);
        if self.restarts_left > 0 {
            if let Some(pid) = self.pid {
                signals::send_to_group(pid, libc::SIGTERM);
            }
        } else if !self.shared.cfg.stay_up {
            let _ = self.shared.close_host();
        }
    }

    /// `--restart`: a new upstream, given the host's handshake again.
    fn restart(&mut self) -> std::io::Result<()> {
        log::warn!("restarting the server (--restart)");
        self.start_upstream()?;
        lock(&self.shared.inflight).upstream_restarted();
        // Copy the handshake out first: the pumps take the in-flight lock
        // before the handshake lock, so this must never hold both (the lock
        // order is documented on `Shared`).
        let (initialize, initialized) = {
            let handshake = lock(&self.shared.handshake);
            (handshake.initialize.clone(), handshake.initialized.clone())
        };
        let Some(initialize) = initialize else {
            return Ok(());
        };
        let id = format!("bir:restart-{}", self.generation);
        let Some(replay) = with_own_id(&initialize, &id) else {
            log::warn!("cannot replay the handshake (the host's initialize does not parse)");
            return Ok(());
        };
        lock(&self.shared.inflight).insert_own(&id, initialized);
        self.shared.write_to_upstream(&replay);
        self.shared
            .observer
            .message(crate::observe::Direction::ProxyToServer, &replay);
        self.shared
            .observer
            .event("upstream restarted; handshake replayed");
        Ok(())
    }

    /// Calls the session ended under: recorded as such, not forgotten.
    fn record_session_ended(&self, pending: Vec<HostRequest>) {
        let now = Instant::now();
        for request in pending {
            self.shared
                .observe_unanswered_call(request, CallOutcome::SessionEnded, None, now);
        }
    }

    fn finish(self, exit: Exit) -> Exit {
        // Whatever is still in flight when the proxy ends (however it ends)
        // was never answered.
        let pending = lock(&self.shared.inflight).upstream_died();
        self.record_session_ended(pending);
        // The host sees end of file first: nothing more is written to it
        // (without waiting for a pump blocked on a host that does not read:
        // what it was writing, a call's answer perhaps, is then counted
        // lost, and the run says so).
        // Ended by a signal, the host is stopping us: nothing waits for it
        // to read. Otherwise what the server sent is delivered for as long
        // as the host keeps taking it.
        let closed = if self.signalled {
            self.shared.close_host()
        } else {
            self.shared.close_host_when_drained(HOST_READ_STALL)
        };
        if !closed {
            log::warn!("the host stopped reading; leaving with a write to it unfinished");
            self.shared.observer.lost(1);
        }
        let deadline = if self.signalled {
            OBSERVER_DEADLINE_SIGNALLED
        } else {
            OBSERVER_DEADLINE
        };
        let until = Instant::now() + deadline;
        self.shared.observer.finish(deadline);
        // The server's last stderr lines (often why it exited) still on
        // their way through the copier: within the same bound, which the
        // copier has been using in parallel.
        if let Some(copied) = &self.stderr_copied {
            let _ = copied.recv_timeout(until.saturating_duration_since(Instant::now()));
        }
        exit
    }
}

/// The host's `initialize` line with its id replaced by one of the proxy's.
pub(crate) fn with_own_id(initialize: &[u8], id: &str) -> Option<Vec<u8>> {
    let mut value: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(initialize).ok()?;
    value.insert("id".into(), serde_json::Value::String(id.into()));
    let mut line = serde_json::to_vec(&value).ok()?;
    line.push(b'\n');
    Some(line)
}

fn exit_of(status: ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code.clamp(0, 255) as u8),
        (None, Some(sig)) => Exit::Signal(sig),
        (None, None) => Exit::Code(1),
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("status {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => "unknown status".into(),
    }
}
