//! Collecting a status report: from the roles, the state, the vault's inboxes and what only the
//! running daemon knows (`Live`); and bringing a daemon's last report up to date with the records.

use chrono::{DateTime, Utc};

use super::{InboxView, LastRunView, Live, RoleStatus, StatusReport};
use crate::base::cost::round_usd;
use crate::base::vault::{layout, Vault, VaultPath};
use crate::gate::approvals::NoteStatus;
use crate::records::inbox;
use crate::records::limits::{daily_stop, RoleLimits};
use crate::records::state::State;
use crate::setup::config::Config;
use crate::setup::role::RoleSet;

fn count_notes(vault: &Vault, dir: &VaultPath) -> (usize, Vec<String>) {
    match inbox::list(vault, dir) {
        Ok(l) => (
            l.notes.len(),
            l.unreadable
                .iter()
                .map(|o| format!("{} ({})", o.name, o.why))
                .collect(),
        ),
        Err(_) => (0, Vec::new()),
    }
}

/// The notes in `dir` held by `status: draft` (`tabd status` with no daemon to ask).
fn count_drafts(vault: &Vault, dir: &VaultPath) -> usize {
    inbox::list(vault, dir).map_or(0, |l| {
        l.notes
            .iter()
            .filter(|e| inbox::read_note(vault, &e.path).is_ok_and(|n| n.draft))
            .count()
    })
}

fn role_state(
    role: Option<&crate::setup::role::Role>,
    name: &str,
    live: &Live,
    config: &Config,
    state: &State,
    today: chrono::NaiveDate,
) -> String {
    let Some(r) = role else { return "error".into() };
    if live.kept_last_good.iter().any(|n| n == name) {
        return "error (running last good version)".into();
    }
    if !r.enabled() {
        return "disabled".into();
    }
    if let Some(h) = r
        .settings
        .runs_on
        .as_ref()
        .filter(|h| !live.host.is_empty() && **h != live.host)
    {
        return format!("other host ({h})");
    }
    let limits = RoleLimits::resolve(r, &config.limits);
    let mine = state.roles.get(name).map(|s| s.today(today)).unwrap_or_default();
    match daily_stop(&limits, &config.limits, mine, state.global.today(today)) {
        Some(stop) => format!("stopped: {} (until midnight)", stop.cause()),
        None => "enabled".into(),
    }
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
    let waiting = crate::running::run::suspend::waiting(vault);
    let out = roles
        .all_names()
        .into_iter()
        .filter(|name| !name.starts_with('_'))
        .map(|name| {
            role_status(
                &Sources {
                    vault,
                    config,
                    roles,
                    state,
                    live,
                    waiting: &waiting,
                },
                now,
                &name,
            )
        })
        .collect();
    let all = state.global.today(today);
    StatusReport {
        vault: vault.root().display().to_string(),
        daemon_pid: live.pid,
        provider: format!(
            "{} {} at {}",
            config.provider.kind.as_str(),
            config.provider.model,
            crate::base::text::display_url(&config.provider.base_url)
        ),
        provider_paused: live.paused.clone(),
        watching: live.watching.clone().unwrap_or_else(|| "not running".into()),
        tokens_today: all.tokens,
        global_daily_token_budget: config.limits.global_daily_token_budget,
        cost_today_usd: round_usd(all.cost_usd),
        global_daily_cost_budget_usd: config.limits.global_daily_cost_budget_usd,
        ledger_error: live.ledger_error.clone(),
        mcp_servers: live.mcp_servers.clone(),
        roles: out,
        stranded: stranded_inboxes(vault, roles),
        unsandboxed: live.unsandboxed.clone().filter(|_| starts_children(config)),
        config_error: live.config_error.clone(),
        notify_problems: live.notify_problems.clone(),
        write_problem: live.write_problem.clone(),
        updated_at: now,
        generation: live.generation,
        cluster: live.cluster.clone(),
        pauses: super::pause::views(&live.pauses),
    }
}

/// Whether tabd starts children with this config (stdio MCP servers or an agent CLI).
fn starts_children(config: &Config) -> bool {
    config.provider.kind == crate::setup::config::ProviderKind::Command
        || config
            .mcp
            .values()
            .any(|m| matches!(m.transport, crate::setup::config::mcp::Transport::Stdio { .. }))
}

