//! Signals: received on one thread, forwarded to the upstream, and — at the
//! end — re-raised so the host sees the proxy die the way its server died.
//!
//! The proxy blocks the signals it forwards in every thread (the mask is set
//! before any thread starts and is inherited), and one watcher thread takes
//! them with `sigwait`. No async signal handler runs any of our code.

use std::sync::mpsc::Sender;
use std::thread;

use super::Event;

/// The signals a host uses to stop a server; each is passed on to it.
pub(crate) const FORWARDED: [libc::c_int; 4] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

fn forwarded_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in FORWARDED {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

/// Blocks the forwarded signals in the calling thread. Call before starting
/// any other thread, so that all of them inherit the mask.
pub(crate) fn block_forwarded() {
    let set = forwarded_set();
    // SAFETY: `set` is a valid, initialised signal set.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        log::warn!("cannot block signals (error {rc}); signals will not be forwarded");
    }
}

/// Starts the thread that turns signals into [`Event::Signal`].
pub(crate) fn spawn_watcher(events: Sender<Event>) {
    let spawned = thread::Builder::new()
        .name("bir-signals".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            let set = forwarded_set();
            loop {
                let mut sig: libc::c_int = 0;
                // SAFETY: `set` is valid and `sig` is a valid out pointer.
                let rc = unsafe { libc::sigwait(&set, &mut sig) };
                if rc != 0 {
                    continue;
                }
                if events.send(Event::Signal(sig)).is_err() {
                    return;
                }
            }
        });
    if let Err(err) = spawned {
        log::warn!("cannot start the signal thread: {err}");
    }
}

/// Sends `sig` to the upstream's whole process group (the child was made a
/// group leader, so helpers it started — `npx` → `node` — get it too).
pub(crate) fn send_to_group(pgid: i32, sig: libc::c_int) {
    if pgid <= 0 {
        return;
    }
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// Ends the process by `sig`, as the wrapped server ended. Returns only if
/// the signal does not terminate (then the caller exits with 128+sig).
pub(crate) fn die_of(sig: libc::c_int) {
    // SAFETY: plain libc calls on valid, local arguments. Core dumps are
    // switched off first: the crash was the server's, not the proxy's.
    unsafe {
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
}

/// Standard input that reads as ended once one of the forwarded signals
/// arrives. A server bir answers itself (`bir mock`, `bir-proxy --replay`)
/// then ends its session the way it ends at the end of its input — its run
/// finished and journaled — instead of dying mid-session: hosts stop their
/// servers with SIGINT or SIGTERM rather than by closing their input.
pub(crate) struct InputUntilSignal {
    rx: std::sync::mpsc::Receiver<Option<Vec<u8>>>,
    pending: Vec<u8>,
    at: usize,
    ended: bool,
    signal: std::sync::Arc<std::sync::atomic::AtomicI32>,
}

impl InputUntilSignal {
    /// Blocks the forwarded signals in the calling thread (call it before
    /// starting any other thread, which then inherits the mask) and starts
    /// the stdin reader and the signal watcher.
    pub(crate) fn start() -> InputUntilSignal {
        use std::io::Read;
        use std::sync::atomic::{AtomicI32, Ordering};
        block_forwarded();
        let (tx, rx) = std::sync::mpsc::channel();
        let signal = std::sync::Arc::new(AtomicI32::new(0));
        let input = tx.clone();
        let _ = thread::Builder::new()
            .name("bir-stdin".into())
            .stack_size(128 * 1024)
            .spawn(move || {
                let mut stdin = std::io::stdin().lock();
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match stdin.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if input.send(Some(buf[..n].to_vec())).is_err() {
                                return;
                            }
                        }
                    }
                }
                let _ = input.send(None);
            });
        let seen = std::sync::Arc::clone(&signal);
        let _ = thread::Builder::new()
            .name("bir-signals".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let set = forwarded_set();
                let mut sig: libc::c_int = 0;
                // SAFETY: `set` is valid and `sig` is a valid out pointer.
                while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
                seen.store(sig, Ordering::SeqCst);
                let _ = tx.send(None);
            });
        InputUntilSignal {
            rx,
            pending: Vec::new(),
            at: 0,
            ended: false,
            signal,
        }
    }

    /// The signal that ended the input, if one did.
    pub(crate) fn signal(&self) -> Option<libc::c_int> {
        let sig = self.signal.load(std::sync::atomic::Ordering::SeqCst);
        (sig != 0).then_some(sig)
    }
}

impl std::io::Read for InputUntilSignal {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at >= self.pending.len() {
            if self.ended {
                return Ok(0);
            }
            match self.rx.recv() {
                Ok(Some(bytes)) => {
                    self.pending = bytes;
                    self.at = 0;
                }
                Ok(None) | Err(_) => self.ended = true,
            }
        }
        let n = out.len().min(self.pending.len() - self.at);
        out[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
