//! The proxy's life and death: signals, end of input, a dead or missing
//! upstream, `--restart`, `BIR_PROXY_STAY_UP`, stderr, orphans.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Host, TempDir, alive, bir, command, peak_rss_kib, read_pid, wait_gone};
use crate::support::{eventually, poll_until, wait_until};
use crate::support::{scaled, serial, slowness};

fn init() -> Value {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}})
}

fn call(id: u64, tool: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{"id":id}}})
}

/// `bir-proxy --server-name peer [extra] -- bir testpeer <script> --log <log>`.
fn proxy_cmd(dir: &TempDir, script: &Value, extra: &[&str]) -> std::process::Command {
    let script = dir.script("peer.json", script);
    let mut cmd = command(dir.proxy_link(), dir);
    cmd.args(["--server-name", "peer"])
        .args(extra)
        .arg("--")
        .arg(bir())
        .arg("testpeer")
        .arg(script)
        .arg("--log")
        .arg(dir.join("upstream.log"));
    cmd
}

/// The processes whose parent is `pid` (zombies included: a child is
/// listed until its parent reaped it).
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                // `pid (comm) state ppid ...`: the comm may hold anything.
                stat.rsplit(')')
                    .next()
                    .and_then(|rest| rest.split_whitespace().nth(1)?.parse::<i32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

fn pidfile_script(dir: &TempDir, more: Value) -> Value {
    let mut script = json!({"on_start": [{"pidfile": dir.join("peer.pid").display().to_string()}]});
    if let (Some(s), Some(m)) = (script.as_object_mut(), more.as_object()) {
        for (k, v) in m {
            if k == "on_start" {
                if let Some(list) = s.get_mut("on_start").and_then(Value::as_array_mut) {
                    list.extend(v.as_array().cloned().unwrap_or_default());
                }
            } else {
                s.insert(k.clone(), v.clone());
            }
        }
    }
    script
}

#[test]
fn sigint_is_passed_on_and_the_proxy_leaves_at_once() {
    let _serial = serial();
    // Claude Code stops a server with SIGINT, then SIGTERM ~100 ms later.
    let dir = TempDir::new("sigint");
    let mut host = Host::start(proxy_cmd(&dir, &pidfile_script(&dir, json!({})), &[]));
    host.send(&init());
    assert!(host.wait_lines(1, Duration::from_secs(10)));
    let peer = read_pid(&dir.join("peer.pid"), Duration::from_secs(5));
    let sent = Instant::now();
    host.signal(libc::SIGINT);
    let proxy = host.pid() as i32;
    assert!(
        wait_gone(proxy, Duration::from_secs(2)),
        "proxy still running after SIGINT"
    );
    let took = sent.elapsed();
    let seen = host.finish(Duration::from_secs(2));
    assert_eq!(
        seen.exit(),
        "signal 2",
        "the proxy dies of the signal its server died of"
    );
    assert!(!alive(peer), "the server is gone too");
    assert!(
        took < scaled(Duration::from_millis(500)),
        "took {took:?} to leave after SIGINT"
    );
    eprintln!("proxy gone {took:?} after SIGINT");
}

/// The server has exited, but something it started still holds its stdout
/// (the proxy waits a moment for it): a host's signal then stops what is
/// left, and the proxy ends the way its server ended, as the host would
/// have seen without bir.
#[test]
fn a_signal_after_the_server_exited_keeps_its_exit_status() {
    let dir = TempDir::new("exited-then-signal");
    let pidfile = dir.join("left.pid");
    let script = format!("sleep 30 & echo $! > {}; exit 3", pidfile.display());
    let mut cmd = command(dir.proxy_link(), &dir);
    cmd.args(["--server-name", "sh", "--", "sh", "-c", &script]);
    let host = Host::start(cmd);
    let left = read_pid(&pidfile, Duration::from_secs(5));
    // The proxy has seen its server exit (it reaped it: no child is left)
    // and waits for the stdout it shares with `sleep` to close (500 ms);
    // the host stops it meanwhile.
    let proxy = host.pid() as i32;
    wait_until(
        "the proxy to reap its server",
        Duration::from_secs(5),
        || children_of(proxy).is_empty(),
    );
    host.signal(libc::SIGTERM);
    let seen = host.finish(Duration::from_secs(3));
    assert_eq!(seen.exit(), "code 3", "{}", seen.stderr);
    assert!(
        wait_gone(left, Duration::from_secs(2)),
        "what the server left behind is stopped too"
    );
}

#[test]
fn a_killed_proxy_leaves_no_orphan() {
    let dir = TempDir::new("sigkill");
    let mut host = Host::start(proxy_cmd(&dir, &pidfile_script(&dir, json!({})), &[]));
    host.send(&init());
    assert!(host.wait_lines(1, Duration::from_secs(10)));
    let peer = read_pid(&dir.join("peer.pid"), Duration::from_secs(5));
    host.signal(libc::SIGKILL);
    assert!(host.wait_exit(Duration::from_secs(2)));
    let seen = host.finish(Duration::from_secs(2));
    assert_eq!(seen.exit(), "signal 9");
    assert!(
        wait_gone(peer, Duration::from_secs(2)),
        "server outlived its proxy"
    );
}

/// A server started through a wrapper (`sh -c`, as `npx` and `uvx` do) is
/// a grandchild of the proxy: the SIGKILL the wrapper gets when the proxy
/// dies is not passed on, and a server that ignores end of input would
/// live on, reparented to init. The proxy's watchdog kills the whole
/// process group once the proxy is gone.
#[test]
fn a_killed_proxy_leaves_no_descendant_behind_a_wrapper() {
    let dir = TempDir::new("sigkill-wrapped");
    let pidfile = dir.join("inner.pid");
    // `sleep` stands for a server that ignores end of input.
    let script = format!("sleep 120 & echo $! > {}; wait", pidfile.display());
    let mut cmd = command(dir.proxy_link(), &dir);
    cmd.args(["--server-name", "sh", "--", "sh", "-c", &script]);
    let mut host = Host::start(cmd);
    let inner = read_pid(&pidfile, Duration::from_secs(10));
    host.signal(libc::SIGKILL);
    assert!(host.wait_exit(Duration::from_secs(5)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "signal 9");
    let gone = wait_gone(inner, Duration::from_secs(10));
    if !gone {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(inner, libc::SIGKILL) };
    }
    assert!(gone, "the wrapped server outlived its killed proxy");
}

/// A server that closes its stdout and keeps running can answer nothing
/// more; without bir the host would read end of file. Through bir it gets
/// an answer (as for a dead server) to the call it is waiting for, then end
/// of file; and when it then closes the proxy's stdin, the server is
/// stopped as usual.
#[test]
fn a_server_that_closes_its_stdout_ends_the_hosts_stream() {
    let dir = TempDir::new("silent-server");
    let script = pidfile_script(
        &dir,
        json!({"rules": [{"method": "tools/call", "tool": "quiet", "do": [{"close_stdout": true}]}]}),
    );
    let mut host = Host::start(proxy_cmd(&dir, &script, &[]));
    host.send(&init());
    assert!(host.wait_lines(1, Duration::from_secs(10)));
    let peer = read_pid(&dir.join("peer.pid"), Duration::from_secs(5));
    host.send(&call(1, "quiet"));
    assert!(
        host.wait_stdout_closed(Duration::from_secs(20)),
        "the host's stream stayed open: {}",
        host.stderr_so_far()
    );
    let out = String::from_utf8_lossy(&host.stdout_so_far()).into_owned();
    let answer: Value = serde_json::from_str(out.lines().nth(1).unwrap_or_default())
        .unwrap_or_else(|_| panic!("an answer to call 1: {out}"));
    assert_eq!(answer["id"], 1, "{out}");
    assert_eq!(answer["result"]["isError"], true, "{out}");
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(alive(peer), "the server itself is left to the host");
    let seen = host.finish(Duration::from_secs(15));
    assert!(wait_gone(peer, Duration::from_secs(10)), "{}", seen.stderr);
}

#[test]
fn end_of_input_escalates_to_sigterm_then_sigkill() {
    let _serial = serial();
    // A server that neither reads its stdin nor obeys SIGTERM.
    let dir = TempDir::new("escalate");
    let script = pidfile_script(
        &dir,
        json!({"rules": [{"method": "initialize", "do": [
            {"ignore_signals": true},
            {"pidfile": dir.join("deaf.pid").display().to_string()},
            {"hang": true}]}]}),
    );
    let mut host = Host::start(proxy_cmd(&dir, &script, &[]));
    host.send(&init());
    let peer = read_pid(&dir.join("peer.pid"), Duration::from_secs(5));
    // The server ignores signals from here on.
    read_pid(&dir.join("deaf.pid"), Duration::from_secs(5));
    host.close_stdin();
    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "signal 9", "SIGKILL was the end of it");
    assert!(
        seen.elapsed > Duration::from_millis(3500) && seen.elapsed < scaled(Duration::from_secs(8)),
        "2 s + 2 s grace expected, took {:?}",
        seen.elapsed
    );
    assert!(!alive(peer));
}

