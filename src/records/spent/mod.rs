//! What the run records say a day cost, so no spend is ever forgotten (issue 49, item 7).
//!
//! `.tabd/state.json` keeps today's tokens, dollars and runs per role; they are what the budgets
//! and `max_runs_per_day` are checked against. But state can lose a run: a garbled file is set
//! aside and tabd starts from empty state, and a run whose state write could not be made (another
//! process held `.tabd/state.lock` past its wait) still wrote its record. The run records
//! (`.tabd/runs/*.jsonl`) are the other witness of every run that spent anything. So state's day
//! is never below what the records of that day add up to: `reconcile` raises each counter to the
//! records' sum (it never lowers one: state may know spends whose record is not written yet).
//!
//! A delegated run's spend counts in its own role's day, in its parent's role's day (as a parent
//! counts its children's spend when it ends) and once in the global day.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate};
use chrono_tz::Tz;
use serde_json::Value;

use crate::base::vault::VaultError;
use crate::base::vault::{layout, Vault, VaultPath};
use crate::records::runlog::read::each_record;
use crate::records::state::{Attempts, State, StateStore};

/// One day's spend as the records say it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spent {
    /// Per role: tokens, dollars, runs.
    pub roles: BTreeMap<String, (u64, f64, u32)>,
    pub tokens: u64,
    pub cost_usd: f64,
}

/// One record, as far as spending goes.
struct Spend {
    run_id: String,
    role: String,
    parent: Option<String>,
    tokens: u64,
    cost_usd: f64,
    /// It counts as a run of its role (not a skip, not an outage that spent nothing).
    counts: bool,
}

fn seen(v: &Value) -> Option<Spend> {
    let usage = v.get("usage")?;
    let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
    let tokens = n("input_tokens") + n("output_tokens") + n("cache_read_tokens") + n("cache_write_tokens");
    let cost_usd = usage
        .get("cost_usd")
        .and_then(Value::as_f64)
        .filter(|c| c.is_finite() && *c >= 0.0)
        .unwrap_or(0.0);
    let outcome = v.get("outcome").and_then(Value::as_str).unwrap_or("");
    let ended = v.get("ended").and_then(Value::as_str);
    // A run that never reached the model (an outage) or that tabd's stop cut short does not use
    // up max_runs_per_day unless it spent tokens (as `finish` counts it).
    let nobodys = outcome == "failed" && matches!(ended, Some("paused" | "stopped"));
    Some(Spend {
        run_id: v.get("run_id")?.as_str()?.to_string(),
        role: v.get("role")?.as_str()?.to_string(),
        parent: v
            .get("trigger")
            .and_then(|t| t.get("parent_run_id"))
            .and_then(Value::as_str)
            .map(str::to_string),
        tokens,
        cost_usd,
        counts: outcome != "skipped" && (!nobodys || tokens > 0),
    })
}

/// The records of the runs that ended on `day` (in `tz`): today's file and the day before's (a
/// run that began before midnight is in the file of the day it began).
fn records_of(vault: &Vault, tz: Tz, day: NaiveDate) -> Vec<Value> {
    let mut out = Vec::new();
    for d in [day.pred_opt(), Some(day)].into_iter().flatten() {
        let Ok(path) = VaultPath::parse(&layout::run_records(d), false) else {
            continue;
        };
        // A file that cannot be read adds nothing: state keeps what it has.
        let _read = each_record(vault, &path, |r| out.push(r), |_| {});
    }
    out.retain(|r| {
        r.get("ended_at")
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .is_some_and(|t| t.with_timezone(&tz).date_naive() == day)
    });
    out
}

/// What the records of `day` say was spent.
pub fn of_day(vault: &Vault, tz: Tz, day: NaiveDate) -> Spent {
    let runs: Vec<Spend> = records_of(vault, tz, day).iter().filter_map(seen).collect();
    let role_of: BTreeMap<&str, &str> = runs
        .iter()
        .map(|r| (r.run_id.as_str(), r.role.as_str()))
        .collect();
    let mut spent = Spent::default();
    for r in &runs {
        spent.tokens += r.tokens;
        spent.cost_usd += r.cost_usd;
        let own = spent.roles.entry(r.role.clone()).or_default();
        own.0 += r.tokens;
        own.1 += r.cost_usd;
        own.2 += u32::from(r.counts);
        // A child's spend is its parent role's too.
        if let Some(parent) = r.parent.as_deref().and_then(|p| role_of.get(p)) {
            let p = spent.roles.entry((*parent).to_string()).or_default();
            p.0 += r.tokens;
            p.1 += r.cost_usd;
        }
    }
    spent
}

