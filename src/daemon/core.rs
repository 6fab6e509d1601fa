//! The daemon's decisions, pure: given what each role has waiting, its limits, today's use and
//! `now`, which runs start, which wait and which stop for the day; when to wake next; whether
//! the wall clock jumped. No I/O and no clock reads here — the shell (`daemon/mod.rs`) passes
//! `now` in and carries the decisions out — so every rule is unit-tested without sleeping.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::config::Limits;
use crate::limits::{daily_stop, DailyStop, RoleLimits};
use crate::state::DayUsage;

/// Longest sleep before the wall clock is looked at again (tokio timers stop in suspend).
pub const MAX_SLEEP: Duration = Duration::from_secs(60);
/// A wall-clock jump bigger than this against the monotonic clock means suspend or a clock step.
pub const JUMP: chrono::Duration = chrono::Duration::seconds(5);

/// A scheduled run waiting to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRun {
    pub slot: DateTime<Utc>,
    /// Slots this run stands for (catch-up); 1 when on time.
    pub missed: usize,
}

/// What the daemon tracks of one role between ticks.
#[derive(Debug, Default)]
pub struct RoleRuntime {
    pub running: bool,
    /// The run going on: when it started (wall clock) and what started it, for `tabd status`.
    pub started: Option<(chrono::DateTime<chrono::Utc>, String)>,
    pub last_end: Option<Instant>,
    pub slots: VecDeque<SlotRun>,
    /// Watched files that changed, not yet handed to a run.
    pub watch_pending: Vec<String>,
    /// Complete notes were seen at the last scan.
    pub inbox_ready: bool,
    /// One of them is a person's new note (no chain depth, no failed attempt yet): it runs within
    /// seconds, not after `min_interval`, which holds back what a loop could cause (slots,
    /// chains, watches, retries).
    pub person_note_ready: bool,
    /// Look at the inbox again at this instant (a note settling).
    pub recheck_at: Option<Instant>,
    /// Something changed in the inbox since the last scan.
    pub dirty: bool,
    /// Another process (`tabd fire`) holds the role's run lock: try again at this instant.
    pub busy_until: Option<Instant>,
    /// A server the role requires was down: try again at this instant.
    pub down_until: Option<Instant>,
    /// Runs that failed (the notes' fault or tabd's) since the last one that did not.
    pub failed_in_a_row: u32,
    /// Suspended runs of this role whose calls the person has decided: their second parts.
    pub resumes: VecDeque<String>,
}

impl RoleRuntime {
    pub fn has_work(&self) -> bool {
        !self.slots.is_empty()
            || self.inbox_ready
            || !self.watch_pending.is_empty()
            || !self.resumes.is_empty()
    }

