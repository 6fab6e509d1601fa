//! `tabd runs [--role R] [--since DATE] [--json]` (docs/spec.md §19): recent runs, newest first, with
//! what each changed — the list `tabd undo` works from. A run's parts are listed under it: the
//! second part of a run that waited for the person (the same id), the calls of it the person
//! approved (each ran on its own, with its own journal: `journal::approved`) and the runs it
//! delegated to. The JSON stays one flat list, newest first, each part naming its run.
//!
//! Every field printed comes from a record someone may have written by hand: each cell has its
//! control characters replaced, is one line, and has a bounded width (a 70,000-character role
//! name made the column width a formatting argument past its limit, and the command panicked).

use std::collections::HashMap;

use chrono::NaiveDate;
use serde_json::{json, Value};

use super::{CliError, Workspace};
use crate::records::{journal, runlog};

/// Widest cells, in characters: a longer field is cut with `…` (the JSON keeps it whole).
const MAX_RUN_ID: usize = 64;
const MAX_ROLE: usize = 40;
const MAX_WORD: usize = 16;
const MAX_PATH: usize = 80;
const MAX_CHANGED: usize = 200;
/// Deepest indentation of a part under its run (deeper parts line up with it).
const MAX_DEPTH: usize = 4;

/// What a part of a run is, beside the run it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// The second (or later) part of a run that waited for the person: the same run id.
    Resumed,
    /// A call of the run that the person approved: it ran later, on its own.
    Approved,
    /// A run it delegated a task to (`delegate`).
    Delegated,
}

impl Part {
    fn as_str(self) -> &'static str {
        match self {
            Self::Resumed => "resumed",
            Self::Approved => "approved",
            Self::Delegated => "delegated",
        }
    }
}

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
    /// The run this one is a part of, and which kind of part (`None`: a run of its own).
    parent: Option<(String, Part)>,
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
    let mut journals: HashMap<String, journal::RunChanges> = journal::run_ids(&ws.vault)
        .into_iter()
        .filter_map(|id| {
            journal::load(&ws.vault, &id, None)
                .ok()
                .map(|e| (id.to_string(), e))
        })
        .collect();
    let ledger = crate::records::state::StateStore::new(ws.vault.clone())
        .peek()
        .approvals;
    // Each approved call's journal, and the run that asked for it first.
    let approved: HashMap<String, String> =
        journal::approved::calls(&journals.values().collect::<Vec<_>>(), &ledger)
            .into_iter()
            .filter_map(|c| Some((c.run_id.to_string(), c.asked_by.into_iter().next()?)))
            .collect();
    let mut runs = records(ws, since, &mut journals);
    mark_resumed(&mut runs);
    // Journaled changes that no run record names: approved calls, undos, a run that crashed.
    for (id, e) in journals {
        if since.is_some_and(|d| e.started_at.date_naive() < d) {
            continue;
        }
        runs.push(Listed {
            parent: approved.get(&id).map(|asked| (asked.clone(), Part::Approved)),
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
        say!(
            "No runs recorded{}.",
            since.map_or(String::new(), |d| format!(" since {d}"))
        );
        return Ok(0);
    }
    print_table(&runs, &in_groups(&runs), ws.config.timezone);
    Ok(0)
}

/// A run's later records (the same id: its second part, after the person decided) are parts of
/// its first.
fn mark_resumed(runs: &mut [Listed]) {
    let mut first: HashMap<&str, &str> = HashMap::new();
    for r in runs.iter() {
        let at = first.entry(&r.run_id).or_insert(&r.started_at);
        if r.started_at.as_str() < *at {
            *at = &r.started_at;
        }
    }
    let first: HashMap<String, String> = first
        .into_iter()
        .map(|(id, at)| (id.to_string(), at.to_string()))
        .collect();
    let mut head_seen: HashMap<String, bool> = HashMap::new();
    for r in runs.iter_mut() {
        let is_first = first.get(&r.run_id) == Some(&r.started_at);
        let seen = head_seen.entry(r.run_id.clone()).or_insert(false);
        if is_first && !*seen {
            *seen = true;
        } else {
            r.parent = Some((r.run_id.clone(), Part::Resumed));
        }
    }
}

/// The rows in the order the table shows them, each with how deep it sits: every run newest
/// first, its parts under it oldest first (and theirs under them). A part whose run is not
/// listed (older, another role) stands on its own; parts that name each other round in a circle
/// (a hand-made record) are listed once each, never followed again.
fn in_groups(runs: &[Listed]) -> Vec<(usize, usize)> {
    // The row a run id stands for: its first part.
    let mut head: HashMap<&str, usize> = HashMap::new();
    for (i, r) in runs.iter().enumerate() {
        if !matches!(r.parent, Some((_, Part::Resumed))) {
            head.entry(&r.run_id).or_insert(i);
        }
    }
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); runs.len()];
    let mut roots = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        match r.parent.as_ref().and_then(|(p, _)| head.get(p.as_str())) {
            Some(&p) if p != i => children[p].push(i),
            _ => roots.push(i),
        }
    }
    // `runs` is newest first: parts read oldest first under their run.
    for c in &mut children {
        c.reverse();
    }
    let mut seen = vec![false; runs.len()];
    let mut out = Vec::with_capacity(runs.len());
    let unreached: Vec<usize> = (0..runs.len()).collect();
    for start in roots.into_iter().chain(unreached) {
        let mut stack = vec![(start, 0)];
        while let Some((i, depth)) = stack.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            out.push((i, depth));
            stack.extend(children[i].iter().rev().map(|&c| (c, depth + 1)));
        }
    }
    out
}

