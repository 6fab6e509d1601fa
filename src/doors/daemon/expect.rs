//! Outcome checks (docs/spec.md §22): a role's `expect:` names a file it must have produced by each
//! deadline; one that is not there gets a line in the daily note and a `[notify]` event. A run
//! that reported "ok" is not proof the work happened.
//!
//! docs/spec.md §24, one role's load never holds another's: the loop keeps each role's next deadline
//! (worked out once per check and per reload, not at every wake), and the check itself — a look
//! for each expected file, the state, the daily lines — runs off the loop, one at a time. Each
//! missing file is said once a day (once per cause): a deadline every minute does not add a line
//! every minute.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::core;
use super::Daemon;
use crate::base::vault::{VaultError, VaultPath};
use crate::running::run::RunEnv;
use crate::setup::config::notify::EventKind;
use crate::setup::role::{Role, RoleSet};

/// At most this many deadlines are checked for one expectation at once (a long sleep).
const MAX_BACKLOG: usize = 31;

/// The expectation checks: the one going on, and each role's next deadline.
#[derive(Default)]
pub(super) struct ExpectWork {
    /// The check going on, off the loop.
    pub(super) task: Option<JoinHandle<Checked>>,
    /// Per role: when its next check is due (its first: at once).
    due: HashMap<String, DateTime<Utc>>,
    /// The role set and host `due` was worked out for (a reload replaces the set).
    for_roles: Option<(Arc<RoleSet>, String)>,
}

/// What a check found and did, for the loop to finish: events to send, writes that failed.
pub(super) struct Checked {
    wall: DateTime<Utc>,
    roles: Vec<String>,
    /// (role, path, deadline) said in the daily note for the first time today.
    reported: Vec<(String, String, DateTime<Utc>)>,
    failed: Vec<(&'static str, VaultError)>,
}

/// One expected file missing at a deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Missed {
    pub(super) path: String,
    pub(super) due: DateTime<Utc>,
}

/// The expected files missing at deadlines in `(since, wall]`, each path once (its first
/// deadline): a path still missing at a later deadline is the same cause.
pub(super) fn missed(
    role: &Role,
    since: DateTime<Utc>,
    wall: DateTime<Utc>,
    exists: impl Fn(&str) -> bool,
) -> Vec<Missed> {
    let tz = role.schedule.tz;
    let mut out: Vec<Missed> = Vec::new();
    for e in &role.settings.expect {
        let line = e.deadlines();
        let mut t = since;
        for _ in 0..MAX_BACKLOG {
            let Some(due) = line.next_after(t, tz).filter(|d| *d <= wall) else {
                break;
            };
            let path = e.path_on(due.with_timezone(&tz).date_naive(), &role.name);
            if !out.iter().any(|m| m.path == path) && !exists(&path) {
                out.push(Missed { path, due });
            }
            t = due;
        }
    }
    out
}

/// The role's first deadline after `after`.
pub(super) fn next_due(role: &Role, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    role.settings
        .expect
        .iter()
        .filter_map(|e| e.deadlines().next_after(after, role.schedule.tz))
        .min()
}

impl Daemon {
    /// Starts a check of the roles whose deadline has passed, unless one is going on. The first
    /// time a role is seen, checking starts now: deadlines from before tabd knew the expectation
    /// are not held against it.
    pub(super) fn check_expectations(&mut self, wall: DateTime<Utc>) {
        if self.work.expect.task.is_some() {
            return;
        }
        self.refresh_expect_due(wall);
        let due: Vec<(String, Option<DateTime<Utc>>)> = self
            .work
            .expect
            .due
            .iter()
            .filter(|(_, at)| **at <= wall)
            .map(|(name, _)| {
                let since = self.seen.state.roles.get(name).and_then(|r| r.expect_checked);
                (name.clone(), since)
            })
            .collect();
        if due.is_empty() {
            return;
        }
        let (env, today) = (self.run_env.clone(), self.today());
        self.work.expect.task = Some(tokio::task::spawn_blocking(move || {
            check(&env, &due, wall, today)
        }));
    }

