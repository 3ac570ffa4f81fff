//! Wrapped entries: what bir writes into a client's server map, and how it
//! recognises (and undoes) its own work.
//!
//! A wrapped stdio entry keeps every field of the original (`env`, `type`,
//! `timeout`, unknown fields, `${VAR}` placeholders) and changes only
//! `command` and `args`:
//!
//! ```json
//! "fs": { "command": "/home/me/.local/bin/bir-proxy",
//!         "args": ["--server-name", "fs", "--", "npx", "-y", "@scope/fs", "."],
//!         "env": { "LOG": "1" } }
//! ```
//!
//! The command is the absolute path of the `bir-proxy` link next to the
//! running `bir` (no `npx`, no PATH lookup). When there is no such link
//! (a bare copy of the binary) the entry runs `<abs path of bir> proxy …`
//! instead, which behaves the same. `BIR_PROXY_PATH` overrides the path.

use std::path::{Path, PathBuf};

use super::jsonedit::{Doc, Flavor, Kind, Node, json_string};
use crate::error::Error;

/// How entries start the proxy: which program, and with which of the
/// proxy's own options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProxyForm {
    program: ProxyProgram,
    /// Entries start the proxy with `--lazy` (`bir install --lazy`): a
    /// stdio server is started, a remote one connected to, on first use.
    pub lazy: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ProxyProgram {
    /// `<path>/bir-proxy …`.
    Link(PathBuf),
    /// `<path>/bir proxy …`.
    Bir(PathBuf),
}

impl ProxyForm {
    /// `<path>/bir-proxy …`.
    pub(crate) fn link(path: PathBuf) -> ProxyForm {
        ProxyForm {
            program: ProxyProgram::Link(path),
            lazy: false,
        }
    }

    /// `<path>/bir proxy …`.
    pub(crate) fn bir(path: PathBuf) -> ProxyForm {
        ProxyForm {
            program: ProxyProgram::Bir(path),
            lazy: false,
        }
    }

    /// The form for this installation: `BIR_PROXY_PATH`, else the
    /// `bir-proxy` link beside the running executable, else `bir proxy`.
    pub(crate) fn detect() -> ProxyForm {
        if let Some(p) = std::env::var_os("BIR_PROXY_PATH").filter(|p| !p.is_empty()) {
            let p = PathBuf::from(p);
            return if is_proxy_program(&p.to_string_lossy()) {
                ProxyForm::link(p)
            } else {
                ProxyForm::bir(p)
            };
        }
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("bir"));
        if let Some(dir) = exe.parent() {
            let link = dir.join("bir-proxy");
            if link.exists() {
                return ProxyForm::link(link);
            }
        }
        ProxyForm::bir(exe)
    }

    pub(crate) fn command(&self) -> String {
        match &self.program {
            ProxyProgram::Link(p) | ProxyProgram::Bir(p) => p.to_string_lossy().into_owned(),
        }
    }

    /// The wrapped entry's `args` for a remote upstream (no credential
    /// ever goes here: `ps` shows argv).
    pub(crate) fn remote_args(&self, server_name: &str, url: &str, transport: &str) -> Vec<String> {
        let mut out = Vec::with_capacity(8);
        if matches!(self.program, ProxyProgram::Bir(_)) {
            out.push("proxy".to_owned());
        }
        if self.lazy {
            out.push("--lazy".to_owned());
        }
        for a in [
            "--server-name",
            server_name,
            "--url",
            url,
            "--transport",
            transport,
        ] {
            out.push(a.to_owned());
        }
        out
    }

    /// The wrapped entry's `args`.
    pub(crate) fn args(&self, server_name: &str, command: &str, args: &[String]) -> Vec<String> {
        let mut out = Vec::with_capacity(args.len() + 8);
        if matches!(self.program, ProxyProgram::Bir(_)) {
            out.push("proxy".to_owned());
        }
        if self.lazy {
            out.push("--lazy".to_owned());
        }
        out.extend(["--server-name".to_owned(), server_name.to_owned()]);
        if let Some(file) = REPLAY.get() {
            out.extend(["--replay".to_owned(), file.clone()]);
        }
        out.push("--".to_owned());
        out.push(command.to_owned());
        out.extend(args.iter().cloned());
        out
    }
}

