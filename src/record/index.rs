//! The listing index: one short summary per journal, so that listing and
//! filtering a store of thousands of runs reads one small file instead of
//! every journal whole.
//!
//! The index is `runs/.index`: a header line `bir-runs-index <version>
//! <crc32c of the body, hex>`, then the body, a JSON array of
//! [`RunSummary`]. It is a cache and never the only copy of anything:
//!
//! * **Rebuilt, never trusted blindly.** Every listing reads the directory;
//!   a journal whose size, mtime or inode differs from its entry, or that
//!   has no entry, is summarised again from the journal; an entry whose
//!   journal is gone is dropped. A run not finished whose journal is held
//!   by a writer (`journal::is_held`: its proxy is still recording) is
//!   always summarised again, whatever its size says.
//! * **Damage costs a rebuild, never an error.** A missing, truncated,
//!   foreign or corrupt index (checksum or JSON) is logged at debug level
//!   and rebuilt from the journals; the user sees the same listing.
//! * **Written atomically, by one writer at a time.** A new index is
//!   written to a temporary file and renamed over the old one, so a reader
//!   sees the old index or the new one, never a mix. Writers take
//!   `runs/.index.lock` (`flock`, without waiting): a listing that finds it
//!   taken just does not save its refresh; its own answer is still whole.
//!   Two listings at once, or a proxy appending while one lists, therefore
//!   never corrupt the index, and what one of them did not save is found
//!   stale and redone by the next.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::journal::{self, JOURNAL_SUFFIX};
use super::model::MadeBy;
use super::model::TokenUsage;
use crate::time::parse_rfc3339;

/// The index's file name in the runs directory.
const INDEX_FILE: &str = ".index";
/// How a new index's temporary file is named (then its writer's pid).
const TMP_PREFIX: &str = ".index.tmp-";
/// The lock its writers take.
const LOCK_FILE: &str = ".index.lock";
/// The first word of the header line; a file without it is not an index.
const MAGIC: &str = "bir-runs-index";
/// Bumped whenever [`RunSummary`] changes meaning: an index of another
/// version is rebuilt.
const VERSION: u32 = 4;
/// A bound run's prompt is kept up to this many characters in the index
/// (a listing shows one line of it; `bir runs export` has all of it).
const PROMPT_CHARS: usize = 1000;

/// What a listing needs to know about one run, and how its journal looked
/// when it was read (to tell when the summary went stale).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunSummary {
    /// The journal's file name in the runs directory.
    pub file: String,
    pub size: u64,
    /// Last modification, nanoseconds since the epoch.
    pub mtime_ns: i128,
    pub inode: u64,
    /// The header's id, else the file name without its suffix.
    pub id: String,
    /// Empty when the journal has no header.
    pub started_at: String,
    pub tier: String,
    /// The wrapped servers the header names, else those the steps name.
    pub servers: Vec<String>,
    pub cwd: String,
    /// Each tool the run called, with how often and how often it failed.
    pub tools: Vec<ToolUse>,
    pub tool_calls: u64,
    pub errors: u64,
    /// Lossy by the header or the finish, or with a torn tail.
    pub lossy: bool,
    pub finished: bool,
    /// A bound run's prompt (the header's input, else its first turn's),
    /// clipped to [`PROMPT_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// A run bir made itself (`bir replay`, `bir verify`, `bir mock`):
    /// the command and what it replayed, e.g. `bir-verify of run_3f2a…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_by: Option<String>,
    /// The model's tokens over the run, where the host reported them
    /// (`None`: it did not, which is not zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenUsage>,
    /// Which of bir's commands made the run; `None` for an agent's
    /// session (or a host's calls through a proxy): the runs `latest`
    /// may name and `bir runs` lists by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<MadeBy>,
    /// A writer held the journal when it was listed (not stored: it is
    /// asked afresh at every listing for a run not finished).
    #[serde(skip)]
    pub held: bool,
}

/// One tool a run called. Stored as a short array, `[server, tool,
/// calls, errors, qualified]`: a run has a handful of these, a store
/// thousands of runs, and the index is read at every listing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(into = "ToolRow", from = "ToolRow")]
pub struct ToolUse {
    pub server: String,
    /// The server's own name for the tool.
    pub tool: String,
    /// The host's name for it (`Bash`), when it is not the usual
    /// `mcp__<server>__<tool>` (kept implicit: most are).
    pub qualified: Option<String>,
    pub calls: u64,
    pub errors: u64,
}

