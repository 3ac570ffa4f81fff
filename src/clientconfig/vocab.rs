//! The vocabulary every client-config module shares: which client, which
//! scope, what was found and what `bir install` decides about it.
//!
//! It sits below the client adapters (`claude`, `clients`, `remote_entry`,
//! `codex`) so that they can speak of the same things without importing
//! each other.

use super::entry::EntryKind;

/// An MCP client bir has an adapter for. Its [`name`](Client::name) is what
/// `--client` takes and what the ledger records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Client {
    ClaudeCode,
    Cursor,
    Vscode,
    Windsurf,
    Gemini,
    ClaudeDesktop,
    Zed,
    Codex,
}

impl Client {
    /// Every client, Claude Code first (the order `bir status` and a plain
    /// `bir install` visit them in).
    pub(crate) const ALL: [Client; 8] = [
        Client::ClaudeCode,
        Client::Cursor,
        Client::Vscode,
        Client::Windsurf,
        Client::Gemini,
        Client::ClaudeDesktop,
        Client::Zed,
        Client::Codex,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
            Client::Windsurf => "windsurf",
            Client::Gemini => "gemini",
            Client::ClaudeDesktop => "claude-desktop",
            Client::Zed => "zed",
            Client::Codex => "codex",
        }
    }

    /// The client a name stands for; `None` for a name bir has no adapter
    /// for (such as `config`, the label of a `--config FILE` target).
    pub(crate) fn named(name: &str) -> Option<Client> {
        Client::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Whether `name` is this client's name.
    pub(crate) fn is(self, name: &str) -> bool {
        self.name() == name
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Scope {
    Local,
    Project,
    User,
}

impl Scope {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Scope::Local => "local",
            Scope::Project => "project",
            Scope::User => "user",
        }
    }
}

/// One server entry as found in one scope.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub name: String,
    pub scope: Scope,
    /// The keys leading to the entry inside its config file.
    pub path: Vec<String>,
    pub raw: String,
    pub kind: EntryKind,
}

/// Why a server is not wrapped, or how it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Wrap: a copy in the local scope (from project/user), or in place
    /// (a local-scope entry).
    Copy,
    InPlace,
    /// Already wrapped by bir.
    Already,
    Skip(String),
}
