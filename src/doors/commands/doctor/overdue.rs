//! Roles whose schedule says they should have run, and that did not: the first slot after the
//! last one the daemon handled (its slot ledger, `last_slot`) or the role's last run (state, or
//! a run record), more than `GRACE` ago. That is the daemon down, stuck or never started, which
//! otherwise looks like a quiet day. A role with none of those records is not known to be late
//! (a missing record is unknown, never "did not run"): it is counted apart.
//!
//! While no tabd runs for the vault, a slot whose run started and did not finish (state's
//! `started_slots`, docs/spec.md §22) is owed too, said with what the next start does with it (the
//! daemon's own `owed` rule). While one runs, such an entry may be a run still going: not said.
//!
//! A slot a pause held (`tabd pause`, docs/spec.md §28) is not missed: the daemon records it as paused
//! and moves its ledger past it (`daemon::paused_slots`, asked here with the same windows), and
//! nothing of a role paused now is owed.

use chrono::{DateTime, Duration, Utc};

use super::{count, Check, Status};
use crate::doors::commands::Workspace;
use crate::formats::schedule::Schedule;
use crate::records::state::RoleState;
use crate::setup::role::Role;

/// How late a slot may be before it counts as missed: the tick, a run of the same role still
/// going, `min_interval` holding it, a machine waking up.
pub(super) const GRACE: Duration = Duration::minutes(10);

/// A role's schedule against what is on record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    OnTime,
    /// Nothing on record to judge by.
    Unknown,
    /// `slot` passed more than `GRACE` ago and was not handled; the role last ran at `last_ran`.
    Missed {
        slot: DateTime<Utc>,
        last_ran: Option<DateTime<Utc>>,
    },
}

