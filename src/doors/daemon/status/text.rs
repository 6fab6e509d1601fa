//! The text `tabd status` prints: the daemon and what holds work back, then each role.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::words::{cluster_line, drafts_held, settling_line, spend, state_line};
use super::{ClusterView, RoleStatus, StatusReport};
use crate::base::cost::dollars;
use crate::base::text::thousands;

/// The text of `tabd status`.
pub fn render_text(r: &StatusReport, tz: Tz) -> String {
    render_text_at(r, tz, Utc::now().max(r.updated_at))
}

/// `render_text` as of `now` (times of today are shown without their date).
pub(super) fn render_text_at(r: &StatusReport, tz: Tz, now: DateTime<Utc>) -> String {
    let mut s = format!("vault: {}\n", r.vault);
    s.push_str(&format!(
        "daemon: {}\n",
        r.daemon_pid.as_ref().map_or_else(
            || "not running".to_string(),
            |p| format!("running (pid {p}), {}", r.watching)
        )
    ));
    s.push_str(&super::pause::text_lines(&r.pauses, tz));
    for f in &r.stranded {
        s.push_str(&format!("no role reads {f}\n"));
    }
    if let Some(why) = &r.unsandboxed {
        s.push_str(&format!("children: NOT sandboxed — {why}\n"));
    }
    if let Some(e) = &r.config_error {
        s.push_str(&format!(
            "CONFIG ERROR: {}\n",
            crate::base::text::one_line(e, 500)
        ));
    }
    for p in &r.notify_problems {
        s.push_str(&format!(
            "NOTIFY FAILING: {}\n",
            crate::base::text::one_line(p, 300)
        ));
    }
    if let Some(c) = &r.cluster {
        s.push_str(&format!("cluster: {}\n", cluster_line(c, tz)));
    }
    if let Some(p) = &r.write_problem {
        s.push_str(&format!(
            "WRITES FAILING: {}\n",
            crate::base::text::one_line(p, 400)
        ));
    }
    s.push_str(&format!("provider: {}\n", r.provider));
    if let Some(p) = &r.provider_paused {
        s.push_str(&format!("PAUSED: {p}\n"));
    }
    if let Some(e) = &r.ledger_error {
        s.push_str(&format!("SCHEDULED RUNS WAIT: cannot record them ({e})\n"));
    }
    for m in &r.mcp_servers {
        match &m.error {
            None if m.up => s.push_str(&format!("mcp server {}: up\n", m.name)),
            None => s.push_str(&format!("mcp server {}: starting\n", m.name)),
            Some(e) => s.push_str(&format!(
                "mcp server {}: DOWN: {}\n",
                m.name,
                crate::base::text::one_line(e, 300)
            )),
        }
    }
    s.push_str(&format!(
        "tokens today: {}\n\n",
        spend(
            r.tokens_today,
            r.global_daily_token_budget,
            r.cost_today_usd,
            r.global_daily_cost_budget_usd
        )
    ));
    for role in &r.roles {
        s.push_str(&role_text(role, tz, now));
        s.push_str(&ran_last(r.cluster.as_ref(), &role.role, tz));
    }
    s
}

/// One role in `tabd status`.
/// With `[cluster]`: which device ran `role`'s last run.
fn ran_last(cluster: Option<&ClusterView>, role: &str, tz: Tz) -> String {
    cluster
        .and_then(|c| c.last_runs.iter().find(|l| l.role == role))
        .map(|r| {
            format!(
                "  ran last:  on {} · {} {}\n",
                r.device,
                crate::base::text::shown(r.at, tz),
                r.outcome
            )
        })
        .unwrap_or_default()
}

fn role_text(role: &RoleStatus, tz: Tz, now: DateTime<Utc>) -> String {
    let mut s = format!("{} ({}) — {}\n", role.role, role.name, state_line(role, tz));
    s.push_str(&runs_text(role, tz, now));
    s.push_str(&waiting_text(role, tz));
    s.push_str(&format!(
        "  today:     {} run(s), {}\n",
        role.runs_today,
        spend(
            role.tokens_today,
            role.daily_token_budget,
            role.cost_today_usd,
            role.daily_cost_budget_usd
        )
    ));
    for e in &role.errors {
        s.push_str(&format!("  error: {e}\n"));
    }
    s
}

/// A role's runs in `tabd status`: what holds its inbox back or makes it wait, its last run and
/// its next fire.
pub(super) fn runs_text(role: &RoleStatus, tz: Tz, now: DateTime<Utc>) -> String {
    let mut s = String::new();
    if let Some(line) = role.live.as_ref().and_then(|l| settling_line(l, now, tz)) {
        s.push_str(&format!("  inbox:     {line}\n"));
    }
    if let Some(w) = role.live.as_ref().and_then(|l| l.waits.as_ref()) {
        s.push_str(&format!(
            "  waits:     until {}: {}\n",
            w.until.with_timezone(&tz).format("%H:%M:%S"),
            w.why
        ));
    }
    match &role.last_run {
        Some(l) => s.push_str(&format!(
            "  last run:  {} {} · {} tokens{}{}\n",
            crate::base::text::shown(l.at, tz),
            l.outcome,
            thousands(l.tokens),
            if l.cost_usd > 0.0 {
                format!(" · {}", dollars(l.cost_usd))
            } else {
                String::new()
            },
            l.error.as_ref().map(|e| format!(" · {e}")).unwrap_or_default()
        )),
        None => s.push_str("  last run:  never\n"),
    }
    let next = match (role.next_fire, &role.next_fire_why) {
        (None, _) => "— (inbox and `tabd fire` only)".to_string(),
        (Some(t), None) => t.with_timezone(&tz).format("%Y-%m-%d %H:%M %Z").to_string(),
        (Some(t), Some(why)) => format!("{} — {why}", t.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S %Z")),
    };
    s.push_str(&format!("  next fire: {next}\n"));
    s
}

/// What waits on a role in `tabd status`: its notes, its runs waiting for a decision, the
/// approvals asked of the person and the entries tabd does not read.
fn waiting_text(role: &RoleStatus, tz: Tz) -> String {
    let mut s = format!(
        "  pending:   {} note(s){}{}\n",
        role.pending_notes,
        drafts_held(role.draft_notes),
        if role.failed_notes > 0 {
            format!(", {} in failed/", role.failed_notes)
        } else {
            String::new()
        }
    );
    for (run, since) in &role.waiting_runs {
        s.push_str(&format!(
            "  waiting:   run {run} waits for your decision since {}; it goes on once you decide\n",
            crate::base::text::shown(*since, tz)
        ));
    }
    if !role.pending_approvals.is_empty() {
        s.push_str(&format!(
            "  approvals: {} waiting for you ({}); `tabd approvals` lists them\n",
            role.pending_approvals.len(),
            role.pending_approvals.join(", ")
        ));
    }
    match role.unreadable_notes.len() {
        0 => {}
        n => s.push_str(&format!(
            "  not read:  {n} entr{} tabd does not read: {}\n",
            if n == 1 { "y" } else { "ies" },
            role.unreadable_notes.join("; ")
        )),
    }
    s
}
