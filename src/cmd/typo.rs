//! Usage errors of `bir`'s own parser, said the way every other error is:
//! `bir <command>: …`, exit 2, a pointer at that command's `--help`, and
//! for a mistyped command or subcommand the nearest one that exists.
//!
//! The command tree is read from argh's own help texts (the `Commands:`
//! section of `bir [path…] --help`), so a command added to an argh enum is
//! suggested without being listed twice.

use argh::FromArgs;

use crate::cli::Exit;
use crate::error::ExitStatus;

/// Parses `bir`'s arguments like [`crate::cli::parse_args`], but a usage
/// error names the command it belongs to and suggests the nearest command
/// or subcommand for one that does not exist.
pub(crate) fn parse<T: FromArgs>(args: &[String]) -> Result<T, Exit> {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    T::from_args(&["bir"], &refs).map_err(|early| {
        if early.status.is_ok() {
            #[expect(clippy::print_stdout, reason = "help output requested by the user")]
            {
                print!("{}", early.output);
            }
            return ExitStatus::Success.into();
        }
        crate::output::prompt(&usage_message::<T>(args, &early.output));
        ExitStatus::Usage.into()
    })
}

/// The text printed for a usage error: `bir <command>: <argh's message>`,
/// a suggestion when the unrecognized word is close to a subcommand of
/// that command, and where to look for help.
fn usage_message<T: FromArgs>(args: &[String], argh_output: &str) -> String {
    let unrecognized = argh_output
        .lines()
        .find_map(|l| l.strip_prefix("Unrecognized argument: "))
        .map(str::to_owned);
    // The words before the unrecognized one that name subcommands form the
    // command the error belongs to.
    let upto = unrecognized
        .as_deref()
        .and_then(|u| args.iter().position(|a| a == u))
        .unwrap_or(args.len());
    let mut path: Vec<&str> = Vec::new();
    let mut commands = subcommands::<T>(&path);
    for arg in &args[..upto] {
        if commands.iter().any(|c| c == arg) {
            path.push(arg);
            commands = subcommands::<T>(&path);
        }
    }
    let command = std::iter::once("bir")
        .chain(path.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let mut text = String::new();
    match unrecognized.as_deref() {
        Some(word) if !word.starts_with('-') && !commands.is_empty() => {
            text.push_str(&format!("{command}: unknown command `{word}`."));
            if let Some(near) = nearest(word, &commands) {
                text.push_str(&format!(" Did you mean `{command} {near}`?"));
            }
            text.push('\n');
        }
        _ => {
            for (i, line) in argh_output.lines().enumerate() {
                if i == 0 {
                    text.push_str(&format!("{command}: {line}\n"));
                } else {
                    text.push_str(&format!("{line}\n"));
                }
            }
        }
    }
    text.push_str(&format!("Run `{command} --help` for more information.\n"));
    text
}

/// The names of the subcommands of `bir <path…>`, read from its help text
/// (argh lists them under `Commands:`, two spaces in; a wrapped description
/// is indented further).
fn subcommands<T: FromArgs>(path: &[&str]) -> Vec<String> {
    let mut args: Vec<&str> = path.to_vec();
    args.push("--help");
    let help = match T::from_args(&["bir"], &args) {
        Err(early) if early.status.is_ok() => early.output,
        _ => return Vec::new(),
    };
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let name = l.strip_prefix("  ")?;
            if name.starts_with(' ') {
                return None;
            }
            name.split_whitespace().next().map(str::to_owned)
        })
        .collect()
}

/// The candidate nearest to `word`: the smallest edit distance (a swap of
/// two neighbours counts as one edit) within a third of the word's length,
/// at least one; or the only candidate `word` is a prefix of (three
/// letters or more). `None` when nothing is that close, or two are
/// equally close.
fn nearest(word: &str, candidates: &[String]) -> Option<String> {
    let word = word.to_lowercase();
    let limit = (word.chars().count() / 3).max(1);
    let mut scored: Vec<(usize, &String)> = candidates
        .iter()
        .map(|c| (edit_distance(&word, c), c))
        .filter(|(d, _)| *d <= limit)
        .collect();
    scored.sort();
    match scored.as_slice() {
        [(_, only)] => return Some((*only).clone()),
        [(a, best), (b, _), ..] if a < b => return Some((*best).clone()),
        [] => {}
        _ => return None,
    }
    let prefixed: Vec<&String> = candidates
        .iter()
        .filter(|c| word.chars().count() >= 3 && c.starts_with(&word))
        .collect();
    match prefixed.as_slice() {
        [only] => Some((*only).clone()),
        _ => None,
    }
}

/// Optimal string alignment distance: insertions, deletions, substitutions
/// and swaps of two neighbouring characters each cost one.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn swaps_and_single_edits_are_near() {
        assert_eq!(edit_distance("rusn", "runs"), 1);
        assert_eq!(edit_distance("shwo", "show"), 1);
        assert_eq!(edit_distance("instal", "install"), 1);
        assert_eq!(edit_distance("", "rm"), 2);
    }

    #[test]
    fn the_nearest_is_suggested_only_when_it_is_clear() {
        let top = names(&["runs", "report", "replay", "rm", "status", "install"]);
        assert_eq!(nearest("rusn", &top).as_deref(), Some("runs"));
        assert_eq!(nearest("instll", &top).as_deref(), Some("install"));
        assert_eq!(nearest("stat", &top).as_deref(), Some("status"));
        assert_eq!(nearest("zzzzzz", &top), None);
        // Two equally near candidates: no guess.
        assert_eq!(nearest("rx", &names(&["rm", "rn"])), None);
    }
}
