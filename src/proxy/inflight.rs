//! The in-flight table: requests relayed in either direction that have not
//! been answered yet.
//!
//! It times `tools/call`, matches `notifications/cancelled`, lets the proxy
//! answer what is pending when the upstream dies, and keeps requests the
//! proxy itself sent (ids prefixed `bir:`) apart from the host's.
//!
//! Invariants:
//! * Ids are compared as [`IdKey`]s within one direction: the host's `1` and
//!   the server's `1` never meet.
//! * Duplicate ids in flight are answered first-in, first-out.
//! * The table is bounded ([`MAX_PENDING`] per direction); a peer that never
//!   answers cannot grow it without limit. When the host's side is full its
//!   oldest tenth is evicted in one pass ([`EVICT_BATCH`]), so a full table
//!   costs each request O(1) amortised, not a scan. Evicted entries are
//!   counted (their answers are still relayed, just not timed).
//! * The request bytes kept for the recorder are bounded too: at most
//!   [`HELD_BUDGET`] over all host requests in flight, whatever the host
//!   sends. A request that does not fit is kept clipped (its head, or only
//!   its size: [`ObservedBody::of_request`]); its step is still recorded,
//!   with its arguments marked truncated. Relaying never depends on it.
//! * `upstream_alive` lives under the same lock as the table, so "insert a
//!   request" and "the upstream died: answer everything pending" can never
//!   interleave badly: a request is either answered by the death handler or
//!   sees the dead flag itself.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::time::Instant;

use crate::jsonrpc::inline_bytes::SmallBytes;
use crate::jsonrpc::message::IdKey;
use crate::observe::step::ObservedBody;

/// The most unanswered requests kept per direction.
pub(crate) const MAX_PENDING: usize = 10_000;
/// The most request bytes kept for the recorder over all host requests in
/// flight. With the framer's buffer (the message limit plus two reads) and
/// the observer's queue, this keeps the proxy's peak memory within the
/// message limit plus 16 MB however many large requests go unanswered.
pub(crate) const HELD_BUDGET: usize = 4 * 1024 * 1024;
/// How many of the oldest host requests a full table forgets at once.
pub(crate) const EVICT_BATCH: usize = MAX_PENDING / 10;

/// A method name, without an allocation for the ones the proxy cares about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MethodName {
    Known(&'static str),
    Other(Box<str>),
}

impl MethodName {
    const KNOWN: [&'static str; 6] = [
        "tools/call",
        "tools/list",
        "initialize",
        "server/discover",
        "ping",
        "resources/read",
    ];

    pub(crate) fn new(method: &str) -> MethodName {
        match Self::KNOWN.iter().find(|k| **k == method) {
            Some(known) => MethodName::Known(known),
            None => MethodName::Other(method.into()),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            MethodName::Known(s) => s,
            MethodName::Other(s) => s,
        }
    }
}

impl PartialEq<&str> for MethodName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Hashing for the in-flight maps, which every message touches: a
/// multiply-rotate hash (as in rustc's FxHash) instead of the standard
/// SipHash, several times cheaper on ids. Seeded at random per table, so a
/// peer cannot pick colliding ids in advance; the tables are bounded
/// ([`MAX_PENDING`]) besides.
#[derive(Debug, Clone)]
pub(crate) struct IdHashing {
    seed: u64,
}

impl IdHashing {
    fn new() -> IdHashing {
        IdHashing {
            seed: std::collections::hash_map::RandomState::new().hash_one(b"bir"),
        }
    }
}

impl BuildHasher for IdHashing {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(self.seed)
    }
}

#[derive(Debug)]
pub(crate) struct IdHasher(u64);

