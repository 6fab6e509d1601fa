//! The limits that stop runaway loops and bills (DESIGN §6, §17), resolved once per role: the
//! role's own setting, else the config's `[limits]`. The one place that knows the fallbacks.

use std::time::Duration;

use crate::records::state::DayUsage;
use crate::setup::config::Limits;
use crate::setup::role::Role;

/// Every limit that applies to one role.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleLimits {
    pub max_tool_calls: u32,
    pub max_tokens_per_run: u64,
    pub max_cost_usd: Option<f64>,
    pub daily_token_budget: u64,
    pub daily_cost_budget_usd: Option<f64>,
    pub max_runs_per_day: u32,
    pub min_interval: Duration,
    pub max_chain_depth: u32,
    pub run_deadline: Duration,
}

impl RoleLimits {
    pub fn resolve(role: &Role, limits: &Limits) -> Self {
        let s = &role.settings;
        Self {
            max_tool_calls: s.max_tool_calls(limits),
            max_tokens_per_run: s.max_tokens_per_run(limits),
            max_cost_usd: s.max_cost_usd(limits),
            daily_token_budget: s.daily_token_budget(limits),
            daily_cost_budget_usd: s.daily_cost_budget_usd(limits),
            max_runs_per_day: s.max_runs_per_day(limits),
            min_interval: s.min_interval(limits),
            max_chain_depth: s.max_chain_depth(limits),
            run_deadline: limits.run_deadline,
        }
    }
}

/// Why a role may not run again today.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DailyStop {
    TokenBudget,
    GlobalTokenBudget,
    CostBudget,
    GlobalCostBudget,
    RunsPerDay,
}

impl DailyStop {
    /// The cause as the daily log and status say it (also the once-a-day notice key).
    pub fn cause(self) -> &'static str {
        match self {
            Self::TokenBudget => "daily token budget spent",
            Self::GlobalTokenBudget => "global daily token budget spent",
            Self::CostBudget => "daily cost budget spent",
            Self::GlobalCostBudget => "global daily cost budget spent",
            Self::RunsPerDay => "max_runs_per_day reached",
        }
    }
}

/// Why `role` may not run again today, in words, if its day is spent (its daily tokens or
/// dollars, the global ones, its runs per day): for every door, as the daemon checks it.
pub fn day_spent(
    role: &Role,
    global: &Limits,
    state: &crate::records::state::State,
    today: chrono::NaiveDate,
) -> Option<String> {
    day_stop(role, global, state, today).map(|stop| stop_sentence(role, stop))
}

/// The first daily limit `role` has hit today, as `state` has its day and all roles'.
pub fn day_stop(
    role: &Role,
    global: &Limits,
    state: &crate::records::state::State,
    today: chrono::NaiveDate,
) -> Option<DailyStop> {
    let limits = RoleLimits::resolve(role, global);
    let mine = state
        .roles
        .get(&role.name)
        .map(|r| r.today(today))
        .unwrap_or_default();
    daily_stop(&limits, global, mine, state.global.today(today))
}

/// `role `comms`: daily token budget spent`.
pub fn stop_sentence(role: &Role, stop: DailyStop) -> String {
    format!("role `{}`: {}", role.name, stop.cause())
}

/// The first daily limit `role` has hit, given today's use by it and by all roles.
pub fn daily_stop(role: &RoleLimits, global: &Limits, mine: DayUsage, all: DayUsage) -> Option<DailyStop> {
    if mine.tokens >= role.daily_token_budget {
        return Some(DailyStop::TokenBudget);
    }
    if all.tokens >= global.global_daily_token_budget {
        return Some(DailyStop::GlobalTokenBudget);
    }
    if role.daily_cost_budget_usd.is_some_and(|b| mine.cost_usd >= b) {
        return Some(DailyStop::CostBudget);
    }
    if global
        .global_daily_cost_budget_usd
        .is_some_and(|b| all.cost_usd >= b)
    {
        return Some(DailyStop::GlobalCostBudget);
    }
    if mine.runs >= role.max_runs_per_day {
        return Some(DailyStop::RunsPerDay);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            daily_token_budget: 1000,
            global_daily_token_budget: 5000,
            max_runs_per_day: 3,
            daily_cost_budget_usd: Some(1.0),
            global_daily_cost_budget_usd: Some(2.0),
            ..Limits::default()
        }
    }

    fn role_limits() -> RoleLimits {
        let cfg = limits();
        RoleLimits {
            max_tool_calls: cfg.max_tool_calls,
            max_tokens_per_run: cfg.max_tokens_per_run,
            max_cost_usd: None,
            daily_token_budget: cfg.daily_token_budget,
            daily_cost_budget_usd: cfg.daily_cost_budget_usd,
            max_runs_per_day: cfg.max_runs_per_day,
            min_interval: cfg.min_interval,
            max_chain_depth: cfg.max_chain_depth,
            run_deadline: cfg.run_deadline,
        }
    }

    fn used(tokens: u64, cost_usd: f64, runs: u32) -> DayUsage {
        DayUsage {
            tokens,
            cost_usd,
            runs,
        }
    }

    #[test]
    fn each_daily_limit_and_its_order() {
        let (r, g) = (role_limits(), limits());
        assert_eq!(daily_stop(&r, &g, used(0, 0.0, 0), used(0, 0.0, 0)), None);
        assert_eq!(
            daily_stop(&r, &g, used(1000, 0.0, 0), used(1000, 0.0, 0)),
            Some(DailyStop::TokenBudget)
        );
        assert_eq!(
            daily_stop(&r, &g, used(10, 0.0, 0), used(5000, 0.0, 0)),
            Some(DailyStop::GlobalTokenBudget)
        );
        assert_eq!(
            daily_stop(&r, &g, used(10, 1.0, 0), used(10, 1.0, 0)),
            Some(DailyStop::CostBudget)
        );
        assert_eq!(
            daily_stop(&r, &g, used(10, 0.5, 0), used(10, 2.5, 0)),
            Some(DailyStop::GlobalCostBudget)
        );
        assert_eq!(
            daily_stop(&r, &g, used(10, 0.0, 3), used(10, 0.0, 0)),
            Some(DailyStop::RunsPerDay)
        );
        let unlimited = RoleLimits {
            daily_cost_budget_usd: None,
            ..r
        };
        let g2 = Limits {
            global_daily_cost_budget_usd: None,
            ..g
        };
        assert_eq!(
            daily_stop(&unlimited, &g2, used(0, 99.0, 0), used(0, 99.0, 0)),
            None
        );
    }
}