#[test]
fn a_server_that_never_answers_initialize_does_not_hang_shutdown() {
    let _serial = serial();
    let dir = TempDir::new("noinit");
    let holding = dir.join("holding.pid");
    let script = json!({"rules": [{"method": "initialize", "do": [
        {"pidfile": holding.display().to_string()},
        {"hang": true}]}]});
    let mut host = Host::start(proxy_cmd(&dir, &script, &[]));
    host.send(&init());
    // The server holds the initialize now.
    read_pid(&holding, Duration::from_secs(5));
    host.close_stdin();
    let seen = host.finish(Duration::from_secs(8));
    assert_eq!(
        seen.exit(),
        "signal 15",
        "stopped by SIGTERM after the grace period"
    );
    assert!(
        seen.elapsed < scaled(Duration::from_secs(4)),
        "took {:?}",
        seen.elapsed
    );
    assert!(seen.stdout.is_empty());
}

#[test]
fn a_server_that_cannot_start_fails_fast_and_clearly() {
    let _serial = serial();
    let dir = TempDir::new("nostart");
    let mut cmd = command(dir.proxy_link(), &dir);
    cmd.args([
        "--server-name",
        "ghost",
        "--",
        "/nonexistent/mcp-server",
        "--flag",
    ]);
    let started = Instant::now();
    let seen = Host::start(cmd).finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 1");
    assert!(started.elapsed() < scaled(Duration::from_secs(1)));
    assert!(seen.stdout.is_empty());
    assert!(
        seen.stderr
            .contains("cannot start '/nonexistent/mcp-server --flag'"),
        "{}",
        seen.stderr
    );
}

