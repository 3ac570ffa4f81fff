//! `bir version` (and `bir --version`): the version line of
//! [`crate::cli::version_line`].

use argh::FromArgs;

use crate::cli::{Exit, print_version};

/// Print the version and the build it came from.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "version")]
pub(crate) struct VersionCmd {}

/// `bir version`: prints the version line.
pub(crate) fn main(_cmd: VersionCmd) -> Exit {
    print_version("bir")
}
