//! Writing a client's config file safely, while the client may be writing it
//! too (Claude Code rewrites `~/.claude.json` often, without locking).
//!
//! [`update`] reads the file and hashes it, computes the new bytes, writes
//! them to a temporary file in the same directory (the original's mode,
//! fsynced), **re-reads the file and compares the hash just before the
//! rename**, renames, fsyncs the directory, and re-reads once more to check
//! the result. If the file changed in between, the edit is recomputed from
//! the new contents (bounded retries with back-off); after that it gives up
//! with a clear message, leaving the file as the other writer left it.
//! Symlinks are written through (the link is kept); a dangling link or a
//! target owned by another user is refused.

use crate::error::Error;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Files larger than this are refused (a documented cap, so a huge
/// `~/.claude.json` never stalls bir or its host).
pub(crate) const MAX_CONFIG_BYTES: u64 = 64 << 20;

const ATTEMPTS: u32 = 6;

/// An edit: the current bytes (None: no file) → the new bytes, or None
/// when nothing needs to change.
pub(crate) type Edit<'a> = dyn FnMut(Option<&[u8]>) -> Result<Option<Vec<u8>>, Error> + 'a;

/// What [`update`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// The file actually written (the symlink's target).
    pub target: PathBuf,
    /// The bytes before and after (equal when nothing needed changing).
    pub before: Option<Vec<u8>>,
    pub after: Vec<u8>,
    pub changed: bool,
}

/// The file a config path really is: symlinks followed. A dangling link is
/// an error; a missing plain path is returned as is.
pub(crate) fn resolve(path: &Path) -> Result<PathBuf, Error> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(path.to_owned()),
        Err(e) => Err(Error::failure(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
        Ok(meta) if meta.file_type().is_symlink() => fs::canonicalize(path).map_err(|e| {
            format!(
                "{} is a symlink whose target cannot be reached ({e}); fix or remove the link",
                path.display()
            )
            .into()
        }),
        Ok(_) => Ok(path.to_owned()),
    }
}

/// Reads a config file (None if it does not exist), refusing one over the
/// cap or owned by another user.
pub(crate) fn read(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    let target = resolve(path)?;
    let mut file = match File::open(&target) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::failure(format!(
                "cannot read {}: {e}",
                target.display()
            )));
        }
        Ok(f) => f,
    };
    let meta = file
        .metadata()
        .map_err(|e| Error::failure(format!("cannot read {}: {e}", target.display())))?;
    if !meta.is_file() {
        return Err(Error::failure(format!(
            "{} is not a regular file",
            target.display()
        )));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(Error::failure(format!(
            "{} is {} MiB; bir edits config files up to {} MiB only",
            target.display(),
            meta.len() >> 20,
            MAX_CONFIG_BYTES >> 20
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes)
        .map_err(|e| Error::failure(format!("cannot read {}: {e}", target.display())))?;
    Ok(Some(bytes))
}

/// Applies `edit` to the file at `path` atomically (see the module docs).
/// `edit` gets the current bytes (None: no file) and returns the new bytes,
/// or None when nothing needs to change; an `Err` aborts with the file
/// untouched.
pub(crate) fn update(path: &Path, edit: &mut Edit<'_>) -> Result<Outcome, Error> {
    update_with_hook(path, edit, &mut |_| {})
}

/// [`update`] with a hook run after the temporary file is written and
/// before the final hash check (tests use it to race the write).
pub(crate) fn update_with_hook(
    path: &Path,
    edit: &mut Edit<'_>,
    before_rename: &mut dyn FnMut(u32),
) -> Result<Outcome, Error> {
    let target = resolve(path)?;
    let mut first_before = None;
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(25 << attempt.min(4)));
        }
        let before = read(&target)?;
        if attempt == 0 {
            first_before = Some(before.clone());
        }
        if let Some(meta) = before.as_ref().and(fs::metadata(&target).ok()) {
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            if meta.uid() != me {
                return Err(Error::failure(format!(
                    "{} belongs to another user (uid {}); refusing to edit it",
                    target.display(),
                    meta.uid()
                )));
            }
            if meta.permissions().mode() & 0o200 == 0 {
                return Err(Error::failure(format!(
                    "{} is read-only (mode {:o}); bir leaves it alone. Make it writable (chmod u+w) to let bir edit it",
                    target.display(),
                    meta.permissions().mode() & 0o7777
                )));
            }
        }
        let Some(after) = edit(before.as_deref())? else {
            return Ok(Outcome {
                target,
                before: first_before.flatten(),
                after: before.unwrap_or_default(),
                changed: attempt > 0,
            });
        };
        let tmp = write_temp(&target, &after)?;
        before_rename(attempt);
        let now = read(&target).inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })?;
        if now != before {
            let _ = fs::remove_file(&tmp);
            log::info!(
                "{} changed while bir was writing it; retrying",
                target.display()
            );
            continue;
        }
        if let Err(e) = fs::rename(&tmp, &target) {
            let _ = fs::remove_file(&tmp);
            return Err(Error::failure(format!(
                "cannot replace {}: {e}",
                target.display()
            )));
        }
        if let Some(dir) = target.parent()
            && let Ok(d) = File::open(if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            })
        {
            let _ = d.sync_all();
        }
        // Verify: someone may have written right after our rename.
        if read(&target)?.as_deref() == Some(&after[..]) {
            return Ok(Outcome {
                target,
                before: first_before.flatten(),
                after,
                changed: true,
            });
        }
    }
    Err(Error::failure(format!(
        "another process kept rewriting {} while bir tried to edit it ({ATTEMPTS} attempts); \
         the file was left as that process wrote it. Close running Claude Code sessions \
         (or the client that owns the file) and run the command again, or add the entry \
         with the client's own command (e.g. `claude mcp add-json`)",
        target.display()
    )))
}

