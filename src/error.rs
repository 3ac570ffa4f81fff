//! One error path for `bir`'s commands.
//!
//! A command returns `Result<ExitStatus, Error>`:
//!
//! * `Ok(status)` — the command ran to its end and already said how it went
//!   (a `bir doctor` table with a FAILED row, a `bir sync` line per run not
//!   delivered): `status` is only the exit status that goes with it.
//! * `Err(error)` — it stopped on an error nobody has printed yet.
//!
//! [`report`] is the one place that prints such an error (`<command>:
//! <what failed>: <why>` on stderr, [`print`] for one a command goes on
//! past) and turns the outcome into the process's exit status. The command
//! that routes to a subcommand names it ([`Error::in_command`]), so the
//! message says which one failed.
//!
//! Hand-written rather than `anyhow`/`thiserror`: bir needs one error type
//! that carries an exit status and a cause, which is a hundred lines;
//! `anyhow` would need downcasting to find the status, and `thiserror`
//! buys derive sugar for a single type at the cost of a proc-macro build
//! dependency.

use std::fmt;

/// How a `bir` command ends. The numbers are part of bir's interface:
/// scripts, CI and the tests read them, so they never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExitStatus {
    /// It did what was asked (0).
    Success,
    /// It ran and failed (1): a file it could not read or write, a config
    /// it refuses to edit, a server that did not answer, a run not
    /// delivered.
    Failure,
    /// The command line asks for something it cannot do (2): a missing or
    /// conflicting argument, a value it does not accept.
    Usage,
    /// Replay/verify only (3): steps were held or blocked, nothing diverged.
    Incomplete,
    /// Replay/verify/mock only (4): a server failed to start, connect or
    /// initialise. Kept apart from 1 so CI tells "server down" from
    /// "regression".
    Environment,
    /// Replay/verify only (5): stale or drifted, under `--expired error` or
    /// `--fail-on-drift`.
    Stale,
}

impl ExitStatus {
    /// The process exit code.
    pub(crate) fn code(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Failure => 1,
            ExitStatus::Usage => 2,
            ExitStatus::Incomplete => 3,
            ExitStatus::Environment => 4,
            ExitStatus::Stale => 5,
        }
    }

    /// [`ExitStatus::Failure`] when `failed`, else [`ExitStatus::Success`].
    pub(crate) fn failure_if(failed: bool) -> ExitStatus {
        if failed {
            ExitStatus::Failure
        } else {
            ExitStatus::Success
        }
    }
}

/// Why something failed, below the command's own words.
pub(crate) type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A command's error: what it could not do, why, and how the process ends.
#[derive(Debug)]
pub(crate) struct Error {
    /// [`ExitStatus::Failure`] or [`ExitStatus::Usage`], never success.
    status: ExitStatus,
    /// What failed, in the command's words (`cannot read /x`).
    message: String,
    /// Why; its own [`std::error::Error::source`] chain says why further.
    cause: Option<Cause>,
    /// The command as the user typed it (`bir runs rm`), when the command
    /// that routed to it named it.
    command: Option<&'static str>,
}

impl Error {
    /// The command ran and failed (exit status 1).
    pub(crate) fn failure(message: impl Into<String>) -> Error {
        Error {
            status: ExitStatus::Failure,
            message: message.into(),
            cause: None,
            command: None,
        }
    }

    /// The command line was wrong (exit status 2).
    pub(crate) fn usage(message: impl Into<String>) -> Error {
        Error {
            status: ExitStatus::Usage,
            ..Error::failure(message)
        }
    }

    /// The same error, caused by `cause` (printed after the message).
    pub(crate) fn because(mut self, cause: impl Into<Cause>) -> Error {
        self.cause = Some(cause.into());
        self
    }

    /// The same error, ending the process with `status` instead: whether a
    /// bad value is a usage error depends on where it came from (a URL on
    /// the command line, or one saved in a file).
    pub(crate) fn with_status(mut self, status: ExitStatus) -> Error {
        if status != ExitStatus::Success {
            self.status = status;
        }
        self
    }