/// Notes in `agent/inbox/` that no role reads, each with what to do: in a folder no role owns
/// (`agent/inbox/deliverry/ (1 note) — did you mean agent/inbox/delivery/?`), or directly in
/// `agent/inbox/` itself.
pub fn stranded_inboxes(vault: &Vault, roles: &RoleSet) -> Vec<String> {
    let inboxes_dir = vault.layout().inboxes();
    let Ok(base) = VaultPath::parse(&inboxes_dir, false) else {
        return Vec::new();
    };
    let Ok(listing) = vault.list(&base) else {
        return Vec::new();
    };
    let owned: std::collections::HashSet<&VaultPath> = roles.roles.values().map(|r| &r.inbox).collect();
    let known: std::collections::HashSet<String> = roles.all_names().into_iter().collect();
    let inboxes: Vec<&str> = roles.runnable().map(|r| r.inbox.as_str()).collect();
    let example = inboxes
        .first()
        .map_or_else(|| format!("{inboxes_dir}/ROLE"), |i| i.to_string());
    let mut out: Vec<String> = listing
        .entries
        .iter()
        .filter(|e| e.is_dir && !e.is_symlink)
        .filter(|e| !owned.contains(&e.path) && !known.contains(e.path.file_name()))
        .map(|e| {
            let names = inboxes
                .iter()
                .filter_map(|i| i.strip_prefix(inboxes_dir.as_str())?.strip_prefix('/'));
            let near = crate::base::text::did_you_mean(e.path.file_name(), names);
            stranded_folder(vault, &e.path, near, &example)
        })
        .collect();
    out.extend(
        listing
            .entries
            .iter()
            .filter(|e| !e.is_dir && inbox::is_trigger_name(e.path.file_name()))
            .map(|e| format!("{} — a note directly in {inboxes_dir}/ is in no role's inbox: move it into one, like {example}/", e.path)),
    );
    out
}

/// One folder in `agent/inbox/` no role reads (a role renamed or deleted, a typo): how many
/// notes wait there and in its `failed/` — none of them runs — and what to do. An empty one is
/// named too: the folder of a deleted role stays, and a note dropped there later would wait.
fn stranded_folder(vault: &Vault, dir: &VaultPath, near: Option<&str>, example: &str) -> String {
    let waiting = count_notes(vault, dir).0;
    let failed = dir.join(layout::FAILED).map_or(0, |d| count_notes(vault, &d).0);
    let notes = |n: usize| format!("{n} note{}", if n == 1 { "" } else { "s" });
    let what = match (waiting, failed) {
        (0, 0) => "empty".to_string(),
        (n, 0) => notes(n),
        (0, f) => format!("no note waits; {f} in failed/"),
        (n, f) => format!("{}; {f} more in failed/", notes(n)),
    };
    let role_file = vault.layout().role_file(dir.file_name());
    let inboxes = vault.layout().inboxes();
    let advice = match near {
        Some(inbox) if waiting + failed > 0 => {
            format!("did you mean {inboxes}/{inbox}/? Move the notes there")
        }
        Some(inbox) => format!("did you mean {inboxes}/{inbox}/? Delete this folder"),
        None if waiting + failed > 0 => format!(
            "none of them runs: there is no {role_file} (a role renamed or deleted?). Move the notes to a role's inbox, like {example}/, or add the role again"
        ),
        None => format!(
            "there is no {role_file} (a role renamed or deleted?). Delete the folder, or add the role again"
        ),
    };
    format!("{dir}/ ({what}) — {advice}")
}

/// What a status report is made from.
struct Sources<'a> {
    vault: &'a Vault,
    config: &'a Config,
    roles: &'a RoleSet,
    state: &'a State,
    live: &'a Live,
    /// Runs waiting for the person's decision (docs/spec.md §22).
    waiting: &'a [crate::running::run::suspend::Waiting],
}

