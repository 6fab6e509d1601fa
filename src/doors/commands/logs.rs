//! `tabd logs [ROLE] [--date DAY | --since DAY] [-n N] [-f]`: the daily log — every run's
//! section and the one-line events — or only one role's (its runs, its events, and the runs
//! other roles delegated to it); the last N entries; with `-f`, what is appended next, as it
//! comes (like `tail -f`).

use std::time::Duration;

use chrono::NaiveDate;

use super::fire::runnable_role;
use super::{CliError, Workspace};
use crate::base::vault::VaultPath;

/// How often `-f` looks at the file (a person reading along does not need it faster).
const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// What to show.
#[derive(Debug, Default, Clone)]
pub struct Options {
    pub role: Option<String>,
    /// One day (`--date`), or every day from one on (`--since`); today when neither.
    pub date: Option<String>,
    pub since: Option<String>,
    /// Only the last N entries (sections and event lines).
    pub last: Option<usize>,
    pub follow: bool,
}

pub fn run(ws: &Workspace, o: &Options) -> Result<u8, CliError> {
    let who = match &o.role {
        Some(name) => Some(runnable_role(ws, name)?.display_name.clone()),
        None => None,
    };
    let log = crate::records::runlog::RunLog::new(ws.vault.clone(), ws.config.timezone);
    let today = chrono::Utc::now().with_timezone(&ws.config.timezone).date_naive();
    let days = days(o, today)?;
    let mut shown: Vec<(NaiveDate, String)> = Vec::new();
    for day in &days {
        // The day's note in the log folder, and in agent/log/ when that one was not tabd's.
        for note in log.notes_of(*day) {
            let text = read(ws, &note);
            shown.extend(entries(&text, who.as_deref()).into_iter().map(|e| (*day, e)));
        }
    }
    if let Some(n) = o.last {
        shown.drain(..shown.len().saturating_sub(n));
    }
    if shown.is_empty() && !o.follow {
        let when = match (days.first(), days.last()) {
            (Some(a), Some(b)) if a != b => format!("from {a} to {b}"),
            (Some(a), _) if *a == today => format!("today yet ({a})"),
            (Some(a), _) => format!("on {a}"),
            _ => String::new(),
        };
        let whose = who.as_deref().map(|w| format!(" for {w}")).unwrap_or_default();
        say!("Nothing logged{whose} {when}.");
        return Ok(0);
    }
    let mut last_day = None;
    for (day, entry) in &shown {
        if days.len() > 1 && last_day != Some(*day) {
            say!("# {day}\n");
            last_day = Some(*day);
        }
        say_raw!("{entry}");
    }
    if !o.follow {
        return Ok(0);
    }
    follow(ws, &log, who.as_deref())
}

/// Prints what is appended to today's log from now on, whole entries only.
fn follow(ws: &Workspace, log: &crate::records::runlog::RunLog, who: Option<&str>) -> Result<u8, CliError> {
    let mut day = log.daily_path(chrono::Utc::now());
    let mut printed = read(ws, &day).len();
    loop {
        std::thread::sleep(FOLLOW_EVERY);
        let today = log.daily_path(chrono::Utc::now());
        if today != day {
            day = today; // a new day, a new file
            printed = 0;
        }
        let text = read(ws, &day);
        if text.len() > printed {
            // What was appended since, from its first line.
            for entry in entries(&text[printed..], who) {
                say_raw!("{entry}");
            }
            printed = text.len();
        }
    }
}

/// The days asked for, oldest first.
fn days(o: &Options, today: NaiveDate) -> Result<Vec<NaiveDate>, CliError> {
    let parse = |flag: &str, d: &str| {
        NaiveDate::parse_from_str(d.trim(), "%Y-%m-%d")
            .map_err(|_| CliError::usage(format!("{flag} takes a date like 2026-11-23, not `{d}`")))
    };
    match (&o.date, &o.since) {
        (Some(_), Some(_)) => Err(CliError::usage("give --date or --since, not both")),
        (Some(d), None) => Ok(vec![parse("--date", d)?]),
        (None, Some(d)) => {
            let from = parse("--since", d)?;
            if from > today {
                return Err(CliError::usage(format!(
                    "--since {from} is after today ({today})"
                )));
            }
            Ok(from.iter_days().take_while(|d| *d <= today).collect())
        }
        (None, None) => Ok(vec![today]),
    }
}

fn read(ws: &Workspace, day: &VaultPath) -> String {
    ws.vault.read_text(day, 64 * 1024 * 1024).unwrap_or_default()
}

