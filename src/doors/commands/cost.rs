//! `tabd cost [--json]` (docs/spec.md §25): each role's expected requests and dollars a day and a month
//! from its schedule, its wake gate's history and its recent runs (`records::forecast`), beside
//! its caps. The JSON shape is documented in docs/cost.md.

use chrono::Utc;
use serde_json::json;

use super::{CliError, Workspace};
use crate::base::cost::{dollars, round_usd};
use crate::records::forecast::{self, Forecast, HISTORY_DAYS};

pub fn run(ws: &Workspace, json: bool) -> Result<u8, CliError> {
    let now = Utc::now();
    let history = forecast::history(&ws.vault, now);
    let forecasts: Vec<Forecast> = ws
        .roles
        .runnable()
        .map(|r| {
            let past = history.get(&r.name).map_or(&[][..], Vec::as_slice);
            forecast::forecast(r, &ws.config, past, now)
        })
        .collect();
    let total = Total::of(&forecasts);
    if json {
        let out = json!({
            "history_days": HISTORY_DAYS,
            "roles": forecasts,
            "total": {
                "requests_per_day": total.requests_per_day,
                "usd_per_day": total.usd_per_day,
                "usd_per_month": total.usd_per_month,
                "other_usd_per_day": total.other_usd_per_day,
                "global_daily_cost_budget_usd": ws.config.limits.global_daily_cost_budget_usd,
                "price_unknown": total.price_unknown,
            },
        });
        say!("{out:#}");
        return Ok(0);
    }
    print_table(&forecasts, &total);
    say!();
    say!(
        "Scheduled runs only, from each schedule's slots over the coming week, the share its wake gate skipped \
         and the median of its last {} scheduled runs (records of the last {HISTORY_DAYS} days); \
         other runs (inbox notes, fire, watch, delegated) as they cost a day lately.",
        forecast::RECENT_RUNS
    );
    // Roles of one model share a reason: said once, for all of them.
    let mut unknown: Vec<(&str, Vec<&str>)> = Vec::new();
    for f in &forecasts {
        if let Some(why) = f.price_unknown.as_deref() {
            match unknown.iter_mut().find(|(w, _)| *w == why) {
                Some((_, roles)) => roles.push(&f.role),
                None => unknown.push((why, vec![&f.role])),
            }
        }
    }
    for (why, roles) in unknown {
        say!("  {}: price unknown — {why}", roles.join(", "));
    }
    for f in &forecasts {
        for a in &f.basis.assumed {
            say!("  {}: assumed — {a}", f.role);
        }
        for o in &f.over {
            say!("  {}: warning — {o}", f.role);
        }
    }
    let a_day = total.usd_per_day.zip(total.other_usd_per_day).map(|(s, o)| s + o);
    if let (Some(b), Some(a_day)) = (ws.config.limits.global_daily_cost_budget_usd, a_day) {
        if a_day > b {
            say!(
                "  all roles: warning — forecast {} a day is over global_daily_cost_budget_usd {}",
                dollars(a_day),
                dollars(b)
            );
        }
    }
    Ok(0)
}

/// All roles together. Dollars are `None` when a role's price is unknown: a sum without it
/// would read as the whole.
struct Total {
    requests_per_day: f64,
    usd_per_day: Option<f64>,
    usd_per_month: Option<f64>,
    other_usd_per_day: Option<f64>,
    /// The roles whose price is unknown.
    price_unknown: Vec<String>,
}

impl Total {
    fn of(forecasts: &[Forecast]) -> Self {
        let sum =
            |f: fn(&Forecast) -> Option<f64>| forecasts.iter().map(f).sum::<Option<f64>>().map(round_usd);
        Self {
            requests_per_day: (forecasts.iter().map(|f| f.requests_per_day).sum::<f64>() * 1000.0).round()
                / 1000.0,
            usd_per_day: sum(|f| f.usd_per_day),
            usd_per_month: sum(|f| f.usd_per_month),
            other_usd_per_day: sum(|f| f.other_usd_per_day),
            price_unknown: forecasts
                .iter()
                .filter(|f| f.price_unknown.is_some())
                .map(|f| f.role.clone())
                .collect(),
        }
    }
}

/// Dollars as the table shows them: `unknown` where no price is known.
fn shown_usd(usd: Option<f64>) -> String {
    usd.map_or_else(|| "unknown".to_string(), dollars)
}

/// The caps, in a few words: `$0.50 a run · $2.00 a day · 48 runs a day`.
fn caps(f: &Forecast) -> String {
    let mut parts = Vec::new();
    if let Some(c) = f.caps.max_cost_usd {
        parts.push(format!("{} a run", dollars(c)));
    }
    if let Some(c) = f.caps.daily_cost_budget_usd {
        parts.push(format!("{} a day", dollars(c)));
    }
    parts.push(format!("{} runs a day", f.caps.max_runs_per_day));
    parts.join(" · ")
}

fn print_table(forecasts: &[Forecast], total: &Total) {
    let head = [
        "role",
        "slots/day",
        "skipped",
        "runs/day",
        "requests/run",
        "$/run",
        "requests/day",
        "$/day",
        "$/month",
        "other $/day",
        "caps",
    ];
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for f in forecasts {
        let assumed = if f.basis.recent_runs == 0 { " *" } else { "" };
        rows.push(vec![
            f.role.clone(),
            format!("{:.1}", f.slots_per_day),
            if f.basis.scheduled_slots == 0 {
                "—".into()
            } else {
                format!("{:.0}%", f.skipped_share * 100.0)
            },
            format!("{:.1}", f.runs_per_day),
            format!("{:.1}{assumed}", f.requests_per_run),
            format!("{}{assumed}", shown_usd(f.usd_per_run)),
            format!("{:.1}", f.requests_per_day),
            shown_usd(f.usd_per_day),
            shown_usd(f.usd_per_month),
            shown_usd(f.other_usd_per_day),
            caps(f),
        ]);
    }
    rows.push(vec![
        "all".into(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        format!("{:.1}", total.requests_per_day),
        shown_usd(total.usd_per_day),
        shown_usd(total.usd_per_month),
        shown_usd(total.other_usd_per_day),
        String::new(),
    ]);
    let widths: Vec<usize> = (0..head.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| match i {
                0 | 10 => format!("{c:<w$}"),
                _ => format!("{c:>w$}"),
            })
            .collect();
        say!("{}", cells.join("  ").trim_end());
    }
}