#[test]
fn stay_up_answers_every_request_with_an_error() {
    let dir = TempDir::new("stayup");
    let mut cmd = command(dir.proxy_link(), &dir);
    cmd.env("BIR_PROXY_STAY_UP", "1").args([
        "--server-name",
        "ghost",
        "--",
        "/nonexistent/mcp-server",
    ]);
    let mut host = Host::start(cmd);
    host.send(&init());
    host.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    host.send(&call(1, "echo"));
    assert!(host.wait_lines(2, Duration::from_secs(5)));
    let seen = host.finish(Duration::from_secs(5));
    let msgs = seen.messages();
    assert_eq!(msgs.len(), 2, "{}", String::from_utf8_lossy(&seen.stdout));
    assert_eq!(
        msgs[0]["error"]["message"],
        "MCP server \"ghost\" is not available"
    );
    assert_eq!(msgs[1]["result"]["isError"], true);
    assert_eq!(
        msgs[1]["result"]["content"][0]["text"],
        "MCP server \"ghost\" is not available"
    );
    assert_eq!(seen.exit(), "code 1");
}

#[test]
fn stay_up_after_the_server_died() {
    let dir = TempDir::new("stayup2");
    let script = json!({"rules": [{"method": "tools/call", "tool": "crash", "do": [{"exit": 4}]}]});
    let mut cmd = proxy_cmd(&dir, &script, &[]);
    cmd.env("BIR_PROXY_STAY_UP", "1");
    let mut host = Host::start(cmd);
    host.send(&init());
    host.send(&call(1, "crash"));
    assert!(host.wait_lines(2, Duration::from_secs(5)));
    host.send(&call(2, "echo"));
    host.send(&json!({"jsonrpc":"2.0","id":3,"method":"ping"}));
    assert!(host.wait_lines(4, Duration::from_secs(5)));
    let seen = host.finish(Duration::from_secs(5));
    let msgs = seen.messages();
    assert_eq!(msgs[1]["result"]["isError"], true);
    assert_eq!(msgs[2]["id"], 2);
    assert_eq!(msgs[2]["result"]["isError"], true);
    assert_eq!(msgs[3]["error"]["code"], -32000);
    assert_eq!(
        seen.exit(),
        "code 4",
        "still the server's status at the end"
    );
}

