//! What a role is expected to spend (docs/spec.md §25, `tabd cost`, `validate`): its scheduled slots
//! over the coming week (the compiled schedule's fire count), the share of slots its wake gate
//! skipped in its run records, and the median requests and dollars of its recent scheduled runs —
//! beside its caps. Other runs (inbox notes, `tabd fire`, watches, delegated tasks) cannot be
//! foreseen from a schedule: what they cost a day lately is given beside the forecast.
//!
//! Dollars only where a price is known: a model tabd has no price for records its runs at $0
//! (`running::run::finish`), which says nothing of what they cost, so its forecast has no dollar
//! figure and says why (`Pricing::Unknown`); a model priced at 0 forecasts $0.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::base::vault::{Vault, VaultPath};
use crate::records::limits::RoleLimits;
use crate::records::runlog;
use crate::setup::config::{Config, ProviderKind};
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

/// What tabd knows, before any run, of what a role's requests cost.
#[derive(Debug, Clone, PartialEq)]
pub enum Pricing {
    /// Every model the role asks has a price (the config's `[prices]` or the built-in table);
    /// `free`: every rate of every one is 0.
    Known { free: bool },
    /// No price for `model`: its runs are recorded at $0, which says nothing of their cost.
    Unknown { model: String },
}

impl Pricing {
    /// The pricing of `role`'s models under `config`: its `model`, and its `triage_model` where
    /// one is asked (never with an agent CLI). An agent CLI's own default model (no `model` set)
    /// reports each run's cost itself, so its records are priced.
    pub fn of(role: &Role, config: &Config) -> Self {
        let provider = &config.provider;
        let cli = provider.kind == ProviderKind::Command;
        let triage = role.settings.triage_model.clone().filter(|_| !cli);
        let mut free = true;
        for model in std::iter::once(role.settings.model(provider)).chain(triage) {
            if cli && model.is_empty() {
                free = false;
                continue;
            }
            match config.prices.price(&model) {
                Some(price) => free &= price.is_free(),
                None => return Self::Unknown { model },
            }
        }
        Self::Known { free }
    }

