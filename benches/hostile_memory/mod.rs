//! Peak memory of the proxy under input meant to inflate it: a 200 MB line with no newline from the host, and 80 requests of
//! 1 MiB that the server reads but never answers. The target is a peak RSS
//! (`VmHWM`) of at most the message limit plus 16 MB whatever the input.
//!
//! The server is `cat > /dev/null`: it reads everything and answers
//! nothing, so neither case finishes a call; the session then ends (host
//! EOF) and the proxy records the calls it saw as `session_ended`.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The proxy's default message limit (`BIR_UPSTREAM_MAX_MESSAGE_BYTES`).
const DEFAULT_LIMIT: u64 = 128 << 20;
/// What the proxy may hold on top of the limit.
const ALLOWANCE_KIB: u64 = 16 * 1000;

/// One case: what the host writes, in pieces.
struct Case {
    name: &'static str,
    pieces: Vec<Vec<u8>>,
}

fn cases() -> Vec<Case> {
    let chunk = vec![b'x'; 1 << 20];
    let no_newline = Case {
        name: "a 200 MB line without a newline",
        pieces: (0..200).map(|_| chunk.clone()).collect(),
    };
    let filler = "z".repeat(1 << 20);
    let unanswered = Case {
        name: "80 x 1 MiB tools/call, never answered",
        pieces: (1..=80)
            .map(|id| {
                let mut line = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"store","arguments":{{"blob":"{filler}"}}}}}}"#
                )
                .into_bytes();
                line.push(b'\n');
                line
            })
            .collect(),
    };
    vec![no_newline, unanswered]
}

fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim_start_matches(':').split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Runs one case through `bir proxy -- sh -c 'exec cat >/dev/null'`;
/// returns the proxy's peak RSS in KiB.
fn measure(bir: &Path, home: &Path, case: &Case) -> io::Result<u64> {
    let mut child = Command::new(bir)
        .args(["proxy", "--server-name", "sink", "--", "sh", "-c"])
        .arg(OsStr::new("exec cat >/dev/null"))
        .env_remove("RUST_LOG")
        .env("BIR_HOME", home)
        .env("BIR_SERVICE_URL", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = child.id();
    {
        let Some(stdin) = child.stdin.as_mut() else {
            return Err(io::Error::other("no stdin"));
        };
        for piece in &case.pieces {
            stdin.write_all(piece)?;
        }
        stdin.flush()?;
    }
    // Then the session ends (where the unanswered calls are recorded):
    // VmHWM only grows, so its last reading before the proxy exits is the
    // peak of the whole session.
    drop(child.stdin.take());
    let mut peak = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait()?.is_none() {
        if let Some(kib) = status_kib(pid, "VmHWM") {
            peak = peak.max(kib);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.wait();
    Ok(peak)
}

/// The markdown section: one row per case.
pub fn section(bir: &Path, tmp: &Path) -> String {
    let mut out = String::new();
    let bound = (DEFAULT_LIMIT >> 10) + ALLOWANCE_KIB;
    let _ = writeln!(
        out,
        "## Memory under hostile input\n\nThe proxy's peak RSS (VmHWM, last sampled just before the proxy exits at the end of the session) at the default 128 MiB message limit; server `cat > /dev/null` (reads, never answers). Target: <= limit + 16 MB = {:.1} MiB.\n",
        bound as f64 / 1024.0
    );
    let _ = writeln!(out, "| case | peak RSS (MiB) | verdict |\n|---|---|---|");
    for (i, case) in cases().iter().enumerate() {
        let home = tmp.join(format!("home-hostile-{i}"));
        let row = match measure(bir, &home, case) {
            Ok(kib) => format!(
                "| {} | {:.1} | {} |",
                case.name,
                kib as f64 / 1024.0,
                if kib <= bound { "PASS" } else { "FAIL" }
            ),
            Err(e) => format!("| {} | error: {e} | FAIL |", case.name),
        };
        let _ = writeln!(out, "{row}");
    }
    out
}
