//! The proxy's resolved configuration: arguments and environment, read once.
//!
//! This is the only place the proxy reads its environment variables.

use argh::FromArgs;
use std::path::PathBuf;
use std::sync::Arc;

/// Relay an MCP server over stdio, byte for byte, and report each tool call.
///
/// The MCP client starts `bir-proxy` as if it were the server; the proxy
/// starts the real server (without a shell) and relays newline-delimited
/// JSON-RPC both ways.
///
/// With `--url`, the server is remote (Streamable HTTP or the legacy HTTP+SSE
/// transport) and no command is given.
///
/// Environment: BIR_UPSTREAM_MAX_MESSAGE_BYTES (largest message accepted from
/// the server, default 134217728), BIR_PROXY_STAY_UP=1 (stay up answering
/// errors after the server died), BIR_UPSTREAM_HEADERS (remote: a JSON object
/// of header name to value, read once and removed from the environment),
/// BIR_UPSTREAM_CONNECT_TIMEOUT_MS (remote: default 10000), RUST_LOG
/// (diagnostics on stderr, e.g. RUST_LOG=bir=debug).
#[derive(FromArgs, Debug)]
pub(crate) struct ProxyArgs {
    /// the server's name in logs and step reports (default: from the command)
    #[argh(option)]
    pub server_name: Option<String>,

    /// write every relayed message and each step report to this JSONL file
    #[argh(option)]
    pub transcript: Option<PathBuf>,

    /// if the server dies, start it again once and replay the handshake
    #[argh(switch)]
    pub restart: bool,

    /// start the server (with --url: connect) only when a request needs it:
    /// answer `initialize`, the lists and `ping` from the last snapshot
    /// recorded for the same command line or URL (also BIR_PROXY_LAZY=1);
    /// without one, start at once
    #[argh(switch)]
    pub lazy: bool,

    /// a remote MCP server's URL (instead of a command)
    #[argh(option)]
    pub url: Option<String>,

    /// remote transport: auto (default), http (Streamable HTTP) or sse
    /// (legacy HTTP+SSE)
    #[argh(option)]
    pub transport: Option<String>,

    /// a header sent to the remote server, 'Name: value' (repeatable; wins
    /// over BIR_UPSTREAM_HEADERS)
    #[argh(option)]
    pub header: Vec<String>,

    /// print the version and exit
    #[argh(switch)]
    pub version: bool,

    /// serve this recording (a scenario file, or a run id) instead of
    /// relaying; a command after `--` is the real server, for
    /// `--on-miss passthrough`
    #[argh(option)]
    pub replay: Option<String>,

    /// with --replay: keyed (default), ordered, strict or tool
    #[argh(option, long = "match")]
    pub match_mode: Option<String>,

    /// with --replay: error (default) or passthrough (read-only tools only)
    #[argh(option, default = "String::from(\"error\")")]
    pub on_miss: String,

    /// the server command and its arguments, after `--`
    #[argh(positional, greedy)]
    pub command: Vec<String>,
}

/// Default for `BIR_UPSTREAM_MAX_MESSAGE_BYTES`: 128 MiB.
pub(crate) const DEFAULT_MAX_MESSAGE_BYTES: u64 = 128 * 1024 * 1024;

#[derive(Debug, Clone)]
pub(crate) struct ProxyConfig {
    /// The server's name in logs and step reports.
    pub server_name: Arc<str>,
    pub program: String,
    pub args: Vec<String>,
    pub transcript: Option<PathBuf>,
    /// Restart a dead upstream once (`--restart`).
    pub restart: bool,
    /// Start a stdio upstream only when a request needs it (`--lazy`,
    /// `BIR_PROXY_LAZY=1`; see `proxy::lazy`).
    pub lazy: bool,
    /// Stay up answering errors once the upstream is gone
    /// (`BIR_PROXY_STAY_UP=1`).
    pub stay_up: bool,
    /// Largest single message accepted from the upstream (or the host).
    pub max_message_bytes: u64,
    /// `CLAUDE_CODE_SESSION_ID`: Claude Code sets it for every server it
    /// starts; steps keep it so they can be joined to the session later.
    pub session_id: Option<Arc<str>>,
    /// `--url`: the upstream is a remote server, not a command.
    pub upstream_http: Option<Arc<UpstreamHttpConfig>>,
}

/// Which remote transport to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransportMode {
    /// Streamable HTTP, falling back to HTTP+SSE when the `initialize` POST
    /// is refused (`docs/proxy.md`).
    Auto,
    /// Streamable HTTP only.
    Http,
    /// The legacy HTTP+SSE transport (2024-11-05).
    Sse,
}

