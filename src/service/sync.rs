//! Sending what the recording service has not acknowledged: the engine of
//! `bir sync` and of [`CatchUp`], the same sending done in the background
//! by a proxy whose own records get through (see the `bir sync` command for
//! which runs are sent and when).
//!
//! One sender at a time per store: both take the advisory lock
//! `runs/.sync.lock`. A complete catch-up pass leaves a watermark
//! (`runs/.caught-up`), so the next pass reads only journals written since.

use std::fs::File;
use std::time::{Duration, SystemTime};

use super::client::{Client, SendFailure};
use crate::home::{self, Wait};
use crate::record::catchup::{self, JournalPass};
use crate::record::journal::{self, JournalFile};
use crate::record::model::{Record, RemoteAck, RunEvent};
use crate::record::store::{self, LoadedRun, Store};
use crate::time;

/// An unfinished run counts as abandoned after this long without a write.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(10 * 60);

/// How one run went.
pub(crate) enum Outcome {
    Sent {
        records: usize,
    },
    Failed {
        sent: usize,
        of: usize,
        failure: SendFailure,
    },
    /// Not tried: the service is down, per an earlier run. How many
    /// records wait.
    NotTried(usize),
    Recording,
    Broken(String),
}

/// Where a run stands for sending.
pub(crate) enum Standing {
    /// Nothing the service has not acknowledged.
    UpToDate,
    /// Unfinished and written to lately: its proxy is presumably still at it.
    Recording,
    /// No run header: it cannot be sent.
    Broken,
    Ready,
}

pub(crate) fn standing(run: &LoadedRun, pending: &[&Record]) -> Standing {
    if pending.is_empty() {
        Standing::UpToDate
    } else if run.finish.is_none() && !stale(run) {
        Standing::Recording
    } else if run.header.is_none() {
        Standing::Broken
    } else {
        Standing::Ready
    }
}

/// The records the service has not acknowledged, in order.
pub(crate) fn pending(run: &LoadedRun) -> Vec<&Record> {
    run.records
        .iter()
        .filter(|r| r.seq > run.acked && !matches!(r.event, RunEvent::RemoteAck(_)))
        .collect()
}

/// Takes the journal of a run `listed` as needing sending, and reads the
/// run again: `Ok(None)` while its proxy (or another bir) holds it. What
/// the listing read may be out of date by then (the proxy may have noted
/// its acknowledgements and ended since): sending from it would send
/// records twice.
pub(crate) fn hold(
    listed: &LoadedRun,
) -> std::io::Result<Option<(LoadedRun, Box<dyn JournalFile>)>> {
    let Some(journal) = journal::claim(&listed.path)? else {
        return Ok(None);
    };
    Ok(Some((store::load_path(&listed.path)?, journal)))
}

