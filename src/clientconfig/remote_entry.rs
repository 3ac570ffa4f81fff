//! Remote (HTTP/SSE) entries: whether bir may wrap one, the wrapped stdio
//! entry, and the way back.
//!
//! A remote entry `{"type": "http", "url": U, "headers": {…}}` becomes a
//! stdio entry that starts `bir-proxy --server-name <key> --url U
//! --transport <t>` (`http`/`streamable-http` → `http`, `sse` → `sse`,
//! anything else → `auto`). The static headers move into
//! `env.BIR_UPSTREAM_HEADERS` (a JSON object as a string; the proxy reads it
//! once and removes it from its environment) — never into `args`, which
//! `ps` shows. `url`, `type`, `headers` (and, when forced, `oauth` /
//! `headersHelper`) are dropped; every other member is kept. VS Code needs
//! `"type": "stdio"` on a stdio entry, so there `type` stays, as `stdio`.
//!
//! bir leaves alone, with the reason, the servers the client signs in
//! itself: an `oauth` block, a `headersHelper`, no credential header at
//! all (the client does OAuth), and headers with `${VAR}` placeholders (bir
//! would have to expand the secret itself). `--server <name>` forces the
//! first three; a placeholder is forced only for Claude Code, which expands
//! `${VAR}` inside `env` values too, so the placeholder travels inside
//! `BIR_UPSTREAM_HEADERS` and bir never sees the secret. Other clients'
//! `env` expansion is not documented: refused even with `--server`.
//!
//! Undo: the ledger keeps the original entry's text with every header (and
//! env) value withheld ([`template`]); uninstall fills the values back in
//! from the wrapped entry's `env` ([`restore`]), giving the original bytes.

use super::entry::ProxyForm;
use super::jsonedit::{Doc, Flavor, Kind, Node, json_string};
use super::vocab::Client;
use crate::error::Error;

/// The env variable the proxy reads its static headers from.
pub(crate) const HEADERS_ENV: &str = "BIR_UPSTREAM_HEADERS";

/// What a withheld value reads in a ledger template.
pub(crate) const WITHHELD: &str = "[withheld]";

const URL_KEYS: [&str; 3] = ["url", "serverUrl", "httpUrl"];

/// The `--transport` for an entry's `type` (and URL key) in `client`'s
/// file.
pub(crate) fn transport_for(entry: &Node, client: &str) -> &'static str {
    if entry.get("httpUrl").is_some() {
        return "http"; // Gemini CLI: httpUrl is streamable HTTP
    }
    if Client::Gemini.is(client) && entry.get("type").is_none() && entry.get("url").is_some() {
        return "sse"; // Gemini CLI: url is SSE
    }
    match entry
        .get("type")
        .or_else(|| entry.get("transport"))
        .and_then(Node::as_str)
    {
        Some("http" | "streamable-http" | "streamableHttp") => "http",
        Some("sse") => "sse",
        _ => "auto",
    }
}

fn url_of(entry: &Node) -> Option<&str> {
    URL_KEYS
        .iter()
        .find_map(|k| entry.get(k).and_then(Node::as_str))
}

/// A header name that carries a credential.
pub(crate) fn is_credential_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "authorization",
        "cookie",
        "token",
        "key",
        "secret",
        "auth",
        "session",
        "password",
        "credential",
        "signature",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// A value the client would expand (`${VAR}`, `${env:X}`, `${input:x}`;
/// Gemini CLI also `$VAR`).
pub(crate) fn has_placeholder(v: &str, client: &str) -> bool {
    if v.contains("${") {
        return true;
    }
    Client::Gemini.is(client)
        && v.as_bytes()
            .windows(2)
            .any(|w| w[0] == b'$' && (w[1].is_ascii_alphabetic() || w[1] == b'_'))
}

/// Whether the client expands `${VAR}` inside a stdio entry's `env` values
/// (so a placeholder can travel inside `BIR_UPSTREAM_HEADERS`).
pub(crate) fn client_expands_env(client: &str) -> bool {
    Client::ClaudeCode.is(client)
}

