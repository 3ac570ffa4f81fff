//! Streamable HTTP beyond one POST: the session's GET stream for what the
//! server sends unasked (resumed with `Last-Event-ID`, bounded retries),
//! renewing an expired session (re-initialising and replaying the setup),
//! and ending the session when the host leaves.

use super::*;

impl UpstreamHttp {
    pub(super) fn get(&self, last_event_id: Option<&str>) -> Result<ureq::Response, HttpFailure> {
        let (session, protocol) = self.post_headers();
        let mut extra: Vec<(&str, &str)> = vec![("Accept", "text/event-stream")];
        if let Some(p) = protocol.as_deref() {
            extra.push(("MCP-Protocol-Version", p));
        }
        if let Some(l) = last_event_id {
            extra.push(("Last-Event-ID", l));
        }
        self.send("GET", &self.cfg.url, None, &extra, session.as_deref(), None)
    }

    /// A new session in place of an expired one: the host's `initialize`
    /// under an id of the proxy's (its answer is swallowed), then
    /// `notifications/initialized`. Invisible to the host.
    pub(super) fn reinit(&self, seen_epoch: u64) -> bool {
        let _guard = lock(&self.reinit_lock);
        let (init, initialized) = {
            let st = lock(&self.state);
            if st.epoch != seen_epoch {
                return true; // another thread renewed it already
            }
            (st.initialize.clone(), st.initialized.clone())
        };
        let Some(init) = init else {
            return false;
        };
        let Some((line, raw_id)) = self.reissue(&init) else {
            return false;
        };
        log::info!("the server's session expired (HTTP 404); starting a new one");
        let resp = match self.post(&self.cfg.url, &line, false) {
            Ok(r) if r.status() == 200 => r,
            Ok(r) => {
                log::warn!("renewing the session: {}", self.status_text(&r));
                return false;
            }
            Err(f) => {
                log::warn!("renewing the session: {}", self.failure_text(&f));
                return false;
            }
        };
        let session = resp
            .header("mcp-session-id")
            .filter(|s| header_safe(s))
            .map(str::to_string);
        let Answer::Answered(Some(answer)) =
            self.read_answer(resp, Some(&raw_id), Deliver::Swallow, Learn::Nothing, None)
        else {
            return false;
        };
        {
            let mut st = lock(&self.state);
            self.cfg.session_note.set(session.as_deref());
            st.session = session;
            st.epoch += 1;
        }
        self.learn_version(&answer);
        if let Some(initialized) = initialized
            && let Err(f) = self.post(&self.cfg.url, &initialized, true)
        {
            log::warn!("renewing the session: {}", self.failure_text(&f));
        }
        // The session state the host set up: log level, subscriptions.
        for line in self.session_setup() {
            let Some((own, raw_id)) = self.reissue(&line) else {
                continue;
            };
            match self.post(&self.cfg.url, &own, true) {
                Ok(r) if r.status() == 200 => {
                    self.read_answer(r, Some(&raw_id), Deliver::Swallow, Learn::Nothing, None);
                }
                Ok(r) => log::warn!("renewing the session: {}", self.status_text(&r)),
                Err(f) => log::warn!("renewing the session: {}", self.failure_text(&f)),
            }
        }
        true
    }

    /// The host's request `line` under a fresh id of the proxy's own
    /// (`bir:reinit-N`), without its newline, and that id as raw JSON.
    pub(super) fn reissue(&self, line: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        let id = format!(
            "bir:reinit-{}",
            self.own_ids.fetch_add(1, Ordering::Relaxed)
        );
        let mut own = crate::proxy::with_own_id(line, &id)?;
        own.pop();
        Some((own, serde_json::to_vec(&id).unwrap_or_default()))
    }

    /// The host's last `logging/setLevel` and its live
    /// `resources/subscribe`s, replayed into a new session.
    pub(super) fn session_setup(&self) -> Vec<Vec<u8>> {
        let st = lock(&self.state);
        st.log_level
            .iter()
            .cloned()
            .chain(st.subscriptions.iter().map(|(_, line)| line.clone()))
            .collect()
    }

