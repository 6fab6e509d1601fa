//! The limits that stop runaway loops and bills (docs/spec.md §6, §17), resolved once per role: the
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
    /// A budget of all roles together, not of one role: every role stops with it.
    pub fn is_global(self) -> bool {
        matches!(self, Self::GlobalTokenBudget | Self::GlobalCostBudget)
    }

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
    if let Some(stop) = budget_stop(Budget::of_role(role), Budget::global(global), mine, all) {
        return Some(stop);
    }
    if mine.runs >= role.max_runs_per_day {
        return Some(DailyStop::RunsPerDay);
    }
    None
}

/// What one day may spend: tokens, and dollars when a dollar budget is set.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Budget {
    tokens: u64,
    usd: Option<f64>,
}

impl Budget {
    /// No budget at all (a role whose budgets a person lifted for one run).
    const NONE: Budget = Budget {
        tokens: u64::MAX,
        usd: None,
    };

    fn of_role(limits: &RoleLimits) -> Self {
        Self {
            tokens: limits.daily_token_budget,
            usd: limits.daily_cost_budget_usd,
        }
    }

    fn global(limits: &Limits) -> Self {
        Self {
            tokens: limits.global_daily_token_budget,
            usd: limits.global_daily_cost_budget_usd,
        }
    }
}

/// The first daily budget (tokens or dollars, the role's or the global one) spent, given today's
/// use by the role and by all roles; runs per day aside.
fn budget_stop(role: Budget, global: Budget, mine: DayUsage, all: DayUsage) -> Option<DailyStop> {
    if mine.tokens >= role.tokens {
        return Some(DailyStop::TokenBudget);
    }
    if all.tokens >= global.tokens {
        return Some(DailyStop::GlobalTokenBudget);
    }
    if role.usd.is_some_and(|b| mine.cost_usd >= b) {
        return Some(DailyStop::CostBudget);
    }
    if global.usd.is_some_and(|b| all.cost_usd >= b) {
        return Some(DailyStop::GlobalCostBudget);
    }
    None
}

/// A daily budget a run found spent between two of its steps (docs/spec.md §6, §17): which one,
/// whose, and the numbers — what the run's record and daily section say it ended on.
#[derive(Debug, Clone, PartialEq)]
pub struct Crossed {
    pub stop: DailyStop,
    /// The role whose day it is; for a global budget, the role of the run that found it spent.
    pub role: String,
    /// Spent today (tokens, or dollars) against the budget.
    pub spent: f64,
    pub budget: f64,
}

impl std::fmt::Display for Crossed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::base::cost::dollars;
        use crate::base::text::thousands;
        let tokens = |n: f64| thousands(n as u64);
        match self.stop {
            DailyStop::TokenBudget => write!(
                f,
                "daily token budget of role `{}` ({} of {} tokens spent today)",
                self.role,
                tokens(self.spent),
                tokens(self.budget)
            ),
            DailyStop::GlobalTokenBudget => write!(
                f,
                "global daily token budget ({} of {} tokens spent today by all roles)",
                tokens(self.spent),
                tokens(self.budget)
            ),
            DailyStop::CostBudget => write!(
                f,
                "daily cost budget of role `{}` ({} of {} spent today)",
                self.role,
                dollars(self.spent),
                dollars(self.budget)
            ),
            DailyStop::GlobalCostBudget => write!(
                f,
                "global daily cost budget ({} of {} spent today by all roles)",
                dollars(self.spent),
                dollars(self.budget)
            ),
            DailyStop::RunsPerDay => write!(f, "{} (role `{}`)", self.stop.cause(), self.role),
        }
    }
}

/// One role whose day a run's spending counts in: the run's own, or one that delegated to it.
/// `limits: None`: its budgets do not stop this run (`tabd fire --over-budget` lifted them).
#[derive(Debug, Clone, PartialEq)]
pub struct DayLink {
    pub role: String,
    pub limits: Option<RoleLimits>,
}