/// The URL carries a credential of its own (userinfo password, or a query
/// parameter named like one): it would be in argv.
fn url_secret(url: &str) -> Option<&'static str> {
    let after_scheme = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = after_scheme.split(['/', '?', '#']).next().unwrap_or("");
    if authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
    {
        return Some("a password in the URL");
    }
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    let query = query.split('#').next().unwrap_or("");
    if query
        .split('&')
        .filter_map(|kv| kv.split('=').next())
        .any(is_credential_header)
    {
        return Some("a credential in the URL's query");
    }
    None
}

/// Whether bir wraps this remote entry of `client`: `Ok(notes)` (what the
/// wrap gives up, when forced), or `Err(why not)`.
pub(crate) fn assess(entry: &Node, client: &str, forced: bool) -> Result<Vec<String>, Error> {
    if Client::Codex.is(client) {
        return Err(
            "remote Codex server (url, bearer_token_env_var, http_headers): not wrapped by bir yet"
                .into(),
        );
    }
    let Some(url) = url_of(entry) else {
        return Err(Error::failure("a remote entry without a URL string"));
    };
    if let Some(t) = entry.get("type").and_then(Node::as_str)
        && !matches!(t, "http" | "streamable-http" | "streamableHttp" | "sse")
    {
        return Err(Error::failure(format!(
            "remote type \"{t}\": bir-proxy speaks Streamable HTTP and SSE only"
        )));
    }
    if let Some(why) = url_secret(url) {
        return Err(Error::failure(format!(
            "{why}: bir-proxy takes the URL as an argument, which `ps` shows; move the credential into a header"
        )));
    }
    let mut notes = Vec::new();
    if has_placeholder(url, client) {
        if !forced {
            return Err(
                "the URL holds a ${VAR} placeholder; once expanded it is in bir-proxy's arguments (visible in `ps`); `bir install --server` wraps it anyway"
                    .into(),
            );
        }
        if !client_expands_env(client) {
            return Err(
                "the URL holds a placeholder this client expands itself; bir would have to expand it: refused"
                    .into(),
            );
        }
        notes.push(
            "the URL's placeholder is expanded by the client into bir-proxy's arguments".into(),
        );
    }
    let mut credential = false;
    let mut placeholder = Vec::new();
    if let Some(h) = entry.get("headers") {
        if !h.is_object() {
            return Err(Error::failure("\"headers\" is not an object"));
        }
        for m in h.members() {
            let Kind::String(v) = &m.value.kind else {
                return Err(Error::failure(format!(
                    "header \"{}\" is not a string",
                    m.key
                )));
            };
            credential |= is_credential_header(&m.key);
            if has_placeholder(v, client) {
                placeholder.push(m.key.clone());
            }
        }
    }
    if let Some(e) = entry.get("env")
        && e.get(HEADERS_ENV).is_some()
    {
        return Err(Error::failure(format!(
            "the entry already sets env.{HEADERS_ENV}"
        )));
    }
    if let Some(o) = entry.get("oauth") {
        let secret = o.is_object()
            && o.members()
                .iter()
                .any(|m| m.key.to_ascii_lowercase().contains("secret"));
        if secret {
            return Err(Error::failure(
                "the client signs in itself (its oauth block holds a client secret, which bir will not stash); not wrapped",
            ));
        }
        if !forced {
            return Err(
                "the client signs in itself (an oauth block); `bir install --server` wraps it anyway, and bir-proxy then sends only the static headers"
                    .into(),
            );
        }
        notes.push(
            "its oauth block no longer applies: bir-proxy sends only the static headers".into(),
        );
    }
    if entry.get("headersHelper").is_some() {
        if !forced {
            return Err(
                "the client makes its headers (headersHelper); `bir install --server` wraps it anyway, and bir-proxy then sends only the static headers"
                    .into(),
            );
        }
        notes.push(
            "its headersHelper no longer runs: bir-proxy sends only the static headers".into(),
        );
    }
    if !placeholder.is_empty() {
        let names = placeholder.join(", ");
        if !client_expands_env(client) {
            return Err(Error::failure(format!(
                "header {names} holds a placeholder: bir would have to expand the secret itself, and this client is not known to expand env values; refused (even with --server)"
            )));
        }
        if !forced {
            return Err(Error::failure(format!(
                "header {names} holds a ${{VAR}} placeholder: bir does not expand secrets; `bir install --server` keeps the placeholder inside env.{HEADERS_ENV}, which Claude Code expands"
            )));
        }
        notes.push(format!(
            "the placeholder in {names} stays in env.{HEADERS_ENV}; Claude Code expands it"
        ));
    }
    if !credential && entry.get("oauth").is_none() && entry.get("headersHelper").is_none() {
        if !forced {
            return Err(
                "no credential header: the client signs in itself (OAuth); `bir install --server` wraps it anyway (for a server that needs no sign-in)"
                    .into(),
            );
        }
        notes.push("no credential header: bir-proxy connects without sign-in".into());
    }
    Ok(notes)
}