#[test]
fn restart_replays_the_handshake_invisibly() {
    let dir = TempDir::new("restart");
    let once = dir.join("crashed-once");
    let script = json!({"rules": [{"method": "tools/call", "tool": "crash", "once_file": once.display().to_string(), "do": [{"exit": 1}]}]});
    let mut host = Host::start(proxy_cmd(&dir, &script, &["--restart"]));
    host.send(&init());
    host.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    assert!(host.wait_lines(1, Duration::from_secs(5)));
    host.send(&call(1, "crash"));
    assert!(host.wait_lines(2, Duration::from_secs(5)));
    // The restarted server has had the handshake replayed.
    let log = dir.join("upstream.log");
    wait_until(
        "the restarted server's handshake",
        Duration::from_secs(5),
        || {
            std::fs::read_to_string(&log)
                .is_ok_and(|l| l.matches("notifications/initialized").count() >= 2)
        },
    );
    host.send(&call(2, "crash"));
    assert!(host.wait_lines(3, Duration::from_secs(5)));
    let seen = host.finish(Duration::from_secs(5));
    let msgs = seen.messages();
    assert_eq!(msgs.len(), 3, "{}", String::from_utf8_lossy(&seen.stdout));
    assert_eq!(
        msgs[1]["result"]["isError"], true,
        "the call in flight failed"
    );
    assert_eq!(msgs[2]["id"], 2);
    assert!(
        msgs[2]["result"]["isError"].is_null(),
        "the restarted server answered: {}",
        msgs[2]
    );
    assert!(!String::from_utf8_lossy(&seen.stdout).contains("bir:restart"));
    let log = std::fs::read_to_string(dir.join("upstream.log")).expect("log");
    assert!(log.contains(r#""id":"bir:restart-2""#), "{log}");
    assert_eq!(log.matches("notifications/initialized").count(), 2, "{log}");
    assert_eq!(seen.exit(), "code 0");
}

#[test]
fn server_stderr_is_prefixed_and_never_reaches_stdout() {
    let dir = TempDir::new("stderr");
    let script = json!({"rules": [{"method": "tools/call", "do": [
        {"stderr": "a line of server logging that is rather long to make the pipe fill up quickly", "repeat": 20000},
        {"reply_text": "ok"}]}]});
    let mut host = Host::start(proxy_cmd(&dir, &script, &[]));
    host.send(&init());
    host.send(&call(1, "noisy"));
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.messages().len(), 2);
    let lines: Vec<&str> = seen.stderr.lines().collect();
    assert!(lines.len() >= 20000, "{} stderr lines", lines.len());
    assert!(
        lines
            .iter()
            .filter(|l| l.contains("server logging"))
            .all(|l| l.starts_with("[peer] "))
    );
}

#[test]
fn group_sigterm_like_the_python_sdk() {
    // The Python client starts servers in a new session and signals the
    // whole group: proxy and server both get SIGTERM.
    use std::os::unix::process::CommandExt;
    let dir = TempDir::new("groupterm");
    let mut cmd = proxy_cmd(&dir, &pidfile_script(&dir, json!({})), &[]);
    cmd.process_group(0);
    let mut host = Host::start(cmd);
    host.send(&init());
    assert!(host.wait_lines(1, Duration::from_secs(5)));
    let peer = read_pid(&dir.join("peer.pid"), Duration::from_secs(5));
    // SAFETY: signalling the test's own child process group.
    unsafe {
        libc::kill(-(host.pid() as i32), libc::SIGTERM);
    }
    assert!(
        host.wait_exit(Duration::from_secs(3)),
        "proxy still running"
    );
    let seen = host.finish(Duration::from_secs(3));
    assert_eq!(seen.exit(), "signal 15");
    assert!(wait_gone(peer, Duration::from_secs(1)));
}

#[test]
fn memory_stays_bounded_while_an_oversized_answer_is_skipped() {
    let dir = TempDir::new("bigskip");
    let script =
        json!({"rules": [{"method": "tools/call", "do": [{"big_reply_bytes": 64 * 1024 * 1024}]}]});
    let mut cmd = proxy_cmd(&dir, &script, &[]);
    cmd.env("BIR_UPSTREAM_MAX_MESSAGE_BYTES", "1048576");
    let mut host = Host::start(cmd);
    host.send(&init());
    host.send(&call(1, "huge"));
    assert!(host.wait_lines(2, Duration::from_secs(30)));
    let peak_kib = peak_rss_kib(host.pid());
    let seen = host.finish(Duration::from_secs(5));
    let msgs = seen.messages();
    assert_eq!(msgs[1]["result"]["isError"], true);
    assert!(
        msgs[1]["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("(67108") && t.contains("limit is 1048576 bytes")),
        "{}",
        msgs[1]
    );
    assert!(
        peak_kib < 16 * 1024,
        "proxy peak RSS {peak_kib} KiB while skipping 64 MiB"
    );
    eprintln!("proxy peak RSS while skipping a 64 MiB answer: {peak_kib} KiB");
}

/// Waits until `path` holds `needle`, up to `timeout`.
fn wait_for_text(path: &std::path::Path, needle: &str, timeout: Duration) -> bool {
    poll_until(timeout, || {
        std::fs::read_to_string(path).is_ok_and(|s| s.contains(needle))
    })
}

/// A server that writes its answer a few bytes at a time. bir adds no
/// timeout of its own, the host gets exactly the bytes written (a piece
/// may end inside a UTF-8 character), the host's own messages reach the
/// server meanwhile, and the step is the whole answer, timed to its end.
#[test]
fn a_slowly_dripped_answer_arrives_whole_while_the_host_keeps_talking() {
    let _serial = serial();
    const PIECE: usize = 9;
    const EVERY_MS: u64 = 20;
    let dir = TempDir::new("drip");
    let text = format!("{} ünïcödé 🚀 end", "slow ".repeat(40));
    let answer = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}}}\n"
    );
    let pieces = answer.len().div_ceil(PIECE) as u64;
    let script = json!({"rules": [{"method": "tools/call", "tool": "slow",
        "do": [{"drip": {"text": answer, "bytes": PIECE, "every_ms": EVERY_MS}}]}]});
    let transcript = dir.join("transcript.jsonl");
    let transcript_arg = transcript.display().to_string();
    let mut host = Host::start(proxy_cmd(
        &dir,
        &script,
        &["--transcript", transcript_arg.as_str()],
    ));
    host.send(&init());
    assert!(host.wait_lines(1, Duration::from_secs(5)));
    host.send(&call(1, "slow"));
    // The drip begins once the server has the call (the host sees the
    // answer only whole, once it ends).
    assert!(
        wait_for_text(
            &dir.join("upstream.log"),
            r#""method":"tools/call""#,
            Duration::from_secs(5)
        ),
        "the call did not reach the server"
    );
    // The other direction, while the answer is half written.
    host.send(&json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"}));
    host.send(&json!({"jsonrpc":"2.0","id":2,"method":"ping"}));
    assert!(
        wait_for_text(
            &dir.join("upstream.log"),
            r#""id":2"#,
            Duration::from_secs(3)
        ),
        "the host's ping did not reach the server during the drip"
    );
    assert!(
        !host.wait_lines(2, Duration::ZERO),
        "the drip should still be going on: the test proves nothing"
    );
    assert!(host.wait_lines(3, Duration::from_secs(5)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let lines: Vec<&[u8]> = seen.stdout.split_inclusive(|&b| b == b'\n').collect();
    assert_eq!(lines.len(), 3, "{}", String::from_utf8_lossy(&seen.stdout));
    assert_eq!(lines[1], answer.as_bytes(), "the exact bytes, once");
    assert_eq!(
        lines[2],
        b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n".as_slice(),
        "the ping, answered once the drip was done"
    );

    let steps: Vec<Value> = std::fs::read_to_string(&transcript)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "step")
        .collect();
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0]["outcome"], "answered");
    assert_eq!(steps[0]["result"]["content"][0]["text"], text.as_str());
    let took = steps[0]["durationMs"].as_f64().unwrap_or(-1.0);
    let drip_ms = ((pieces - 1) * EVERY_MS) as f64;
    assert!(
        took >= drip_ms && took < drip_ms + 3000.0 * slowness(),
        "the step lasted {took} ms; the drip {drip_ms} ms at least"
    );
}

