//! Which runs went out: one marker file per exported run under
//! `$BIR_HOME/runs/.otlp-exported/` (a side record: the journal format is
//! the recording service's and the goldens', and stays as it is).
//!
//! No marker means "not exported yet": a run whose export failed, or was
//! never tried, is exactly a finished run without a marker, and the
//! catch-up and `bir runs export --otlp --since` send it. A marker is
//! written only after every batch of the run was accepted (2xx).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::home;
use crate::record::store::Store;

const DIR: &str = ".otlp-exported";

/// The marker of `run_id`: the id itself when it is a plain name (bir's
/// `run_<uuid>`), else its hash, so no id can name a path elsewhere.
fn marker(store: &Store, run_id: &str) -> PathBuf {
    let plain = !run_id.is_empty()
        && run_id.len() <= 128
        && run_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let name = if plain {
        run_id.to_owned()
    } else {
        format!("h_{}", &crate::codec::sha256_hex(run_id.as_bytes())[..32])
    };
    store.dir().join(DIR).join(name)
}

pub(crate) fn is_exported(store: &Store, run_id: &str) -> bool {
    marker(store, run_id).is_file()
}

/// Notes that `run_id` went out (`spans` spans, to `endpoint`).
pub(crate) fn mark_exported(
    store: &Store,
    run_id: &str,
    spans: usize,
    endpoint: &str,
) -> io::Result<()> {
    let dir = store.dir().join(DIR);
    home::ensure_private_dir(&dir)?;
    let path = marker(store, run_id);
    let mut file = home::private_file()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)?;
    let note = serde_json::json!({
        "at": crate::time::rfc3339(SystemTime::now()),
        "spans": spans,
        "endpoint": endpoint,
    });
    file.write_all(format!("{note}\n").as_bytes())
}

/// Removes the markers of runs no longer in the store (retention removed
/// them): the ledger does not outgrow the store.
pub(crate) fn prune(store: &Store) -> io::Result<usize> {
    let dir = store.dir().join(DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(0);
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("h_") {
            continue;
        }
        if !store.journal_path(&name).exists() && remove(&entry.path()).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

fn remove(path: &Path) -> io::Result<()> {
    std::fs::remove_file(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_come_and_go_with_their_runs() {
        let dir = std::env::temp_dir().join(format!("bir-otlp-ledger-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(
            &dir.join("runs"),
            std::sync::Arc::new(crate::record::journal::DiskStorage),
        )
        .expect("store");
        assert!(!is_exported(&store, "run_a"));
        std::fs::write(store.journal_path("run_a"), b"").expect("journal");
        mark_exported(&store, "run_a", 3, "http://h/v1/traces").expect("mark");
        mark_exported(&store, "run_gone", 1, "http://h/v1/traces").expect("mark");
        // An id that is not a plain name never becomes a path.
        mark_exported(&store, "../../etc/x", 1, "e").expect("mark");
        assert!(is_exported(&store, "run_a") && is_exported(&store, "../../etc/x"));
        assert!(!dir.join("etc").exists());
        assert_eq!(prune(&store).expect("prune"), 1);
        assert!(is_exported(&store, "run_a") && !is_exported(&store, "run_gone"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
