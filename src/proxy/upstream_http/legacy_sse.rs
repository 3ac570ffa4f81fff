//! The legacy HTTP+SSE transport: a GET stream whose first event names the
//! endpoint that requests are POSTed to, answers arriving on the stream;
//! and, in auto mode, probing for it when Streamable HTTP is refused.

use super::*;

impl UpstreamHttp {
    /// Auto mode: the URL refused a Streamable HTTP initialize. Does it speak
    /// HTTP+SSE (a GET stream whose first event is `endpoint`)? If not, the
    /// transport is left undecided again: later requests get the server's
    /// own answer (not "no HTTP+SSE stream"), the legacy stream stops
    /// polling, and the host's next `initialize` probes afresh (the server
    /// may have been down or redeploying).
    pub(super) fn probe_legacy(self: &Arc<Self>) -> bool {
        {
            let mut st = lock(&self.state);
            st.mode = Some(TransportMode::Sse);
            st.legacy_closed = false;
        }
        self.start_legacy_stream();
        if self.wait_endpoint().is_some() {
            return true;
        }
        lock(&self.state).mode = None;
        false
    }

    pub(super) fn start_legacy_stream(self: &Arc<Self>) {
        if self.legacy_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = Arc::clone(self);
        let _ = thread::Builder::new()
            .name("bir-sse".into())
            .stack_size(256 * 1024)
            .spawn(move || me.legacy_stream());
    }

