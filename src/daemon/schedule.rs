//! Scheduled slots: due ones become queued runs (or logged skips), and only after the ledger
//! records them durably (DESIGN §4: one occurrence runs at most once).

use chrono::{DateTime, Utc};

use super::core::{Input, SlotRun, Work};
use super::slots::{self, SlotDecision};
use super::Daemon;
use crate::role::Role;
use crate::trigger::Trigger;

/// The trigger for a run of `role` started for `work` (the core took it off the queue).
pub(super) fn trigger_of(work: Work, role: &Role) -> Trigger {
    match work {
        Work::Resume(id) => Trigger::resume(&id),
        Work::Slot(s) => {
            let cron = role
                .schedule
                .lines
                .iter()
                .map(|l| l.cron_exprs().collect::<Vec<_>>().join(" | "))
                .collect::<Vec<_>>()
                .join(" | ");
            Trigger::schedule(s.slot, cron, s.missed, role.skip_unchanged())
        }
        Work::Inbox => Trigger::inbox(),
        Work::Watch(paths) => Trigger::watch(paths),
    }
}

impl Daemon {
    /// Turns due scheduled slots into queued runs (or logged skips), recording them first.
    pub(super) fn schedule_due(&mut self, wall: DateTime<Utc>) {
        let set = self.run_env.roles.clone();
        let roles: Vec<&Role> = set
            .runnable()
            .filter(|r| self.role_may_run_here(r) && !r.schedule.is_empty())
            .collect();
        let plan = slots::plan(
            roles.iter().map(|role| {
                (
                    role.name.as_str(),
                    &role.schedule,
                    self.state.roles.get(&role.name).and_then(|r| r.last_slot),
                    role.catch_up(),
                    role.settings
                        .stale_after
                        .unwrap_or(std::time::Duration::from_secs(7200)),
                )
            }),
            wall,
        );
        let store = self.run_env.store.clone();
        let fail = self.run_env.faults.hit("ledger-write");
        let committed = plan.commit(|moves| {
            if fail {
                return Err(crate::vault::VaultError::Io("TABD_FAULTS: ledger-write".into()));
            }
            let moves = moves.to_vec();
            let fresh = store.update(move |s| {
                for (name, slot) in moves {
                    s.role(&name).last_slot = slot;
                }
                s.clone()
            })?;
            self.state = fresh;
            Ok(())
        });
        let decisions = match committed {
            Ok(d) => d,
            Err(e) => {
                self.ledger_failed(&e.to_string());
                return;
            }
        };
        if self.ledger_error.take().is_some() {
            tracing::info!("scheduled slots can be recorded again");
            self.status_dirty = true;
        }
        for (name, decision) in decisions {
            if let Some(role) = roles.iter().find(|r| r.name == name) {
                self.queue_or_log(role, decision, wall);
            }
        }
    }

    /// The ledger could not be written: no slot runs (each would run again and again from the
    /// old ledger); said once, shown in status, tried again every tick.
    fn ledger_failed(&mut self, why: &str) {
        if self.ledger_error.is_none() {
            let msg = format!(
                "cannot record scheduled runs in .tabd/state.json ({why}); scheduled runs wait until it can"
            );
            tracing::error!("{msg}");
            self.writes.check(
                "the daily note",
                self.run_env
                    .log
                    .write_line(self.run_env.clock.now(), "tabd", &msg),
            );
            self.status_dirty = true;
        }
        self.ledger_error = Some(why.to_string());
    }

    fn queue_or_log(&mut self, role: &Role, decision: SlotDecision, wall: DateTime<Utc>) {
        let tz = self.config().timezone;
        let fmt = |t: DateTime<Utc>| t.with_timezone(&tz).format("%H:%M").to_string();
        let log = self.run_env.log.clone();
        let writes = &self.writes;
        let line =
            |text: String| writes.check("the daily note", log.write_line(wall, &role.display_name, &text));
        let mut due = Vec::new();
        match decision {
            SlotDecision::Nothing => {}
            SlotDecision::Run { slot, missed, late } => {
                if late {
                    let what = if missed > 1 {
                        format!("missed {missed} scheduled runs (the last due {})", fmt(slot))
                    } else {
                        format!("missed the {} run", fmt(slot))
                    };
                    line(format!(
                        "{what} while tabd was not running or the computer slept; running once now (catch_up: once)"
                    ));
                }
                due.push(SlotRun { slot, missed });
            }
            SlotDecision::RunEach { slots, dropped } => {
                line(format!(
                    "missed {} scheduled runs; running {} of them now, oldest first (catch_up: all){}",
                    slots.len() + dropped,
                    slots.len(),
                    if dropped > 0 {
                        format!(", {dropped} older ones skipped")
                    } else {
                        String::new()
                    }
                ));
                due.extend(slots.into_iter().map(|slot| SlotRun { slot, missed: 1 }));
            }
            SlotDecision::Skip {
                count,
                first,
                last,
                why,
            } => {
                let span = if count > 1 {
                    format!("{count} scheduled runs ({}–{})", fmt(first), fmt(last))
                } else {
                    format!("the {} run", fmt(last))
                };
                line(format!("skipped — missed {span}: {why}"));
                self.status_dirty = true;
            }
        }
        if !due.is_empty() {
            self.apply(Input::SlotsDue {
                role: role.name.clone(),
                slots: due,
            });
        }
    }
}
