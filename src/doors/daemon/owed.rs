//! Owed slots (docs/spec.md §22): a scheduled slot whose run started and did not finish — tabd was
//! killed, crashed, lost power or was stopped during it — runs again once at the next start, or
//! is recorded as interrupted and said; never silently lost, never run a third time.
//!
//! - The start of every scheduled run is recorded (`records::state::started`) before the run
//!   calls the model, and cleared in the state update that commits its end; an entry found at
//!   start is an interrupted run.
//! - `decide` (pure) says what becomes of it: run again once when the role's `catch_up` and
//!   `stale_after` allow, as a late slot would be; otherwise recorded as interrupted, with why.
//!   A slot whose re-run was interrupted too is given up: a crash that the run itself causes, or
//!   a restart loop, runs a slot at most twice in all.
//! - The re-run is claimed like any slot (with `[cluster]`), queued as a due slot, and its
//!   trigger says which slot it runs again and when the interrupted run started (its record and
//!   its prompt say so).

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::cluster::RerunClaim;
use super::core::{Input, SlotRun};
use super::Daemon;
use crate::base::trigger::{Rerun, Trigger, TriggerKind};
use crate::records::state::started::StartedSlot;
use crate::setup::role::{CatchUp, Role};

/// What becomes of a slot whose run did not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owed {
    /// Run it again, once, now.
    Rerun,
    /// Not run again; recorded as interrupted, and why.
    NotAgain(NotAgain),
}

/// Why an interrupted slot is not run again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAgain {
    /// Its re-run did not finish either: a slot is run again at most once.
    Twice,
    /// The role is switched off, not meant for this device, or has no schedule now.
    Off,
    /// `catch_up: skip`: missed slots are not run late, nor interrupted ones.
    Skip,
    /// Due longer ago than the role's `stale_after`.
    Stale(Duration),
}

/// What the role's settings say now about its slots.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Enabled, meant for this device, scheduled.
    pub runs_here: bool,
    pub catch_up: CatchUp,
    pub stale_after: Duration,
}

/// What becomes of `slot`, whose run did not finish, at `now`.
pub fn decide(slot: &StartedSlot, now: DateTime<Utc>, rule: Rule) -> Owed {
    if slot.starts >= 2 {
        return Owed::NotAgain(NotAgain::Twice);
    }
    if !rule.runs_here {
        return Owed::NotAgain(NotAgain::Off);
    }
    match rule.catch_up {
        CatchUp::Skip => return Owed::NotAgain(NotAgain::Skip),
        CatchUp::Once | CatchUp::All => {}
    }
    let late = (now - slot.slot).to_std().unwrap_or(Duration::ZERO);
    if late > rule.stale_after {
        return Owed::NotAgain(NotAgain::Stale(rule.stale_after));
    }
    Owed::Rerun
}

impl NotAgain {
    fn words(&self) -> String {
        match self {
            NotAgain::Twice => {
                "not run again: its re-run did not finish either (a slot is run again at most once)".into()
            }
            NotAgain::Off => {
                "not run again: the role is switched off, not meant for this device, or no longer scheduled"
                    .into()
            }
            NotAgain::Skip => "not run again: catch_up: skip".into(),
            NotAgain::Stale(after) => format!(
                "not run again: stale — it was due more than {} ago (stale_after)",
                humantime::format_duration(*after)
            ),
        }
    }
}

/// "the 09:00 run (started 09:00:01) did not finish: tabd was killed or crashed".
fn what_happened(slot: &StartedSlot, tz: Tz) -> String {
    let how = if slot.stopped {
        "tabd was stopped during it"
    } else {
        "tabd was killed, crashed or lost power during it"
    };
    format!(
        "the {} run (started {}) did not finish: {how}",
        slot.slot.with_timezone(&tz).format("%H:%M"),
        slot.started_at.with_timezone(&tz).format("%H:%M:%S")
    )
}

/// What becomes of `slot` were tabd started at `now`, said after what happened to its run:
/// `tabd doctor`'s line for a slot owed while no tabd runs, decided by `decide` as the start
/// decides it.
pub fn owed_said(slot: &StartedSlot, now: DateTime<Utc>, rule: Rule, tz: Tz) -> String {
    let then = match decide(slot, now, rule) {
        Owed::Rerun => "started now, tabd runs it again once".to_string(),
        Owed::NotAgain(why) => format!("started now, tabd records it as interrupted, {}", why.words()),
    };
    format!("{}; {then}", what_happened(slot, tz))
}

impl Daemon {
    /// At start (after crash recovery, once the core knows the roles): every slot whose run
    /// started and did not finish is queued to run again once, or recorded as interrupted.
    pub(super) fn owe_interrupted(&mut self) {
        let state = self.run_env.store.load();
        let now = self.run_env.clock.now();
        let roles = self.run_env.roles.clone();
        for (name, rs) in &state.roles {
            let Some(role) = roles.roles.get(name) else {
                continue; // a deleted role owes nothing (its state goes with it)
            };
            let rule = Rule {
                runs_here: self.role_may_run_here(role) && !role.schedule.is_empty(),
                catch_up: role.catch_up(),
                stale_after: role.settings.stale_after(),
            };
            for slot in &rs.started_slots {
                match decide(slot, now, rule) {
                    Owed::Rerun => self.rerun(role, slot),
                    Owed::NotAgain(why) => self.not_again(role, slot, &why),
                }
            }
        }
    }