/// Writes `bytes` to a new temporary file beside `target`, with the
/// target's mode (0600 for a new file), fsynced. Returns its path.
fn write_temp(target: &Path, bytes: &[u8]) -> Result<PathBuf, Error> {
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let meta = fs::metadata(target).ok();
    let mode = meta
        .as_ref()
        .map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config".into());
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.bir-{}-{n}.tmp", std::process::id()));
    let result = (|| -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        // The umask must not widen or narrow the original mode.
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        if let Some(m) = &meta {
            // Keep the group (best effort; the owner is us, checked above).
            // SAFETY: fchown on an fd we own; -1 leaves the owner alone.
            unsafe {
                let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
                libc::fchown(fd, u32::MAX, m.gid());
            }
        }
        f.write_all(bytes)?;
        f.sync_all()
    })();
    match result {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(Error::failure(format!(
                "cannot write a temporary file in {} ({e}); {} was not changed. \
                 Make the directory writable or free some space there, then run the command again",
                dir.display(),
                target.display()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("bir-atomic-{}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("mkdir");
        d
    }

    fn append(suffix: &'static str) -> impl FnMut(Option<&[u8]>) -> Result<Option<Vec<u8>>, Error> {
        move |b| {
            let mut v = b.unwrap_or_default().to_vec();
            if v.ends_with(suffix.as_bytes()) {
                return Ok(None);
            }
            v.extend_from_slice(suffix.as_bytes());
            Ok(Some(v))
        }
    }

    fn leftovers(d: &Path) -> Vec<String> {
        fs::read_dir(d)
            .expect("dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn keeps_mode_and_writes_through_symlinks() {
        let d = tmpdir("mode");
        let real = d.join("real.json");
        fs::write(&real, "a").expect("write");
        fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).expect("chmod");
        symlink(&real, d.join("link.json")).expect("link");
        let out = update(&d.join("link.json"), &mut append("b")).expect("update");
        assert!(out.changed);
        assert_eq!(fs::read_to_string(&real).expect("read"), "ab");
        assert!(
            fs::symlink_metadata(d.join("link.json"))
                .expect("meta")
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            fs::metadata(&real).expect("meta").permissions().mode() & 0o777,
            0o640
        );
        // Nothing to change: not written.
        let out = update(&d.join("link.json"), &mut append("b")).expect("update");
        assert!(!out.changed);
        // A new file is 0600.
        update(&d.join("new.json"), &mut append("x")).expect("create");
        assert_eq!(
            fs::metadata(d.join("new.json"))
                .expect("meta")
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
        assert!(leftovers(&d).is_empty());
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn read_only_and_oversized_files_are_refused_untouched() {
        let d = tmpdir("ro-file");
        let f = d.join("c.json");
        fs::write(&f, "1").expect("write");
        fs::set_permissions(&f, fs::Permissions::from_mode(0o444)).expect("chmod");
        let err = update(&f, &mut append("x"))
            .expect_err("read-only")
            .to_string();
        assert!(
            err.contains("read-only (mode 444)") && err.contains("chmod u+w"),
            "{err}"
        );
        assert_eq!(fs::read_to_string(&f).expect("read"), "1");
        let big = d.join("big.json");
        let file = File::create(&big).expect("create");
        file.set_len(MAX_CONFIG_BYTES + 1).expect("sparse");
        let err = update(&big, &mut append("x"))
            .expect_err("too large")
            .to_string();
        assert!(err.contains("up to 64 MiB"), "{err}");
        assert!(leftovers(&d).is_empty());
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn dangling_symlink_is_refused() {
        let d = tmpdir("dangling");
        symlink(d.join("nowhere"), d.join("link.json")).expect("link");
        let err = update(&d.join("link.json"), &mut append("b"))
            .expect_err("dangling")
            .to_string();
        assert!(err.contains("cannot be reached"), "{err}");
        assert!(fs::symlink_metadata(d.join("nowhere")).is_err());
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_change_between_read_and_rename_is_merged_not_lost() {
        let d = tmpdir("race");
        let f = d.join("c.json");
        fs::write(&f, "1").expect("write");
        let f2 = f.clone();
        let out = update_with_hook(&f, &mut append("-bir"), &mut |attempt| {
            if attempt < 2 {
                // The client rewrites the file meanwhile.
                let now = fs::read_to_string(&f2).expect("read");
                fs::write(&f2, format!("{now}+client")).expect("write");
            }
        })
        .expect("update");
        assert!(out.changed);
        assert_eq!(fs::read_to_string(&f).expect("read"), "1+client+client-bir");
        assert!(leftovers(&d).is_empty());
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn gives_up_when_the_file_never_settles() {
        let d = tmpdir("busy");
        let f = d.join("c.json");
        fs::write(&f, "1").expect("write");
        let f2 = f.clone();
        let err = update_with_hook(&f, &mut append("-bir"), &mut |attempt| {
            fs::write(&f2, format!("client{attempt}")).expect("write");
        })
        .expect_err("never settles")
        .to_string();
        assert!(
            err.contains("kept rewriting") && err.contains("claude mcp add-json"),
            "{err}"
        );
        assert_eq!(
            fs::read_to_string(&f).expect("read"),
            format!("client{}", ATTEMPTS - 1)
        );
        assert!(leftovers(&d).is_empty());
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn an_edit_error_leaves_the_file_alone() {
        let d = tmpdir("err");
        let f = d.join("c.json");
        fs::write(&f, "1").expect("write");
        let err = update(&f, &mut |_| Err(Error::failure("malformed")))
            .expect_err("error")
            .to_string();
        assert_eq!(err, "malformed");
        assert_eq!(fs::read_to_string(&f).expect("read"), "1");
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn unwritable_directory_names_the_path() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            return; // root writes anywhere
        }
        let d = tmpdir("ro");
        let f = d.join("c.json");
        fs::write(&f, "1").expect("write");
        fs::set_permissions(&d, fs::Permissions::from_mode(0o500)).expect("chmod");
        let err = update(&f, &mut append("x"))
            .expect_err("read-only dir")
            .to_string();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).expect("chmod");
        assert!(err.contains("cannot write a temporary file"), "{err}");
        assert_eq!(fs::read_to_string(&f).expect("read"), "1");
        let _ = fs::remove_dir_all(&d);
    }
}
