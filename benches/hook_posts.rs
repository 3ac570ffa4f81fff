//! HTTP hook posts against the release daemon: the latency the daemon adds
//! to one hook, and 1,000 posts/s sustained with every post recorded.
//!
//! What Claude Code does for an HTTP hook: a POST of the event's JSON to
//! the daemon's hook port with the hook token (`Authorization`), bir's
//! mark and the `X-Bir-Off` header, one request per connection (the daemon
//! answers one request and closes). This client does the same from Rust
//! threads, so the figures are the daemon's, not a slow client's.
//!
//! 1. **Added latency.** Realistic PreToolUse/PostToolUse posts, one at a
//!    time, alternating between the daemon and a floor server in this
//!    process that reads the request and answers 200 at once (the same
//!    connection per post). The daemon's added latency is, post by post,
//!    its latency minus the floor's for the same payload just after, at
//!    p50 and p99 (targets: ≤ 1 ms, ≤ 5 ms); the two distributions are
//!    shown too.
//! 2. **Sustained rate.** `BENCH_HOOK_THREADS` clients (default 16: a
//!    slow answer holds up its own client only, as with many sessions), paced
//!    together to `BENCH_HOOK_RATE` posts/s (default 1,000) for
//!    `BENCH_HOOK_SECS` (default 10; 3 with `BENCH_QUICK=1`), each in a
//!    session of its own: posts answered other than 200 are dropped posts,
//!    and the rate reached is counted from answers, not from sends.
//! 3. **Every post recorded.** Each session then ends (`SessionEnd`); the
//!    runs are exported (`bir runs export`) and every call posted must be
//!    there with both its records; a call missing is a dropped post too.
//!
//! Run: `cargo build --release && cargo bench --bench hook_posts` (part of
//! `make bench`). Knobs: BIR_BIN (default target/release/bir),
//! BENCH_QUICK=1, BENCH_HOOK_LATENCY_POSTS (default 2000; 400 quick),
//! BENCH_HOOK_RATE, BENCH_HOOK_SECS, BENCH_HOOK_THREADS,
//! BENCH_HOOK_RESULTS (default target/bench-hook-posts.md).

#![allow(clippy::print_stdout, clippy::unwrap_used)]

mod common;
#[path = "common/daemon.rs"]
mod daemon_common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use daemon_common::{Target, exchange, ms, pct, private_home, release_bir, root};

