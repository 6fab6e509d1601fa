//! The daemon's clocks and timers, decided in the core: what the shell observed as it woke comes
//! in (`Input::Tick`, `Input::Ticked`), and what is due goes out — a rescan (the minute's safety
//! rescan, a wall-clock jump, lost events, polling), a reload once edits pause, the role files'
//! errors in the daily note once the person stopped editing, systemd's watchdog, the approvals
//! pass (when asked, one at a time, at least each minute), a change of what status counts, and
//! the program pages given back once the daemon is quiet.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::rules::wall_jump;
use super::{Effect, Rescan};

/// Every inbox is rescanned this often even with no event (events can be lost).
pub const SAFETY_TICK: Duration = Duration::from_secs(60);
/// Quiet time after a role-file or config event before reloading (editors write in bursts).
pub const RELOAD_DEBOUNCE: Duration = Duration::from_millis(250);
/// Approvals are looked at this often even without events (expiry; polling mode).
pub const APPROVALS_EVERY: Duration = Duration::from_secs(60);
/// After the minute's safety rescan (and the approvals pass it may start), a second is enough
/// before the pages it touched go back.
pub const AFTER_RESCAN: Duration = Duration::from_secs(1);
/// Scan interval when no watcher could start.
pub const POLL: Duration = Duration::from_secs(2);

/// What the shell observed as it woke, before anything else of the tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub wall: DateTime<Utc>,
    /// File events were lost since the last tick (the event channel overflowed).
    pub events_lost: bool,
    /// No watcher is running: every inbox is listed at each tick.
    pub polling: bool,
}

/// What status counts or polls, as the shell sees it at the end of a tick: a change is shown.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shown {
    /// Side writes that failed since start-up.
    pub failed_writes: u64,
    /// The keep-alive MCP servers: name, up, why down.
    pub mcp_servers: Vec<(String, bool, Option<String>)>,
}

/// How the core's clocks start: the clocks as read at start-up, systemd's watchdog period (if
/// it asked for one) and how long quiet is before program pages go back.
#[derive(Debug, Clone)]
pub struct Clocks {
    pub wall: DateTime<Utc>,
    pub now: Instant,
    pub watchdog: Option<Duration>,
    pub quiet: Duration,
}

/// The approvals pass: when it is due, whether one is going on, the ledger's phases it last saw.
#[derive(Debug, Default)]
struct Approvals {
    due: Option<Instant>,
    running: bool,
    phases: Option<u64>,
}

/// The clocks as last observed and every timer the daemon wakes for.
#[derive(Debug)]
pub(super) struct Timing {
    last_wall: DateTime<Utc>,
    last_mono: Instant,
    next_safety: Instant,
    reload_at: Option<Instant>,
    /// When to write role-file errors into the daily note: once the person has stopped editing.
    role_errors_at: Option<Instant>,
    watchdog: Option<Duration>,
    next_watchdog: Option<Instant>,
    /// When to give back program pages if still quiet, and how long quiet is.
    trim_at: Option<Instant>,
    quiet: Duration,
    polling: bool,
    approvals: Approvals,
    shown: Shown,
}

impl Timing {
    pub(super) fn new(c: &Clocks) -> Self {
        Self {
            last_wall: c.wall,
            last_mono: c.now,
            next_safety: c.now + SAFETY_TICK,
            reload_at: None,
            role_errors_at: None,
            watchdog: c.watchdog,
            next_watchdog: c.watchdog.map(|wd| c.now + wd / 2),
            trim_at: Some(c.now + c.quiet),
            quiet: c.quiet,
            polling: false,
            approvals: Approvals::default(),
            shown: Shown::default(),
        }
    }

