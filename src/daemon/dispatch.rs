//! Starting runs: the decisions are `core::dispatch`'s; here they are carried out — a run started
//! under its role's run lock, a role stopped for the day with one line in the log.

use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

use super::core::{self, Decision, RoleView};
use super::{schedule, Daemon};
use crate::role::Role;

/// How soon to look again when `tabd fire` holds a role's run lock.
const BUSY_RETRY: Duration = Duration::from_secs(2);

impl Daemon {
    /// The local date of "now" (budgets reset at local midnight).
    pub(super) fn today(&self) -> chrono::NaiveDate {
        self.run_env
            .clock
            .now()
            .with_timezone(&self.config().timezone)
            .date_naive()
    }

    /// Starts every run that is allowed now (the decisions are `core::dispatch`'s).
    pub(super) fn dispatch(&mut self, now: Instant) {
        let today = self.today();
        let views: Vec<RoleView> = self
            .rt
            .keys()
            .filter_map(|name| self.roles().roles.get(name))
            .map(|role| RoleView {
                name: role.name.clone(),
                may_run: self.role_may_run_here(role),
                limits: crate::limits::RoleLimits::resolve(role, &self.config().limits),
                today: self
                    .state
                    .roles
                    .get(&role.name)
                    .map(|r| r.today(today))
                    .unwrap_or_default(),
            })
            .collect();
        let all_today = self.state.global.today(today);
        let decisions = core::dispatch(
            &self.rt,
            &views,
            &self.config().limits,
            all_today,
            self.tasks.len(),
            self.paused.is_some(),
            now,
        );
        for d in decisions {
            match d {
                Decision::Start(name) => self.start_run(&name, now),
                Decision::Stop(name, stop) => self.stop_for_today(&name, stop),
                Decision::Drop(name) => {
                    if let Some(r) = self.rt.get_mut(&name) {
                        r.slots.clear();
                    }
                }
            }
        }
    }

    pub(super) fn stop_for_today(&mut self, name: &str, stop: crate::limits::DailyStop) {
        let Some(role) = self.roles().roles.get(name).cloned() else {
            return;
        };
        let cause = stop.cause();
        if self.note_once(name, cause) {
            let now = self.run_env.clock.now();
            self.writes.check(
                "the daily note",
                self.run_env
                    .log
                    .write_line(now, &role.display_name, &format!("skipped — {cause}")),
            );
            self.write_skip_record(&role, cause);
            self.notify_stopped(name, cause);
        }
        if let Some(r) = self.rt.get_mut(name) {
            r.slots.clear();
            r.watch_pending.clear();
            r.inbox_ready = false; // notes wait; the safety tick looks again
            r.person_note_ready = false;
        }
        self.status_dirty = true;
    }

    /// True the first time `cause` is noted for `role` today.
    pub(super) fn note_once(&self, role: &str, cause: &str) -> bool {
        let today = self.today();
        self.run_env
            .store
            .update(|s| {
                let r = s.role(role);
                r.roll_day(today);
                r.first_notice(cause)
            })
            .unwrap_or(true)
    }

    pub(super) fn write_skip_record(&self, role: &Role, cause: &str) {
        let now = self.run_env.clock.now();
        let rec = crate::runlog::RunRecord {
            run_id: crate::run::session::new_id(&role.name, now),
            role: role.name.clone(),
            trigger: crate::runlog::TriggerRecord {
                kind: self.pending_kind(&role.name),
                notes: vec![],
                scheduled_for: None,
                cron: None,
                parent_run_id: None,
                task: None,
            },
            started_at: now,
            ended_at: now,
            outcome: crate::runlog::Outcome::Skipped,
            error: Some(cause.to_string()),
            model: String::new(),
            usage: Default::default(),
            tool_calls: vec![],
            moved: vec![],
            children: vec![],
            ended: None,
        };
        self.writes
            .check("a run record", self.run_env.log.write_record(&rec));
    }

    /// What would have started the run that a limit stopped.
    pub(super) fn pending_kind(&self, role: &str) -> crate::trigger::TriggerKind {
        use crate::trigger::TriggerKind;
        match self.rt.get(role) {
            Some(r) if !r.slots.is_empty() => TriggerKind::Schedule,
            Some(r) if r.inbox_ready => TriggerKind::Inbox,
            Some(r) if !r.watch_pending.is_empty() => TriggerKind::Watch,
            _ => TriggerKind::Schedule,
        }
    }

    /// Starts a run of `name` if its run lock is free (else `tabd fire` has it: try again soon).
    pub(super) fn start_run(&mut self, name: &str, now: Instant) {
        let Some(role) = self.roles().roles.get(name).cloned() else {
            return;
        };
        let lock_path = crate::run::run_lock_path(name);
        let lock = match self.run_env.vault.lock(&lock_path, false) {
            Ok(Some(mut l)) => {
                let _ = l.set_content("the daemon");
                l
            }
            Ok(None) => {
                tracing::info!("{name} is running in another process (`tabd fire`); trying again shortly");
                if let Some(r) = self.rt.get_mut(name) {
                    if r.busy_until.is_none() {
                        self.status_dirty = true;
                    }
                    r.busy_until = Some(now + BUSY_RETRY);
                }
                return;
            }
            Err(e) => {
                tracing::warn!("cannot take the run lock of {name}: {e}");
                return;
            }
        };
        // A second part takes no notes: its run handled its own in its first part.
        let resuming = self.rt.get(name).is_some_and(|r| !r.resumes.is_empty());
        let notes = if resuming {
            Vec::new()
        } else {
            self.pick_notes(&role, now)
        };
        let Some(r) = self.rt.get_mut(name) else { return };
        if r.busy_until.take().is_some() {
            self.status_dirty = true;
        }
        let Some(trigger) = schedule::trigger_for(r, &role, !notes.is_empty()) else {
            return; // the notes went away (moved by someone) before the run started
        };
        r.running = true;
        r.started = Some((self.run_env.clock.now(), trigger.kind.as_str().to_string()));
        let root = self.watching.paths.root.clone();
        let paths: Vec<PathBuf> = notes.iter().map(|n| root.join(n.path.as_path())).collect();
        for p in &paths {
            self.readiness.forget(p);
        }
        self.tasks
            .spawn(self.run_env.clone(), role, trigger, notes, paths, lock);
        self.status_dirty = true;
    }
}
