//! Scheduled slots (docs/spec.md §4): which slots are due, and what the catch-up policy does with
//! the ones that were missed. Pure: `now` is passed in, so tests drive the clock.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::formats::schedule::Schedule;
use crate::setup::role::CatchUp;

/// How late a single slot may be and still count as on time (timer slop, a busy machine).
pub const ON_TIME_GRACE: Duration = Duration::from_secs(5);
/// Most runs `catch_up: all` makes for one gap.
pub const CATCH_UP_ALL_CAP: usize = 10;
/// Most missed slots counted (a week of `every 1 min` is plenty to say "many").
const COUNT_CAP: usize = 20_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotDecision {
    /// Nothing due.
    Nothing,
    /// Run once for `slot`; `missed` slots are covered by it (1 when on time).
    Run {
        slot: DateTime<Utc>,
        missed: usize,
        late: bool,
    },
    /// `catch_up: all`: one run per slot, oldest first (at most 10); `dropped` older ones skipped.
    RunEach {
        slots: Vec<DateTime<Utc>>,
        dropped: usize,
    },
    /// Missed slots not run, and why (logged).
    Skip {
        count: usize,
        first: DateTime<Utc>,
        last: DateTime<Utc>,
        why: String,
    },
}

/// Decides what to do at `now`, given the ledger's last handled slot. Returns the decision and
/// the new ledger value (recorded before any run starts).
pub fn decide(
    schedule: &Schedule,
    last_slot: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    catch_up: CatchUp,
    stale_after: Duration,
) -> (SlotDecision, Option<DateTime<Utc>>) {
    if schedule.is_empty() {
        return (SlotDecision::Nothing, last_slot);
    }
    // First start: nothing can have been missed yet.
    let Some(after) = last_slot else {
        return (SlotDecision::Nothing, Some(now));
    };
    let due = schedule.fires_between(after, now, COUNT_CAP);
    let (Some(&first), Some(&last)) = (due.first(), due.last()) else {
        return (SlotDecision::Nothing, last_slot);
    };
    let lateness = (now - last).to_std().unwrap_or(Duration::ZERO);
    if due.len() == 1 && lateness <= ON_TIME_GRACE {
        return (
            SlotDecision::Run {
                slot: last,
                missed: 1,
                late: false,
            },
            Some(last),
        );
    }
    let decision = match catch_up {
        CatchUp::Once if lateness <= stale_after => SlotDecision::Run {
            slot: last,
            missed: due.len(),
            late: true,
        },
        CatchUp::Once => SlotDecision::Skip {
            count: due.len(),
            first,
            last,
            why: format!(
                "stale: the newest was due more than {} ago (stale_after)",
                humantime::format_duration(stale_after)
            ),
        },
        CatchUp::Skip => SlotDecision::Skip {
            count: due.len(),
            first,
            last,
            why: "catch_up: skip".into(),
        },
        CatchUp::All => {
            let keep = due.len().min(CATCH_UP_ALL_CAP);
            SlotDecision::RunEach {
                slots: due[due.len() - keep..].to_vec(),
                dropped: due.len() - keep,
            }
        }
    };
    (decision, Some(last))
}

/// Every role's slot decision at `now`, and the ledger moves that must be durable before any
/// of them runs.
#[derive(Debug, Default)]
pub struct SlotPlan {
    pub ledger: Vec<(String, Option<DateTime<Utc>>)>,
    pub decisions: Vec<(String, SlotDecision)>,
}

/// Decides for each `(role, schedule, ledger, catch_up, stale_after)` at `now`.
pub fn plan<'a>(
    roles: impl IntoIterator<Item = (&'a str, &'a Schedule, Option<DateTime<Utc>>, CatchUp, Duration)>,
    now: DateTime<Utc>,
) -> SlotPlan {
    let mut out = SlotPlan::default();
    for (name, schedule, ledger, catch_up, stale) in roles {
        let (decision, new_ledger) = decide(schedule, ledger, now, catch_up, stale);
        if new_ledger != ledger {
            out.ledger.push((name.to_string(), new_ledger));
        }
        if decision != SlotDecision::Nothing {
            out.decisions.push((name.to_string(), decision));
        }
    }
    out
}