    /// Why no dollar figure is forecast, in words (`None`: it is).
    fn unknown_why(&self) -> Option<String> {
        match self {
            Self::Known { .. } => None,
            Self::Unknown { model } => Some(format!(
                "tabd knows no price for model {model} (no [prices.\"{model}\"] in the config, none built in), so its \
                 runs are recorded at $0 and no dollars are forecast; for a model that costs nothing (a local one) add \
                 [prices.\"{model}\"] with input = 0 and output = 0, else its prices (docs/cost.md)"
            )),
        }
    }
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
    /// Dollars: `None` (JSON `null`) when the price is unknown (`price_unknown` says why).
    pub usd_per_run: Option<f64>,
    pub requests_per_day: f64,
    pub usd_per_day: Option<f64>,
    /// 30 days of `usd_per_day`.
    pub usd_per_month: Option<f64>,
    /// The busiest day's runs at that cost.
    pub busiest_day_usd: Option<f64>,
    /// What its other runs (inbox, manual, watch, delegated) cost a day over the history read.
    pub other_usd_per_day: Option<f64>,
    /// Why no dollars are forecast: no price is known for the role's model (`None`: priced).
    pub price_unknown: Option<String>,
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

/// `role`'s forecast under `config` (its caps, its model's price) from `past` (its records,
/// oldest first) at `now`.
pub fn forecast(role: &Role, config: &Config, past: &[Past], now: DateTime<Utc>) -> Forecast {
    let (slots_per_day, busiest_day_slots) = slots(role, now);
    let pricing = Pricing::of(role, config);
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
    let (usd_per_run, requests_per_run, assumption) = per_run(&recent, &pricing);
    if slots_per_day > 0.0 {
        assumed.extend(assumption);
    }
    let runs_per_day = slots_per_day * (1.0 - skipped_share);
    let resolved = RoleLimits::resolve(role, &config.limits);
    let caps = Caps {
        max_cost_usd: resolved.max_cost_usd,
        daily_cost_budget_usd: resolved.daily_cost_budget_usd,
        max_runs_per_day: resolved.max_runs_per_day,
    };
    let price_unknown = pricing.unknown_why();
    // No price: the records' $0 are no figure, and neither is anything made of them.
    let usd = |x: f64| price_unknown.is_none().then_some(x);
    let mut f = Forecast {
        role: role.name.clone(),
        slots_per_day,
        busiest_day_slots,
        skipped_share,
        runs_per_day,
        requests_per_run,
        usd_per_run: usd(usd_per_run),
        requests_per_day: runs_per_day * requests_per_run,
        usd_per_day: usd(runs_per_day * usd_per_run),
        usd_per_month: usd(runs_per_day * usd_per_run * 30.0),
        busiest_day_usd: usd(f64::from(busiest_day_slots) * (1.0 - skipped_share) * usd_per_run),
        other_usd_per_day: usd(other_per_day(past, now)),
        price_unknown,
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

/// A run's dollars and requests: the medians of `recent` runs; with none, what is assumed, and
/// the sentence saying so.
fn per_run(recent: &[&&Past], pricing: &Pricing) -> (f64, f64, Option<String>) {
    if !recent.is_empty() {
        return (
            median(recent.iter().map(|p| p.cost_usd).collect()),
            median(recent.iter().map(|p| p.requests).collect()),
            None,
        );
    }
    let average = "(the stock typical weekday's average)";
    let requests = ASSUMED_REQUESTS_PER_RUN;
    let (usd, sentence) = match pricing {
        Pricing::Known { free: false } => (
            ASSUMED_USD_PER_RUN,
            format!("a run is assumed to cost ${ASSUMED_USD_PER_RUN} in {requests} requests {average}"),
        ),
        Pricing::Known { free: true } => (
            0.0,
            format!(
                "a run is assumed to take {requests} requests {average}, at $0: its model is priced at 0"
            ),
        ),
        Pricing::Unknown { .. } => (
            0.0,
            format!("a run is assumed to take {requests} requests {average}"),
        ),
    };
    (
        usd,
        requests,
        Some(format!("no scheduled run on record: {sentence}")),
    )
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
            *usd = usd.map(round_usd);
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
    let busiest_day = f.busiest_day_usd.zip(f.usd_per_run);
    if let (Some(budget), Some((busiest, per_run))) = (f.caps.daily_cost_budget_usd, busiest_day) {
        if busiest > budget {
            out.push(format!(
                "forecast {} on its busiest day ({busiest_runs:.0} runs at {} each) is over daily_cost_budget_usd {}: \
                 the role would stop for the day early; raise the budget or schedule it less often",
                dollars(busiest),
                dollars(per_run),
                dollars(budget)
            ));
        }
    }
    if busiest_runs.round() > f64::from(f.caps.max_runs_per_day) {
        out.push(format!(
            "forecast {busiest_runs:.0} runs on its busiest day is over max_runs_per_day {}: later slots that day \
             would not run; raise it or schedule the role less often",
            f.caps.max_runs_per_day
        ));
    }
    if let (Some(cap), Some(per_run)) = (f.caps.max_cost_usd, f.usd_per_run) {
        if f.basis.recent_runs > 0 && per_run > cap {
            out.push(format!(
                "its recent runs cost {} (median), over max_cost_usd {}: most runs end at the cap",
                dollars(per_run),
                dollars(cap)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(frontmatter: &str) -> Role {
        let text = format!("---\n{frontmatter}\n---\n# R\n## Schedule\nevery hour\n");
        let ctx =
            crate::setup::role::LoadContext::new(chrono_tz::UTC, crate::base::environment::Env::default());
        let set =
            crate::setup::role::RoleSet::from_texts([("r".to_string(), "roles/r.md".into(), Ok(text))], &ctx);
        set.roles["r"].clone()
    }

    fn config(text: &str) -> Config {
        let env = crate::base::environment::Env::default();
        crate::setup::config::parse(text, std::path::Path::new("config.toml"), &env, None).unwrap()
    }

    /// Issue 48: the price of every model a role asks decides whether dollars are forecast — its
    /// triage model's too — and a model priced at 0 forecasts $0 with nothing on record.
    #[test]
    fn a_role_is_priced_only_when_each_of_its_models_is() {
        let local =
            "[provider]\nkind = \"openai\"\nmodel = \"qwen\"\n[prices.\"qwen\"]\ninput = 0\noutput = 0\n";
        let c = config(local);
        assert_eq!(
            Pricing::of(&role("enabled: true"), &c),
            Pricing::Known { free: true }
        );
        assert_eq!(
            Pricing::of(&role("triage_model: tiny"), &c),
            Pricing::Unknown { model: "tiny".into() }
        );
        assert_eq!(
            Pricing::of(&role("model: claude-sonnet-4-5"), &config("")),
            Pricing::Known { free: false }
        );
        let f = forecast(&role("enabled: true"), &c, &[], Utc::now());
        assert_eq!((f.usd_per_run, f.usd_per_month), (Some(0.0), Some(0.0)));
        assert!(f.price_unknown.is_none() && f.runs_per_day > 20.0, "{f:?}");
        assert!(
            f.basis.assumed[1].contains("at $0: its model is priced at 0"),
            "{f:?}"
        );
        let f = forecast(&role("model: mystery"), &c, &[], Utc::now());
        assert_eq!((f.usd_per_run, f.usd_per_day), (None, None));
        assert!(f.price_unknown.unwrap().contains("model mystery"));
    }

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
