//! Outcome checks (DESIGN §22): a role's `expect:` names a file it must have produced by each
//! deadline; one that is not there gets a line in the daily note and a `[notify]` event. A run
//! that reported "ok" is not proof the work happened.

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::{core, Daemon};
use crate::config::notify::EventKind;
use crate::role::Role;
use crate::vault::VaultPath;

/// At most this many deadlines are checked for one expectation at once (a long sleep).
const MAX_BACKLOG: usize = 31;

impl Daemon {
    /// Checks every deadline passed since the last check. The first time a role is seen, checking
    /// starts now: deadlines from before tabd knew the expectation are not held against it.
    pub(super) fn check_expectations(&mut self, wall: DateTime<Utc>) {
        let roles: Vec<Role> = self
            .roles()
            .runnable()
            .filter(|r| !r.settings.expect.is_empty() && self.role_may_run_here(r))
            .cloned()
            .collect();
        for role in roles {
            let since = self.state.roles.get(&role.name).and_then(|r| r.expect_checked);
            // Nothing to write until a deadline has passed since the last check (this runs at
            // every wake: a state write each time would be a write per event).
            if since.is_some_and(|s| !self.deadline_passed(&role, s, wall)) {
                continue;
            }
            let missed = since.map(|s| self.missed(&role, s, wall)).unwrap_or_default();
            let recorded = self
                .run_env
                .store
                .update(|s| s.role(&role.name).expect_checked = Some(wall));
            if let Err(e) = recorded {
                tracing::warn!("{}: cannot record the expectation check: {e}", role.name);
                continue;
            }
            for (path, due) in missed {
                self.report_missed(&role, &path, due);
            }
        }
    }

    /// Whether any of the role's deadlines falls in `(since, wall]`.
    fn deadline_passed(&self, role: &Role, since: DateTime<Utc>, wall: DateTime<Utc>) -> bool {
        role.settings
            .expect
            .iter()
            .filter_map(|e| e.deadlines().next_after(since, role.schedule.tz))
            .any(|due| due <= wall)
    }

    /// The expected files missing at deadlines in `(since, wall]`.
    fn missed(&self, role: &Role, since: DateTime<Utc>, wall: DateTime<Utc>) -> Vec<(String, DateTime<Utc>)> {
        let tz = role.schedule.tz;
        let mut out = Vec::new();
        for e in &role.settings.expect {
            let line = e.deadlines();
            let mut t = since;
            for _ in 0..MAX_BACKLOG {
                let Some(due) = line.next_after(t, tz).filter(|d| *d <= wall) else {
                    break;
                };
                let path = e.path_on(due.with_timezone(&tz).date_naive(), &role.name);
                let there = VaultPath::parse(&path, false).is_ok_and(|p| self.run_env.vault.exists(&p));
                if !there {
                    out.push((path, due));
                }
                t = due;
            }
        }
        out
    }

    fn report_missed(&self, role: &Role, path: &str, due: DateTime<Utc>) {
        let at = due.with_timezone(&role.schedule.tz).format("%H:%M");
        let line = format!(
            "expected {} by {at}, and it is not there — a run that said ok is not proof the work was done; look at its log",
            crate::runlog::wikilink(path)
        );
        tracing::warn!("{}: expected {path} by {at}; it is not there", role.name);
        self.writes.check(
            "the daily note",
            self.run_env
                .log
                .write_line(self.run_env.clock.now(), &role.display_name, &line),
        );
        self.tell(
            EventKind::Expect,
            &role.name,
            format!("expect:{}:{path}:{due}", role.name),
            (
                format!("{}: {path} is missing", role.display_name),
                format!("It was expected by {at}; no run produced it."),
            ),
            Some(
                self.run_env
                    .log
                    .daily_path(self.run_env.clock.now())
                    .as_str()
                    .to_string(),
            ),
        );
    }

    /// The next deadline of any expectation, for the loop's wake-up.
    pub(super) fn next_deadline(&self, wall: DateTime<Utc>, now: Instant) -> Option<Instant> {
        self.roles()
            .runnable()
            .flat_map(|r| r.settings.expect.iter().map(move |e| (r, e)))
            .filter_map(|(r, e)| e.deadlines().next_after(wall, r.schedule.tz))
            .min()
            .map(|t| core::mono_of(t, wall, now))
    }
}