/// The verdict at `now` for a schedule whose ledger says `last_slot` and whose last run started
/// at `last_ran` (the later of state's and the records').
pub(super) fn judge(
    schedule: &Schedule,
    last_slot: Option<DateTime<Utc>>,
    last_ran: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Verdict {
    let Some(handled) = last_slot.max(last_ran) else {
        return Verdict::Unknown;
    };
    match schedule.next_after(handled) {
        Some(slot) if slot + GRACE < now => Verdict::Missed { slot, last_ran },
        _ => Verdict::OnTime,
    }
}

/// The roles that fire on a schedule here: enabled, with a schedule, not pinned to another host.
fn scheduled(ws: &Workspace) -> impl Iterator<Item = &Role> {
    let host = ws.config.daemon.host();
    ws.roles.runnable().filter(move |r| {
        r.enabled() && !r.schedule.is_empty() && r.settings.runs_on.as_ref().is_none_or(|h| *h == host)
    })
}

/// The `overdue` line: the slots missed and owed, by role, and whether a tabd runs to take them.
pub(super) fn check(ws: &Workspace, now: DateTime<Utc>) -> Check {
    let state = crate::records::state::StateStore::new(ws.vault.clone()).peek();
    let records = crate::records::forecast::history(&ws.vault, now);
    let holder = crate::doors::daemon::lock_holder(&ws.vault);
    let pauses = Pauses::read(ws);
    let mut missed = Vec::new();
    let (mut known, mut unknown) = (0, 0);
    for role in scheduled(ws) {
        let rs = state.roles.get(&role.name);
        let held = pauses.now.of(&role.name).is_some();
        if holder.is_none() && !held {
            missed.extend(owed(role, rs, now));
        }
        let from_state = rs.and_then(|r| r.last_run.as_ref()).map(|l| l.started_at);
        let from_records = records
            .get(&role.name)
            .and_then(|runs| runs.iter().map(|p| p.started_at).max());
        let last_ran = from_state.max(from_records);
        let last_slot = pauses.skip(role, rs.and_then(|r| r.last_slot).max(last_ran), now);
        match judge(&role.schedule, last_slot, last_ran, now) {
            Verdict::OnTime => known += 1,
            Verdict::Unknown => unknown += 1,
            Verdict::Missed { slot, last_ran } => {
                known += 1;
                missed.push(said(role, slot, last_ran, now));
            }
        }
    }
    if missed.is_empty() {
        return none_missed(known, unknown);
    }
    let daemon = match holder {
        Some(pid) => format!(
            "tabd runs for this vault (pid {pid}) but did not take the slot: its log says why \
             (`journalctl --user -u tabd`)"
        ),
        None => {
            "no tabd runs for this vault: start it (`systemctl --user start tabd`, or `tabd run`)".to_string()
        }
    };
    // With [cluster], this device's records are its own: another device may have run the slot.
    let (status, elsewhere) = match ws.config.cluster {
        Some(_) => (
            Status::Warning,
            " — on this device; another device of the cluster may have run it (`tabd status`)",
        ),
        None => (Status::Fix, ""),
    };
    Check::new(
        "overdue",
        status,
        format!("{}{elsewhere}; {daemon}", missed.join("; ")),
    )
}

/// The line when no role missed a slot: `known` roles judged, `unknown` with nothing on record.
fn none_missed(known: usize, unknown: usize) -> Check {
    match (known, unknown) {
        (0, 0) => Check::new("overdue", Status::Skipped, "no role fires on a schedule here"),
        (0, u) => Check::new(
            "overdue",
            Status::Skipped,
            format!(
                "{} on a schedule, none with a run or a handled slot on record yet to judge by (tabd \
                 records one at its first start)",
                count(u, "role")
            ),
        ),
        (k, 0) => Check::new(
            "overdue",
            Status::Ok,
            format!("{} on a schedule, none missed a slot", count(k, "role")),
        ),
        (k, u) => Check::new(
            "overdue",
            Status::Ok,
            format!(
                "{} on a schedule, none missed a slot ({u} more with nothing on record yet)",
                count(k, "role")
            ),
        ),
    }
}

/// The person's pauses on this device: what holds now (with the marks of pauses whose record is
/// gone, as `tabd status` reads them) and the book's pauses and ended pauses.
struct Pauses {
    now: crate::records::state::pause::Paused,
    book: crate::records::state::pause::Book,
}

impl Pauses {
    fn read(ws: &Workspace) -> Self {
        use crate::records::state::pause::{PauseStore, Read};
        let book = match PauseStore::new(ws.vault.clone(), None).read() {
            Read::Book(b) => b,
            // No book: no pause. One that cannot be read holds every role (`now` says so).
            Read::Missing | Read::Unreadable(_) => Default::default(),
        };
        Self {
            now: crate::doors::commands::status::paused(ws),
            book,
        }
    }

    /// The ledger of `role` past the slots right after `handled` that a pause held, as the
    /// daemon moves it at its next tick (its windows: the pauses ended, asked — in force or over
    /// by their `--for` — and one held without its record, since ever).
    fn skip(&self, role: &Role, handled: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let handled = handled?;
        let covers = |t: &crate::records::state::pause::Target| t.covers(&role.name);
        let mut windows: Vec<crate::doors::daemon::PauseWindow> = self
            .book
            .ended
            .iter()
            .filter(|e| covers(&e.target))
            .map(|e| (Some(e.since), Some(e.ended)))
            .chain(
                self.book
                    .pauses
                    .iter()
                    .filter(|p| covers(&p.target))
                    .map(|p| (Some(p.since), p.until)),
            )
            .collect();
        if let Some(h) = self.now.of(&role.name) {
            windows.push((h.since, h.until));
        }
        let skipped = crate::doors::daemon::paused_slots(&role.schedule, handled, now, &windows);
        Some(skipped.last().copied().unwrap_or(handled).max(handled))
    }
}

/// The slots of `role` whose run started and did not finish, each with what tabd's next start
/// does with it (asked only while no tabd runs: else the run may still be going).
fn owed(role: &Role, rs: Option<&RoleState>, now: DateTime<Utc>) -> Vec<String> {
    let rule = crate::doors::daemon::OwedRule {
        runs_here: true, // `scheduled` kept only the roles that fire here
        catch_up: role.catch_up(),
        stale_after: role.settings.stale_after(),
    };
    rs.map(|r| r.started_slots.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|slot| {
            format!(
                "{} owes a slot: {}",
                role.name,
                crate::doors::daemon::owed_said(slot, now, rule, role.schedule.tz)
            )
        })
        .collect()
}

/// `risk missed its slot of Mon 2026-11-23 09:00 CET (2h 14m ago); it last ran Sun …`.
fn said(role: &Role, slot: DateTime<Utc>, last_ran: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    let tz = role.schedule.tz;
    let at = |t: DateTime<Utc>| t.with_timezone(&tz).format("%a %Y-%m-%d %H:%M %Z").to_string();
    let ago = (now - slot).to_std().unwrap_or_default();
    let ago = humantime::format_duration(std::time::Duration::from_secs(ago.as_secs() / 60 * 60));
    let last = match last_ran {
        Some(t) => format!("it last ran {}", at(t)),
        None => "no run of it is on record".to_string(),
    };
    format!(
        "{} missed its slot of {} ({ago} ago); {last}",
        role.name,
        at(slot)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::schedule::{parse_tz, ScheduleLine};

    fn hourly() -> Schedule {
        Schedule {
            lines: vec![ScheduleLine::compile("every hour", 1).unwrap().unwrap()],
            tz: parse_tz("Europe/Berlin").unwrap(),
        }
    }

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// The first slot after what is on record, more than ten minutes gone, is missed; within
    /// them, or with nothing on record, it is not said to be.
    #[test]
    fn a_slot_is_missed_only_past_the_grace_after_what_is_on_record() {
        let s = hourly();
        let now = at("2026-11-25T12:30:00Z");
        assert_eq!(judge(&s, None, None, now), Verdict::Unknown);
        assert_eq!(
            judge(&s, Some(at("2026-11-25T12:00:00Z")), None, now),
            Verdict::OnTime,
            "the 12:00 slot was handled; 13:00 is ahead"
        );
        assert_eq!(
            judge(
                &s,
                Some(at("2026-11-25T11:00:00Z")),
                None,
                at("2026-11-25T12:09:00Z")
            ),
            Verdict::OnTime,
            "12:00 is nine minutes late: within the grace"
        );
        assert_eq!(
            judge(&s, Some(at("2026-11-25T11:00:00Z")), None, now),
            Verdict::Missed {
                slot: at("2026-11-25T12:00:00Z"),
                last_ran: None
            }
        );
        let ran = Some(at("2026-11-25T10:00:05Z"));
        assert_eq!(
            judge(&s, Some(at("2026-11-25T09:00:00Z")), ran, now),
            Verdict::Missed {
                slot: at("2026-11-25T11:00:00Z"),
                last_ran: ran
            },
            "the later of the ledger and the last run counts"
        );
        assert_eq!(
            judge(&s, None, Some(at("2026-11-25T12:05:00Z")), now),
            Verdict::OnTime,
            "a run on record is enough to judge by"
        );
    }
}
