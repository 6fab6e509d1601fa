//! What goes out: the core's effects carried out — a run started under its role's run lock, a
//! finished run fed back, a role stopped for the day with one line in the log, a pause recorded —
//! and the rest of the shell's doing: the person told what needs them (`[notify]`), program pages
//! given back once quiet, and the stop (running turns end where they are after the grace time).

use std::path::PathBuf;
use std::time::Duration;

use super::core::{Effect, Input, RoleView};
use super::{inputs, notify_systemd, tasks, Daemon};
use crate::capabilities::notify::{Event, Notifier};
use crate::capabilities::provider::FailureClass;
use crate::setup::config::notify::EventKind;
use crate::setup::role::Role;

// The core's effects, carried out: a run started under its role's run lock, a finished run fed
// back, a role stopped for the day with one line in the log, a pause recorded.

impl Daemon {
    /// The local date of "now" (budgets reset at local midnight).
    pub(super) fn today(&self) -> chrono::NaiveDate {
        self.run_env
            .clock
            .now()
            .with_timezone(&self.config().timezone)
            .date_naive()
    }

    /// Feeds one input to the core and carries out what it says (`core::drive`). Fed while
    /// effects are being carried out, it waits until that step's effects are all carried out.
    pub(super) fn apply(&mut self, input: Input) {
        if self.work.driving {
            self.work.fed.push(input);
            return;
        }
        self.work.driving = true;
        super::core::drive(self, input);
        self.work.driving = false;
    }