pub(crate) fn stale(run: &LoadedRun) -> bool {
    std::fs::metadata(&run.path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .is_some_and(|age| age >= STALE_AFTER)
}

/// Sends `pending` of `run`, whose `journal` this process holds, and notes
/// there what was delivered.
pub(crate) fn send_run(
    journal: &mut dyn JournalFile,
    client: &mut Client,
    run: &LoadedRun,
    pending: &[&Record],
) -> Outcome {
    let id = run.id();
    let mut delivered: Option<u64> = None;
    let mut sent = 0;
    let mut failure = None;
    for record in pending {
        let Some(req) = super::wire::request_for(&id, record) else {
            continue;
        };
        let mut sleep = |d: Duration, _: &SendFailure| {
            std::thread::sleep(d);
            true
        };
        match client.deliver(&req, &mut sleep) {
            Ok(()) => {
                sent += 1;
                delivered = Some(record.seq);
            }
            Err(f) => {
                failure = Some(f);
                break;
            }
        }
    }
    if let Some(up_to) = delivered
        && let Err(err) = note_ack(journal, run, up_to)
    {
        // Delivered, but not noted: the next sync sends it again (the
        // service sees the same ids).
        log::warn!(
            "run {id}: delivered, but {} could not be updated: {err}",
            run.path.display()
        );
    }
    match failure {
        Some(failure) => Outcome::Failed {
            sent,
            of: pending.len(),
            failure,
        },
        None => Outcome::Sent { records: sent },
    }
}

/// Appends `remote_ack {upTo}` to the run's journal (held by this process,
/// so `seq` follows the run's last record and no other writer's).
fn note_ack(journal: &mut dyn JournalFile, run: &LoadedRun, up_to: u64) -> std::io::Result<()> {
    let record = Record {
        seq: run.last_seq() + 1,
        event: RunEvent::RemoteAck(RemoteAck {
            up_to,
            at: time::rfc3339(SystemTime::now()),
        }),
    };
    let json = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
    journal.append(&journal::frame(&json))?;
    journal.sync()
}

/// The store's sender lock (`flock` on `runs/.sync.lock`), released when
/// dropped or when the process ends, however it ends.
pub(crate) struct SyncLock {
    _file: File,
}

impl SyncLock {
    /// `Ok(None)`: another bir holds it and `wait` is [`Wait::No`].
    pub(crate) fn take(store: &Store, wait: Wait) -> std::io::Result<Option<SyncLock>> {
        let file = home::private_file()
            .create(true)
            .truncate(false)
            .write(true)
            .open(store.dir().join(".sync.lock"))?;
        let taken = home::lock_exclusive(&file, wait)?;
        Ok(taken.then_some(SyncLock { _file: file }))
    }
}

/// A proxy's background catch-up: it sends, oldest first, the runs earlier
/// sessions could not deliver. The recording-service thread drives it, one
/// run per turn, only when it has no record of its own session to send and
/// only once the service has taken one of them (so a service that is down
/// costs nothing more). A failure ends the catch-up for this process; what
/// is left waits for the next proxy or `bir sync`.
///
/// Each pass is a [`JournalPass`] (`runs/.caught-up` is its watermark), so
/// a proxy reads only the journals written since the last complete pass.
pub(crate) struct CatchUp {
    store: Store,
    pass: JournalPass,
    _lock: SyncLock,
}

/// The watermark's file in the store.
const WATERMARK: &str = ".caught-up";

impl CatchUp {
    /// `None` when switched off (`BIR_AUTO_SYNC=off`), when there is no
    /// store, or when another bir is sending from this store right now.
    pub(crate) fn begin() -> Option<CatchUp> {
        if catchup::switched_off() {
            return None;
        }
        let store = Store::open_default().ok()?;
        let lock = SyncLock::take(&store, Wait::No).ok()??;
        Some(CatchUp::over(store, lock))
    }

    fn over(store: Store, lock: SyncLock) -> CatchUp {
        CatchUp {
            pass: JournalPass::begin(&store, WATERMARK),
            store,
            _lock: lock,
        }
    }

    /// Sends the next run that needs it, skipping the runs `is_live` names
    /// (this process's own). `Ok(true)`: there may be more; `Ok(false)`:
    /// done (the watermark is moved up); `Err`: the service failed, stop
    /// for now (the watermark stays).
    pub(crate) fn send_next(
        &mut self,
        client: &mut Client,
        is_live: &dyn Fn(&str) -> bool,
    ) -> Result<bool, SendFailure> {
        while let Some((written, path)) = self.pass.next() {
            let Ok(listed) = store::load_path(&path) else {
                continue;
            };
            if pending(&listed).is_empty() {
                continue;
            }
            let held = if is_live(&listed.id()) {
                Ok(None)
            } else {
                hold(&listed)
            };
            let (run, mut journal) = match held {
                Ok(Some(held)) => held,
                Ok(None) => {
                    self.pass.look_again(written);
                    continue;
                }
                Err(_) => continue,
            };
            let pending = pending(&run);
            match standing(&run, &pending) {
                Standing::UpToDate | Standing::Broken => continue,
                Standing::Recording => {
                    self.pass.look_again(written);
                    continue;
                }
                Standing::Ready => {}
            }
            match send_run(journal.as_mut(), client, &run, &pending) {
                Outcome::Sent { records } => log::info!(
                    "caught up: sent run {} ({records} record(s)) that an earlier session could not",
                    run.id()
                ),
                Outcome::Failed { failure, .. } => return Err(failure),
                _ => {}
            }
            if self.pass.has_more() {
                return Ok(true);
            }
        }
        self.pass.complete(&self.store);
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    #[test]
    fn a_pass_reads_only_journals_written_since_the_watermark() {
        let dir = std::env::temp_dir().join(format!("bir-catch-up-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(&dir.join("runs"), std::sync::Arc::new(journal::DiskStorage))
            .expect("store");
        let day = Duration::from_secs(86_400);
        let now = SystemTime::now();
        for (name, age) in [("old", 3 * day), ("mid", 2 * day), ("new", Duration::ZERO)] {
            let path = store.dir().join(format!("run_{name}.journal"));
            let file = File::create(&path).expect("create");
            file.set_modified(now - age).expect("set mtime");
        }
        let names = |c: &CatchUp| c.pass.remaining();
        let lock = || {
            SyncLock::take(&store, Wait::No)
                .expect("lock")
                .expect("free")
        };
        // No watermark: everything, oldest first.
        let all = CatchUp::over(store.clone(), lock());
        assert_eq!(
            names(&all),
            ["run_old.journal", "run_mid.journal", "run_new.journal"]
        );
        drop(all);
        // A pass that completed a day and a half ago: only what came since.
        store
            .write_watermark(WATERMARK, now - day - day / 2)
            .expect("write");
        assert!(
            store
                .read_watermark(WATERMARK)
                .is_some_and(|w| w <= now - day),
            "read back"
        );
        let later = CatchUp::over(store.clone(), lock());
        assert_eq!(names(&later), ["run_new.journal"]);
        // One bir sends at a time.
        assert!(SyncLock::take(&store, Wait::No).expect("try").is_none());
        drop(later);
        // An unreadable watermark means a full pass, never a skipped run.
        std::fs::write(store.dir().join(WATERMARK), "garbage").expect("write");
        assert_eq!(names(&CatchUp::over(store.clone(), lock())).len(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
