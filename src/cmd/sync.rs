//! `bir sync`: send the recording service what it has not acknowledged.
//!
//! A run needs sending when its journal holds records after the last
//! `remote_ack` (other than `remote_ack` records themselves). Runs go
//! oldest first, each record in order from the acknowledged one on, with
//! the same requests and the same failure policy as the live sender
//! (`service::client`). What was delivered is then noted in the run's
//! journal as a new `remote_ack` record, so a second `bir sync` sends
//! nothing. Ids are the recorded ones: a record the service saw before is
//! the same row to it.
//!
//! Only runs that are over are sent: finished ones, and unfinished ones
//! whose journal has not changed for [`STALE_AFTER`] (the proxy that wrote
//! it is presumably gone). A run still being recorded is left alone: so is
//! any run whose journal its proxy still holds (see `record/journal.rs`),
//! however long it has been idle, and however far it got (a proxy that
//! wrote its run's end is still delivering it and noting what the service
//! acknowledged). A run is sent as the holder of its journal, read again
//! once held, so nothing another process noted meanwhile is sent twice and
//! the `remote_ack` is the journal's only new record.
//!
//! The same sending also happens without anyone asking: a proxy whose own
//! records reach the service catches up on earlier runs in the background
//! ([`crate::service::sync::CatchUp`], switched off by `BIR_AUTO_SYNC=off`).
//! One sender at a time per store: `bir sync` and the catch-up take the
//! same advisory lock.

use crate::error::{Context, Error, ExitStatus};
use crate::home::Wait;
use crate::output::out;
use crate::record::store::Store;
use crate::service::client::SendFailure;
use crate::service::client::{Client, ServiceConfig};
use crate::service::sync::{
    Outcome, STALE_AFTER, Standing, SyncLock, hold, pending, send_run, standing,
};
use crate::service::url as service_url;
use argh::FromArgs;

/// Send runs the recording service has not acknowledged yet.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "sync")]
pub(crate) struct SyncCmd {}

/// `bir sync`: a line per run; fails (exit status 1) when a run was not
/// delivered.
pub(crate) fn main(_cmd: SyncCmd) -> Result<ExitStatus, Error> {
    let cfg = match ServiceConfig::resolve() {
        Ok(Some(cfg)) => cfg,
        Ok(None) if service_url::env_service() == service_url::EnvService::Off => {
            return Err(Error::failure(
                "BIR_SERVICE_URL=off switches sending off; unset it (or give a URL) to sync.",
            ));
        }
        Ok(None) => {
            return Err(Error::failure(
                "no recording service is configured. Run `bir login --service URL` (or set BIR_SERVICE_URL), then `bir sync`.",
            ));
        }
        Err(err) => return Err(err),
    };
    let store = Store::open_default().context(|| "cannot open the run store".into())?;
    let lock = match SyncLock::take(&store, Wait::No) {
        Ok(None) => {
            crate::output::note(
                "bir sync: another bir is sending runs from this store; waiting for it…",
            );
            SyncLock::take(&store, Wait::Yes)
        }
        taken => taken,
    };
    let _lock = lock.context(|| format!("cannot lock {}", store.dir().display()))?;
    let mut runs = store
        .list()
        .context(|| format!("cannot read {}", store.dir().display()))?;
    runs.reverse(); // oldest first
    let service = crate::urls::display(&cfg.base);
    let mut client = Client::new(cfg);
    let mut down: Option<SendFailure> = None;
    let (mut sent_runs, mut sent_records, mut up_to_date, mut failed, mut recording) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    let mut not_tried = 0usize;
    let mut lines = Vec::new();
    for listed in &runs {
        if pending(listed).is_empty() {
            up_to_date += 1;
            continue;
        }
        let outcome = match hold(listed) {
            Ok(Some((run, mut journal))) => {
                let pending = pending(&run);
                match standing(&run, &pending) {
                    Standing::UpToDate => {
                        up_to_date += 1;
                        continue;
                    }
                    Standing::Recording => Outcome::Recording,
                    Standing::Broken => {
                        Outcome::Broken("its journal has no run header (torn at the start)".into())
                    }
                    Standing::Ready if down.is_some() => Outcome::NotTried(pending.len()),
                    Standing::Ready => send_run(journal.as_mut(), &mut client, &run, &pending),
                }
            }
            Ok(None) => Outcome::Recording,
            // Removed since it was listed.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => Outcome::Broken(format!("its journal cannot be opened: {err}")),
        };
        let id = listed.id();
        match outcome {
            Outcome::Sent { records } => {
                sent_runs += 1;
                sent_records += records;
                lines.push(format!("{id}: sent {records} record(s)"));
            }
            Outcome::Failed { sent, of, failure } => {
                failed += 1;
                sent_records += sent;
                lines.push(format!(
                    "{id}: not delivered ({failure}; {sent} of {of} record(s) sent). Next: {}",
                    failure.next_step()
                ));
                if failure.service_down() {
                    down = Some(failure);
                }
            }
            Outcome::NotTried(waiting) => {
                failed += 1;
                not_tried += 1;
                lines.push(format!(
                    "{id}: not tried ({waiting} record(s) waiting): the service is not taking records now"
                ));
            }
            Outcome::Recording => {
                recording += 1;
                lines.push(format!(
                    "{id}: skipped, still being recorded (sent once its proxy is done; a run left unfinished, after {} min without a write)",
                    STALE_AFTER.as_secs() / 60
                ));
            }
            Outcome::Broken(why) => {
                failed += 1;
                lines.push(format!(
                    "{id}: cannot be sent: {why}. Next: `bir runs rm {id}` if you do not need it"
                ));
            }
        }
    }
    if lines.is_empty() {
        out(&format!(
            "Nothing to send to {service}: {up_to_date} run(s) up to date."
        ));
        return Ok(ExitStatus::Success);
    }
    lines.push(format!(
        "sync to {service}: {sent_runs} run(s) sent ({sent_records} records), {failed} not delivered, {recording} still recording, {up_to_date} up to date"
    ));
    out(&lines.join("\n"));
    if let Some(f) = down.filter(|_| failed > 0 && not_tried > 0) {
        return Err(Error::failure(format!(
            "stopped early ({f}); {not_tried} run(s) not tried. Next: {}",
            f.next_step()
        )));
    }
    Ok(ExitStatus::failure_if(failed > 0))
}
