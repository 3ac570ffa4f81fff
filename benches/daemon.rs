//! Recorder-daemon benchmark: what a hook costs the host, and what the
//! daemon holds up to.
//!
//! 1. **Hook process, start to exit**, the way Claude Code runs a command
//!    hook: `sh -c '<abs path>/bir-hooks <Event>'` with the event's JSON on
//!    stdin, per event type, next to a minimal Python hook (`python3 -c
//!    'import sys,json; json.load(sys.stdin)'`) and `/bin/true` through the
//!    same `sh -c`, interleaved in one run so drift hits all alike.
//! 2. **Sustained 1,000 hook posts/s** for a few seconds against the daemon
//!    (8 client threads, paced): how many were not answered 200 (the target
//!    is none), and the latency of a post.
//! 3. **Unpaced**: the most posts/s 8 clients get through.
//! 4. **RSS with 10 concurrent sessions** (each: SessionStart, a prompt,
//!    50 PreToolUse/PostToolUse pairs, posted by 10 threads at once).
//!
//! Steps 2–4 run against the daemon (hand-written std::net server, one
//! thread per connection) and against a stand-in built on `tiny_http`
//! (this bench re-run as a child with `BENCH_DAEMON_ROLE=tiny_http`; it
//! checks the token and parses the JSON, as the daemon does before its
//! engine), so the choice of server is made on figures (`bench/README.md`).
//!
//! Run: `cargo build --release && cargo bench --bench daemon`. Knobs:
//! BIR_BIN (default target/release/bir), BENCH_HOOK_RUNS (per config,
//! default 200), BENCH_DAEMON_SECS (paced seconds, default 5),
//! BENCH_DAEMON_RESULTS (default target/bench-daemon.md).

#![allow(clippy::print_stdout, clippy::unwrap_used)]

mod common;
#[path = "common/daemon.rs"]
mod daemon_common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use daemon_common::{Target, exchange, ms, pct, private_home, release_bir, root};