impl IdHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut le = [0u8; 8];
            le.copy_from_slice(word);
            self.add(u64::from_le_bytes(le));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut le = [0u8; 8];
            le[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(le) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        // The table takes buckets from the low bits, which a multiply only
        // feeds from the operands' low bits, and numeric ids (stored as
        // `f64` bits) differ in their high bits: finish with a full mix
        // (MurmurHash3's `fmix64`).
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// A request from the host, relayed to the upstream.
#[derive(Debug)]
pub(crate) struct HostRequest {
    /// The id exactly as the host spelled it (echoed in proxy answers).
    pub raw_id: SmallBytes,
    pub method: MethodName,
    /// When the proxy read it: the time of the read that brought it (every
    /// line of one read arrived by then), so a batch of requests costs one
    /// clock read, not one each.
    pub started: Instant,
    /// The raw request line (whole, or clipped within [`HELD_BUDGET`]),
    /// kept for the methods the recorder learns from (`tools/call`,
    /// `initialize`, `server/discover`, `tools/list`).
    pub kept_request: Option<ObservedBody>,
    /// When the host sent `notifications/cancelled` for it (the read that
    /// brought the notification): where an unanswered call ends.
    pub cancelled_at: Option<Instant>,
    /// Another host request with the same id was in flight with this one.
    /// Answers to them are paired first-in, first-out (the id is all that
    /// JSON-RPC gives to tell them apart), so the answer this one gets may
    /// be the other's: the recorder says so rather than present the
    /// pairing as a fact.
    pub id_shared: bool,
    /// The `traceparent` the proxy added to it (`BIR_OTLP_TRACEPARENT`).
    pub traceparent: Option<Box<str>>,
    /// A remote upstream's session epoch when the answer was read (see
    /// `observe::session`); 0 until then, and for stdio.
    pub session_epoch: u64,
    seq: u64,
}

/// A request the proxy sent to the upstream on its own behalf.
#[derive(Debug)]
pub(crate) struct OwnRequest {
    /// Sent to the upstream once this request is answered.
    pub then_send: Option<Vec<u8>>,
    /// The answer goes to the lifecycle loop under this name
    /// (`Event::OwnAnswer`).
    pub report_as: Option<&'static str>,
}

#[derive(Debug)]
pub(crate) struct InFlight {
    upstream_alive: bool,
    /// One entry per id; the rare second request with an id already in
    /// flight waits in `host_dups` (answered first-in, first-out).
    host: HashMap<IdKey, HostRequest, IdHashing>,
    host_dups: HashMap<IdKey, VecDeque<HostRequest>, IdHashing>,
    host_count: usize,
    server: HashMap<IdKey, VecDeque<u64>, IdHashing>,
    server_count: usize,
    own: HashMap<IdKey, OwnRequest, IdHashing>,
    /// Bytes of `kept_request` over all host entries (≤ [`HELD_BUDGET`]).
    held: usize,
    seq: u64,
    evicted: u64,
    /// Of those, recorded `tools/call`s, not yet reported (the run must say
    /// it lost them: [`InFlight::take_evicted_calls`]).
    evicted_calls: u64,
}

/// What `insert_host` decided.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Recorded; relay the request.
    Relay,
    /// The upstream is dead: answer it yourself, do not relay.
    AnswerUnavailable,
}

impl Default for InFlight {
    fn default() -> Self {
        Self::new()
    }
}

impl InFlight {
    pub(crate) fn new() -> Self {
        InFlight {
            upstream_alive: true,
            host: HashMap::with_hasher(IdHashing::new()),
            host_dups: HashMap::with_hasher(IdHashing::new()),
            host_count: 0,
            server: HashMap::with_hasher(IdHashing::new()),
            server_count: 0,
            own: HashMap::with_hasher(IdHashing::new()),
            held: 0,
            seq: 0,
            evicted: 0,
            evicted_calls: 0,
        }
    }

    pub(crate) fn upstream_alive(&self) -> bool {
        self.upstream_alive
    }

    /// Records a host request about to be relayed; `read_at` is when the
    /// proxy read it; `keep` is the request line when the recorder wants
    /// it (copied whole or clipped, within [`HELD_BUDGET`]).
    pub(crate) fn insert_host(
        &mut self,
        raw_id: &[u8],
        method: &str,
        keep: Option<&[u8]>,
        read_at: Instant,
    ) -> Admission {
        if !self.upstream_alive {
            return Admission::AnswerUnavailable;
        }
        if self.host_count >= MAX_PENDING {
            self.evict_oldest_hosts();
        }
        let kept_request = keep.map(|bytes| {
            let kept = ObservedBody::of_request(bytes, HELD_BUDGET.saturating_sub(self.held));
            self.held += kept.weight();
            kept
        });
        self.seq += 1;
        let mut entry = HostRequest {
            raw_id: SmallBytes::new(raw_id),
            method: MethodName::new(method),
            started: read_at,
            kept_request,
            cancelled_at: None,
            id_shared: false,
            traceparent: None,
            session_epoch: 0,
            seq: self.seq,
        };
        match self.host.entry(IdKey::from_raw(raw_id)) {
            std::collections::hash_map::Entry::Occupied(mut slot) => {
                // Those already waiting in `host_dups` were marked when
                // they arrived.
                slot.get_mut().id_shared = true;
                entry.id_shared = true;
                let key = slot.key().clone();
                self.host_dups.entry(key).or_default().push_back(entry);
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(entry);
            }
        }
        self.host_count += 1;
        Admission::Relay
    }

