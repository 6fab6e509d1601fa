//! Children tabd starts in a process group of their own (MCP servers, agent CLIs): wrappers such
//! as `npx` start the real program as a grandchild, and only a signal to the whole group reaches it.

pub use rustix::process::{Pid, Signal};

/// The group of a child spawned with `process_group(0)` (its own pid); `None` once it is reaped.
pub fn of(child: &tokio::process::Child) -> Option<Pid> {
    child.id().and_then(|id| Pid::from_raw(id as i32))
}

/// Sends `sig` to every process in the group; a group that is already gone is not an error.
pub fn signal(group: Option<Pid>, sig: Signal) {
    if let Some(pgid) = group {
        let _ = rustix::process::kill_process_group(pgid, sig);
    }
}
