//! The day a run spends in (docs/spec.md §6, §17, §22). What a run spends is counted in today's spending
//! in state before each of its steps — in its role's day, in the day of every role above it (a
//! delegated run's spending counts against the roles that asked for it, each once) and in the
//! global day — and then the daily budgets are checked against that. So a daily budget holds
//! while several runs go on at once (each counts what the others told state), from every door and
//! process (`tabd fire` beside the daemon), and across a crash: a run killed in the middle of its
//! turn has counted what it spent up to its last step. The run's end (`finish`) adds to the day
//! what was not told yet, in the same update as its record, so the day is the sum of the records
//! once every run has ended.

use std::sync::{Arc, Mutex};

use chrono::NaiveDate;

use super::env::{RunEnv, RunResult};
use crate::base::clock::Clock;
use crate::base::faults::Faults;
use crate::base::sidewrites::SideWrites;
use crate::base::vault::Durability;
use crate::capabilities::provider::FailureClass;
use crate::gate::harness::Day;
use crate::records::limits::{budget_crossed, Crossed, DailyStop, DayLink, RoleLimits};
use crate::records::runlog::RunRecord;
use crate::records::state::{State, StateStore};
use crate::setup::config::Limits;
use crate::setup::role::Role;

/// The day one run spends in (see the module's text).
pub struct RunDay {
    store: StateStore,
    clock: Arc<dyn Clock>,
    tz: chrono_tz::Tz,
    side: SideWrites,
    faults: Faults,
    /// The roles whose day the run's spending counts in: its own first, then each role above it.
    chain: Vec<DayLink>,
    /// The global budgets; `None`: they do not stop this run (`tabd fire --over-budget`).
    global: Option<Limits>,
    own: Mutex<Own>,
}

/// What the run itself spent (its responses; its children count theirs themselves) and what
/// of it state has been told.
#[derive(Default)]
struct Own {
    spent: (u64, f64),
    told: (u64, f64),
    /// State as last read or written: what a check goes by when state cannot be read now (what
    /// cannot be read is unknown, never "nothing spent").
    seen: Option<State>,
}

impl Own {
    fn untold(&self) -> (u64, f64) {
        (
            self.spent.0.saturating_sub(self.told.0),
            (self.spent.1 - self.told.1).max(0.0),
        )
    }
}

impl RunDay {
    /// The day of a run of `role` under `limits`, delegated from runs whose days are `above`
    /// (none for a run of its own); `lifted`: the person lifted this run's daily budgets (the
    /// role's and the global ones; what it spends still counts).
    pub fn open(env: &RunEnv, role: &Role, limits: &RoleLimits, above: &[DayLink], lifted: bool) -> Self {
        let mut chain = vec![DayLink {
            role: role.name.clone(),
            limits: (!lifted).then(|| limits.clone()),
        }];
        chain.extend(above.iter().cloned());
        Self {
            chain,
            global: (!lifted).then(|| env.config.limits.clone()),
            faults: env.faults.clone(),
            ..Self::on(
                env.store.clone(),
                env.clock.clone(),
                env.log.tz(),
                env.side.clone(),
            )
        }
    }

    /// A day with no role in it yet, in `store`, by `clock` in `tz`.
    fn on(store: StateStore, clock: Arc<dyn Clock>, tz: chrono_tz::Tz, side: SideWrites) -> Self {
        Self {
            store,
            clock,
            tz,
            side,
            faults: Faults::default(),
            chain: Vec::new(),
            global: None,
            own: Mutex::new(Own::default()),
        }
    }

    /// The days a run delegated from this one counts in besides its own.
    pub fn chain(&self) -> &[DayLink] {
        &self.chain
    }

    /// Each role whose day the run's spending counts in, once.
    pub fn roles(&self) -> Vec<String> {
        let mut roles: Vec<String> = Vec::new();
        for link in &self.chain {
            if !roles.contains(&link.role) {
                roles.push(link.role.clone());
            }
        }
        roles
    }

    /// What of the run's own spending today's counters in state have been told.
    pub fn told(&self) -> (u64, f64) {
        self.own().told
    }

    /// What the run itself spent that state has not been told (a write that failed).
    pub fn untold(&self) -> (u64, f64) {
        self.own().untold()
    }

    fn own(&self) -> std::sync::MutexGuard<'_, Own> {
        self.own.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn today(&self) -> NaiveDate {
        self.clock.now().with_timezone(&self.tz).date_naive()
    }

