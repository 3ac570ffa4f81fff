//! `bir off [--here]` and `bir on [--here]`: set and clear the off switch
//! ([`crate::switch`] holds what a switch is and who reads it).

use std::path::PathBuf;

use argh::FromArgs;

use crate::error::{Error, ExitStatus};
use crate::home::bir_home;
use crate::switch::{self, env_off, files_off};

/// Switch recording off: everywhere, or (`--here`) in this directory and below.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "off")]
pub(crate) struct OffCmd {
    /// only in the current directory (and its subdirectories)
    #[argh(switch)]
    pub here: bool,
}

/// Switch recording back on (removes the switch `bir off` set; `--here`:
/// the one of the current directory).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "on")]
pub(crate) struct OnCmd {
    /// only the current directory's switch
    #[argh(switch)]
    pub here: bool,
}

fn home_and_cwd() -> Result<(PathBuf, PathBuf), String> {
    let home = bir_home().ok_or("cannot find bir's home directory (set BIR_HOME or HOME)")?;
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    Ok((home, cwd))
}

/// `bir off [--here]`.
pub(crate) fn off(cmd: OffCmd) -> Result<ExitStatus, Error> {
    let result = home_and_cwd().and_then(|(home, cwd)| {
        if cmd.here {
            switch::set(&home, Some(&cwd))?;
            Ok(format!(
                "recording is off in {} (and below); `bir on --here` turns it back on",
                cwd.display()
            ))
        } else {
            switch::set(&home, None)?;
            Ok("recording is off everywhere; `bir on` turns it back on".to_owned())
        }
    });
    report(result)
}

/// `bir on [--here]`.
pub(crate) fn on(cmd: OnCmd) -> Result<ExitStatus, Error> {
    let result = home_and_cwd().and_then(|(home, cwd)| {
        switch::clear(&home, cmd.here.then_some(cwd.as_path()))?;
        let still = if env_off() {
            " (but BIR_OFF is set in this environment)"
        } else if files_off(&home, &cwd) {
            " (but another switch still holds it off here; see `bir on --here` / `bir on`)"
        } else {
            ""
        };
        Ok(format!("recording is on{still}"))
    });
    report(result)
}

/// Prints what the command did; an error goes to [`crate::error::report`].
fn report(result: Result<String, String>) -> Result<ExitStatus, Error> {
    let text = result?;
    crate::output::out(&text);
    Ok(ExitStatus::Success)
}