fn main() {
    let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1");
    let latency_posts =
        common::env_usize("BENCH_HOOK_LATENCY_POSTS", if quick { 400 } else { 2000 });
    let rate = common::env_usize("BENCH_HOOK_RATE", 1000);
    let secs = common::env_usize("BENCH_HOOK_SECS", if quick { 3 } else { 10 });
    let threads = common::env_usize("BENCH_HOOK_THREADS", 16).max(1);
    let bin = release_bir();
    let (tmp, home) = private_home("hook-posts");
    std::fs::create_dir_all(home.join("control")).unwrap();
    std::fs::set_permissions(home.join("control"), std::fs::Permissions::from_mode(0o700)).unwrap();

    // The hook port and token, as `bir install --hooks http` keeps them.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let hook = Target {
        port,
        token: format!("{:064x}", std::process::id() as u128 * 7919 + 0xb1b0),
    };
    let write_private = |p: &Path, text: &str| {
        std::fs::write(p, text).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).unwrap();
    };
    write_private(
        &home.join("control/hooks.json"),
        &json!({"port": port, "token": hook.token}).to_string(),
    );
    write_private(&home.join("control/port"), &format!("{port}\n"));
    let mut daemon = start_daemon(&bin, &home);
    wait_listening(port);
    let floor = start_floor();

    let mut report = String::new();
    let mut line = |s: String| {
        println!("{s}");
        report.push_str(&s);
        report.push('\n');
    };
    let version = Command::new(&bin)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    line(format!(
        "# HTTP hook posts against the daemon ({version}; load average {})\n",
        load_average()
    ));

    // 1. Added latency, interleaved with the floor.
    let session = "bench-latency";
    for event in ["SessionStart", "UserPromptSubmit"] {
        assert_eq!(post(&hook, event, &payload(session, event, 0)).0, 200);
    }
    let (mut on_daemon, mut on_floor) = (Vec::new(), Vec::new());
    let mut posted = Vec::new();
    for i in 0..latency_posts {
        let event = if i % 2 == 0 {
            "PreToolUse"
        } else {
            "PostToolUse"
        };
        let body = payload(session, event, i / 2);
        let (status, took) = post(&hook, event, &body);
        assert_eq!(status, 200, "the daemon refused a post");
        on_daemon.push(took);
        let (status, took) = post(&floor, event, &body);
        assert_eq!(status, 200, "the floor refused a post");
        on_floor.push(took);
        if i % 2 == 1 {
            posted.push((session.to_owned(), call_id(session, i / 2)));
        }
    }
    // Post by post: what the daemon took over the floor for the same post.
    let mut paired: Vec<f64> = on_daemon
        .iter()
        .zip(&on_floor)
        .map(|(d, f)| ms(*d) - ms(*f))
        .collect();
    paired.sort_by(f64::total_cmp);
    let added = |p: f64| {
        let i = ((p / 100.0) * (paired.len() - 1) as f64).round() as usize;
        paired[i.min(paired.len() - 1)]
    };
    on_daemon.sort();
    on_floor.sort();
    line("| one post, a connection each | p50 ms | p90 ms | p99 ms |".into());
    line("| --- | ---: | ---: | ---: |".into());
    for (name, v) in [
        ("daemon", &on_daemon),
        ("floor (answers 200 at once)", &on_floor),
    ] {
        line(format!(
            "| {name} | {:.3} | {:.3} | {:.3} |",
            ms(pct(v, 50.0)),
            ms(pct(v, 90.0)),
            ms(pct(v, 99.0))
        ));
    }
    line(format!(
        "| **added by the daemon** (post by post) | **{:.3}** | {:.3} | **{:.3}** |\n",
        added(50.0),
        added(90.0),
        added(99.0)
    ));

    // 2. Sustained, paced posts from several clients, each its own session.
    let per_thread = (rate * secs).div_ceil(threads);
    let interval = Duration::from_secs_f64(threads as f64 / rate as f64);
    let started = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let hook = hook.clone();
            std::thread::spawn(move || {
                let session = format!("bench-rate-{t}");
                for event in ["SessionStart", "UserPromptSubmit"] {
                    post(&hook, event, &payload(&session, event, 0));
                }
                let mut lat = Vec::with_capacity(per_thread);
                let (mut refused, mut ids) = (0usize, Vec::new());
                let begin = Instant::now();
                for i in 0..per_thread {
                    let due = begin + interval * i as u32;
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let event = if i % 2 == 0 {
                        "PreToolUse"
                    } else {
                        "PostToolUse"
                    };
                    let (status, took) = post(&hook, event, &payload(&session, event, i / 2));
                    lat.push(took);
                    if status != 200 {
                        refused += 1;
                    }
                    if i % 2 == 1 {
                        ids.push((session.clone(), call_id(&session, i / 2)));
                    }
                }
                (lat, refused, ids, session)
            })
        })
        .collect();
    let mut lat = Vec::new();
    let mut refused = 0;
    let mut sessions = vec![session.to_owned()];
    for w in workers {
        let (l, r, ids, s) = w.join().unwrap();
        lat.extend(l);
        refused += r;
        posted.extend(ids);
        sessions.push(s);
    }
    let elapsed = started.elapsed();
    lat.sort();
    let sent = lat.len();
    line(format!(
        "| paced to {rate} posts/s, {threads} clients, {secs} s | value |"
    ));
    line("| --- | ---: |".into());
    line(format!(
        "| posts sent | {sent} in {:.2} s |",
        elapsed.as_secs_f64()
    ));
    line(format!(
        "| answered 200, per second | {:.0} |",
        (sent - refused) as f64 / elapsed.as_secs_f64()
    ));
    line(format!("| not answered 200 (dropped) | {refused} |"));
    line(format!(
        "| post latency p50 / p99 ms | {:.3} / {:.3} |",
        ms(pct(&lat, 50.0)),
        ms(pct(&lat, 99.0))
    ));

    // 3. Every call posted is in its session's run.
    for s in &sessions {
        post(&hook, "SessionEnd", &payload(s, "SessionEnd", 0));
    }
    let recorded = recorded_calls(&bin, &home, sessions.len());
    let missing = posted
        .iter()
        .filter(|(_, id)| !recorded.contains(id))
        .count();
    line(format!(
        "| calls posted / recorded with both records / missing | {} / {} / {missing} |\n",
        posted.len(),
        posted.len() - missing
    ));
    line(format!(
        "Targets: added p50 ≤ 1 ms ({}), added p99 ≤ 5 ms ({}), {rate} posts/s sustained with none dropped ({}).",
        verdict(added(50.0) <= 1.0),
        verdict(added(99.0) <= 5.0),
        verdict(
            refused == 0
                && missing == 0
                && (sent - refused) as f64 / elapsed.as_secs_f64() >= rate as f64 * 0.98
        )
    ));

    let _ = daemon.kill();
    let _ = daemon.wait();
    let _ = std::fs::remove_dir_all(&tmp);
    let out = std::env::var_os("BENCH_HOOK_RESULTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/bench-hook-posts.md"));
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(&out, report);
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "missed" }
}

