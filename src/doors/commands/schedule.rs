//! `tabd schedule [--from RFC3339] [--next N] [--json]` (contract: the JSON shape of DESIGN §12).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use super::{CliError, Workspace};

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
        println!("{text}");
    } else {
        print_table(ws, &out);
    }
    Ok(0)
}

fn print_table(ws: &Workspace, out: &Output) {
    for r in &out.roles {
        let role = ws.roles.roles.get(&r.role);
        let display = role.map_or(r.role.as_str(), |x| x.display_name.as_str());
        println!("{} — {} ({})", r.role, display, r.timezone);
        if let Some(e) = &r.error {
            for line in e.lines() {
                println!("  broken: {line}");
            }
        } else if let Some(role) = role {
            if role.schedule.is_empty() {
                println!("  on-demand: fires only for inbox notes and `tabd fire`");
            }
            for line in &role.schedule.lines {
                println!(
                    "  {:<36} {}",
                    line.source,
                    line.cron_exprs().collect::<Vec<_>>().join(" | ")
                );
                println!("    understood: {}", line.understood);
                for note in &line.notes {
                    println!("    note: {note}");
                }
            }
            if !role.enabled() {
                println!("  disabled (enabled: false)");
            }
            let tz = role.schedule.tz;
            for t in &r.next {
                if let Ok(t) = DateTime::parse_from_rfc3339(t) {
                    println!("    next {}", t.with_timezone(&tz).format("%a %Y-%m-%d %H:%M %Z"));
                }
            }
        }
        println!();
    }
}