/// A record's field as a table cell: every control character (escape sequences, bell, line
/// breaks) and bidirectional override replaced, on one line, at most `max` characters.
fn cell(text: &str, max: usize) -> String {
    const BIDI: [char; 11] = [
        '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}',
        '\u{2067}', '\u{2068}', '\u{2069}',
    ];
    let plain: String = text
        .chars()
        .map(|c| if BIDI.contains(&c) { '\u{fffd}' } else { c })
        .collect();
    crate::base::text::one_line(&plain, max)
}

/// One line a run under a header, each column as wide as its widest entry (bounded: see
/// `cell`); a run's parts indented under it, `└` and what they are.
fn print_table(runs: &[Listed], order: &[(usize, usize)], tz: chrono_tz::Tz) {
    let head = ["started", "run", "role", "trigger", "outcome", "cost", "changed"].map(String::from);
    let mut rows: Vec<[String; 7]> = vec![head];
    for &(i, depth) in order {
        let r = &runs[i];
        let started = chrono::DateTime::parse_from_rfc3339(&r.started_at).map_or_else(
            |_| cell(&r.started_at, 25),
            |t| crate::base::text::shown(t.with_timezone(&chrono::Utc), tz),
        );
        let run = match (&r.parent, depth) {
            (_, 0) => cell(&r.run_id, MAX_RUN_ID),
            (Some((_, Part::Resumed)), d) => format!(
                "{}└ {}",
                "  ".repeat(d.min(MAX_DEPTH).saturating_sub(1)),
                Part::Resumed.as_str()
            ),
            (part, d) => format!(
                "{}└ {} {}",
                "  ".repeat(d.min(MAX_DEPTH).saturating_sub(1)),
                part.as_ref().map_or("", |(_, p)| p.as_str()),
                cell(&r.run_id, MAX_RUN_ID)
            ),
        };
        let changed = match (r.changed.len(), &r.parent) {
            (0, Some((_, Part::Resumed))) => String::new(),
            (0, _) => "no files changed".to_string(),
            (n, _) => {
                let shown: Vec<String> = r.changed.iter().take(3).map(|p| cell(p, MAX_PATH)).collect();
                let more = if n > 3 {
                    format!(" and {} more", n - 3)
                } else {
                    String::new()
                };
                cell(&format!("{}{more}", shown.join(", ")), MAX_CHANGED)
            }
        };
        rows.push([
            started,
            run,
            cell(&r.role, MAX_ROLE),
            cell(&r.trigger, MAX_WORD),
            cell(r.ended.as_deref().unwrap_or(&r.outcome), MAX_WORD),
            cell(&crate::base::cost::dollars(r.cost_usd), MAX_WORD),
            changed,
        ]);
    }
    let width = |i: usize| rows.iter().map(|row| row[i].chars().count()).max().unwrap_or(0);
    let w: Vec<usize> = (0..7).map(width).collect();
    for [started, id, role, trigger, ended, cost, changed] in &rows {
        let line = format!(
            "{started:<w0$}  {id:<w1$}  {role:<w2$}  {trigger:<w3$}  {ended:<w4$}  {cost:>w5$}  {changed}",
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4],
            w5 = w[5],
        );
        say!("{}", line.trim_end());
    }
}

