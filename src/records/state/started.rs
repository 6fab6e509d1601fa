//! Scheduled slots whose run started and has not finished (docs/spec.md §22).
//!
//! The ledger (`RoleState::last_slot`) records a slot before it runs, so it runs at most once;
//! alone it cannot tell a slot that ran from one whose run was cut short, since both are at or
//! before it. So a run of a slot is also recorded here when it starts, and cleared in the very
//! state update that commits its end (`run::finish`): an entry still here at a start belongs to
//! a run that was interrupted — a crash, `kill -9`, a power cut — or stopped by tabd's own stop
//! (then its end was recorded, and `stopped` says so). The daemon decides at its next start
//! whether such a slot runs again (once) or is recorded as interrupted.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::RoleState;

/// A scheduled slot whose run started and did not finish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartedSlot {
    /// The slot (its scheduled instant): the occurrence's key with the role.
    pub slot: DateTime<Utc>,
    /// Runs of this slot started so far: 1, then 2 once its re-run started. Never more: a slot
    /// is run again at most once.
    pub starts: u32,
    /// When the last of those runs started (wall clock).
    pub started_at: DateTime<Utc>,
    /// The slots that run stood for (a catch-up's), so its re-run stands for them too.
    #[serde(default = "one")]
    pub missed: usize,
    /// tabd's own stop ended the run and recorded it as stopped (else it was killed or crashed,
    /// and left no record).
    #[serde(default)]
    pub stopped: bool,
    /// Its re-run was said in the daily note: a restart before the re-run starts does not say it
    /// again.
    #[serde(default)]
    pub rerun_said: bool,
}

fn one() -> usize {
    1
}

impl RoleState {
    /// A run of `slot` starts at `at`, standing for `missed` slots. Returns the slot's entry as
    /// it was before: `Some` when this run is the slot's re-run.
    pub fn slot_started(
        &mut self,
        slot: DateTime<Utc>,
        at: DateTime<Utc>,
        missed: usize,
    ) -> Option<StartedSlot> {
        if let Some(e) = self.started_slots.iter_mut().find(|e| e.slot == slot) {
            let before = e.clone();
            e.starts = e.starts.saturating_add(1);
            e.started_at = at;
            e.stopped = false;
            return Some(before);
        }
        self.started_slots.push(StartedSlot {
            slot,
            starts: 1,
            started_at: at,
            missed: missed.max(1),
            stopped: false,
            rerun_said: false,
        });
        None
    }

    /// The run of `slot` ended and its end is committed: the slot owes nothing.
    pub fn slot_finished(&mut self, slot: DateTime<Utc>) {
        self.started_slots.retain(|e| e.slot != slot);
    }

    /// tabd's own stop ended the run of `slot` (recorded as stopped): the slot is still owed.
    pub fn slot_stopped(&mut self, slot: DateTime<Utc>) {
        if let Some(e) = self.started_slots.iter_mut().find(|e| e.slot == slot) {
            e.stopped = true;
        }
    }

    /// The slot's re-run was said in the daily note.
    pub fn slot_rerun_said(&mut self, slot: DateTime<Utc>) {
        if let Some(e) = self.started_slots.iter_mut().find(|e| e.slot == slot) {
            e.rerun_said = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_started_slot_stays_until_its_end_is_committed_and_a_second_start_is_its_rerun() {
        let mut r = RoleState::default();
        let slot = t("2026-11-25T09:00:00Z");
        assert_eq!(r.slot_started(slot, t("2026-11-25T09:00:01Z"), 1), None);
        assert_eq!(r.started_slots[0].starts, 1);
        r.slot_stopped(slot);
        assert!(r.started_slots[0].stopped, "tabd's stop ended it: still owed");
        let before = r.slot_started(slot, t("2026-11-25T09:05:00Z"), 1).unwrap();
        assert_eq!(
            before.started_at,
            t("2026-11-25T09:00:01Z"),
            "the re-run knows the first"
        );
        assert_eq!(
            (r.started_slots[0].starts, r.started_slots[0].stopped),
            (2, false)
        );
        r.slot_finished(slot);
        assert!(r.started_slots.is_empty(), "committed: nothing owed");
    }

    #[test]
    fn an_old_state_file_without_entries_reads_and_none_are_written_when_empty() {
        let r: RoleState = serde_json::from_str("{}").unwrap();
        assert!(r.started_slots.is_empty());
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("started_slots"), "{text}");
        let e: StartedSlot = serde_json::from_str(
            r#"{"slot":"2026-11-25T09:00:00Z","starts":1,"started_at":"2026-11-25T09:00:01Z"}"#,
        )
        .unwrap();
        assert_eq!((e.missed, e.stopped, e.rerun_said), (1, false, false));
    }
}
