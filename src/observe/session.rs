//! A remote upstream's `Mcp-Session-Id`, handed from the HTTP transport to
//! the recorder, and which session each call was answered in.
//!
//! The transport thread [`UpstreamSession::set`]s the id when a session
//! starts and again when an expired one is renewed; each start bumps an
//! epoch. The relay stamps a `tools/call` with the epoch current when it
//! reads the call's answer (one atomic load, before the answer is
//! written, so before the host can send anything that renews the session);
//! the recorder, on the observer thread, turns the epoch back into the id
//! ([`UpstreamSession::id_at`]). So a call is recorded under the session
//! it was answered in, however late the observer gets to it.
//!
//! The id is the server's handle on the session: `Debug` never shows it,
//! nothing here logs it, and it reaches a record only through the
//! redactor (`record::preparation`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::locks::lock;

/// How many past sessions are remembered (a renewal is rare; calls are
/// stamped moments before the recorder reads them).
const HISTORY: usize = 8;

#[derive(Default)]
struct Inner {
    /// 0: no session yet; then 1, 2, … for each session started.
    epoch: AtomicU64,
    ids: Mutex<VecDeque<(u64, Option<String>)>>,
}

/// Shared by the transport (writes), the relay (reads the epoch) and the
/// recorder (reads ids). Cloning shares it.
#[derive(Clone, Default)]
pub(crate) struct UpstreamSession(Arc<Inner>);

impl UpstreamSession {
    /// A session started (`None`: the server assigned no id).
    pub(crate) fn set(&self, id: Option<&str>) {
        let mut ids = lock(&self.0.ids);
        let epoch = self.0.epoch.load(Ordering::Acquire) + 1;
        if ids.len() == HISTORY {
            ids.pop_front();
        }
        ids.push_back((epoch, id.map(str::to_owned)));
        self.0.epoch.store(epoch, Ordering::Release);
    }

    /// The current session's epoch (0 before any): all the relay reads.
    pub(crate) fn epoch(&self) -> u64 {
        self.0.epoch.load(Ordering::Acquire)
    }

    /// The id of the session of `epoch` (the oldest remembered if it is
    /// older still); `None` for epoch 0 or a session without an id.
    pub(crate) fn id_at(&self, epoch: u64) -> Option<String> {
        if epoch == 0 {
            return None;
        }
        let ids = lock(&self.0.ids);
        ids.iter()
            .find(|(e, _)| *e == epoch)
            .or_else(|| ids.front())
            .and_then(|(_, id)| id.clone())
    }
}

impl std::fmt::Debug for UpstreamSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UpstreamSession(epoch {}, [REDACTED])", self.epoch())
    }
}

#[cfg(test)]
mod tests {
    use super::UpstreamSession;

    #[test]
    fn epochs_name_the_session_a_call_was_answered_in() {
        let s = UpstreamSession::default();
        assert_eq!((s.epoch(), s.id_at(0)), (0, None));
        s.set(Some("s-1"));
        let first = s.epoch();
        s.set(Some("s-2"));
        assert_eq!(s.id_at(first).as_deref(), Some("s-1"));
        assert_eq!(s.id_at(s.epoch()).as_deref(), Some("s-2"));
        assert!(!format!("{s:?}").contains("s-2"));
        for n in 3..20 {
            s.set(Some(&format!("s-{n}")));
        }
        assert_eq!(s.id_at(s.epoch()).as_deref(), Some("s-19"));
        assert_eq!(s.id_at(first).as_deref(), Some("s-12"), "the oldest kept");
    }
}
