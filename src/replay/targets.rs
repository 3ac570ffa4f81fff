//! Where a replay's servers are (`bir replay|verify|scenario check`): the
//! rule that picks, for each server a scenario names, how to reach it.
//!
//! First found first: `--server NAME='command args…'` (or
//! `NAME=https://…`) and `--url NAME=URL`, then the entries of `--config
//! FILE`, then the original entry the install ledger kept for NAME. All are
//! the user's own configuration, so their annotations are trusted.
//!
//! This layer reads neither client configs nor the ledger, and opens no
//! transport: the layers above hand it what a config file names and what
//! the ledger kept, and turn a remote server into a
//! [`runner::Connector`](super::runner::Connector) (the HTTP transport
//! lives with the proxy).

use std::collections::BTreeMap;

use super::runner::{Connector, ServerTarget, ServerTargets};
use super::scenario::Scenario;
use crate::error::Error;

/// A remote server, as given or configured. No `Debug`: the headers are
/// credentials.
pub(crate) struct RemoteServer {
    /// An http(s) URL with a host (checked by [`remote`]).
    pub url: url::Url,
    /// The transport its entry names (`http`, `streamable-http`, `sse`…);
    /// `auto` for a URL given on the command line.
    pub transport: String,
    /// Static headers bir sends it (its credentials).
    pub headers: Vec<(String, String)>,
}

/// How to reach one server, before anything is started or opened.
pub(crate) enum ServerSpec {
    /// A stdio server: its command (no shell) and extra environment.
    Command {
        argv: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// A remote server over Streamable HTTP (or legacy SSE).
    Remote(RemoteServer),
}

impl ServerSpec {
    /// How the runner reaches it; `connect` opens a remote server's
    /// transport. A remote server is named in messages by its URL with its
    /// secrets redacted, and its header values are the secrets the runner
    /// redacts from what it compares, reports or journals.
    pub(crate) fn into_target(self, connect: &dyn Fn(&RemoteServer) -> Connector) -> ServerTarget {
        match self {
            ServerSpec::Command { argv, env } => ServerTarget::Command { argv, env },
            ServerSpec::Remote(remote) => ServerTarget::Remote {
                label: crate::urls::redacted(&remote.url),
                connect: connect(&remote),
                secrets: remote.headers.iter().map(|(_, v)| v.clone()).collect(),
            },
        }
    }
}

/// A remote server at `url`; a usage error when it is not an http(s) URL
/// with a host.
pub(crate) fn remote(
    url: &str,
    transport: &str,
    headers: Vec<(String, String)>,
) -> Result<ServerSpec, Error> {
    let parsed = url::Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
        .ok_or_else(|| {
            Error::usage(format!(
                "{:?} is not an http(s) URL",
                crate::urls::display(url)
            ))
        })?;
    Ok(ServerSpec::Remote(RemoteServer {
        url: parsed,
        transport: transport.to_owned(),
        headers,
    }))
}

/// The scenario's servers, by the rule of the module's docs: `given` are
/// the `--server` values, `urls` the `--url` values; `configured` reads
/// the servers of `--config FILE` (called once, after the flags are
/// checked, only when the file was given); `original` is the ledger's
/// original command of a server. A server nothing names is left out (the
/// runner reports it).
pub(crate) fn resolve(
    s: &Scenario,
    given: &[String],
    urls: &[String],
    configured: Option<impl FnOnce() -> Result<Vec<(String, ServerSpec)>, Error>>,
    original: &dyn Fn(&str) -> Option<Vec<String>>,
) -> Result<BTreeMap<String, ServerSpec>, Error> {
    let mut out: BTreeMap<String, ServerSpec> = BTreeMap::new();
    for g in given {
        let (name, command) = g
            .split_once('=')
            .ok_or_else(|| Error::usage(format!("--server {g:?} is not NAME='command args…'")))?;
        let words: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
        let target = match words.as_slice() {
            [] => return Err(Error::usage(format!("--server {name}: no command"))),
            [one] if one.starts_with("http://") || one.starts_with("https://") => {
                remote(one, "auto", Vec::new())?
            }
            _ => ServerSpec::Command {
                argv: words,
                env: Vec::new(),
            },
        };
        out.insert(name.to_owned(), target);
    }
    for u in urls {
        let (name, url) = u
            .split_once('=')
            .ok_or_else(|| Error::usage(format!("--url {u:?} is not NAME=URL")))?;
        out.insert(name.to_owned(), remote(url, "auto", Vec::new())?);
    }
    let mut wanted: Vec<&str> = s.servers.keys().map(String::as_str).collect();
    wanted.extend(
        s.steps
            .iter()
            .filter(|st| st.kind == "mcp")
            .map(|st| st.server.as_str()),
    );
    wanted.sort();
    wanted.dedup();
    if let Some(read) = configured {
        for (name, target) in read()? {
            if wanted.contains(&name.as_str()) && !out.contains_key(&name) {
                out.insert(name, target);
            }
        }
    }
    for name in wanted {
        if !out.contains_key(name)
            && let Some(command) = original(name)
        {
            out.insert(
                name.to_owned(),
                ServerSpec::Command {
                    argv: command,
                    env: Vec::new(),
                },
            );
        }
    }
    Ok(out)
}

/// [`resolve`]'s servers as the runner reaches them.
pub(crate) fn into_targets(
    specs: BTreeMap<String, ServerSpec>,
    connect: &dyn Fn(&RemoteServer) -> Connector,
) -> ServerTargets {
    specs
        .into_iter()
        .map(|(name, spec)| (name, spec.into_target(connect)))
        .collect()
}
