//! bir as an MCP client of a live server over stdio: replay, verify,
//! `scenario check` and the mock's passthrough use it.
//!
//! It initialises as `bir-replay` with the client capabilities the run
//! recorded (servers register some tools only for clients that declare a
//! capability), and answers the server's own requests itself, never by
//! asking anyone: elicitation is declined, sampling is refused, `roots/list`
//! gets the recorded working directory, `ping` is answered. Each such
//! request is counted, so the step that caused it is marked
//! `needs-interaction`.
//!
//! One reader thread turns the server's stdout into messages on a channel;
//! every wait has a deadline. The server's stderr is kept as a short tail
//! for error messages. Dropping the client closes the server's stdin and
//! kills it if it does not exit soon.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Bytes of the server's stderr kept for messages.
const STDERR_TAIL: usize = 2048;
/// How long a server gets to exit after its stdin closed.
const EXIT_GRACE: Duration = Duration::from_millis(500);

#[derive(Debug)]
pub enum ClientError {
    /// The server could not be started, or ended, or broke the protocol:
    /// an environment problem (exit code 4), not a regression.
    Environment(String),
    /// No answer within the deadline.
    Timeout(String),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Environment(m) | ClientError::Timeout(m) => f.write_str(m),
        }
    }
}

/// A server's answer to one request.
#[derive(Debug, Clone)]
pub enum Answer {
    Result(Value),
    Error(Value),
}

pub struct McpClient {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    next_id: u64,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    roots_dir: String,
    /// Server requests bir answered itself since the last `take_interactions`.
    interactions: Vec<String>,
    pub initialize_result: Option<Value>,
    /// The 2026-07-28 era: `_meta` every request carries (protocol
    /// version, client info, capabilities), instead of a session.
    modern_meta: Option<Value>,
}

/// The first protocol version of the stateless era (`server/discover`, a
/// `_meta` on every request, no `initialize`).
pub const MODERN_VERSION: &str = "2026-07-28";
/// What a recording from the stateless era falls back to when the live
/// server does not speak it.
const LEGACY_FALLBACK: &str = "2025-11-25";

/// Whether `version` belongs to the stateless era (versions are dates).
pub fn is_modern(version: &str) -> bool {
    version >= MODERN_VERSION
}