/// For the summary of a wrapped remote entry: what wrapping it gives up
/// (the `--server` notes of [`assess`]), as `"; …"`, or empty.
pub(crate) fn summary_notes(raw: &str, client: &str) -> String {
    let notes = Doc::parse(raw.as_bytes(), Flavor::Jsonc)
        .ok()
        .and_then(|d| assess(&d.root, client, true).ok())
        .unwrap_or_default();
    let mut out = String::from(" (remote: bir-proxy --url, headers in env)");
    for n in notes {
        out.push_str("; ");
        out.push_str(&n);
    }
    out
}

/// The static headers of an entry, in order, as a JSON object text.
fn headers_json(entry: &Node) -> Option<String> {
    let h = entry.get("headers")?;
    let parts: Vec<String> = h
        .members()
        .iter()
        .filter_map(|m| {
            m.value
                .as_str()
                .map(|v| format!("{}:{}", json_string(&m.key), json_string(v)))
        })
        .collect();
    (!parts.is_empty()).then(|| format!("{{{}}}", parts.join(",")))
}

/// The text of the wrapped stdio entry for the remote entry `entry_text`
/// of `client`.
pub(crate) fn wrapped_text(
    entry_text: &str,
    form: &ProxyForm,
    server_name: &str,
    client: &str,
) -> Result<String, Error> {
    let doc = Doc::parse(entry_text.as_bytes(), Flavor::Jsonc)
        .map_err(|e| Error::failure(e.to_string()))?;
    let entry = &doc.root;
    let url = url_of(entry).ok_or("no URL")?;
    let args = form.remote_args(server_name, url, transport_for(entry, client));
    let keep_type = Client::Vscode.is(client);
    let mut members: Vec<String> = Vec::new();
    let mut placed = false;
    let command_members = |members: &mut Vec<String>| {
        if keep_type {
            members.push(format!("\"type\":{}", json_string("stdio")));
        }
        members.push(format!("\"command\":{}", json_string(&form.command())));
        members.push(format!("\"args\":{}", super::entry::json_array(&args)));
        let mut env: Vec<String> = entry
            .get("env")
            .map(|e| {
                e.members()
                    .iter()
                    .map(|m| format!("{}:{}", json_string(&m.key), doc.raw(&m.value)))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(h) = headers_json(entry) {
            env.push(format!("{}:{}", json_string(HEADERS_ENV), json_string(&h)));
        }
        if !env.is_empty() {
            members.push(format!("\"env\":{{{}}}", env.join(",")));
        }
    };
    for m in entry.members() {
        let dropped = matches!(
            m.key.as_str(),
            "type"
                | "transport"
                | "url"
                | "serverUrl"
                | "httpUrl"
                | "headers"
                | "oauth"
                | "headersHelper"
                | "env"
                | "command"
                | "args"
        );
        if dropped {
            if !placed {
                command_members(&mut members);
                placed = true;
            }
            continue;
        }
        members.push(format!("{}:{}", json_string(&m.key), doc.raw(&m.value)));
    }
    if !placed {
        command_members(&mut members);
    }
    Ok(format!("{{{}}}", members.join(",")))
}

/// `entry_text` with every `headers` and `env` value replaced by
/// [`WITHHELD`]: what the ledger keeps (the rest is the original's bytes).
pub(crate) fn template(entry_text: &str) -> Result<String, Error> {
    let doc = Doc::parse(entry_text.as_bytes(), Flavor::Jsonc)
        .map_err(|e| Error::failure(e.to_string()))?;
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for key in ["headers", "env"] {
        if let Some(map) = doc.root.get(key) {
            spans.extend(map.members().iter().map(|m| (m.value.start, m.value.end)));
        }
    }
    Ok(fill(
        &doc,
        spans.into_iter().map(|s| (s, json_string(WITHHELD))),
    ))
}

/// The text of `doc` with each span replaced.
fn fill(doc: &Doc, edits: impl Iterator<Item = ((usize, usize), String)>) -> String {
    let mut edits: Vec<((usize, usize), String)> = edits.collect();
    edits.sort_by_key(|((s, _), _)| std::cmp::Reverse(*s));
    let mut out = doc.text.clone();
    for ((s, e), with) in edits {
        out.replace_range(s..e, &with);
    }
    out
}

/// The original entry: `template` with the header values read back from
/// the wrapped entry's `env.BIR_UPSTREAM_HEADERS` and env values from its
/// `env`. `Err` names what is missing.
pub(crate) fn restore(template: &str, wrapped: &Node, wrapped_doc: &Doc) -> Result<String, Error> {
    let doc = Doc::parse(template.as_bytes(), Flavor::Jsonc)
        .map_err(|e| Error::failure(e.to_string()))?;
    let env = wrapped.get("env");
    let headers_text = env
        .and_then(|e| e.get(HEADERS_ENV))
        .and_then(Node::as_str)
        .map(str::to_owned);
    let headers = match &headers_text {
        Some(t) => Some(Doc::parse(t.as_bytes(), Flavor::Json).map_err(|e| {
            Error::failure(format!("env.{HEADERS_ENV} is not a JSON object ({e})"))
        })?),
        None => None,
    };
    let mut edits = Vec::new();
    if let Some(map) = doc.root.get("headers") {
        for m in map.members() {
            let v = headers
                .as_ref()
                .and_then(|h| h.root.get(&m.key))
                .and_then(Node::as_str)
                .ok_or_else(|| {
                    Error::failure(format!(
                        "header \"{}\" is missing from env.{HEADERS_ENV}",
                        m.key
                    ))
                })?;
            edits.push(((m.value.start, m.value.end), json_string(v)));
        }
    }
    if let Some(map) = doc.root.get("env") {
        for m in map.members() {
            let v = env.and_then(|e| e.get(&m.key)).ok_or_else(|| {
                Error::failure(format!(
                    "env \"{}\" is missing from the wrapped entry",
                    m.key
                ))
            })?;
            edits.push(((m.value.start, m.value.end), wrapped_doc.raw(v).to_owned()));
        }
    }
    Ok(fill(&doc, edits.into_iter()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn node(t: &str) -> Doc {
        Doc::parse(t.as_bytes(), Flavor::Jsonc).expect("parse")
    }

    #[test]
    fn wraps_a_static_header_entry_into_env_only() {
        let text = r#"{"type": "http", "url": "https://h/mcp", "headers": {"Authorization": "Bearer abc\"1", "X-Trace": "1"}, "timeout": 5000}"#;
        let d = node(text);
        assert_eq!(assess(&d.root, "claude-code", false).ok(), Some(vec![]));
        let form = ProxyForm::link(PathBuf::from("/b/bir-proxy"));
        let out = wrapped_text(text, &form, "api", "claude-code").expect("wrap");
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(
            v["args"],
            serde_json::json!([
                "--server-name",
                "api",
                "--url",
                "https://h/mcp",
                "--transport",
                "http"
            ])
        );
        assert!(!v["args"].to_string().contains("abc"));
        let h: serde_json::Value =
            serde_json::from_str(v["env"][HEADERS_ENV].as_str().expect("env")).expect("json");
        assert_eq!(
            h,
            serde_json::json!({"Authorization": "Bearer abc\"1", "X-Trace": "1"})
        );
        assert_eq!(v["timeout"], serde_json::json!(5000));
        assert!(v.get("type").is_none() && v.get("url").is_none() && v.get("headers").is_none());
        // VS Code keeps a type: stdio.
        let out = wrapped_text(text, &form, "api", "vscode").expect("wrap");
        assert!(out.starts_with(r#"{"type":"stdio","command""#), "{out}");

        // The way back: the template withholds values; restore fills them.
        let t = template(text).expect("template");
        assert!(!t.contains("abc"), "{t}");
        let w = node(&out);
        assert_eq!(restore(&t, &w.root, &w).expect("restore"), text);
        // Edited since: the current values come back; a header gone from
        // the env is an error (uninstall leaves that entry alone).
        let edited = out.replace("abc", "xyz");
        let w = node(&edited);
        assert_eq!(
            restore(&t, &w.root, &w).expect("restore"),
            text.replace("abc", "xyz")
        );
        let w = node(&out.replace("X-Trace", "X-Other"));
        assert!(restore(&t, &w.root, &w).is_err());
    }

    #[test]
    fn transports_and_refusals() {
        let t = |s: &str| transport_for(&node(s).root, "claude-code");
        assert_eq!(transport_for(&node(r#"{"url":"u"}"#).root, "gemini"), "sse");
        assert_eq!(t(r#"{"type":"streamable-http","url":"u"}"#), "http");
        assert_eq!(t(r#"{"type":"sse","url":"u"}"#), "sse");
        assert_eq!(t(r#"{"serverUrl":"u"}"#), "auto");
        assert_eq!(t(r#"{"httpUrl":"u"}"#), "http");
        let a = |s: &str, client: &str, forced: bool| assess(&node(s).root, client, forced);
        let bearer = r#""headers":{"Authorization":"Bearer x"}"#;
        assert!(
            a(
                &format!(r#"{{"type":"http","url":"u","oauth":{{}},{bearer}}}"#),
                "claude-code",
                false
            )
            .is_err()
        );
        assert!(
            a(
                &format!(r#"{{"type":"http","url":"u","oauth":{{}},{bearer}}}"#),
                "claude-code",
                true
            )
            .is_ok()
        );
        assert!(
            a(
                r#"{"type":"http","url":"u","oauth":{"clientSecret":"s"}}"#,
                "claude-code",
                true
            )
            .is_err()
        );
        assert!(
            a(
                r#"{"type":"http","url":"u","headersHelper":"/x"}"#,
                "claude-code",
                false
            )
            .is_err()
        );
        assert!(a(r#"{"type":"http","url":"u"}"#, "claude-code", false).is_err());
        assert!(a(r#"{"type":"http","url":"u"}"#, "cursor", true).is_ok());
        let ph = r#"{"type":"http","url":"u","headers":{"Authorization":"Bearer ${T}"}}"#;
        assert!(a(ph, "claude-code", false).is_err());
        assert!(a(ph, "claude-code", true).is_ok());
        assert!(a(ph, "cursor", true).is_err());
        assert!(a(r#"{"type":"ws","url":"wss://x"}"#, "claude-code", true).is_err());
        assert!(
            a(
                r#"{"url":"https://u:p@h/mcp","headers":{"Authorization":"x"}}"#,
                "cursor",
                true
            )
            .is_err()
        );
        assert!(
            a(
                r#"{"url":"https://h/mcp?api_key=1","headers":{"Authorization":"x"}}"#,
                "cursor",
                true
            )
            .is_err()
        );
        assert!(
            a(
                r#"{"url":"https://h/mcp","headers":{"Authorization":"x"}}"#,
                "codex",
                true
            )
            .is_err()
        );
        assert!(has_placeholder("$TOKEN", "gemini") && !has_placeholder("$TOKEN", "cursor"));
    }
}