    /// A run ended: the role is free, and notes that arrived meanwhile get a look (coalesced
    /// into one follow-up run).
    pub fn finished(&mut self, now: Instant, reached_model: bool) {
        self.running = false;
        self.started = None;
        if reached_model {
            self.last_end = Some(now);
        }
        self.dirty = true;
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

/// What dispatch knows about one role.
#[derive(Debug, Clone)]
pub struct RoleView {
    pub name: String,
    /// Enabled, not abstract, meant for this host.
    pub may_run: bool,
    pub limits: RoleLimits,
    /// This role's use today (local day).
    pub today: DayUsage,
}

/// One decision of `dispatch`.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Start a run of this role now.
    Start(String),
    /// The role has hit a daily limit: drop its queued work (notes wait for tomorrow) and say
    /// so once.
    Stop(String, DailyStop),
    /// The role may not run on this host (or is disabled): drop its queued slots.
    Drop(String),
}

/// Decides which roles start now. `running` runs are in flight; at most `max_concurrent`.
pub fn dispatch(
    rt: &BTreeMap<String, RoleRuntime>,
    views: &[RoleView],
    global: &Limits,
    all_today: DayUsage,
    running: usize,
    paused: bool,
    now: Instant,
) -> Vec<Decision> {
    let mut out = Vec::new();
    if paused {
        return out;
    }
    let mut running = running;
    let max = global.max_concurrent_runs as usize;
    for view in views {
        let Some(r) = rt.get(&view.name) else { continue };
        if !view.may_run {
            if !r.slots.is_empty() {
                out.push(Decision::Drop(view.name.clone()));
            }
            continue;
        }
        let waiting = r.busy_until.is_some_and(|t| now < t) || r.down_until.is_some_and(|t| now < t);
        if r.running || !r.has_work() || waiting {
            continue;
        }
        if r.interval_end(view.limits.min_interval)
            .is_some_and(|end| now < end)
        {
            continue; // waits; `RoleRuntime::wake` includes that moment
        }
        if let Some(stop) = daily_stop(&view.limits, global, view.today, all_today) {
            out.push(Decision::Stop(view.name.clone(), stop));
            continue;
        }
        if running >= max {
            break;
        }
        running += 1;
        out.push(Decision::Start(view.name.clone()));
    }
    out
}

/// The instant to wake at: the earliest of `timers`, never before `now`, never later than
/// `MAX_SLEEP` from it.
pub fn next_wake(now: Instant, timers: impl IntoIterator<Item = Option<Instant>>) -> Instant {
    timers
        .into_iter()
        .flatten()
        .fold(now + MAX_SLEEP, |wake, t| wake.min(t.max(now)))
}

/// The monotonic instant of wall-clock time `at`, as seen from (`now_wall`, `now_mono`).
pub fn mono_of(at: DateTime<Utc>, now_wall: DateTime<Utc>, now_mono: Instant) -> Instant {
    now_mono + (at - now_wall).to_std().unwrap_or(Duration::ZERO)
}

/// How far the wall clock moved differently from the monotonic clock since the last look, when
/// that is more than `JUMP` (a suspend, an NTP step): the daemon then rescans and recomputes.
pub fn wall_jump(
    last_wall: DateTime<Utc>,
    last_mono: Instant,
    now_wall: DateTime<Utc>,
    now_mono: Instant,
) -> Option<chrono::Duration> {
    let expected = last_wall + chrono::Duration::from_std(now_mono - last_mono).unwrap_or_default();
    let drift = now_wall - expected;
    (drift > JUMP || drift < -JUMP).then_some(drift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_concurrent_runs: 2,
            daily_token_budget: 1000,
            global_daily_token_budget: 10_000,
            max_runs_per_day: 3,
            min_interval: Duration::from_secs(120),
            ..Limits::default()
        }
    }

    fn view(name: &str, today: DayUsage) -> RoleView {
        let cfg = limits();
        RoleView {
            name: name.into(),
            may_run: true,
            limits: RoleLimits {
                max_tool_calls: cfg.max_tool_calls,
                max_tokens_per_run: cfg.max_tokens_per_run,
                max_cost_usd: None,
                daily_token_budget: cfg.daily_token_budget,
                daily_cost_budget_usd: None,
                max_runs_per_day: cfg.max_runs_per_day,
                min_interval: cfg.min_interval,
                max_chain_depth: cfg.max_chain_depth,
                run_deadline: cfg.run_deadline,
            },
            today,
        }
    }

    fn ready() -> RoleRuntime {
        RoleRuntime {
            inbox_ready: true,
            ..RoleRuntime::default()
        }
    }

    fn none() -> DayUsage {
        DayUsage::default()
    }

    #[test]
    fn min_interval_makes_a_role_wait_and_wake_says_until_when() {
        let now = Instant::now();
        let mut rt = BTreeMap::new();
        let mut r = ready();
        r.last_end = Some(now - Duration::from_secs(60));
        rt.insert("a".to_string(), r);
        let views = [view("a", none())];
        assert!(dispatch(&rt, &views, &limits(), none(), 0, false, now).is_empty());
        assert_eq!(
            rt["a"].wake(Duration::from_secs(120)),
            Some(now + Duration::from_secs(60))
        );
        let later = now + Duration::from_secs(60);
        assert_eq!(
            dispatch(&rt, &views, &limits(), none(), 0, false, later),
            [Decision::Start("a".into())]
        );
    }