fn main() {
    if std::env::var("BENCH_DAEMON_ROLE").as_deref() == Ok("tiny_http") {
        return tiny_http_stand_in();
    }
    let bin = release_bir();
    let (tmp, home) = private_home("daemon");
    let hooks = tmp.join("bir-hooks");
    std::os::unix::fs::symlink(&bin, &hooks).unwrap();

    let mut report = String::new();
    let mut line = |s: String| {
        println!("{s}");
        report.push_str(&s);
        report.push('\n');
    };
    line(format!(
        "# Recorder daemon benchmark\n\nbinary: {}\n",
        bin.display()
    ));

    // 1. Hooks.
    run_hook(&hooks, &home, "SessionStart", &payload("SessionStart", 0));
    let daemon = wait_discovery(&home);
    let runs = common::env_usize("BENCH_HOOK_RUNS", 200);
    let events = [
        "PreToolUse",
        "PostToolUse",
        "UserPromptSubmit",
        "Stop",
        "SessionStart",
    ];
    let python = "python3 -c 'import sys,json; json.load(sys.stdin)'".to_owned();
    let mut configs: Vec<(String, String, String)> = events
        .iter()
        .map(|e| {
            (
                format!("bir-hooks {e}"),
                format!("'{}' {e}", hooks.display()),
                payload(e, 1),
            )
        })
        .collect();
    configs.push(("python3 json.load".into(), python, payload("PreToolUse", 1)));
    configs.push((
        "/bin/true".into(),
        "/bin/true".into(),
        payload("PreToolUse", 1),
    ));
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); configs.len()];
    for _ in 0..runs {
        for (i, (_, cmd, body)) in configs.iter().enumerate() {
            times[i].push(time_sh(cmd, body, &home));
        }
    }
    line(format!(
        "## 1. Hook process, start to exit (`sh -c`, payload on stdin), {runs} runs each, interleaved\n"
    ));
    line("| hook | p50 ms | p90 ms | p99 ms | max ms | p50 over /bin/true |".into());
    line("| --- | ---: | ---: | ---: | ---: | ---: |".into());
    for t in &mut times {
        t.sort();
    }
    // The last configuration is /bin/true: the process start every hook pays.
    let floor = ms(pct(times.last().unwrap(), 50.0));
    for ((label, _, _), t) in configs.iter().zip(&times) {
        line(format!(
            "| {label} | {:.2} | {:.2} | {:.2} | {:.2} | {:+.2} |",
            ms(pct(t, 50.0)),
            ms(pct(t, 90.0)),
            ms(pct(t, 99.0)),
            ms(*t.last().unwrap()),
            ms(pct(t, 50.0)) - floor
        ));
    }
    line(format!(
        "\nload average at the end: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    ));
    line(String::new());

    // 2–4 against the daemon, then against the tiny_http stand-in.
    let secs = common::env_usize("BENCH_DAEMON_SECS", 5) as u64;
    let bir_rows = server_rows(&daemon, daemon_pid(&home), secs);
    stop_daemon(&daemon, &home);
    let mut tiny = start_tiny_http();
    let tiny_rows = server_rows(&tiny.1, tiny.0.id(), secs);
    let _ = tiny.0.kill();
    let _ = tiny.0.wait();
    line(
        "## 2–4. The server under load (8 client threads; 10 sessions × 102 events for RSS)\n"
            .into(),
    );
    line("| metric | bir daemon (std::net, thread per connection) | tiny_http stand-in |".into());
    line("| --- | ---: | ---: |".into());
    for (a, b) in bir_rows.iter().zip(&tiny_rows) {
        line(format!("| {} | {} | {} |", a.0, a.1, b.1));
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let out = std::env::var_os("BENCH_DAEMON_RESULTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/bench-daemon.md"));
    let _ = std::fs::write(&out, &report);
    println!("\n(written to {})", out.display());
}

fn payload(event: &str, session: usize) -> String {
    let mut p = json!({
        "session_id": format!("bench-session-{session}"),
        "transcript_path": "/nonexistent/bench.jsonl",
        "cwd": "/tmp/project",
        "hook_event_name": event,
        "prompt_id": "p1",
    });
    match event {
        "PreToolUse" | "PostToolUse" => {
            p["tool_name"] = json!("Bash");
            p["tool_input"] = json!({"command": "ls -la", "description": "list"});
            p["tool_use_id"] = json!("toolu_01ABCDEF");
            p["permission_mode"] = json!("default");
            if event == "PostToolUse" {
                p["tool_response"] =
                    json!({"stdout": "a\nb\nc\n".repeat(50), "stderr": "", "interrupted": false});
                p["duration_ms"] = json!(12);
            }
        }
        "UserPromptSubmit" => p["prompt"] = json!("List the files and summarise them."),
        "Stop" => p["last_assistant_message"] = json!("Done: three files."),
        "SessionStart" => p["source"] = json!("startup"),
        _ => {}
    }
    p.to_string()
}

fn run_hook(hooks: &Path, home: &Path, event: &str, body: &str) {
    time_sh(&format!("'{}' {event}", hooks.display()), body, home);
}

/// One `sh -c CMD` with `body` on stdin, start to exit.
fn time_sh(cmd: &str, body: &str, home: &Path) -> Duration {
    let start = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .env("BIR_HOME", home)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(body.as_bytes());
    }
    let status = child.wait().unwrap();
    let took = start.elapsed();
    assert!(status.success(), "{cmd} failed");
    took
}

fn wait_discovery(home: &Path) -> Target {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(bytes) = std::fs::read(home.join("control/daemon.json"))
            && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes)
        {
            let url = v["url"].as_str().unwrap();
            return Target {
                port: url.rsplit(':').next().unwrap().parse().unwrap(),
                token: v["token"].as_str().unwrap().to_owned(),
            };
        }
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn daemon_pid(home: &Path) -> u32 {
    let bytes = std::fs::read(home.join("control/daemon.json")).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    v["pid"].as_u64().unwrap() as u32
}

