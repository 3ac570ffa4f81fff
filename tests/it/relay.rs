//! The relay itself. With `cat` as the upstream: every byte the host
//! writes comes back unchanged, however the writes are cut. With the
//! testpeer: the protocol's edges: a
//! line that never ends, traffic before the handshake is done, batches
//! empty and huge, floods.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::record::{call, export, init, proxy};
use crate::support::{Host, TempDir, command, peak_rss_kib};
use crate::support::{bytes_read_by, serial, wait_until};

/// A small deterministic PRNG (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One random but valid JSON-RPC-ish line (with its terminator).
fn random_line(rng: &mut Rng, i: u64) -> Vec<u8> {
    let pieces = [
        r#""plain""#,
        r#""esc \"q\" \\ \/ \b\f\n\r\t""#,
        r#""\u00e9\ud83d\ude80 \u2028""#,
        "\"h\u{e9}llo \u{1f680}\"",
        "18446744073709551617",
        "-0.0e-0",
        "1.50",
        "[]",
        "{}",
        "[true,false,null]",
        r#"{"nested":{"id":99,"method":"x"}}"#,
    ];
    let mut body = String::new();
    for k in 0..rng.below(6) {
        body.push_str(&format!(
            r#","k{k}":{}"#,
            pieces[rng.below(pieces.len() as u64) as usize]
        ));
    }
    let line = match rng.below(10) {
        0 => String::new(),
        1 => "   \t".to_string(),
        2 => format!(
            r#"[{{"jsonrpc":"2.0","id":{i},"method":"a"}},{{"jsonrpc":"2.0","method":"n"}}]"#
        ),
        3 => format!(r#"{{"jsonrpc":"2.0","method":"notifications/x"{body}}}"#),
        _ => format!(
            r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"t"{body}}}}}"#
        ),
    };
    let mut bytes = line.into_bytes();
    if rng.below(4) == 0 {
        bytes.push(b'\r');
    }
    bytes.push(b'\n');
    bytes
}

fn through_cat(input: &[u8], rng: &mut Rng, max_chunk: u64) -> Vec<u8> {
    let dir = TempDir::new("cat");
    let mut cmd = command(dir.proxy_link(), &dir);
    cmd.args(["--server-name", "cat", "--", "cat"]);
    let mut host = Host::start(cmd);
    let mut at = 0;
    while at < input.len() {
        let n = (1 + rng.below(max_chunk)) as usize;
        let end = (at + n).min(input.len());
        host.send_raw(&input[at..end]);
        if rng.below(50) == 0 {
            // Not a wait: a pause now and then splits the input in time.
            std::thread::sleep(Duration::from_millis(1));
        }
        at = end;
    }
    let seen = host.finish(Duration::from_secs(30));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    seen.stdout
}

#[test]
fn random_read_boundaries_are_invisible() {
    for seed in [1u64, 7, 42, 2026] {
        let mut rng = Rng(seed);
        let mut input = Vec::new();
        for i in 0..400 {
            input.extend(random_line(&mut rng, i));
        }
        let out = through_cat(&input, &mut rng, 97);
        assert!(
            out == input,
            "seed {seed}: output differs from input ({} vs {} bytes)",
            out.len(),
            input.len()
        );
    }
}

#[test]
fn a_ten_mib_message_round_trips_exactly() {
    let mut rng = Rng(3);
    let payload = "x".repeat(10 * 1024 * 1024);
    let input = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{"blob":"{payload}"}}}}}}"#
    ) + "\n";
    let out = through_cat(input.as_bytes(), &mut rng, 1 << 20);
    assert!(
        out == input.as_bytes(),
        "10 MiB message changed ({} bytes out)",
        out.len()
    );
}

#[test]
fn a_last_line_without_newline_is_relayed_at_end_of_input() {
    let mut rng = Rng(5);
    let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";
    assert_eq!(through_cat(input, &mut rng, 5), input.to_vec());
}

#[test]
fn deep_nesting_and_nul_bytes_pass_through() {
    let mut rng = Rng(11);
    let depth = 200_000;
    let mut input = "[".repeat(depth) + &"]".repeat(depth) + "\n";
    input.push_str("{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"a\":1}}\n");
    let out = through_cat(input.as_bytes(), &mut rng, 1 << 16);
    assert!(out == input.as_bytes(), "deeply nested line changed");
}

