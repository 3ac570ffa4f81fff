//! `bir runs export --otlp <run>|--since <age>`: runs sent to the
//! OpenTelemetry receiver now, in the foreground (the same export the
//! proxy's and the daemon's background catch-up do).
//!
//! A run named by id is sent even if it went out before: its span ids are
//! the same every time, so the receiver gets the same spans again, not
//! copies. `--since` sends only the runs not exported yet.

use std::time::{Duration, SystemTime};

use crate::error::{Error, ExitStatus};
use crate::otlp::catchup::{export_run, ready};
use crate::otlp::client::{Client, FailKind};
use crate::otlp::config::OtlpConfig;
use crate::otlp::ledger;
use crate::output::{escape, out};
use crate::record::store::{LoadedRun, Store};

pub(super) fn export(
    store: &Store,
    run: Option<&str>,
    since: Option<&str>,
) -> Result<ExitStatus, Error> {
    let runs: Vec<LoadedRun> = match (run, since) {
        (Some(_), Some(_)) => {
            return Err(Error::usage("give a run or --since, not both"));
        }
        (None, None) => {
            return Err(Error::usage(
                "name the run to export, or give --since (e.g. --since 7d) for every run not exported yet",
            ));
        }
        (Some(wanted), None) => vec![store.find(wanted)?],
        (None, Some(age)) => {
            let age = super::parse_age(age)?;
            let cutoff = SystemTime::now()
                .checked_sub(age)
                .unwrap_or(SystemTime::UNIX_EPOCH);
            let cutoff = cutoff
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            let mut runs: Vec<LoadedRun> = store
                .list()
                .map_err(|e| {
                    Error::failure(format!("cannot read {}", store.dir().display())).because(e)
                })?
                .into_iter()
                .filter(|r| {
                    r.header
                        .as_ref()
                        .and_then(|h| crate::time::parse_rfc3339(&h.started_at))
                        .is_some_and(|t| t >= cutoff)
                })
                .filter(|r| ready(r) && !ledger::is_exported(store, &r.id()))
                .collect();
            runs.reverse(); // oldest first
            runs
        }
    };
    let cfg = match OtlpConfig::from_env() {
        Ok(Some(cfg)) => cfg,
        Ok(None) => {
            return Err(Error::usage(
                "no OpenTelemetry receiver configured: set BIR_OTLP_ENDPOINT (e.g. http://localhost:4318), or BIR_OTLP=1 to use the OTEL_EXPORTER_OTLP_* variables",
            ));
        }
        Err(msg) => return Err(Error::usage(msg)),
    };
    let client = Client::new(cfg);
    if runs.is_empty() {
        out("nothing to export: every run in that time was exported already");
        return Ok(ExitStatus::Success);
    }
    let mut sleep = |d: Duration| {
        std::thread::sleep(d);
        true
    };
    let mut failed = false;
    for run in &runs {
        let id = run.id();
        if run.header.is_none() {
            crate::error::print(
                "bir runs export",
                &Error::failure(format!(
                    "run {} has no header; it cannot be exported",
                    escape(&id)
                )),
            );
            failed = true;
            continue;
        }
        match export_run(&client, Some(store), &id, run, &mut sleep) {
            Ok(sent) => out(&format!(
                "exported {}: {} span(s) in {} request(s) to {}{}",
                escape(&id),
                sent.spans,
                sent.requests,
                client.label(),
                if sent.rejected > 0 {
                    format!(" ({} rejected by the receiver)", sent.rejected)
                } else {
                    String::new()
                }
            )),
            Err(failure) => {
                let hint = match failure.kind {
                    FailKind::Unreachable => {
                        "; is the receiver running, and is BIR_OTLP_ENDPOINT its OTLP/HTTP address?"
                    }
                    FailKind::Busy(_) => "; the receiver is busy, try again later",
                    _ => "",
                };
                crate::error::print(
                    "bir runs export",
                    &Error::failure(format!(
                        "run {} was not exported: {failure}{hint}",
                        escape(&id)
                    )),
                );
                failed = true;
            }
        }
    }
    Ok(ExitStatus::failure_if(failed))
}
