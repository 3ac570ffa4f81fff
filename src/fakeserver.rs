//! `bir testpeer SCRIPT`: a scriptable fake MCP server (stdio) for the
//! faults real servers will not produce on demand.
//!
//! The script is JSON:
//!
//! ```json
//! { "capabilities": {"tools": {"listChanged": true}},
//!   "serverInfo": {"name": "testpeer", "version": "1"},
//!   "tools": [{"name": "echo", "inputSchema": {"type": "object"}}],
//!   "on_start": [ACTION…],
//!   "rules": [{"method": "tools/call", "tool": "crash", "do": [ACTION…]}] }
//! ```
//!
//! A request is handled by the first rule whose `method` (and, for
//! `tools/call`, `tool`) matches; a rule with `"once_file": PATH` applies
//! only while PATH does not exist, and creates it (so a restarted peer
//! behaves differently); a rule with `"cursor": C` applies only to a
//! request whose `params.cursor` is C (a paginated list: list the page
//! rules first, the first page's rule, without `cursor`, last). Without a matching rule: `initialize` echoes the
//! client's protocol version with the script's capabilities and serverInfo,
//! `tools/list` returns `tools`, `ping` returns `{}`, `tools/call` echoes its
//! arguments as text, and anything else gets -32601. Notifications are
//! ignored. A batch gets one array of default answers; an empty batch `[]`
//! gets the single -32600 error (id null) JSON-RPC prescribes.
//!
//! Actions: `{"reply": RESULT}`, `{"reply_error": ERROR}`, `{"reply_text":
//! "…"}`, `{"echo_arguments": true}`, `{"raw": "bytes written as is"}`,
//! `{"raw_latin1": "…"}` (each character U+0000..=U+00FF written as that one
//! byte, so a script can write invalid UTF-8),
//! `{"notify": {"method", "params"}, "repeat": N}` (N copies, written in
//! large pieces; default 1), `{"request": {"method", "params"}}`
//! (sends it, waits for the host's answer and replies to the current
//! request with that answer as text), `{"sleep_ms": N}`, `{"trickle_bytes":
//! N, "chunk": C, "every_ms": M}` (N bytes of `x`, C at a time, M ms apart,
//! no newline: a line that arrives slowly and never ends), `{"stderr": "…",
//! "repeat": N}`, `{"big_reply_bytes": N}` (a text result of N bytes, written
//! in pieces), `{"exit": CODE}`, `{"signal": "KILL"}`, `{"close_stdout":
//! true}`, `{"ignore_signals": true}`, `{"pidfile": PATH}` (writes its pid),
//! `{"hang": true}` (stops reading, forever), `{"reply_env": "NAME"}` (a text
//! result leaking that variable's value, plain, base64 and percent-encoded),
//! `{"drip": {"text": "…", "bytes": N, "every_ms": M}}` (writes `text` N
//! bytes at a time, M ms apart; between pieces it reads, and logs, the lines
//! the host sent meanwhile, handling them afterwards).

use argh::FromArgs;
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::cli::Exit;
use crate::cli::Role;
use crate::cli::parse_args;
use crate::error::{self, Error};

/// Run the scripted fake MCP server used by bir's own tests.
#[derive(FromArgs, Debug)]
pub(crate) struct TestPeerArgs {
    /// the JSON script describing how to behave
    #[argh(positional)]
    pub script: PathBuf,

    /// append every line received on stdin to this file
    #[argh(option)]
    pub log: Option<PathBuf>,
}

#[derive(Deserialize, Default)]
struct Script {
    #[serde(default)]
    capabilities: Option<Value>,
    #[serde(default, rename = "serverInfo")]
    server_info: Option<Value>,
    #[serde(default)]
    tools: Vec<Value>,
    #[serde(default)]
    on_start: Vec<Value>,
    #[serde(default)]
    rules: Vec<Rule>,
    /// Exit status when stdin ends (default 0).
    #[serde(default)]
    exit_code_on_eof: u8,
}

#[derive(Deserialize)]
struct Rule {
    method: String,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    once_file: Option<String>,
    /// Only for a request with this `params.cursor`.
    #[serde(default)]
    cursor: Option<Value>,
    #[serde(default, rename = "do")]
    actions: Vec<Value>,
}

#[derive(Deserialize)]
struct Incoming {
    id: Option<Box<RawValue>>,
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
}