    #[test]
    fn daily_limits_stop_a_role_and_a_new_day_lets_it_run() {
        let now = Instant::now();
        let rt = BTreeMap::from([("a".to_string(), ready())]);
        let spent = DayUsage {
            tokens: 1000,
            cost_usd: 0.0,
            runs: 0,
        };
        assert_eq!(
            dispatch(&rt, &[view("a", spent)], &limits(), spent, 0, false, now),
            [Decision::Stop("a".into(), DailyStop::TokenBudget)]
        );
        let runs = DayUsage {
            tokens: 0,
            cost_usd: 0.0,
            runs: 3,
        };
        assert_eq!(
            dispatch(&rt, &[view("a", runs)], &limits(), none(), 0, false, now),
            [Decision::Stop("a".into(), DailyStop::RunsPerDay)]
        );
        let everyone = DayUsage {
            tokens: 10_000,
            cost_usd: 0.0,
            runs: 0,
        };
        assert_eq!(
            dispatch(&rt, &[view("a", none())], &limits(), everyone, 0, false, now),
            [Decision::Stop("a".into(), DailyStop::GlobalTokenBudget)]
        );
        // After midnight `today` is zero again (state rolls by date): the role runs.
        assert_eq!(
            dispatch(&rt, &[view("a", none())], &limits(), none(), 0, false, now),
            [Decision::Start("a".into())]
        );
    }

    #[test]
    fn concurrency_pause_running_and_busy_roles() {
        let now = Instant::now();
        let mut rt: BTreeMap<String, RoleRuntime> = ["a", "b", "c"]
            .into_iter()
            .map(|n| (n.to_string(), ready()))
            .collect();
        let views: Vec<RoleView> = ["a", "b", "c"].iter().map(|n| view(n, none())).collect();
        let starts = dispatch(&rt, &views, &limits(), none(), 0, false, now);
        assert_eq!(
            starts,
            [Decision::Start("a".into()), Decision::Start("b".into())],
            "max 2 at once"
        );
        assert_eq!(
            dispatch(&rt, &views, &limits(), none(), 1, false, now),
            [Decision::Start("a".into())]
        );
        assert!(
            dispatch(&rt, &views, &limits(), none(), 0, true, now).is_empty(),
            "paused"
        );
        rt.get_mut("a").unwrap().running = true;
        rt.get_mut("b").unwrap().busy_until = Some(now + Duration::from_secs(2));
        assert_eq!(
            dispatch(&rt, &views, &limits(), none(), 1, false, now),
            [Decision::Start("c".into())]
        );
        assert_eq!(rt["b"].wake(Duration::ZERO), Some(now + Duration::from_secs(2)));
    }

    #[test]
    fn a_role_not_meant_for_this_host_drops_its_slots() {
        let now = Instant::now();
        let mut r = RoleRuntime::default();
        r.slots.push_back(SlotRun {
            slot: Utc::now(),
            missed: 1,
        });
        let rt = BTreeMap::from([("a".to_string(), r)]);
        let mut v = view("a", none());
        v.may_run = false;
        assert_eq!(
            dispatch(&rt, &[v], &limits(), none(), 0, false, now),
            [Decision::Drop("a".into())]
        );
    }

    #[test]
    fn a_finished_run_coalesces_into_one_follow_up_look() {
        let now = Instant::now();
        let mut r = ready();
        r.running = true;
        r.finished(now, true);
        assert!(!r.running && r.dirty, "the inbox is looked at again");
        assert_eq!(r.last_end, Some(now));
    }

    #[test]
    fn wake_is_the_earliest_timer_within_bounds() {
        let now = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(next_wake(now, [None, None]), now + MAX_SLEEP);
        assert_eq!(
            next_wake(now, [Some(now + s(5)), Some(now + s(3)), None]),
            now + s(3)
        );
        assert_eq!(next_wake(now, [Some(now + s(500))]), now + MAX_SLEEP, "capped");
        let later = now + s(1);
        assert_eq!(next_wake(later, [Some(now)]), later, "never in the past");
    }

    #[test]
    fn wall_clock_jumps_are_noticed_and_ticking_is_not() {
        let mono = Instant::now();
        let wall: DateTime<Utc> = "2026-11-22T09:00:00Z".parse().unwrap();
        let s = chrono::Duration::seconds;
        let later = mono + Duration::from_secs(60);
        assert_eq!(wall_jump(wall, mono, wall + s(60), later), None);
        assert_eq!(
            wall_jump(wall, mono, wall + s(3660), later),
            Some(s(3600)),
            "a suspend"
        );
        assert_eq!(
            wall_jump(wall, mono, wall - s(60), later),
            Some(s(-120)),
            "a step back"
        );
        assert_eq!(mono_of(wall + s(30), wall, mono), mono + Duration::from_secs(30));
    }
}
