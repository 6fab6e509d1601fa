//! The core's effects, carried out: a run started under its role's run lock, a finished run
//! fed back, a role stopped for the day with one line in the log, a pause recorded.

use std::path::PathBuf;

use super::core::{Effect, Input, RoleView};
use super::{schedule, tasks, Daemon};
use crate::provider::FailureClass;
use crate::role::Role;

impl Daemon {
    /// The local date of "now" (budgets reset at local midnight).
    pub(super) fn today(&self) -> chrono::NaiveDate {
        self.run_env
            .clock
            .now()
            .with_timezone(&self.config().timezone)
            .date_naive()
    }

    /// Feeds one input to the core at "now" and carries out what it says.
    pub(super) fn apply(&mut self, input: Input) {
        let now = self.run_env.clock.instant();
        let effects = self.core.step(input, now);
        for effect in effects {
            self.carry_out(effect);
        }
    }

    fn carry_out(&mut self, effect: Effect) {
        match effect {
            Effect::Start(name) => self.start_run(&name),
            Effect::StopForToday { role, stop, kind } => self.stop_for_today(&role, stop, kind),
            Effect::Paused { reason, .. } => {
                tracing::warn!(
                    "model calls paused for {} min: {reason}",
                    super::core::PAUSE.as_secs() / 60
                );
                let r = self.run_env.store.update(|s| s.global.paused = Some(reason));
                self.writes.check("the state (paused)", r);
            }
            Effect::Unpaused => {
                tracing::info!("model calls go on");
                let r = self.run_env.store.update(|s| s.global.paused = None);
                self.writes.check("the state (paused)", r);
            }
            Effect::RoleWaits { role, until } => {
                let secs = until
                    .saturating_duration_since(self.run_env.clock.instant())
                    .as_secs();
                tracing::warn!("{role} waits {} min for a server it requires", secs.div_ceil(60));
            }
            Effect::StatusChanged => self.status_dirty = true,
            // Only a `LockTaken` input answers with these, inside `start_run`.
            Effect::Spawn { role, .. } | Effect::Release(role) => {
                tracing::error!("tabd bug: a run of {role} was to start outside start_run");
            }
        }
    }

    /// Asks the core what starts now (the decisions are `core::rules::dispatch`'s).
    pub(super) fn dispatch(&mut self) {
        let today = self.today();
        let roles: Vec<RoleView> = self
            .core
            .roles()
            .filter_map(|(name, _)| self.roles().roles.get(name))
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
        self.apply(Input::Tick {
            roles,
            limits: self.config().limits.clone(),
            all_today: self.state.global.today(today),
        });
    }

    fn stop_for_today(
        &mut self,
        name: &str,
        stop: crate::limits::DailyStop,
        kind: crate::trigger::TriggerKind,
    ) {
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
            self.write_skip_record(&role, cause, kind);
            self.notify_stopped(name, cause);
        }
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

    pub(super) fn write_skip_record(&self, role: &Role, cause: &str, kind: crate::trigger::TriggerKind) {
        let now = self.run_env.clock.now();
        let rec = crate::runlog::RunRecord {
            run_id: crate::run::session::new_id(&role.name, now),
            role: role.name.clone(),
            trigger: crate::runlog::TriggerRecord {
                kind,
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

    /// Starts a run of `name` if its run lock is free (else `tabd fire` has it: try again soon).
    fn start_run(&mut self, name: &str) {
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
                self.apply(Input::LockBusy { role: name.into() });
                return;
            }
            Err(e) => {
                tracing::warn!("cannot take the run lock of {name}: {e}");
                return;
            }
        };
        // A second part takes no notes: its run handled its own in its first part.
        let resuming = self.core.role(name).is_some_and(|r| r.resuming());
        let notes = if resuming {
            Vec::new()
        } else {
            self.pick_notes(&role, self.run_env.clock.instant())
        };
        let root = self.watching.paths.root.clone();
        let paths: Vec<PathBuf> = notes.iter().map(|n| root.join(n.path.as_path())).collect();
        let now = self.run_env.clock.instant();
        let taken = Input::LockTaken {
            role: name.into(),
            notes: paths.clone(),
            wall: self.run_env.clock.now(),
        };
        let mut lock = Some(lock);
        let mut notes = Some(notes);
        for effect in self.core.step(taken, now) {
            match effect {
                Effect::Spawn { work, .. } => {
                    let (Some(lock), Some(notes)) = (lock.take(), notes.take()) else {
                        continue;
                    };
                    let trigger = schedule::trigger_of(work, &role);
                    self.tasks.spawn(
                        self.run_env.clone(),
                        role.clone(),
                        trigger,
                        notes,
                        paths.clone(),
                        lock,
                    );
                }
                // The notes went away (moved by someone) before the run started: the lock goes.
                Effect::Release(_) => drop(lock.take()),
                other => self.carry_out(other),
            }
        }
    }

    /// A run ended: the core frees the role (pausing or resuming model calls as the run's end
    /// says), the person is told what needs them, the run's own writes are not changes for its
    /// `watch`.
    pub(super) fn on_done(&mut self, done: tasks::Done) {
        let (_, now) = self.now();
        self.busy_until_quiet(now);
        match &done.result.failure {
            Some((FailureClass::RunFailure, why)) => tracing::warn!("run of {} failed: {why}", done.role),
            Some((FailureClass::Stopped, _)) => {
                tracing::info!(
                    "run of {} stopped; its notes run again at the next start",
                    done.role
                )
            }
            Some((FailureClass::Unavailable, why)) => tracing::warn!("{}: {why}", done.role),
            Some((FailureClass::Outage, _)) => {}
            None => tracing::info!("run of {} finished: {}", done.role, done.result.record.outcome),
        }
        self.apply(Input::Finished {
            role: done.role.clone(),
            failure: done.result.failure.clone(),
            tokens: done.result.record.usage.tokens.total(),
            notes: done.notes.clone(),
        });
        self.notify_run(&done);
        // Its record is safe in state, but a log it could not write is a write that failed.
        for e in &done.result.log_errors {
            self.writes.check::<(), _>("a run's log", Err(e));
        }
        self.absorb_own_changes(&done.role, &done.result.changes);
    }
}