/// The first daily budget spent today, as a run whose spending counts in the days of `chain`
/// (its own role first, then each role above it) sees it: what `state` has recorded for each
/// role and for all roles, plus `untold` — what the run spent that state has not been told yet.
/// `global: None`: the global budgets do not stop this run. Runs per day are not looked at: a
/// run going on is one already.
pub fn budget_crossed(
    chain: &[DayLink],
    global: Option<&Limits>,
    state: &crate::records::state::State,
    today: chrono::NaiveDate,
    untold: (u64, f64),
) -> Option<Crossed> {
    let plus = |mut used: DayUsage| {
        used.tokens += untold.0;
        used.cost_usd += untold.1;
        used
    };
    let all = plus(state.global.today(today));
    let found = |role: &str, stop: DailyStop, budget: Budget, used: DayUsage| {
        let (spent, budget) = match stop {
            DailyStop::TokenBudget | DailyStop::GlobalTokenBudget => {
                (used.tokens as f64, budget.tokens as f64)
            }
            _ => (used.cost_usd, budget.usd.unwrap_or(0.0)),
        };
        Crossed {
            stop,
            role: role.to_string(),
            spent,
            budget,
        }
    };
    for (i, link) in chain.iter().enumerate() {
        // Each role's day once, however often it appears in the chain (a role that asks itself).
        if chain[..i].iter().any(|l| l.role == link.role) {
            continue;
        }
        let Some(limits) = &link.limits else { continue };
        let mine = plus(
            state
                .roles
                .get(&link.role)
                .map(|r| r.today(today))
                .unwrap_or_default(),
        );
        let budget = Budget::of_role(limits);
        if let Some(stop) = budget_stop(budget, Budget::NONE, mine, all) {
            return Some(found(&link.role, stop, budget, mine));
        }
    }
    let global = Budget::global(global?);
    let own = chain.first().map_or("", |l| l.role.as_str());
    budget_stop(Budget::NONE, global, DayUsage::default(), all).map(|stop| found(own, stop, global, all))
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

    fn link(role: &str, limits: Option<RoleLimits>) -> DayLink {
        DayLink {
            role: role.into(),
            limits,
        }
    }

    fn day() -> chrono::NaiveDate {
        chrono::NaiveDate::from_ymd_opt(2026, 11, 25).unwrap()
    }

    /// `delivery` recorded 900 of its 1,000 tokens and `risk` nothing; all roles 4,000 of 5,000.
    fn recorded() -> crate::records::state::State {
        let mut s = crate::records::state::State::default();
        s.add_usage(
            "delivery",
            day(),
            crate::base::cost::Usage {
                input_tokens: 900,
                ..Default::default()
            },
            0.5,
        );
        s.global.tokens_today = 4000;
        s.global.cost_today_usd = 1.0;
        s
    }

    /// Issue 49: what a run spent and has not told state yet counts with what state recorded, in
    /// its own role's day, in the day of each role above it (a child's spending counts against
    /// its parent's role), and in everyone's.
    #[test]
    fn a_budget_is_crossed_by_the_recorded_day_and_what_the_run_has_not_told() {
        let (r, g, s) = (role_limits(), limits(), recorded());
        let own = [link("delivery", Some(r.clone()))];
        assert_eq!(budget_crossed(&own, Some(&g), &s, day(), (99, 0.0)), None);
        let crossed = budget_crossed(&own, Some(&g), &s, day(), (100, 0.0)).unwrap();
        assert_eq!(crossed.stop, DailyStop::TokenBudget);
        assert_eq!(
            crossed.to_string(),
            "daily token budget of role `delivery` (1,000 of 1,000 tokens spent today)"
        );
        // A child of `risk`, asked by `delivery`: the parent's day is the one spent.
        let child = [link("risk", Some(r.clone())), link("delivery", Some(r.clone()))];
        let crossed = budget_crossed(&child, Some(&g), &s, day(), (150, 0.0)).unwrap();
        assert_eq!(
            (crossed.stop, crossed.role.as_str()),
            (DailyStop::TokenBudget, "delivery")
        );
        // Dollars: the role's $1 (0.5 recorded), then everyone's $2 (1.0 recorded).
        let crossed = budget_crossed(&child, Some(&g), &s, day(), (0, 0.6)).unwrap();
        assert_eq!(
            crossed.to_string(),
            "daily cost budget of role `delivery` ($1.10 of $1.00 spent today)"
        );
        let roomy = RoleLimits {
            daily_token_budget: 10_000,
            daily_cost_budget_usd: None,
            ..r.clone()
        };
        let lifted = [link("risk", Some(roomy)), link("delivery", None)];
        let crossed = budget_crossed(&lifted, Some(&g), &s, day(), (1000, 0.0)).unwrap();
        assert_eq!(
            crossed.to_string(),
            "global daily token budget (5,000 of 5,000 tokens spent today by all roles)",
            "a lifted role's budget does not stop the run; everyone's does"
        );
        assert_eq!(crossed.role, "risk", "the run that found it");
        let crossed = budget_crossed(&lifted, Some(&g), &s, day(), (0, 1.0)).unwrap();
        assert_eq!(crossed.stop, DailyStop::GlobalCostBudget);
        assert_eq!(
            crossed.to_string(),
            "global daily cost budget ($2.00 of $2.00 spent today by all roles)"
        );
        assert_eq!(
            budget_crossed(&lifted, None, &s, day(), (1000, 1.0)),
            None,
            "every budget lifted"
        );
        let tomorrow = day().succ_opt().unwrap();
        assert_eq!(
            budget_crossed(&child, Some(&g), &s, tomorrow, (150, 0.0)),
            None,
            "yesterday's spending is not today's"
        );
    }

    #[test]
    fn a_role_that_asks_itself_counts_once_and_runs_per_day_never_stop_a_run() {
        let (r, g, mut s) = (role_limits(), limits(), recorded());
        s.role("delivery").runs_today = 99;
        let twice = [link("delivery", Some(r.clone())), link("delivery", Some(r))];
        assert_eq!(budget_crossed(&twice, Some(&g), &s, day(), (99, 0.0)), None);
        assert!(budget_crossed(&twice, Some(&g), &s, day(), (100, 0.0)).is_some());
    }
}