    /// Names the command that failed, unless a subcommand already did.
    pub(crate) fn in_command(mut self, command: &'static str) -> Error {
        self.command.get_or_insert(command);
        self
    }
}

impl fmt::Display for Error {
    /// The message, then `: <cause>`. A cause prints itself as its own
    /// `Display` does (ours with its own cause), so a message reads as it
    /// did when it was written out with `format!("…: {err}")`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        match &self.cause {
            Some(cause) => write!(f, ": {cause}"),
            None => Ok(()),
        }
    }
}

/// A bare message is a failure (exit status 1): `Err("…".into())` and `?`
/// on a helper whose error is its own text.
impl From<String> for Error {
    fn from(message: String) -> Error {
        Error::failure(message)
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Error {
        Error::failure(message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|c| c as &(dyn std::error::Error + 'static))
    }
}

/// Adds what was being done to an error from below:
/// `fs::read(p).context(|| format!("cannot read {}", p.display()))?`.
pub(crate) trait Context<T> {
    /// On error, a [`ExitStatus::Failure`] saying `message`, caused by it.
    fn context(self, message: impl FnOnce() -> String) -> Result<T, Error>;
}

impl<T, E: Into<Cause>> Context<T> for Result<T, E> {
    fn context(self, message: impl FnOnce() -> String) -> Result<T, Error> {
        self.map_err(|e| Error::failure(message()).because(e))
    }
}

/// The one place a command's outcome becomes an exit status: an error is
/// [`print`]ed, and its status returned.
pub(crate) fn report(command: &str, outcome: Result<ExitStatus, Error>) -> ExitStatus {
    match outcome {
        Ok(status) => status,
        Err(error) => {
            print(command, &error);
            error.status
        }
    }
}

/// Prints an error on stderr as `<command>: <error>`, `<command>` being the
/// one the error names or else `command`. [`report`] prints this way, and
/// so does a command that goes on past an error (`bir runs rm` of several
/// runs, one of which it could not remove).
///
/// An error often quotes outside text (a run id or path the user was
/// handed, a server's or a file's words): it goes through the same
/// terminal guard as stdout ([`crate::output::note`]), so no control
/// character in it reaches the terminal.
pub(crate) fn print(command: &str, error: &Error) {
    crate::output::note(&format!("{}: {error}", error.command.unwrap_or(command)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_keep_their_numbers() {
        assert_eq!(ExitStatus::Success.code(), 0);
        assert_eq!(ExitStatus::Failure.code(), 1);
        assert_eq!(ExitStatus::Usage.code(), 2);
        assert_eq!(ExitStatus::failure_if(true), ExitStatus::Failure);
        assert_eq!(ExitStatus::failure_if(false), ExitStatus::Success);
    }

    #[test]
    fn an_error_prints_its_causes_in_order() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let inner = Error::failure("cannot read /x").because(io);
        let outer = Error::failure("cannot load the ledger").because(inner);
        assert_eq!(
            outer.to_string(),
            "cannot load the ledger: cannot read /x: gone"
        );
        assert_eq!(outer.status, ExitStatus::Failure);

        let from_string: Result<(), String> = Err("bad line 3".into());
        let e = from_string
            .context(|| "cannot parse".into())
            .expect_err("an error stays one");
        assert_eq!(e.to_string(), "cannot parse: bad line 3");
    }

    #[test]
    fn usage_errors_exit_2_and_the_innermost_command_names_itself() {
        let e = Error::usage("name runs to remove")
            .in_command("bir runs rm")
            .in_command("bir runs");
        assert_eq!(e.status, ExitStatus::Usage);
        assert_eq!(e.command, Some("bir runs rm"));
        assert_eq!(report("bir", Err(e)), ExitStatus::Usage);
        assert_eq!(report("bir", Ok(ExitStatus::Failure)), ExitStatus::Failure);
    }
}
