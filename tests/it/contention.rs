//! Recording on a saturated CPU: short sessions and sessions ended by
//! signals must still leave finished runs holding every call (or saying,
//! as `lossy` with a count, what they lost). Each test starts its own CPU
//! hog (twice as many busy loops as there are CPUs) and stops it; nothing
//! here depends on the machine being idle, and no duration is asserted.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::record::{call, export, init, proxy};
use crate::store::listed_runs;
use crate::support::serial;
use crate::support::{Host, TempDir};

/// Busy loops that keep every CPU saturated while it lives.
struct CpuHog(Vec<Child>);

impl CpuHog {
    /// Two busy processes per CPU (an agent's `cargo build` beside it).
    fn start() -> CpuHog {
        let cpus = std::thread::available_parallelism().map_or(2, usize::from);
        let hogs = (0..2 * cpus)
            .map(|_| {
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("spawn a busy loop")
            })
            .collect();
        CpuHog(hogs)
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A finished run holding `calls` calls, or lossy with a count that covers
/// the calls it lacks. Returns the run's steps.
fn assert_finished_with(dir: &TempDir, id: &str, calls: u64) -> Vec<Value> {
    let doc = export(dir, id);
    let finish = &doc["finish"];
    assert!(finish.is_object(), "{id} was left unfinished: {doc}");
    let recorded = finish["metrics"]["toolCalls"].as_u64().unwrap_or(0);
    if finish["lossy"] == true {
        let dropped = finish["dropped"].as_u64().unwrap_or(0);
        assert!(dropped > 0, "lossy without a count: {doc}");
        assert!(recorded + dropped >= calls, "calls lost uncounted: {doc}");
    } else {
        assert_eq!(recorded, calls, "calls lost silently: {doc}");
    }
    let steps = doc["steps"].as_array().cloned().unwrap_or_default();
    assert_eq!(steps.len() as u64, 2 * recorded, "{doc}");
    steps
}

/// Short sessions through the proxy while every CPU is
/// busy each end as a finished run with all their calls.
#[test]
fn short_sessions_on_a_saturated_cpu_leave_finished_whole_runs() {
    let _serial = serial();
    let dir = TempDir::new("contention-short");
    let script = json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]});
    const SESSIONS: usize = 6;
    const CALLS: u64 = 3;
    let _hog = CpuHog::start();
    for session in 0..SESSIONS {
        let mut host = Host::start(proxy(&dir, &script));
        host.send(&init());
        host.send(&json!({"jsonrpc":"2.0","id":100,"method":"tools/list"}));
        for i in 1..=CALLS {
            host.send(&call(i, "echo", json!({"session": session, "i": i})));
        }
        assert!(
            host.wait_lines(2 + CALLS as usize, Duration::from_secs(60)),
            "session {session}: answers missing"
        );
        let seen = host.finish(Duration::from_secs(60));
        assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    }
    let runs = listed_runs(&dir);
    assert_eq!(runs.len(), SESSIONS, "one run per session: {runs:?}");
    for run in &runs {
        assert_ne!(run["state"], "open", "{run}");
        let id = run["id"].as_str().expect("id");
        let steps = assert_finished_with(&dir, id, CALLS);
        for step in steps.iter().filter(|s| s["type"] == "tool_response") {
            assert_eq!(step["outcome"], "answered", "{step}");
        }
    }
}

/// Claude Code ends a server with SIGINT and SIGTERM ~100 ms later. With
/// calls still in flight and every CPU busy, the run is still finished:
/// the answered calls as answered, those in flight as `session_ended`.
#[test]
fn sigint_then_sigterm_with_calls_in_flight_leaves_a_finished_run() {
    let _serial = serial();
    let dir = TempDir::new("contention-signals");
    let script = json!({
        "tools": [{"name": "echo", "inputSchema": {"type": "object"}}],
        "rules": [{"method": "tools/call", "tool": "slow",
                   "do": [{"sleep_ms": 30_000}, {"reply_text": "late"}]}]
    });
    let _hog = CpuHog::start();
    for round in 0..3u64 {
        let mut host = Host::start(proxy(&dir, &script));
        host.send(&init());
        host.send(&call(1, "echo", json!({"round": round})));
        host.send(&call(2, "echo", json!({"round": round, "n": 2})));
        assert!(
            host.wait_lines(3, Duration::from_secs(60)),
            "round {round}: answers missing"
        );
        host.send(&call(3, "slow", json!({"round": round})));
        host.send(&call(4, "slow", json!({"round": round, "n": 2})));
        // Not waits for an event: the slow calls are left in flight a
        // moment (whatever of them the proxy read is checked below), then
        // the signals come Claude Code's ~100 ms apart, which is the point.
        std::thread::sleep(Duration::from_millis(300));
        host.signal(libc::SIGINT);
        std::thread::sleep(Duration::from_millis(100));
        host.signal(libc::SIGTERM);
        assert!(
            host.wait_exit(Duration::from_secs(60)),
            "round {round}: the proxy did not exit"
        );
        let seen = host.finish(Duration::from_secs(10));
        assert!(
            !seen.stderr.contains("did not finish"),
            "round {round}: {}",
            seen.stderr
        );
    }
    let runs = listed_runs(&dir);
    assert_eq!(runs.len(), 3, "{runs:?}");
    for run in &runs {
        assert_ne!(run["state"], "open", "{run}");
        let id = run["id"].as_str().expect("id");
        let doc = export(&dir, id);
        assert!(doc["finish"].is_object(), "{id} was left unfinished: {doc}");
        let steps = doc["steps"].as_array().cloned().unwrap_or_default();
        let outcome = |id: u64| {
            steps
                .iter()
                .find(|s| s["type"] == "tool_response" && s["requestId"] == id)
                .map(|s| s["outcome"].clone())
        };
        if doc["finish"]["lossy"] != true {
            assert_eq!(outcome(1), Some(json!("answered")), "{doc}");
            assert_eq!(outcome(2), Some(json!("answered")), "{doc}");
        }
        // A slow call the proxy had read is recorded as cut short by the
        // end of the session, never as answered.
        for slow in [3, 4] {
            if let Some(o) = outcome(slow) {
                assert_eq!(o, json!("session_ended"), "{doc}");
            }
        }
    }
}
