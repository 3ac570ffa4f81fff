//! Codex CLI: `[mcp_servers.<name>]` tables in `$CODEX_HOME/config.toml`
//! (default `~/.codex/config.toml`) and a trusted project's
//! `.codex/config.toml`.
//!
//! `toml_edit` parses the file and gives the byte spans of the `command` and
//! `args` values; bir splices only those spans (like [`super::jsonedit`]
//! does for JSON), so comments, key order, quoting styles and everything
//! else in the file keep their bytes. Strings bir writes are TOML basic
//! strings.

use toml_edit::{Document, Item};

use super::entry::{EntryKind, ProxyForm, classify};
use super::jsonedit::{Doc, Flavor, json_string};
use crate::error::Error;

/// A parse error, with the position `toml_edit` reports.
pub(crate) fn parse(text: &str) -> Result<Document<String>, Error> {
    Document::parse(text.to_owned()).map_err(|e| {
        let pos = e
            .span()
            .map(|s| {
                let (l, c) = super::jsonedit::line_col(text, s.start);
                format!("{l}:{c}: ")
            })
            .unwrap_or_default();
        Error::failure(format!("{pos}{}", e.message()))
    })
}

fn server<'a>(doc: &'a Document<String>, name: &str) -> Option<&'a Item> {
    doc.as_item().get("mcp_servers")?.get(name)
}

/// A TOML basic string for `s` (JSON escaping is valid TOML, except a raw
/// DEL, which TOML forbids).
pub(crate) fn toml_string(s: &str) -> String {
    json_string(s).replace('\u{7f}', "\\u007F")
}

fn toml_array(items: &[String]) -> String {
    let parts: Vec<String> = items.iter().map(|s| toml_string(s)).collect();
    format!("[{}]", parts.join(", "))
}

/// The server names and, per server, a JSON rendering of what matters for
/// wrapping (`command`, `args`, `env` keys, `url`), classified.
pub(crate) fn servers(text: &str) -> Result<Vec<(String, String, EntryKind)>, Error> {
    let doc = parse(text)?;
    let Some(map) = doc
        .as_item()
        .get("mcp_servers")
        .and_then(Item::as_table_like)
    else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (name, item) in map.iter() {
        let json = to_json(item);
        let kind = Doc::parse(json.as_bytes(), Flavor::Json)
            .map(|d| classify(&d.root))
            .unwrap_or(EntryKind::Other("cannot read the table".into()));
        out.push((name.to_owned(), json, kind));
    }
    Ok(out)
}

fn to_json(item: &Item) -> String {
    let mut v = serde_json::Map::new();
    if let Some(c) = item.get("command").and_then(Item::as_str) {
        v.insert("command".into(), c.into());
    } else if item.get("command").is_some() {
        v.insert("command".into(), serde_json::Value::Bool(false));
    }
    if let Some(a) = item.get("args").and_then(Item::as_array) {
        let args: Vec<serde_json::Value> = a
            .iter()
            .map(|x| x.as_str().map_or(serde_json::Value::Null, |s| s.into()))
            .collect();
        v.insert("args".into(), args.into());
    }
    if let Some(env) = item.get("env").and_then(Item::as_table_like) {
        let mut m = serde_json::Map::new();
        for (k, val) in env.iter() {
            m.insert(k.to_owned(), val.as_str().unwrap_or_default().into());
        }
        v.insert("env".into(), m.into());
    }
    if let Some(u) = item.get("url").and_then(Item::as_str) {
        v.insert("url".into(), u.into());
        v.insert("type".into(), "http".into());
    }
    serde_json::Value::Object(v).to_string()
}

fn span_text<'a>(text: &'a str, item: Option<&Item>) -> Option<(std::ops::Range<usize>, &'a str)> {
    let span = item?.span()?;
    Some((span.clone(), &text[span]))
}