impl ToolUse {
    /// Whether `name` names this tool: the server's name for it, or the
    /// host's.
    pub fn is_named(&self, name: &str) -> bool {
        self.tool == name
            || match &self.qualified {
                Some(q) => q == name,
                None => is_usual(&self.server, &self.tool, name),
            }
    }
}

/// Whether `qualified` is `mcp__<server>__<tool>` (without building it).
fn is_usual(server: &str, tool: &str, qualified: &str) -> bool {
    qualified
        .strip_prefix("mcp__")
        .and_then(|rest| rest.strip_prefix(server))
        .and_then(|rest| rest.strip_prefix("__"))
        == Some(tool)
}

/// [`ToolUse`] as the index stores it.
type ToolRow = (String, String, u64, u64, Option<String>);

impl From<ToolUse> for ToolRow {
    fn from(t: ToolUse) -> ToolRow {
        (t.server, t.tool, t.calls, t.errors, t.qualified)
    }
}

impl From<ToolRow> for ToolUse {
    fn from((server, tool, calls, errors, qualified): ToolRow) -> ToolUse {
        ToolUse {
            server,
            tool,
            qualified,
            calls,
            errors,
        }
    }
}

/// Which runs a listing shows by who made them: by default the agents'
/// sessions alone (the runs bir's replay, verify and mock made are
/// hidden), every run, or one origin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Origins {
    #[default]
    Agents,
    All,
    Only(MadeBy),
}

impl Origins {
    /// The origin `word` names: `agent`, or `replay`, `verify`, `mock`.
    pub(crate) fn parse(word: &str) -> Option<Origins> {
        match word {
            "agent" => Some(Origins::Agents),
            other => MadeBy::parse(other).map(Origins::Only),
        }
    }

    pub(crate) fn keeps(self, s: &RunSummary) -> bool {
        match self {
            Origins::Agents => s.is_agent_session(),
            Origins::All => true,
            Origins::Only(m) => s.origin == Some(m),
        }
    }
}

/// Which runs a listing keeps (`bir runs`' filters); every condition
/// given must hold.
#[derive(Debug, Default)]
pub(crate) struct RunFilter {
    /// A server the run recorded (a snapshot of it, or a call to it).
    pub server: Option<String>,
    /// A tool the run called (its name, or the host's
    /// `mcp__server__tool`), of `server` when that is given too.
    pub tool: Option<String>,
    /// A failed call (with `tool`: a failed call to it).
    pub failed: bool,
    /// Unix seconds: runs started at or after.
    pub since: Option<i64>,
    /// Unix seconds: runs started before.
    pub until: Option<i64>,
    pub tier: Option<String>,
    /// Runs recorded in this (absolute) directory or below it, compared
    /// by path component.
    pub cwd: Option<PathBuf>,
    pub origins: Origins,
}

impl RunFilter {
    /// Whether the run `s` summarises passes every condition.
    pub(crate) fn keeps(&self, s: &RunSummary) -> bool {
        if !self.origins.keeps(s) {
            return false;
        }
        if self.server.as_ref().is_some_and(|want| {
            !s.servers.iter().any(|x| x == want) && !s.tools.iter().any(|t| &t.server == want)
        }) {
            return false;
        }
        if self.tier.as_ref().is_some_and(|t| &s.tier != t) {
            return false;
        }
        match &self.tool {
            Some(want) => {
                let called = |t: &&ToolUse| {
                    t.is_named(want) && self.server.as_ref().is_none_or(|srv| &t.server == srv)
                };
                let mut uses = s.tools.iter().filter(called);
                let kept = if self.failed {
                    uses.any(|t| t.errors > 0)
                } else {
                    uses.any(|t| t.calls > 0)
                };
                if !kept {
                    return false;
                }
            }
            None if self.failed && s.errors == 0 => return false,
            None => {}
        }
        if self.since.is_some() || self.until.is_some() {
            // A run without a start time (no header) is in no time range.
            let Some(started) = parse_rfc3339(&s.started_at) else {
                return false;
            };
            if self.since.is_some_and(|t| started < t) || self.until.is_some_and(|t| started >= t) {
                return false;
            }
        }
        if let Some(dir) = &self.cwd
            && !Path::new(&s.cwd).starts_with(dir)
        {
            return false;
        }
        true
    }
}

