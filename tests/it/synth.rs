//! A synthetic run store, written directly as journals (bir's own framing,
//! `bir::frame_journal_record`), fast enough to make 10,000 runs of 100
//! steps each (1 M steps) in seconds. The `bir runs` benchmark
//! (`benches/runs.rs`) and the listing tests share it.
//!
//! Deterministic: run `i` of a store is the same whatever the size of the
//! store, so tests can say what a filter must find. Run `i`:
//! * starts `i` minutes before [`BASE`] (run 0 is the newest);
//! * is `bound` when `i % 10 == 3`, else `standalone`;
//! * wraps server `SERVERS[i % 5]`, recorded in `CWDS[i % 4]`;
//! * calls, in turn, the tools `TOOLS[(i + k) % 8]` for `k` in `0..calls`;
//! * has one failed call (its last) when `i % 7 == 0`;
//! * is finished, except when `i % 100 == 99` (left unfinished: with no
//!   writer it lists as `interrupted`).

use std::io::Write;
use std::path::Path;

pub const SERVERS: [&str; 5] = ["github", "fs", "everything", "db", "search"];
pub const TOOLS: [&str; 8] = [
    "search",
    "read",
    "write",
    "list",
    "create_issue",
    "query",
    "echo",
    "fetch",
];
pub const CWDS: [&str; 4] = [
    "/home/dev/proj-a",
    "/home/dev/proj-a/sub",
    "/home/dev/proj-b",
    "/srv/work",
];
/// Unix seconds of run 0's start (2026-12-01T00:00:00Z).
pub const BASE: i64 = 1_796_083_200;

/// The id of run `i` (a valid `run_<uuid>` shape, unique per `i`).
pub fn run_id(i: usize) -> String {
    format!("run_{:08x}-0000-4000-8000-{:012x}", i, i * 7919)
}

/// Whether run `i` has a failed call (to which tool: [`failed_tool`]).
pub fn has_failure(i: usize) -> bool {
    i.is_multiple_of(7)
}

/// The tool of run `i`'s failed call (its last of `calls`).
pub fn failed_tool(i: usize, calls: usize) -> &'static str {
    TOOLS[(i + calls - 1) % TOOLS.len()]
}

/// Writes runs `0..runs`, `calls` calls each (two step records a call),
/// into `dir` (created).
pub fn write_store(dir: &Path, runs: usize, calls: usize) {
    std::fs::create_dir_all(dir).expect("mkdir store");
    for i in 0..runs {
        write_run(dir, i, calls);
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of Unix seconds `t` plus `ms`.
pub fn rfc3339(t: i64, ms: u64) -> String {
    let (days, rem) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms % 1000
    )
}

/// The start time of run `i`, as Unix seconds.
pub fn started(i: usize) -> i64 {
    BASE - 60 * i as i64
}

/// Writes run `i` as its journal in `dir`.
pub fn write_run(dir: &Path, i: usize, calls: usize) {
    let id = run_id(i);
    let server = SERVERS[i % SERVERS.len()];
    let bound = i % 10 == 3;
    let tier = if bound { "bound" } else { "standalone" };
    let t0 = started(i);
    let mut out: Vec<u8> = Vec::with_capacity(calls * 900 + 2048);
    let mut seq = 0u64;
    let put = |out: &mut Vec<u8>, json: String| {
        out.extend_from_slice(&bir::frame_journal_record(json.as_bytes()));
    };
    seq += 1;
    let input = if bound {
        format!(r#","input":"Find the open issues about the parser (run {i})""#)
    } else {
        String::new()
    };
    put(
        &mut out,
        format!(
            r#"{{"seq":{seq},"event":{{"kind":"run_started","data":{{"id":"{id}","startedAt":"{}"{input},"metadata":{{"recorder":"bir","tier":"{tier}","host":{{"app":"claude-code","version":"2.1.332"}},"wrappedServers":["{server}"],"protocolVersion":"2025-11-25","cwd":"{}","birVersion":"0.1.0","lossy":false}}}}}}}}"#,
            rfc3339(t0, 0),
            CWDS[i % CWDS.len()]
        ),
    );
    if bound {
        seq += 1;
        put(
            &mut out,
            format!(
                r#"{{"seq":{seq},"event":{{"kind":"turn","data":{{"turn":1,"at":"{}","prompt":"Find the open issues about the parser (run {i})"}}}}}}"#,
                rfc3339(t0, 0)
            ),
        );
    }
    let mut errors = 0;
    for k in 0..calls {
        let tool = TOOLS[(i + k) % TOOLS.len()];
        let failed = has_failure(i) && k == calls - 1;
        errors += usize::from(failed);
        let at = rfc3339(t0 + (k as i64) / 2, (k as u64 * 500) % 1000);
        let index = 2 * k as u64 + 1;
        seq += 1;
        put(
            &mut out,
            format!(
                r#"{{"seq":{seq},"event":{{"kind":"step","data":{{"id":"step_{i:08x}-{k:04x}-4000-8000-000000000001","stepIndex":{index},"type":"tool_selected","qualifiedName":"mcp__{server}__{tool}","serverName":"{server}","toolName":"{tool}","startedAt":"{at}","input":{{"query":"is:open label:parser page {k}","limit":50,"repo":"example/project"}},"requestId":{k},"argsDigest":"{:064x}"}}}}}}"#,
                i * 100_000 + k
            ),
        );
        seq += 1;
        let text = if failed {
            "error: upstream refused the request (rate limited); try again later".to_owned()
        } else {
            format!(
                "Found 3 results for page {k}: #101 parser panics on empty input, #102 parser drops comments, #103 parser slow on long lines. (more lines of result text to make this a realistic size)"
            )
        };
        put(
            &mut out,
            format!(
                r#"{{"seq":{seq},"event":{{"kind":"step","data":{{"id":"step_{i:08x}-{k:04x}-4000-8000-000000000002","stepIndex":{},"type":"tool_response","qualifiedName":"mcp__{server}__{tool}","serverName":"{server}","toolName":"{tool}","startedAt":"{at}","output":{{"content":[{{"type":"text","text":"{text}"}}],"isError":{failed}}},"isError":{failed},"durationMs":{}.25,"outcome":"answered","requestId":{k}}}}}}}"#,
                index + 1,
                3 + k % 40
            ),
        );
    }
    if i % 100 != 99 {
        seq += 1;
        put(
            &mut out,
            format!(
                r#"{{"seq":{seq},"event":{{"kind":"run_finished","data":{{"finishedAt":"{}","metrics":{{"toolCalls":{calls},"errors":{errors},"totalToolMs":1234.5}},"lossy":false,"dropped":0}}}}}}"#,
                rfc3339(t0 + calls as i64, 0)
            ),
        );
    }
    let path = dir.join(format!("{id}.journal"));
    let mut f = std::fs::File::create(&path).expect("create journal");
    f.write_all(&out).expect("write journal");
}
