//! `BIR_OTLP_TRACEPARENT=1`: the W3C `traceparent` put into the
//! `params._meta` of each relayed `tools/call`, so that a server which
//! traces joins the run's trace under the span bir exports for that call
//! (`docs/opentelemetry.md`; the MCP conventions' context propagation).
//!
//! This is the one documented exception to byte-exact relay
//! (ARCHITECTURE.md, "The relay never re-serialises"), and it is off by
//! default. When off, nothing here exists: [`Shared::traceparent`] is
//! `None` and the host pump pays one `Option` check per request. When on,
//! it is decided once at start and only for a proxy that records its own
//! (standalone) run with export on: the run's id, hence its trace id, is
//! chosen at start, before any call; a proxy that may report to the
//! recorder daemon does not inject (the daemon's run id is not known when
//! a call is relayed).
//!
//! What changes on the wire: one member inserted first in `params._meta`
//! (`_meta` made when missing), every other byte kept; a request whose
//! `_meta` already has a `traceparent` (the host traces) is left alone, as
//! are batches, notifications and every other method. What is recorded:
//! the request as the host sent it, and the `traceparent` beside it
//! (`Step::traceparent`), from which the export takes the call's span id.
//!
//! [`Shared::traceparent`]: super::relay::Shared::traceparent

use std::sync::atomic::{AtomicU64, Ordering};

use crate::jsonrpc::meta::insert_in_params_meta;
use crate::otlp::mapping::relayed_call_traceparent;

/// The run the `traceparent`s name, and how many calls were given one.
#[derive(Debug)]
pub(crate) struct Traceparent {
    run_id: String,
    relayed: AtomicU64,
}

impl Traceparent {
    pub(crate) fn new(run_id: String) -> Traceparent {
        Traceparent {
            run_id,
            relayed: AtomicU64::new(0),
        }
    }

    /// `line` (a host's `tools/call`) with its `traceparent` added, and
    /// that `traceparent`; `None` when the line is relayed as it is.
    pub(crate) fn inject(&self, line: &[u8]) -> Option<(Vec<u8>, Box<str>)> {
        // Numbered in the order the host pump relays them (one thread):
        // each call of the run gets a span id of its own.
        let n = self.relayed.fetch_add(1, Ordering::Relaxed) + 1;
        let traceparent = relayed_call_traceparent(&self.run_id, n);
        let edited = insert_in_params_meta(line, "traceparent", &traceparent)?;
        Some((edited, traceparent.into_boxed_str()))
    }
}