    /// Works each role's next deadline out again when the role set (or the host) changed.
    fn refresh_expect_due(&mut self, wall: DateTime<Utc>) {
        let roles = self.run_env.roles.clone();
        let same = self
            .work
            .expect
            .for_roles
            .as_ref()
            .is_some_and(|(set, host)| Arc::ptr_eq(set, &roles) && *host == self.setup.host);
        if same {
            return;
        }
        let mut due = HashMap::new();
        for role in roles
            .runnable()
            .filter(|r| !r.settings.expect.is_empty() && self.role_may_run_here(r))
        {
            let since = self
                .seen
                .state
                .roles
                .get(&role.name)
                .and_then(|r| r.expect_checked);
            // Never checked: at once, to record when checking starts.
            let at = match since {
                Some(s) => next_due(role, s),
                None => Some(wall),
            };
            if let Some(at) = at {
                due.insert(role.name.clone(), at);
            }
        }
        self.work.expect.due = due;
        self.work.expect.for_roles = Some((roles, self.setup.host.clone()));
    }

    /// A check ended: its events go out, its failed writes are counted, and each role it
    /// checked waits for its next deadline.
    pub(super) fn on_expect_checked(&mut self, checked: Result<Checked, tokio::task::JoinError>) {
        let checked = match checked {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("the expectation check failed: {e}");
                return;
            }
        };
        for (what, e) in checked.failed {
            self.shown.writes.check::<(), _>(what, Err(e));
        }
        let roles = self.run_env.roles.clone();
        for name in &checked.roles {
            match roles.roles.get(name).and_then(|r| next_due(r, checked.wall)) {
                Some(at) => self.work.expect.due.insert(name.clone(), at),
                None => self.work.expect.due.remove(name),
            };
        }
        for (name, path, due) in checked.reported {
            if let Some(role) = roles.roles.get(&name) {
                self.tell_missed(role, &path, due);
            }
        }
    }

    fn tell_missed(&self, role: &Role, path: &str, due: DateTime<Utc>) {
        let at = due.with_timezone(&role.schedule.tz).format("%H:%M");
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

    /// The next deadline of any expectation, for the loop's wake-up (none while a check is
    /// going on: its end wakes the loop).
    pub(super) fn next_deadline(&self, wall: DateTime<Utc>, now: Instant) -> Option<Instant> {
        if self.work.expect.task.is_some() {
            return None;
        }
        self.work
            .expect
            .due
            .values()
            .min()
            .map(|t| core::mono_of(*t, wall, now))
    }
}

/// The check, off the loop: for each due role, the files missing since its last check; the
/// check and the causes said today recorded in one state write; a daily line for each new one.
fn check(
    env: &RunEnv,
    due: &[(String, Option<DateTime<Utc>>)],
    wall: DateTime<Utc>,
    today: NaiveDate,
) -> Checked {
    let mut done = Checked {
        wall,
        roles: Vec::new(),
        reported: Vec::new(),
        failed: Vec::new(),
    };
    for (name, since) in due {
        let Some(role) = env.roles.roles.get(name) else {
            continue;
        };
        done.roles.push(name.clone());
        let exists = |p: &str| VaultPath::parse(p, false).is_ok_and(|p| env.vault.exists(&p));
        let missed = since.map(|s| missed(role, s, wall, exists)).unwrap_or_default();
        let recorded = env.store.update(|s| {
            let r = s.role(name);
            r.expect_checked = Some(wall);
            r.roll_day(today);
            missed
                .iter()
                .filter(|m| r.first_notice(&format!("expect: {}", m.path)))
                .cloned()
                .collect::<Vec<Missed>>()
        });
        let fresh = match recorded {
            Ok(fresh) => fresh,
            Err(e) => {
                // Counted and shown; the deadlines are checked again at the next one.
                done.failed.push(("the state (expect)", e));
                continue;
            }
        };
        for m in fresh {
            let at = m.due.with_timezone(&role.schedule.tz).format("%H:%M");
            tracing::warn!("{}: expected {} by {at}; it is not there", role.name, m.path);
            let line = format!(
                "expected {} by {at}, and it is not there — a run that said ok is not proof the work was done; look at its log",
                crate::records::runlog::wikilink(&m.path)
            );
            if let Err(e) = env.log.write_line(env.clock.now(), &role.display_name, &line) {
                done.failed.push(("the daily note", e));
            }
            done.reported.push((name.clone(), m.path, m.due));
        }
    }
    done
}
