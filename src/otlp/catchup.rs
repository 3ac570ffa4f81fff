//! Sending later what was not exported: the engine of
//! `bir runs export --otlp`, and of [`CatchUp`], the same done in the
//! background by an exporting proxy or daemon.
//!
//! A run is ready to export when it has a header and is over: finished, or
//! interrupted (unfinished, and no process holds its journal: its proxy
//! died). A run being recorded is left alone; its own process exports it
//! when it ends.
//!
//! One exporter at a time per store catches up: it holds the advisory lock
//! `runs/.otlp.lock`. A complete pass leaves a watermark
//! (`runs/.otlp-caught-up`), so the next pass reads only journals written
//! since (a run skipped because it was being recorded holds the watermark
//! below its last write).

use std::fs::File;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::client::{Client, Delivered, SendFailure};
use super::ledger;
use super::mapping::spans_of;
use crate::home::{self, Wait};
use crate::record::store::{self, LoadedRun, Store};

/// Whether `run` can be exported now.
pub fn ready(run: &LoadedRun) -> bool {
    run.header.is_some() && (run.finish.is_some() || run.interrupted())
}

/// Exports `run` (its records) and, once every batch was accepted, marks
/// it in `store`. `Ok` with 0 spans: nothing to send (no header).
pub fn export_run(
    client: &Client,
    store: Option<&Store>,
    run_id: &str,
    run: &LoadedRun,
    sleep: &mut dyn FnMut(Duration) -> bool,
) -> Result<Delivered, SendFailure> {
    let spans = spans_of(run, &client.config().map);
    if spans.is_empty() {
        return Ok(Delivered::default());
    }
    let delivered = client.send(&spans, sleep)?;
    if let Some(store) = store
        && let Err(err) = ledger::mark_exported(store, run_id, delivered.spans, &client.label())
    {
        // Delivered, but not noted: a later export sends the same spans
        // (same ids) again, which a receiver treats as the same spans.
        log::warn!("run {run_id}: exported, but the export could not be noted: {err}");
    }
    Ok(delivered)
}

/// The background catch-up of one exporter (see the module doc).
pub struct CatchUp {
    store: Store,
    /// Journals not looked at yet, newest first (popped from the end).
    queue: Vec<(SystemTime, PathBuf)>,
    low_water: SystemTime,
    _lock: File,
}

const WATERMARK: &str = ".otlp-caught-up";
const LOCK: &str = ".otlp.lock";
/// Journals written this close to a pass's start are looked at again.
const WATERMARK_MARGIN: Duration = Duration::from_secs(2);

impl CatchUp {
    /// `None` when switched off (`BIR_AUTO_SYNC=off`, the recording
    /// service's switch, covers both), with no store, or while another bir
    /// catches up on this store.
    pub fn begin(store: Store) -> Option<CatchUp> {
        if std::env::var("BIR_AUTO_SYNC").is_ok_and(|v| matches!(v.trim(), "off" | "0")) {
            return None;
        }
        let lock = home::private_file()
            .create(true)
            .truncate(false)
            .write(true)
            .open(store.dir().join(LOCK))
            .ok()?;
        if !home::lock_exclusive(&lock, Wait::No).ok()? {
            return None;
        }
        let started = SystemTime::now();
        let since = store.read_watermark(WATERMARK);
        let mut queue = store.journals_written_after(since).unwrap_or_default();
        queue.reverse();
        if let Err(err) = ledger::prune(&store) {
            log::debug!("otlp catch-up: markers not pruned: {err}");
        }
        Some(CatchUp {
            store,
            queue,
            low_water: started.checked_sub(WATERMARK_MARGIN).unwrap_or(started),
            _lock: lock,
        })
    }

    /// Exports the next run that needs it, skipping those `is_live` names.
    /// `Ok(true)`: there may be more; `Ok(false)`: done (the watermark
    /// moves up); `Err`: the receiver failed, stop for now.
    pub fn export_next(
        &mut self,
        client: &Client,
        is_live: &dyn Fn(&str) -> bool,
        sleep: &mut dyn FnMut(Duration) -> bool,
    ) -> Result<bool, SendFailure> {
        while let Some((written, path)) = self.queue.pop() {
            let Ok(run) = store::load_path(&path) else {
                continue;
            };
            let id = run.id();
            if ledger::is_exported(&self.store, &id) || run.header.is_none() {
                continue;
            }
            if is_live(&id) || !ready(&run) {
                self.look_again(written);
                continue;
            }
            let sent = export_run(client, Some(&self.store), &id, &run, sleep)?;
            log::info!(
                "caught up: exported run {id} ({} span(s)) that an earlier session could not",
                sent.spans
            );
            if !self.queue.is_empty() {
                return Ok(true);
            }
        }
        if let Err(err) = self.store.write_watermark(WATERMARK, self.low_water) {
            log::debug!("otlp catch-up: the watermark was not saved: {err}");
        }
        Ok(false)
    }

    fn look_again(&mut self, written: SystemTime) {
        let before = written
            .checked_sub(Duration::from_millis(1))
            .unwrap_or(written);
        self.low_water = self.low_water.min(before);
    }
}