    fn carry(&mut self, effect: Effect) {
        match effect {
            Effect::Start(name) => self.start_run(&name),
            Effect::StopForToday { role, stop, skipped } => self.stop_for_today(&role, stop, skipped),
            Effect::Paused { reason, .. } => {
                tracing::warn!(
                    "model calls paused for {} min, or until the config or the env file is saved: {reason}",
                    super::core::PAUSE.as_secs() / 60
                );
                let r = self.run_env.store.update(|s| s.global.paused = Some(reason));
                self.shown.writes.check("the state (paused)", r);
            }
            Effect::Unpaused => {
                tracing::info!("model calls go on");
                let r = self.run_env.store.update(|s| s.global.paused = None);
                self.shown.writes.check("the state (paused)", r);
            }
            Effect::RoleWaits { role, until } => {
                let secs = until
                    .saturating_duration_since(self.run_env.clock.instant())
                    .as_secs();
                tracing::warn!("{role} waits {} min for a server it requires", secs.div_ceil(60));
            }
            Effect::StatusChanged => self.shown.dirty = true,
            Effect::Rescan(why) => {
                match why {
                    super::core::Rescan::ClockJumped(drift) => tracing::info!(
                        "the wall clock jumped by {}s (suspend or clock change): recomputing schedules, rescanning inboxes",
                        drift.num_seconds()
                    ),
                    super::core::Rescan::EventsLost => {
                        tracing::warn!("file events overflowed; rescanning every inbox")
                    }
                    super::core::Rescan::Routine => {}
                }
                self.seen.rescan_all = true;
            }
            Effect::RefreshWatches => self.refresh_watches(),
            Effect::Reload => self.reload(),
            Effect::LogRoleErrors => self.log_role_errors(),
            Effect::Watchdog => notify_systemd(&[sd_notify::NotifyState::Watchdog]),
            Effect::StartApprovals => self.start_approvals_pass(),
            Effect::QueueResumes => self.queue_resumes(),
            Effect::ReleasePages => {
                let released = crate::base::memory::release_program_pages();
                tracing::debug!(
                    "quiet: gave back {} KiB of program pages",
                    released.advised / 1024
                );
            }
            Effect::Spawn { role, work } => self.spawn_run(&role, work),
            // The notes went away (moved by someone) before the run started: the lock goes.
            Effect::Release(role) => drop(self.work.starting.remove(&role)),
            pause @ (Effect::PauseBegan(_)
            | Effect::PauseEnded(_)
            | Effect::StopRun(_)
            | Effect::SlotsPaused { .. }) => self.carry_pause(pause),
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
                limits: crate::records::limits::RoleLimits::resolve(role, &self.config().limits),
                today: self
                    .seen
                    .state
                    .roles
                    .get(&role.name)
                    .map(|r| r.today(today))
                    .unwrap_or_default(),
            })
            .collect();
        self.apply(Input::Dispatch {
            roles,
            limits: self.config().limits.clone(),
            all_today: self.seen.state.global.today(today),
        });
    }

    /// A role stopped for today: a skip (`skipped`: what would have started the run) is logged
    /// once a day per cause; the person is told once (`tell_stopped`).
    fn stop_for_today(
        &mut self,
        name: &str,
        stop: crate::records::limits::DailyStop,
        skipped: Option<crate::base::trigger::TriggerKind>,
    ) {
        let Some(role) = self.roles().roles.get(name).cloned() else {
            return;
        };
        let cause = stop.cause();
        if let Some(kind) = skipped {
            if self.note_once(name, cause) {
                let now = self.run_env.clock.now();
                self.shown.writes.check(
                    "the daily note",
                    self.run_env
                        .log
                        .write_line(now, &role.display_name, &format!("skipped — {cause}")),
                );
                self.write_skip_record(&role, cause, kind);
            }
        }
        self.tell_stopped(name, stop);
    }

    /// Tells the person that `role` stopped for today — once a day per role and limit, whoever
    /// found it (a run that crossed a budget between two steps, a run its door skipped), and a
    /// global budget once a day for every role; state keeps it across restarts.
    fn tell_stopped(&self, role: &str, stop: crate::records::limits::DailyStop) {
        if self.shown.notifier.is_none() {
            return;
        }
        let (today, told) = (self.today(), format!("told: {}", stop.cause()));
        let first = self.run_env.store.update(|s| {
            if stop.is_global() {
                s.global.first_notice(today, &told)
            } else {
                let r = s.role(role);
                r.roll_day(today);
                r.first_notice(&told)
            }
        });
        self.shown.writes.check("the state (a notice)", first.as_ref());
        // Not recorded: told now all the same (twice is better than never).
        if first.unwrap_or(true) {
            self.notify_stopped(role, stop);
        }
    }

    /// True the first time `cause` is noted for `role` today.
    pub(super) fn note_once(&self, role: &str, cause: &str) -> bool {
        let today = self.today();
        let first = self.run_env.store.update(|s| {
            let r = s.role(role);
            r.roll_day(today);
            r.first_notice(cause)
        });
        self.shown.writes.check("the state (a notice)", first.as_ref());
        first.unwrap_or(true)
    }

    pub(super) fn write_skip_record(
        &self,
        role: &Role,
        cause: &str,
        kind: crate::base::trigger::TriggerKind,
    ) {
        let now = self.run_env.clock.now();
        let rec = crate::records::runlog::RunRecord {
            run_id: crate::base::run_id::RunId::new(&role.name, now).into(),
            role: role.name.clone(),
            trigger: crate::records::runlog::TriggerRecord {
                kind,
                notes: vec![],
                scheduled_for: None,
                cron: None,
                parent_run_id: None,
                task: None,
                rerun: None,
            },
            started_at: now,
            ended_at: now,
            outcome: crate::records::runlog::Outcome::Skipped,
            error: Some(cause.to_string()),
            model: String::new(),
            requests: 0,
            usage: Default::default(),
            tool_calls: vec![],
            moved: vec![],
            children: vec![],
            ended: None,
            notes_truncated: Vec::new(),
            triage: None,
        };
        self.shown
            .writes
            .check("a run record", self.run_env.log.write_record(&rec));
    }

    /// The core's `Start`: takes `name`'s run lock and picks its notes; the answer goes back as
    /// an input (`LockTaken`, or `LockBusy` while `tabd fire` holds the lock: tried again soon),
    /// and the lock and notes wait in `starting` for the `Spawn` or `Release` it brings.
    fn start_run(&mut self, name: &str) {
        let Some(role) = self.roles().roles.get(name).cloned() else {
            return;
        };
        let lock_path = crate::running::run::run_lock_path(name);
        let lock = match self.run_env.vault.lock(&lock_path, false) {
            Ok(Some(mut l)) => {
                // Who holds it, for another `tabd fire`'s message: the run goes on without it.
                self.shown
                    .writes
                    .check("the run lock's holder", l.set_content("the daemon"));
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
        self.work.starting.insert(
            name.to_string(),
            Starting {
                lock,
                notes,
                paths: paths.clone(),
            },
        );
        self.apply(Input::LockTaken {
            role: name.into(),
            notes: paths,
            wall: self.run_env.clock.now(),
        });
    }

    /// The core's `Spawn`: the run starts with the lock and the notes its start took.
    fn spawn_run(&mut self, name: &str, work: super::core::Work) {
        let (Some(starting), Some(role)) = (
            self.work.starting.remove(name),
            self.roles().roles.get(name).cloned(),
        ) else {
            tracing::error!("tabd bug: a run of {name} was to start without its run lock");
            return;
        };
        let slot = match &work {
            super::core::Work::Slot(s) => Some(s.slot),
            _ => None,
        };
        let mut env = self.run_env.clone();
        env.fence = self.fence_for(name, slot, &starting.paths);
        env.stop = self.work.stops.for_run(name);
        let mut trigger = inputs::trigger_of(work, &role);
        self.slot_starts(name, &mut trigger);
        self.work
            .tasks
            .spawn(env, role, trigger, starting.notes, starting.paths, starting.lock);
    }

    /// A run ended: the core frees the role (pausing or resuming model calls as the run's end
    /// says), the person is told what needs them, the run's own writes are not changes for its
    /// `watch`.
    pub(super) fn on_done(&mut self, done: tasks::Done) {
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
            None if done.result.record.waits() => tracing::info!(
                "run of {} waits for your approval ({}); it goes on once you decide",
                done.role,
                waiting_notes(&done.result.record)
            ),
            None => tracing::info!(
                "run of {} finished: {}",
                done.role,
                done.result.record.shown_outcome()
            ),
        }
        self.work.stops.ended(&done.role);
        self.apply(Input::Finished {
            role: done.role.clone(),
            failure: done.result.failure.clone(),
            tokens: done.result.record.usage.tokens.total(),
            notes: done.notes.clone(),
            day_spent: done.result.day_spent.clone(),
        });
        self.notify_run(&done);
        self.settle_claims(&done.role, done.result.succeeded(), &done.notes);
        self.share_waiting();
        self.ran_here(&done.role, &done.result.record);
        self.absorb_own_changes(&done.role, &done.result.changes);
    }
}

