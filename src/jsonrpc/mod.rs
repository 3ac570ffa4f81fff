//! JSON-RPC as the relay sees it: bytes first, trees only where needed.
//!
//! `scan` frames the stream and reads envelopes without allocating per
//! message; `message` turns a scanned line into the facts the relay acts on
//! (kind, id key, method) and builds the few messages the proxy writes itself.
//! `meta` makes the one edit the proxy may make to a relayed request (a key
//! added to `params._meta`, opt-in). `lenient` reads, off the relay's path, the JSON serde_json refuses and
//! peers accept, for the recorder.

pub(crate) mod framer;
pub(crate) mod inline_bytes;
pub(crate) mod lenient;
pub(crate) mod message;
pub(crate) mod meta;
pub mod scan;