/// SIGHUP (a closing terminal) and SIGQUIT are stop signals like SIGINT
/// and SIGTERM: passed on to the server's process group at once; the proxy
/// then dies of the signal its server died of, leaving nothing behind.
#[test]
fn sighup_and_sigquit_are_passed_on_and_end_both() {
    let _serial = serial();
    for sig in [libc::SIGHUP, libc::SIGQUIT] {
        let dir = TempDir::new(&format!("sig{sig}"));
        let mut cmd = proxy_cmd(&dir, &pidfile_script(&dir, json!({})), &[]);
        // A server killed by SIGQUIT may dump core: never into the repository.
        cmd.current_dir(dir.path());
        let mut host = Host::start(cmd);
        host.send(&init());
        assert!(host.wait_lines(1, Duration::from_secs(5)));
        let peer = read_pid(&dir.join("peer.pid"), Duration::from_secs(5));
        let sent = Instant::now();
        host.signal(sig);
        assert!(
            host.wait_exit(Duration::from_secs(2)),
            "signal {sig}: proxy still running"
        );
        let took = sent.elapsed();
        let seen = host.finish(Duration::from_secs(2));
        assert_eq!(
            seen.exit(),
            format!("signal {sig}"),
            "the server died of it, and so did the proxy: {}",
            seen.stderr
        );
        assert_eq!(seen.messages().len(), 1, "nothing added for the host");
        assert!(
            wait_gone(peer, Duration::from_secs(1)),
            "signal {sig}: orphan"
        );
        assert!(
            took < scaled(Duration::from_millis(500)),
            "signal {sig}: {took:?}"
        );
    }
}

