//! `bir-hooks`: the Claude Code hook receiver.
//!
//! The recorder daemon and the bound tier are a later capability
//! (`ARCHITECTURE.md`, "Seams"). Until then a hook invocation does the one
//! thing the product rules demand of it: it never disturbs the session. It
//! reads (and discards) the event on stdin, prints nothing — stdout of some
//! hook events becomes model context — and exits 0.

use std::io::Read;

use crate::cli::{Exit, parse_args, print_version};
use crate::cli::{HooksArgs, Role};
use crate::error::ExitStatus;

/// The most of a hook payload we read before giving up on it.
const MAX_PAYLOAD: u64 = 16 * 1024 * 1024;

pub fn main(args: &[String]) -> Exit {
    // A hook must exit 0 even when called with arguments we do not know.
    let parsed: Option<HooksArgs> = parse_args(Role::Hooks.program_name(), args).ok();
    if parsed.as_ref().is_some_and(|a| a.version) {
        return print_version("bir-hooks");
    }
    let mut sink = Vec::new();
    if let Err(err) = std::io::stdin().take(MAX_PAYLOAD).read_to_end(&mut sink) {
        log::debug!("could not read the hook payload: {err}");
    }
    log::debug!(
        "hook event ignored ({} bytes): recording hooks is not built yet",
        sink.len()
    );
    ExitStatus::Success.into()
}
