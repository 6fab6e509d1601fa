//! What the daemon does once it has been quiet a while: give back the program pages that
//! start-up, a reload or the last runs touched (`crate::memory`), so an idle tabd holds only
//! what idling needs. The minute's safety rescan gives its pages back a second later.

use std::time::Duration;

use tokio::time::Instant;

use super::Daemon;

/// Quiet time before the pages are given back: a burst of runs is over by then, and what the
/// next run needs again comes back with minor faults (~100 of them, under a millisecond), never
/// a disk read.
const QUIET: Duration = Duration::from_secs(10);

/// After the minute's safety rescan (and the approvals pass it may start), a second is enough.
pub const AFTER_RESCAN: Duration = Duration::from_secs(1);

/// The quiet time (`TABD_TEST_QUIET_MS` shortens it for tests).
pub fn quiet(env: &crate::environment::Env) -> Duration {
    env.get("TABD_TEST_QUIET_MS")
        .and_then(|ms| ms.parse().ok())
        .map_or(QUIET, Duration::from_millis)
}

impl Daemon {
    /// Something ran: give back its pages once the daemon has been quiet for a while.
    pub(super) fn busy_until_quiet(&mut self, now: Instant) {
        self.timers.trim_at = Some(now + self.timers.quiet);
    }

    /// At the end of a tick, from `trim_at` on: gives the pages back, or waits again while a run
    /// or the approvals pass is still going.
    pub(super) fn trim_when_quiet(&mut self, now: Instant) {
        if self.timers.trim_at.is_none_or(|t| now < t) {
            return;
        }
        if !self.tasks.is_empty() || self.approvals.task.is_some() {
            self.busy_until_quiet(now);
            return;
        }
        self.timers.trim_at = None;
        let released = crate::memory::release_program_pages();
        tracing::debug!(
            "quiet: gave back {} KiB of program pages",
            released.advised / 1024
        );
    }
}
