//! The clocks as the loop last read them, and the deadlines it wakes for.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// Every inbox is rescanned this often even with no event (events can be lost).
pub(super) const SAFETY_TICK: Duration = Duration::from_secs(60);

/// The clocks as last read, and the timers the loop wakes for.
pub(super) struct Timers {
    pub(super) last_wall: DateTime<Utc>,
    pub(super) last_mono: Instant,
    pub(super) next_safety: Instant,
    pub(super) reload_at: Option<Instant>,
    /// When to write role-file errors into the daily note: once the person has stopped editing.
    pub(super) role_errors_at: Option<Instant>,
    pub(super) watchdog: Option<Duration>,
    pub(super) next_watchdog: Option<Instant>,
    /// When to give back program pages if still quiet, and how long quiet is (`quiet.rs`).
    pub(super) trim_at: Option<Instant>,
    pub(super) quiet: Duration,
}

impl Timers {
    pub(super) fn new(wall: DateTime<Utc>, now: Instant, quiet: Duration) -> Self {
        Self {
            last_wall: wall,
            last_mono: now,
            next_safety: now + SAFETY_TICK,
            reload_at: None,
            role_errors_at: None,
            watchdog: sd_notify::watchdog_enabled(),
            next_watchdog: None,
            trim_at: Some(now + quiet),
            quiet,
        }
    }
}