// ---------------------------------------------------------------------------
// Edges, with the testpeer as the upstream.

/// `record::proxy`, the testpeer appending every line it reads to
/// `upstream.log`.
fn logged_proxy(dir: &TempDir, script: &Value) -> Command {
    let mut cmd = proxy(dir, script);
    cmd.arg("--log").arg(dir.join("upstream.log"));
    cmd
}

fn upstream_log(dir: &TempDir) -> Vec<u8> {
    std::fs::read(dir.join("upstream.log")).expect("upstream log")
}

/// A session through `cmd`, past the `initialize` answer.
fn initialized(cmd: Command) -> Host {
    let mut host = Host::start(cmd);
    host.send(&init());
    assert!(host.wait_lines(1, Duration::from_secs(10)));
    host
}

/// One line as sent (with its `\n`).
fn line(msg: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(msg).expect("json");
    bytes.push(b'\n');
    bytes
}

/// The start of an answer to request 1 that a dying server never finishes.
const CUT_HEAD: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""#;

/// A server that dies in the middle of a line: the fragment is relayed as
/// it came, and the answer the proxy then gives the call that was waiting
/// starts on a line of its own. Glued to the fragment, it was one broken
/// line the host's parser threw away, and the call never got an answer.
#[test]
fn a_line_cut_off_by_the_servers_exit_does_not_swallow_the_answer_after_it() {
    let dir = TempDir::new("cutoff");
    let script = json!({"rules": [{"method": "tools/call", "do": [
        {"raw": CUT_HEAD},
        {"trickle_bytes": 100_000, "chunk": 5_000, "every_ms": 10},
        {"exit": 3}]}]});
    let mut host = initialized(proxy(&dir, &script));
    let before = host.stdout_so_far().len();
    host.send(&call(1, "dies", json!({})));
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 3", "{}", seen.stderr);

    let out = &seen.stdout[before..];
    let fragment = format!("{CUT_HEAD}{}", "x".repeat(100_000));
    assert!(
        out.starts_with(fragment.as_bytes()),
        "the fragment is relayed as it came"
    );
    let rest = &out[fragment.len()..];
    assert!(
        rest.starts_with(b"\n"),
        "the fragment's line is ended: {}",
        String::from_utf8_lossy(&rest[..rest.len().min(200)])
    );
    assert_eq!(
        rest.iter().filter(|&&b| b == b'\n').count(),
        2,
        "one answer"
    );
    let answer: Value =
        serde_json::from_slice(&rest[1..]).expect("the answer is a line of its own");
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["isError"], true);
    assert_eq!(
        answer["result"]["content"][0]["text"],
        "MCP server \"peer\" is not available"
    );

    let doc = export(&dir, "latest");
    assert_eq!(doc["steps"][1]["outcome"], "upstream_gone", "{doc}");
}

