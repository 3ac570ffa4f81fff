//! The journal: an append-only file of checksummed records, one per run.
//!
//! Format: each record is `len: u32 LE | crc32c(payload): u32 LE | payload |
//! '\n'`, where the payload is one JSON document. The trailing newline makes
//! `less` usable on a journal; it is not part of the checksum.
//!
//! Invariants:
//! * A reader never returns a record whose checksum does not match, and
//!   never skips a bad record to reach data behind it: the first torn or
//!   corrupt record ends the readable journal (its size is reported).
//! * Writes go through the [`Storage`] seam so tests can inject ENOSPC, EIO
//!   or EROFS on the Nth operation.
//! * Files are created 0600 with `O_NOFOLLOW`, inside directories the store
//!   checked (see `store.rs`), and only regular files are opened as
//!   journals, without blocking (`home::open_regular`): a FIFO named like
//!   a journal is refused, never waited on.
//! * One writer per journal: whoever appends holds an exclusive `flock` on
//!   it for as long as the file is open (the proxy recording it, for its
//!   whole life; `bir sync` or retention, while they deal with a run whose
//!   proxy is gone). The lock is taken before the torn tail is cut, so no
//!   one cuts a record another process is in the middle of writing; a
//!   journal whose lock is held is in use (its proxy is alive, or another
//!   bir is sending it) and is neither sent nor deleted by anyone else.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// How a journal's file name ends (`<run id>.journal`).
pub(crate) const JOURNAL_SUFFIX: &str = ".journal";

/// The largest record the reader accepts (a sanity bound on `len`).
pub(crate) const MAX_RECORD: u32 = 64 * 1024 * 1024;

/// An open journal file being appended to.
pub(crate) trait JournalFile: Send {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    fn sync(&mut self) -> io::Result<()>;
}

/// Where journals live. The real implementation is the file system;
/// tests substitute one that fails on demand.
pub(crate) trait Storage: Send + Sync {
    /// Opens (creating if needed, 0600, never through a symlink) a journal
    /// for appending.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn JournalFile>>;
}

/// The file system.
pub(crate) struct DiskStorage;

struct DiskJournal(File);

impl JournalFile for DiskJournal {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.write_all(bytes)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
}

impl Storage for DiskStorage {
    /// Fails with [`io::ErrorKind::WouldBlock`] while another writer holds
    /// the journal.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn JournalFile>> {
        match open_as_writer(path, Create::Yes)? {
            Some(journal) => Ok(Box::new(journal)),
            None => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("another bir is writing {}", path.display()),
            )),
        }
    }
}

/// Whether opening a journal may create it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Create {
    Yes,
    No,
}

/// Opens the journal at `path` as its one writer: `Ok(None)` while another
/// open file holds it.
fn open_as_writer(path: &Path, create: Create) -> io::Result<Option<DiskJournal>> {
    let mut file = crate::home::open_regular(
        crate::home::private_file()
            .create(create == Create::Yes)
            .read(true)
            .append(true),
        path,
    )?;
    match crate::home::lock_exclusive(&file, crate::home::Wait::No) {
        Ok(true) => {}
        Ok(false) => return Ok(None),
        // A file system without `flock` (rare): the journal is written
        // unlocked, as before there were locks, rather than not at all.
        Err(err)
            if matches!(
                err.raw_os_error(),
                Some(libc::ENOLCK | libc::EOPNOTSUPP | libc::ENOSYS)
            ) =>
        {
            log::debug!("{}: no file locks here ({err})", path.display());
        }
        Err(err) => return Err(err),
    }
    // Appending after a torn tail would bury good records behind bad
    // ones: cut the tail first.
    let good = scan(&mut file)?.good_bytes;
    if file.metadata()?.len() > good {
        file.set_len(good)?;
    }
    file.seek(SeekFrom::End(0))?;
    Ok(Some(DiskJournal(file)))
}

/// Takes an existing journal as its writer, for someone other than the
/// proxy that recorded it (`bir sync` noting an acknowledgement, retention
/// deleting it): `Ok(None)` while its recorder (or another bir) holds it,
/// so a live run is left alone. Never creates the file.
pub(crate) fn claim(path: &Path) -> io::Result<Option<Box<dyn JournalFile>>> {
    Ok(open_as_writer(path, Create::No)?.map(|j| Box::new(j) as Box<dyn JournalFile>))
}

