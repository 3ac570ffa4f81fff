//! No secret reaches a sink: secrets pushed through arguments, results,
//! URLs, header maps, error messages and the server's environment must not
//! appear in the run store, in the recording service's request bodies, in
//! `bir runs show/export`, or in the proxy's logs — while the relayed bytes stay exactly what the peers sent.
//!
//! (`--transcript` is excluded on purpose: it is a raw capture, like a
//! packet trace, written only when asked for.)

use std::time::Duration;

use serde_json::{Value, json};

use crate::remote::{FakeService, creds_for, write_creds};
use crate::support::{Host, TempDir, bir, command};

/// Fake secrets of realistic shapes (none is real).
const GITHUB_PAT: &str = "ghp_Zq8V1mK3xR7bT2nY6pL0sD4fH9jW5cA1eU3o";
const AWS_KEY: &str = "AKIAQ7Z3XK5N2B4V6D7F";
const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJiaXItdGVzdCIsImlhdCI6MTcwMDAwMDAwMH0.c2lnbmF0dXJlLW5vdC1yZWFsLWF0LWFsbA";
const PASSWORD: &str = "correct-horse-battery-staple-77";
const URL_PASS: &str = "s3cr3tPassw0rdInUrl";
const QUERY_TOKEN: &str = "qtok_9f8e7d6c5b4a3210";
const ANTHROPIC: &str = "sk-ant-api03-Xh3kL9mN2pQ5rS8tU1vW4yZ7aB0cD3eF6gH9iJ2kL5mN8oP1qR4sT7uV0wX3yZ6aB9cD2eF5gH8iJ1kL4mN7oP0qR3sT6uV9wX2yZ5aB8cD1eF4AA";
/// An opaque value with no known shape: only known-value scrubbing finds it.
const OPAQUE_ENV: &str = "Zx9Qw7Er5Ty3Ui1Op2As4Df6Gh8Jk0Lm";
/// Opaque values that only their key names (or the flag before them) mark
/// as secret, sent at the start of payloads too large to be stored whole.
const OPAQUE_AUTH: &str = "Qm4Rt8Yp2Wn6Vb0Xc3Zl7Kj9Hg5Fd1Sa";
const OPAQUE_FLAG: &str = "Lp0Ok9Ij8Uh7Yg6Tf5Rd4Es3Wa2Qz1Xc";
const OPAQUE_HEADER: &str = "Mn3Bv5Cx7Zl9Kj2Hg4Fd6Sa8Qw1Er3Ty";

fn secrets() -> Vec<String> {
    let b64 = |s: &str| {
        // standard base64, as testpeer's reply_env writes it
        let out = std::process::Command::new("base64")
            .arg("-w0")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().map(|mut i| i.write_all(s.as_bytes()));
                c.wait_with_output()
            })
            .expect("base64");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    vec![
        GITHUB_PAT.into(),
        AWS_KEY.into(),
        JWT.into(),
        PASSWORD.into(),
        URL_PASS.into(),
        QUERY_TOKEN.into(),
        ANTHROPIC.into(),
        OPAQUE_ENV.into(),
        b64(OPAQUE_ENV),
        OPAQUE_AUTH.into(),
        OPAQUE_FLAG.into(),
        OPAQUE_HEADER.into(),
    ]
}