    /// Queues the re-run of `slot` (claimed first with `[cluster]`), said once in the daily note.
    fn rerun(&mut self, role: &Role, slot: &StartedSlot) {
        let tz = self.config().timezone;
        let happened = what_happened(slot, tz);
        let run = SlotRun {
            slot: slot.slot,
            missed: slot.missed,
        };
        let (queue, said) = match self.claim_rerun(role, run) {
            RerunClaim::Here(run) => (Some(run), "running it again once now"),
            RerunClaim::Elsewhere => (
                None,
                "its claim in the cluster is still held (by the run that was cut short, or another device); \
                 the device that takes it over once it lapses runs it again once",
            ),
            RerunClaim::Later => (
                None,
                "the cluster's servers do not answer; it is caught up when they do",
            ),
            RerunClaim::Done => {
                self.log_line(
                    role,
                    &format!("interrupted — {happened}; another device of the cluster ran it"),
                );
                let done = self
                    .run_env
                    .store
                    .update(|s| s.role(&role.name).slot_finished(slot.slot));
                self.shown.writes.check("the state (a slot run elsewhere)", done);
                return;
            }
        };
        tracing::warn!("{}: {happened}; {said}", role.name);
        if !slot.rerun_said {
            self.log_line(role, &format!("interrupted — {happened}; {said}"));
            let marked = self
                .run_env
                .store
                .update(|s| s.role(&role.name).slot_rerun_said(slot.slot));
            self.shown.writes.check("the state (a re-run said)", marked);
        }
        if let Some(run) = queue {
            self.apply(Input::SlotsDue {
                role: role.name.clone(),
                slots: vec![run],
            });
        }
    }

    /// Records `slot` as interrupted and not run again (a record and a line, once).
    fn not_again(&mut self, role: &Role, slot: &StartedSlot, why: &NotAgain) {
        let text = format!("{}; {}", what_happened(slot, self.config().timezone), why.words());
        tracing::warn!("{}: {text}", role.name);
        let recorded = crate::running::run::record_interrupted(
            &self.run_env,
            role,
            super::inputs::cron_of(role),
            slot,
            &text,
        );
        self.shown
            .writes
            .check("an interrupted slot's record", recorded.as_ref().map(drop));
        self.apply(Input::ShownChanged);
    }

    fn log_line(&self, role: &Role, text: &str) {
        let now = self.run_env.clock.now();
        self.shown.writes.check(
            "the daily note",
            self.run_env.log.write_line(now, &role.display_name, text),
        );
    }

