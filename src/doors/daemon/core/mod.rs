//! The daemon's core: a state machine that owns every role's runtime (what waits, what runs,
//! what holds it back), the notes' readiness, the model-call pause and the person's pauses
//! (`tabd pause`: `pause`). Everything that changes
//! them goes through one function, [`Core::step`]: an [`Input`] (a file event, a scan's result,
//! due slots, a tick, a run started or finished, a reload) and `now` in, [`Effect`]s out (start a
//! run, let a lock go, stop a role for the day, pause or resume model calls, rewrite the status).
//! No I/O and no clock reads here: the shell (`daemon/mod.rs`) reads the clocks and the vault,
//! feeds the inputs and carries the effects out, and `tabd status` reads the core through its
//! accessors. So every rule — and every sequence of them — is tested in milliseconds, without a
//! process, a vault or a sleep (`tests.rs`).

mod pause;
#[cfg(test)]
mod pause_tests;
mod role;
mod rules;
#[cfg(test)]
mod tests;
pub mod timing;
#[cfg(test)]
mod timing_tests;

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::ready::{FsEvent, NotYet, Readiness};
use crate::base::trigger::TriggerKind;
use crate::capabilities::provider::FailureClass;
use crate::records::limits::DailyStop;
use crate::records::state::pause::{Held, Paused};
use crate::records::state::DayUsage;
use crate::setup::config::Limits;

pub use role::{RoleRuntime, SlotRun, Work};
pub use rules::{mono_of, next_wake, RoleView};
pub use timing::{Clocks, Observed, Shown};

/// How long model calls pause after the provider proved unusable (and a role waits whose
/// required server was down).
pub const PAUSE: Duration = Duration::from_secs(300);
/// How soon to look again when `tabd fire` holds a role's run lock.
pub const BUSY_RETRY: Duration = Duration::from_secs(2);

/// What happened, as the core learns of it.
#[derive(Debug, Clone)]
pub enum Input {
    /// The roles that may run now (start-up, a reload): new ones get a runtime, gone ones are
    /// forgotten once no run of theirs is going on, `rescheduled` ones drop their queued slots
    /// (a changed schedule starts from now); `broken_changed`: the role files' errors changed
    /// (the daily note hears of them once the person stops editing).
    Roles {
        names: Vec<String>,
        rescheduled: Vec<String>,
        broken_changed: bool,
    },
    /// The config or the env file was read again and changed: new settle times; a paused
    /// provider (its key saved in the env file) and servers that were down are worth another
    /// try at once.
    Config { settle: (Duration, Duration) },
    /// A file event in the inboxes of `owners`.
    InboxEvent { event: FsEvent, owners: Vec<String> },
    /// A listing of the inbox folder `dir`: each note (absolute path, size, modification time)
    /// as it is now; the readiness of notes no longer there is forgotten.
    Listed {
        dir: PathBuf,
        notes: Vec<(PathBuf, u64, SystemTime)>,
        wall: SystemTime,
    },
    /// A scan of `role`'s inbox: complete notes wait (`ready`), one is a person's new note
    /// (`by_person`), a settling note wants a look at `recheck_at`.
    Scanned {
        role: String,
        ready: bool,
        by_person: bool,
        recheck_at: Option<Instant>,
    },
    /// Scheduled slots came due (already recorded in the ledger).
    SlotsDue { role: String, slots: Vec<SlotRun> },
    /// A file `role` watches changed (its content, not only its time).
    WatchChanged { role: String, path: String },
    /// A run of `role` changed a file it watches itself: not a change for its watch.
    OwnWrite { role: String, path: String },
    /// A suspended run of `role` has every call decided: its second part may start.
    Resumable { role: String, run_id: String },
    /// The shell woke: the clocks and what it observed (`timing`).
    Tick(Observed),
    /// Time to decide what starts: each role's limits and use today, everyone's use today.
    Dispatch {
        roles: Vec<RoleView>,
        limits: Limits,
        all_today: DayUsage,
    },
    /// The tick's work is done: what status counts as the shell sees it now (`timing`).
    Ticked(Shown),
    /// A role file or the config was written (reloaded once the edits pause).
    Edited,
    /// The person asked for a reload (SIGHUP).
    ReloadAsked,
    /// The watcher lost track (its own overflow, a watched folder replaced or gone): every
    /// inbox is listed again.
    RescanAsked,
    /// An approvals pass is wanted at once (a file event in `agent/approvals/`, the start).
    ApprovalsAsked,
    /// An approvals pass ended: the next due by `next` (an expiry), the ledger's `phases` it saw
    /// (`None`: the pass failed), whether it decided anything itself.
    ApprovalsPassed {
        next: Option<Instant>,
        phases: Option<u64>,
        decided: bool,
    },
    /// The run lock of `role` is held by another process (`tabd fire`).
    LockBusy { role: String },
    /// Something `tabd status` shows changed in what the shell sees (an inbox's counts, a note
    /// refused, a folder no role reads, the ledger, the config's error, a `[notify]` channel,
    /// the cluster): the status is written again.
    ShownChanged,
    /// The shell holds `role`'s run lock and picked these notes (absolute paths) for it.
    LockTaken {
        role: String,
        notes: Vec<PathBuf>,
        wall: DateTime<Utc>,
    },
    /// A run ended: how (`failure`), whether it spent tokens, the notes it was given, and the
    /// roles whose day it (or a run it delegated to) found spent as it ended, by which limit.
    Finished {
        role: String,
        failure: Option<(FailureClass, String)>,
        tokens: u64,
        notes: Vec<PathBuf>,
        day_spent: Vec<(String, DailyStop)>,
    },
    /// The person's pauses that hold now (`tabd pause`, docs/spec.md §28), as the pause book says.
    Pauses(Paused),
}