/// A line that arrives slowly and never ends, then the server exits.
/// Past the size limit it is skipped as it streams in, so
/// memory stays flat; the host is served meanwhile; at the end, the call
/// the line would have answered and a request sent meanwhile get the
/// documented answers (docs/proxy.md: a server that exits on its own).
#[test]
fn a_line_that_trickles_in_and_never_ends_is_skipped_in_bounded_memory() {
    let _serial = serial();
    let dir = TempDir::new("trickle");
    let script = json!({"rules": [{"method": "tools/call", "do": [
        {"raw": CUT_HEAD},
        {"trickle_bytes": 32u64 << 20, "chunk": 256u64 << 10, "every_ms": 12},
        {"exit": 3}]}]});
    let mut cmd = proxy(&dir, &script);
    cmd.env("BIR_UPSTREAM_MAX_MESSAGE_BYTES", "1048576")
        .env("BIR_PROXY_STAY_UP", "1");
    let mut host = initialized(cmd);
    let before = bytes_read_by(host.pid());
    host.send(&call(1, "trickle", json!({})));
    // The line streams in once the proxy has read past the limit (it is
    // skipping it now); the trickle lasts over a second beyond that.
    wait_until("the line to stream in", Duration::from_secs(20), || {
        bytes_read_by(host.pid()) > before + (1 << 20)
    });
    // While the line streams in: a line the proxy answers itself, and a
    // request relayed to the (busy) server.
    let asked = Instant::now();
    host.send_raw(b"not json\n");
    assert!(
        host.wait_lines(2, Duration::from_secs(2)),
        "the host is answered while the line streams in"
    );
    let answered_in = asked.elapsed();
    host.send(&json!({"jsonrpc":"2.0","id":2,"method":"ping"}));
    assert!(host.wait_lines(4, Duration::from_secs(20)));
    let peak_kib = peak_rss_kib(host.pid());
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 3", "{}", seen.stderr);

    let msgs = seen.messages();
    assert_eq!(msgs.len(), 4, "{}", String::from_utf8_lossy(&seen.stdout));
    assert_eq!(
        msgs[1]["error"]["code"], -32700,
        "answered before the server exited"
    );
    let by_id = |id: u64| msgs.iter().find(|m| m["id"] == id).expect("answered");
    assert_eq!(by_id(1)["result"]["isError"], true, "{msgs:?}");
    assert_eq!(
        by_id(1)["result"]["content"][0]["text"],
        "MCP server \"peer\" is not available"
    );
    assert_eq!(by_id(2)["error"]["code"], -32000, "{msgs:?}");
    assert!(
        !seen
            .stdout
            .windows(64)
            .any(|w| w.iter().all(|&b| b == b'x')),
        "nothing of the line reached the host"
    );
    assert!(
        seen.stderr.contains("dropped a") && seen.stderr.contains("over the 1048576-byte limit"),
        "{}",
        seen.stderr
    );
    assert!(
        peak_kib < 16 * 1024,
        "proxy peak RSS {peak_kib} KiB while 32 MiB trickled in"
    );
    let doc = export(&dir, "latest");
    assert_eq!(doc["steps"][1]["outcome"], "upstream_gone", "{doc}");
    eprintln!("peak RSS {peak_kib} KiB; the host answered in {answered_in:?} meanwhile");
}