    pub(super) fn wait_endpoint(&self) -> Option<Url> {
        let deadline = Instant::now() + ENDPOINT_WAIT.max(self.cfg.connect_timeout);
        let mut st = lock(&self.state);
        loop {
            if let Some(e) = &st.endpoint {
                return Some(e.clone());
            }
            if st.legacy_closed {
                return None;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            st = self
                .endpoint_ready
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Legacy: the GET stream, reconnected (with backoff) when it ends. A
    /// new stream is a new session: the host's handshake is replayed to it
    /// (answer swallowed) before requests go to its endpoint; requests the
    /// old one left unanswered get an error.
    ///
    /// It ends when the transport is no longer HTTP+SSE (a failed probe):
    /// `legacy_started` is cleared under the state lock, so a probe that sets
    /// the mode again either finds this thread still going or starts one.
    pub(super) fn legacy_stream(&self) {
        let mut failures = 0u32;
        let mut replay = false;
        loop {
            if self.closing.load(Ordering::SeqCst) {
                return;
            }
            {
                let st = lock(&self.state);
                if st.mode != Some(TransportMode::Sse) {
                    self.legacy_started.store(false, Ordering::SeqCst);
                    return;
                }
            }
            let resp = match self.send(
                "GET",
                &self.cfg.url,
                None,
                &[("Accept", "text/event-stream")],
                None,
                None,
            ) {
                Ok(r) if r.status() == 200 => Ok(r),
                Ok(r) => Err(self.status_text(&r)),
                Err(f) => Err(self.failure_text(&f)),
            };
            match resp {
                Err(text) => {
                    log::warn!("the HTTP+SSE stream: {text}");
                    failures += 1;
                    lock(&self.state).legacy_closed = true;
                    self.endpoint_ready.notify_all();
                }
                Ok(resp) => {
                    failures = 0;
                    self.read_legacy_stream(resp, replay);
                    replay = true;
                    {
                        let mut st = lock(&self.state);
                        st.endpoint = None;
                    }
                    if self.closing.load(Ordering::SeqCst) {
                        return;
                    }
                    log::warn!("the server closed the HTTP+SSE stream; reconnecting");
                    let pending: Vec<Vec<u8>> = lock(&self.legacy_pending)
                        .drain()
                        .map(|(_, raw)| raw)
                        .collect();
                    for raw in pending {
                        self.fail(
                            Some(&raw),
                            "upstream closed the HTTP+SSE stream before answering",
                        );
                    }
                }
            }
            let wait = (Duration::from_millis(500) * 2u32.saturating_pow(failures.min(6)))
                .min(MAX_BACKOFF);
            if !self.sleep_unless_closing(wait) {
                return;
            }
        }
    }

    pub(super) fn read_legacy_stream(&self, resp: ureq::Response, replay: bool) {
        let mut reader = BufReader::with_capacity(64 * 1024, resp.into_reader());
        let mut sse = SseReader::new(&mut reader, self.max);
        while let Ok(Some(event)) = sse.next_event() {
            if event.event.as_deref() == Some("endpoint") {
                let target = std::str::from_utf8(&event.data)
                    .ok()
                    .and_then(|d| self.cfg.url.join(d.trim()).ok());
                match target {
                    Some(t) if t.origin() == self.cfg.url.origin() => {
                        if replay {
                            self.legacy_replay(&t);
                        }
                        let mut st = lock(&self.state);
                        st.endpoint = Some(t);
                        st.legacy_closed = false;
                        self.endpoint_ready.notify_all();
                    }
                    _ => log::warn!("ignored an endpoint event naming another origin or no URL"),
                }
                continue;
            }
            let Some(summary) = &event.summary else {
                continue;
            };
            if let Kind::Response { id, .. } = Kind::of(summary) {
                let key = IdKey::from_raw(id);
                if lock(&self.legacy_swallow).remove(&key) {
                    continue; // the answer to the proxy's own replay
                }
                lock(&self.legacy_pending).remove(&key);
            }
            if event.oversized {
                self.oversized(summary, event.data_len());
            } else if !event.data.iter().all(u8::is_ascii_whitespace) {
                self.emit(&event.data);
            }
        }
    }

    /// A new legacy session: the host's `initialize` (under an id of the
    /// proxy's; its answer is swallowed) and `notifications/initialized`.
    pub(super) fn legacy_replay(&self, endpoint: &Url) {
        let (init, initialized) = {
            let st = lock(&self.state);
            (st.initialize.clone(), st.initialized.clone())
        };
        let Some(init) = init else {
            return;
        };
        let Some((line, raw_id)) = self.reissue(&init) else {
            return;
        };
        lock(&self.legacy_swallow).insert(IdKey::from_raw(&raw_id));
        log::info!("new HTTP+SSE session: replaying the handshake");
        let extra = [("Content-Type", "application/json")];
        let mut setup = Vec::new();
        for line in self.session_setup() {
            if let Some((own, raw_id)) = self.reissue(&line) {
                lock(&self.legacy_swallow).insert(IdKey::from_raw(&raw_id));
                setup.push(own);
            }
        }
        for body in std::iter::once(line).chain(initialized).chain(setup) {
            if let Err(f) = self.send("POST", endpoint, Some(&body), &extra, None, None) {
                log::warn!("replaying the handshake: {}", self.failure_text(&f));
                return;
            }
        }
    }

    /// Legacy: POST a message to the endpoint; the answer comes on the stream.
    pub(super) fn legacy_post(&self, body: &[u8], id: Option<&[u8]>) {
        let Some(endpoint) = self.wait_endpoint() else {
            let text = format!(
                "upstream unreachable: {}: no HTTP+SSE stream",
                self.redacted()
            );
            return self.fail(id, &text);
        };
        if let Some(id) = id {
            lock(&self.legacy_pending).insert(IdKey::from_raw(id), id.to_vec());
        }
        let extra = [("Content-Type", "application/json")];
        let failed = match self.send("POST", &endpoint, Some(body), &extra, None, None) {
            Ok(resp) if resp.status() < 300 => None,
            Ok(resp) => Some(self.status_text(&resp)),
            Err(f) => Some(self.failure_text(&f)),
        };
        if let Some(text) = failed {
            let still_pending = id.is_some_and(|id| {
                lock(&self.legacy_pending)
                    .remove(&IdKey::from_raw(id))
                    .is_some()
            });
            if still_pending || id.is_none() {
                self.fail(id, &text);
            }
        }
    }
}