/// Whether a writer holds the journal at `path` now (its proxy is alive,
/// or another bir is sending it): a shared lock cannot be had while the
/// writer's exclusive one is held, and is released at once otherwise.
/// `false` for a journal that cannot be opened.
pub(crate) fn is_held(path: &Path) -> bool {
    let Ok(file) = crate::home::open_regular(OpenOptions::new().read(true), path) else {
        return false;
    };
    loop {
        // SAFETY: `file` is open for as long as this call runs.
        if unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                libc::LOCK_SH | libc::LOCK_NB,
            )
        } == 0
        {
            return false;
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return true,
            _ => return false,
        }
    }
}

/// Encodes one record.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let framed = frame_with(payload.len(), |out| {
        out.extend_from_slice(payload);
        Ok::<(), std::convert::Infallible>(())
    });
    match framed {
        Ok(framed) => framed,
        Err(never) => match never {},
    }
}

/// Encodes one record whose payload `write` appends, in place: the
/// length and checksum go in front once it is written, so the payload is
/// neither copied nor grown into a second buffer (the recorder frames every
/// record it writes). `capacity` is a guess at the payload's size.
pub(crate) fn frame_with<E>(
    capacity: usize,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<Vec<u8>, E> {
    const HEAD: usize = 8;
    let mut out = Vec::with_capacity(capacity + HEAD + 1);
    out.extend_from_slice(&[0; HEAD]);
    write(&mut out)?;
    let payload = &out[HEAD..];
    let len = (payload.len() as u32).to_le_bytes();
    let crc = crc32c(payload).to_le_bytes();
    out[..4].copy_from_slice(&len);
    out[4..HEAD].copy_from_slice(&crc);
    out.push(b'\n');
    Ok(out)
}

/// What reading a journal found.
#[derive(Debug, Default)]
pub struct ReadOutcome {
    pub records: Vec<Vec<u8>>,
    /// Bytes of valid records from the start of the file.
    pub good_bytes: u64,
    /// Bytes after the last valid record (a torn write or corruption).
    pub torn_bytes: u64,
}

/// Reads every valid record of the journal at `path` (never following a
/// symlink, never blocking on a FIFO or device: only a regular file is read).
pub fn read(path: &Path) -> io::Result<ReadOutcome> {
    let mut file = crate::home::open_regular(OpenOptions::new().read(true), path)?;
    read_records(&mut file)
}

fn read_records(file: &mut File) -> io::Result<ReadOutcome> {
    let mut data = Vec::new();
    file.seek(SeekFrom::Start(0))?;
    file.read_to_end(&mut data)?;
    let mut out = ReadOutcome::default();
    let mut at = 0usize;
    while let Some((payload, next)) = decode_at(&data, at) {
        out.records.push(payload.to_vec());
        at = next;
    }
    out.good_bytes = at as u64;
    out.torn_bytes = (data.len() - at) as u64;
    Ok(out)
}

fn scan(file: &mut File) -> io::Result<ReadOutcome> {
    let mut outcome = read_records(file)?;
    outcome.records.clear();
    Ok(outcome)
}

/// The record starting at `at` in `data`, and where the next one starts;
/// `None` when what is there is not (or not yet) a whole, valid record.
pub(crate) fn decode_at(data: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let header = data.get(at..at + 8)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if len > MAX_RECORD {
        return None;
    }
    let start = at + 8;
    let end = start.checked_add(len as usize)?;
    let payload = data.get(start..end)?;
    if data.get(end) != Some(&b'\n') || crc32c(payload) != crc {
        return None;
    }
    Some((payload, end + 1))
}

/// A journal read as it grows (a reader following a live run): where
/// reading got to, and the bytes of a record not yet whole.
///
/// Each poll reads only the bytes appended since the last one and hands
/// out the whole records among them; a record cut in the middle (its
/// writer is still writing it) stays pending until the rest arrives. Like
/// [`read`], it never skips a bad record to reach data behind it: a
/// corrupt record stays pending, and what is pending when the writer is
/// gone is the journal's torn tail.
pub(crate) struct Tail {
    file: File,
    pending: Vec<u8>,
}

impl Tail {
    /// Opens the journal at `path` for following, from its start (only a
    /// regular file, as [`read`] opens).
    pub(crate) fn open(path: &Path) -> io::Result<Tail> {
        let file = crate::home::open_regular(OpenOptions::new().read(true), path)?;
        Ok(Tail {
            file,
            pending: Vec::new(),
        })
    }

    /// Reads what was appended since the last poll and hands each whole
    /// record's payload to `each`, in order; how many it handed out.
    pub(crate) fn poll(&mut self, mut each: impl FnMut(&[u8])) -> io::Result<usize> {
        self.file.read_to_end(&mut self.pending)?;
        let mut at = 0;
        let mut added = 0;
        while let Some((payload, next)) = decode_at(&self.pending, at) {
            each(payload);
            added += 1;
            at = next;
        }
        self.pending.drain(..at);
        Ok(added)
    }

    /// The bytes read that are not (yet) a whole record.
    pub(crate) fn pending_bytes(&self) -> u64 {
        self.pending.len() as u64
    }
}

/// CRC-32C (Castagnoli): the CPU's instruction where there is one (SSE4.2
/// does 8 bytes a step), else a table a byte at a time. Both give the same
/// value (tested).
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE4.2, checked just above.
        return unsafe { crc32c_sse42(data) };
    }
    crc32c_table(data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc32c_sse42(data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u64};
    let mut crc = !0u32;
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let mut le = [0u8; 8];
        le.copy_from_slice(word);
        crc = _mm_crc32_u64(u64::from(crc), u64::from_le_bytes(le)) as u32;
    }
    for &b in words.remainder() {
        crc = _mm_crc32_u8(crc, b);
    }
    !crc
}