/// What the shell is to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Take `role`'s run lock and pick its notes, then say `LockTaken` (or `LockBusy`).
    Start(String),
    /// Run `role` for `work`: the lock is held, the work is off the queue.
    Spawn { role: String, work: Work },
    /// Nothing to run after all (the notes went away before the run started): let the lock go.
    Release(String),
    /// `role` hit a daily limit: its queued work is dropped (notes wait for tomorrow); the
    /// person is told once. `skipped`: what would have started the run its door found the day
    /// spent for (the skip is logged once); `None`: a run found it spent as it ended (its own
    /// record and daily section say so).
    StopForToday {
        role: String,
        stop: DailyStop,
        skipped: Option<TriggerKind>,
    },
    /// Model calls pause until `until` (record it, say why).
    Paused { reason: String, until: Instant },
    /// Model calls go on (a pause ended, a run succeeded, the config changed).
    Unpaused,
    /// `role` waits until `until`: a server it requires is down.
    RoleWaits { role: String, until: Instant },
    /// What `tabd status` shows changed: rewrite it.
    StatusChanged,
    /// List every inbox at this tick, and why.
    Rescan(Rescan),
    /// Point the watcher at the folders again (one replaced without an event seen).
    RefreshWatches,
    /// Reload the config and the role files.
    Reload,
    /// Write the role files' errors into the daily note (the person stopped editing).
    LogRoleErrors,
    /// Tell systemd's watchdog the daemon is alive.
    Watchdog,
    /// Start an approvals pass (off the loop; its end comes back as `ApprovalsPassed`).
    StartApprovals,
    /// Something was decided, or a resumed part ended (it may have waited again and been
    /// decided meanwhile): queue the suspended runs whose calls are all decided.
    QueueResumes,
    /// The daemon has been quiet: give back the program pages.
    ReleasePages,
    /// The person paused (`tabd pause`): say so once — the daily note, a push.
    PauseBegan(Held),
    /// A pause ended (`tabd resume`, or its `--for` was over): say so once.
    PauseEnded(Held),
    /// Stop `role`'s run going on at its next step: a pause holds it now.
    StopRun(String),
    /// Slots of a paused role came due: skipped as `paused` (recorded, never caught up).
    SlotsPaused { role: String, slots: Vec<SlotRun> },
}

/// Why every inbox is listed again.
#[derive(Debug, Clone, PartialEq)]
pub enum Rescan {
    /// The wall clock jumped by this much against the monotonic one (a suspend, a clock step).
    ClockJumped(chrono::Duration),
    /// File events were lost (the event channel overflowed).
    EventsLost,
    /// The minute's safety rescan, polling, a reload, the watcher asking: nothing to say.
    Routine,
}

/// Model calls are paused until `until` (the provider proved unusable).
#[derive(Debug, Clone)]
struct Pause {
    until: Instant,
    reason: String,
}

#[derive(Debug)]
pub struct Core {
    roles: BTreeMap<String, RoleRuntime>,
    readiness: Readiness,
    paused: Option<Pause>,
    /// The person's pauses (`tabd pause`): what they hold, nothing starts (`pause`).
    pauses: Paused,
    timing: timing::Timing,
}

impl Core {
    /// `settle`: how long a program's note and a typed note must rest (`[inbox]`).
    pub fn new(settle: (Duration, Duration), clocks: &Clocks) -> Self {
        Self {
            roles: BTreeMap::new(),
            readiness: Readiness::new(settle),
            paused: None,
            pauses: Paused::default(),
            timing: timing::Timing::new(clocks),
        }
    }