impl SlotPlan {
    /// The decisions, released only once `persist` has made the ledger moves durable: a slot
    /// whose ledger entry could not be written never runs (the next tick decides it again).
    pub fn commit<E>(
        self,
        persist: impl FnOnce(&[(String, Option<DateTime<Utc>>)]) -> Result<(), E>,
    ) -> Result<Vec<(String, SlotDecision)>, E> {
        if !self.ledger.is_empty() {
            persist(&self.ledger)?;
        }
        Ok(self.decisions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::schedule::{parse_tz, ScheduleLine};

    #[test]
    fn no_slot_runs_before_its_ledger_entry_is_durable() {
        let s = sched("every 30 min", "UTC");
        let ledger = Some(t("2026-01-05T09:10:00Z"));
        let now = t("2026-01-05T09:30:00.200Z");
        let roles = || [("r", &s, ledger, CatchUp::Once, TWO_H)];
        let failed = plan(roles(), now).commit(|_| Err("disk full"));
        assert_eq!(
            failed,
            Err("disk full"),
            "nothing to run when the ledger write failed"
        );
        let mut written = Vec::new();
        let ok = plan(roles(), now).commit(|moves| {
            written.extend_from_slice(moves);
            Ok::<(), ()>(())
        });
        assert_eq!(written, [("r".to_string(), Some(t("2026-01-05T09:30:00Z")))]);
        assert_eq!(ok.unwrap().len(), 1);
    }

    fn sched(line: &str, tz: &str) -> Schedule {
        Schedule {
            lines: vec![ScheduleLine::compile(line, 1).unwrap().unwrap()],
            tz: parse_tz(tz).unwrap(),
        }
    }

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    const TWO_H: Duration = Duration::from_secs(7200);

    #[test]
    fn first_start_records_now_and_runs_nothing() {
        let s = sched("every 30 min", "UTC");
        let (d, ledger) = decide(&s, None, t("2026-01-05T09:10:00Z"), CatchUp::Once, TWO_H);
        assert_eq!(d, SlotDecision::Nothing);
        assert_eq!(ledger, Some(t("2026-01-05T09:10:00Z")));
    }

    #[test]
    fn an_on_time_slot_runs_once_and_only_once() {
        let s = sched("every 30 min", "UTC");
        let ledger = Some(t("2026-01-05T09:10:00Z"));
        let (d, ledger) = decide(&s, ledger, t("2026-01-05T09:30:00.200Z"), CatchUp::Once, TWO_H);
        assert_eq!(
            d,
            SlotDecision::Run {
                slot: t("2026-01-05T09:30:00Z"),
                missed: 1,
                late: false
            }
        );
        // The same instant again (a reload, a restart, a clock step back): nothing.
        let (d, _) = decide(&s, ledger, t("2026-01-05T09:30:01Z"), CatchUp::Once, TWO_H);
        assert_eq!(d, SlotDecision::Nothing);
        let (d, _) = decide(&s, ledger, t("2026-01-05T09:20:00Z"), CatchUp::Once, TWO_H);
        assert_eq!(
            d,
            SlotDecision::Nothing,
            "a clock jump backwards never repeats a slot"
        );
    }

    #[test]
    fn after_a_suspend_missed_slots_run_once() {
        let s = sched("every 30 min", "UTC");
        // Asleep from 09:10 to 10:45: 09:30, 10:00, 10:30 missed.
        let (d, ledger) = decide(
            &s,
            Some(t("2026-01-05T09:10:00Z")),
            t("2026-01-05T10:45:00Z"),
            CatchUp::Once,
            TWO_H,
        );
        assert_eq!(
            d,
            SlotDecision::Run {
                slot: t("2026-01-05T10:30:00Z"),
                missed: 3,
                late: true
            }
        );
        assert_eq!(ledger, Some(t("2026-01-05T10:30:00Z")));
    }

    #[test]
    fn stale_skip_and_all() {
        let s = sched("9am and 5pm, weekdays", "UTC");
        let ledger = Some(t("2026-01-05T08:00:00Z"));
        let (d, _) = decide(&s, ledger, t("2026-01-05T20:00:00Z"), CatchUp::Once, TWO_H);
        assert!(
            matches!(d, SlotDecision::Skip { count: 2, ref why, .. } if why.starts_with("stale")),
            "{d:?}"
        );
        let (d, _) = decide(&s, ledger, t("2026-01-05T17:30:00Z"), CatchUp::Skip, TWO_H);
        assert!(matches!(d, SlotDecision::Skip { count: 2, .. }), "{d:?}");
        let (d, _) = decide(
            &s,
            Some(t("2026-01-01T00:00:00Z")),
            t("2026-01-12T10:00:00Z"),
            CatchUp::All,
            TWO_H,
        );
        let SlotDecision::RunEach { slots, dropped } = d else {
            panic!("{d:?}")
        };
        assert_eq!(slots.len(), 10);
        assert_eq!(
            dropped, 5,
            "15 slots: Thu 1st and Fri 2nd (4), Jan 5–9 (10), Mon 12th 09:00 (1)"
        );
        assert!(slots.windows(2).all(|w| w[0] < w[1]), "oldest first");
        assert_eq!(*slots.last().unwrap(), t("2026-01-12T09:00:00Z"));
    }

    #[test]
    fn dst_days_fire_each_slot_once() {
        // Walk a whole fall-back day in New York minute by minute: 01:30 fires once.
        let s = sched("daily at 1:30", "America/New_York");
        let mut ledger = Some(t("2026-11-01T00:00:00Z"));
        let mut runs = Vec::new();
        let mut now = t("2026-11-01T00:00:00Z");
        while now < t("2026-11-02T12:00:00Z") {
            now += chrono::Duration::minutes(1);
            let (d, l) = decide(&s, ledger, now, CatchUp::Once, TWO_H);
            ledger = l;
            if let SlotDecision::Run { slot, late, .. } = d {
                assert!(!late);
                runs.push(slot);
            }
        }
        assert_eq!(runs, [t("2026-11-01T05:30:00Z"), t("2026-11-02T06:30:00Z")]);
        // Spring forward in Berlin: 02:30 does not exist and runs once at 03:00.
        let s = sched("daily at 2:30", "Europe/Berlin");
        let mut ledger = Some(t("2026-03-28T12:00:00Z"));
        let mut runs = Vec::new();
        let mut now = t("2026-03-28T12:00:00Z");
        while now < t("2026-03-29T12:00:00Z") {
            now += chrono::Duration::minutes(1);
            let (d, l) = decide(&s, ledger, now, CatchUp::Once, TWO_H);
            ledger = l;
            if let SlotDecision::Run { slot, .. } = d {
                runs.push(slot);
            }
        }
        assert_eq!(runs, [t("2026-03-29T01:00:00Z")], "03:00 CEST, once");
    }
}