/// A server's last stderr lines (often why it failed) reach the host before
/// the proxy exits, even when the host reads stderr slowly: the proxy waits,
/// bounded, for its copier instead of exiting as soon as the server did.
#[test]
fn the_servers_last_words_reach_the_host_before_the_proxy_exits() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::process::Stdio;
    let dir = TempDir::new("lastwords");
    let script = json!({"on_start": [
        {"stderr": "x".repeat(99), "repeat": 200},
        {"stderr": "last words: cannot open the database"}],
        "exit_code_on_eof": 3});
    // The host closed stdin at once: nothing of the proxy's own competes
    // with the copier for the pipe.
    let mut child = proxy_cmd(&dir, &script, &[])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the proxy");
    let mut stderr = child.stderr.take().expect("stderr");
    // A small pipe, read slowly: the copier is still writing when the
    // server is gone (20 KB at 4 KB per 10 ms).
    // SAFETY: fcntl on a descriptor this test owns.
    unsafe {
        libc::fcntl(stderr.as_raw_fd(), libc::F_SETPIPE_SZ, 4096);
    }
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = stderr.read(&mut buf) {
        seen.extend_from_slice(&buf[..n]);
        // The slow reader's pace, not a wait for an event.
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = child.wait().expect("wait for the proxy");
    let seen = String::from_utf8_lossy(&seen);
    assert_eq!(crate::support::describe_status(status), "code 3");
    assert!(
        seen.contains("[peer] last words: cannot open the database\n"),
        "{} bytes of stderr, ending {:?}",
        seen.len(),
        &seen[seen.len().saturating_sub(300)..]
    );
}

/// A command that exists but cannot run. Like a missing one, the proxy
/// exits 1 at once, adds nothing to stdout (the host reports its usual
/// failure to connect) and says on stderr which command and why: the OS's
/// reason, and where that reason misleads, what it means.
#[test]
fn a_server_that_cannot_run_says_why() {
    let _serial = serial();
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("cannotrun");
    let file = |name: &str, text: &str, mode: u32| {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path.display().to_string()
    };
    let not_executable = file("not-executable", "#!/bin/sh\n", 0o644);
    let bad_interpreter = file("bad-interpreter", "#!/nonexistent/node --flag\n", 0o755);
    let directory = dir.join("home").display().to_string();
    let cases = [
        (
            not_executable.clone(),
            "Permission denied (os error 13)",
            format!("'{not_executable}' is not executable"),
        ),
        (
            directory.clone(),
            "Permission denied (os error 13)",
            format!("'{directory}' is a directory"),
        ),
        (
            bad_interpreter.clone(),
            "No such file or directory (os error 2)",
            format!(
                "'{bad_interpreter}' exists, but its interpreter '/nonexistent/node' (line 1) does not"
            ),
        ),
        (
            "bir-no-such-server".into(),
            "No such file or directory (os error 2)",
            "'bir-no-such-server' is not on PATH".into(),
        ),
    ];
    for (program, reason, meaning) in cases {
        let mut cmd = command(dir.proxy_link(), &dir);
        cmd.args(["--server-name", "broken", "--", &program, "--flag"]);
        let mut host = Host::start(cmd);
        host.send(&init());
        let seen = host.finish(Duration::from_secs(5));
        assert_eq!(seen.exit(), "code 1", "{program}: {}", seen.stderr);
        assert!(
            seen.elapsed < scaled(Duration::from_secs(1)),
            "{program}: {:?}",
            seen.elapsed
        );
        assert!(seen.stdout.is_empty(), "{program}");
        let expected =
            format!("bir-proxy[broken]: cannot start '{program} --flag': {reason}; {meaning}");
        assert!(
            seen.stderr.contains(&expected),
            "{program}: {}",
            seen.stderr
        );
    }
}