/// A remote upstream (`--url`).
#[derive(Clone)]
pub(crate) struct UpstreamHttpConfig {
    pub url: url::Url,
    pub mode: TransportMode,
    /// Static headers (credentials): never logged, never recorded, sent
    /// only to the URL's origin.
    pub headers: Vec<(String, String)>,
    pub connect_timeout: std::time::Duration,
    /// The session id the server assigned, shared with the recorder (it
    /// becomes the calls' `mcp.session.id`; never logged, see its type).
    pub session_note: crate::observe::session::UpstreamSession,
}

impl std::fmt::Debug for UpstreamHttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamHttpConfig")
            .field("url", &crate::urls::redacted(&self.url))
            .field("mode", &self.mode)
            .field("headers", &format!("[{} REDACTED]", self.headers.len()))
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// Default for `BIR_UPSTREAM_CONNECT_TIMEOUT_MS`.
pub(crate) const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 10_000;

/// Why the configuration could not be built.
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

impl ProxyConfig {
    pub(crate) fn resolve(args: ProxyArgs) -> Result<ProxyConfig, UsageError> {
        let remote = match &args.url {
            Some(url) => {
                if !args.command.is_empty() {
                    return Err(UsageError(
                        "give either --url or a server command, not both".into(),
                    ));
                }
                Some(Arc::new(upstream_http_config(url, &args)?))
            }
            None => {
                if args.transport.is_some() || !args.header.is_empty() {
                    return Err(UsageError("--transport and --header need --url".into()));
                }
                None
            }
        };
        let mut command = args.command.into_iter();
        let program = match (command.next(), &remote) {
            (Some(p), _) => p,
            (None, Some(remote)) => crate::urls::redacted(&remote.url),
            (None, None) => {
                return Err(UsageError(
                    "no server command given. Usage: bir-proxy [--server-name NAME] -- <command> [args…] | --url URL"
                        .into(),
                ));
            }
        };
        let rest: Vec<String> = command.collect();
        let server_name = match args.server_name {
            Some(name) if !name.trim().is_empty() => name,
            Some(_) => return Err(UsageError("--server-name must not be empty".into())),
            None => match &remote {
                Some(remote) => remote.url.host_str().unwrap_or("remote").to_string(),
                None => derive_server_name(&program, &rest),
            },
        };
        let max_message_bytes = match std::env::var("BIR_UPSTREAM_MAX_MESSAGE_BYTES") {
            Ok(v) => match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => n,
                _ => {
                    log::warn!(
                        "BIR_UPSTREAM_MAX_MESSAGE_BYTES={v:?} is not a positive number of bytes; using {DEFAULT_MAX_MESSAGE_BYTES}"
                    );
                    DEFAULT_MAX_MESSAGE_BYTES
                }
            },
            Err(_) => DEFAULT_MAX_MESSAGE_BYTES,
        };
        Ok(ProxyConfig {
            server_name: Arc::from(server_name),
            program,
            args: rest,
            transcript: args.transcript,
            restart: args.restart,
            lazy: args.lazy || env_flag("BIR_PROXY_LAZY"),
            stay_up: env_flag("BIR_PROXY_STAY_UP"),
            max_message_bytes,
            session_id: std::env::var("CLAUDE_CODE_SESSION_ID")
                .ok()
                .filter(|s| !s.is_empty())
                .map(Arc::from),
            upstream_http: remote,
        })
    }

    /// The text every proxy-made failure answer carries.
    pub(crate) fn unavailable_text(&self) -> String {
        format!("MCP server \"{}\" is not available", self.server_name)
    }
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"))
}

