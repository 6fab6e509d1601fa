//! What a role is expected to spend (DESIGN §25, `tabd cost`, `validate`): its scheduled slots
//! over the coming week (the compiled schedule's fire count), the share of slots its wake gate
//! skipped in its run records, and the median requests and dollars of its recent scheduled runs —
//! beside its caps. Other runs (inbox notes, `tabd fire`, watches, delegated tasks) cannot be
//! foreseen from a schedule: what they cost a day lately is given beside the forecast.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::base::vault::{Vault, VaultPath};
use crate::records::limits::RoleLimits;
use crate::records::runlog;
use crate::setup::config::Limits;
use crate::setup::role::Role;

/// Days of run records read back.
pub const HISTORY_DAYS: i64 = 30;
/// Recent scheduled runs whose median cost is the forecast's cost of a run.
pub const RECENT_RUNS: usize = 20;
/// Slots counted ahead, at most (an every-second schedule would have 604,800 in a week).
const MAX_SLOTS: usize = 100_000;
/// A run's cost and requests when a role has no scheduled run on record: the stock typical
/// weekday's average (`cargo bench --bench economy`: $0.450 over 21 runs of 6 requests).
pub const ASSUMED_USD_PER_RUN: f64 = 0.021;
pub const ASSUMED_REQUESTS_PER_RUN: f64 = 6.0;

/// One run record, as far as a forecast reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Past {
    pub role: String,
    pub started_at: DateTime<Utc>,
    pub scheduled: bool,
    /// A slot skipped at zero tokens (wake gate, a spent day).
    pub skipped: bool,
    pub cost_usd: f64,
    /// Model requests; records written before they said so: its tool calls plus one.
    pub requests: f64,
}

impl Past {
    /// `None` for a line that is not a run record.
    pub fn of(v: &Value) -> Option<Self> {
        let started_at = v["started_at"].as_str()?.parse().ok()?;
        let skipped = v["outcome"] == "skipped";
        let requests = v["requests"].as_f64().unwrap_or_else(|| {
            let calls = v["tool_calls"].as_array().map_or(0, Vec::len);
            if skipped {
                0.0
            } else {
                calls as f64 + 1.0
            }
        });
        Some(Self {
            role: v["role"].as_str()?.to_string(),
            started_at,
            scheduled: v["trigger"]["kind"] == "schedule",
            skipped,
            cost_usd: v["usage"]["cost_usd"].as_f64().unwrap_or(0.0),
            requests,
        })
    }
}

/// Every run record of the last `HISTORY_DAYS` days before `now`, by role, oldest first.
/// Unreadable lines and files are passed over (`tabd runs` names them).
pub fn history(vault: &Vault, now: DateTime<Utc>) -> BTreeMap<String, Vec<Past>> {
    let mut out: BTreeMap<String, Vec<Past>> = BTreeMap::new();
    let Ok(dir) = VaultPath::parse(crate::base::vault::layout::RUNS, false) else {
        return out;
    };
    let since = (now - Duration::days(HISTORY_DAYS)).date_naive();
    let files = vault.list(&dir).map(|l| l.entries).unwrap_or_default();
    for f in files {
        let day = f.path.file_name().strip_suffix(".jsonl").map(str::to_string);
        let Some(Ok(day)) = day.map(|d| NaiveDate::parse_from_str(&d, "%Y-%m-%d")) else {
            continue;
        };
        if day < since {
            continue;
        }
        let read = runlog::read::each_record(
            vault,
            &f.path,
            |v| {
                if let Some(p) = Past::of(&v).filter(|p| p.started_at <= now) {
                    out.entry(p.role.clone()).or_default().push(p);
                }
            },
            |_| {},
        );
        if let Err(e) = read {
            tracing::warn!("cannot read {} ({e}): the forecast leaves its runs out", f.path);
        }
    }
    for runs in out.values_mut() {
        runs.sort_by_key(|p| p.started_at);
    }
    out
}

/// A role's caps, as the forecast is set beside them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Caps {
    pub max_cost_usd: Option<f64>,
    pub daily_cost_budget_usd: Option<f64>,
    pub max_runs_per_day: u32,
}

/// What the forecast rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Basis {
    /// Scheduled slots on record (run or skipped) in the history read.
    pub scheduled_slots: usize,
    /// Scheduled runs whose median is the cost of a run.
    pub recent_runs: usize,
    /// What was assumed for want of records, in words.
    pub assumed: Vec<String>,
}

