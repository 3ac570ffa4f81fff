//! Runs exported to OpenTelemetry: the third sink beside the local store
//! and the recording service (what a user sees is in
//! `docs/opentelemetry.md`).
//!
//! * [`config`] — `BIR_OTLP*` (and, only under `BIR_OTLP=1`, `OTEL_*`) →
//!   endpoint, protocol, headers, timeout, gzip, resource;
//! * [`mapping`] — a run's journal records → spans (the GenAI and MCP
//!   conventions), deterministic: ids derived from the journal's ids;
//! * [`span`] — the trace types; [`json`] and [`proto`] — their two wires
//!   (OTLP/JSON and hand-encoded protobuf, the default);
//! * [`client`] — OTLP/HTTP `POST`s with the spec's retry policy;
//! * [`ledger`] — which runs went out (side markers, not the journal);
//! * [`catchup`] — exporting what did not go out (the background catch-up
//!   and `bir runs export --otlp`);
//! * [`forwarder`] — the recorder's [`crate::record::Forwarder`]: gathers
//!   a run's records, exports it when it finishes, from its own thread.
//!
//! ```text
//! recorder / daemon ─▶ journal
//!                   └▶ OtlpForwarder.forward (clone, queue) ──▶ bir-otlp thread
//!                         run finished ─▶ mapping ─▶ proto|json ─▶ POST /v1/traces ─▶ ledger mark
//!                         idle ─▶ catch-up: unmarked, finished runs of the store, oldest first
//! ```
//!
//! gRPC is not spoken: `grpc` as the protocol is refused with a message
//! that points at the receiver's OTLP/HTTP port (4318).

pub(crate) mod catchup;
pub(crate) mod client;
pub(crate) mod config;
pub(crate) mod forwarder;
pub(crate) mod json;
pub(crate) mod ledger;
pub(crate) mod mapping;
pub(crate) mod proto;
pub(crate) mod span;

#[cfg(test)]
mod tests;