    /// Notes the `traceparent` the proxy added to the host request just
    /// admitted with `raw_id` (the latest with that id: a request whose id
    /// is in flight already waits last in `host_dups`).
    pub(crate) fn note_traceparent(&mut self, raw_id: &[u8], traceparent: Box<str>) {
        let key = IdKey::from_raw(raw_id);
        let latest = match self.host_dups.get_mut(&key).and_then(VecDeque::back_mut) {
            Some(dup) => Some(dup),
            None => self.host.get_mut(&key),
        };
        if let Some(entry) = latest {
            entry.traceparent = Some(traceparent);
        }
    }

    /// The upstream answered a host request: take it out.
    pub(crate) fn answer_host(&mut self, raw_id: &[u8]) -> Option<HostRequest> {
        self.take_host(&IdKey::from_raw(raw_id))
    }

    fn take_host(&mut self, key: &IdKey) -> Option<HostRequest> {
        let entry = self.host.remove(key)?;
        if let Some(queue) = self.host_dups.get_mut(key) {
            if let Some(next) = queue.pop_front() {
                self.host.insert(key.clone(), next);
            }
            if queue.is_empty() {
                self.host_dups.remove(key);
            }
        }
        self.host_count -= 1;
        self.held -= entry.kept_request.as_ref().map_or(0, ObservedBody::weight);
        Some(entry)
    }

    /// The host cancelled one of its requests, at `at` (it stays in flight:
    /// a late answer is still relayed, and recorded as cancelled). A cancel
    /// for an id not in flight is ignored (nothing is kept for a request
    /// that may come later); one for a request already cancelled goes to
    /// the next request sharing its id, if any.
    pub(crate) fn cancel_host(&mut self, raw_id: &[u8], at: Instant) {
        let key = IdKey::from_raw(raw_id);
        match self.host.get_mut(&key) {
            Some(entry) if entry.cancelled_at.is_none() => entry.cancelled_at = Some(at),
            Some(_) => {
                if let Some(entry) = self
                    .host_dups
                    .get_mut(&key)
                    .and_then(|q| q.iter_mut().find(|e| e.cancelled_at.is_none()))
                {
                    entry.cancelled_at = Some(at);
                }
            }
            None => {}
        }
    }

    /// Records a request from the upstream to the host.
    pub(crate) fn insert_server(&mut self, raw_id: &[u8]) {
        if self.server_count >= MAX_PENDING {
            // Server-to-host requests carry no timing we need; forget one.
            if let Some(key) = self.server.keys().next().cloned()
                && let Some(q) = self.server.remove(&key)
            {
                self.server_count -= q.len();
                self.evicted += q.len() as u64;
            }
        }
        self.seq += 1;
        self.server
            .entry(IdKey::from_raw(raw_id))
            .or_default()
            .push_back(self.seq);
        self.server_count += 1;
    }

    /// The host answered a request of the upstream.
    pub(crate) fn answer_server(&mut self, raw_id: &[u8]) -> bool {
        let key = IdKey::from_raw(raw_id);
        let Some(queue) = self.server.get_mut(&key) else {
            return false;
        };
        queue.pop_front();
        if queue.is_empty() {
            self.server.remove(&key);
        }
        self.server_count -= 1;
        true
    }

    /// Records a request the proxy sends to the upstream itself.
    pub(crate) fn insert_own(&mut self, id: &str, then_send: Option<Vec<u8>>) {
        self.own.insert(
            IdKey::own(id),
            OwnRequest {
                then_send,
                report_as: None,
            },
        );
    }

    /// Records a request the proxy sends itself whose answer the
    /// lifecycle loop wants (as `Event::OwnAnswer { id, .. }`).
    pub(crate) fn insert_own_reported(&mut self, id: &'static str) {
        self.own.insert(
            IdKey::own(id),
            OwnRequest {
                then_send: None,
                report_as: Some(id),
            },
        );
    }

    /// If `raw_id` answers one of the proxy's own requests, takes it.
    pub(crate) fn answer_own(&mut self, raw_id: &[u8]) -> Option<OwnRequest> {
        if self.own.is_empty() {
            return None;
        }
        self.own.remove(&IdKey::from_raw(raw_id))
    }

    /// The upstream is gone: no more requests are admitted, and every host
    /// request still pending is returned (oldest first) to be answered.
    pub(crate) fn upstream_died(&mut self) -> Vec<HostRequest> {
        self.upstream_alive = false;
        self.take_all_host()
    }