fn role_status(src: &Sources<'_>, now: DateTime<Utc>, name: &str) -> RoleStatus {
    let config = src.config;
    let today = now.with_timezone(&config.timezone).date_naive();
    let rs = src.state.roles.get(name).cloned().unwrap_or_default();
    let used = rs.today(today);
    let role = src.roles.roles.get(name);
    let inbox_dir = role
        .map(|r| r.inbox.clone())
        .or_else(|| VaultPath::parse(&src.vault.layout().default_inbox(name), false).ok())
        .unwrap_or_else(VaultPath::root);
    // The running daemon knows its inboxes from its last scan; only `tabd status` lists them.
    let (pending, unreadable) = match src.live.roles.get(name) {
        Some(view) => (
            view.notes,
            src.live.unreadable.get(name).cloned().unwrap_or_default(),
        ),
        None => count_notes(src.vault, &inbox_dir),
    };
    let drafts = match src.live.roles.get(name) {
        Some(view) => view.drafts,
        None => count_drafts(src.vault, &inbox_dir),
    };
    let no_failed_folder = src.live.roles.get(name).is_some_and(|v| !v.has_failed);
    let failed = match inbox_dir.join(layout::FAILED) {
        Ok(d) if !no_failed_folder => count_notes(src.vault, &d).0,
        _ => 0,
    };
    let limits = role.map(|r| RoleLimits::resolve(r, &config.limits));
    let (next_fire, next_fire_why) = next_fire(role, &rs, src.live.roles.get(name), now);
    RoleStatus {
        role: name.to_string(),
        name: role.map_or_else(
            || {
                src.roles
                    .titles
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| name.to_string())
            },
            |r| r.display_name.clone(),
        ),
        state: role_state(role, name, src.live, config, src.state, today),
        last_run: last_run_view(&rs),
        next_fire,
        next_fire_why,
        pending_notes: pending,
        draft_notes: drafts,
        failed_notes: failed,
        unreadable_notes: unreadable,
        tokens_today: used.tokens,
        daily_token_budget: limits
            .as_ref()
            .map_or(config.limits.daily_token_budget, |l| l.daily_token_budget),
        cost_today_usd: round_usd(used.cost_usd),
        daily_cost_budget_usd: limits.as_ref().and_then(|l| l.daily_cost_budget_usd),
        runs_today: used.runs,
        pending_approvals: pending_approvals(src.state, name, now),
        waiting_runs: waiting_runs(src.waiting, name),
        errors: src
            .roles
            .broken
            .get(name)
            .map(|d| d.iter().map(ToString::to_string).collect())
            .unwrap_or_default(),
        live: src.live.roles.get(name).cloned(),
        paused: super::pause::of(&src.live.pauses, name),
    }
}

/// When `role`'s next scheduled run starts, and why when `min_interval` holds it back: the later
/// of its next slot (a slot waiting already is due now) and what the running daemon's `view` says
/// min_interval allows. Without a daemon nothing holds it: a daemon started now runs its first
/// slot on time.
fn next_fire(
    role: Option<&crate::setup::role::Role>,
    rs: &crate::records::state::RoleState,
    view: Option<&InboxView>,
    now: DateTime<Utc>,
) -> (Option<DateTime<Utc>>, Option<String>) {
    let Some(role) = role.filter(|r| r.enabled()) else {
        return (None, None);
    };
    let slot = if view.is_some_and(|v| v.queued_slots > 0) {
        Some(now)
    } else {
        role.schedule.next_after(rs.last_slot.map_or(now, |l| l.max(now)))
    };
    match (slot, view.and_then(|v| v.schedule_held.as_ref())) {
        (Some(slot), Some(held)) if held.until > slot => (Some(held.until), Some(held.why.clone())),
        (slot, _) => (slot, None),
    }
}

fn last_run_view(rs: &crate::records::state::RoleState) -> Option<LastRunView> {
    rs.last_run.as_ref().map(|l| LastRunView {
        at: l.started_at,
        outcome: l.outcome.clone(),
        tokens: l.tokens,
        cost_usd: round_usd(l.cost_usd),
        error: l.error.clone(),
    })
}

/// The notes of `role`'s calls waiting for the person's approval.
fn pending_approvals(state: &State, role: &str, now: DateTime<Utc>) -> Vec<String> {
    state
        .approvals
        .values()
        .filter(|a| a.role == role && a.phase == NoteStatus::Pending && a.expires > now)
        .map(|a| a.note.clone())
        .collect()
}

/// `role`'s runs waiting for the person's decision: id and since.
fn waiting_runs(
    waiting: &[crate::running::run::suspend::Waiting],
    role: &str,
) -> Vec<(String, DateTime<Utc>)> {
    waiting
        .iter()
        .filter(|s| s.role == role && !s.resuming)
        .map(|s| (s.run_id.clone(), s.suspended_at))
        .collect()
}

