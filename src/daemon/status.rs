//! What `tabd status` prints and `agent/status.md` shows: per role state, last run, next fire,
//! pending notes, tokens today; errors; the daemon and provider state.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use crate::config::Config;
use crate::inbox;
use crate::role::RoleSet;
use crate::state::State;
use crate::text::thousands;
use crate::vault::{Vault, VaultPath};

#[derive(Debug, Clone, Serialize)]
pub struct LastRunView {
    pub at: DateTime<Utc>,
    pub outcome: String,
    pub tokens: u64,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RoleStatus {
    pub role: String,
    pub name: String,
    /// `enabled`, `disabled`, `error`, `error (running last good version)`, `other host (…)`.
    pub state: String,
    pub last_run: Option<LastRunView>,
    pub next_fire: Option<DateTime<Utc>>,
    pub pending_notes: usize,
    pub failed_notes: usize,
    pub tokens_today: u64,
    pub daily_token_budget: u64,
    pub runs_today: u32,
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    pub vault: String,
    pub daemon_pid: Option<String>,
    pub provider: String,
    pub provider_paused: Option<String>,
    pub watching: String,
    pub tokens_today: u64,
    pub global_daily_token_budget: u64,
    pub roles: Vec<RoleStatus>,
    pub updated_at: DateTime<Utc>,
}

/// Extra facts only the running daemon knows.
#[derive(Debug, Clone, Default)]
pub struct Live {
    pub pid: Option<String>,
    pub paused: Option<String>,
    pub watching: Option<String>,
    /// Roles running their last good version while their file has errors.
    pub kept_last_good: Vec<String>,
    pub host: String,
}

fn count_notes(vault: &Vault, dir: &str) -> usize {
    VaultPath::parse(dir, false)
        .ok()
        .and_then(|p| vault.walk(&p, false, &|_| false).ok())
        .map(|entries| {
            entries
                .iter()
                .filter(|e| !e.is_dir && inbox::is_trigger_name(e.path.file_name()))
                .count()
        })
        .unwrap_or(0)
}

pub fn collect(
    vault: &Vault,
    config: &Config,
    roles: &RoleSet,
    state: &State,
    live: &Live,
    now: DateTime<Utc>,
) -> StatusReport {
    let today = now.with_timezone(&config.timezone).date_naive();
    let mut out = Vec::new();
    for name in roles.all_names() {
        if name.starts_with('_') {
            continue;
        }
        let rs = state.roles.get(&name).cloned().unwrap_or_default();
        let (tokens_today, runs_today) = if rs.day == Some(today) {
            (rs.tokens_today, rs.runs_today)
        } else {
            (0, 0)
        };
        let errors: Vec<String> = roles
            .broken
            .get(&name)
            .map(|d| d.iter().map(ToString::to_string).collect())
            .unwrap_or_default();
        let role = roles.roles.get(&name);
        let state_text = match role {
            None => "error".to_string(),
            Some(_) if live.kept_last_good.contains(&name) => "error (running last good version)".to_string(),
            Some(r) if !r.enabled() => "disabled".to_string(),
            Some(r) => match &r.settings.runs_on {
                Some(h) if !live.host.is_empty() && h != &live.host => format!("other host ({h})"),
                _ => {
                    let budget = r
                        .settings
                        .daily_token_budget
                        .unwrap_or(config.limits.daily_token_budget);
                    let max_runs = r
                        .settings
                        .max_runs_per_day
                        .unwrap_or(config.limits.max_runs_per_day);
                    if tokens_today >= budget {
                        "stopped: daily token budget spent (until midnight)".to_string()
                    } else if runs_today >= max_runs {
                        "stopped: max_runs_per_day reached (until midnight)".to_string()
                    } else {
                        "enabled".to_string()
                    }
                }
            },
        };
        let next_fire = role
            .filter(|r| r.enabled())
            .and_then(|r| r.schedule.next_after(rs.last_slot.map_or(now, |l| l.max(now))));
        let inbox_dir = role.map_or_else(|| format!("agent/inbox/{name}/"), |r| r.inbox.clone());
        out.push(RoleStatus {
            role: name.clone(),
            name: role.map_or_else(|| name.clone(), |r| r.display_name.clone()),
            state: state_text,
            last_run: rs.last_run.as_ref().map(|l| LastRunView {
                at: l.started_at,
                outcome: l.outcome.clone(),
                tokens: l.tokens,
                error: l.error.clone(),
            }),
            next_fire,
            pending_notes: count_notes(vault, &inbox_dir),
            failed_notes: count_notes(vault, &format!("{}failed", inbox_dir)),
            tokens_today,
            daily_token_budget: role
                .and_then(|r| r.settings.daily_token_budget)
                .unwrap_or(config.limits.daily_token_budget),
            runs_today,
            errors,
        });
    }
    let global_tokens = if state.global.day == Some(today) {
        state.global.tokens_today
    } else {
        0
    };
    StatusReport {
        vault: vault.root().display().to_string(),
        daemon_pid: live.pid.clone(),
        provider: format!(
            "{} {} at {}",
            config.provider.kind.as_str(),
            config.provider.model,
            config.provider.base_url
        ),
        provider_paused: live.paused.clone(),
        watching: live.watching.clone().unwrap_or_else(|| "not running".into()),
        tokens_today: global_tokens,
        global_daily_token_budget: config.limits.global_daily_token_budget,
        roles: out,
        updated_at: now,
    }
}

fn when(t: DateTime<Utc>, tz: Tz, now: DateTime<Utc>) -> String {
    let local = t.with_timezone(&tz);
    if local.date_naive() == now.with_timezone(&tz).date_naive() {
        local.format("%H:%M").to_string()
    } else {
        local.format("%a %m-%d %H:%M").to_string()
    }
}

/// The Markdown of `agent/status.md`.
pub fn render_note(r: &StatusReport, tz: Tz) -> String {
    let mut s = String::from("# tabd status\n\n");
    s.push_str(&format!(
        "Updated {} · daemon {} · {}\n\n",
        r.updated_at.with_timezone(&tz).format("%Y-%m-%d %H:%M %Z"),
        r.daemon_pid
            .as_ref()
            .map_or_else(|| "not running".to_string(), |p| format!("running (pid {p})")),
        r.watching
    ));
    if let Some(p) = &r.provider_paused {
        s.push_str(&format!("> [!warning] Model calls are paused\n> {p}\n\n"));
    }
    s.push_str("| role | state | last run | next fire | pending notes | tokens today / budget |\n|---|---|---|---|---|---|\n");
    for role in &r.roles {
        let last = role.last_run.as_ref().map_or_else(
            || "—".to_string(),
            |l| format!("{} {}", when(l.at, tz, r.updated_at), l.outcome),
        );
        let next = role
            .next_fire
            .map_or_else(|| "—".to_string(), |t| when(t, tz, r.updated_at));
        let pending = if role.failed_notes > 0 {
            format!("{} ({} failed)", role.pending_notes, role.failed_notes)
        } else {
            role.pending_notes.to_string()
        };
        s.push_str(&format!(
            "| {} | {} | {last} | {next} | {pending} | {} / {} |\n",
            role.name,
            role.state,
            thousands(role.tokens_today),
            thousands(role.daily_token_budget)
        ));
    }
    s.push_str(&format!(
        "\nAll roles today: {} / {} tokens.\n",
        thousands(r.tokens_today),
        thousands(r.global_daily_token_budget)
    ));
    let errors: Vec<&String> = r.roles.iter().flat_map(|x| x.errors.iter()).collect();
    if !errors.is_empty() {
        s.push_str("\n## Role file errors\n");
        for e in errors {
            s.push_str(&format!("- {e}\n"));
        }
    }
    s
}

/// The text of `tabd status`.
pub fn render_text(r: &StatusReport, tz: Tz) -> String {
    let mut s = format!("vault: {}\n", r.vault);
    s.push_str(&format!(
        "daemon: {}\n",
        r.daemon_pid.as_ref().map_or_else(
            || "not running".to_string(),
            |p| format!("running (pid {p}), {}", r.watching)
        )
    ));
    s.push_str(&format!("provider: {}\n", r.provider));
    if let Some(p) = &r.provider_paused {
        s.push_str(&format!("PAUSED: {p}\n"));
    }
    s.push_str(&format!(
        "tokens today: {} / {}\n\n",
        thousands(r.tokens_today),
        thousands(r.global_daily_token_budget)
    ));
    for role in &r.roles {
        s.push_str(&format!("{} ({}) — {}\n", role.role, role.name, role.state));
        match &role.last_run {
            Some(l) => s.push_str(&format!(
                "  last run:  {} {} · {} tokens{}\n",
                l.at.with_timezone(&tz).format("%Y-%m-%d %H:%M"),
                l.outcome,
                thousands(l.tokens),
                l.error.as_ref().map(|e| format!(" · {e}")).unwrap_or_default()
            )),
            None => s.push_str("  last run:  never\n"),
        }
        s.push_str(&format!(
            "  next fire: {}\n",
            role.next_fire.map_or_else(
                || "— (inbox and `tabd fire` only)".to_string(),
                |t| t.with_timezone(&tz).format("%Y-%m-%d %H:%M %Z").to_string()
            )
        ));
        s.push_str(&format!(
            "  pending:   {} note(s){}\n",
            role.pending_notes,
            if role.failed_notes > 0 {
                format!(", {} in failed/", role.failed_notes)
            } else {
                String::new()
            }
        ));
        s.push_str(&format!(
            "  today:     {} run(s), {} / {} tokens\n",
            role.runs_today,
            thousands(role.tokens_today),
            thousands(role.daily_token_budget)
        ));
        for e in &role.errors {
            s.push_str(&format!("  error: {e}\n"));
        }
    }
    s
}
