//! How the recording threads are scheduled next to the relay's.
//!
//! Each recording thread sets its own scheduling once, when it starts; all
//! of these calls affect the calling thread only (Linux; elsewhere they do
//! nothing). Why each thread gets what it gets is in the module docs of
//! [`super`] and [`super::pause`].

use std::time::Duration;

/// How much the background network threads step back (the most `nice`
/// allows).
const RECORDING_NICENESS: i32 = 19;

/// Lowers the calling thread's priority for good, so that on a busy CPU
/// the kernel runs a waking relay thread ahead of it. Only for threads
/// whose work may be left unfinished at the end without losing data: the
/// recording service's sender (what it does not send stays in the journal
/// for `bir sync`) and the daemon finder. Never the observer's worker,
/// which must complete the run (see [`super`]). (Linux:
/// `setpriority` on a thread id affects that thread only.)
pub(crate) fn give_way_to_the_relay() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: two system calls with no pointers; the id is our own.
        let failed = unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, RECORDING_NICENESS) != 0
        };
        if failed {
            log::debug!("could not lower the recording thread's priority");
        }
    }
}

/// The time slice the worker asks for: longer than the kernel's default
/// (about 1.4 ms on two CPUs), which is what lets a waking relay thread
/// preempt it at once (see [`run_as_batch`]).
const WORKER_SLICE: Duration = Duration::from_millis(10);

/// Puts the calling thread in `SCHED_BATCH` with a long time slice
/// ([`WORKER_SLICE`]). Its weight stays that of any normal thread, so the
/// worker still gets its share of a busy CPU and completes its runs, and
/// an unprivileged thread may go back. What changes is who preempts whom
/// (Linux's EEVDF scheduler, 6.12 and later): a waking batch thread never
/// preempts the running one (the worker's wake-ups do not cut into a
/// relay thread between its read and its write), and a waking thread
/// with a shorter slice than the running one's — a relay thread waking
/// while the worker runs — takes the CPU at once instead of waiting for
/// the worker's slice to end. On older kernels the slice is ignored and
/// only the first half holds; where the call is refused, the worker
/// keeps the default policy. (The calling thread only.)
pub(super) fn run_as_batch() {
    #[cfg(target_os = "linux")]
    {
        /// `struct sched_attr`, first version (48 bytes), as the kernel
        /// reads it.
        #[repr(C)]
        struct SchedAttr {
            size: u32,
            policy: u32,
            flags: u64,
            nice: i32,
            priority: u32,
            runtime_ns: u64,
            deadline_ns: u64,
            period_ns: u64,
        }
        // SAFETY: no pointers. The thread keeps its nice value (a user's
        // `nice bir …` holds; lowering it would be refused).
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            policy: libc::SCHED_BATCH as u32,
            flags: 0,
            nice,
            priority: 0,
            runtime_ns: WORKER_SLICE.as_nanos() as u64,
            deadline_ns: 0,
            period_ns: 0,
        };
        // SAFETY: `attr` is a valid, fully initialised sched_attr of the
        // size it declares, alive for the call; pid 0 is the calling
        // thread; flags 0.
        let sliced = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr, 0) == 0 };
        if sliced {
            return;
        }
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid sched_param for the call's duration.
        let batched = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) == 0 };
        if !batched {
            log::debug!("the recording thread stays in the default scheduling policy");
        }
    }
}

/// How late the pause watch's and the worker's timers may fire
/// (`PR_SET_TIMERSLACK`): more than the scheduler's tick at 250 Hz (4 ms),
/// the common setting; at 100 Hz some of them still get an interrupt of
/// their own.
pub(super) const TIMER_SLACK: Duration = Duration::from_millis(5);

/// Lets the calling thread's timers fire up to [`TIMER_SLACK`] late.
pub(super) fn allow_late_timers() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: an integer argument; affects the calling thread only.
        let failed = unsafe {
            libc::prctl(
                libc::PR_SET_TIMERSLACK,
                TIMER_SLACK.as_nanos() as libc::c_ulong,
            )
        } != 0;
        if failed {
            log::debug!("could not set a recording thread's timer slack");
        }
    }
}

/// Puts the calling thread in `SCHED_IDLE`. (An unprivileged thread may
/// always lower itself; this one never needs to come back.)
pub(super) fn enter_idle_class() -> bool {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid sched_param for the call's duration;
        // pid 0 is the calling thread.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}