impl RunSummary {
    /// Whether the run records an agent's session (or a host's calls
    /// through a proxy) rather than a run bir's own replay, verify or mock
    /// made: the runs `latest` names and `bir runs` lists by default.
    pub(crate) fn is_agent_session(&self) -> bool {
        self.origin.is_none()
    }

    /// `finished`, `interrupted` (no writer holds an unfinished journal:
    /// it never will be finished) or `open`, then `,lossy` when it is.
    pub(crate) fn state(&self) -> String {
        let mut s = String::from(if self.finished {
            "finished"
        } else if self.held {
            "open"
        } else {
            "interrupted"
        });
        if self.lossy {
            s.push_str(",lossy");
        }
        s
    }

    /// Whether this summary still describes `meta` (the journal now).
    fn describes(&self, meta: &fs::Metadata) -> bool {
        self.size == meta.len() && self.mtime_ns == mtime_ns(meta) && self.inode == meta.ino()
    }
}

/// Every run in `dir`, newest first (by start time, then id), each
/// summary fresh: taken from the index where it still describes its
/// journal, else read from the journal. Saves the refreshed index when
/// anything changed and no other writer holds it.
pub(crate) fn summaries(dir: &Path) -> io::Result<Vec<RunSummary>> {
    let mut cached = load(dir);
    let mut fresh: Vec<RunSummary> = Vec::new();
    let mut stale: Vec<(String, fs::Metadata)> = Vec::new();
    let mut changed = false;
    let mut seen = 0usize;
    // Temporary files of a save that was killed before its rename.
    let mut leftovers: Vec<PathBuf> = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| n.ends_with(JOURNAL_SUFFIX)) else {
            if name.to_str().is_some_and(|n| n.starts_with(TMP_PREFIX)) {
                leftovers.push(entry.path());
            }
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        // Removed between the listing and now: not a run any more.
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        seen += 1;
        match cached.remove(name) {
            Some(mut s) if s.describes(&meta) => {
                if s.finished {
                    fresh.push(s);
                } else {
                    s.held = journal::is_held(&dir.join(name));
                    if s.held {
                        stale.push((name.to_owned(), meta));
                    } else {
                        fresh.push(s);
                    }
                }
            }
            _ => stale.push((name.to_owned(), meta)),
        }
    }
    // Entries left over name journals that are gone.
    changed |= !cached.is_empty();
    if !stale.is_empty() {
        log::debug!("runs index: {} of {seen} journals read again", stale.len());
    }
    for s in summarize_all(dir, stale) {
        // A live run's summary changes with every step: saving it would
        // only make the next listing write the index again.
        changed |= !s.held;
        fresh.push(s);
    }
    fresh.sort_by(|a, b| {
        b.started_at
            .cmp(&a.started_at)
            .then_with(|| b.id.cmp(&a.id))
    });
    if (changed || !leftovers.is_empty())
        && let Err(err) = save(dir, &fresh, &leftovers)
    {
        log::debug!("runs index not saved: {err}");
    }
    Ok(fresh)
}

/// Summarises `journals` (name and metadata as listed), on as many
/// threads as there are CPUs when there are many. A journal that cannot
/// be read (removed meanwhile, unreadable) is left out, as `Store::list`
/// leaves it out.
fn summarize_all(dir: &Path, journals: Vec<(String, fs::Metadata)>) -> Vec<RunSummary> {
    const PER_THREAD_MIN: usize = 64;
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(journals.len().div_ceil(PER_THREAD_MIN))
        .max(1);
    let one = |(name, meta): &(String, fs::Metadata)| summarize(&dir.join(name), name, meta).ok();
    if threads == 1 {
        return journals.iter().filter_map(one).collect();
    }
    let chunk = journals.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = journals
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().filter_map(one).collect::<Vec<_>>()))
            .collect();
        let mut all = Vec::with_capacity(journals.len());
        for w in workers {
            // A worker that panicked (a bug) costs its runs' lines, not the
            // listing.
            all.extend(w.join().unwrap_or_default());
        }
        all
    })
}