/// One role's forecast.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Forecast {
    pub role: String,
    /// Scheduled slots a day: the coming week's, averaged.
    pub slots_per_day: f64,
    /// Slots on the busiest day of the coming week.
    pub busiest_day_slots: u32,
    /// Share of scheduled slots skipped at zero tokens, from the records.
    pub skipped_share: f64,
    pub runs_per_day: f64,
    pub requests_per_run: f64,
    pub usd_per_run: f64,
    pub requests_per_day: f64,
    pub usd_per_day: f64,
    /// 30 days of `usd_per_day`.
    pub usd_per_month: f64,
    /// The busiest day's runs at that cost.
    pub busiest_day_usd: f64,
    /// What its other runs (inbox, manual, watch, delegated) cost a day over the history read.
    pub other_usd_per_day: f64,
    pub caps: Caps,
    pub basis: Basis,
    /// Each cap the forecast crosses, in words.
    pub over: Vec<String>,
}

/// The median of `xs` (0 for none).
fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let mid = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[mid]
    } else {
        (xs[mid - 1] + xs[mid]) / 2.0
    }
}

/// The coming week's slots: a day's average and the busiest day's count (local days).
fn slots(role: &Role, now: DateTime<Utc>) -> (f64, u32) {
    let week = now + Duration::days(7);
    let fires = role.schedule.fires_between(now, week, MAX_SLOTS);
    let Some(last) = fires.last() else {
        return (0.0, 0);
    };
    // Capped: the rate over the span counted.
    let span_days = if fires.len() >= MAX_SLOTS {
        ((*last - now).num_seconds().max(1) as f64) / 86_400.0
    } else {
        7.0
    };
    let per_day = fires.len() as f64 / span_days;
    let mut by_day: BTreeMap<NaiveDate, u32> = BTreeMap::new();
    for t in &fires {
        *by_day
            .entry(t.with_timezone(&role.schedule.tz).date_naive())
            .or_default() += 1;
    }
    let busiest = by_day.values().copied().max().unwrap_or(0);
    let busiest = if fires.len() >= MAX_SLOTS {
        per_day.ceil() as u32
    } else {
        busiest
    };
    (per_day, busiest)
}

/// `role`'s forecast from `past` (its records, oldest first) at `now`.
pub fn forecast(role: &Role, limits: &Limits, past: &[Past], now: DateTime<Utc>) -> Forecast {
    let (slots_per_day, busiest_day_slots) = slots(role, now);
    let mut assumed = Vec::new();
    let scheduled: Vec<&Past> = past.iter().filter(|p| p.scheduled).collect();
    let skipped_share = if scheduled.is_empty() {
        if slots_per_day > 0.0 {
            assumed.push(
                "no scheduled slot on record: every slot is assumed to run (the wake gate's skips unknown)"
                    .into(),
            );
        }
        0.0
    } else {
        scheduled.iter().filter(|p| p.skipped).count() as f64 / scheduled.len() as f64
    };
    let recent: Vec<&&Past> = scheduled
        .iter()
        .filter(|p| !p.skipped)
        .rev()
        .take(RECENT_RUNS)
        .collect();
    let (usd_per_run, requests_per_run) = if recent.is_empty() {
        if slots_per_day > 0.0 {
            assumed.push(format!(
                "no scheduled run on record: a run is assumed to cost ${ASSUMED_USD_PER_RUN} in {ASSUMED_REQUESTS_PER_RUN} requests (the stock typical weekday's average)"
            ));
        }
        (ASSUMED_USD_PER_RUN, ASSUMED_REQUESTS_PER_RUN)
    } else {
        (
            median(recent.iter().map(|p| p.cost_usd).collect()),
            median(recent.iter().map(|p| p.requests).collect()),
        )
    };
    let runs_per_day = slots_per_day * (1.0 - skipped_share);
    let usd_per_day = runs_per_day * usd_per_run;
    let busiest_day_usd = f64::from(busiest_day_slots) * (1.0 - skipped_share) * usd_per_run;
    let other_usd_per_day = other_per_day(past, now);
    let resolved = RoleLimits::resolve(role, limits);
    let caps = Caps {
        max_cost_usd: resolved.max_cost_usd,
        daily_cost_budget_usd: resolved.daily_cost_budget_usd,
        max_runs_per_day: resolved.max_runs_per_day,
    };
    let mut f = Forecast {
        role: role.name.clone(),
        slots_per_day,
        busiest_day_slots,
        skipped_share,
        runs_per_day,
        requests_per_run,
        usd_per_run,
        requests_per_day: runs_per_day * requests_per_run,
        usd_per_day,
        usd_per_month: usd_per_day * 30.0,
        busiest_day_usd,
        other_usd_per_day,
        caps,
        basis: Basis {
            scheduled_slots: scheduled.len(),
            recent_runs: recent.len(),
            assumed,
        },
        over: Vec::new(),
    };
    f.over = over(&f);
    f.rounded()
}

