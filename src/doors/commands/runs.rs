//! `tabd runs [--role R] [--since DATE] [--json]` (DESIGN §19): recent runs, newest first, with
//! what each changed — the list `tabd undo` works from.

use chrono::NaiveDate;
use serde_json::{json, Value};

use super::{CliError, Workspace};
use crate::records::{journal, runlog};

/// One run as listed.
struct Listed {
    run_id: String,
    role: String,
    started_at: String,
    trigger: String,
    outcome: String,
    /// `paused` or `stopped`: a failed run that was nobody's fault (shown instead of `failed`);
    /// `waiting`: the first part of a run that waits for the person (shown instead of `ok`).
    ended: Option<String>,
    cost_usd: f64,
    changed: Vec<String>,
}

pub fn run(ws: &Workspace, role: Option<&str>, since: Option<&str>, json: bool) -> Result<u8, CliError> {
    let since = match since {
        Some(d) => Some(
            NaiveDate::parse_from_str(d, "%Y-%m-%d")
                .map_err(|_| CliError::usage(format!("--since takes a date like 2026-11-23, not `{d}`")))?,
        ),
        None => None,
    };
    // Every journal read once: what each run changed, and the changes no run record names.
    let mut journals: std::collections::HashMap<String, journal::RunChanges> = journal::run_ids(&ws.vault)
        .into_iter()
        .filter_map(|id| {
            journal::load(&ws.vault, &id, None)
                .ok()
                .map(|e| (id.to_string(), e))
        })
        .collect();
    let mut runs = records(ws, since, &mut journals);
    // Journaled changes that no run record names: approved calls, undos, a run that crashed.
    for (id, e) in journals {
        if since.is_some_and(|d| e.started_at.date_naive() < d) {
            continue;
        }
        runs.push(Listed {
            run_id: id,
            role: e.role.clone(),
            started_at: e.started_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            trigger: e.trigger.clone(),
            outcome: if e.left.is_some() {
                "ok".into()
            } else {
                "unfinished".into()
            },
            ended: None,
            cost_usd: 0.0,
            changed: e.changed().iter().map(|s| s.to_string()).collect(),
        });
    }
    runs.retain(|r| role.is_none_or(|want| r.role == want));
    runs.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(b.run_id.cmp(&a.run_id)));
    if json {
        print_json(&runs);
        return Ok(0);
    }
    if runs.is_empty() {
        println!(
            "No runs recorded{}.",
            since.map_or(String::new(), |d| format!(" since {d}"))
        );
    }
    print_table(&runs, ws.config.timezone);
    Ok(0)
}

/// One line a run, each column as wide as its widest entry (a long role name, and the run id
/// that holds it, push the rest along for every line; the cost is right-aligned).
fn print_table(runs: &[Listed], tz: chrono_tz::Tz) {
    let rows: Vec<[String; 7]> = runs
        .iter()
        .map(|r| {
            let started = chrono::DateTime::parse_from_rfc3339(&r.started_at).map_or_else(
                |_| r.started_at.clone(),
                |t| crate::base::text::shown(t.with_timezone(&chrono::Utc), tz),
            );
            let changed = match r.changed.len() {
                0 => "no files changed".to_string(),
                n if n <= 3 => r.changed.join(", "),
                n => format!("{} and {} more", r.changed[..3].join(", "), n - 3),
            };
            [
                started,
                r.run_id.clone(),
                r.role.clone(),
                r.trigger.clone(),
                r.ended.clone().unwrap_or_else(|| r.outcome.clone()),
                crate::base::cost::dollars(r.cost_usd),
                changed,
            ]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|row| row[i].chars().count()).max().unwrap_or(0);
    let w: Vec<usize> = (0..7).map(width).collect();
    for [started, id, role, trigger, ended, cost, changed] in &rows {
        println!(
            "{started:<w0$}  {id:<w1$}  {role:<w2$}  {trigger:<w3$}  {ended:<w4$}  {cost:>w5$}  {changed}",
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4],
            w5 = w[5],
        );
    }
}

/// `{"runs": [...]}`, as DESIGN §19 says, each with its `ended` where the record has one.
fn print_json(runs: &[Listed]) {
    let list: Vec<Value> = runs
        .iter()
        .map(|r| {
            let mut run = json!({"run_id": r.run_id, "role": r.role, "started_at": r.started_at,
                   "trigger": r.trigger, "outcome": r.outcome, "cost_usd": r.cost_usd, "changed": r.changed});
            // As the JSONL says it: `outcome` keeps its four values, `ended` says `waiting`,
            // `paused` or `stopped`.
            if let Some(ended) = &r.ended {
                run["ended"] = json!(ended);
            }
            run
        })
        .collect();
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({ "runs": list })).unwrap_or_default()
    );
}

/// The run records of the machine log (`.tabd/runs/*.jsonl`), skips left out; each record's
/// journal is taken out of `journals`. Each day's file is read line by line (`runlog::read`):
/// a line that is not a record, or is over the cap, is named on stderr and passed over.
fn records(
    ws: &Workspace,
    since: Option<NaiveDate>,
    journals: &mut std::collections::HashMap<String, journal::RunChanges>,
) -> Vec<Listed> {
    let Ok(dir) = crate::base::vault::VaultPath::parse(crate::base::vault::layout::RUNS, false) else {
        return Vec::new();
    };
    let files = ws.vault.list(&dir).map(|l| l.entries).unwrap_or_default();
    let mut out = Vec::new();
    for f in files {
        let name = f.path.file_name();
        let Some(day) = name.strip_suffix(".jsonl") else {
            continue;
        };
        if let (Some(since), Ok(day)) = (since, NaiveDate::parse_from_str(day, "%Y-%m-%d")) {
            if day < since {
                continue;
            }
        }
        let read = runlog::read::each_record(
            &ws.vault,
            &f.path,
            |v| {
                if let Some(listed) = listed(&v, journals) {
                    out.push(listed);
                }
            },
            |unread| eprintln!("warning: {unread}"),
        );
        if let Err(e) = read {
            eprintln!("warning: cannot read the run records {}: {e}", f.path);
        }
    }
    out
}

/// One run record as listed (`None`: a skip); its journal is taken out of `journals`.
fn listed(
    v: &Value,
    journals: &mut std::collections::HashMap<String, journal::RunChanges>,
) -> Option<Listed> {
    if v["outcome"] == "skipped" {
        return None;
    }
    let run_id = v["run_id"].as_str().unwrap_or("").to_string();
    let changed = journals
        .remove(&run_id)
        .map(|e| e.changed().iter().map(|s| s.to_string()).collect())
        .unwrap_or_default();
    Some(Listed {
        run_id,
        role: v["role"].as_str().unwrap_or("").to_string(),
        started_at: v["started_at"].as_str().unwrap_or("").to_string(),
        trigger: v["trigger"]["kind"].as_str().unwrap_or("").to_string(),
        outcome: v["outcome"].as_str().unwrap_or("").to_string(),
        ended: v["ended"].as_str().map(str::to_string),
        cost_usd: v["usage"]["cost_usd"].as_f64().unwrap_or(0.0),
        changed,
    })
}