impl McpClient {
    /// Starts `command` (no shell) with stdin/stdout piped.
    pub fn spawn(
        name: &str,
        command: &[String],
        roots_dir: &str,
    ) -> Result<McpClient, ClientError> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| ClientError::Environment(format!("server {name}: no command")))?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                ClientError::Environment(format!("server {name}: cannot start {program}: {e}"))
            })?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let (tx, rx) = channel();
        if let Some(stdout) = stdout {
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Ok(v) = serde_json::from_str::<Value>(&line)
                        && tx.send(v).is_err()
                    {
                        break;
                    }
                }
            });
        }
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(mut stderr) = stderr {
            let tail = Arc::clone(&tail);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stderr.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut t = crate::sys::lock(&tail);
                    t.extend(&buf[..n]);
                    while t.len() > STDERR_TAIL {
                        t.pop_front();
                    }
                }
            });
        }
        Ok(McpClient {
            name: name.to_owned(),
            stdin: child.stdin.take(),
            child,
            rx,
            next_id: 1,
            stderr: tail,
            roots_dir: roots_dir.to_owned(),
            interactions: Vec::new(),
            initialize_result: None,
            modern_meta: None,
        })
    }

    fn stderr_tail(&self) -> String {
        let t = crate::sys::lock(&self.stderr);
        let bytes: Vec<u8> = t.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes).trim().to_owned();
        if text.is_empty() {
            String::new()
        } else {
            format!(" (stderr: {})", text.lines().last().unwrap_or_default())
        }
    }

    fn send(&mut self, message: &Value) -> Result<(), ClientError> {
        let mut line = serde_json::to_vec(message).unwrap_or_default();
        line.push(b'\n');
        let ok = self
            .stdin
            .as_mut()
            .is_some_and(|s| s.write_all(&line).and_then(|()| s.flush()).is_ok());
        if ok {
            Ok(())
        } else {
            Err(ClientError::Environment(format!(
                "server {} closed its input{}",
                self.name,
                self.stderr_tail()
            )))
        }
    }

    /// Opens the session the way the recording did: `server/discover` for
    /// the stateless era (falling back to `initialize` when the live server
    /// answers -32601), else `initialize` + `notifications/initialized`,
    /// declaring `capabilities`.
    pub fn initialize(
        &mut self,
        protocol_version: &str,
        capabilities: &Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let client_info = json!({"name": "bir-replay", "version": env!("CARGO_PKG_VERSION")});
        if is_modern(protocol_version) {
            let meta = json!({
                "io.modelcontextprotocol/protocolVersion": protocol_version,
                "io.modelcontextprotocol/clientInfo": client_info,
                "io.modelcontextprotocol/clientCapabilities": capabilities,
            });
            self.modern_meta = Some(meta);
            match self.request("server/discover", json!({}), timeout)? {
                Answer::Result(r) => {
                    self.initialize_result = Some(r.clone());
                    return Ok(r);
                }
                Answer::Error(e) if e.get("code").and_then(Value::as_i64) == Some(-32601) => {
                    self.modern_meta = None;
                    return self.initialize(LEGACY_FALLBACK, capabilities, timeout);
                }
                Answer::Error(e) => {
                    return Err(ClientError::Environment(format!(
                        "server {} refused server/discover: {e}",
                        self.name
                    )));
                }
            }
        }
        let params = json!({
            "protocolVersion": protocol_version,
            "capabilities": capabilities,
            "clientInfo": {"name": "bir-replay", "version": env!("CARGO_PKG_VERSION")},
        });
        match self.request("initialize", params, timeout)? {
            Answer::Result(r) => {
                self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
                self.initialize_result = Some(r.clone());
                Ok(r)
            }
            Answer::Error(e) => Err(ClientError::Environment(format!(
                "server {} refused initialize: {e}",
                self.name
            ))),
        }
    }

    /// Every page of `tools/list`.
    pub fn list_tools(&mut self, timeout: Duration) -> Result<Vec<Value>, ClientError> {
        let mut tools = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..1000 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            match self.request("tools/list", params, timeout)? {
                Answer::Result(r) => {
                    if let Some(page) = r.get("tools").and_then(Value::as_array) {
                        tools.extend(page.iter().cloned());
                    }
                    match r.get("nextCursor") {
                        Some(c) if !c.is_null() => cursor = Some(c.clone()),
                        _ => return Ok(tools),
                    }
                }
                Answer::Error(e) => {
                    return Err(ClientError::Environment(format!(
                        "server {} refused tools/list: {e}",
                        self.name
                    )));
                }
            }
        }
        Ok(tools)
    }

    pub fn call_tool(
        &mut self,
        tool: &str,
        args: &Value,
        timeout: Duration,
    ) -> Result<Answer, ClientError> {
        self.request(
            "tools/call",
            json!({"name": tool, "arguments": args}),
            timeout,
        )
    }

    /// Sends a request and waits for its answer, answering the server's own
    /// requests meanwhile.
    pub fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Answer, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut params = params;
        if let (Some(meta), Some(obj)) = (&self.modern_meta, params.as_object_mut()) {
            obj.insert("_meta".to_owned(), meta.clone());
        }
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = match self.rx.recv_timeout(left) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(ClientError::Timeout(format!(
                        "server {} did not answer {method} within {} ms",
                        self.name,
                        timeout.as_millis()
                    )));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(ClientError::Environment(format!(
                        "server {} ended before answering {method}{}",
                        self.name,
                        self.stderr_tail()
                    )));
                }
            };
            if let Some(server_method) = message.get("method").and_then(Value::as_str) {
                if let Some(request_id) = message.get("id") {
                    let answer = self.answer_server_request(server_method, &message);
                    let mut reply = json!({"jsonrpc": "2.0", "id": request_id});
                    match answer {
                        Ok(r) => reply["result"] = r,
                        Err(e) => reply["error"] = e,
                    }
                    self.send(&reply)?;
                }
                continue;
            }
            if message.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Ok(Answer::Error(error.clone()));
            }
            return Ok(Answer::Result(
                message.get("result").cloned().unwrap_or(Value::Null),
            ));
        }
    }

    fn answer_server_request(&mut self, method: &str, _message: &Value) -> Result<Value, Value> {
        match method {
            "ping" => Ok(json!({})),
            "elicitation/create" => {
                self.interactions.push("elicitation declined".to_owned());
                Ok(json!({"action": "decline"}))
            }
            "sampling/createMessage" => {
                self.interactions.push("sampling refused".to_owned());
                Err(json!({"code": -32600, "message": "bir replay does not sample a model"}))
            }
            "roots/list" => {
                self.interactions
                    .push("roots answered with the recorded cwd".to_owned());
                let uri = format!("file://{}", self.roots_dir);
                Ok(json!({"roots": [{"uri": uri, "name": "recorded cwd"}]}))
            }
            other => {
                self.interactions.push(format!("{other} refused"));
                Err(
                    json!({"code": -32601, "message": format!("bir replay does not handle {other}")}),
                )
            }
        }
    }

    /// The server requests answered since the last call.
    pub fn take_interactions(&mut self) -> Vec<String> {
        std::mem::take(&mut self.interactions)
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + EXIT_GRACE;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