/// `bir install --replay FILE --server NAME`: for this one install run,
/// every entry it wraps serves the recording (`bir-proxy --replay FILE --
/// original command`; the original stays after `--`, so `--on-miss
/// passthrough` and `bir uninstall` both have it). Set once, before any
/// entry is planned; a process-wide setting because one install run wraps
/// with one form.
static REPLAY: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Checks `file` is a scenario bir can serve and `servers` names exactly
/// the entries to switch, and makes the wrapped entries serve it.
pub(crate) fn serve_recording(file: &Path, servers: &[String]) -> Result<(), crate::error::Error> {
    if servers.is_empty() {
        return Err(crate::error::Error::usage(
            "--replay switches named entries only: add --server NAME",
        ));
    }
    let absolute = std::fs::canonicalize(file).map_err(|e| {
        crate::error::Error::usage(format!("--replay {}: cannot read it", file.display()))
            .because(e)
    })?;
    let text = std::fs::read_to_string(&absolute).map_err(|e| {
        crate::error::Error::usage(format!("--replay {}: cannot read it", file.display()))
            .because(e)
    })?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        crate::error::Error::usage(format!("--replay {}: not JSON", file.display())).because(e)
    })?;
    if doc.get("schema").and_then(serde_json::Value::as_str) != Some("bir/scenario@1") {
        return Err(crate::error::Error::usage(format!(
            "--replay {}: not a bir scenario (bir scenario derive writes one)",
            file.display()
        )));
    }
    let _ = REPLAY.set(absolute.to_string_lossy().into_owned());
    Ok(())
}

/// A command's file name without its directory and `.exe`.
pub(crate) fn basename(cmd: &str) -> &str {
    let base = cmd.rsplit(['/', '\\']).next().unwrap_or(cmd);
    base.strip_suffix(".exe")
        .or_else(|| base.strip_suffix(".EXE"))
        .unwrap_or(base)
}

fn is_proxy_program(cmd: &str) -> bool {
    basename(cmd) == "bir-proxy"
}

/// An entry bir already wrapped: the proxy's own arguments and the
/// original server command (stdio), or the remote URL (`--url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wrapped {
    pub proxy_command: String,
    pub server_name: Option<String>,
    /// The original server command (empty for a remote upstream).
    pub command: String,
    pub args: Vec<String>,
    /// `bir-proxy --url <url> --transport <t>`: the remote upstream.
    pub remote: Option<RemoteUpstream>,
}

/// The upstream of a wrapped remote entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteUpstream {
    pub url: String,
    pub transport: String,
}