/// The entries of a daily log, in order: each run's section, each event line. With `who` (a
/// role's display name), only its own: its sections, its event lines, and — as its parent's
/// heading with the subsection under it — the runs another role delegated to it.
fn entries(text: &str, who: Option<&str>) -> Vec<String> {
    let tag = who.map(|w| format!(" · {w} · "));
    let delegated = who.map(|w| format!("### Delegated · {w}"));
    let mut out = Vec::new();
    // The section being read: its heading, its text, and a delegated subsection of `who`'s.
    let mut section: Option<(String, String)> = None;
    let mut child: Option<String> = None;
    let flush =
        |section: &mut Option<(String, String)>, child: &mut Option<String>, out: &mut Vec<String>| {
            if let Some((heading, body)) = section.take() {
                let mine = tag.as_ref().is_none_or(|t| heading.contains(t.as_str()));
                if mine {
                    out.push(format!("{heading}{body}\n"));
                }
            }
            if let Some(c) = child.take() {
                out.push(format!("{c}\n"));
            }
        };
    for line in text.split_inclusive('\n') {
        if line.starts_with("## ") {
            flush(&mut section, &mut child, &mut out);
            if line.trim_end() != "## Events" {
                section = Some((line.to_string(), String::new()));
            }
            continue;
        }
        let Some((heading, body)) = section.as_mut() else {
            // An event line (under `## Events`), or the day's title.
            if line.starts_with("- ") && tag.as_ref().is_none_or(|t| line.contains(t.as_str())) {
                out.push(line.to_string());
            }
            continue;
        };
        if line.starts_with("### ") {
            let ours = delegated.as_ref().is_some_and(|d| line.trim_end() == d.as_str());
            if let Some(c) = child.take() {
                out.push(format!("{c}\n"));
            }
            if ours && !tag.as_ref().is_some_and(|t| heading.contains(t.as_str())) {
                child = Some(format!("{} (delegated)\n{line}", heading.trim_end()));
                continue;
            }
        }
        match child.as_mut() {
            Some(c) => c.push_str(line),
            None => body.push_str(line),
        }
    }
    flush(&mut section, &mut child, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: &str = "# 2026-11-23\n\n## 09:00 · Delivery Manager · schedule\n- **Outcome:** ok\n\n### Delegated · Risk Manager\n\
                       - **Task:** rate it\n- **Outcome:** ok\n\n### Summary\nDone.\n\n\
                       ## 09:05 · Risk Manager · inbox\n- **Outcome:** ok\n\n## Events\n- 10:00 · Delivery Manager · skipped — budget\n\
                       - 10:01 · Risk Manager · paused\n";

    #[test]
    fn one_roles_sections_events_and_delegated_runs() {
        let d = entries(DAY, Some("Delivery Manager")).concat();
        assert!(
            d.contains("## 09:00 · Delivery Manager") && d.contains("Done."),
            "{d}"
        );
        assert!(d.contains("- 10:00 · Delivery Manager · skipped"), "{d}");
        assert!(!d.contains("## 09:05 · Risk Manager"), "{d}");
        let r = entries(DAY, Some("Risk Manager"));
        assert_eq!(r.len(), 3, "{r:?}");
        assert!(r[0].starts_with("## 09:00 · Delivery Manager · schedule (delegated)\n### Delegated · Risk Manager\n- **Task:** rate it"), "{r:?}");
        assert!(!r[0].contains("Done."), "not the parent's summary: {r:?}");
        assert!(r[1].starts_with("## 09:05 · Risk Manager"), "{r:?}");
        assert_eq!(r[2], "- 10:01 · Risk Manager · paused\n");
        let all = entries(DAY, None);
        assert_eq!(all.len(), 4, "two sections, two events: {all:?}");
    }

    #[test]
    fn days_from_the_flags() {
        let today = NaiveDate::from_ymd_opt(2026, 11, 25).unwrap();
        let o = |date: Option<&str>, since: Option<&str>| Options {
            date: date.map(String::from),
            since: since.map(String::from),
            ..Options::default()
        };
        assert_eq!(days(&o(None, None), today).unwrap(), [today]);
        assert_eq!(days(&o(None, Some("2026-11-23")), today).unwrap().len(), 3);
        assert_eq!(
            days(&o(Some("2026-11-01"), None), today).unwrap()[0].to_string(),
            "2026-11-01"
        );
        assert!(days(&o(Some("yesterday"), None), today).is_err());
        assert!(days(&o(Some("2026-11-01"), Some("2026-11-01")), today).is_err());
    }
}
