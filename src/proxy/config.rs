//! The proxy's resolved configuration: arguments and environment, read once.
//!
//! This is the only place the proxy reads its environment variables.

use std::path::PathBuf;
use std::sync::Arc;

use super::upstream::derive_server_name;
use crate::cli::ProxyArgs;

/// Default for `BIR_UPSTREAM_MAX_MESSAGE_BYTES`: 128 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 128 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The server's name in logs and step reports.
    pub server_name: Arc<str>,
    pub program: String,
    pub args: Vec<String>,
    pub transcript: Option<PathBuf>,
    /// Restart a dead upstream once (`--restart`).
    pub restart: bool,
    /// Stay up answering errors once the upstream is gone
    /// (`BIR_PROXY_STAY_UP=1`).
    pub stay_up: bool,
    /// Largest single message accepted from the upstream (or the host).
    pub max_message_bytes: u64,
    /// `CLAUDE_CODE_SESSION_ID`: Claude Code sets it for every server it
    /// starts; steps keep it so they can be joined to the session later.
    pub session_id: Option<Arc<str>>,
}

/// Why the configuration could not be built.
#[derive(Debug)]
pub struct UsageError(pub String);

impl ProxyConfig {
    pub fn resolve(args: ProxyArgs) -> Result<ProxyConfig, UsageError> {
        let mut command = args.command.into_iter();
        let program = command.next().ok_or_else(|| {
            UsageError(
                "no server command given. Usage: bir-proxy [--server-name NAME] -- <command> [args…]"
                    .into(),
            )
        })?;
        let rest: Vec<String> = command.collect();
        let server_name = match args.server_name {
            Some(name) if !name.trim().is_empty() => name,
            Some(_) => return Err(UsageError("--server-name must not be empty".into())),
            None => derive_server_name(&program, &rest),
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
            stay_up: env_flag("BIR_PROXY_STAY_UP"),
            max_message_bytes,
            session_id: std::env::var("CLAUDE_CODE_SESSION_ID")
                .ok()
                .filter(|s| !s.is_empty())
                .map(Arc::from),
        })
    }

    /// The text every proxy-made failure answer carries.
    pub fn unavailable_text(&self) -> String {
        format!("MCP server \"{}\" is not available", self.server_name)
    }
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"))
}