    /// The start of a tick: what is due now that the shell has looked at the clocks.
    pub(super) fn tick(&mut self, seen: &Observed, now: Instant) -> Vec<Effect> {
        let mut out = Vec::new();
        if let Some(drift) = wall_jump(self.last_wall, self.last_mono, seen.wall, now) {
            out.push(Effect::Rescan(Rescan::ClockJumped(drift)));
        }
        self.last_wall = seen.wall;
        self.last_mono = now;
        if seen.events_lost {
            out.push(Effect::Rescan(Rescan::EventsLost));
        }
        if now >= self.next_safety {
            self.next_safety = now + SAFETY_TICK;
            // A folder replaced without an event seen is watched again here at the latest.
            out.extend([Effect::Rescan(Rescan::Routine), Effect::RefreshWatches]);
            self.trim_at = Some(now + AFTER_RESCAN);
        }
        self.polling = seen.polling;
        if seen.polling {
            out.push(Effect::Rescan(Rescan::Routine));
        }
        if self.reload_at.is_some_and(|t| now >= t) {
            self.reload_at = None;
            out.push(Effect::Reload);
        }
        if self.role_errors_at.is_some_and(|t| now >= t) {
            self.role_errors_at = None;
            out.push(Effect::LogRoleErrors);
        }
        if self.next_watchdog.is_some_and(|t| now >= t) {
            out.push(Effect::Watchdog);
            self.next_watchdog = self.watchdog.map(|wd| now + wd / 2);
        }
        out
    }

    /// The end of a tick (`busy`: a run is going on): the approvals pass if due, what status
    /// counts if it changed, the pages if the daemon has been quiet long enough.
    pub(super) fn ticked(&mut self, shown: Shown, busy: bool, now: Instant) -> Vec<Effect> {
        let mut out = Vec::new();
        if !self.approvals.running && self.approvals.due.is_some_and(|d| d <= now) {
            self.approvals.due = None;
            self.approvals.running = true;
            out.push(Effect::StartApprovals);
        }
        if shown != self.shown {
            self.shown = shown;
            out.push(Effect::StatusChanged);
        }
        if self.trim_at.is_some_and(|t| now >= t) {
            if busy || self.approvals.running {
                self.busy(now);
            } else {
                self.trim_at = None;
                out.push(Effect::ReleasePages);
            }
        }
        out
    }

    /// A role file or the config was written: reload once the edits pause.
    pub(super) fn edited(&mut self, now: Instant) {
        self.reload_at = Some(now + RELOAD_DEBOUNCE);
    }

    /// Something ran (a run ended, a reload): the pages go back once quiet again.
    pub(super) fn busy(&mut self, now: Instant) {
        self.trim_at = Some(now + self.quiet);
    }

    /// The role files' errors changed: the daily note hears of them once the person has been
    /// quiet for `quiet` (Obsidian saves every few seconds while a person types).
    pub(super) fn role_errors_changed(&mut self, now: Instant, quiet: Duration) {
        self.role_errors_at = Some(now + quiet);
    }

    /// A file event in `agent/approvals/`, `tabd fire` asking, the start: a pass at once.
    pub(super) fn approvals_asked(&mut self, now: Instant) {
        self.approvals.due = Some(now);
    }

    /// An approvals pass ended: the next is due by `next` (an expiry), within a minute anyway.
    /// True when something was decided — by this pass or elsewhere (the ledger's `phases`
    /// changed) — so the status and the waiting runs look again. `phases`: `None` when the
    /// pass failed.
    pub(super) fn approvals_passed(
        &mut self,
        next: Option<Instant>,
        phases: Option<u64>,
        decided: bool,
        now: Instant,
    ) -> bool {
        self.approvals.running = false;
        let at = next.map_or(now + APPROVALS_EVERY, |n| n.min(now + APPROVALS_EVERY));
        self.approvals.due = Some(self.approvals.due.map_or(at, |d| d.min(at)));
        match phases {
            Some(p) => self.approvals.phases.replace(p) != Some(p) || decided,
            None => false,
        }
    }

    /// The instants the timers need the daemon awake for (`now`: polling's next look).
    pub(super) fn wakes(&self, now: Instant) -> [Option<Instant>; 7] {
        [
            Some(self.next_safety),
            self.reload_at,
            self.role_errors_at,
            self.next_watchdog,
            self.trim_at,
            // While a pass goes on, its end wakes the loop: a due time meanwhile waits for it.
            self.approvals.due.filter(|_| !self.approvals.running),
            self.polling.then_some(now + POLL),
        ]
    }
}
