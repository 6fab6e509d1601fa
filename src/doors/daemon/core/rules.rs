//! The rules the core applies, pure: given what each role has waiting, its limits, today's use
//! and `now`, which runs start, which wait and which stop for the day; when to wake next; whether
//! the wall clock jumped.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::records::limits::{daily_stop, DailyStop, RoleLimits};
use crate::records::state::DayUsage;
use crate::setup::config::Limits;

use super::role::RoleRuntime;

/// Longest sleep before the wall clock is looked at again (tokio timers stop in suspend).
pub const MAX_SLEEP: Duration = Duration::from_secs(60);
/// A wall-clock jump bigger than this against the monotonic clock means suspend or a clock step.
pub const JUMP: chrono::Duration = chrono::Duration::seconds(5);

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
    use super::super::role::SlotRun;
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
        assert!(!r.finished(now, true), "not the second part of a run that waited");
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