fn start_daemon(bin: &Path, home: &Path) -> Child {
    Command::new(bin)
        .arg("daemon")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("BIR_HOME", home)
        .env("BIR_SERVICE_URL", "off")
        .env("BIR_JOIN_GRACE_MS", "500")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the daemon never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server that reads one request (head and body) per connection and
/// answers 200 with no body at once: what a hook post costs without any
/// daemon work.
fn start_floor() -> Target {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || floor_answer(stream));
        }
    });
    Target {
        port,
        token: "floor".into(),
    }
}

fn floor_answer(mut s: TcpStream) {
    let _ = s.set_nodelay(true);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let Ok(n) = s.read(&mut chunk) else { return };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                break;
            }
        }
    }
    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

/// One hook post as Claude Code sends it: `(status, time to the answer)`.
fn post(t: &Target, event: &str, body: &[u8]) -> (u16, Duration) {
    let started = Instant::now();
    let mut req = format!(
        "POST /hook/{event} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\nX-Bir-Hook: 1\r\nX-Bir-Off: \r\nContent-Type: application/json\r\nUser-Agent: axios/1.15.2\r\nContent-Length: {}\r\n\r\n",
        t.port,
        t.token,
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    let status = exchange(t, &req);
    (status, started.elapsed())
}

fn call_id(session: &str, n: usize) -> String {
    format!("toolu_{session}_{n:06}")
}

/// A realistic payload of `event` (Claude Code 2.1.332's fields) for call
/// `n` of `session`; no transcript, so the run is told from the hooks.
fn payload(session: &str, event: &str, n: usize) -> Vec<u8> {
    let mut p = json!({
        "session_id": session,
        "cwd": "/home/user/project",
        "hook_event_name": event,
        "permission_mode": "bypassPermissions",
    });
    match event {
        "SessionStart" => p["source"] = json!("startup"),
        "UserPromptSubmit" => p["prompt"] = json!("Run the shell steps one by one."),
        "SessionEnd" => p["reason"] = json!("other"),
        _ => {
            p["prompt_id"] = json!("5e5c7b7e-0000-4000-8000-000000000001");
            p["effort"] = json!({"level": "medium"});
            p["tool_name"] = json!("Bash");
            p["tool_use_id"] = json!(call_id(session, n));
            p["tool_input"] = json!({"command": format!("echo step-{n} && ls -la /tmp | head -5"),
                                     "description": "Shell step"});
            if event == "PostToolUse" {
                p["tool_response"] = json!({"stdout": format!("step-{n}\ntotal 48\ndrwxrwxrwt 12 root root 4096 .\n"),
                    "stderr": "", "interrupted": false, "isImage": false, "noOutputExpected": false});
                p["duration_ms"] = json!(4);
            }
        }
    }
    serde_json::to_vec(&p).unwrap()
}

/// The tool_use_ids told with both records in the finished runs of
/// `home`, once `want` runs finished (or a minute passed).
fn recorded_calls(bin: &Path, home: &Path, want: usize) -> HashSet<String> {
    let bir = |args: &[&str]| {
        Command::new(bin)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("BIR_HOME", home)
            .env("BIR_SERVICE_URL", "off")
            .output()
            .map(|o| o.stdout)
            .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let finished = loop {
        let listed: Vec<Value> = String::from_utf8_lossy(&bir(&["runs", "--json"]))
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .filter(|r: &Value| r["state"] == "finished")
            .collect();
        if listed.len() >= want || Instant::now() > deadline {
            break listed;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut answered: HashSet<String> = HashSet::new();
    let mut selected: HashSet<String> = HashSet::new();
    for run in finished {
        let Some(id) = run["id"].as_str() else {
            continue;
        };
        let Ok(doc) = serde_json::from_slice::<Value>(&bir(&["runs", "export", id])) else {
            continue;
        };
        for step in doc["steps"].as_array().into_iter().flatten() {
            let Some(call) = step["toolUseId"].as_str() else {
                continue;
            };
            match step["type"].as_str() {
                Some("tool_selected") => {
                    selected.insert(call.to_owned());
                }
                Some("tool_response") => {
                    answered.insert(call.to_owned());
                }
                _ => {}
            }
        }
    }
    selected.intersection(&answered).cloned().collect()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}