/// A host whose last line has no newline (it wrote and closed its end):
/// the request reaches the server as it came, and its answer the host and
/// the run. (The bytes alone: `a_last_line_without_newline_is_relayed_at_end_of_input`.)
#[test]
fn a_last_host_request_without_newline_is_answered_and_recorded() {
    let dir = TempDir::new("host-tail");
    let mut host = initialized(logged_proxy(&dir, &json!({})));
    let last = serde_json::to_vec(&call(1, "echo", json!({"tail": true}))).expect("json");
    host.send_raw(&last);
    host.close_stdin();
    let seen = host.finish(Duration::from_secs(10));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let msgs = seen.messages();
    assert_eq!(msgs.len(), 2, "{}", String::from_utf8_lossy(&seen.stdout));
    assert_eq!(msgs[1]["result"]["content"][0]["text"], r#"{"tail":true}"#);
    assert!(upstream_log(&dir).ends_with(&last), "relayed as it came");
    let doc = export(&dir, "latest");
    assert_eq!(doc["steps"][1]["outcome"], "answered", "{doc}");
    assert_eq!(doc["steps"][1]["requestId"], 1, "{doc}");
}

/// Traffic before the handshake is done: the server logs
/// and asks the host for roots and a sampling before it has even answered
/// `initialize`; the host sent a `tools/call` without waiting for that
/// answer. Enforcing the order is not the proxy's job: every line passes
/// as it came, in order, both ways, and the call is recorded with its
/// answer.
#[test]
fn traffic_before_the_handshake_completes_is_relayed_in_order_and_recorded() {
    let dir = TempDir::new("early");
    let note = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"early"}}"#;
    let script = json!({"on_start": [
        {"raw": format!("{note}\n")},
        {"request": {"method": "roots/list"}},
        {"request": {"method": "sampling/createMessage",
                     "params": {"messages": [], "maxTokens": 1}}}]});
    let mut host = Host::start(logged_proxy(&dir, &script));
    let mut sent = Vec::new();
    let mut send = |host: &mut Host, bytes: &[u8]| {
        host.send_raw(bytes);
        sent.extend_from_slice(bytes);
    };
    // In one write: the call goes out before `initialize` is answered.
    let mut first = line(&init());
    first.extend(line(&call(1, "echo", json!({"early": true}))));
    send(&mut host, &first);
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    // The host's answers, spelled the way no serializer would: relayed as is.
    send(
        &mut host,
        b"{ \"result\" : {\"roots\":[{\"uri\":\"file:///w\",\"name\":\"w\"}]}, \"id\":\"tp-1\" ,\"jsonrpc\":\"2.0\"}\n",
    );
    assert!(host.wait_lines(3, Duration::from_secs(10)));
    send(
        &mut host,
        b"{\"jsonrpc\":\"2.0\",\"id\":\"tp-2\",\"result\":{\"role\":\"assistant\",\"content\":{\"type\":\"text\",\"text\":\"hi\"},\"model\":\"m\",\"stopReason\":\"endTurn\"}}\n",
    );
    assert!(host.wait_lines(5, Duration::from_secs(10)));
    send(
        &mut host,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
    );
    send(&mut host, &line(&call(2, "echo", json!({"late": true}))));
    assert!(host.wait_lines(6, Duration::from_secs(10)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);

    assert!(
        seen.stdout.starts_with(format!("{note}\n").as_bytes()),
        "server → host as written"
    );
    let msgs = seen.messages();
    assert_eq!(msgs.len(), 6, "{}", String::from_utf8_lossy(&seen.stdout));
    assert_eq!(
        (&msgs[1]["method"], &msgs[1]["id"]),
        (&json!("roots/list"), &json!("tp-1"))
    );
    assert_eq!(
        (&msgs[2]["method"], &msgs[2]["id"]),
        (&json!("sampling/createMessage"), &json!("tp-2"))
    );
    assert_eq!(msgs[3]["id"], 0);
    assert!(
        msgs[3]["result"]["protocolVersion"].is_string(),
        "{}",
        msgs[3]
    );
    assert_eq!(msgs[4]["id"], 1);
    assert_eq!(msgs[4]["result"]["content"][0]["text"], r#"{"early":true}"#);
    assert_eq!(msgs[5]["id"], 2);
    assert!(
        upstream_log(&dir) == sent,
        "host → server: every byte, in order:\n{}",
        String::from_utf8_lossy(&upstream_log(&dir))
    );

    let doc = export(&dir, "latest");
    let steps = doc["steps"].as_array().cloned().unwrap_or_default();
    assert_eq!(steps.len(), 4, "{doc}");
    assert_eq!(steps[0]["requestId"], 1);
    assert_eq!(steps[0]["input"], json!({"early": true}));
    assert_eq!(steps[1]["outcome"], "answered", "{doc}");
    assert_eq!(
        steps[1]["output"]["content"][0]["text"],
        r#"{"early":true}"#
    );
    assert_eq!(steps[3]["requestId"], 2, "{doc}");
}

/// The other side of traffic before the handshake: the server answers the call sent before
/// `initialize` was answered ahead of `initialize` itself. The host gets
/// both in the server's order; the run, opened at that call, still gets the
/// server's snapshot from the `initialize` answer that came after it.
#[test]
fn a_call_answered_before_initialize_still_leaves_the_servers_snapshot() {
    let dir = TempDir::new("early-answer");
    let call_answer =
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"first"}]}}"#;
    let script = json!({"rules": [
        {"method": "initialize", "do": [
            {"raw": format!("{call_answer}\n")},
            {"reply": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                       "serverInfo": {"name": "early-bird", "version": "2"}}}]},
        {"method": "tools/call", "do": []}]});
    let mut host = Host::start(proxy(&dir, &script));
    let mut first = line(&init());
    first.extend(line(&call(1, "echo", json!({}))));
    host.send_raw(&first);
    assert!(host.wait_lines(2, Duration::from_secs(10)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert!(
        seen.stdout
            .starts_with(format!("{call_answer}\n").as_bytes())
    );
    assert_eq!(seen.messages()[1]["id"], 0);

    let doc = export(&dir, "latest");
    assert_eq!(doc["steps"][1]["outcome"], "answered", "{doc}");
    assert_eq!(
        doc["steps"][1]["output"]["content"][0]["text"], "first",
        "{doc}"
    );
    let servers = doc["servers"].as_array().cloned().unwrap_or_default();
    assert_eq!(servers.len(), 1, "{doc}");
    assert_eq!(servers[0]["serverInfo"]["name"], "early-bird", "{doc}");
    assert_eq!(servers[0]["protocolVersion"], "2025-11-25", "{doc}");
}

/// An empty batch from the host. JSON-RPC has the server
/// answer `[]` with one -32600 error. The proxy relays batches as they are
/// and answers by itself only lines that are not JSON (docs/proxy.md, "What the
/// proxy does by itself"), so `[]` reaches the server unchanged and its
/// error comes back unchanged; the session goes on.
#[test]
fn an_empty_batch_is_relayed_and_the_servers_error_comes_back() {
    let dir = TempDir::new("emptybatch");
    let mut host = initialized(logged_proxy(&dir, &json!({})));
    let before = host.stdout_so_far().len();
    host.send_raw(b"[]\n");
    host.send(&json!({"jsonrpc":"2.0","id":2,"method":"ping"}));
    assert!(host.wait_lines(3, Duration::from_secs(10)));
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert_eq!(
        String::from_utf8_lossy(&seen.stdout[before..]),
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"Invalid Request\"}}\n\
         {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n"
    );
    let log = upstream_log(&dir);
    assert!(log.windows(4).any(|w| w == b"\n[]\n"), "relayed as it came");
}

/// A batch of 10 000 `tools/call`s while another call is
/// still running: relayed whole, answered whole. The in-flight table holds
/// 10 000 requests, so the oldest tenth (the running call first) is
/// forgotten: their answers are still relayed, and the run counts them as
/// lost. Of the rest, the run keeps what the observation queue holds (250)
/// and counts the others: every call is in the run or counted, and each
/// kept answer is paired with its own request.
#[test]
fn a_batch_of_ten_thousand_calls_is_relayed_whole_and_recorded_within_bounds() {
    let dir = TempDir::new("batch10k");
    let script = json!({"rules": [{"method": "tools/call", "tool": "slow",
        "do": [{"sleep_ms": 500}, {"reply_text": "slow"}]}]});
    let mut host = initialized(logged_proxy(&dir, &script));
    host.send(&json!({"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"slow","arguments":{}}}));
    let n = 10_000u64;
    let elements: Vec<String> = (1..=n)
        .map(|i| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"echo","arguments":{{"i":{i}}}}}}}"#
            )
        })
        .collect();
    let batch = format!("[{}]\n", elements.join(","));
    host.send_raw(batch.as_bytes());
    assert!(host.wait_lines(3, Duration::from_secs(20)));
    host.send(&call(n + 1, "echo", json!({"i": n + 1})));
    assert!(host.wait_lines(4, Duration::from_secs(10)));
    let peak_kib = peak_rss_kib(host.pid());
    // The queue drops the oldest: the newest call reaches the run while the
    // proxy runs, however long the recorder takes to get there (the end's
    // bounded wait may count a slow recorder's backlog as lost instead).
    let recorded_last = || {
        let (code, out, _) = crate::record::bir_cmd(&dir, &["runs", "export", "latest"]);
        code == 0
            && serde_json::from_str::<serde_json::Value>(&out).is_ok_and(|doc| {
                doc["steps"]
                    .as_array()
                    .is_some_and(|steps| steps.iter().any(|s| s["requestId"] == n + 1))
            })
    };
    wait_until(
        "the call after the batch to be recorded while the proxy runs",
        Duration::from_secs(60),
        recorded_last,
    );
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);

    let msgs = seen.messages();
    assert_eq!(msgs.len(), 4);
    assert_eq!(
        msgs[1]["id"], "slow",
        "a forgotten call's answer is relayed"
    );
    let answers = msgs[2].as_array().expect("the batch's answer");
    assert_eq!(answers.len(), n as usize);
    for (i, answer) in (1..=n).zip(answers) {
        assert_eq!(answer["id"], i);
        assert_eq!(
            answer["result"]["content"][0]["text"],
            format!(r#"{{"i":{i}}}"#)
        );
    }
    assert_eq!(msgs[3]["id"], n + 1);
    let log = upstream_log(&dir);
    assert!(
        log.windows(batch.len()).any(|w| w == batch.as_bytes()),
        "the batch is relayed as one unchanged line"
    );
    assert!(
        seen.stderr
            .contains("1000 recorded tools/call request(s) forgotten"),
        "{}",
        seen.stderr
    );

    let doc = export(&dir, "latest");
    let finish = &doc["finish"];
    let kept = finish["metrics"]["toolCalls"].as_u64().unwrap_or(0);
    let dropped = finish["dropped"].as_u64().unwrap_or(0);
    // `slow`, the batch and the last call; the `initialize` exchange is an
    // observation too, lost if the recorder had not taken it yet.
    let calls = n + 2;
    assert!(
        kept + dropped == calls || kept + dropped == calls + 1,
        "every call is in the run or counted as lost: kept {kept}, {finish}"
    );
    assert!(dropped >= 1000, "{finish}");
    assert_eq!(finish["lossy"], true, "{finish}");
    let steps = doc["steps"].as_array().cloned().unwrap_or_default();
    assert_eq!(steps.len() as u64, 2 * kept, "{finish}");
    for step in steps.iter().filter(|s| s["type"] == "tool_response") {
        let id = step["requestId"].as_u64().expect("numeric id");
        assert_eq!(
            step["output"]["content"][0]["text"],
            format!(r#"{{"i":{id}}}"#),
            "paired with its own request"
        );
    }
    assert!(
        steps.iter().any(|s| s["requestId"] == n + 1),
        "the call after the batch is recorded"
    );
    assert!(peak_kib < 48 * 1024, "proxy peak RSS {peak_kib} KiB");
    eprintln!("batch of {n}: kept {kept}, dropped {dropped}, peak RSS {peak_kib} KiB");
}

/// A flood of 100 000 progress notifications while a call runs:
/// every one is relayed, the answer arrives after them, memory stays
/// flat, and the run records the call (notifications cost the recorder
/// nothing: it is not lossy).
#[test]
fn a_flood_of_notifications_does_not_hold_up_the_call_or_memory() {
    let dir = TempDir::new("flood");
    let flood = 100_000usize;
    let script = json!({"rules": [{"method": "tools/call", "tool": "busy", "do": [
        {"notify": {"method": "notifications/progress",
                    "params": {"progressToken": "p", "progress": 1}}, "repeat": flood},
        {"echo_arguments": true}]}]});
    let mut host = initialized(proxy(&dir, &script));
    let started = Instant::now();
    host.send(&call(1, "busy", json!({"n": 1})));
    assert!(host.wait_lines(2 + flood, Duration::from_secs(20)));
    let took = started.elapsed();
    let peak_kib = peak_rss_kib(host.pid());
    let seen = host.finish(Duration::from_secs(5));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);

    let lines: Vec<&[u8]> = seen.stdout.split(|&b| b == b'\n').collect();
    assert_eq!(lines.len(), 2 + flood + 1, "lines and the empty tail");
    let progress = lines
        .iter()
        .filter(|l| l.windows(22).any(|w| w == b"notifications/progress"))
        .count();
    assert_eq!(progress, flood);
    let answer: Value = serde_json::from_slice(lines[1 + flood]).expect("answer");
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["content"][0]["text"], r#"{"n":1}"#);
    assert!(peak_kib < 32 * 1024, "proxy peak RSS {peak_kib} KiB");

    let doc = export(&dir, "latest");
    assert_eq!(doc["steps"][1]["outcome"], "answered", "{doc}");
    assert_eq!(doc["finish"]["lossy"], false, "{doc}");
    eprintln!("{flood} notifications and the answer in {took:?}; peak RSS {peak_kib} KiB");
}

