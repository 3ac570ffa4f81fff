//! bir's own place on disk and the few OS primitives every writer of it
//! shares: `$BIR_HOME`, private files and directories, a private file
//! replaced atomically, advisory `flock`s.
//!
//! A leaf: the store, the recording service's credentials and catch-up,
//! the install ledger and `bir doctor` all use it; it uses nothing of the
//! crate.

use std::fs::{self, DirBuilder, File};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// `$BIR_HOME`, else `~/.baseinstrunner`.
pub(crate) fn bir_home() -> Option<PathBuf> {
    match std::env::var_os("BIR_HOME") {
        Some(h) if !h.is_empty() => Some(PathBuf::from(h)),
        _ => home::home_dir().map(|h| h.join(".baseinstrunner")),
    }
}

/// What keeps `home` from being private to this user (`bir doctor`): not
/// a real directory, another owner, a mode open to others, or the ledger
/// or credentials file readable by others; each said with its fix. `None`:
/// it does not exist yet (bir creates it, 0700, when needed).
pub(crate) fn privacy_problems(home: &Path) -> Option<Vec<String>> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = fs::symlink_metadata(home).ok()?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let mut problems = Vec::new();
    if meta.file_type().is_symlink() || !meta.is_dir() {
        problems.push("not a real directory".to_owned());
    }
    if meta.uid() != me {
        problems.push(format!("owned by uid {}, not you", meta.uid()));
    }
    if meta.mode() & 0o077 != 0 {
        problems.push(format!(
            "mode {:o}, should be 700 (run: chmod 700 {})",
            meta.mode() & 0o777,
            home.display()
        ));
    }
    for f in ["installed.json", "credentials.json"] {
        if let Ok(m) = fs::metadata(home.join(f))
            && m.permissions().mode() & 0o077 != 0
        {
            problems.push(format!(
                "{f} is mode {:o}, should be 600",
                m.permissions().mode() & 0o777
            ));
        }
    }
    Some(problems)
}

/// Options for a file of bir's own: private (0600 when created) and never
/// opened through a symlink.
pub(crate) fn private_file() -> fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = fs::OpenOptions::new();
    options
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options
}

/// Opens one of bir's files with `options` (built on [`private_file`]),
/// refusing anything but a regular file.
///
/// The open itself never blocks: it is non-blocking (a FIFO named like a
/// journal would otherwise hang the opener until someone writes to it, and
/// a device could be anything), and the type is checked on the descriptor
/// that was opened, not on the path before, so no swap in between can slip
/// a FIFO past the check. A regular file is then switched back to blocking
/// mode (which for regular files changes nothing but the flag).
pub(crate) fn open_regular(options: &mut fs::OpenOptions, path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file; left alone", path.display()),
        ));
    }
    // SAFETY: `file` is open for as long as these calls run.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    if flags >= 0 {
        // SAFETY: as above; only O_NONBLOCK is cleared.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) };
    }
    Ok(file)
}

/// Whether to wait for a lock another process holds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    Yes,
    No,
}

/// An exclusive `flock` on `file`. `Ok(false)`: another open file holds it
/// and `wait` is [`Wait::No`]. The lock goes when the file is closed,
/// however the process ends.
pub(crate) fn lock_exclusive(file: &File, wait: Wait) -> io::Result<bool> {
    let op = match wait {
        Wait::Yes => libc::LOCK_EX,
        Wait::No => libc::LOCK_EX | libc::LOCK_NB,
    };
    loop {
        // SAFETY: `file` is open for as long as this call runs.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if wait == Wait::No => return Ok(false),
            _ => return Err(err),
        }
    }
}

/// Where `bir report` writes a run's page unless told otherwise:
/// `$BIR_HOME/reports/<run>.html`. The page holds the run's (redacted)
/// data, so removing a run removes this page too.
pub(crate) fn report_page(run_id: &str) -> Option<PathBuf> {
    bir_home().map(|home| home.join("reports").join(format!("{run_id}.html")))
}

/// Creates `dir` (and parents) as private directories, or checks an
/// existing one: a real directory, owned by us, no group/other access.
/// Every error names `dir` (an OS error alone, "Not a directory", does not
/// say which).
pub(crate) fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    let about = |err: io::Error| io::Error::new(err.kind(), format!("{}: {err}", dir.display()));
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(about)?;
        }
        Err(e) => return Err(about(e)),
        Ok(_) => {}
    }
    let meta = fs::symlink_metadata(dir).map_err(about)?;
    if meta.file_type().is_symlink() || !meta.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory (a symlink or a file); refusing to store runs there",
            dir.display()
        )));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(io::Error::other(format!(
            "{} belongs to another user (uid {}); refusing to store runs there",
            dir.display(),
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(about)?;
    }
    Ok(())
}

/// Replaces `target` atomically with `bytes`, as a private file: written
/// to a private temporary file beside it (never through a symlink, only a
/// regular file), fsynced, then renamed over it, so a reader sees the old
/// bytes or the new ones, never half. The temporary file is removed when
/// anything fails.
pub(crate) fn replace_private_file(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report.html".into());
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = open_regular(
            private_file().write(true).create(true).truncate(true),
            &temp,
        )?;
        io::Write::write_all(&mut file, bytes)?;
        file.sync_all()?;
        fs::rename(&temp, target)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_home_open_to_others_is_a_problem_with_its_fix_and_a_missing_one_is_none() {
        let base = std::env::temp_dir().join(format!("bir-home-privacy-{}", std::process::id()));
        let home = base.join("bh");
        assert_eq!(privacy_problems(&home), None, "not created yet");
        fs::create_dir_all(&home).expect("create");
        fs::set_permissions(&home, fs::Permissions::from_mode(0o700)).expect("chmod");
        assert_eq!(privacy_problems(&home), Some(Vec::new()));
        fs::set_permissions(&home, fs::Permissions::from_mode(0o755)).expect("chmod");
        fs::write(home.join("installed.json"), "{}").expect("write");
        fs::set_permissions(
            home.join("installed.json"),
            fs::Permissions::from_mode(0o644),
        )
        .expect("chmod");
        let problems = privacy_problems(&home).expect("it exists");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("mode 755, should be 700 (run: chmod 700 "));
        assert_eq!(problems[1], "installed.json is mode 644, should be 600");
        fs::remove_dir_all(&base).expect("clean up");
    }

    #[test]
    fn a_replaced_file_is_whole_private_and_leaves_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("bir-home-replace-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("mkdir");
        let page = dir.join("page.html");
        fs::write(&page, "old").expect("write");
        fs::set_permissions(&page, fs::Permissions::from_mode(0o644)).expect("chmod");
        replace_private_file(&page, b"new").expect("replace");
        assert_eq!(fs::read(&page).expect("read"), b"new");
        let mode = fs::metadata(&page).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A target that cannot be replaced (a directory) fails and leaves
        // no temporary file behind.
        fs::create_dir(dir.join("taken")).expect("mkdir");
        assert!(replace_private_file(&dir.join("taken"), b"x").is_err());
        let names: Vec<String> = fs::read_dir(&dir)
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        let _ = fs::remove_dir_all(&dir);
    }
}
