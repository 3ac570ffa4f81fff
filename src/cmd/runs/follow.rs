//! `bir runs show --follow`: a run's calls as they are recorded, like
//! `tail -f`, until the run ends.
//!
//! The journal is polled (`record::journal::Tail`): each poll reads only
//! the bytes appended since the last one and decodes the whole records
//! among them; a record cut in the middle (its writer is still writing it)
//! stays buffered until the rest arrives. A call is printed once its response is recorded, numbered
//! as `bir runs show` numbers it (`record::calls`). The follow ends at the
//! run's end record, or when no writer holds the journal any more (its
//! proxy ended without finishing it, or was killed): then whatever was
//! written before the writer let go is read, and the run's last lines say
//! how it ended.

use std::collections::HashSet;
use std::time::Duration;

use super::{Screen, write_call, write_columns, write_finish, write_header, write_snapshot};
use crate::cmd::runs::ShowCmd;
use crate::error::{Context, Error, ExitStatus};
use crate::record::calls::reader_calls;
use crate::record::journal;
use crate::record::store::{LoadedRun, Store};

/// How often an idle journal is looked at again. Short enough to feel
/// live; a poll that finds nothing costs one `read` that returns 0.
const POLL: Duration = Duration::from_millis(100);

/// Follows the run `cmd` names until it ends.
pub(super) fn follow(store: &Store, cmd: &ShowCmd) -> Result<ExitStatus, Error> {
    let summary = store.find_summary(&cmd.run)?;
    let path = store.dir().join(&summary.file);
    let mut tail =
        journal::Tail::open(&path).context(|| format!("cannot read {}", path.display()))?;
    let mut view = View {
        run: LoadedRun {
            path: path.clone(),
            ..LoadedRun::default()
        },
        ..View::default()
    };
    loop {
        let got = tail
            .poll(|record| view.run.absorb(record))
            .context(|| format!("cannot read {}", path.display()))?;
        view.print_new(cmd.full);
        if view.run.finish.is_some() {
            break;
        }
        if got == 0 && !journal::is_held(&path) {
            // The writer let go: everything it wrote is in the file now.
            tail.poll(|record| view.run.absorb(record))
                .context(|| format!("cannot read {}", path.display()))?;
            view.print_new(cmd.full);
            break;
        }
        if got == 0 {
            std::thread::sleep(POLL);
        }
    }
    view.run.torn_bytes = tail.pending_bytes();
    view.print_end(cmd.full);
    Ok(ExitStatus::Success)
}

/// What has been printed of the run so far.
#[derive(Default)]
struct View {
    run: LoadedRun,
    header_printed: bool,
    snapshots_printed: usize,
    turns_printed: usize,
    /// The calls printed, by their first step index.
    calls_printed: HashSet<u64>,
    /// The calls whose model words (the context before the call) were
    /// printed, by their first step index.
    words_printed: HashSet<u64>,
}

impl View {
    /// Prints what arrived since the last call: the header once it is
    /// there, new servers and prompts, calls whose response is recorded.
    fn print_new(&mut self, full: bool) {
        let mut t = Screen::default();
        if !self.header_printed {
            if self.run.header.is_none() {
                return;
            }
            write_header(&mut t, &self.run);
            write_columns(&mut t);
            self.header_printed = true;
            self.snapshots_printed = self.run.snapshots.len();
        }
        for s in &self.run.snapshots[self.snapshots_printed..] {
            write_snapshot(&mut t, s);
        }
        self.snapshots_printed = self.run.snapshots.len();
        for turn in &self.run.turns[self.turns_printed..] {
            t.line(format_args!(
                "  Turn {} · {}",
                turn.turn,
                super::clip(&turn.prompt.trim().replace('\n', " ⏎ "), 100)
            ));
        }
        self.turns_printed = self.run.turns.len();
        self.print_calls(&mut t, full, false);
        t.print_any();
    }

    /// Prints the calls not printed yet: those answered, or every one when
    /// `all` (the run is over: a call left without a response shows so).
    ///
    /// The model's words before a call are printed as soon as they are
    /// recorded, ahead of the call's answer: with the Claude Code mod link
    /// they arrive with the call's selection, seconds before its result.
    fn print_calls(&mut self, t: &mut Screen, full: bool, all: bool) {
        for call in reader_calls(&self.run) {
            let words = call.selected.and_then(|s| s.context.as_deref());
            if let Some(words) = words.filter(|w| !w.trim().is_empty())
                && self.words_printed.insert(call.order)
            {
                t.line(format_args!(
                    "  {:>4}  … {}",
                    call.number,
                    super::clip(&words.trim().replace('\n', " ⏎ "), 100)
                ));
            }
            if (all || call.response.is_some()) && self.calls_printed.insert(call.order) {
                write_call(t, &call, full);
            }
        }
    }

    /// The run's last lines, once it ended.
    fn print_end(&mut self, full: bool) {
        let mut t = Screen::default();
        if !self.header_printed {
            t.line(format_args!(
                "{}: nothing recorded yet when the run ended",
                self.run.id()
            ));
        }
        self.print_calls(&mut t, full, true);
        t.line("");
        write_finish(
            &mut t,
            &self.run,
            "interrupted: its recorder ended without finishing the run (killed, or the machine stopped)",
            "not finished: its recorder is still running",
        );
        t.print();
    }
}
