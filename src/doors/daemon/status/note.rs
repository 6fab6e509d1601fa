//! `agent/status.md`: the status as a Markdown note — callouts for what stops work, a table of
//! the roles, the lists of what needs the person.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::words::{cluster_line, drafts_held, settling_line, spend, state_line, when, when_to_the_second};
use super::{RoleStatus, StatusReport};

/// The Markdown of `agent/status.md`.
pub fn render_note(r: &StatusReport, tz: Tz) -> String {
    let mut s = String::from("# tabd status\n\n");
    s.push_str(&format!(
        "Updated {} · {}\n\n",
        r.updated_at.with_timezone(&tz).format("%Y-%m-%d %H:%M %Z"),
        r.daemon_pid.as_ref().map_or_else(
            || "the daemon was not running (`tabd status` says whether it runs now)".to_string(),
            |p| format!("written by the running daemon (pid {p}), {}", r.watching)
        ),
    ));
    s.push_str(&note_warnings(r, tz));
    if let Some(c) = &r.cluster {
        s.push_str(&format!("**Cluster:** {}\n\n", cluster_line(c, tz)));
    }
    s.push_str("| role | state | last run | next fire | pending notes | tokens today / budget |\n|---|---|---|---|---|---|\n");
    for role in &r.roles {
        s.push_str(&note_row(role, r.updated_at, tz));
    }
    s.push_str(&format!(
        "\nAll roles today: {}.\n",
        spend(
            r.tokens_today,
            r.global_daily_token_budget,
            r.cost_today_usd,
            r.global_daily_cost_budget_usd
        )
    ));
    s.push_str(&note_lists(r));
    s
}

/// Callouts for what stops work: the person's pauses, paused model calls, servers down, a ledger
/// that cannot be written.
fn note_warnings(r: &StatusReport, tz: Tz) -> String {
    let mut s = String::new();
    s.push_str(&super::pause::callout(&r.pauses, tz));
    if let Some(e) = &r.config_error {
        let living = if r.daemon_pid.is_some() {
            "tabd keeps running with the config it had before; fix the file and it is read again"
        } else {
            "fix it before tabd starts again (`tabd validate`)"
        };
        s.push_str(&format!(
            "> [!error] The config file has an error\n> {}\n> {living}\n\n",
            crate::base::text::one_line(e, 500)
        ));
    }
    if let Some(why) = &r.unsandboxed {
        s.push_str(&format!(
            "> [!warning] MCP servers and agent CLIs run without a sandbox\n> {why} (docs/mcp.md#sandbox)\n\n"
        ));
    }
    if let Some(p) = &r.provider_paused {
        s.push_str(&format!("> [!warning] Model calls are paused\n> {p}\n\n"));
    }
    for p in &r.notify_problems {
        s.push_str(&format!(
            "> [!warning] tabd cannot reach you\n> [notify] {}\n\n",
            crate::base::text::one_line(p, 300)
        ));
    }
    if let Some(p) = &r.write_problem {
        s.push_str(&format!(
            "> [!warning] tabd cannot write everything\n> {}\n\n",
            crate::base::text::one_line(p, 400)
        ));
    }
    for m in r.mcp_servers.iter().filter(|m| !m.up) {
        if let Some(e) = &m.error {
            s.push_str(&format!(
                "> [!warning] MCP server `{}` is down\n> {}\n\n",
                m.name,
                crate::base::text::one_line(e, 300)
            ));
        }
    }
    if let Some(e) = &r.ledger_error {
        s.push_str(&format!(
            "> [!warning] Scheduled runs cannot be recorded\n> {e}; they wait until .tabd/state.json can be written\n\n"
        ));
    }
    s
}

/// One role's row of the table.
pub(super) fn note_row(role: &RoleStatus, now: DateTime<Utc>, tz: Tz) -> String {
    let last = role.last_run.as_ref().map_or_else(
        || "—".to_string(),
        |l| format!("{} {}", when(l.at, tz, now), l.outcome),
    );
    let next = match (role.next_fire, &role.next_fire_why) {
        (None, _) => "—".to_string(),
        (Some(t), None) => when(t, tz, now),
        (Some(t), Some(why)) => format!("{} — {why}", when_to_the_second(t, tz, now)),
    };
    let mut pending = role.pending_notes.to_string();
    pending.push_str(&drafts_held(role.draft_notes));
    if role.failed_notes > 0 {
        pending.push_str(&format!(" ({} failed)", role.failed_notes));
    }
    if !role.unreadable_notes.is_empty() {
        pending.push_str(&format!(" ({} unreadable)", role.unreadable_notes.len()));
    }
    if let Some(w) = role.live.as_ref().and_then(|l| l.waits.as_ref()) {
        pending.push_str(&format!("; waits until {}: {}", when(w.until, tz, now), w.why));
    }
    if let Some(s) = role.live.as_ref().and_then(|l| settling_line(l, now, tz)) {
        pending.push_str(&format!("; {s}"));
    }
    if !role.waiting_runs.is_empty() {
        pending.push_str(&format!(
            "; {} run{} waiting for your decision",
            role.waiting_runs.len(),
            if role.waiting_runs.len() == 1 { "" } else { "s" }
        ));
    }
    if !role.pending_approvals.is_empty() {
        let links: Vec<String> = role
            .pending_approvals
            .iter()
            .map(|n| crate::records::runlog::wikilink(n))
            .collect();
        pending.push_str(&format!(
            "; {} awaiting approval: {}",
            links.len(),
            links.join(", ")
        ));
    }
    format!(
        "| {} | {} | {last} | {next} | {pending} | {} |\n",
        if role.name == role.role {
            role.role.clone()
        } else {
            format!("{} ({})", role.name, role.role)
        },
        state_line(role, tz),
        spend(
            role.tokens_today,
            role.daily_token_budget,
            role.cost_today_usd,
            role.daily_cost_budget_usd
        )
    )
}

/// Notes tabd cannot read, inboxes no role reads, and role-file errors.
fn note_lists(r: &StatusReport) -> String {
    let mut s = String::new();
    if !r.stranded.is_empty() {
        s.push_str("\n## Notes no role will read\nThese notes are in no role's inbox. Move each into one (or rename its folder):\n");
        for f in &r.stranded {
            s.push_str(&format!("- {f}\n"));
        }
    }
    let unreadable: Vec<String> = r
        .roles
        .iter()
        .flat_map(|x| x.unreadable_notes.iter().map(move |n| format!("{}: {n}", x.role)))
        .collect();
    if !unreadable.is_empty() {
        s.push_str(&format!("\n## Notes tabd does not read ({})\n", unreadable.len()));
        for n in unreadable {
            s.push_str(&format!("- {n}\n"));
        }
    }
    let errors: Vec<&String> = r.roles.iter().flat_map(|x| x.errors.iter()).collect();
    if !errors.is_empty() {
        s.push_str("\n## Role file errors\n");
        for e in errors {
            s.push_str(&format!("- {e}\n"));
        }
    }
    s
}