/// Reads the journal at `path` (listed as `name` with `meta`) into its
/// summary, skipping every payload (arguments, results) unparsed.
pub(crate) fn summarize(path: &Path, name: &str, meta: &fs::Metadata) -> io::Result<RunSummary> {
    let read = journal::read(path)?;
    let mut s = RunSummary {
        file: name.to_owned(),
        size: meta.len(),
        mtime_ns: mtime_ns(meta),
        inode: meta.ino(),
        id: name.strip_suffix(JOURNAL_SUFFIX).unwrap_or(name).to_owned(),
        lossy: read.torn_bytes > 0,
        ..RunSummary::default()
    };
    let mut step_servers: Vec<String> = Vec::new();
    let mut first_turn: Option<String> = None;
    for bytes in &read.records {
        // A record of a kind this version does not know is skipped, as
        // the full loader skips it.
        let Ok(record) = serde_json::from_slice::<LiteRecord>(bytes) else {
            continue;
        };
        match record.event {
            LiteEvent::RunStarted(h) => {
                let m = h.metadata;
                s.origin = m
                    .made_by
                    .or_else(|| MadeBy::of_legacy(&m.recorder, m.replay_of.as_deref()));
                if let (Some(origin), Some(of)) = (s.origin, &m.replay_of) {
                    s.made_by = Some(format!("bir-{} of {of}", origin.word()));
                }
                s.id = h.id;
                s.started_at = h.started_at;
                s.tier = m.tier;
                s.servers = m.wrapped_servers;
                s.cwd = m.cwd;
                s.lossy |= m.lossy;
                if h.input.is_some() {
                    s.prompt = h.input;
                }
            }
            LiteEvent::Step(step) => {
                let selected = match step.step_type.as_str() {
                    "tool_selected" => true,
                    "tool_response" => false,
                    _ => continue,
                };
                let failed = !selected && step.is_error;
                s.tool_calls += u64::from(selected);
                s.errors += u64::from(failed);
                if !step.server_name.is_empty() && !step_servers.contains(&step.server_name) {
                    step_servers.push(step.server_name.clone());
                }
                let use_of = match s.tools.iter_mut().find(|t| {
                    t.server == step.server_name
                        && t.tool == step.tool_name
                        && match &t.qualified {
                            Some(q) => *q == step.qualified_name,
                            None => is_usual(&t.server, &t.tool, &step.qualified_name),
                        }
                }) {
                    Some(t) => t,
                    None => {
                        let usual =
                            is_usual(&step.server_name, &step.tool_name, &step.qualified_name);
                        s.tools.push(ToolUse {
                            server: step.server_name,
                            tool: step.tool_name,
                            qualified: (!usual).then_some(step.qualified_name),
                            ..ToolUse::default()
                        });
                        let last = s.tools.len() - 1;
                        &mut s.tools[last]
                    }
                };
                use_of.calls += u64::from(selected);
                use_of.errors += u64::from(failed);
            }
            LiteEvent::Turn(t) => {
                first_turn.get_or_insert(t.prompt);
            }
            LiteEvent::RunFinished(f) => {
                s.finished = true;
                s.lossy |= f.lossy;
                s.tokens = f.metrics.usage;
            }
            LiteEvent::ServerSnapshot(_) | LiteEvent::SessionEvent(_) | LiteEvent::RemoteAck(_) => {
            }
        }
    }
    if s.servers.is_empty() {
        s.servers = step_servers;
    }
    s.prompt = s.prompt.or(first_turn).map(|p| clip_chars(p, PROMPT_CHARS));
    if !s.finished {
        s.held = journal::is_held(path);
    }
    Ok(s)
}

fn clip_chars(mut s: String, n: usize) -> String {
    if let Some((at, _)) = s.char_indices().nth(n) {
        s.truncate(at);
        s.push('…');
    }
    s
}

fn mtime_ns(meta: &fs::Metadata) -> i128 {
    i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec())
}

/// The index as saved, by file name; empty when there is none or it is
/// damaged (then it is rebuilt, which is the whole of the cost).
fn load(dir: &Path) -> HashMap<String, RunSummary> {
    let path = dir.join(INDEX_FILE);
    let bytes = match crate::home::open_regular(fs::OpenOptions::new().read(true), &path).and_then(
        |mut f| {
            let mut v = Vec::new();
            io::Read::read_to_end(&mut f, &mut v).map(|_| v)
        },
    ) {
        Ok(b) => b,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return HashMap::new(),
        Err(err) => {
            log::debug!("runs index unreadable, rebuilding: {err}");
            return HashMap::new();
        }
    };
    match parse(&bytes) {
        Some(entries) => entries.into_iter().map(|s| (s.file.clone(), s)).collect(),
        None => {
            log::debug!("runs index damaged or of another version, rebuilding");
            HashMap::new()
        }
    }
}