/// What an in-place wrap changed: the original value texts.
pub(crate) struct Wrapped {
    pub text: String,
    pub original_command: String,
    pub original_args: Option<String>,
    pub args_absent: bool,
}

/// Wraps server `name` in place.
pub(crate) fn wrap(text: &str, name: &str, form: &ProxyForm) -> Result<Wrapped, Error> {
    let doc = parse(text)?;
    let item =
        server(&doc, name).ok_or_else(|| Error::failure(format!("no [mcp_servers.{name}]")))?;
    let (cmd_span, cmd_raw) =
        span_text(text, item.get("command")).ok_or("the server has no command")?;
    let command = item
        .get("command")
        .and_then(Item::as_str)
        .ok_or("command is not a string")?;
    let args: Vec<String> = item
        .get("args")
        .and_then(Item::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let new_args = toml_array(&form.args(name, command, &args));
    let args_span = span_text(text, item.get("args"));
    let inline =
        item.as_inline_table().is_some() || item.as_value().is_some_and(|v| v.is_inline_table());
    let nl = if text.contains("\r\n") { "\r\n" } else { "\n" };
    // Splice the later span first so the earlier offsets stay valid.
    let mut out = text.to_owned();
    let mut edits: Vec<(std::ops::Range<usize>, String)> =
        vec![(cmd_span.clone(), toml_string(&form.command()))];
    match &args_span {
        Some((span, _)) => edits.push((span.clone(), new_args)),
        None if inline => edits.push((cmd_span.end..cmd_span.end, format!(", args = {new_args}"))),
        None => {
            let eol = text[cmd_span.end..]
                .find('\n')
                .map_or(text.len(), |i| cmd_span.end + i);
            let eol = if text[..eol].ends_with('\r') {
                eol - 1
            } else {
                eol
            };
            edits.push((eol..eol, format!("{nl}args = {new_args}")));
        }
    }
    edits.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
    for (range, with) in edits {
        out.replace_range(range, &with);
    }
    Ok(Wrapped {
        text: out,
        original_command: cmd_raw.to_owned(),
        original_args: args_span.map(|(_, raw)| raw.to_owned()),
        args_absent: item.get("args").is_none(),
    })
}

/// The text bir hashes to tell whether an entry was edited since: its
/// `command` and `args` values as written.
pub(crate) fn entry_fingerprint(text: &str, name: &str) -> Option<String> {
    let doc = parse(text).ok()?;
    let item = server(&doc, name)?;
    let cmd = span_text(text, item.get("command")).map(|(_, t)| t.to_owned())?;
    let args = span_text(text, item.get("args"))
        .map(|(_, t)| t.to_owned())
        .unwrap_or_default();
    Some(format!("{cmd}\u{0}{args}"))
}

/// The wrapped server's original command line, if `name` is wrapped.
pub(crate) fn wrapped_of(text: &str, name: &str) -> Option<super::entry::Wrapped> {
    servers(text)
        .ok()?
        .into_iter()
        .find(|(n, _, _)| n == name)
        .and_then(|(_, _, k)| match k {
            EntryKind::Wrapped(w) => Some(w),
            _ => None,
        })
}

/// Puts back `command` and `args`: the original texts when given (exact
/// bytes), else the command line from the wrapped entry.
pub(crate) fn restore(
    text: &str,
    name: &str,
    original_command: Option<&str>,
    original_args: Option<&str>,
    args_absent: bool,
) -> Result<String, Error> {
    let doc = parse(text)?;
    let item =
        server(&doc, name).ok_or_else(|| Error::failure(format!("no [mcp_servers.{name}]")))?;
    let wrapped = wrapped_of(text, name).ok_or("not wrapped by bir")?;
    let (cmd_span, _) = span_text(text, item.get("command")).ok_or("no command")?;
    let cmd_text = original_command.map_or_else(|| toml_string(&wrapped.command), str::to_owned);
    let mut edits: Vec<(std::ops::Range<usize>, String)> = vec![(cmd_span.clone(), cmd_text)];
    if let Some((args_span, _)) = span_text(text, item.get("args")) {
        if args_absent && (original_args.is_none()) && wrapped.args.is_empty() {
            // Remove what wrap inserted: `, args = […]` or `<nl>args = […]`.
            let between = &text[cmd_span.end.min(args_span.start)..args_span.start];
            let start = if between.starts_with(", args") {
                cmd_span.end
            } else {
                let line_start = text[..args_span.start].rfind('\n').map_or(0, |n| n + 1);
                let nl_len = if text[..line_start].ends_with("\r\n") {
                    2
                } else {
                    1
                };
                line_start.saturating_sub(nl_len)
            };
            edits.push((start..args_span.end, String::new()));
        } else {
            let args_text = original_args.map_or_else(|| toml_array(&wrapped.args), str::to_owned);
            edits.push((args_span, args_text));
        }
    }
    edits.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
    let mut out = text.to_owned();
    for (range, with) in edits {
        out.replace_range(range, &with);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const CONFIG: &str = "# my codex config\r\nmodel = \"o3\"\r\n\r\n[mcp_servers.fs]\r\ncommand = 'npx'   # literal string\r\nargs = [ \"-y\", \"@scope/fs\" ]\r\nenv = { TOKEN = \"x\" }\r\n\r\n[mcp_servers.bare]\r\ncommand = \"srv\"\r\n\r\n[mcp_servers.remote]\r\nurl = \"https://x/mcp\"\r\n\r\n[other]\r\nkey = 1\r\n";

    fn form() -> ProxyForm {
        ProxyForm::link(PathBuf::from("/h/bin/bir-proxy"))
    }

    #[test]
    fn wraps_in_place_and_restores_every_byte() {
        let w = wrap(CONFIG, "fs", &form()).expect("wrap");
        assert_eq!(
            w.text,
            CONFIG.replace(
                "command = 'npx'   # literal string\r\nargs = [ \"-y\", \"@scope/fs\" ]",
                "command = \"/h/bin/bir-proxy\"   # literal string\r\nargs = [\"--server-name\", \"fs\", \"--\", \"npx\", \"-y\", \"@scope/fs\"]"
            )
        );
        let kinds = servers(&w.text).expect("parse");
        assert!(matches!(kinds[0].2, EntryKind::Wrapped(_)));
        assert!(matches!(kinds[2].2, EntryKind::Remote { .. }));
        let back = restore(
            &w.text,
            "fs",
            Some(&w.original_command),
            w.original_args.as_deref(),
            false,
        )
        .expect("restore");
        assert_eq!(back, CONFIG);

        // No args: inserted on the next line, removed again.
        let w = wrap(CONFIG, "bare", &form()).expect("wrap");
        assert!(w.text.contains("command = \"/h/bin/bir-proxy\"\r\nargs = [\"--server-name\", \"bare\", \"--\", \"srv\"]\r\n"), "{}", w.text);
        let back =
            restore(&w.text, "bare", Some(&w.original_command), None, true).expect("restore");
        assert_eq!(back, CONFIG);
    }

    #[test]
    fn inline_tables_and_malformed_files() {
        let text = "[mcp_servers]\nx = { command = \"a\", env = { K = \"v\" } }\n";
        let w = wrap(text, "x", &form()).expect("wrap");
        assert_eq!(
            w.text,
            "[mcp_servers]\nx = { command = \"/h/bin/bir-proxy\", args = [\"--server-name\", \"x\", \"--\", \"a\"], env = { K = \"v\" } }\n"
        );
        assert_eq!(
            restore(&w.text, "x", Some(&w.original_command), None, true).expect("restore"),
            text
        );
        let err = parse("[mcp_servers.x]\ncommand = \n")
            .expect_err("malformed")
            .to_string();
        assert!(err.starts_with("2:"), "{err}");
    }
}
