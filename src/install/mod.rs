//! Getting bir into MCP clients' configs: `bir wrap`, `bir install`,
//! `bir uninstall`, `bir status`, `bir doctor`.
//!
//! * [`atomic`] — atomic, hash-checked writes of a client's file (the client
//!   may be writing it too).
//! * [`jsonedit`] — byte-preserving edits of JSON/JSONC files (spans, not
//!   re-serialisation).

pub mod atomic;
pub mod claude;
pub mod commands;
pub mod diff;
pub mod entry;
pub mod jsonedit;
pub mod ledger;
pub mod wrap;
