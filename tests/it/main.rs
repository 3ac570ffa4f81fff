//! The single integration-test binary (one link step, shared support).
//!
//! * `dispatch` — one executable, three names.
//! * `golden` — direct vs proxied transcripts (the core transparency test).
//! * `lifecycle` — signals, end of input, upstream death, restarts, limits.
//! * `relay` — byte-exactness under random read boundaries and large
//!   messages.

mod dispatch;
mod golden;
mod lifecycle;
mod record;
mod relay;
mod support;
