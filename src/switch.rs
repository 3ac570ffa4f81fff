//! The off switch: `bir off` (everywhere), `bir off --here` (one project
//! directory and everything under it), `BIR_OFF=1` (one process), and
//! `bir on` (removes the matching switch).
//!
//! The switches are files, so every proxy and hook can check them without
//! talking to anyone:
//! * `$BIR_HOME/off` — recording is off everywhere;
//! * `$BIR_HOME/off.d/<sha256 of the directory's absolute path>` — off in
//!   that directory and below (the file holds the path, for people).
//!
//! What "off" means: proxies relay exactly as before and record nothing
//! (a running proxy looks at the switches at most every ~500 ms, on its
//! observer thread, never on the relay's path); a stdio proxy started while
//! off replaces itself with its server (`exec`), so it costs nothing; hooks
//! answer with nothing ([`recording_off`] is what they call).

use std::path::{Path, PathBuf};

use crate::codec::sha256_hex;
use crate::home::ensure_private_dir;

/// `BIR_OFF=1` (also `true`, `yes`, `on`).
pub(crate) fn env_off() -> bool {
    std::env::var("BIR_OFF").is_ok_and(|v| says_off(&v))
}

/// Whether a `BIR_OFF` value switches recording off (`1`, `true`, `yes`,
/// `on`): the variable itself, or the HTTP hooks' header that carries it.
pub(crate) fn says_off(value: &str) -> bool {
    matches!(value.trim(), "1" | "true" | "yes" | "on")
}

/// Whether recording is switched off for work in `cwd`: `BIR_OFF=1`, the
/// global switch, or a `--here` switch on `cwd` or one of its ancestors.
/// A handful of `stat` calls and hashes of short strings: cheap enough for
/// every hook and for a proxy's half-second poll.
pub(crate) fn recording_off(home: &Path, cwd: &Path) -> bool {
    env_off() || files_off(home, cwd)
}

/// The switch files alone (a proxy reads `BIR_OFF` once, at its start).
pub(crate) fn files_off(home: &Path, cwd: &Path) -> bool {
    if home.join("off").exists() {
        return true;
    }
    let dir = home.join("off.d");
    if !dir.exists() {
        return false;
    }
    cwd.ancestors().any(|d| dir.join(here_key(d)).exists())
}

/// Why recording is off for work in `cwd`, in words for `bir status`
/// (`None`: it is on).
pub(crate) fn off_because(home: &Path, cwd: &Path) -> Option<&'static str> {
    if env_off() {
        Some("off (BIR_OFF is set in this environment)")
    } else if home.join("off").exists() {
        Some("off everywhere (`bir off`; `bir on` turns it back on)")
    } else if files_off(home, cwd) {
        Some("off in this directory (`bir off --here`; `bir on --here` turns it back on)")
    } else {
        None
    }
}

/// The name of the `--here` switch of `dir`.
fn here_key(dir: &Path) -> String {
    sha256_hex(dir.as_os_str().as_encoded_bytes())
}

fn here_switch(home: &Path, dir: &Path) -> PathBuf {
    home.join("off.d").join(here_key(dir))
}

/// Sets a switch: the global one, or (`here`) the one of that directory
/// and everything under it. The switch is a private file, never written
/// through a symlink.
pub(crate) fn set(home: &Path, here: Option<&Path>) -> Result<(), String> {
    ensure_private_dir(home).map_err(|e| e.to_string())?;
    match here {
        Some(dir) => {
            ensure_private_dir(&home.join("off.d")).map_err(|e| e.to_string())?;
            write_switch(
                &here_switch(home, dir),
                format!("{}\n", dir.display()).as_bytes(),
            )
        }
        None => write_switch(&home.join("off"), b""),
    }
}

/// A switch file: private, never written through a symlink.
fn write_switch(path: &Path, text: &[u8]) -> Result<(), String> {
    use std::io::Write;
    crate::home::private_file()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(text))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Removes a switch (the global one, or `here`'s own); one that is not
/// there is not an error.
pub(crate) fn clear(home: &Path, here: Option<&Path>) -> Result<(), String> {
    let path = match here {
        Some(dir) => here_switch(home, dir),
        None => home.join("off"),
    };
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bir-switch-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    #[test]
    fn the_global_switch_turns_every_directory_off() {
        let home = scratch("global");
        let cwd = Path::new("/some/project");
        assert!(!files_off(&home, cwd));
        std::fs::write(home.join("off"), b"").expect("write");
        assert!(files_off(&home, cwd));
        assert!(files_off(&home, Path::new("/elsewhere")));
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn a_here_switch_covers_its_directory_and_below_only() {
        let home = scratch("here");
        std::fs::create_dir_all(home.join("off.d")).expect("mkdir");
        std::fs::write(here_switch(&home, Path::new("/work/app")), b"").expect("write");
        assert!(files_off(&home, Path::new("/work/app")));
        assert!(files_off(&home, Path::new("/work/app/src/deep")));
        assert!(!files_off(&home, Path::new("/work")));
        assert!(!files_off(&home, Path::new("/work/application")));
        let _ = std::fs::remove_dir_all(&home);
    }
}