struct Peer {
    out: ManuallyDrop<File>,
    input: BufReader<io::Stdin>,
    /// Lines read while waiting for an answer, handled afterwards.
    backlog: VecDeque<Vec<u8>>,
    log: Option<File>,
    next_id: u64,
}

pub(crate) fn main(args: &[String]) -> Exit {
    let parsed: TestPeerArgs = match parse_args(Role::TestPeer.program_name(), args) {
        Ok(p) => p,
        Err(exit) => return exit,
    };
    let script: Script = match std::fs::read(&parsed.script)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(err) => {
            let err = Error::usage(format!("cannot read {}", parsed.script.display())).because(err);
            return error::report("testpeer", Err(err)).into();
        }
    };
    let log = parsed.log.as_deref().and_then(|p| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .map_err(|e| {
                crate::output::note(&format!("testpeer: cannot open log {}: {e}", p.display()))
            })
            .ok()
    });
    let mut peer = Peer {
        // SAFETY: fd 1 is open for the life of the process; ManuallyDrop
        // keeps it open.
        out: ManuallyDrop::new(unsafe { File::from_raw_fd(1) }),
        input: BufReader::new(io::stdin()),
        backlog: VecDeque::new(),
        log,
        next_id: 0,
    };
    for action in &script.on_start {
        if let Some(exit) = peer.act(action, None, None) {
            return exit;
        }
    }
    loop {
        let Some(line) = peer.next_line() else {
            return Exit::Code(script.exit_code_on_eof);
        };
        if line.trim_ascii_start().starts_with(b"[") {
            peer.answer_batch(&script, &line);
            continue;
        }
        let Ok(msg) = serde_json::from_slice::<Incoming>(&line) else {
            continue;
        };
        let (Some(method), Some(id)) = (msg.method.as_deref(), msg.id.as_deref()) else {
            continue; // notifications and stray responses
        };
        let tool = msg
            .params
            .as_ref()
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str);
        let cursor = msg.params.as_ref().and_then(|p| p.get("cursor"));
        let rule = script.rules.iter().find(|r| {
            r.method == method
                && (r.tool.is_none() || r.tool.as_deref() == tool)
                && (r.cursor.is_none() || r.cursor.as_ref() == cursor)
                && r.once_file
                    .as_deref()
                    .is_none_or(|f| !Path::new(f).exists())
        });
        if let Some(rule) = rule {
            if let Some(f) = &rule.once_file {
                let _ = File::create(f);
            }
            for action in &rule.actions {
                if let Some(exit) = peer.act(action, Some(id), msg.params.as_ref()) {
                    return exit;
                }
            }
            continue;
        }
        match default_answer(&script, method, msg.params.as_ref()) {
            Ok(answer) => peer.send_result(id, &answer),
            Err(error) => peer.send_error(id, error),
        }
    }
}