/// Many large calls the server never answers: the
/// proxy relays every byte of them, but keeps for the recorder only what
/// its in-flight budget allows, so its peak memory stays within the
/// message limit plus 16 MB however many pile up; the calls are still
/// recorded, their arguments as a truncation marker with their size.
#[test]
fn unanswered_large_calls_are_recorded_clipped_in_bounded_memory() {
    const CALLS: u64 = 80;
    const LIMIT: u64 = 8 << 20;
    let dir = TempDir::new("unanswered");
    let script = json!({"rules": [{"method": "tools/call", "do": []}]});
    let mut cmd = proxy(&dir, &script);
    cmd.env("BIR_UPSTREAM_MAX_MESSAGE_BYTES", LIMIT.to_string());
    let mut host = initialized(cmd);
    let big = "z".repeat(1 << 20);
    for id in 1..=CALLS {
        host.send(&call(id, "store", json!({"blob": big, "n": id})));
    }
    // The server answers the ping only once it has read every call before
    // it: all of them went through the proxy.
    host.send(&json!({"jsonrpc":"2.0","id":"last","method":"ping"}));
    assert!(
        host.wait_lines(2, Duration::from_secs(120)),
        "{}",
        host.stderr_so_far()
    );
    let peak_kib = peak_rss_kib(host.pid());
    host.close_stdin();
    let seen = host.finish(Duration::from_secs(30));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let bound_kib = (LIMIT >> 10) + 16 * 1000;
    assert!(
        peak_kib <= bound_kib,
        "proxy peak RSS {peak_kib} KiB with {CALLS} x 1 MiB unanswered (bound {bound_kib} KiB)"
    );

    let doc = export(&dir, "latest");
    let steps = doc["steps"].as_array().expect("steps");
    assert_eq!(steps.len() as u64, 2 * CALLS, "every call is recorded");
    for pair in steps.chunks(2) {
        let (selected, response) = (&pair[0], &pair[1]);
        assert_eq!(selected["toolName"], "store", "{selected}");
        assert_eq!(response["outcome"], "session_ended", "{response}");
        let input = &selected["input"];
        assert_eq!(input["truncated"], true, "{selected}");
        assert!(
            input["originalBytes"].as_u64().is_some_and(|n| n > 1 << 20),
            "{input}"
        );
    }
    eprintln!("peak RSS {peak_kib} KiB with {CALLS} x 1 MiB unanswered");
}