    /// Tells state what the run spent since it last did: one update, so two runs telling at
    /// once both count. A write that fails is said once and tried again at the next step;
    /// meanwhile the checks count it from here. True when state was written (and `own.seen` is
    /// what it holds now).
    fn tell(&self, own: &mut Own) -> bool {
        let (tokens, usd) = own.untold();
        if tokens == 0 && usd <= 0.0 {
            return false;
        }
        let (roles, today) = (self.roles(), self.today());
        let told = self.store.update_with(Durability::File, |s| {
            count_in(s, &roles, today, (tokens, usd));
            s.clone()
        });
        match told {
            Ok(state) => {
                own.told = own.spent;
                own.seen = Some(state);
                true
            }
            Err(e) => {
                self.side.failed("the state (a run's spending today)", &e);
                false
            }
        }
    }

    /// The first daily budget spent, by what state says (`fresh`: as this run just wrote it;
    /// else read now) and what the run has not told it.
    fn crossed_in(&self, own: &mut Own, fresh: bool) -> Option<Crossed> {
        if !fresh {
            match self.store.try_load() {
                Ok(s) => own.seen = Some(s),
                Err(e) => self.side.failed("the state (today's spending, read)", &e),
            }
        }
        let state = own.seen.clone().unwrap_or_default();
        budget_crossed(
            &self.chain,
            self.global.as_ref(),
            &state,
            self.today(),
            own.untold(),
        )
    }

    /// The daily budget spent as the run ends, by what state says and what the run has not told
    /// it yet (its end adds that, in the same update as its record: no write of its own).
    pub fn crossed_at_end(&self) -> Option<Crossed> {
        let mut own = self.own();
        self.crossed_in(&mut own, false)
    }
}

impl std::fmt::Debug for RunDay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunDay")
            .field("chain", &self.chain)
            .field("global", &self.global.is_some())
            .finish_non_exhaustive()
    }
}

impl Day for RunDay {
    /// Counted here; told to state before the run's next step (`crossed`), or by its end — so a
    /// run's last response costs no write of its own.
    fn spent(&self, tokens: u64, usd: f64) {
        let mut own = self.own();
        own.spent.0 += tokens;
        own.spent.1 += usd;
    }

    /// Before each step: what the run spent since its last one is told first (from then on the
    /// runs going on at once count it, and a crash keeps it), then the day is checked.
    fn crossed(&self) -> Option<Crossed> {
        let mut own = self.own();
        let fresh = self.tell(&mut own);
        let crossed = self.crossed_in(&mut own, fresh);
        if crossed.is_some() {
            self.faults.abort_at("day-crossed");
        }
        crossed
    }
}

/// What a run's end still adds to today's spending: its responses were told to state as they
/// came, so only what a failed write left out, and the difference between pricing the run once
/// (its record) and pricing each response; all of it for a run that had no day.
pub(super) struct Unrecorded {
    pub(super) roles: Vec<String>,
    pub(super) spent: (u64, f64),
}

/// What the end of a run of `role` adds to its day (see `Unrecorded`). Its record holds its own
/// spending (not its children's: each child tells its own, in its days and the parent's) —
/// except a run tabd's stop cut short, whose record also holds what its children cut short with
/// it spent: they told that themselves, so it adds only what it did not tell of its own.
pub(super) fn unrecorded(
    day: Option<&RunDay>,
    record: &RunRecord,
    class: Option<FailureClass>,
    role: &str,
) -> Unrecorded {
    let Some(day) = day else {
        return Unrecorded {
            roles: vec![role.to_string()],
            spent: (record.usage.tokens.total(), record.usage.cost_usd),
        };
    };
    let spent = if class == Some(FailureClass::Stopped) {
        day.untold()
    } else {
        let (tokens, usd) = day.told();
        (
            record.usage.tokens.total().saturating_sub(tokens),
            record.usage.cost_usd - usd,
        )
    };
    Unrecorded {
        roles: day.roles(),
        spent,
    }
}

/// The roles whose day the run (or a run it delegated to) found spent as it ended, and by which
/// limit, each once: the daemon stops them for today and tells the person once.
pub(super) fn spent_at_end(day: Option<&RunDay>, children: &[RunResult]) -> Vec<(String, DailyStop)> {
    let mine = day.and_then(RunDay::crossed_at_end).map(|c| (c.role, c.stop));
    let mut all: Vec<(String, DailyStop)> = Vec::new();
    for spent in mine
        .into_iter()
        .chain(children.iter().flat_map(|c| c.day_spent.clone()))
    {
        if !all.contains(&spent) {
            all.push(spent);
        }
    }
    all
}