/// What the peer answers when no rule matches: `Err` is a JSON-RPC error.
fn default_answer(script: &Script, method: &str, params: Option<&Value>) -> Result<Value, Value> {
    Ok(match method {
        "initialize" => json!({
            "protocolVersion": params.and_then(|p| p.get("protocolVersion")).cloned().unwrap_or(json!("2025-11-25")),
            "capabilities": script.capabilities.clone().unwrap_or(json!({"tools": {}})),
            "serverInfo": script.server_info.clone().unwrap_or(json!({"name": "testpeer", "version": "1.0.0"})),
        }),
        "tools/list" => json!({"tools": script.tools}),
        "ping" => json!({}),
        "tools/call" => text_result(
            &params
                .and_then(|p| p.get("arguments"))
                .map(Value::to_string)
                .unwrap_or_default(),
        ),
        _ => return Err(json!({"code": -32601, "message": "Method not found"})),
    })
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

impl Peer {
    /// A 2025-03-26 batch: one array of answers (rules do not apply).
    fn answer_batch(&mut self, script: &Script, line: &[u8]) {
        let Ok(items) = serde_json::from_slice::<Vec<Incoming>>(line) else {
            return;
        };
        if items.is_empty() {
            self.write(
                b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"Invalid Request\"}}\n",
            );
            return;
        }
        let mut answers = Vec::new();
        for item in items {
            let (Some(method), Some(id)) = (item.method.as_deref(), item.id.as_deref()) else {
                continue;
            };
            let body = match default_answer(script, method, item.params.as_ref()) {
                Ok(result) => format!(r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#, id.get()),
                Err(error) => format!(r#"{{"jsonrpc":"2.0","id":{},"error":{error}}}"#, id.get()),
            };
            answers.push(body);
        }
        if !answers.is_empty() {
            self.write(format!("[{}]\n", answers.join(",")).as_bytes());
        }
    }

    fn next_line(&mut self) -> Option<Vec<u8>> {
        if let Some(line) = self.backlog.pop_front() {
            return Some(line);
        }
        let mut line = Vec::new();
        match self.input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => {
                if let Some(log) = self.log.as_mut() {
                    let _ = log.write_all(&line);
                }
                Some(line)
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        // A closed stdout ends the peer the way a real server would end.
        if self.out.write_all(bytes).is_err() {
            std::process::exit(0);
        }
    }

    fn send_result(&mut self, id: &RawValue, result: &Value) {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{}}}"#,
            id.get(),
            result
        );
        self.write(format!("{line}\n").as_bytes());
    }

    fn send_error(&mut self, id: &RawValue, error: Value) {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{},"error":{}}}"#, id.get(), error);
        self.write(format!("{line}\n").as_bytes());
    }

    /// Runs one action; `Some(exit)` ends the peer.
    fn act(
        &mut self,
        action: &Value,
        id: Option<&RawValue>,
        params: Option<&Value>,
    ) -> Option<Exit> {
        let get = |k: &str| action.get(k);
        if let (Some(result), Some(id)) = (get("reply"), id) {
            self.send_result(id, result);
        }
        if let (Some(error), Some(id)) = (get("reply_error"), id) {
            self.send_error(id, error.clone());
        }
        if let (Some(text), Some(id)) = (get("reply_text").and_then(Value::as_str), id) {
            self.send_result(id, &text_result(text));
        }
        if let (Some(_), Some(id)) = (get("echo_arguments"), id) {
            let args = params
                .and_then(|p| p.get("arguments"))
                .map(Value::to_string)
                .unwrap_or_default();
            self.send_result(id, &text_result(&args));
        }
        if let Some(raw) = get("raw").and_then(Value::as_str) {
            self.write(raw.as_bytes());
        }
        if let Some(text) = get("raw_latin1").and_then(Value::as_str) {
            match text
                .chars()
                .map(|c| u8::try_from(u32::from(c)))
                .collect::<Result<Vec<u8>, _>>()
            {
                Ok(bytes) => self.write(&bytes),
                Err(_) => {
                    crate::output::note("testpeer: raw_latin1 holds a character above U+00FF")
                }
            }
        }
        if let Some(n) = get("notify") {
            let line =
                json!({"jsonrpc": "2.0", "method": n.get("method"), "params": n.get("params")});
            let line = format!("{line}\n");
            let mut left = get("repeat").and_then(Value::as_u64).unwrap_or(1);
            let per_write = (64 * 1024 / line.len()).max(1) as u64;
            while left > 0 {
                let k = left.min(per_write);
                self.write(line.repeat(k as usize).as_bytes());
                left -= k;
            }
        }
        if let Some(req) = get("request") {
            self.next_id += 1;
            let req_id = format!("tp-{}", self.next_id);
            let line = json!({"jsonrpc": "2.0", "id": req_id, "method": req.get("method"), "params": req.get("params")});
            self.write(format!("{line}\n").as_bytes());
            let answer = self.wait_for_answer(&req_id);
            if let Some(id) = id {
                self.send_result(
                    id,
                    &text_result(&answer.unwrap_or_else(|| "no answer".into())),
                );
            }
        }
        if let Some(ms) = get("sleep_ms").and_then(Value::as_u64) {
            std::thread::sleep(Duration::from_millis(ms));
        }
        if let Some(n) = get("trickle_bytes").and_then(Value::as_u64) {
            let chunk = get("chunk")
                .and_then(Value::as_u64)
                .unwrap_or(1024)
                .clamp(1, 1 << 20);
            let every =
                Duration::from_millis(get("every_ms").and_then(Value::as_u64).unwrap_or(10));
            let piece = vec![b'x'; chunk as usize];
            let mut left = n;
            while left > 0 {
                let k = left.min(chunk) as usize;
                self.write(&piece[..k]);
                left -= k as u64;
                std::thread::sleep(every);
            }
        }
        if let Some(text) = get("stderr").and_then(Value::as_str) {
            let repeat = get("repeat").and_then(Value::as_u64).unwrap_or(1);
            let mut err = io::stderr().lock();
            for _ in 0..repeat {
                let _ = writeln!(err, "{text}");
            }
        }
        if let (Some(n), Some(id)) = (get("big_reply_bytes").and_then(Value::as_u64), id) {
            self.write(
                format!(
                    r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":""#,
                    id.get()
                )
                .as_bytes(),
            );
            let chunk = vec![b'x'; 1 << 16];
            let mut left = n;
            while left > 0 {
                let k = left.min(chunk.len() as u64) as usize;
                self.write(&chunk[..k]);
                left -= k as u64;
            }
            self.write(b"\"}]}}\n");
        }
        if get("ignore_signals").is_some() {
            // SAFETY: setting signal dispositions to SIG_IGN has no preconditions.
            unsafe {
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
                libc::signal(libc::SIGINT, libc::SIG_IGN);
            }
        }
        if let (Some(name), Some(id)) = (get("reply_env").and_then(Value::as_str), id) {
            // The value of an environment variable, as a careless server
            // would leak it: plain, base64, percent-encoded.
            let value = std::env::var(name).unwrap_or_default();
            let text = format!(
                "plain={value} base64={} url={}",
                crate::codec::base64_encode(value.as_bytes(), false, true),
                crate::codec::percent_encode(value.as_bytes(), true, false)
            );
            self.send_result(id, &text_result(&text));
        }
        if let Some(drip) = get("drip") {
            self.drip(drip);
        }
        if let Some(path) = get("pidfile").and_then(Value::as_str) {
            let _ = std::fs::write(path, std::process::id().to_string());
        }
        if get("hang").is_some() {
            // Stop reading stdin for good (ignores end of input too).
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        if get("close_stdout").is_some() {
            // SAFETY: closing fd 1; later writes fail and end the peer.
            unsafe {
                libc::close(1);
            }
        }
        if let Some(code) = get("exit").and_then(Value::as_u64) {
            return Some(Exit::Code(code.min(255) as u8));
        }
        if let Some(sig) = get("signal").and_then(Value::as_str) {
            let signal = match sig {
                "KILL" => libc::SIGKILL,
                "TERM" => libc::SIGTERM,
                "INT" => libc::SIGINT,
                "SEGV" => libc::SIGSEGV,
                _ => libc::SIGKILL,
            };
            return Some(Exit::Signal(signal));
        }
        None
    }

    /// Writes `drip.text` a few bytes at a time with pauses between the
    /// pieces, the way a slow server streams one long answer.
    fn drip(&mut self, drip: &Value) {
        let text = drip.get("text").and_then(Value::as_str).unwrap_or_default();
        let size = drip
            .get("bytes")
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .max(1);
        let pause = drip.get("every_ms").and_then(Value::as_u64).unwrap_or(10);
        for (i, piece) in text.as_bytes().chunks(size as usize).enumerate() {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(pause));
                self.take_ready_lines();
            }
            self.write(piece);
        }
    }

    /// Reads (and logs) the complete lines the host has already sent,
    /// without waiting for more; they are handled after the current action.
    fn take_ready_lines(&mut self) {
        loop {
            let buffered = self.input.buffer().contains(&b'\n');
            let mut poll = libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, zero timeout.
            let ready = buffered || unsafe { libc::poll(&mut poll, 1, 0) } > 0;
            if !ready {
                return;
            }
            let mut line = Vec::new();
            match self.input.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if let Some(log) = self.log.as_mut() {
                let _ = log.write_all(&line);
            }
            self.backlog.push_back(line);
        }
    }

    /// Reads until the host answers request `id`; other lines are kept.
    fn wait_for_answer(&mut self, id: &str) -> Option<String> {
        loop {
            let mut line = Vec::new();
            match self.input.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            if let Some(log) = self.log.as_mut() {
                let _ = log.write_all(&line);
            }
            let value: Option<Value> = serde_json::from_slice(&line).ok();
            let answers = value.as_ref().is_some_and(|v| {
                v.get("id").and_then(Value::as_str) == Some(id) && v.get("method").is_none()
            });
            if answers {
                let v = value.unwrap_or_default();
                let body = v
                    .get("result")
                    .or_else(|| v.get("error"))
                    .cloned()
                    .unwrap_or_default();
                return Some(body.to_string());
            }
            self.backlog.push_back(line);
        }
    }
}