fn crc32c_table(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table = [0u32; 256];
        for (i, slot) in table.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0x82F6_3B78 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *slot = c;
        }
        table
    });
    let mut crc = !0u32;
    for &b in data {
        crc = table[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c_table(b"123456789"), 0xE306_9283);
        // Both implementations agree at every length and alignment.
        let data: Vec<u8> = (0..300u32).map(|i| (i * 31 + 7) as u8).collect();
        for start in 0..9 {
            for end in start..data.len() {
                let piece = &data[start..end];
                assert_eq!(crc32c(piece), crc32c_table(piece), "{start}..{end}");
            }
        }
    }

    #[test]
    fn a_tail_keeps_a_torn_record_until_the_rest_arrives() {
        let dir = std::env::temp_dir().join(format!("bir-journal-tail-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("j");
        let first = frame(b"{\"a\":1}");
        let second = frame(b"{\"b\":2}");
        let cut = 5;
        let mut bytes = first.clone();
        bytes.extend_from_slice(&second[..cut]);
        std::fs::write(&path, &bytes).expect("write");
        let mut tail = Tail::open(&path).expect("open");
        let mut got: Vec<Vec<u8>> = Vec::new();
        assert_eq!(tail.poll(|p| got.push(p.to_vec())).expect("poll"), 1);
        assert_eq!(got, [b"{\"a\":1}".to_vec()]);
        assert_eq!(tail.pending_bytes(), cut as u64, "the torn record is kept");
        // Nothing new: nothing handed out, the torn bytes still kept.
        assert_eq!(tail.poll(|p| got.push(p.to_vec())).expect("poll"), 0);
        assert_eq!(tail.pending_bytes(), cut as u64);
        // The writer finishes the record: the next poll completes it.
        let mut file = OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(&second[cut..]).expect("append");
        assert_eq!(tail.poll(|p| got.push(p.to_vec())).expect("poll"), 1);
        assert_eq!(got, [b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec()]);
        assert_eq!(tail.pending_bytes(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn torn_tails_are_cut_never_skipped() {
        let dir = std::env::temp_dir().join(format!("bir-journal-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("j");
        let _ = std::fs::remove_file(&path);
        let mut j = DiskStorage.open_append(&path).expect("open");
        j.append(&frame(b"{\"a\":1}")).expect("append");
        j.append(&frame(b"{\"b\":2}")).expect("append");
        drop(j);
        let full = std::fs::read(&path).expect("read");
        // Every possible torn tail: the good prefix survives, nothing else.
        for cut in 0..full.len() {
            std::fs::write(&path, &full[..cut]).expect("write");
            let got = read(&path).expect("read");
            let want = if cut >= 32 {
                2
            } else if cut >= 16 {
                1
            } else {
                0
            };
            assert_eq!(got.records.len(), want, "cut at {cut}");
        }
        // A corrupt middle record hides the records after it.
        let mut bad = full.clone();
        bad[10] ^= 0xff;
        std::fs::write(&path, &bad).expect("write");
        let got = read(&path).expect("read");
        assert_eq!(got.records.len(), 0);
        assert_eq!(got.torn_bytes, full.len() as u64);
        // Reopening for append truncates the torn tail first.
        std::fs::write(&path, &full[..20]).expect("write");
        let mut j = DiskStorage.open_append(&path).expect("open");
        j.append(&frame(b"{\"c\":3}")).expect("append");
        drop(j);
        let got = read(&path).expect("read");
        assert_eq!(
            got.records,
            vec![b"{\"a\":1}".to_vec(), b"{\"c\":3}".to_vec()]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
