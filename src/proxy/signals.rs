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
pub const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

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
pub fn block_forwarded() {
    let set = forwarded_set();
    // SAFETY: `set` is a valid, initialised signal set.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        log::warn!("cannot block signals (error {rc}); signals will not be forwarded");
    }
}

/// Starts the thread that turns signals into [`Event::Signal`].
pub fn spawn_watcher(events: Sender<Event>) {
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
pub fn send_to_group(pgid: i32, sig: libc::c_int) {
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
pub fn die_of(sig: libc::c_int) {
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