    /// Applies one input at `now`; returns what the shell is to do, in order.
    pub fn step(&mut self, input: Input, now: Instant) -> Vec<Effect> {
        match input {
            Input::Roles {
                names,
                rescheduled,
                broken_changed,
            } => self.set_roles(names, &rescheduled, broken_changed, now),
            Input::Config { settle } => self.config_changed(settle),
            Input::InboxEvent { event, owners } => {
                for name in &owners {
                    if let Some(r) = self.roles.get_mut(name) {
                        r.dirty = true;
                    }
                }
                self.readiness.on_event(&event, now);
                Vec::new()
            }
            queued @ (Input::Scanned { .. }
            | Input::SlotsDue { .. }
            | Input::WatchChanged { .. }
            | Input::OwnWrite { .. }
            | Input::Resumable { .. }) => self.queued(queued),
            Input::Dispatch {
                roles,
                limits,
                all_today,
            } => self.tick(&roles, &limits, all_today, now),
            Input::LockBusy { role } => self.lock_busy(&role, now),
            Input::ShownChanged => vec![Effect::StatusChanged],
            Input::Listed { dir, notes, wall } => self.listed(&dir, &notes, wall, now),
            timed @ (Input::Tick(_)
            | Input::Ticked(_)
            | Input::Edited
            | Input::ReloadAsked
            | Input::RescanAsked
            | Input::ApprovalsAsked
            | Input::ApprovalsPassed { .. }) => self.timed(timed, now),
            Input::LockTaken { role, notes, wall } => self.lock_taken(role, &notes, wall),
            Input::Finished {
                role,
                failure,
                tokens,
                notes,
                day_spent,
            } => {
                let mut out = self.finished(&role, failure, tokens, &notes, now);
                for (name, stop) in day_spent {
                    out.extend(self.stop_for_today(name, stop, None));
                }
                out
            }
            Input::Pauses(paused) => self.pauses_read(paused),
        }
    }

    /// A listing of `dir`: each note taken in, the readiness of notes gone forgotten.
    fn listed(
        &mut self,
        dir: &Path,
        notes: &[(PathBuf, u64, SystemTime)],
        wall: SystemTime,
        now: Instant,
    ) -> Vec<Effect> {
        let existing: HashSet<PathBuf> = notes.iter().map(|(p, _, _)| p.clone()).collect();
        for (path, size, modified) in notes {
            self.readiness.observe(path, *size, *modified, now, wall);
        }
        self.readiness.retain_existing(dir, &existing);
        Vec::new()
    }

    /// The inputs about what one role has waiting (a scan of its inbox, slots due, a watched
    /// change, its own write, a run that may go on), kept on its runtime; a role the core does
    /// not know (gone meanwhile) is left alone.
    fn queued(&mut self, input: Input) -> Vec<Effect> {
        match input {
            Input::Scanned {
                role,
                ready,
                by_person,
                recheck_at,
            } => {
                if let Some(r) = self.roles.get_mut(&role) {
                    r.scanned(ready, by_person, recheck_at);
                }
                Vec::new()
            }
            Input::SlotsDue { role, slots } => self.slots_due(role, slots),
            Input::WatchChanged { role, path } => {
                if self.held(&role) {
                    return Vec::new();
                }
                if let Some(r) = self.roles.get_mut(&role) {
                    if !r.watch_pending.contains(&path) {
                        r.watch_pending.push(path);
                    }
                }
                Vec::new()
            }
            Input::OwnWrite { role, path } => {
                if let Some(r) = self.roles.get_mut(&role) {
                    r.watch_pending.retain(|p| *p != path);
                }
                Vec::new()
            }
            Input::Resumable { role, run_id } => match self.roles.get_mut(&role) {
                Some(r) if !r.resumes(&run_id) => {
                    r.resumes.push_back(run_id);
                    vec![Effect::StatusChanged]
                }
                _ => Vec::new(),
            },
            // The others are `step`'s.
            _ => Vec::new(),
        }
    }