/// `{"runs": [...]}`, as docs/spec.md §19 says, newest first, each with its `ended` where the record
/// has one, and a part of a run with the run's id (`parent`) and what part it is (`part`:
/// `resumed`, `approved`, `delegated`).
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
            if let Some((parent, part)) = &r.parent {
                run["parent"] = json!(parent);
                run["part"] = json!(part.as_str());
            }
            run
        })
        .collect();
    say!(
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
    journals: &mut HashMap<String, journal::RunChanges>,
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
            |unread| say_err!("warning: {}", cell(&unread.to_string(), 400)),
        );
        if let Err(e) = read {
            say_err!("warning: cannot read the run records {}: {e}", f.path);
        }
    }
    out
}

/// One run record as listed (`None`: a skip); its journal is taken out of `journals`.
fn listed(v: &Value, journals: &mut HashMap<String, journal::RunChanges>) -> Option<Listed> {
    if v["outcome"] == "skipped" {
        return None;
    }
    let run_id = v["run_id"].as_str().unwrap_or("").to_string();
    let changed = journals
        .remove(&run_id)
        .map(|e| e.changed().iter().map(|s| s.to_string()).collect())
        .unwrap_or_default();
    Some(Listed {
        role: v["role"].as_str().unwrap_or("").to_string(),
        started_at: v["started_at"].as_str().unwrap_or("").to_string(),
        trigger: v["trigger"]["kind"].as_str().unwrap_or("").to_string(),
        outcome: v["outcome"].as_str().unwrap_or("").to_string(),
        ended: v["ended"].as_str().map(str::to_string),
        cost_usd: v["usage"]["cost_usd"].as_f64().unwrap_or(0.0),
        changed,
        parent: v["trigger"]["parent_run_id"]
            .as_str()
            .filter(|p| *p != run_id)
            .map(|p| (p.to_string(), Part::Delegated)),
        run_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, at: &str, parent: Option<(&str, Part)>) -> Listed {
        Listed {
            run_id: id.into(),
            role: "r".into(),
            started_at: format!("2026-11-24T{at}Z"),
            trigger: "schedule".into(),
            outcome: "ok".into(),
            ended: None,
            cost_usd: 0.0,
            changed: Vec::new(),
            parent: parent.map(|(p, part)| (p.to_string(), part)),
        }
    }

    /// Issue 48: a run's parts sit under it, oldest first, theirs under them; a part whose run
    /// is not listed stands alone; a circle of hand-made records is listed once each.
    #[test]
    fn parts_are_grouped_under_their_run_and_a_circle_ends() {
        let mut runs = vec![
            row("b", "10:00:00", None),
            row("a", "09:00:00", None),
            row("a", "09:05:00", None),
            row("call", "09:03:00", Some(("a", Part::Approved))),
            row("child", "09:01:00", Some(("a", Part::Delegated))),
            row("grandchild", "09:02:00", Some(("child", Part::Delegated))),
            row("orphan", "08:00:00", Some(("gone", Part::Delegated))),
            row("x", "07:00:00", Some(("y", Part::Delegated))),
            row("y", "07:00:01", Some(("x", Part::Delegated))),
        ];
        mark_resumed(&mut runs);
        assert_eq!(runs[2].parent, Some(("a".to_string(), Part::Resumed)));
        assert_eq!(runs[1].parent, None, "the first part is the run");
        runs.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(b.run_id.cmp(&a.run_id)));
        let shown: Vec<(String, usize)> = in_groups(&runs)
            .into_iter()
            .map(|(i, depth)| (runs[i].run_id.clone(), depth))
            .collect();
        let want = [
            ("b", 0),
            ("a", 0),
            ("child", 1),
            ("grandchild", 2),
            ("call", 1),
            ("a", 1),
            ("orphan", 0),
            ("y", 0),
            ("x", 1),
        ];
        assert_eq!(
            shown,
            want.map(|(id, d)| (id.to_string(), d)),
            "every row once, each part under its run"
        );
    }

    /// A record's fields reach the terminal without its escape sequences, on one line, bounded.
    #[test]
    fn a_cell_has_no_control_characters_and_a_bounded_width() {
        let hostile = format!(
            "\u{1b}]52;c;aGk=\u{7}\u{1b}[2J\r\nrole\u{202e}{}",
            "x".repeat(70_000)
        );
        let c = cell(&hostile, MAX_ROLE);
        assert!(!c.chars().any(|ch| ch.is_control() || ch == '\u{202e}'), "{c:?}");
        assert_eq!(c.chars().count(), MAX_ROLE + 1, "cut, with its `…`");
    }
}
