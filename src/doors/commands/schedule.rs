//! `tabd schedule [--from RFC3339] [--next N] [--json]` (contract: the JSON shape of docs/spec.md §12),
//! and what a role's `min_interval` does to its schedule, which `tabd validate` says too.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use super::{CliError, Workspace};
use crate::base::diag::Diagnostic;
use crate::formats::schedule::{duration_words, interval_at_least, Crowded, ScheduleKind};
use crate::records::limits::RoleLimits;
use crate::setup::config::Limits;
use crate::setup::role::Role;

#[derive(Debug, Serialize)]
struct Output {
    roles: Vec<RoleSchedule>,
}

#[derive(Debug, Serialize)]
struct RoleSchedule {
    role: String,
    cron: Vec<String>,
    timezone: String,
    next: Vec<String>,
    error: Option<String>,
}

pub fn run(ws: &Workspace, from: Option<&str>, next: usize, json: bool) -> Result<u8, CliError> {
    let from: DateTime<Utc> = match from {
        Some(s) => DateTime::parse_from_rfc3339(s)
            .map_err(|e| {
                CliError::usage(format!(
                    "--from \"{s}\" is not an RFC 3339 time ({e}); write e.g. 2026-03-06T12:00:00-05:00"
                ))
            })?
            .with_timezone(&Utc),
        None => Utc::now(),
    };
    let mut out = Output { roles: Vec::new() };
    for name in ws.roles.all_names() {
        if let Some(role) = ws.roles.roles.get(&name) {
            if role.is_abstract {
                continue;
            }
            let tz = role.schedule.tz;
            out.roles.push(RoleSchedule {
                role: name.clone(),
                cron: role.schedule.cron_exprs(),
                timezone: tz.name().to_string(),
                next: role
                    .schedule
                    .next_n(from, next)
                    .into_iter()
                    .map(|t| t.with_timezone(&tz).to_rfc3339_opts(SecondsFormat::Secs, true))
                    .collect(),
                error: None,
            });
        } else if let Some(diags) = ws.roles.broken.get(&name) {
            if name.starts_with('_') {
                continue;
            }
            out.roles.push(RoleSchedule {
                role: name.clone(),
                cron: Vec::new(),
                timezone: ws.config.timezone.name().to_string(),
                next: Vec::new(),
                error: Some(
                    diags
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("\n"),
                ),
            });
        }
    }
    if json {
        let text = serde_json::to_string_pretty(&out).map_err(|e| CliError::failed(e.to_string()))?;
        say!("{text}");
    } else {
        print_table(ws, &out);
    }
    Ok(0)
}

fn print_table(ws: &Workspace, out: &Output) {
    for r in &out.roles {
        let role = ws.roles.roles.get(&r.role);
        let display = role.map_or(r.role.as_str(), |x| x.display_name.as_str());
        say!("{} — {} ({})", r.role, display, r.timezone);
        if let Some(e) = &r.error {
            for line in e.lines() {
                say!("  broken: {line}");
            }
        } else if let Some(role) = role {
            if role.schedule.is_empty() {
                say!("  on-demand: fires only for inbox notes and `tabd fire`");
            }
            let min = min_interval(role, &ws.config.limits);
            let crowded = role.schedule.crowded(min);
            for text in lines_in_words(role, &crowded, min) {
                say!("{text}");
            }
            if !role.enabled() {
                say!("  disabled (enabled: false)");
            }
            let tz = role.schedule.tz;
            for t in &r.next {
                if let Ok(t) = DateTime::parse_from_rfc3339(t) {
                    say!("    next {}", t.with_timezone(&tz).format("%a %Y-%m-%d %H:%M %Z"));
                }
            }
            if !crowded.is_empty() && !r.next.is_empty() {
                say!(
                    "    (these are the schedule's fires: a run starts only {} or more after the last one ended, \
                     min_interval {}, so some of them run late or not at all)",
                    duration_words(min),
                    humantime::format_duration(min)
                );
            }
        }
        say!();
    }
}

/// Each schedule line as `tabd schedule` shows it: as written and its crons, what it means,
/// and what min_interval does to it (`every minute — held to one run per 2 minutes`).
fn lines_in_words(role: &Role, crowded: &[Crowded], min: Duration) -> Vec<String> {
    let mut out = Vec::new();
    for (i, line) in role.schedule.lines.iter().enumerate() {
        let crons = line.cron_exprs().collect::<Vec<_>>().join(" | ");
        out.push(format!("  {:<36} {crons}", line.source));
        let alone = crowded.iter().any(|c| (c.first, c.second) == (i, i));
        let pace = if alone {
            format!(" — held to one run per {} by min_interval", duration_words(min))
        } else {
            String::new()
        };
        out.push(format!("    understood: {}{pace}", line.understood));
        for c in crowded.iter().filter(|c| c.second == i && c.first != i) {
            let first = &role.schedule.lines[c.first];
            out.push(format!(
                "    held: it fires {} after \"{}\" (line {}); that run waits for min_interval",
                duration_words(c.gap),
                first.source,
                first.line
            ));
        }
        out.extend(line.notes.iter().map(|note| format!("    note: {note}")));
    }
    out
}

