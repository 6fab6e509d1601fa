//! Filesystem work called from async code: vault walks, hashing, tool calls. On the daemon's
//! multi-thread runtime it runs under `block_in_place`, so the runtime moves its other tasks
//! (the main loop, the watchdog) to another thread while this one works; elsewhere (a
//! current-thread runtime, a plain thread) it just runs.

use tokio::runtime::{Handle, RuntimeFlavor};

pub fn run<T>(work: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(work),
        _ => work(),
    }
}