/// The entries of an index file, if it is one of this version and whole.
fn parse(bytes: &[u8]) -> Option<Vec<RunSummary>> {
    let nl = memchr::memchr(b'\n', bytes)?;
    let header = std::str::from_utf8(&bytes[..nl]).ok()?;
    let body = &bytes[nl + 1..];
    let mut words = header.split(' ');
    if words.next()? != MAGIC || words.next()?.parse::<u32>().ok()? != VERSION {
        return None;
    }
    let crc = u32::from_str_radix(words.next()?, 16).ok()?;
    if words.next().is_some() || journal::crc32c(body) != crc {
        return None;
    }
    serde_json::from_slice(body).ok()
}

/// Writes `entries` as the new index: to a temporary file, then renamed
/// over the old one, under the writers' lock (not waited for: if another
/// listing is saving, this one's refresh is simply not kept).
///
/// `leftovers` are temporary files of saves killed before their rename;
/// they are removed under the lock (only a lock holder writes one, so none
/// of them is being written).
fn save(dir: &Path, entries: &[RunSummary], leftovers: &[PathBuf]) -> io::Result<()> {
    let lock = crate::home::private_file()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))?;
    if !crate::home::lock_exclusive(&lock, crate::home::Wait::No)? {
        log::debug!("runs index: another bir is saving it");
        return Ok(());
    }
    for tmp in leftovers {
        let _ = fs::remove_file(tmp);
    }
    let stored: Vec<&RunSummary> = entries.iter().filter(|s| !s.held).collect();
    let body = serde_json::to_vec(&stored).map_err(io::Error::other)?;
    let tmp: PathBuf = dir.join(format!("{TMP_PREFIX}{}", std::process::id()));
    let written = (|| {
        let mut f = crate::home::private_file()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&tmp)?;
        writeln!(f, "{MAGIC} {VERSION} {:08x}", journal::crc32c(&body))?;
        f.write_all(&body)?;
        fs::rename(&tmp, dir.join(INDEX_FILE))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

// The few fields of a record a summary needs. Everything else (payloads
// above all) is skipped by serde without being built.

#[derive(Deserialize)]
struct LiteRecord {
    event: LiteEvent,
}

#[derive(Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
enum LiteEvent {
    RunStarted(LiteHeader),
    ServerSnapshot(IgnoredAny),
    Step(LiteStep),
    Turn(LiteTurn),
    SessionEvent(IgnoredAny),
    RunFinished(LiteFinish),
    RemoteAck(IgnoredAny),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LiteHeader {
    id: String,
    started_at: String,
    #[serde(default)]
    input: Option<String>,
    metadata: LiteMetadata,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LiteMetadata {
    #[serde(default)]
    tier: String,
    #[serde(default)]
    wrapped_servers: Vec<String>,
    #[serde(default)]
    cwd: String,
    #[serde(default)]
    lossy: bool,
    #[serde(default)]
    recorder: String,
    #[serde(default)]
    replay_of: Option<String>,
    #[serde(default)]
    made_by: Option<MadeBy>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LiteStep {
    #[serde(rename = "type")]
    step_type: String,
    #[serde(default)]
    qualified_name: String,
    #[serde(default)]
    server_name: String,
    #[serde(default)]
    tool_name: String,
    #[serde(default)]
    is_error: bool,
}

#[derive(Deserialize)]
struct LiteTurn {
    prompt: String,
}

#[derive(Deserialize)]
struct LiteFinish {
    #[serde(default)]
    lossy: bool,
    #[serde(default)]
    metrics: LiteMetrics,
}

#[derive(Deserialize, Default)]
struct LiteMetrics {
    #[serde(default)]
    usage: Option<TokenUsage>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary() -> RunSummary {
        RunSummary {
            file: "run_a.journal".into(),
            id: "run_a".into(),
            tools: vec![
                ToolUse {
                    server: "gh".into(),
                    tool: "search".into(),
                    qualified: None,
                    calls: 3,
                    errors: 1,
                },
                ToolUse {
                    server: String::new(),
                    tool: "Bash".into(),
                    qualified: Some("Bash".into()),
                    calls: 2,
                    errors: 0,
                },
            ],
            ..RunSummary::default()
        }
    }

    fn run(tier: &str, started: &str, cwd: &str, tools: &[(&str, &str, u64, u64)]) -> RunSummary {
        RunSummary {
            id: "run_x".into(),
            tier: tier.into(),
            started_at: started.into(),
            cwd: cwd.into(),
            servers: vec!["srv".into()],
            tool_calls: tools.iter().map(|t| t.2).sum(),
            errors: tools.iter().map(|t| t.3).sum(),
            tools: tools
                .iter()
                .map(|&(server, tool, calls, errors)| ToolUse {
                    server: server.into(),
                    tool: tool.into(),
                    qualified: None,
                    calls,
                    errors,
                })
                .collect(),
            ..RunSummary::default()
        }
    }

    fn filter(f: impl FnOnce(&mut RunFilter)) -> RunFilter {
        let mut x = RunFilter::default();
        f(&mut x);
        x
    }

    #[test]
    fn tool_and_failed_mean_a_failed_call_to_that_tool() {
        let a = run(
            "standalone",
            "",
            "/",
            &[("srv", "echo", 3, 0), ("srv", "add", 2, 1)],
        );
        let tool = |name: &str, failed: bool| {
            filter(|f| {
                f.tool = Some(name.into());
                f.failed = failed;
            })
        };
        assert!(tool("echo", false).keeps(&a));
        assert!(tool("mcp__srv__echo", false).keeps(&a));
        assert!(!tool("echo", true).keeps(&a), "echo never failed");
        assert!(tool("add", true).keeps(&a));
        assert!(!tool("nope", false).keeps(&a));
        assert!(filter(|f| f.failed = true).keeps(&a));
        let clean = run("standalone", "", "/", &[("srv", "echo", 3, 0)]);
        assert!(!filter(|f| f.failed = true).keeps(&clean));
    }

    #[test]
    fn times_tiers_and_directories() {
        let a = run("bound", "2026-12-01T10:00:00.000Z", "/home/u/proj/sub", &[]);
        let at = |s: &str| parse_rfc3339(s);
        assert!(filter(|f| f.since = at("2026-12-01T09:00:00Z")).keeps(&a));
        assert!(!filter(|f| f.since = at("2026-12-01T11:00:00Z")).keeps(&a));
        assert!(filter(|f| f.until = at("2026-12-01T11:00:00Z")).keeps(&a));
        assert!(!filter(|f| f.until = at("2026-12-01T10:00:00Z")).keeps(&a));
        assert!(filter(|f| f.tier = Some("bound".into())).keeps(&a));
        assert!(!filter(|f| f.tier = Some("standalone".into())).keeps(&a));
        assert!(filter(|f| f.cwd = Some("/home/u/proj".into())).keeps(&a));
        assert!(
            !filter(|f| f.cwd = Some("/home/u/pro".into())).keeps(&a),
            "by component"
        );
        let headless = run("", "", "", &[]);
        assert!(!filter(|f| f.since = Some(0)).keeps(&headless));
    }

    #[test]
    fn tools_are_stored_short_and_read_back_whole() {
        let json = serde_json::to_string(&summary().tools).expect("json");
        assert_eq!(json, r#"[["gh","search",3,1,null],["","Bash",2,0,"Bash"]]"#);
        let back: Vec<ToolUse> = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, summary().tools);
        let [gh, bash] = &back[..] else {
            panic!("two tools")
        };
        assert!(gh.is_named("search") && gh.is_named("mcp__gh__search"));
        assert!(!gh.is_named("mcp__gh__searc") && !gh.is_named("mcp__g__search"));
        assert!(bash.is_named("Bash") && !bash.is_named("mcp____Bash"));
    }

    #[test]
    fn only_a_whole_index_of_this_version_is_read() {
        let dir = std::env::temp_dir().join(format!("bir-index-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        save(&dir, &[summary()], &[]).expect("save");
        let bytes = std::fs::read(dir.join(INDEX_FILE)).expect("read");
        assert_eq!(parse(&bytes), Some(vec![summary()]));
        assert_eq!(load(&dir).len(), 1);
        for cut in 0..bytes.len() {
            assert_eq!(parse(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        let last = flipped.len() - 2;
        flipped[last] ^= 0x20;
        assert_eq!(parse(&flipped), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