/// A host that sends its last request, closes its stdin and then reads the
/// answer slowly (a shell pipeline, a loaded machine) gets every byte, as it
/// would from the server's own pipe: the proxy's end-of-input schedule and
/// its wait for the last write to the host start over while the host keeps
/// taking bytes.
#[test]
fn a_slow_reader_after_end_of_input_gets_every_byte() {
    use std::io::{Read, Write};
    use std::process::Stdio;

    let dir = TempDir::new("slow-reader");
    let mut cmd = command(dir.proxy_link(), &dir);
    cmd.args(["--server-name", "cat", "--", "cat"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start bir-proxy");
    let payload = "y".repeat(768 * 1024);
    let input = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{"blob":"{payload}"}}}}}}"#
    ) + "\n";
    let mut stdin = child.stdin.take().expect("stdin piped");
    let writer = std::thread::spawn({
        let input = input.clone();
        move || {
            let _ = stdin.write_all(input.as_bytes());
        }
    });
    let mut stdout = child.stdout.take().expect("stdout piped");
    let mut out = Vec::new();
    let mut piece = [0u8; 4096];
    // Slower than every grace the proxy keeps (500 ms for the server's
    // stdout, 2 s for its stop schedule, 1 s without a byte taken): 192
    // pieces, 25 ms apart, take more than 4.8 s; each piece is progress.
    loop {
        match stdout.read(&mut piece) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&piece[..n]),
            Err(err) => panic!("reading the proxy's stdout: {err}"),
        }
        // The slow reader's pace, not a wait for an event.
        std::thread::sleep(Duration::from_millis(25));
    }
    let _ = writer.join();
    let status = child.wait().expect("wait for bir-proxy");
    let mut stderr = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut stderr);
    }
    assert!(
        out == input.as_bytes(),
        "the slow reader got {} of {} bytes; stderr: {stderr}",
        out.len(),
        input.len()
    );
    assert_eq!(status.code(), Some(0), "{stderr}");
}