    /// The inputs of the clocks and timers (`timing`).
    fn timed(&mut self, input: Input, now: Instant) -> Vec<Effect> {
        match input {
            Input::Tick(seen) => self.timing.tick(&seen, now),
            Input::Ticked(shown) => {
                let busy = self.roles.values().any(|r| r.running);
                self.timing.ticked(shown, busy, now)
            }
            Input::Edited => {
                self.timing.edited(now);
                Vec::new()
            }
            Input::ReloadAsked => vec![Effect::Reload],
            Input::RescanAsked => vec![Effect::Rescan(Rescan::Routine)],
            Input::ApprovalsAsked => {
                self.timing.approvals_asked(now);
                vec![Effect::StatusChanged]
            }
            Input::ApprovalsPassed {
                next,
                phases,
                decided,
            } => match self.timing.approvals_passed(next, phases, decided, now) {
                true => vec![Effect::StatusChanged, Effect::QueueResumes],
                false => Vec::new(),
            },
            // The others are `step`'s.
            _ => Vec::new(),
        }
    }

    fn set_roles(
        &mut self,
        names: Vec<String>,
        rescheduled: &[String],
        broken_changed: bool,
        now: Instant,
    ) -> Vec<Effect> {
        self.timing.busy(now);
        if broken_changed {
            self.timing.role_errors_changed(now, self.readiness.typing());
        }
        let wanted: std::collections::BTreeSet<&String> = names.iter().collect();
        self.roles.retain(|name, r| r.running || wanted.contains(name));
        for name in names {
            self.roles.entry(name).or_default();
        }
        for name in rescheduled {
            if let Some(r) = self.roles.get_mut(name) {
                r.slots.clear();
            }
        }
        vec![Effect::StatusChanged, Effect::Rescan(Rescan::Routine)]
    }

    fn config_changed(&mut self, settle: (Duration, Duration)) -> Vec<Effect> {
        self.readiness.set_settle(settle);
        for r in self.roles.values_mut() {
            r.down_until = None;
        }
        let mut out = Vec::new();
        if self.paused.take().is_some() {
            out.extend([Effect::Unpaused, Effect::StatusChanged]);
        }
        out.push(Effect::Rescan(Rescan::Routine));
        out
    }

    /// Ends a pause that is over, then decides what starts (`rules::dispatch`).
    fn tick(
        &mut self,
        views: &[RoleView],
        limits: &Limits,
        all_today: DayUsage,
        now: Instant,
    ) -> Vec<Effect> {
        let mut out = Vec::new();
        if self.paused.as_ref().is_some_and(|p| now >= p.until) {
            self.paused = None;
            out.extend([Effect::Unpaused, Effect::StatusChanged]);
        }
        let running = self.roles.values().filter(|r| r.running).count();
        let views = self.not_held(views);
        let decisions = rules::dispatch(
            &self.roles,
            &views,
            limits,
            all_today,
            running,
            self.paused.is_some(),
            now,
        );
        for decision in decisions {
            match decision {
                rules::Decision::Start(name) => out.push(Effect::Start(name)),
                rules::Decision::Stop(name, stop) => {
                    let kind = self.roles.get(&name).map(RoleRuntime::pending_kind);
                    if let Some(kind) = kind {
                        out.extend(self.stop_for_today(name, stop, Some(kind)));
                    }
                }
                rules::Decision::Drop(name) => {
                    if let Some(r) = self.roles.get_mut(&name) {
                        r.slots.clear();
                    }
                }
            }
        }
        out
    }

    /// `name` has hit a daily limit: its queued work is dropped (its notes wait; the next rescan
    /// after midnight looks again), and the person is told (`skipped`: what the dropped run
    /// would have been started by).
    fn stop_for_today(&mut self, name: String, stop: DailyStop, skipped: Option<TriggerKind>) -> Vec<Effect> {
        let Some(r) = self.roles.get_mut(&name) else {
            return Vec::new();
        };
        r.slots.clear();
        r.watch_pending.clear();
        r.inbox_ready = false;
        r.person_note_ready = false;
        vec![
            Effect::StopForToday {
                role: name,
                stop,
                skipped,
            },
            Effect::StatusChanged,
        ]
    }

    fn lock_busy(&mut self, role: &str, now: Instant) -> Vec<Effect> {
        let Some(r) = self.roles.get_mut(role) else {
            return Vec::new();
        };
        let first = r.busy_until.is_none();
        r.busy_until = Some(now + BUSY_RETRY);
        if first {
            vec![Effect::StatusChanged]
        } else {
            Vec::new()
        }
    }

    fn lock_taken(&mut self, role: String, notes: &[PathBuf], wall: DateTime<Utc>) -> Vec<Effect> {
        let Some(r) = self.roles.get_mut(&role) else {
            return vec![Effect::Release(role)];
        };
        let mut out = Vec::new();
        if r.busy_until.take().is_some() {
            out.push(Effect::StatusChanged);
        }
        let Some(work) = r.take_work(!notes.is_empty()) else {
            out.push(Effect::Release(role));
            return out;
        };
        r.running = true;
        r.started = Some((wall, work.kind()));
        for p in notes {
            self.readiness.forget(p);
        }
        out.push(Effect::Spawn { role, work });
        out.push(Effect::StatusChanged);
        out
    }

