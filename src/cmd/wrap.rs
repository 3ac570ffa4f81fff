//! `bir wrap -- <cmd> [args…]`: a wrapped entry for a client bir has no
//! adapter for, printed, or written into a config file's server map.

use crate::clientconfig::atomic;
use crate::clientconfig::diff;
use crate::clientconfig::entry::{ProxyForm, json_array};
use crate::clientconfig::jsonedit::{Doc, Flavor, Style, json_string, render};
use crate::clientconfig::ledger;
use argh::FromArgs;
use std::path::PathBuf;

use crate::error::{self, Error, ExitStatus};
use crate::output::out;

/// Print a server entry that runs the server through bir-proxy, or write it
/// into a config file's server map (--config FILE --name NAME).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "wrap")]
pub(crate) struct WrapCmd {
    /// the server's name in recordings (default: --name, else derived from
    /// the command)
    #[argh(option)]
    pub server_name: Option<String>,

    /// write the entry into this JSON file instead of printing it
    #[argh(option)]
    pub config: Option<PathBuf>,

    /// the entry's key in the file's server map (required with --config)
    #[argh(option)]
    pub name: Option<String>,

    /// the server map's key in the file (default mcpServers; VS Code uses
    /// servers, Zed context_servers)
    #[argh(option, default = "String::from(\"mcpServers\")")]
    pub map_key: String,

    /// the file may hold comments and trailing commas (VS Code, Zed)
    #[argh(switch)]
    pub jsonc: bool,

    /// replace an existing entry of that name
    #[argh(switch)]
    pub force: bool,

    /// print the change as a diff and write nothing
    #[argh(switch)]
    pub dry_run: bool,

    /// the server command and its arguments, after `--`
    #[argh(positional, greedy)]
    pub command: Vec<String>,
}

/// Pretty-prints JSON text (2 spaces, `": "`), keeping scalars as written.
pub(crate) fn pretty(text: &str) -> String {
    let Ok(doc) = Doc::parse(text.as_bytes(), Flavor::Jsonc) else {
        return text.to_owned();
    };
    let style = Style {
        indent: Some("  ".into()),
        colon: ": ".into(),
        comma: ",".into(),
        newline: "\n",
    };
    let mut s = String::new();
    render(&doc, &doc.root, &style, "", &mut s);
    s
}

/// The compact text of a wrapped entry for `command`.
pub(crate) fn entry_text(form: &ProxyForm, server_name: &str, command: &[String]) -> String {
    let args = form.args(server_name, &command[0], &command[1..]);
    format!(
        "{{\"command\":{},\"args\":{}}}",
        json_string(&form.command()),
        json_array(&args)
    )
}