    /// A scheduled run of `role` starts: its slot's start is recorded before the run calls the
    /// model; a second start of the slot is its re-run, which `trigger` then says. A start that
    /// cannot be recorded is counted and shown, and the run goes on (it still runs at most once:
    /// the ledger holds that; only an interruption would go unsaid).
    pub(super) fn slot_starts(&mut self, role: &str, trigger: &mut Trigger) {
        let (TriggerKind::Schedule, Some(slot)) = (trigger.kind, trigger.scheduled_for) else {
            return;
        };
        let now = self.run_env.clock.now();
        let missed = trigger.missed;
        let before = self
            .run_env
            .store
            .update(|s| s.role(role).slot_started(slot, now, missed));
        self.shown
            .writes
            .check("the state (a scheduled run's start)", before.as_ref());
        if let Ok(Some(before)) = before {
            trigger.rerun = Some(Rerun {
                slot,
                interrupted_run_started_at: before.started_at,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::state::RoleState;

    const TWO_H: Duration = Duration::from_secs(7200);

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn rule(catch_up: CatchUp) -> Rule {
        Rule {
            runs_here: true,
            catch_up,
            stale_after: TWO_H,
        }
    }

    fn started(starts: u32) -> StartedSlot {
        StartedSlot {
            slot: t("2026-11-25T09:00:00Z"),
            starts,
            started_at: t("2026-11-25T09:00:01Z"),
            missed: 1,
            stopped: false,
            rerun_said: false,
        }
    }

    #[test]
    fn an_interrupted_slot_runs_again_once_when_catch_up_and_stale_after_allow() {
        let now = t("2026-11-25T09:03:00Z");
        assert_eq!(decide(&started(1), now, rule(CatchUp::Once)), Owed::Rerun);
        assert_eq!(decide(&started(1), now, rule(CatchUp::All)), Owed::Rerun);
        assert_eq!(
            decide(&started(1), now, rule(CatchUp::Skip)),
            Owed::NotAgain(NotAgain::Skip)
        );
        let late = t("2026-11-25T11:00:01Z");
        assert_eq!(
            decide(&started(1), late, rule(CatchUp::Once)),
            Owed::NotAgain(NotAgain::Stale(TWO_H)),
            "the slot's own instant is what stale_after measures"
        );
        assert_eq!(
            decide(&started(1), t("2026-11-25T11:00:00Z"), rule(CatchUp::Once)),
            Owed::Rerun,
            "exactly stale_after: still in time"
        );
        let off = Rule {
            runs_here: false,
            ..rule(CatchUp::Once)
        };
        assert_eq!(decide(&started(1), now, off), Owed::NotAgain(NotAgain::Off));
    }

    #[test]
    fn a_slot_whose_rerun_was_interrupted_too_is_given_up_whatever_the_rule() {
        let now = t("2026-11-25T09:03:00Z");
        for c in [CatchUp::Once, CatchUp::All, CatchUp::Skip] {
            assert_eq!(decide(&started(2), now, rule(c)), Owed::NotAgain(NotAgain::Twice));
        }
    }

    #[test]
    fn the_line_says_what_happened_and_why_not() {
        let tz: Tz = "Europe/Berlin".parse().unwrap();
        let mut s = started(1);
        assert_eq!(
            what_happened(&s, tz),
            "the 10:00 run (started 10:00:01) did not finish: tabd was killed, crashed or lost power during it"
        );
        s.stopped = true;
        assert!(what_happened(&s, tz).ends_with("tabd was stopped during it"));
        assert_eq!(
            NotAgain::Stale(TWO_H).words(),
            "not run again: stale — it was due more than 2h ago (stale_after)"
        );
    }

    /// What can happen to a run of the slot in one life of the daemon.
    #[derive(Debug, Clone, Copy)]
    enum Life {
        /// The run ends and its end is committed.
        Finishes,
        /// `kill -9`, a crash, a power cut during the run.
        Killed,
        /// tabd's own stop: recorded as stopped.
        Stopped,
        /// The daemon dies at start, before a queued re-run starts (a crash loop).
        DiesAtStart,
    }

    /// What the slot came to over the lives.
    #[derive(Debug, Default)]
    struct Tally {
        runs: u32,
        finished: u32,
        given_up: u32,
    }

    /// One life: the decisions at start (`owe_interrupted`), then the run if one is queued (the
    /// first life runs the slot on time), played against the real ledger of started slots.
    fn live(r: &mut RoleState, first: bool, life: Life, now: DateTime<Utc>, seen: &mut Tally) {
        let slot = t("2026-11-25T09:00:00Z");
        let mut queued = first;
        for e in r.started_slots.clone() {
            match decide(&e, now, rule(CatchUp::Once)) {
                Owed::Rerun => queued = true,
                Owed::NotAgain(_) => {
                    r.slot_finished(e.slot); // record_interrupted, in the same update
                    seen.given_up += 1;
                }
            }
        }
        // The first life's slot has started (what this module owes is a started run's): its
        // daemon dying "at start" is a kill during the run.
        if !queued || (!first && matches!(life, Life::DiesAtStart)) {
            return;
        }
        r.slot_started(slot, now, 1);
        seen.runs += 1;
        match life {
            Life::Finishes => {
                r.slot_finished(slot);
                seen.finished += 1;
            }
            Life::Stopped => r.slot_stopped(slot),
            Life::Killed | Life::DiesAtStart => {}
        }
    }

    /// Every sequence of up to five lives (kills, stops, crash loops at start, in any order),
    /// then a quiet one: the slot runs at most twice, and ends either finished or given up —
    /// once, never both, never neither (silently lost).
    #[test]
    fn no_sequence_of_crashes_and_restarts_runs_a_slot_thrice_or_loses_it_silently() {
        let lives = [Life::Finishes, Life::Killed, Life::Stopped, Life::DiesAtStart];
        let mut level: Vec<Vec<Life>> = vec![vec![]];
        let mut sequences = level.clone();
        for _ in 0..5 {
            level = level
                .iter()
                .flat_map(|s| {
                    lives.iter().map(move |l| {
                        let mut s = s.clone();
                        s.push(*l);
                        s
                    })
                })
                .collect();
            sequences.extend(level.iter().cloned());
        }
        assert_eq!(sequences.len(), 1 + 4 + 16 + 64 + 256 + 1024);
        for seq in &sequences {
            let mut r = RoleState::default();
            let mut seen = Tally::default();
            let mut now = t("2026-11-25T09:00:01Z");
            for (i, life) in seq.iter().chain([&Life::Finishes]).enumerate() {
                live(&mut r, i == 0, *life, now, &mut seen);
                now += chrono::Duration::seconds(20);
            }
            assert!(seen.runs <= 2, "{seq:?}: {seen:?}");
            assert_eq!(seen.finished + seen.given_up, 1, "{seq:?}: {seen:?}");
            assert!(r.started_slots.is_empty(), "{seq:?}: still owed");
        }
    }
}