    /// Remembers what a new session must be told again.
    pub(super) fn remember_setup(&self, method: &str, body: &[u8]) {
        #[derive(Deserialize)]
        struct UriParams {
            uri: Option<String>,
        }
        #[derive(Deserialize)]
        struct WithUri {
            params: Option<UriParams>,
        }
        let uri = || {
            serde_json::from_slice::<WithUri>(body)
                .ok()
                .and_then(|m| m.params)
                .and_then(|p| p.uri)
        };
        let mut st = lock(&self.state);
        match method {
            "logging/setLevel" => st.log_level = Some(body.to_vec()),
            "resources/subscribe" => {
                if let Some(uri) = uri() {
                    st.subscriptions.retain(|(u, _)| *u != uri);
                    if st.subscriptions.len() < 1000 {
                        st.subscriptions.push((uri, body.to_vec()));
                    }
                }
            }
            "resources/unsubscribe" => {
                if let Some(uri) = uri() {
                    st.subscriptions.retain(|(u, _)| *u != uri);
                }
            }
            _ => {}
        }
    }

    /// Opens the GET stream for server-initiated messages (once).
    pub(super) fn start_get_stream(self: &Arc<Self>) {
        if self.current_mode() != Some(TransportMode::Http)
            || self.get_started.swap(true, Ordering::SeqCst)
        {
            return;
        }
        let me = Arc::clone(self);
        let _ = thread::Builder::new()
            .name("bir-http-get".into())
            .stack_size(256 * 1024)
            .spawn(move || me.get_stream_loop());
    }

    pub(super) fn get_stream_loop(&self) {
        let mut last_id: Option<String> = None;
        let mut failures = 0u32;
        let mut retry = Duration::from_millis(1000);
        loop {
            if self.closing.load(Ordering::SeqCst) {
                return;
            }
            let epoch = lock(&self.state).epoch;
            let mut delivered = false;
            match self.get(last_id.as_deref()) {
                Ok(resp) if resp.status() == 200 => {
                    let mut reader = BufReader::with_capacity(64 * 1024, resp.into_reader());
                    let mut sse = SseReader::new(&mut reader, self.max);
                    while let Ok(Some(event)) = sse.next_event() {
                        if let Some(ms) = event.retry {
                            retry = Duration::from_millis(ms.min(60_000));
                        }
                        if let Some(id) = &event.id {
                            last_id = Some(id.clone());
                        }
                        delivered = true;
                        let Some(summary) = &event.summary else {
                            continue;
                        };
                        if event.oversized {
                            self.oversized(summary, event.data_len());
                        } else if !event.data.iter().all(u8::is_ascii_whitespace) {
                            self.emit(&event.data);
                        }
                    }
                }
                Ok(resp) if resp.status() == 405 => {
                    log::debug!("the server offers no GET stream (HTTP 405)");
                    return;
                }
                Ok(resp) if resp.status() == 404 && lock(&self.state).session.is_some() => {
                    last_id = None;
                    if !self.reinit(epoch) {
                        failures += 1;
                    }
                }
                Ok(resp) => log::debug!("GET stream: HTTP {}", resp.status()),
                Err(f) => log::debug!("GET stream: {}", self.failure_text(&f)),
            }
            failures = if delivered { 0 } else { failures + 1 };
            let wait = if failures == 0 {
                retry
            } else {
                (retry * 2u32.saturating_pow(failures.min(5))).min(MAX_BACKOFF)
            };
            if !self.sleep_unless_closing(wait) {
                return;
            }
        }
    }

    pub(super) fn sleep_unless_closing(&self, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        while Instant::now() < until {
            if self.closing.load(Ordering::SeqCst) {
                return false;
            }
            thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
        }
        !self.closing.load(Ordering::SeqCst)
    }

    /// The host left: end the session (`DELETE`, bounded).
    pub(super) fn end_session(&self) {
        let session = lock(&self.state).session.clone();
        let Some(session) = session else {
            return;
        };
        let protocol = lock(&self.state).protocol.clone();
        let mut extra: Vec<(&str, &str)> = Vec::new();
        if let Some(p) = protocol.as_deref() {
            extra.push(("MCP-Protocol-Version", p));
        }
        match self.send(
            "DELETE",
            &self.cfg.url,
            None,
            &extra,
            Some(&session),
            Some(DELETE_TIMEOUT),
        ) {
            Ok(resp) => log::debug!("session ended (HTTP {})", resp.status()),
            Err(f) => log::debug!("ending the session: {}", self.failure_text(&f)),
        }
    }

    // -- legacy HTTP+SSE (2024-11-05) ----------------------------------------
}
