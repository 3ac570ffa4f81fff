//! Editing MCP clients' configs: the engine below `bir wrap`, `bir
//! install`, `bir uninstall`, `bir status`, `bir doctor` and `bir setup`
//! (those commands live in `crate::cmd`).
//!
//! * [`atomic`] — atomic, hash-checked writes of a client's file (the client
//!   may be writing it too).
//! * [`claude`] — the Claude Code adapter (scopes, approvals, policy);
//!   [`clients`] — the other clients' files; [`codex`] — Codex TOML;
//!   [`format`] — one interface over the JSON and TOML formats;
//!   [`ledger`] — what bir changed; [`entry`] — wrapped entries;
//!   [`remote_entry`] — remote (HTTP/SSE) server entries; [`diff`] —
//!   `--dry-run` output; [`vocab`] — the words install and doctor share;
//!   [`vars`] — the one `${VAR}` expansion rule for starting an entry;
//!   [`probe`] — an entry started as its client would, checked to answer;
//!   [`servers`] — a config file's entries and the ledger's originals as
//!   `bir replay` reaches them; [`plan`] — what one `bir install` changes,
//!   planned, shown, applied.
//! * [`hooks`] — the Claude Code hooks `bir install` registers (settings
//!   file edits); [`hook_install`] — what install/uninstall/status/doctor do
//!   with them; [`plugin`] — bir's Claude Code plugin (`--mod`);
//!   [`hosthooks`] — other agents' hooks; [`post_script`] — the bash
//!   script Codex and Gemini run to post a hook to the daemon.
//! * [`jsonedit`] — byte-preserving edits of JSON/JSONC files (spans, not
//!   re-serialisation).

pub(crate) mod atomic;
pub(crate) mod claude;
pub(crate) mod clients;
pub(crate) mod codex;
pub(crate) mod diff;
pub(crate) mod entry;
pub(crate) mod format;
pub(crate) mod hook_entries;
pub(crate) mod hook_install;
pub(crate) mod hosthooks;
pub(crate) mod jsonedit;
pub(crate) mod ledger;
pub(crate) mod plan;
pub(crate) mod plugin;
pub(crate) mod post_script;
pub(crate) mod probe;
pub(crate) mod remote_entry;
pub(crate) mod servers;
pub(crate) mod uninstall;
pub(crate) mod vars;
pub(crate) mod vocab;
