//! Getting bir into MCP clients' configs: `bir wrap`, `bir install`,
//! `bir uninstall`, `bir status`, `bir doctor`.
//!
//! * [`atomic`] — atomic, hash-checked writes of a client's file (the client
//!   may be writing it too).
//! * [`claude`] — the Claude Code adapter (scopes, approvals, policy);
//!   [`clients`] — the other clients' files; [`codex`] — Codex TOML;
//!   [`commands`] — `install`/`uninstall`/`status`; [`ledger`] — what bir
//!   changed; [`doctor`] — launches every wrapped entry; [`wrap`] and
//!   [`entry`] — wrapped entries; [`remote_entry`] — remote (HTTP/SSE) server entries; [`diff`] — `--dry-run` output.
//! * [`setup`] — `bir setup`, the guided first run over install and doctor.
//! * [`hooks`] — the Claude Code hooks `bir install` registers (settings
//!   file edits); [`hookcmd`] — what install/uninstall/status/doctor do
//!   with them; [`modcmd`] — bir's Claude Code plugin (`--mod`).
//! * [`jsonedit`] — byte-preserving edits of JSON/JSONC files (spans, not
//!   re-serialisation).

pub mod atomic;
pub mod claude;
pub mod clients;
pub mod codex;
pub mod commands;
pub mod diff;
pub mod doctor;
pub mod entry;
pub mod format;
pub mod hookcmd;
pub mod hooks;
pub mod hosthooks;
pub mod jsonedit;
pub mod ledger;
pub mod modcmd;
pub mod remote_entry;
pub mod setup;
pub mod vocab;
pub mod wrap;
