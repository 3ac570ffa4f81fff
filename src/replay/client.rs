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
//!
//! The transport is a pair of byte streams carrying one JSON-RPC message
//! per line: a child's stdin/stdout ([`McpClient::spawn`]), or any other
//! pair ([`McpClient::over`]), such as the pipes of the proxy's Streamable
//! HTTP transport for a remote server. Requests may be pipelined
//! ([`McpClient::send_request`] then [`McpClient::wait_for`]): an answer
//! that arrives for another pending request is kept until it is asked for.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Bytes of the server's stderr kept for messages.
const STDERR_TAIL: usize = 2048;
/// How long a server gets to exit after its stdin closed.
const EXIT_GRACE: Duration = Duration::from_millis(500);

#[derive(Debug)]
pub(crate) enum ClientError {
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
pub(crate) enum Answer {
    Result(Value),
    Error(Value),
}

pub(crate) struct McpClient {
    name: String,
    /// The server's process (none for a remote server).
    child: Option<Child>,
    stdin: Option<Box<dyn Write + Send>>,
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
    /// Answers that arrived while another request was awaited.
    early: HashMap<u64, Answer>,
    /// Requests sent and not yet awaited (their answers are kept).
    pending: std::collections::HashSet<u64>,
    /// The session's opening exchanges (`initialize` or `server/discover`,
    /// each `tools/list` page) as method, request and answer messages: a
    /// recorder prepares them like the proxy's.
    pub exchanges: Vec<(String, Value, Value)>,
}

/// The first protocol version of the stateless era (`server/discover`, a
/// `_meta` on every request, no `initialize`).
pub(crate) const MODERN_VERSION: &str = "2026-07-28";
/// What a recording from the stateless era falls back to when the live
/// server does not speak it.
const LEGACY_FALLBACK: &str = "2025-11-25";

/// Whether `version` belongs to the stateless era (versions are dates).
pub(crate) fn is_modern(version: &str) -> bool {
    version >= MODERN_VERSION
}

impl McpClient {
    /// Starts `command` (no shell) with stdin/stdout piped and `env` added
    /// to the environment (a client config entry's `env`).
    pub(crate) fn spawn(
        name: &str,
        command: &[String],
        env: &[(String, String)],
        roots_dir: &str,
    ) -> Result<McpClient, ClientError> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| ClientError::Environment(format!("server {name}: no command")))?;
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                ClientError::Environment(format!("server {name}: cannot start {program}: {e}"))
            })?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let stdin: Option<Box<dyn Write + Send>> = child
            .stdin
            .take()
            .map(|s| Box::new(s) as Box<dyn Write + Send>);
        let rx = read_messages(stdout.map(|s| Box::new(s) as Box<dyn Read + Send>));
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(mut stderr) = stderr {
            let tail = Arc::clone(&tail);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stderr.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut t = crate::locks::lock(&tail);
                    t.extend(&buf[..n]);
                    while t.len() > STDERR_TAIL {
                        t.pop_front();
                    }
                }
            });
        }
        let mut client = McpClient::over(name, stdin, None, roots_dir);
        client.rx = rx;
        client.child = Some(child);
        client.stderr = tail;
        Ok(client)
    }

    /// A client over a transport that is not a child of this process:
    /// `writer` takes one message per line, `reader` yields one per line.
    /// A reader that ends is a server that ended.
    pub(crate) fn over(
        name: &str,
        writer: Option<Box<dyn Write + Send>>,
        reader: Option<Box<dyn Read + Send>>,
        roots_dir: &str,
    ) -> McpClient {
        McpClient {
            name: name.to_owned(),
            child: None,
            stdin: writer,
            rx: read_messages(reader),
            next_id: 1,
            stderr: Arc::new(Mutex::new(VecDeque::new())),
            roots_dir: roots_dir.to_owned(),
            interactions: Vec::new(),
            initialize_result: None,
            modern_meta: None,
            early: HashMap::new(),
            pending: std::collections::HashSet::new(),
            exchanges: Vec::new(),
        }
    }

    fn stderr_tail(&self) -> String {
        let t = crate::locks::lock(&self.stderr);
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
    pub(crate) fn initialize(
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
    pub(crate) fn list_tools(&mut self, timeout: Duration) -> Result<Vec<Value>, ClientError> {
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

    pub(crate) fn call_tool(
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
    pub(crate) fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Answer, ClientError> {
        let keep = matches!(method, "initialize" | "server/discover" | "tools/list");
        let (id, sent) = self.send_request(method, params)?;
        let answer = self.wait_for(id, method, Instant::now() + timeout, timeout)?;
        if keep {
            let message = match &answer {
                Answer::Result(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
                Answer::Error(e) => json!({"jsonrpc": "2.0", "id": id, "error": e}),
            };
            self.exchanges.push((method.to_owned(), sent, message));
        }
        Ok(answer)
    }

    /// Sends a request without waiting: its id, and the message as sent.
    /// Await it with [`McpClient::wait_for`].
    pub(crate) fn send_request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<(u64, Value), ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut params = params;
        if let (Some(meta), Some(obj)) = (&self.modern_meta, params.as_object_mut()) {
            obj.insert("_meta".to_owned(), meta.clone());
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&message)?;
        self.pending.insert(id);
        Ok((id, message))
    }

    /// Waits until `deadline` for the answer to request `id` (sent by
    /// [`McpClient::send_request`]), answering the server's own requests
    /// and keeping other pending requests' answers meanwhile. `timeout` is
    /// only named in the message.
    pub(crate) fn wait_for(
        &mut self,
        id: u64,
        method: &str,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Answer, ClientError> {
        if let Some(a) = self.early.remove(&id) {
            self.pending.remove(&id);
            return Ok(a);
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = match self.rx.recv_timeout(left) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => {
                    self.pending.remove(&id);
                    return Err(ClientError::Timeout(format!(
                        "server {} did not answer {method} within {} ms",
                        self.name,
                        timeout.as_millis()
                    )));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.pending.remove(&id);
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
            let Some(got) = message.get("id").and_then(Value::as_u64) else {
                continue;
            };
            let answer = match message.get("error") {
                Some(error) => Answer::Error(error.clone()),
                None => Answer::Result(message.get("result").cloned().unwrap_or(Value::Null)),
            };
            if got == id {
                self.pending.remove(&id);
                return Ok(answer);
            }
            if self.pending.contains(&got) {
                self.early.insert(got, answer);
            }
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
    pub(crate) fn take_interactions(&mut self) -> Vec<String> {
        std::mem::take(&mut self.interactions)
    }
}

/// One thread turning `reader`'s lines into messages on a channel (lines
/// that are not JSON are skipped). No reader: a channel that is already
/// closed.
fn read_messages(reader: Option<Box<dyn Read + Send>>) -> Receiver<Value> {
    let (tx, rx) = channel();
    if let Some(reader) = reader {
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
    }
    rx
}

impl Drop for McpClient {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let Some(child) = self.child.as_mut() else {
            return;
        };
        let deadline = Instant::now() + EXIT_GRACE;
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}