/// ENOEXEC: a file that is executable but no program. `execvp` (which
/// the proxy uses, as Node's `spawn` does) hands it to `/bin/sh`, so the
/// server "starts" and the shell fails: the host sees what it would see
/// without bir — the shell's complaint on stderr, its exit status — and if
/// the request was still pending when the shell died, the proxy's answer.
#[test]
fn an_executable_that_is_no_program_fails_as_it_would_without_bir() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("noexec");
    let path = dir.join("garbage");
    std::fs::write(&path, b"\x7fELF but not really\x00\x01\n").expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut cmd = command(dir.proxy_link(), &dir);
    cmd.args(["--server-name", "broken", "--"]).arg(&path);
    let mut host = Host::start(cmd);
    host.send(&init());
    assert!(
        host.wait_exit(Duration::from_secs(2)),
        "the proxy did not exit"
    );
    let seen = host.finish(Duration::from_secs(2));
    assert_eq!(seen.exit(), "code 127", "{}", seen.stderr);
    assert!(
        seen.stderr
            .contains(&format!("[broken] {}", path.display())),
        "{}",
        seen.stderr
    );
    for msg in seen.messages() {
        assert_eq!(
            msg["error"]["message"],
            "MCP server \"broken\" is not available"
        );
    }
}

/// How the host stops a proxy whose stdout it no longer reads.
#[derive(Clone, Copy, Debug)]
enum Stop {
    Sigterm,
    CloseStdin,
}

/// Whether one of `pid`'s threads sleeps in a pipe write.
fn blocked_writing_a_pipe(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("wchan")).is_ok_and(|w| w.contains("pipe_write"))
    })
}