/// The daemon's last report, with what another process may have recorded since read again from
/// the records: `tabd fire` or `tabd approve` beside a running daemon change each role's last
/// run, today's spending, its approvals and its waiting runs, and the daemon writes its report
/// only when it next looks. A person who types `tabd status` right after `tabd fire` sees that
/// run, not `last run: never`.
pub fn refresh_records(
    report: &mut StatusReport,
    vault: &Vault,
    config: &Config,
    state: &State,
    now: DateTime<Utc>,
) {
    let today = now.with_timezone(&config.timezone).date_naive();
    let waiting = crate::running::run::suspend::waiting(vault);
    for r in &mut report.roles {
        let rs = state.roles.get(&r.role).cloned().unwrap_or_default();
        let used = rs.today(today);
        r.last_run = last_run_view(&rs);
        r.tokens_today = used.tokens;
        r.cost_today_usd = round_usd(used.cost_usd);
        r.runs_today = used.runs;
        r.pending_approvals = pending_approvals(state, &r.role, now);
        r.waiting_runs = waiting_runs(&waiting, &r.role);
    }
    let all = state.global.today(today);
    report.tokens_today = all.tokens;
    report.cost_today_usd = round_usd(all.cost_usd);
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::base::environment::Env;
    use crate::doors::daemon::status::{text, Wait};
    use crate::setup::role::{LoadContext, Role};

    fn every_minute() -> Role {
        let set = RoleSet::from_texts(
            [(
                "ticker".to_string(),
                PathBuf::from("roles/ticker.md"),
                Ok("# Ticker\n## Mission\nTick.\n## Schedule\nevery 1 min\n".to_string()),
            )],
            &LoadContext::new(chrono_tz::UTC, Env::default()),
        );
        set.roles["ticker"].clone()
    }

    fn at(t: &str) -> DateTime<Utc> {
        format!("2026-11-25T{t}Z").parse().unwrap()
    }

    /// Issue 48, item 5: `every 1 min` with min_interval 2m. At 10:01:05, after a run that
    /// ended at 10:00:30, the next fire is 10:02:30 — not the 10:02 slot, which would come
    /// before the role's own "waits until 10:02:30" — and says why; with the interval over, or
    /// without a daemon (a daemon started now holds nothing), it is the slot.
    #[test]
    fn the_next_fire_is_the_later_of_the_slot_and_what_min_interval_allows() {
        let role = every_minute();
        let now = at("10:01:05");
        let rs = crate::records::state::RoleState {
            last_slot: Some(at("10:01:00")),
            ..Default::default()
        };
        let why = "held back by min_interval 2m since its last run";
        let held = Wait {
            until: at("10:02:30"),
            why: why.into(),
        };
        let mut view = InboxView {
            queued_slots: 1,
            schedule_held: Some(held.clone()),
            waits: Some(Wait {
                until: at("10:02:30"),
                why: "min_interval 2m since its last run".into(),
            }),
            ..InboxView::default()
        };
        let want = (Some(at("10:02:30")), Some(why.to_string()));
        assert_eq!(
            next_fire(Some(&role), &rs, Some(&view), now),
            want,
            "its slot waits"
        );
        let status = RoleStatus {
            next_fire: want.0,
            next_fire_why: want.1.clone(),
            live: Some(view.clone()),
            ..RoleStatus::default()
        };
        let text = text::runs_text(&status, chrono_tz::UTC, now);
        assert!(
            text.contains("  waits:     until 10:02:30: min_interval 2m")
                && text.contains(&format!("  next fire: 2026-11-25 10:02:30 UTC — {why}")),
            "{text}"
        );
        let row = super::super::note::note_row(&status, now, chrono_tz::UTC);
        assert!(row.contains(&format!("| 10:02:30 — {why} |")), "{row}");

        view.queued_slots = 0;
        view.waits = None;
        assert_eq!(
            next_fire(Some(&role), &rs, Some(&view), now),
            want,
            "no slot waiting yet: the next one (10:02) still waits for min_interval"
        );
        view.schedule_held = None;
        assert_eq!(
            next_fire(Some(&role), &rs, Some(&view), now),
            (Some(at("10:02:00")), None),
            "nothing holds it: the slot"
        );
        assert_eq!(
            next_fire(Some(&role), &rs, None, now),
            (Some(at("10:02:00")), None)
        );
    }
}
