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
use std::time::Duration;

use super::client::{Client, Delivered, SendFailure};
use super::ledger;
use super::mapping::spans_of;
use crate::home::{self, Wait};
use crate::record::catchup::{self, JournalPass};
use crate::record::store::{self, LoadedRun, Store};

/// Whether `run` can be exported now.
pub(crate) fn ready(run: &LoadedRun) -> bool {
    run.header.is_some() && (run.finish.is_some() || run.interrupted())
}

/// Exports `run` (its records) and, once every batch was accepted, marks
/// it in `store`. `Ok` with 0 spans: nothing to send (no header).
pub(crate) fn export_run(
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
pub(crate) struct CatchUp {
    store: Store,
    pass: JournalPass,
    _lock: File,
}

const WATERMARK: &str = ".otlp-caught-up";
const LOCK: &str = ".otlp.lock";

impl CatchUp {
    /// `None` when switched off (`BIR_AUTO_SYNC=off`, the recording
    /// service's switch, covers both), with no store, or while another bir
    /// catches up on this store.
    pub(crate) fn begin(store: Store) -> Option<CatchUp> {
        if catchup::switched_off() {
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
        if let Err(err) = ledger::prune(&store) {
            log::debug!("otlp catch-up: markers not pruned: {err}");
        }
        Some(CatchUp {
            pass: JournalPass::begin(&store, WATERMARK),
            store,
            _lock: lock,
        })
    }

    /// Exports the next run that needs it, skipping those `is_live` names.
    /// `Ok(true)`: there may be more; `Ok(false)`: done (the watermark
    /// moves up); `Err`: the receiver failed, stop for now.
    pub(crate) fn export_next(
        &mut self,
        client: &Client,
        is_live: &dyn Fn(&str) -> bool,
        sleep: &mut dyn FnMut(Duration) -> bool,
    ) -> Result<bool, SendFailure> {
        while let Some((written, path)) = self.pass.next() {
            let Ok(run) = store::load_path(&path) else {
                continue;
            };
            let id = run.id();
            if ledger::is_exported(&self.store, &id) || run.header.is_none() {
                continue;
            }
            if is_live(&id) || !ready(&run) {
                self.pass.look_again(written);
                continue;
            }
            let sent = export_run(client, Some(&self.store), &id, &run, sleep)?;
            log::info!(
                "caught up: exported run {id} ({} span(s)) that an earlier session could not",
                sent.spans
            );
            if self.pass.has_more() {
                return Ok(true);
            }
        }
        self.pass.complete(&self.store);
        Ok(false)
    }
}