/// The host stopped reading: the proxy's stdout pipe is full and the
/// server is blocked writing a large answer behind it. Stopping the proxy
/// (SIGTERM, or closing its stdin) must still end it within a bound, with
/// the server gone and the run stored (finished, or marked lossy).
fn a_host_that_stopped_reading_still_stops_the_proxy(stop: Stop, bound: Duration) {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::process::Stdio;

    let dir = TempDir::new("full-stdout");
    let script = pidfile_script(
        &dir,
        json!({"rules": [{"method": "tools/call", "tool": "big",
                          "do": [{"big_reply_bytes": 8 * 1024 * 1024}]}]}),
    );
    let mut cmd = proxy_cmd(&dir, &script, &[]);
    let stderr = std::fs::File::create(dir.join("proxy.err")).expect("stderr file");
    let mut proxy = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("start the proxy");
    // Held open and never read.
    let stdout = proxy.stdout.take().expect("stdout");
    let mut stdin = proxy.stdin.take().expect("stdin");
    for msg in [
        init(),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        call(1, "big"),
    ] {
        let mut line = serde_json::to_vec(&msg).expect("json");
        line.push(b'\n');
        stdin.write_all(&line).expect("write to the proxy");
    }
    let peer = read_pid(&dir.join("peer.pid"), Duration::from_secs(30));
    // Wait for the pipe to fill: most of it holds bytes nobody read, and
    // one of the proxy's threads is blocked writing to a pipe.
    let fd = stdout.as_raw_fd();
    // SAFETY: fcntl/ioctl on a pipe descriptor this test owns.
    let size = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    assert!(size > 0, "pipe size");
    wait_until("the pipe to fill", Duration::from_secs(60), || {
        let mut queued: libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int.
        unsafe { libc::ioctl(fd, libc::FIONREAD, &mut queued) };
        queued >= size / 2 && blocked_writing_a_pipe(proxy.id())
    });

    let sent = Instant::now();
    match stop {
        Stop::Sigterm => {
            // SAFETY: kill(2) on the child this test started.
            unsafe { libc::kill(proxy.id() as i32, libc::SIGTERM) };
        }
        Stop::CloseStdin => drop(stdin),
    }
    let status = eventually(Duration::from_secs(20), || proxy.try_wait().ok().flatten());
    let took = sent.elapsed();
    if status.is_none() {
        let _ = proxy.kill();
        let _ = proxy.wait();
        // SAFETY: kill(2) on the server this test's proxy started.
        unsafe { libc::kill(peer, libc::SIGKILL) };
    }
    let err = std::fs::read_to_string(dir.join("proxy.err")).unwrap_or_default();
    assert!(
        status.is_some(),
        "{stop:?}: the proxy still runs after {took:?}\n{err}"
    );
    eprintln!("{stop:?} with the host's stdout full: proxy gone in {took:?}");
    assert!(
        took < scaled(bound),
        "{stop:?}: the proxy took {took:?} (bound {bound:?})\n{err}"
    );
    assert!(
        wait_gone(peer, Duration::from_secs(5)),
        "{stop:?}: the server outlived its proxy"
    );
    drop(stdout);

    let runs = crate::store::listed_runs(&dir);
    let err = std::fs::read_to_string(dir.join("proxy.err")).unwrap_or_default();
    assert_eq!(runs.len(), 1, "{stop:?}: one run stored: {runs:?}\n{err}");
    let id = runs[0]["id"].as_str().expect("id");
    let doc = crate::record::export(&dir, id);
    let finish = &doc["finish"];
    assert!(
        finish.is_object(),
        "{stop:?}: the run was left unfinished: {doc}"
    );
    let steps = doc["steps"].as_array().cloned().unwrap_or_default();
    let answered = steps.iter().any(|s| s["type"] == "tool_response");
    assert!(
        answered || finish["lossy"] == true,
        "{stop:?}: the call is neither recorded nor counted lost: {doc}"
    );
}

/// Claude Code stops a server with a signal: 2 s is the promise; the
/// bound leaves room for a loaded machine and stays far below the 15 s a
/// proxy blocked on its stdout used to take.
#[test]
fn sigterm_ends_the_proxy_while_the_host_does_not_read() {
    let _serial = serial();
    a_host_that_stopped_reading_still_stops_the_proxy(Stop::Sigterm, Duration::from_secs(6));
}

/// Closing stdin keeps its schedule (the server's stdin closed, SIGTERM
/// after 2 s, SIGKILL 2 s later), whatever the host's stdout does.
#[test]
fn end_of_input_ends_the_proxy_while_the_host_does_not_read() {
    let _serial = serial();
    a_host_that_stopped_reading_still_stops_the_proxy(Stop::CloseStdin, Duration::from_secs(10));
}

/// A server that ignores the host's signal is killed once the signal's
/// grace is over: the proxy still leaves within 2 s, leaving no orphan.
#[test]
fn a_server_ignoring_the_hosts_sigterm_is_killed_and_the_proxy_leaves() {
    let _serial = serial();
    let dir = TempDir::new("sigterm-ignored");
    // The second pid file is written once the server ignores signals.
    let ignoring = dir.join("ignoring.pid").display().to_string();
    let script = json!({"rules": [{"method": "initialize", "do": [
        {"ignore_signals": true}, {"pidfile": ignoring}, {"hang": true}]}]});
    let mut host = Host::start(proxy_cmd(&dir, &script, &[]));
    host.send(&init());
    let peer = read_pid(&dir.join("ignoring.pid"), Duration::from_secs(30));
    let sent = Instant::now();
    host.signal(libc::SIGTERM);
    assert!(
        host.wait_exit(Duration::from_secs(20)),
        "the proxy outlived a server that ignores SIGTERM"
    );
    let took = sent.elapsed();
    eprintln!("proxy gone {took:?} after SIGTERM (server ignoring it)");
    assert!(took < scaled(Duration::from_secs(6)), "took {took:?}");
    assert!(
        wait_gone(peer, Duration::from_secs(5)),
        "the server is an orphan"
    );
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "signal 15", "{}", seen.stderr);
}
