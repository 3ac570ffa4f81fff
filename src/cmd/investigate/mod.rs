//! `bir investigate <run|latest>`: what went wrong or changed in one run,
//! without reading every step.
//!
//! The run and the history it is compared with are read through the one
//! run model (`record::store`). The work is split in two: the engine
//! `crate::investigate` turns a run plus earlier runs into
//! [`Findings`](crate::investigate::Findings) (pure, unit-tested on
//! hand-made runs), `render` prints them for people; `--json` prints the
//! same findings as one JSON document for scripts.

mod render;

use crate::error::{Context, Error, ExitStatus};
use crate::output::out;
use crate::record::store::{LoadedRun, Store, load_path};
use argh::FromArgs;

/// Show what went wrong or changed in a run: failed calls with what led to
/// them, loops, steps slower than usual, servers whose tools changed, and
/// gaps in the record.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "investigate")]
pub(crate) struct InvestigateCmd {
    /// the run: its id, a unique prefix of it, or `latest` (default)
    #[argh(positional, default = "String::from(\"latest\")")]
    pub run: String,

    /// print the findings as one JSON document
    #[argh(switch)]
    pub json: bool,
}

/// How many other runs (the most recently written ones) are read to learn
/// a tool's usual duration and a server's previous tool definitions. Each
/// run is read whole, so this bounds both the time and the memory one
/// `bir investigate` takes on a store that grew large; a few hundred runs
/// are plenty to know what "usual" is.
const HISTORY_RUNS: usize = 200;

pub(crate) fn main(cmd: InvestigateCmd) -> Result<ExitStatus, Error> {
    let store = Store::open_default().context(|| "cannot open the run store".into())?;
    let run = store.find(&cmd.run)?;
    let history = earlier_runs(&store, &run, HISTORY_RUNS)
        .context(|| format!("cannot read {}", store.dir().display()))?;
    let findings = crate::investigate::investigate(&run, &history);
    if cmd.json {
        let text = serde_json::to_string_pretty(&findings)
            .map_err(|e| Error::failure(format!("cannot write the findings as JSON: {e}")))?;
        out(&text);
    } else {
        out(render::text(&findings).trim_end());
    }
    Ok(ExitStatus::Success)
}

/// Up to `limit` runs other than `run` that started before it, read from
/// the most recently written journals back. A journal that cannot be read
/// is passed by: history is a comparison, not the subject.
fn earlier_runs(store: &Store, run: &LoadedRun, limit: usize) -> std::io::Result<Vec<LoadedRun>> {
    let started = run.header.as_ref().map(|h| h.started_at.as_str());
    let mut journals = store.journals_written_after(None)?;
    journals.reverse();
    let mut found = Vec::new();
    for (_, path) in journals {
        if found.len() >= limit {
            break;
        }
        if path == run.path {
            continue;
        }
        let Ok(other) = load_path(&path) else {
            continue;
        };
        let other_started = other.header.as_ref().map(|h| h.started_at.as_str());
        // Timestamps are RFC 3339 in UTC with a fixed width: comparing the
        // text compares the times.
        let earlier = match (other_started, started) {
            (Some(o), Some(s)) => o < s,
            _ => false,
        };
        if earlier {
            found.push(other);
        }
    }
    Ok(found)
}