#[test]
fn no_secret_reaches_the_store_the_cli_or_the_logs() {
    let dir = TempDir::new("secrets");
    let script = json!({"rules": [
        {"method": "tools/call", "tool": "leak_env", "do": [{"reply_env": "SERVICE_API_TOKEN"}]},
        {"method": "tools/call", "tool": "leak_result", "do": [{"reply": {"content": [
            {"type": "text", "text": format!("here is your key: {GITHUB_PAT} and aws {AWS_KEY}")},
            {"type": "text", "text": format!("{{\"access_token\": \"{JWT}\", \"token_type\": \"bearer\"}}")}],
            "structuredContent": {"password": PASSWORD, "next": format!("https://api.example.com/v1/items?token={QUERY_TOKEN}&page=2")}}}]},
        {"method": "tools/call", "tool": "fail", "do": [{"reply_error": {"code": -32000,
            "message": format!("auth failed for key {ANTHROPIC}")}}]},
        // Far over the payload cap: stored as a preview of its start, which
        // is where the secrets are.
        {"method": "tools/call", "tool": "big_result", "do": [{"raw": format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{{\"_meta\":{{\"auth\":{{\"value\":\"{OPAQUE_AUTH}\"}}}},\"headers\":{{\"X-Api-Key\":\"{OPAQUE_HEADER}\"}},\"argv\":[\"deploy\",\"--token\",\"{OPAQUE_FLAG}\"],\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}}}\n",
            "padding ".repeat(50_000))}]}
    ]});
    let script = dir.script("peer.json", &script);
    let service = FakeService::ok();
    write_creds(&dir, &creds_for(&service.base));
    let mut cmd = command(dir.proxy_link(), &dir);
    cmd.env("BIR_SERVICE_URL", &service.base)
        .env("SERVICE_API_TOKEN", OPAQUE_ENV)
        .env("RUST_LOG", "bir=debug")
        .args(["--server-name", "vault", "--"])
        .arg(bir())
        .args(["testpeer"])
        .arg(&script);
    let mut host = Host::start(cmd);
    let calls = vec![
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}),
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deploy","arguments":{
            "token": GITHUB_PAT,
            "db": format!("postgres://admin:{URL_PASS}@db.internal:5432/app"),
            "headers": {"Authorization": format!("Bearer {JWT}"), "X-Api-Key": AWS_KEY},
            "args": ["--api-key", ANTHROPIC],
            "max_tokens": 1024, "author": "kept-author-value"}}}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"leak_env","arguments":{}}}),
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"leak_result","arguments":{}}}),
        json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fail","arguments":{}}}),
        json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"upload","arguments":{
            "auth": {"value": OPAQUE_AUTH},
            "argv": ["--token", OPAQUE_FLAG],
            "headers": {"X-Api-Key": OPAQUE_HEADER},
            "body": "padding ".repeat(50_000)}}}),
        json!({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"big_result","arguments":{}}}),
    ];
    for c in &calls {
        host.send(c);
    }
    assert!(host.wait_lines(calls.len(), Duration::from_secs(10)));
    let seen = host.finish(Duration::from_secs(5));

    // The relay is untouched: the host received the secrets the server sent.
    let relayed = String::from_utf8_lossy(&seen.stdout);
    assert!(
        relayed.contains(GITHUB_PAT) && relayed.contains(OPAQUE_ENV),
        "redaction must never touch relayed bytes"
    );

    let mut sinks: Vec<(String, String)> = Vec::new();
    for entry in std::fs::read_dir(dir.join("home/.baseinstrunner/runs")).expect("runs") {
        let path = entry.expect("entry").path();
        sinks.push((
            path.display().to_string(),
            String::from_utf8_lossy(&std::fs::read(&path).expect("read")).into_owned(),
        ));
    }
    assert!(!sinks.is_empty(), "a run was stored");
    for args in [
        vec!["runs", "show", "latest", "--full"],
        vec!["runs", "export", "latest"],
        vec!["runs", "export", "latest", "--format", "jsonl"],
    ] {
        let out = command(bir(), &dir).args(&args).output().expect("bir runs");
        assert!(out.status.success());
        sinks.push((
            args.join(" "),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
    }
    sinks.push(("proxy stderr".into(), seen.stderr.clone()));
    let bodies: String = service
        .requests()
        .iter()
        .map(|r| format!("{} {}\n{}\n", r.method, r.path, r.body))
        .collect();
    assert!(
        bodies.contains("/recordings/runs"),
        "the run reached the fake service"
    );
    sinks.push(("recording service bodies".into(), bodies));

    let mut leaks = Vec::new();
    for (sink, text) in &sinks {
        for secret in secrets() {
            if text.contains(&secret) {
                leaks.push(format!("{secret} in {sink}"));
            }
        }
    }
    assert!(leaks.is_empty(), "secrets leaked:\n{}", leaks.join("\n"));

    // What must survive: ordinary values next to the secrets.
    let export = &sinks
        .iter()
        .find(|(s, _)| s == "runs export latest")
        .expect("export")
        .1;
    let doc: Value = serde_json::from_str(export).expect("json");
    assert_eq!(doc["steps"][0]["input"]["max_tokens"], 1024);
    assert_eq!(doc["steps"][0]["input"]["author"], "kept-author-value");
    assert!(export.contains("db.internal"), "the host of a URL is kept");
}

/// What a shell tool's steps carry (Claude Code's Bash steps look the same
/// to a shell MCP server): passwords given as short flags, an AWS key pair
/// under camelCase keys and glued into one string, a password glued to a
/// token, a JSON-RPC error quoting a command. None of it reaches the run
/// store, `bir runs`, the recording service or OTLP with content on; the
/// harmless cookies, `Set-Cookie`'s attributes and the host's session id
/// (inside a transcript path) stay readable in all of them.
#[test]
fn shell_steps_glued_secrets_and_cookies_through_every_sink() {
    const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    const SSH_PW: &str = "Sh3llPw9xQ";
    const DOCKER_PW: &str = "D0ckerPw77xQ";
    const REDIS_PW: &str = "R3disPw55xQ";
    const MONGO_PW: &str = "M0ngoPw33xQ";
    const GLUED_PW: &str = "Hunter2Pw9xQ";
    const COOKIE_SID: &str = "nTLQMKtCcYteNZke2nSA1XJTqJClPVEC";
    let session = "0f6c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f";
    let transcript = format!("/home/u/.claude/projects/-p/{session}.jsonl");
    let dir = TempDir::new("secrets-shell");
    let script = json!({"rules": [
        {"method": "tools/call", "tool": "run", "do": [{"reply": {"content": [{"type": "text", "text": format!(
            "{{\"accessKeyId\": \"{AWS_KEY}\", \"secretAccessKey\": \"{AWS_SECRET}\"}}\nexport CREDS={AWS_KEY}:{AWS_SECRET}\nDB_PASSWORD={GLUED_PW}{GITHUB_PAT}\ntranscript: {transcript}")}],
            "structuredContent": {"accessKeyId": AWS_KEY, "secretAccessKey": AWS_SECRET, "region": "eu-west-1"}}}]},
        {"method": "tools/call", "tool": "fail", "do": [{"reply_error": {"code": -32000,
            "message": format!("exit 1: sshpass -p {SSH_PW} ssh deploy@web-1")}}]}
    ]});
    let script = dir.script("peer.json", &script);
    let service = FakeService::ok();
    let otlp = crate::otlp::Stub::ok();
    write_creds(&dir, &creds_for(&service.base));
    let mut cmd = command(dir.proxy_link(), &dir);
    cmd.env("BIR_SERVICE_URL", &service.base)
        .env("BIR_OTLP_ENDPOINT", &otlp.base)
        .env("BIR_OTLP_PROTOCOL", "http/json")
        .env("BIR_OTLP_CONTENT", "1")
        .env("CLAUDE_CODE_SESSION_ID", session)
        .args(["--server-name", "shell", "--"])
        .arg(bir())
        .args(["testpeer"])
        .arg(&script);
    let mut host = Host::start(cmd);
    let command_line = format!(
        "sshpass -p {SSH_PW} ssh -p 2222 deploy@web-1 uptime; docker login -u ci -p {DOCKER_PW} registry.example.com; redis-cli -h cache -a {REDIS_PW} ping; mongosh -u root -p {MONGO_PW} --quiet"
    );
    let calls = [
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}),
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run","arguments":{
            "command": command_line,
            "Cookie": format!("session_id={COOKIE_SID}; theme=dark; lang=en"),
            "Set-Cookie": format!("session_id={COOKIE_SID}; Path=/; Max-Age=3600; Secure; HttpOnly; SameSite=Lax")}}}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fail","arguments":{"command": format!("sshpass -p {SSH_PW} ssh deploy@web-1")}}}),
    ];
    for c in &calls {
        host.send(c);
    }
    assert!(host.wait_lines(calls.len(), Duration::from_secs(10)));
    let seen = host.finish(Duration::from_secs(20));
    assert!(
        String::from_utf8_lossy(&seen.stdout).contains(AWS_SECRET),
        "redaction must never touch relayed bytes"
    );

    let mut sinks: Vec<(String, String)> = Vec::new();
    for entry in std::fs::read_dir(dir.join("home/.baseinstrunner/runs")).expect("runs") {
        let path = entry.expect("entry").path();
        if !path.is_file() {
            continue;
        }
        sinks.push((
            path.display().to_string(),
            String::from_utf8_lossy(&std::fs::read(&path).expect("read")).into_owned(),
        ));
    }
    for args in [
        vec!["runs", "show", "latest", "--full"],
        vec!["runs", "export", "latest"],
    ] {
        let out = command(bir(), &dir).args(&args).output().expect("bir runs");
        assert!(out.status.success());
        sinks.push((
            args.join(" "),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
    }
    let bodies: String = service
        .requests()
        .iter()
        .map(|r| format!("{} {}\n{}\n", r.method, r.path, r.body))
        .collect();
    assert!(
        bodies.contains("/recordings/runs"),
        "the run reached the fake service"
    );
    sinks.push(("recording service bodies".into(), bodies));
    let exported: String = otlp.wait_for(1).iter().map(|g| g.text()).collect();
    sinks.push(("otlp bodies".into(), exported.clone()));

    let mut leaks = Vec::new();
    for (sink, text) in &sinks {
        for secret in [
            AWS_KEY,
            AWS_SECRET,
            "wJalrXUtnFEMI\\/K7MDENG",
            SSH_PW,
            DOCKER_PW,
            REDIS_PW,
            MONGO_PW,
            GLUED_PW,
            GITHUB_PAT,
            COOKIE_SID,
        ] {
            if text.contains(secret) {
                leaks.push(format!("{secret} in {sink}"));
            }
        }
    }
    assert!(leaks.is_empty(), "secrets leaked:\n{}", leaks.join("\n"));

    // Content on: the OTLP export carries the arguments and results, so
    // what must survive is checked there as in the store.
    let export = &sinks
        .iter()
        .find(|(s, _)| s == "runs export latest")
        .expect("export")
        .1;
    for (sink, text) in [("export", export), ("otlp", &exported)] {
        for keep in [
            "theme=dark",
            "lang=en",
            "SameSite=Lax",
            "HttpOnly",
            "Max-Age=3600",
            "ssh -p 2222 deploy@web-1",
            "eu-west-1",
        ] {
            assert!(text.contains(keep), "{keep} lost in {sink}");
        }
    }
    assert!(
        export.contains(&transcript) && !export.contains("[REDACTED:known]"),
        "the host's session id is kept in a transcript path"
    );
    let doc: Value = serde_json::from_str(export).expect("json");
    assert!(
        doc.to_string().matches(session).count() >= 2,
        "the session id names the run and stays in its payloads"
    );
}