/// A run the core said to start, between its lock taken and its `Spawn`.
pub(super) struct Starting {
    lock: crate::base::vault::FileLock,
    notes: Vec<crate::records::inbox::Note>,
    /// The notes' absolute paths.
    paths: Vec<PathBuf>,
}

impl super::core::Shell for Daemon {
    fn core(&mut self) -> &mut super::core::Core {
        &mut self.core
    }

    fn instant(&self) -> tokio::time::Instant {
        self.run_env.clock.instant()
    }

    fn carry_out(&mut self, effect: Effect) -> Vec<Input> {
        self.carry(effect);
        std::mem::take(&mut self.work.fed)
    }
}

/// The approval notes a waiting run's calls wait in, for the daemon's log.
fn waiting_notes(rec: &crate::records::runlog::RunRecord) -> String {
    let notes: Vec<&str> = rec
        .tool_calls
        .iter()
        .filter_map(|c| c.approval.as_deref())
        .collect();
    notes.join(", ")
}

// What the daemon tells the person through `[notify]` (docs/spec.md §22): calls waiting for approval,
// model calls paused, roles stopped for the day, notes moved to `failed/`, a role failing again
// and again, expectations missed — each once.

/// `why` as the start of a sentence tabd goes on: one line, bounded, without its own closing
/// punctuation (a server's "invalid x-api-key." never becomes "x-api-key.. Notes wait"), with a
/// capital: "Daily cost budget spent; its work waits until midnight."
fn sentence(why: &str) -> String {
    let line = crate::base::text::one_line(why, 300);
    let line = line.trim_end_matches(['.', ';', ':', ',', ' ']);
    let mut chars = line.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// A waiting call's push: the title names what it does to what (`Ops asks to write
/// reviews/week.md`), the message starts with the first lines of the change — what a person
/// decides on from a lock screen. Model text, one line each (`approvals::gist`).
pub(super) fn approval_words(
    who: &str,
    id: &str,
    a: &crate::records::state::approval_ledger::Approval,
    tz: chrono_tz::Tz,
) -> (String, String) {
    use crate::gate::approvals::gist;
    let title = match &a.gist {
        Some(g) => crate::gate::approvals::note::title(who, g),
        None => format!("{} asks to run {}", gist::one_line(who, 60), a.tool),
    };
    let change = a
        .gist
        .as_ref()
        .map(|g| gist::one_line(&g.change, gist::CHANGE_MAX + 1))
        .filter(|c| !c.is_empty())
        .map_or_else(String::new, |c| format!("“{c}” — "));
    let until = crate::base::text::shown(a.expires, tz);
    let message = match a.kind {
        crate::records::state::approval_ledger::Kind::Checkpoint { calls, every } => format!(
            "The run waits at its checkpoint after {calls} tool calls (checkpoint_every: {every}) until {until}: \
             Continue or Stop, set `status: approved` or `rejected` in the note, or `tabd approve {id}`."
        ),
        crate::records::state::approval_ledger::Kind::Call => format!(
            "{change}A {} call waits for your approval (until {until}): set `status: approved` or `rejected` in the note, or `tabd approve {id}`.",
            a.risk.as_str(),
        ),
    };
    (title, message)
}

impl Daemon {
    /// (Re)starts the notifier from the config: at start-up and when `[notify]` changed.
    pub(super) fn start_notifier(&mut self) {
        let name = self
            .watching
            .paths
            .root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.shown.notifier = Notifier::start(
            &self.config().notify,
            self.setup.env.clone(),
            &name,
            self.config().timezone,
        );
        self.start_replies();
    }

    /// Queues one event (nothing when no channel is set).
    pub(super) fn tell(
        &self,
        kind: EventKind,
        role: &str,
        key: String,
        words: (String, String),
        note: Option<String>,
    ) {
        self.send(self.event(kind, role, key, words, note));
    }

    /// The event `tell` sends, to add to before it is sent.
    pub(super) fn event(
        &self,
        kind: EventKind,
        role: &str,
        key: String,
        (title, message): (String, String),
        note: Option<String>,
    ) -> Event {
        Event {
            kind,
            role: role.to_string(),
            title,
            message,
            note,
            at: self.run_env.clock.now(),
            key,
            replies: None,
            replaces: None,
        }
    }

    /// Queues `ev` (nothing when no channel is set).
    pub(super) fn send(&self, ev: Event) {
        if let Some(n) = &self.shown.notifier {
            n.send(ev);
        }
    }

    /// Calls waiting for approval that the person has not been told about (whichever door asked:
    /// a run, `tabd fire`, `tabd mcp serve`): each once, across restarts.
    pub(super) fn notify_approvals(&mut self) {
        // Those decided since: their outcome, in their push's place (`[notify] reply_topic`).
        self.tell_decided();
        if self.shown.notifier.is_none() {
            return;
        }
        let now = self.run_env.clock.now();
        let fresh: Vec<(String, crate::records::state::approval_ledger::Approval)> = self
            .seen
            .state
            .approvals
            .iter()
            .filter(|(_, a)| {
                a.phase == crate::gate::approvals::NoteStatus::Pending && !a.notified && a.expires > now
            })
            // The ledger is written before the note: tell the person once there is a note to open.
            .filter(|(_, a)| {
                crate::base::vault::VaultPath::parse(&a.note, false)
                    .is_ok_and(|p| self.run_env.vault.exists(&p))
            })
            .map(|(id, a)| (id.clone(), a.clone()))
            .collect();
        if fresh.is_empty() {
            return;
        }
        for (id, a) in &fresh {
            let who = self.display_name(&a.role);
            let mut ev = self.event(
                EventKind::Approval,
                &a.role,
                format!("approval:{id}"),
                approval_words(&who, id, a, self.config().timezone),
                Some(a.note.clone()),
            );
            ev.replies = self.buttons(id, a);
            self.send(ev);
        }
        let ids: Vec<String> = fresh.into_iter().map(|(id, _)| id).collect();
        let marked = self.run_env.store.update(|s| {
            for id in &ids {
                if let Some(a) = s.approvals.get_mut(id) {
                    a.notified = true;
                    // Its outcome is owed in the push's place, even after a restart.
                    a.outcome_told = Some(false);
                }
            }
        });
        // Not recorded: the notifier still sends each once while tabd runs (its keys), but a
        // restart would tell again. Counted and shown.
        self.shown.writes.check("the state (approvals notified)", marked);
    }

    /// What a finished run may need to tell: paused model calls, notes given up on, a role
    /// failing again and again — or, when asked for, that it is done.
    pub(super) fn notify_run(&mut self, done: &tasks::Done) {
        let Some(notifier) = self.shown.notifier.clone() else {
            return;
        };
        let who = self.display_name(&done.role);
        let rec = &done.result.record;
        let failed_in_a_row = self.core.role(&done.role).map_or(0, |r| r.failed_in_a_row());
        match &done.result.failure {
            Some((FailureClass::Outage, why)) => self.tell(
                EventKind::Paused,
                &done.role,
                format!("paused:{}:{why}", self.today()),
                (
                    "tabd paused model calls".into(),
                    format!(
                        "{}. Notes wait in their inboxes; no attempt is counted.",
                        sentence(why)
                    ),
                ),
                Some(self.run_env.vault.layout().status_note()),
            ),
            Some((FailureClass::RunFailure, why)) if failed_in_a_row == notifier.after_failures() => self
                .tell(
                    EventKind::Failing,
                    &done.role,
                    format!("failing:{}:{}", done.role, rec.run_id),
                    (
                        format!("{who} failed {failed_in_a_row} times in a row"),
                        crate::base::text::one_line(why, 300),
                    ),
                    Some(done.result.daily_log.as_str().to_string()),
                ),
            // A first part that waits for the person is not done (its approval is the event).
            None if rec.ended.is_none() => self.tell(
                EventKind::Done,
                &done.role,
                format!("done:{}", rec.run_id),
                (
                    format!("{who} finished"),
                    crate::base::text::one_line(&done.result.summary, 300),
                ),
                Some(done.result.daily_log.as_str().to_string()),
            ),
            _ => {}
        }
        for m in rec.moved.iter().filter(|m| m.to.contains("/failed/")) {
            self.tell(
                EventKind::FailedNote,
                &done.role,
                format!("failed:{}", m.to),
                (
                    format!("{who} gave up on a note"),
                    format!("{} moved to failed/ after repeated failures; move it back to the inbox to try again.", m.from),
                ),
                Some(m.to.clone()),
            );
        }
    }

    /// A role stopped for the rest of the day (a budget spent, its runs used up) — or, for a
    /// global budget, every role.
    fn notify_stopped(&self, role: &str, stop: crate::records::limits::DailyStop) {
        let cause = stop.cause();
        let (role, key, words) = if stop.is_global() {
            (
                "",
                format!("stopped:{}:{cause}", self.today()),
                (
                    "Every role stopped for today".to_string(),
                    format!("{}; every role's work waits until midnight.", sentence(cause)),
                ),
            )
        } else {
            (
                role,
                format!("stopped:{}:{role}:{cause}", self.today()),
                (
                    format!("{} stopped for today", self.display_name(role)),
                    format!("{}; its work waits until midnight.", sentence(cause)),
                ),
            )
        };
        self.tell(
            EventKind::Paused,
            role,
            key,
            words,
            Some(self.run_env.vault.layout().status_note()),
        );
    }

    pub(super) fn display_name(&self, role: &str) -> String {
        self.roles()
            .roles
            .get(role)
            .map_or_else(|| role.to_string(), |r| r.display_name.clone())
    }
}

// What the daemon does once it has been quiet a while (the core says when: `timing`): give back
// the program pages that start-up, a reload or the last runs touched (`crate::base::memory`), so
// an idle tabd holds only what idling needs. The minute's safety rescan gives its pages back a
// second later.

/// Quiet time before the pages are given back: a burst of runs is over by then, and what the
/// next run needs again comes back with minor faults (~100 of them, under a millisecond), never
/// a disk read.
const QUIET: Duration = Duration::from_secs(10);

/// The quiet time (`TABD_TEST_QUIET_MS` shortens it for tests).
pub fn quiet(env: &crate::base::environment::Env) -> Duration {
    env.get("TABD_TEST_QUIET_MS")
        .and_then(|ms| ms.parse().ok())
        .map_or(QUIET, Duration::from_millis)
}

// Stopping the daemon: a stop during a run costs nothing (docs/spec.md §13). Running turns get the stop
// wait to finish; then they end where they are and are recorded as stopped — no attempt counted,
// their notes run again at the next start.

/// How long stopped runs get to record themselves before they are cancelled: they only write a
/// record and a log line (milliseconds), but a blocked disk must not hold the stop forever.
const STOP_RECORD: Duration = Duration::from_secs(5);

impl Daemon {
    /// Stops: running turns get `[daemon] shutdown_grace_s` to finish; then — or at once, on a
    /// second SIGINT/SIGTERM — they are asked to stop, recorded as stopped (no attempt counted,
    /// their notes run again at the next start), and whatever has not recorded itself within
    /// `STOP_RECORD` is cancelled and recorded the same way.
    pub(super) async fn shutdown(
        &mut self,
        sigterm: &mut tokio::signal::unix::Signal,
        sigint: &mut tokio::signal::unix::Signal,
    ) {
        let grace = self.config().daemon.shutdown_grace;
        // systemd's TimeoutStopSec must not cut the wait short: ask it for what we need.
        let needed = grace + STOP_RECORD + Duration::from_secs(5);
        notify_systemd(&[
            sd_notify::NotifyState::Stopping,
            sd_notify::NotifyState::ExtendTimeoutUsec(needed.as_micros().min(u32::MAX as u128) as u32),
        ]);
        if !self.work.tasks.is_empty() {
            tracing::warn!(
                "stopping: waiting up to {}s for {} running turn(s) to finish (stop again, e.g. Ctrl-C, to stop them now)",
                grace.as_secs(),
                self.work.tasks.len()
            );
        }
        let deadline = self.run_env.clock.instant() + grace;
        self.let_runs_end(deadline, sigterm, sigint).await;
        if !self.work.tasks.is_empty() {
            tracing::warn!(
                "stopping: stopping {} turn(s) now; their notes stay in the inbox and run again at the next start",
                self.work.tasks.len()
            );
            self.run_env.stop.request();
            self.work.stops.stop_all();
            let recorded_by = self.run_env.clock.instant() + STOP_RECORD;
            self.let_runs_end(recorded_by, sigterm, sigint).await;
            if !self.work.tasks.is_empty() {
                self.work.tasks.abort_all();
                while let Some(done) = self.work.tasks.next().await {
                    self.on_done(done);
                }
            }
        }
        if let Some(task) = self.work.approvals.task.take() {
            // A call in flight is waited for; one cut off stays `executing` and becomes `unknown`.
            #[allow(
                clippy::let_underscore_must_use,
                reason = "a call cut off at the grace stays `executing` and becomes `unknown` at the next start"
            )]
            let _ = tokio::time::timeout(grace, task).await;
        }
        // The reply topic's connection ends here; a tap from now on is read at the next start.
        self.shown.answers.stop();
        if let Some(pool) = self.run_env.mcp_pool.take() {
            pool.shutdown().await;
        }
        // The last spans, sent within a bounded wait (a collector that is down holds no longer).
        self.run_env.telemetry.shutdown();
        self.write_status(false);
        tracing::info!("stopped");
    }

    /// Takes in the runs that end until `until`, or until another stop signal comes.
    async fn let_runs_end(
        &mut self,
        until: tokio::time::Instant,
        sigterm: &mut tokio::signal::unix::Signal,
        sigint: &mut tokio::signal::unix::Signal,
    ) {
        while !self.work.tasks.is_empty() {
            tokio::select! {
                Some(done) = self.work.tasks.next() => self.on_done(done),
                _ = tokio::time::sleep_until(until) => break,
                _ = sigterm.recv() => break,
                _ = sigint.recv() => break,
            }
        }
    }
}
