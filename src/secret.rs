//! `Secret`: a credential string that never shows itself.
//!
//! A leaf: the command line parses `--token` straight into it, and the
//! recording service's credentials hold it. Nothing but
//! [`Secret::expose`], at the one place a token goes on the wire, reads it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A credential string. `Debug` never shows it; only [`Secret::expose`]
/// does, at the one place it goes on the wire.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

/// `--token T` parses straight into a `Secret`, so even `Debug` of the
/// parsed command line does not show it.
impl argh::FromArgValue for Secret {
    fn from_arg_value(value: &str) -> Result<Self, String> {
        Ok(Secret::new(value))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[REDACTED]")
    }
}