/// Raises `state`'s counters of `day` to what `spent` says (never lowers one). Returns whether
/// anything was raised.
pub fn reconcile(state: &mut State, day: NaiveDate, spent: &Spent) -> bool {
    let mut raised = false;
    let mut raise_u64 = |v: &mut u64, to: u64| {
        if to > *v {
            *v = to;
            raised = true;
        }
    };
    state.global.roll_day(day);
    raise_u64(&mut state.global.tokens_today, spent.tokens);
    for (role, (tokens, _, _)) in &spent.roles {
        let r = state.role(role);
        r.roll_day(day);
        raise_u64(&mut r.tokens_today, *tokens);
    }
    // Dollars and run counts, the same way.
    let mut more = false;
    if spent.cost_usd > state.global.cost_today_usd + 1e-9 {
        state.global.cost_today_usd = spent.cost_usd;
        more = true;
    }
    for (role, (_, cost, runs)) in &spent.roles {
        let r = state.role(role);
        if *cost > r.cost_today_usd + 1e-9 {
            r.cost_today_usd = *cost;
            more = true;
        }
        if *runs > r.runs_today {
            r.runs_today = *runs;
            more = true;
        }
    }
    raised || more
}

/// Failed attempts of inbox notes the records of the days up to `day` tell, for a state that
/// lost its own: per role, note path → failed runs that handled it and did not move it (a run
/// that was nobody's fault — paused, stopped — counts none). Only notes still in their inbox
/// count; the rest were handled since.
pub fn attempts(
    vault: &Vault,
    tz: Tz,
    day: NaiveDate,
    days: u32,
) -> BTreeMap<String, BTreeMap<String, Attempts>> {
    let mut out: BTreeMap<String, BTreeMap<String, Attempts>> = BTreeMap::new();
    let mut d = day;
    let mut records = Vec::new();
    for _ in 0..days {
        records.extend(records_of(vault, tz, d));
        match d.pred_opt() {
            Some(p) => d = p,
            None => break,
        }
    }
    for r in &records {
        let failed = r.get("outcome").and_then(Value::as_str) == Some("failed")
            && r.get("ended").and_then(Value::as_str).is_none();
        let (Some(role), Some(notes)) = (
            r.get("role").and_then(Value::as_str),
            r.get("trigger")
                .and_then(|t| t.get("notes"))
                .and_then(Value::as_array),
        ) else {
            continue;
        };
        if !failed {
            continue;
        }
        for note in notes.iter().filter_map(Value::as_str) {
            let still_there = VaultPath::parse(note, false).is_ok_and(|p| vault.exists(&p));
            if still_there {
                let a = out
                    .entry(role.to_string())
                    .or_default()
                    .entry(note.to_string())
                    .or_default();
                a.count += 1;
                a.last_error = r.get("error").and_then(Value::as_str).unwrap_or("").to_string();
            }
        }
    }
    out
}

/// Raises today's counters (tokens, dollars, runs; per role and in all) in `store` to what today's
/// run records say was spent, and — when state knows no role at all (set aside, deleted) — takes
/// the inbox notes' failed attempts from the records of the last week. Never lowers anything.
/// `Ok(true)`: something was raised.
pub fn count_again(store: &StateStore, tz: Tz, now: DateTime<chrono::Utc>) -> Result<bool, VaultError> {
    let today = now.with_timezone(&tz).date_naive();
    let spent = of_day(store.vault(), tz, today);
    let attempts = attempts(store.vault(), tz, today, 7);
    store.update(|s| {
        let lost = s.roles.is_empty();
        let mut raised = reconcile(s, today, &spent);
        if lost {
            for (role, notes) in &attempts {
                for (note, a) in notes {
                    s.role(role)
                        .attempts
                        .entry(note.clone())
                        .or_insert_with(|| a.clone());
                    raised = true;
                }
            }
        }
        raised
    })
}

#[cfg(test)]
mod tests;
