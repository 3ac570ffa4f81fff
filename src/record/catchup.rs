//! One pass of a background catch-up over a store's journals: what the
//! recording service's catch-up (`service::sync`) and the OpenTelemetry
//! one (`otlp::catchup`) share. What each sends, and when a run is ready
//! for it, stays theirs.
//!
//! So that each pass does not read the whole store, a complete pass leaves
//! a watermark (a file in the store, one per destination): every journal
//! last written before it was delivered, or cannot be. The next pass reads
//! only journals written since. A run skipped because it was still being
//! recorded holds the watermark below its own last write
//! ([`JournalPass::look_again`]), so the next pass sees it again.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::store::Store;

/// Journals written this close to a pass's start are looked at again: a
/// file's time and the clock may disagree by a little.
const WATERMARK_MARGIN: Duration = Duration::from_secs(2);

/// Whether background catch-up is switched off (`BIR_AUTO_SYNC=off` or
/// `0`; one switch for every destination).
pub(crate) fn switched_off() -> bool {
    std::env::var("BIR_AUTO_SYNC").is_ok_and(|v| matches!(v.trim(), "off" | "0"))
}

/// The journals one pass has still to look at, and where its watermark
/// goes if it completes.
#[derive(Debug)]
pub(crate) struct JournalPass {
    /// The watermark's file name in the store.
    watermark: &'static str,
    /// Journals not looked at yet, with their last write, newest first
    /// (popped from the end: the oldest goes first).
    queue: Vec<(SystemTime, PathBuf)>,
    /// Where the watermark goes if this pass completes.
    low_water: SystemTime,
}

impl JournalPass {
    /// A pass over the journals of `store` written since its last complete
    /// pass (all of them when `watermark` is missing or unreadable).
    pub(crate) fn begin(store: &Store, watermark: &'static str) -> JournalPass {
        let started = SystemTime::now();
        let since = store.read_watermark(watermark);
        let mut queue = store.journals_written_after(since).unwrap_or_default();
        log::debug!(
            "catch-up ({watermark}): {} journal(s) written since the last complete pass",
            queue.len()
        );
        queue.reverse();
        JournalPass {
            watermark,
            queue,
            low_water: started.checked_sub(WATERMARK_MARGIN).unwrap_or(started),
        }
    }

    /// The next journal to look at, oldest first, with its last write.
    pub(crate) fn next(&mut self) -> Option<(SystemTime, PathBuf)> {
        self.queue.pop()
    }

    /// Whether journals are left to look at.
    pub(crate) fn has_more(&self) -> bool {
        !self.queue.is_empty()
    }

    /// A journal last written at `written` was not sent now (it is being
    /// recorded): the watermark stays below it, so the next pass sees it.
    pub(crate) fn look_again(&mut self, written: SystemTime) {
        let before = written
            .checked_sub(Duration::from_millis(1))
            .unwrap_or(written);
        self.low_water = self.low_water.min(before);
    }

    /// Every journal was looked at: the watermark moves up.
    pub(crate) fn complete(&self, store: &Store) {
        if let Err(err) = store.write_watermark(self.watermark, self.low_water) {
            log::debug!(
                "catch-up: the watermark {} was not saved: {err}",
                self.watermark
            );
        }
    }

    /// The file names still to look at, oldest first (tests).
    #[cfg(test)]
    pub(crate) fn remaining(&self) -> Vec<String> {
        self.queue
            .iter()
            .rev()
            .filter_map(|(_, p)| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::journal;
    use std::fs::File;

    /// A journal looked at again holds the watermark below its last write;
    /// a pass that skipped nothing moves it up to about its start.
    #[test]
    fn a_journal_looked_at_again_holds_the_watermark_below_it() {
        let dir = std::env::temp_dir().join(format!("bir-journal-pass-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(&dir.join("runs"), std::sync::Arc::new(journal::DiskStorage))
            .expect("store");
        let hour = Duration::from_secs(3600);
        let written = SystemTime::now() - hour;
        let path = store.dir().join("run_a.journal");
        File::create(&path)
            .and_then(|f| f.set_modified(written))
            .expect("journal");

        let mut pass = JournalPass::begin(&store, ".test-caught-up");
        assert_eq!(pass.remaining(), ["run_a.journal"]);
        let (at, _) = pass.next().expect("the journal");
        assert!(!pass.has_more());
        pass.look_again(at);
        pass.complete(&store);
        let mark = store.read_watermark(".test-caught-up").expect("saved");
        assert!(mark < written, "below the skipped journal");
        assert_eq!(
            JournalPass::begin(&store, ".test-caught-up").remaining(),
            ["run_a.journal"],
            "the next pass sees it again"
        );

        let mut pass = JournalPass::begin(&store, ".test-caught-up");
        while pass.next().is_some() {}
        pass.complete(&store);
        assert!(
            JournalPass::begin(&store, ".test-caught-up")
                .remaining()
                .is_empty()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