pub(crate) fn main(cmd: WrapCmd) -> Result<ExitStatus, Error> {
    if cmd.command.is_empty() {
        return Err(Error::usage(
            "no server command given; usage: bir wrap [--server-name N] -- <command> [args…]",
        ));
    }
    let form = ProxyForm::detect();
    let server_name = cmd
        .server_name
        .clone()
        .or_else(|| cmd.name.clone())
        .unwrap_or_else(|| {
            crate::proxy::config::derive_server_name(&cmd.command[0], &cmd.command[1..])
        });
    let text = entry_text(&form, &server_name, &cmd.command);
    let Some(config) = &cmd.config else {
        if cmd.name.is_some() {
            out(&format!(
                "{}: {}",
                json_string(cmd.name.as_deref().unwrap_or_default()),
                pretty(&text)
            ));
        } else {
            out(&pretty(&text));
        }
        return Ok(ExitStatus::Success);
    };
    let name = cmd
        .name
        .as_deref()
        .ok_or_else(|| Error::usage("--config needs --name (the entry's key in the server map)"))?;
    let flavor = if cmd.jsonc {
        Flavor::Jsonc
    } else {
        Flavor::Json
    };
    let path = [cmd.map_key.as_str(), name];
    let mut edit = |before: Option<&[u8]>| -> Result<Option<Vec<u8>>, Error> {
        let bytes = before.unwrap_or(b"{\n}\n");
        let doc = Doc::parse(bytes, flavor).map_err(|e| {
            let hint = if !cmd.jsonc && e.message.contains("comments") {
                " (if this client accepts comments, e.g. VS Code or Zed, pass --jsonc)"
            } else {
                ""
            };
            format!("{}:{e}{hint}; the file was not changed", config.display())
        })?;
        if let Some(existing) = doc.root.at(&path) {
            let same = serde_json::from_str::<serde_json::Value>(doc.raw(existing)).ok()
                == serde_json::from_str::<serde_json::Value>(&text).ok();
            if same {
                return Ok(None);
            }
            if !cmd.force {
                return Err(Error::failure(format!(
                    "{} already has a server named \"{name}\" under \"{}\"; pass --force to replace it, or choose another --name",
                    config.display(),
                    cmd.map_key
                )));
            }
        }
        doc.set(&path, &text).map(Some)
    };
    if cmd.dry_run {
        let before = atomic::read(config)?;
        return match edit(before.as_deref()) {
            Ok(Some(after)) => {
                out(&diff::unified(
                    &config.display().to_string(),
                    before.as_deref().unwrap_or_default(),
                    &after,
                ));
                out("(dry run: nothing was written)");
                Ok(ExitStatus::Success)
            }
            Ok(None) => {
                out(&format!("{}: already up to date", config.display()));
                Ok(ExitStatus::Success)
            }
            Err(e) => Err(e),
        };
    }
    // What existed before, for the ledger: how many parents, and whether
    // the entry was replaced (--force) rather than added.
    let before = atomic::read(config).ok().flatten();
    let (keep, replaced) = before
        .as_deref()
        .and_then(|b| Doc::parse(b, flavor).ok())
        .map_or((0, false), |d| {
            (d.existing_parents(&path), d.root.at(&path).is_some())
        });
    match atomic::update(config, &mut edit) {
        Ok(o) if o.changed => {
            out(&format!(
                "wrote \"{name}\" into {} ({} → {})",
                o.target.display(),
                cmd.map_key,
                form.command()
            ));
            if replaced {
                out(
                    "(it replaced an existing entry: `bir uninstall` will not bring that one back)",
                );
            } else {
                record(&o, &path, keep, flavor);
                out(&format!(
                    "Undo: bir uninstall --config {}",
                    config.display()
                ));
            }
            Ok(ExitStatus::Success)
        }
        Ok(o) => {
            out(&format!(
                "{}: \"{name}\" is already wrapped; nothing to do",
                o.target.display()
            ));
            Ok(ExitStatus::Success)
        }
        Err(e) => Err(e),
    }
}

/// Records an entry `bir wrap --config` added, so `bir uninstall --config
/// FILE` (or `--all`) removes it again.
fn record(o: &atomic::Outcome, path: &[&str], keep: usize, flavor: Flavor) {
    let hash = Doc::parse(&o.after, flavor)
        .ok()
        .and_then(|d| {
            d.root
                .at(path)
                .map(|n| crate::codec::sha256_hex(d.raw(n).as_bytes()))
        })
        .unwrap_or_default();
    let change = ledger::Change {
        client: "wrap".into(),
        file: o.target.clone(),
        path: path.iter().map(|s| s.to_string()).collect(),
        action: ledger::ACTION_INSERTED.into(),
        server: path.last().map(|s| s.to_string()).unwrap_or_default(),
        project: None,
        source_scope: "manual".into(),
        keep_parents: keep,
        original_command: None,
        original_args: None,
        args_absent: false,
        args_withheld: false,
        original: None,
        original_text: None,
        entry_sha256: hash,
        file_sha256: crate::codec::sha256_hex(&o.after),
        at: crate::time::rfc3339(std::time::SystemTime::now()),
    };
    if let Err(e) = ledger::modify(&mut |l| {
        l.changes
            .retain(|c| !(c.file == change.file && c.path == change.path));
        l.changes.push(change.clone());
    }) {
        // The entry is written: the command succeeds, and says what is missing.
        error::print(
            "bir wrap",
            &Error::failure("the entry was written, but not recorded for `bir uninstall`")
                .because(e),
        );
    }
}