/// Counts `spent` (tokens, dollars) in today's day of each of `roles` and in the global day. A
/// run's end may count less than it told (its record prices its usage once, its responses were
/// priced one by one): dollars never go below zero.
pub(super) fn count_in(s: &mut State, roles: &[String], today: NaiveDate, spent: (u64, f64)) {
    let (tokens, usd) = spent;
    s.global.roll_day(today);
    s.global.tokens_today += tokens;
    s.global.cost_today_usd = (s.global.cost_today_usd + usd).max(0.0);
    for role in roles {
        let r = s.role(role);
        r.roll_day(today);
        r.tokens_today += tokens;
        r.cost_today_usd = (r.cost_today_usd + usd).max(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, StateStore) {
        let dir = tempfile::tempdir().unwrap();
        let vault = Arc::new(crate::base::vault::Vault::open(dir.path()).unwrap());
        (dir, StateStore::new(vault))
    }

    fn limits(tokens: u64) -> RoleLimits {
        let cfg = Limits::default();
        RoleLimits {
            max_tool_calls: cfg.max_tool_calls,
            max_tokens_per_run: cfg.max_tokens_per_run,
            max_cost_usd: None,
            daily_token_budget: tokens,
            daily_cost_budget_usd: None,
            max_runs_per_day: cfg.max_runs_per_day,
            min_interval: cfg.min_interval,
            max_chain_depth: cfg.max_chain_depth,
            run_deadline: cfg.run_deadline,
        }
    }

    /// A run of `role`, delegated from runs of `above` (each with a budget of `tokens`).
    fn day(store: &StateStore, role: &str, above: &[&str], tokens: u64) -> RunDay {
        let clock = Arc::new(crate::base::clock::ManualClock::new(
            "2026-11-25T09:00:00Z".parse().unwrap(),
        ));
        let link = |r: &&str| DayLink {
            role: r.to_string(),
            limits: Some(limits(tokens)),
        };
        RunDay {
            chain: std::iter::once(&role).chain(above).map(link).collect(),
            global: Some(Limits {
                global_daily_token_budget: 10_000,
                ..Limits::default()
            }),
            ..RunDay::on(store.clone(), clock, chrono_tz::UTC, SideWrites::default())
        }
    }

    /// Two runs going on at once see each other's spending from the step after it (state is
    /// where they meet, whichever process each runs in), and a delegated run's counts in its
    /// parent's day.
    #[test]
    fn runs_going_on_at_once_count_in_one_day() {
        let (_dir, store) = store();
        let a = day(&store, "a", &[], 1_000);
        let b = day(&store, "b", &[], 1_000);
        a.spent(600, 0.0);
        assert!(a.crossed().is_none() && b.crossed().is_none());
        let child = day(&store, "c", &["a"], 1_000);
        child.spent(400, 0.0);
        assert_eq!(
            child.crossed_at_end().map(|c| c.role),
            Some("a".to_string()),
            "counted with what it has not told yet"
        );
        assert!(a.crossed().is_none(), "not told before the child's next step");
        assert_eq!(
            child.crossed().map(|c| c.role),
            Some("a".to_string()),
            "the child is stopped by its parent's day"
        );
        let crossed = a.crossed().expect("its child spent the rest of a's day");
        assert_eq!((crossed.role.as_str(), crossed.spent), ("a", 1_000.0));
        assert!(b.crossed().is_none(), "b's own day is not a's");
        let s = store.load();
        let today = chrono::NaiveDate::from_ymd_opt(2026, 11, 25).unwrap();
        assert_eq!(s.roles["a"].today(today).tokens, 1_000);
        assert_eq!(s.roles["c"].today(today).tokens, 400);
        assert_eq!(
            s.global.today(today).tokens,
            1_000,
            "each token once in everyone's day"
        );
        assert_eq!((a.told(), a.untold()), ((600, 0.0), (0, 0.0)));
    }

    /// What cannot be written to state is still counted by the run that spent it (unknown is
    /// never "nothing spent"), and told at its next response.
    #[test]
    fn spending_state_could_not_be_told_still_counts() {
        let (dir, store) = store();
        let a = day(&store, "a", &[], 1_000);
        a.spent(100, 0.0);
        assert!(a.crossed().is_none());
        let state = dir.path().join(".tabd/state.json");
        std::fs::remove_file(&state).unwrap();
        std::fs::create_dir(&state).unwrap(); // unreadable, unwritable
        a.spent(900, 0.0);
        let crossed = a.crossed().expect("counted from what the run knows");
        assert_eq!(
            crossed.spent, 1_000.0,
            "the last state it saw, and what it could not tell"
        );
        assert_eq!(a.untold(), (900, 0.0));
        std::fs::remove_dir(&state).unwrap();
        a.spent(1, 0.0);
        assert!(
            a.crossed().is_none(),
            "a fresh state file: a new day for the test"
        );
        assert_eq!(a.untold(), (0, 0.0), "told once state could be written again");
    }
}
