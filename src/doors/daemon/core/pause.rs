//! The person's pauses in the core (docs/spec.md §28: `tabd pause`, `tabd resume`): the kill switch.
//! The shell reads the pause book (`records::state::pause`) and feeds what holds now
//! (`Input::Pauses`); the core decides what that means for each role:
//!
//! - nothing of a held role starts: dispatch never sees it (no slot, note, watch or resumed run);
//! - a run going on when its pause lands is stopped at its next step (`Effect::StopRun`: the
//!   person reaches for the switch to stop the spending, not to let it finish);
//! - a slot that comes due while held is skipped as `paused` (`Effect::SlotsPaused`), never
//!   queued, so never caught up after; a watched change is dropped;
//! - its inbox notes and its resumed runs wait (no attempt counted): they run once it ends;
//! - a pause that begins or ends is said once (`Effect::PauseBegan` / `PauseEnded`).

use crate::records::state::pause::Paused;

use super::{Core, Effect, RoleView, SlotRun};

impl Core {
    /// What holds now changed (or was read again): what began and ended is said, the roles it
    /// now holds stop and drop what they had queued; the roles it lets go look at their inboxes.
    pub(super) fn pauses_read(&mut self, now: Paused) -> Vec<Effect> {
        if now == self.pauses {
            return Vec::new();
        }
        let before = std::mem::replace(&mut self.pauses, now);
        let mut out = Vec::new();
        for (target, was) in &before.0 {
            if self.pauses.0.get(target).is_none_or(|h| h.since != was.since) {
                out.push(Effect::PauseEnded(was.clone()));
            }
        }
        for (target, held) in &self.pauses.0 {
            if before.0.get(target).is_none_or(|b| b.since != held.since) {
                out.push(Effect::PauseBegan(held.clone()));
            }
        }
        for (name, r) in self.roles.iter_mut() {
            let held = self.pauses.of(name).is_some();
            let was = before.of(name).is_some();
            if held && !was {
                if r.running {
                    out.push(Effect::StopRun(name.clone()));
                }
                if !r.slots.is_empty() {
                    out.push(Effect::SlotsPaused {
                        role: name.clone(),
                        slots: r.slots.drain(..).collect(),
                    });
                }
                r.watch_pending.clear();
            } else if was && !held {
                // Its notes waited: the next scan hands them to a run.
                r.dirty = true;
            }
        }
        out.push(Effect::StatusChanged);
        out
    }

    /// Slots of `role` came due: queued, or — the role held — skipped as paused.
    pub(super) fn slots_due(&mut self, role: String, slots: Vec<SlotRun>) -> Vec<Effect> {
        if self.pauses.of(&role).is_some() {
            return vec![Effect::SlotsPaused { role, slots }];
        }
        if let Some(r) = self.roles.get_mut(&role) {
            r.slots.extend(slots);
        }
        Vec::new()
    }

    /// Whether a pause holds `role` (its watched changes are dropped, nothing of it starts).
    pub(super) fn held(&self, role: &str) -> bool {
        self.pauses.of(role).is_some()
    }

    /// The roles dispatch may consider: those no pause holds.
    pub(super) fn not_held(&self, views: &[RoleView]) -> Vec<RoleView> {
        views.iter().filter(|v| !self.held(&v.name)).cloned().collect()
    }

    /// The pauses that hold now, as the core last read them.
    pub fn pauses(&self) -> &Paused {
        &self.pauses
    }
}