    fn finished(
        &mut self,
        role: &str,
        failure: Option<(FailureClass, String)>,
        tokens: u64,
        notes: &[PathBuf],
        now: Instant,
    ) -> Vec<Effect> {
        self.timing.busy(now);
        for p in notes {
            self.readiness.forget(p);
        }
        // A run that never reached the model (an outage) spent nothing a loop could run up: the
        // next try is not held back by min_interval.
        let class = failure.as_ref().map(|f| f.0);
        let reached_model = !matches!(
            class,
            Some(FailureClass::Outage | FailureClass::Unavailable | FailureClass::Stopped)
        ) || tokens > 0;
        let mut out = Vec::new();
        if let Some(r) = self.roles.get_mut(role) {
            if r.finished(now, reached_model) {
                out.push(Effect::QueueResumes);
            }
            match class {
                Some(FailureClass::RunFailure) => r.failed_in_a_row += 1,
                None => r.failed_in_a_row = 0,
                Some(_) => {}
            }
            if class == Some(FailureClass::Unavailable) {
                let until = now + PAUSE;
                r.down_until = Some(until);
                out.push(Effect::RoleWaits {
                    role: role.to_string(),
                    until,
                });
            }
        }
        match failure {
            Some((FailureClass::Outage, reason)) => {
                let until = now + PAUSE;
                self.paused = Some(Pause {
                    until,
                    reason: reason.clone(),
                });
                out.push(Effect::Paused { reason, until });
            }
            None => {
                if self.paused.take().is_some() {
                    out.push(Effect::Unpaused);
                }
            }
            Some(_) => {}
        }
        out.push(Effect::StatusChanged);
        out
    }

    /// Roles whose inbox wants a look now: every one (`all`), one with events since its last
    /// scan, or one whose settling note is due.
    pub fn due_scans(&self, all: bool, now: Instant) -> Vec<String> {
        self.roles
            .iter()
            .filter(|(_, r)| all || r.dirty || r.recheck_at.is_some_and(|t| now >= t))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Is the note at `path` complete (docs/spec.md §5)? The readiness of notes is the core's (the
    /// listings come in as `Input::Listed`); the listing it judges is the shell's.
    pub fn note_complete(
        &self,
        path: &Path,
        size: u64,
        modified: SystemTime,
        now: Instant,
        wall: SystemTime,
    ) -> Result<(), NotYet> {
        self.readiness.judge(path, size, modified, now, wall)
    }

    pub fn role(&self, name: &str) -> Option<&RoleRuntime> {
        self.roles.get(name)
    }

    pub fn roles(&self) -> impl Iterator<Item = (&String, &RoleRuntime)> {
        self.roles.iter()
    }

    /// Why model calls are paused, if they are.
    pub fn paused(&self) -> Option<&str> {
        self.paused.as_ref().map(|p| p.reason.as_str())
    }

    /// The instants the core needs the daemon awake for; `min_interval` of each role by name.
    pub fn wakes(
        &self,
        now: Instant,
        min_interval: impl Fn(&str) -> Option<Duration>,
    ) -> Vec<Option<Instant>> {
        let roles = self
            .roles
            .iter()
            .filter_map(|(name, r)| min_interval(name).map(|m| r.wake(m)));
        std::iter::once(self.paused.as_ref().map(|p| p.until))
            .chain(roles)
            .chain(self.timing.wakes(now))
            .collect()
    }
}

/// The shell as `drive` sees it: it owns the core, reads the monotonic clock and carries effects
/// out. The daemon is one; the scenario tests' `Sim` is another.
pub trait Shell {
    fn core(&mut self) -> &mut Core;
    /// The monotonic clock, read for each step.
    fn instant(&self) -> Instant;
    /// Carries one effect out; what that learned (a lock taken or busy, a scan's result) comes
    /// back as inputs, fed once the step's other effects are carried out.
    fn carry_out(&mut self, effect: Effect) -> Vec<Input>;
}

/// Feeds `input` to the core and carries its effects out in order; the inputs they give back
/// are fed after them, one step at a time, in the order they came — so no step ever runs while
/// another step's effects are being carried out.
pub fn drive(shell: &mut impl Shell, input: Input) {
    let mut queue = VecDeque::from([input]);
    while let Some(input) = queue.pop_front() {
        let now = shell.instant();
        let effects = shell.core().step(input, now);
        for effect in effects {
            queue.extend(shell.carry_out(effect));
        }
    }
}