impl Forecast {
    /// Figures kept to what they mean (no `0.13500000000000001` in the JSON): dollars to a
    /// millionth, counts and shares to a thousandth.
    fn rounded(mut self) -> Self {
        use crate::base::cost::round_usd;
        let k = |x: f64| (x * 1000.0).round() / 1000.0;
        self.slots_per_day = k(self.slots_per_day);
        self.skipped_share = k(self.skipped_share);
        self.runs_per_day = k(self.runs_per_day);
        self.requests_per_run = k(self.requests_per_run);
        self.requests_per_day = k(self.requests_per_day);
        for usd in [
            &mut self.usd_per_run,
            &mut self.usd_per_day,
            &mut self.usd_per_month,
            &mut self.busiest_day_usd,
            &mut self.other_usd_per_day,
        ] {
            *usd = round_usd(*usd);
        }
        self
    }
}

/// What the role's runs other than scheduled ones cost a day, over the days of history that
/// have any record of it (at least one).
fn other_per_day(past: &[Past], now: DateTime<Utc>) -> f64 {
    let Some(first) = past.first() else {
        return 0.0;
    };
    let days = ((now - first.started_at).num_seconds() as f64 / 86_400.0).clamp(1.0, HISTORY_DAYS as f64);
    past.iter()
        .filter(|p| !p.scheduled)
        .map(|p| p.cost_usd)
        .sum::<f64>()
        / days
}

/// Each cap the forecast crosses, as a sentence.
fn over(f: &Forecast) -> Vec<String> {
    let dollars = crate::base::cost::dollars;
    let mut out = Vec::new();
    let busiest_runs = f64::from(f.busiest_day_slots) * (1.0 - f.skipped_share);
    if let Some(budget) = f.caps.daily_cost_budget_usd.filter(|b| f.busiest_day_usd > *b) {
        out.push(format!(
            "forecast {} on its busiest day ({busiest_runs:.0} runs at {} each) is over daily_cost_budget_usd {}: \
             the role would stop for the day early; raise the budget or schedule it less often",
            dollars(f.busiest_day_usd),
            dollars(f.usd_per_run),
            dollars(budget)
        ));
    }
    if busiest_runs.round() > f64::from(f.caps.max_runs_per_day) {
        out.push(format!(
            "forecast {busiest_runs:.0} runs on its busiest day is over max_runs_per_day {}: later slots that day \
             would not run; raise it or schedule the role less often",
            f.caps.max_runs_per_day
        ));
    }
    if let Some(cap) = f
        .caps
        .max_cost_usd
        .filter(|c| f.basis.recent_runs > 0 && f.usd_per_run > *c)
    {
        out.push(format!(
            "its recent runs cost {} (median), over max_cost_usd {}: most runs end at the cap",
            dollars(f.usd_per_run),
            dollars(cap)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn a_record_without_requests_counts_its_tool_calls_and_one() {
        let v = serde_json::json!({"role": "risk", "started_at": "2026-11-24T08:30:00Z", "outcome": "ok",
            "trigger": {"kind": "schedule"}, "usage": {"cost_usd": 0.02}, "tool_calls": [{}, {}]});
        let p = Past::of(&v).unwrap();
        assert_eq!(
            (p.requests, p.scheduled, p.skipped, p.cost_usd),
            (3.0, true, false, 0.02)
        );
        let skipped = serde_json::json!({"role": "risk", "started_at": "2026-11-24T08:30:00Z",
            "outcome": "skipped", "trigger": {"kind": "schedule"}, "usage": {"cost_usd": 0.0}});
        assert_eq!(Past::of(&skipped).unwrap().requests, 0.0);
        assert!(Past::of(&serde_json::json!({"role": "x"})).is_none());
    }
}