/// `--url`, `--transport`, `--header` and the remote's environment.
///
/// `BIR_UPSTREAM_HEADERS` is read once and removed from the environment, so
/// nothing started later inherits it.
fn upstream_http_config(url: &str, args: &ProxyArgs) -> Result<UpstreamHttpConfig, UsageError> {
    let parsed = url::Url::parse(url).map_err(|_| UsageError("--url is not a valid URL".into()))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(UsageError(
            "--url must be an http:// or https:// URL".into(),
        ));
    }
    let mode = match args.transport.as_deref() {
        None | Some("auto") => TransportMode::Auto,
        Some("http") | Some("streamable-http") | Some("streamableHttp") => TransportMode::Http,
        Some("sse") => TransportMode::Sse,
        Some(other) => {
            return Err(UsageError(format!(
                "--transport {other:?}: expected auto, http or sse"
            )));
        }
    };
    let mut headers: Vec<(String, String)> = Vec::new();
    if let Some(raw) = std::env::var_os("BIR_UPSTREAM_HEADERS") {
        // SAFETY: the proxy is still single-threaded here (configuration is
        // resolved before any thread starts), so no one reads the
        // environment concurrently.
        unsafe { std::env::remove_var("BIR_UPSTREAM_HEADERS") };
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(raw.as_encoded_bytes()).map_err(|_| {
                UsageError("BIR_UPSTREAM_HEADERS is not a JSON object of name to value".into())
            })?;
        for (name, value) in map {
            let serde_json::Value::String(value) = value else {
                return Err(UsageError(format!(
                    "BIR_UPSTREAM_HEADERS: the value of {name:?} is not a string"
                )));
            };
            set_header(&mut headers, name, value)?;
        }
    }
    for h in &args.header {
        let Some((name, value)) = h.split_once(':') else {
            return Err(UsageError("--header must look like 'Name: value'".into()));
        };
        set_header(
            &mut headers,
            name.trim().to_string(),
            value.trim().to_string(),
        )?;
    }
    let connect_timeout = match std::env::var("BIR_UPSTREAM_CONNECT_TIMEOUT_MS") {
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(n) if n > 0 => n,
            _ => {
                log::warn!(
                    "BIR_UPSTREAM_CONNECT_TIMEOUT_MS={v:?} is not a positive number of milliseconds; using {DEFAULT_CONNECT_TIMEOUT_MS}"
                );
                DEFAULT_CONNECT_TIMEOUT_MS
            }
        },
        Err(_) => DEFAULT_CONNECT_TIMEOUT_MS,
    };
    Ok(UpstreamHttpConfig {
        url: parsed,
        mode,
        headers,
        connect_timeout: std::time::Duration::from_millis(connect_timeout),
        session_note: crate::observe::session::UpstreamSession::default(),
    })
}

/// Adds a header, replacing one of the same name (case-insensitive). The
/// value is never echoed in an error.
fn set_header(
    headers: &mut Vec<(String, String)>,
    name: String,
    value: String,
) -> Result<(), UsageError> {
    let valid_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !valid_name {
        return Err(UsageError(format!("invalid header name {name:?}")));
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(UsageError(format!(
            "the value of header {name:?} contains a line break"
        )));
    }
    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
    headers.push((name, value));
    Ok(())
}

/// A name for the server when none is given: the script or package the
/// command runs (`npx -y @scope/server-x@1.2` → `server-x`), else the
/// program's name.
pub(crate) fn derive_server_name(program: &str, args: &[String]) -> String {
    const RUNNERS: &[&str] = &[
        "node", "nodejs", "npx", "bun", "bunx", "deno", "pnpm", "yarn", "python", "python3", "uv",
        "uvx", "pipx", "ruby", "java", "docker", "podman", "sh", "bash", "env",
    ];
    let base = |s: &str| -> String {
        let s = s.rsplit(['/', '\\']).next().unwrap_or(s);
        let s = s.strip_suffix(".exe").unwrap_or(s);
        s.to_owned()
    };
    let program_base = base(program);
    if RUNNERS.contains(&program_base.as_str()) {
        let skip_words = ["run", "exec", "dlx", "x", "--from", "tool", "-m"];
        if let Some(target) = args
            .iter()
            .find(|a| !a.starts_with('-') && !skip_words.contains(&a.as_str()) && !a.is_empty())
        {
            // `@scope/name@version` → `name`.
            let unscoped = target.strip_prefix('@').map_or(target.as_str(), |t| {
                t.split_once('/').map_or(t, |(_, rest)| rest)
            });
            let unversioned = unscoped.split('@').next().unwrap_or(unscoped);
            let name = base(unversioned);
            let name = name
                .strip_suffix(".js")
                .or_else(|| name.strip_suffix(".mjs"))
                .or_else(|| name.strip_suffix(".py"))
                .or_else(|| name.strip_suffix(".ts"))
                .unwrap_or(&name);
            if !name.is_empty() {
                return name.to_owned();
            }
        }
    }
    if program_base.is_empty() {
        "server".to_owned()
    } else {
        program_base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(cmd: &[&str]) -> String {
        let args: Vec<String> = cmd[1..].iter().map(|s| s.to_string()).collect();
        derive_server_name(cmd[0], &args)
    }

    #[test]
    fn derives_names() {
        assert_eq!(
            name(&[
                "npx",
                "-y",
                "@modelcontextprotocol/server-everything@2026.8.31"
            ]),
            "server-everything"
        );
        assert_eq!(
            name(&["/usr/bin/python3", "-m", "mcp_server_time"]),
            "mcp_server_time"
        );
        assert_eq!(name(&["node", "/x/dist/server.js", "stdio"]), "server");
        assert_eq!(name(&["/opt/bin/github-mcp", "stdio"]), "github-mcp");
        assert_eq!(name(&["uvx", "mcp-server-git"]), "mcp-server-git");
    }
}