fn stop_daemon(t: &Target, home: &Path) {
    let pid = daemon_pid(home);
    let _ = post(t, "/shutdown", b"{}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One POST on a fresh connection (as `bir-hooks` does); the status.
fn post(t: &Target, path: &str, body: &[u8]) -> u16 {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        t.port,
        t.token,
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    exchange(t, &req)
}

/// Steps 2–4 against one server: `(metric, value)` rows.
fn server_rows(t: &Target, pid: u32, secs: u64) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    let before = rss_kib(pid);
    // 2. Paced: 1000/s split over 8 threads.
    let threads = 8;
    let rate = 1000.0;
    let failed = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    let start = Instant::now();
    for k in 0..threads {
        let t = t.clone();
        let failed = Arc::clone(&failed);
        handles.push(std::thread::spawn(move || {
            let body = payload("PreToolUse", k);
            let every = Duration::from_secs_f64(threads as f64 / rate);
            let mut next = Instant::now() + every.mul_f64(k as f64 / threads as f64);
            let end = Instant::now() + Duration::from_secs(secs);
            let mut lat = Vec::new();
            while next < end {
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                }
                let sent = Instant::now();
                if post(&t, "/hook/PreToolUse", body.as_bytes()) != 200 {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                lat.push(sent.elapsed());
                next += every;
            }
            lat
        }));
    }
    let mut lat: Vec<Duration> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let took = start.elapsed();
    lat.sort();
    rows.push((
        "paced posts sent (target 1,000/s)".into(),
        format!(
            "{} in {:.1} s = {:.0}/s",
            lat.len(),
            took.as_secs_f64(),
            lat.len() as f64 / took.as_secs_f64()
        ),
    ));
    rows.push((
        "posts not answered 200".into(),
        failed.load(Ordering::Relaxed).to_string(),
    ));
    rows.push((
        "post latency p50 / p99 (ms)".into(),
        format!("{:.2} / {:.2}", ms(pct(&lat, 50.0)), ms(pct(&lat, 99.0))),
    ));
    // 3. Unpaced for 3 s.
    let count = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|k| {
            let t = t.clone();
            let count = Arc::clone(&count);
            let failed = Arc::clone(&failed);
            std::thread::spawn(move || {
                let body = payload("PostToolUse", k);
                while start.elapsed() < Duration::from_secs(3) {
                    if post(&t, "/hook/PostToolUse", body.as_bytes()) == 200 {
                        count.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    rows.push((
        "unpaced posts/s (8 clients, 3 s)".into(),
        format!(
            "{:.0} ({} not 200)",
            count.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64(),
            failed.load(Ordering::Relaxed)
        ),
    ));
    // 4. Ten sessions at once.
    let handles: Vec<_> = (0..10)
        .map(|s| {
            let t = t.clone();
            std::thread::spawn(move || {
                let mut bad = 0;
                let mut send = |event: &str| {
                    let body = payload(event, 100 + s);
                    if post(&t, &format!("/hook/{event}"), body.as_bytes()) != 200 {
                        bad += 1;
                    }
                };
                send("SessionStart");
                send("UserPromptSubmit");
                for _ in 0..50 {
                    send("PreToolUse");
                    send("PostToolUse");
                }
                bad
            })
        })
        .collect();
    let bad: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    std::thread::sleep(Duration::from_millis(600));
    rows.push((
        "RSS idle before load (MiB)".into(),
        format!("{:.1}", before.0 as f64 / 1024.0),
    ));
    let after = rss_kib(pid);
    rows.push((
        "RSS with 10 sessions open / peak (MiB)".into(),
        format!(
            "{:.1} / {:.1} ({} not 200)",
            after.0 as f64 / 1024.0,
            after.1 as f64 / 1024.0,
            bad
        ),
    ));
    rows
}

/// `(VmRSS, VmHWM)` in KiB.
fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn start_tiny_http() -> (Child, Target) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("BENCH_DAEMON_ROLE", "tiny_http")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let text = String::from_utf8(line).unwrap();
    let (port, token) = text.split_once(' ').unwrap();
    (
        child,
        Target {
            port: port.parse().unwrap(),
            token: token.to_owned(),
        },
    )
}

/// The stand-in: tiny_http with a pool of 4 request threads, checking the
/// token and parsing the JSON body under one mutex (what the daemon does
/// before its engine).
fn tiny_http_stand_in() {
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
    let port = server.server_addr().to_ip().unwrap().port();
    let token = "ab".repeat(32);
    println!("{port} {token}");
    let _ = std::io::stdout().flush();
    let seen = Arc::new(std::sync::Mutex::new(0u64));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let server = Arc::clone(&server);
            let seen = Arc::clone(&seen);
            let expected = format!("Bearer {token}");
            std::thread::spawn(move || {
                while let Ok(mut req) = server.recv() {
                    let auth = req
                        .headers()
                        .iter()
                        .find(|h| h.field.equiv("Authorization"))
                        .map(|h| h.value.as_str() == expected)
                        .unwrap_or(false);
                    let mut body = Vec::new();
                    let _ = req.as_reader().take(8 << 20).read_to_end(&mut body);
                    let status = if !auth {
                        401
                    } else if serde_json::from_slice::<serde_json::Value>(&body).is_ok() {
                        *seen.lock().unwrap() += 1;
                        200
                    } else {
                        400
                    };
                    let _ = req.respond(tiny_http::Response::empty(status));
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
}
