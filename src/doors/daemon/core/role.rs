//! What the core tracks of one role between inputs. Only the core changes it; the shell and the
//! status read it through the accessors below.

use std::collections::VecDeque;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::base::trigger::TriggerKind;
use crate::records::limits::RoleLimits;

/// A scheduled run waiting to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRun {
    pub slot: DateTime<Utc>,
    /// Slots this run stands for (catch-up); 1 when on time.
    pub missed: usize,
}

/// What a run is started for, taken off the role's queue when it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    /// The second part of a run the person's decision unblocked (its id).
    Resume(String),
    /// A scheduled slot.
    Slot(SlotRun),
    /// Complete notes in the inbox (the shell picked them).
    Inbox,
    /// Watched files that changed.
    Watch(Vec<String>),
}

impl Work {
    pub fn kind(&self) -> TriggerKind {
        match self {
            Work::Resume(_) => TriggerKind::Resume,
            Work::Slot(_) => TriggerKind::Schedule,
            Work::Inbox => TriggerKind::Inbox,
            Work::Watch(_) => TriggerKind::Watch,
        }
    }
}

/// One role's runtime: what waits, what runs, what holds it back.
#[derive(Debug, Default)]
pub struct RoleRuntime {
    pub(super) running: bool,
    /// The run going on: when it started (wall clock) and what started it, for `tabd status`.
    pub(super) started: Option<(DateTime<Utc>, TriggerKind)>,
    pub(super) last_end: Option<Instant>,
    pub(super) slots: VecDeque<SlotRun>,
    /// Watched files that changed, not yet handed to a run.
    pub(super) watch_pending: Vec<String>,
    /// Complete notes were seen at the last scan.
    pub(super) inbox_ready: bool,
    /// One of them is a person's new note (no chain depth, no failed attempt yet): it runs within
    /// seconds, not after `min_interval`, which holds back what a loop could cause (slots,
    /// chains, watches, retries).
    pub(super) person_note_ready: bool,
    /// Look at the inbox again at this instant (a note settling).
    pub(super) recheck_at: Option<Instant>,
    /// Something changed in the inbox since the last scan.
    pub(super) dirty: bool,
    /// Another process (`tabd fire`) holds the role's run lock: try again at this instant.
    pub(super) busy_until: Option<Instant>,
    /// A server the role requires was down: try again at this instant.
    pub(super) down_until: Option<Instant>,
    /// Runs that failed (the notes' fault or tabd's) since the last one that did not.
    pub(super) failed_in_a_row: u32,
    /// Suspended runs of this role whose calls the person has decided: their second parts.
    pub(super) resumes: VecDeque<String>,
    /// The second part running now: a decision seen again meanwhile does not queue it twice.
    pub(super) resume_running: Option<String>,
}

impl RoleRuntime {
    pub fn running(&self) -> bool {
        self.running
    }

    /// When the run going on started and what started it.
    pub fn started(&self) -> Option<(DateTime<Utc>, TriggerKind)> {
        self.started
    }

    /// `tabd fire` held the run lock at the last try.
    pub fn busy_elsewhere(&self) -> bool {
        self.busy_until.is_some()
    }

    pub fn queued_slots(&self) -> usize {
        self.slots.len()
    }

    pub fn watch_pending(&self) -> usize {
        self.watch_pending.len()
    }

    pub fn failed_in_a_row(&self) -> u32 {
        self.failed_in_a_row
    }

    /// The second part of run `run_id` is queued or running: a decision seen again does not
    /// queue it twice.
    pub fn resumes(&self, run_id: &str) -> bool {
        self.resumes.iter().any(|r| r == run_id) || self.resume_running.as_deref() == Some(run_id)
    }

    /// Its next run is the second part of a run that waited: it takes no notes.
    pub fn resuming(&self) -> bool {
        !self.resumes.is_empty()
    }

    pub fn has_work(&self) -> bool {
        !self.slots.is_empty()
            || self.inbox_ready
            || !self.watch_pending.is_empty()
            || !self.resumes.is_empty()
    }

    /// What would start its next run (a limit that stops it says so).
    pub fn pending_kind(&self) -> TriggerKind {
        if !self.resumes.is_empty() {
            TriggerKind::Resume
        } else if !self.slots.is_empty() {
            TriggerKind::Schedule
        } else if self.inbox_ready {
            TriggerKind::Inbox
        } else if !self.watch_pending.is_empty() {
            TriggerKind::Watch
        } else {
            TriggerKind::Schedule
        }
    }

