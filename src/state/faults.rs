//! A test hook for crash safety: with `KUBEUNIT_TEST_KILL_AT=N` in the environment, the process
//! kills itself with SIGKILL at the N-th step of writing a state dir (journal, temp file, rename,
//! removal, manifest), so that tests can interrupt `gen` at every instant. Unset, it does nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

static STEPS: AtomicU64 = AtomicU64::new(0);

fn kill_at() -> Option<u64> {
    static AT: OnceLock<Option<u64>> = OnceLock::new();
    *AT.get_or_init(|| std::env::var("KUBEUNIT_TEST_KILL_AT").ok()?.parse().ok())
}

/// One step of a write; the N-th one is the last when the hook is set.
pub fn step() {
    let Some(at) = kill_at() else { return };
    if STEPS.fetch_add(1, Ordering::SeqCst) + 1 == at {
        // SAFETY: kill and getpid have no preconditions; SIGKILL ends the process here.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}
