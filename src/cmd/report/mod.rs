//! `bir report`: a run as one self-contained HTML page.
//!
//! The page itself is the engine's (`crate::report`: `document` turns a
//! [`LoadedRun`] into the page's data, `page` embeds it, escaped, in a
//! fixed shell); this command decides where it is written and when.
//!
//! The page holds recorded (redacted) data, so by default it is written
//! where the runs are, `$BIR_HOME/reports/<run>.html`, as a private file;
//! `-o` writes it elsewhere (still 0600). It is replaced atomically (a
//! temporary file renamed over it), so a browser reloading it never reads
//! half a page.
//!
//! `--follow` rewrites the page whenever the journal grows, with `live`
//! set so the page reloads itself, and once more without it when the run
//! has ended (finished, or its writer gone): the last page stays still.
//! While following it is also rewritten every [`HEARTBEAT`] even when
//! nothing happened; the page stops reloading when it is older than a few
//! heartbeats, so a follower killed with ^C does not leave a page that
//! reloads forever.

use argh::FromArgs;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::error::{Context, Error, ExitStatus};
use crate::home::{ensure_private_dir, replace_private_file, report_page};
use crate::output::{escape, out};
use crate::record::prices::user_prices;
use crate::record::store::{LoadedRun, Store, load_path};
use crate::report::{document, page};
use crate::time::rfc3339;

/// Write a run as one self-contained HTML page (no network requests; open
/// it from disk in any browser).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "report")]
pub(crate) struct ReportCmd {
    /// the run: its id, a unique prefix of it, or `latest`
    #[argh(positional, default = "String::from(\"latest\")")]
    pub run: String,

    /// where to write the page (default: $BIR_HOME/reports/<run>.html)
    #[argh(option, short = 'o')]
    pub output: Option<PathBuf>,

    /// open the page in a browser (xdg-open or open), else print its path
    #[argh(switch)]
    pub open: bool,

    /// keep the page up to date while the run is live (the page reloads
    /// itself); return when the run ends
    #[argh(switch)]
    pub follow: bool,

    /// fetch the run from the recording service (its whole id, or `latest`)
    #[argh(switch)]
    pub remote: bool,
}

/// How often `--follow` looks at the journal.
const POLL: Duration = Duration::from_millis(300);
/// How often `--follow` rewrites the page even if the run did not change
/// (the page's script treats a page older than 4 heartbeats as abandoned).
const HEARTBEAT: Duration = Duration::from_secs(5);

pub(crate) fn main(cmd: ReportCmd) -> Result<ExitStatus, Error> {
    let store = Store::open_default().context(|| "cannot open the run store".into())?;
    // `--remote`: the run fetched from the recording service (into a
    // scratch store that lives until the page is written).
    let fetched = match cmd.remote {
        true => Some(crate::service::read::fetch(&cmd.run)?),
        false => None,
    };
    let run = match &fetched {
        Some(f) => f.first()?,
        None => store.find(&cmd.run)?,
    };
    let target = match &cmd.output {
        Some(path) => path.clone(),
        None => default_path(&run.id())?,
    };
    let live = cmd.follow && fetched.is_none() && is_live(&run);
    write_page(&run, &target, live)?;
    out(&format!("wrote {}", escape(&target.display().to_string())));
    if cmd.open {
        open(&target);
    }
    if live {
        out(
            "following the run: the page reloads itself as steps arrive; this ends when the run does (^C to stop)",
        );
        follow(run.path.clone(), &target)?;
        out(&format!(
            "the run ended; {} is final",
            escape(&target.display().to_string())
        ));
    }
    Ok(ExitStatus::Success)
}

/// `$BIR_HOME/reports/<run>.html` (the directory private, like the store).
fn default_path(run_id: &str) -> Result<PathBuf, Error> {
    let page = report_page(run_id)
        .ok_or_else(|| Error::failure("no home directory: set BIR_HOME, or give -o FILE"))?;
    if let Some(dir) = page.parent() {
        ensure_private_dir(dir).context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(page)
}

/// Still being written: not finished, and its writer holds the journal.
fn is_live(run: &LoadedRun) -> bool {
    run.finish.is_none() && !run.interrupted()
}

/// Renders `run` and replaces `target` with it.
fn write_page(run: &LoadedRun, target: &Path, live: bool) -> Result<(), Error> {
    let mut doc = document::build(run, live, &rfc3339(SystemTime::now()));
    document::add_costs(&mut doc, run, user_prices());
    let html = page::render(&doc, &run.id());
    replace_private_file(target, html.as_bytes())
        .context(|| format!("cannot write {}", target.display()))
}

/// Rewrites the page as the journal changes, until the run ends.
fn follow(journal: PathBuf, target: &Path) -> Result<(), Error> {
    let mut seen = fingerprint(&journal);
    let mut written = Instant::now();
    loop {
        std::thread::sleep(POLL);
        let now = fingerprint(&journal);
        if now == seen && written.elapsed() < HEARTBEAT {
            continue;
        }
        seen = now;
        let run = load_path(&journal).context(|| format!("cannot read {}", journal.display()))?;
        let live = is_live(&run);
        write_page(&run, target, live)?;
        written = Instant::now();
        if !live {
            return Ok(());
        }
    }
}

/// What changes when a journal is appended to (or removed).
fn fingerprint(path: &Path) -> Option<(u64, Option<SystemTime>)> {
    fs::metadata(path)
        .ok()
        .map(|m| (m.len(), m.modified().ok()))
}

/// How long `--open` waits to learn whether the opener failed (xdg-open
/// without a desktop fails at once; one that works may keep running).
const OPENER_VERDICT: Duration = Duration::from_secs(3);

/// Opens `page` with the desktop's opener, or says where it is.
fn open(page: &Path) {
    let opener = ["xdg-open", "open"]
        .into_iter()
        .find(|name| on_path(name).is_some());
    let Some(name) = opener else {
        out(&format!(
            "no xdg-open or open here: open {} in a browser",
            escape(&page.display().to_string())
        ));
        return;
    };
    let child = Command::new(name)
        .arg(page)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let failed = match child {
        Err(_) => true,
        Ok(mut child) => {
            let deadline = Instant::now() + OPENER_VERDICT;
            loop {
                match child.try_wait() {
                    Ok(Some(status)) => break !status.success(),
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    // Still running (a browser it started in the
                    // foreground): it is opening the page.
                    _ => break false,
                }
            }
        }
    };
    if failed {
        out(&format!(
            "{name} could not open it (no desktop here?): open {} in a browser",
            escape(&page.display().to_string())
        ));
    }
}

/// The executable `name` in `$PATH`, if any.
fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}