    /// A new upstream took over (after `--restart`).
    pub(crate) fn upstream_restarted(&mut self) {
        self.upstream_alive = true;
        self.server.clear();
        self.server_count = 0;
        self.own.clear();
    }

    /// How many unanswered requests were forgotten because the table was full.
    #[cfg(test)]
    pub(crate) fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Recorded `tools/call`s forgotten since the last call: their steps
    /// are lost, which the run must admit (it is then `lossy`).
    pub(crate) fn take_evicted_calls(&mut self) -> u64 {
        std::mem::take(&mut self.evicted_calls)
    }

    fn take_all_host(&mut self) -> Vec<HostRequest> {
        let mut all: Vec<HostRequest> = self.host.drain().map(|(_, e)| e).collect();
        all.extend(self.host_dups.drain().flat_map(|(_, q)| q));
        all.sort_by_key(|e| e.seq);
        self.host_count = 0;
        self.held = 0;
        all
    }

    /// Forgets the [`EVICT_BATCH`] oldest host requests (by arrival) in one
    /// pass over the table.
    fn evict_oldest_hosts(&mut self) {
        let mut by_age: Vec<(u64, &IdKey)> = self.host.iter().map(|(k, e)| (e.seq, k)).collect();
        let batch = EVICT_BATCH.min(by_age.len());
        if batch == 0 {
            return;
        }
        if batch < by_age.len() {
            by_age.select_nth_unstable_by_key(batch - 1, |(seq, _)| *seq);
        }
        let oldest: Vec<IdKey> = by_age[..batch].iter().map(|(_, k)| (*k).clone()).collect();
        for key in &oldest {
            if let Some(entry) = self.take_host(key) {
                self.evicted += 1;
                if entry.kept_request.is_some() && entry.method == "tools/call" {
                    self.evicted_calls += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_hashes_spread_and_differ_per_table() {
        let a = IdHashing::new();
        let hashes: std::collections::HashSet<u64> = (0..10_000u64)
            .map(|n| a.hash_one(IdKey::Num((n as f64).to_bits())))
            .collect();
        assert_eq!(hashes.len(), 10_000, "no collisions among sequential ids");
        let buckets: std::collections::HashSet<u64> = hashes.iter().map(|h| h & 1023).collect();
        assert!(buckets.len() > 900, "low bits spread: {}", buckets.len());
        let b = IdHashing::new();
        let key = IdKey::Str("abc".into());
        assert_ne!(a.hash_one(&key), b.hash_one(&key), "seeded per table");
    }

    #[test]
    fn pairs_by_normalised_id_fifo() {
        let mut t = InFlight::new();
        assert_eq!(
            t.insert_host(b"5", "tools/call", None, Instant::now()),
            Admission::Relay
        );
        assert_eq!(
            t.insert_host(b"5", "ping", None, Instant::now()),
            Admission::Relay
        );
        assert_eq!(
            t.answer_host(b"5.0").map(|e| (e.method, e.id_shared)),
            Some((MethodName::new("tools/call"), true))
        );
        assert_eq!(
            t.answer_host(b"5").map(|e| (e.method, e.id_shared)),
            Some((MethodName::new("ping"), true))
        );
        assert!(t.answer_host(b"5").is_none());
        // Reusing an id once its request was answered is no sharing.
        t.insert_host(b"5", "tools/call", None, Instant::now());
        t.insert_host(b"6", "tools/call", None, Instant::now());
        assert_eq!(t.answer_host(b"5").map(|e| e.id_shared), Some(false));
        assert_eq!(t.answer_host(b"6").map(|e| e.id_shared), Some(false));
        assert!(t.answer_host(br#""5""#).is_none());
    }

    #[test]
    fn cancels_mark_only_the_request_in_flight() {
        let mut t = InFlight::new();
        let t0 = Instant::now();
        let later = t0 + std::time::Duration::from_millis(5);
        t.insert_host(b"9", "tools/call", None, t0);
        t.cancel_host(b"77", t0);
        t.cancel_host(b"9", t0);
        t.cancel_host(b"9", later);
        assert_eq!(t.answer_host(b"9").and_then(|e| e.cancelled_at), Some(t0));
        // Neither the stray cancel nor the repeated one is kept for later.
        t.insert_host(b"9", "tools/call", None, t0);
        t.insert_host(b"77", "tools/call", None, t0);
        assert_eq!(t.answer_host(b"9").map(|e| e.cancelled_at), Some(None));
        assert_eq!(t.answer_host(b"77").map(|e| e.cancelled_at), Some(None));
    }

    #[test]
    fn death_answers_everything_and_refuses_more() {
        let mut t = InFlight::new();
        t.insert_host(b"1", "a", None, Instant::now());
        t.insert_host(br#""x""#, "b", None, Instant::now());
        let pending = t.upstream_died();
        assert_eq!(
            pending
                .iter()
                .map(|e| e.method.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(
            t.insert_host(b"2", "c", None, Instant::now()),
            Admission::AnswerUnavailable
        );
        t.upstream_restarted();
        assert_eq!(
            t.insert_host(b"2", "c", None, Instant::now()),
            Admission::Relay
        );
    }

    #[test]
    fn directions_and_own_ids_do_not_mix() {
        let mut t = InFlight::new();
        t.insert_host(b"1", "a", None, Instant::now());
        t.insert_server(b"1");
        t.insert_own("bir:restart-1", None);
        assert!(t.answer_server(b"1"));
        assert!(t.answer_own(br#""bir:restart-1""#).is_some());
        assert!(t.answer_own(b"1").is_none());
        assert!(t.answer_host(b"1").is_some());
    }

    #[test]
    fn bounded() {
        let mut t = InFlight::new();
        for i in 0..MAX_PENDING + 5 {
            t.insert_host(i.to_string().as_bytes(), "m", None, Instant::now());
        }
        assert_eq!(t.evicted(), EVICT_BATCH as u64, "the oldest tenth, once");
        let oldest = (EVICT_BATCH - 1).to_string();
        assert!(t.answer_host(b"0").is_none(), "oldest evicted");
        assert!(t.answer_host(oldest.as_bytes()).is_none(), "oldest evicted");
        let kept = EVICT_BATCH.to_string();
        assert!(t.answer_host(kept.as_bytes()).is_some());
        let newest = (MAX_PENDING + 4).to_string();
        assert!(t.answer_host(newest.as_bytes()).is_some());
        // Filling up again evicts again; the table never exceeds its bound.
        for i in 0..3 * MAX_PENDING {
            t.insert_host(format!("\"s{i}\"").as_bytes(), "m", None, Instant::now());
            assert!(t.host_count <= MAX_PENDING);
        }
        assert_eq!(t.take_evicted_calls(), 0, "none of them was recorded");
    }

    #[test]
    fn evicted_recorded_calls_are_reported_once() {
        let mut t = InFlight::new();
        for i in 0..MAX_PENDING {
            let (method, kept) = if i % 2 == 0 {
                ("tools/call", Some(&b"{}"[..]))
            } else {
                ("ping", None)
            };
            t.insert_host(i.to_string().as_bytes(), method, kept, Instant::now());
        }
        assert_eq!(t.take_evicted_calls(), 0);
        t.insert_host(b"new", "tools/call", None, Instant::now());
        assert_eq!(t.take_evicted_calls(), EVICT_BATCH as u64 / 2);
        assert_eq!(t.take_evicted_calls(), 0, "reported once");
    }

    #[test]
    fn kept_request_bytes_stay_within_the_budget() {
        let mut t = InFlight::new();
        let big = vec![b'x'; 1 << 20];
        let small = vec![b'y'; 1024];
        for i in 0..200u32 {
            let bytes = if i % 2 == 0 { &big } else { &small };
            t.insert_host(
                i.to_string().as_bytes(),
                "tools/call",
                Some(bytes),
                Instant::now(),
            );
            assert!(t.held <= HELD_BUDGET, "{} held after {i}", t.held);
        }
        // Every request kept something (if only its size) to report on.
        let first = t.answer_host(b"0").and_then(|e| e.kept_request);
        assert!(first.is_some_and(|k| k.whole().is_none()), "1 MiB: clipped");
        let second = t.answer_host(b"1").and_then(|e| e.kept_request);
        assert!(second.is_some_and(|k| k.whole().is_some()), "1 KiB: whole");
        // Answers give the budget back: once all are answered, a request is
        // kept whole again.
        for i in 2..200u32 {
            assert!(t.answer_host(i.to_string().as_bytes()).is_some());
        }
        assert_eq!(t.held, 0);
        t.insert_host(b"new", "tools/call", Some(&small), Instant::now());
        let kept = t.answer_host(b"new").and_then(|e| e.kept_request);
        assert!(kept.is_some_and(|k| k.whole().is_some()));
        // So does the upstream's death.
        t.insert_host(b"a", "tools/call", Some(&big), Instant::now());
        assert!(t.held > 0);
        assert_eq!(t.upstream_died().len(), 1);
        assert_eq!(t.held, 0);
    }
}