impl Wrapped {
    /// What the proxy fronts, for `bir status`.
    pub(crate) fn upstream(&self) -> String {
        match &self.remote {
            Some(r) => format!("{} ({})", r.url, r.transport),
            None => std::iter::once(self.command.as_str())
                .chain(self.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

fn opt_value(opts: &[String], name: &str) -> Option<String> {
    opts.iter()
        .position(|a| a == name)
        .and_then(|i| opts.get(i + 1))
        .cloned()
}

/// Recognises `bir-proxy [opts] -- cmd args…`, `bir proxy [opts] -- …` and
/// the remote form `bir-proxy [opts] --url <url> [--transport <t>]`.
pub(crate) fn parse_wrapped(command: &str, args: &[String]) -> Option<Wrapped> {
    let rest = if is_proxy_program(command) {
        args
    } else if basename(command) == "bir" && args.first().is_some_and(|a| a == "proxy") {
        &args[1..]
    } else {
        return None;
    };
    if !rest.iter().any(|a| a == "--")
        && let Some(url) = opt_value(rest, "--url")
    {
        return Some(Wrapped {
            proxy_command: command.to_owned(),
            server_name: opt_value(rest, "--server-name"),
            command: String::new(),
            args: Vec::new(),
            remote: Some(RemoteUpstream {
                url,
                transport: opt_value(rest, "--transport").unwrap_or_else(|| "auto".into()),
            }),
        });
    }
    let dashdash = rest.iter().position(|a| a == "--")?;
    let (opts, original) = (&rest[..dashdash], &rest[dashdash + 1..]);
    let (cmd, cmd_args) = original.split_first()?;
    Some(Wrapped {
        proxy_command: command.to_owned(),
        server_name: opt_value(opts, "--server-name"),
        command: cmd.clone(),
        args: cmd_args.to_vec(),
        remote: None,
    })
}

/// What an entry in a server map is, as far as wrapping goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EntryKind {
    /// A stdio server bir can wrap.
    Stdio { command: String, args: Vec<String> },
    /// Already wrapped by bir.
    Wrapped(Wrapped),
    /// A remote (HTTP/SSE/WebSocket) server.
    Remote { url: String, transport: String },
    /// Something bir does not understand; left alone, with the reason.
    Other(String),
}

/// Classifies an entry. `url_keys` are the keys the client uses for remote
/// URLs (`url`, `serverUrl`, `httpUrl`).
pub(crate) fn classify(entry: &Node) -> EntryKind {
    if !entry.is_object() {
        return EntryKind::Other("the entry is not an object".into());
    }
    for key in ["url", "serverUrl", "httpUrl"] {
        if let Some(url) = entry.get(key).and_then(Node::as_str) {
            let transport = entry
                .get("type")
                .or_else(|| entry.get("transport"))
                .and_then(Node::as_str)
                .unwrap_or(if key == "httpUrl" { "http" } else { "unknown" });
            return EntryKind::Remote {
                url: url.to_owned(),
                transport: transport.to_owned(),
            };
        }
    }
    if let Some(t) = entry.get("type").and_then(Node::as_str)
        && t != "stdio"
    {
        return EntryKind::Other(format!("type \"{t}\" is not a stdio server"));
    }
    let Some(command) = entry.get("command").and_then(Node::as_str) else {
        return EntryKind::Other("no \"command\" string".into());
    };
    let args = match entry.get("args") {
        None => Vec::new(),
        Some(a) => match &a.kind {
            Kind::Array(items) => {
                let strings: Option<Vec<String>> = items
                    .iter()
                    .map(|i| i.as_str().map(str::to_owned))
                    .collect();
                match strings {
                    Some(s) => s,
                    None => return EntryKind::Other("\"args\" holds a non-string".into()),
                }
            }
            _ => return EntryKind::Other("\"args\" is not a list".into()),
        },
    };
    match parse_wrapped(command, &args) {
        Some(w) => EntryKind::Wrapped(w),
        None => EntryKind::Stdio {
            command: command.to_owned(),
            args,
        },
    }
}

/// A JSON array of strings, compact.
pub(crate) fn json_array(items: &[String]) -> String {
    let parts: Vec<String> = items.iter().map(|s| json_string(s)).collect();
    format!("[{}]", parts.join(","))
}

/// Edits the entry at `path` in `doc`: `command` and `args` set to the
/// given values (`args: None` removes the member). Everything else in the
/// entry keeps its bytes.
pub(crate) fn set_command(
    doc: &Doc,
    path: &[&str],
    command: &str,
    args: Option<&[String]>,
) -> Result<Vec<u8>, Error> {
    let mut p: Vec<&str> = path.to_vec();
    p.push("command");
    let bytes = doc.set(&p, &json_string(command))?;
    let doc =
        Doc::parse(&bytes, doc.flavor).map_err(|e| Error::failure(format!("internal: {e}")))?;
    p.pop();
    p.push("args");
    match args {
        Some(args) => doc.set(&p, &json_array(args)),
        None => Ok(doc.remove(&p).unwrap_or(bytes)),
    }
}

/// The text of a wrapped copy of `entry_text` (an entry object, in any
/// layout): only `command` and `args` differ.
pub(crate) fn wrapped_entry_text(
    entry_text: &str,
    form: &ProxyForm,
    server_name: &str,
) -> Result<String, Error> {
    let doc = Doc::parse(entry_text.as_bytes(), Flavor::Jsonc)
        .map_err(|e| Error::failure(e.to_string()))?;
    let EntryKind::Stdio { command, args } = classify(&doc.root) else {
        return Err(Error::failure("not a stdio entry"));
    };
    let new_args = form.args(server_name, &command, &args);
    let bytes = set_command(&doc, &[], &form.command(), Some(&new_args))?;
    String::from_utf8(bytes).map_err(|e| Error::failure(e.to_string()))
}

/// True when `path` exists and is an executable file (for `doctor`).
pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn both_proxy_forms_are_recognised() {
        let link = ProxyForm::link(PathBuf::from("/u/bin/bir-proxy"));
        let args = link.args("fs", "npx", &s(&["-y", "pkg"]));
        assert_eq!(args, s(&["--server-name", "fs", "--", "npx", "-y", "pkg"]));
        let w = parse_wrapped(&link.command(), &args).expect("wrapped");
        assert_eq!(w.server_name.as_deref(), Some("fs"));
        assert_eq!(
            (w.command.as_str(), w.args.clone()),
            ("npx", s(&["-y", "pkg"]))
        );

        let bir = ProxyForm::bir(PathBuf::from("/opt/bir"));
        let args = bir.args("fs", "node", &[]);
        assert_eq!(args, s(&["proxy", "--server-name", "fs", "--", "node"]));
        assert!(parse_wrapped("/opt/bir", &args).is_some());
        assert!(parse_wrapped("C:/bin/bir-proxy.exe", &s(&["--", "x"])).is_some());
        assert!(parse_wrapped("npx", &s(&["bir-proxy", "--", "x"])).is_none());

        // The remote form: --url, no `--`.
        let args = link.remote_args("api", "https://h/mcp", "sse");
        let w = parse_wrapped(&link.command(), &args).expect("wrapped remote");
        assert_eq!(w.server_name.as_deref(), Some("api"));
        assert_eq!(
            w.remote,
            Some(RemoteUpstream {
                url: "https://h/mcp".into(),
                transport: "sse".into()
            })
        );
        assert_eq!(w.upstream(), "https://h/mcp (sse)");
        let args = bir.remote_args("api", "https://h/mcp", "auto");
        assert_eq!(args[0], "proxy");
        assert!(parse_wrapped("/opt/bir", &args).is_some_and(|w| w.remote.is_some()));
        assert!(parse_wrapped("bir", &s(&["runs"])).is_none());

        // `--lazy` reaches remote entries too, and they are still known.
        let lazy = ProxyForm {
            lazy: true,
            ..ProxyForm::bir(PathBuf::from("/opt/bir"))
        };
        let args = lazy.remote_args("api", "https://h/mcp", "auto");
        assert_eq!(&args[..2], &s(&["proxy", "--lazy"])[..]);
        let w = parse_wrapped("/opt/bir", &args).expect("wrapped remote");
        assert_eq!(w.server_name.as_deref(), Some("api"));
        assert_eq!(w.upstream(), "https://h/mcp (auto)");
    }

    #[test]
    fn classifies_entries() {
        let kind = |t: &str| {
            let d = Doc::parse(t.as_bytes(), Flavor::Json).expect("parse");
            classify(&d.root)
        };
        assert!(matches!(
            kind(r#"{"command":"x","args":["a"]}"#),
            EntryKind::Stdio { .. }
        ));
        assert!(matches!(
            kind(r#"{"type":"http","url":"https://h/mcp"}"#),
            EntryKind::Remote { .. }
        ));
        assert!(matches!(
            kind(r#"{"serverUrl":"https://h/mcp"}"#),
            EntryKind::Remote { .. }
        ));
        assert!(matches!(kind(r#"{"type":"sdk"}"#), EntryKind::Other(_)));
        assert!(matches!(
            kind(r#"{"command":"x","args":[1]}"#),
            EntryKind::Other(_)
        ));
        assert!(matches!(
            kind(r#"{"command":"/b/bir-proxy","args":["--","x"]}"#),
            EntryKind::Wrapped(_)
        ));
    }

    #[test]
    fn wrapped_copy_keeps_every_other_field() {
        let text = r#"{"type": "stdio", "command": "npx", "args": ["-y", "${PKG}"], "env": {"TOKEN": "${TOKEN}"}, "x-unknown": 1}"#;
        let form = ProxyForm::link(PathBuf::from("/h/bin/bir-proxy"));
        let out = wrapped_entry_text(text, &form, "fs").expect("wrap");
        assert_eq!(
            out,
            r#"{"type": "stdio", "command": "/h/bin/bir-proxy", "args": ["--server-name", "fs", "--", "npx", "-y", "${PKG}"], "env": {"TOKEN": "${TOKEN}"}, "x-unknown": 1}"#
        );
        // An entry without args gains them.
        let out = wrapped_entry_text(r#"{"command": "srv"}"#, &form, "srv").expect("wrap");
        assert_eq!(
            out,
            r#"{"command": "/h/bin/bir-proxy", "args": ["--server-name", "srv", "--", "srv"]}"#
        );
    }
}