fn min_interval(role: &Role, limits: &Limits) -> Duration {
    RoleLimits::resolve(role, limits).min_interval
}

/// Warnings for `tabd validate`: each schedule line whose fires come closer together than the
/// role's `min_interval` (issue 48, item 5: `every 1 min` ran every other minute under the
/// default 2m while `tabd schedule` said every minute).
pub(super) fn held_back(role: &Role, limits: &Limits) -> Vec<Diagnostic> {
    let min = min_interval(role, limits);
    role.schedule
        .crowded(min)
        .iter()
        .map(|c| {
            let line = &role.schedule.lines[c.second];
            Diagnostic::warning(&role.schedule_path, line.line, held_words(role, c, min))
        })
        .collect()
}

/// The warning's sentence: what fires, what min_interval does to it, what to write.
fn held_words(role: &Role, c: &Crowded, min: Duration) -> String {
    let lines = &role.schedule.lines;
    let line = &lines[c.second];
    let setting = humantime::format_duration(min);
    let whose = if role.settings.min_interval.is_some() {
        "the role's"
    } else {
        "from the config's [limits]"
    };
    let pace = duration_words(min);
    let gap = humantime::format_duration(c.gap);
    if c.first != c.second {
        let first = &lines[c.first];
        return format!(
            "schedule \"{}\" fires {} after \"{}\" (line {}), within min_interval ({setting}, {whose}): its run \
             waits until {pace} after the other one ended; put their times {pace} or more apart, or set \
             `min_interval: {gap}` in the role's frontmatter",
            line.source,
            duration_words(c.gap),
            first.source,
            first.line
        );
    }
    let instead = match interval_at_least(min) {
        Some(every) if line.kind == ScheduleKind::Interval => format!("write `{every}` (or slower)"),
        _ => format!("put its times {pace} or more apart"),
    };
    format!(
        "schedule \"{}\" fires {} apart, faster than min_interval ({setting}, {whose}): a run starts only {pace} \
         or more after the last one ended, so it runs at most once per {pace}; {instead}, or set \
         `min_interval: {gap}` in the role's frontmatter if it should run that often",
        line.source,
        duration_words(c.gap)
    )
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::base::environment::Env;
    use crate::setup::role::{LoadContext, RoleSet};

    fn roles(files: &[(&str, &str)]) -> RoleSet {
        RoleSet::from_texts(
            files.iter().map(|(name, text)| {
                (
                    name.to_string(),
                    PathBuf::from(format!("roles/{name}.md")),
                    Ok(text.to_string()),
                )
            }),
            &LoadContext::new(chrono_tz::Europe::Lisbon, Env::from_pairs([("HOME", "/nowhere")])),
        )
    }

    const FAST: &str = "# Fast\n## Mission\nWatch.\n## Schedule\n9am and 5pm, weekdays\nevery 1 min\n";

    /// Issue 48, item 5: `every 1 min` ran every other minute under the default min_interval
    /// of 2m while `tabd schedule` said "every minute" and `validate` said nothing.
    #[test]
    fn a_schedule_faster_than_min_interval_is_said_by_validate_and_schedule() {
        let set = roles(&[("fast", FAST)]);
        let role = &set.roles["fast"];
        let limits = Limits::default();
        let said: Vec<String> = held_back(role, &limits).iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 1, "{said:?}");
        for words in [
            "roles/fast.md:6: warning: schedule \"every 1 min\" fires a minute apart",
            "min_interval (2m, from the config's [limits])",
            "runs at most once per 2 minutes",
            "write `every 2 min`",
            "`min_interval: 1m`",
        ] {
            assert!(said[0].contains(words), "{words:?} in {}", said[0]);
        }
        let min = min_interval(role, &limits);
        let shown = lines_in_words(role, &role.schedule.crowded(min), min).join("\n");
        assert!(
            shown.contains(
                "understood: every day, every minute — held to one run per 2 minutes by min_interval"
            ),
            "{shown}"
        );
        assert!(
            shown.contains("understood: weekdays at 09:00 and 17:00\n"),
            "{shown}"
        );
    }

    #[test]
    fn the_roles_own_min_interval_and_an_inherited_schedules_file_are_named() {
        let set = roles(&[
            (
                "_fast",
                "# Base\n## Schedule\nweekdays at 9am\nweekdays at 9:01am\n",
            ),
            (
                "child",
                "---\nextends: _fast\nmin_interval: 5m\n---\n# Child\n## Mission\nWatch.\n",
            ),
        ]);
        let said: Vec<String> = held_back(&set.roles["child"], &Limits::default())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with(
                "roles/_fast.md:4: warning: schedule \"weekdays at 9:01am\" fires a minute after \"weekdays at 9am\" \
                 (line 3), within min_interval (5m, the role's)"
            ),
            "{}",
            said[0]
        );
        // As fast as min_interval allows, or no schedule: nothing to say.
        let set = roles(&[
            (
                "ok",
                "---\nmin_interval: 1m\n---\n# Ok\n## Mission\nW.\n## Schedule\nevery 1 min\n",
            ),
            ("none", "# None\n## Mission\nW.\n"),
        ]);
        for role in ["ok", "none"] {
            assert!(
                held_back(&set.roles[role], &Limits::default()).is_empty(),
                "{role}"
            );
        }
    }
}