    /// A scan of its inbox: complete notes wait (`ready`), one is a person's (`by_person`), a
    /// settling note wants a look at `recheck_at`.
    pub(super) fn scanned(&mut self, ready: bool, by_person: bool, recheck_at: Option<Instant>) {
        self.dirty = false;
        self.inbox_ready = ready;
        self.person_note_ready = by_person;
        self.recheck_at = recheck_at;
    }

    /// A run ended: the role is free, and notes that arrived meanwhile get a look (coalesced
    /// into one follow-up run). Says whether it was the second part of a run that waited: that
    /// part may have waited again and been decided while it still counted as running, when a
    /// decision could not queue it (`resumes`), so its decisions are looked at again.
    pub(super) fn finished(&mut self, now: Instant, reached_model: bool) -> bool {
        self.running = false;
        self.started = None;
        let was_resumed = self.resume_running.take().is_some();
        if reached_model {
            self.last_end = Some(now);
        }
        self.dirty = true;
        was_resumed
    }

    /// The work for the next run, taken off the queue: the person's unblocked run first, then a
    /// due slot, then inbox notes (`has_notes`: the shell found some to hand over), then watched
    /// files. `None`: nothing to do (the notes went away before the run started).
    pub(super) fn take_work(&mut self, has_notes: bool) -> Option<Work> {
        if let Some(id) = self.resumes.pop_front() {
            self.resume_running = Some(id.clone());
            return Some(Work::Resume(id));
        }
        let slot = self.slots.pop_front();
        let watched = std::mem::take(&mut self.watch_pending);
        self.inbox_ready = false;
        self.person_note_ready = false;
        if let Some(s) = slot {
            return Some(Work::Slot(s));
        }
        if has_notes {
            return Some(Work::Inbox);
        }
        (!watched.is_empty()).then_some(Work::Watch(watched))
    }

    /// The next instant this role needs the daemon awake for.
    pub fn wake(&self, min_interval: Duration) -> Option<Instant> {
        [self.recheck_at, self.busy_until, self.interval_end(min_interval)]
            .into_iter()
            .flatten()
            .min()
    }

    /// Until when `min_interval` holds this role's waiting work back, if it does: a person's
    /// note never waits for it.
    pub fn interval_end(&self, min_interval: Duration) -> Option<Instant> {
        match self.last_end {
            // The person's note, or the person's decision a run waits on: never held back.
            Some(last)
                if self.has_work() && !self.running && !self.person_note_ready && self.resumes.is_empty() =>
            {
                Some(last + min_interval)
            }
            _ => None,
        }
    }

    /// Until when `min_interval` holds this role's next *scheduled* run back, and why (for
    /// status: its next fire is the later of its next slot and this), whether a slot waits yet
    /// or not. Counted from the end of its last run that reached the model; while a run goes
    /// on, from that run's end, unknown yet: at the earliest `min_interval` from `now`.
    pub fn schedule_held(&self, min_interval: Duration, now: Instant) -> Option<(Instant, String)> {
        let every = humantime::format_duration(min_interval);
        if self.running {
            return (!min_interval.is_zero()).then(|| {
                (
                    now + min_interval,
                    format!("at the earliest: min_interval {every} from the end of the run going on"),
                )
            });
        }
        let end = self.last_end? + min_interval;
        (end > now).then(|| {
            (
                end,
                format!("held back by min_interval {every} since its last run"),
            )
        })
    }

    /// Why waiting work has not started, and until when (for status): `None` when nothing waits
    /// or it starts at the next look.
    pub fn waiting(&self, limits: &RoleLimits, now: Instant) -> Option<(Instant, String)> {
        if self.running || !self.has_work() {
            return None;
        }
        if let Some(t) = self.busy_until.filter(|t| now < *t) {
            return Some((
                t,
                "another tabd process (`tabd fire`) is running this role".into(),
            ));
        }
        if let Some(t) = self.down_until.filter(|t| now < *t) {
            return Some((t, "a server this role requires is down".into()));
        }
        let end = self.interval_end(limits.min_interval).filter(|t| now < *t)?;
        Some((
            end,
            format!(
                "min_interval {} since its last run (a note you write never waits for it)",
                humantime::format_duration(limits.min_interval)
            ),
        ))
    }
}
