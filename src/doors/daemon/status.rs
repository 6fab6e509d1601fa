//! What `tabd status` prints and `agent/status.md` shows: per role state, last run, next fire,
//! pending notes, tokens and dollars today; errors; the daemon and provider state. The daemon
//! also writes the same report as `.tabd/status.json`, with what only it knows (running runs,
//! notes still settling) and a `generation` that grows with every write.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::base::cost::{dollars, round_usd};
use crate::base::environment::Redactor;
use crate::base::text::thousands;
use crate::base::vault::{layout, Durability, Vault, VaultPath};
use crate::gate::approvals::NoteStatus;
use crate::records::inbox;
use crate::records::limits::{daily_stop, RoleLimits};
use crate::records::state::State;
use crate::setup::config::Config;
use crate::setup::role::RoleSet;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LastRunView {
    pub at: DateTime<Utc>,
    pub outcome: String,
    pub tokens: u64,
    pub cost_usd: f64,
    pub error: Option<String>,
}

/// What the daemon saw of one role's inbox and queue at its last scan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboxView {
    /// Notes in the inbox (any state).
    pub notes: usize,
    /// Complete and waiting for a run.
    pub ready: usize,
    /// Of those, written by a person (they never wait for `min_interval`).
    #[serde(skip)]
    pub by_person: usize,
    /// Still being written (settle time not over, or empty).
    pub settling: usize,
    /// When the first settling note will be complete if nobody touches it again (`None`: an
    /// empty note, which waits for its first words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle_until: Option<DateTime<Utc>>,
    /// A settling note is being typed in the inbox by a person (the longer wait applies).
    #[serde(default)]
    pub typing: bool,
    /// A run of this role is going on: since when, and what started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_since: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_trigger: Option<String>,
    /// `status: draft`.
    pub drafts: usize,
    /// Entries tabd cannot read (symlinks, pipes, non-UTF-8 names).
    pub unreadable: usize,
    pub running: bool,
    /// Another process (`tabd fire`) holds the role's run lock; the daemon waits for it.
    pub busy_elsewhere: bool,
    pub queued_slots: usize,
    pub watch_pending: usize,
    /// Work is waiting, and until when and why (`min_interval`, a busy run lock, a server down).
    pub waits: Option<Wait>,
    /// `min_interval` holds the next scheduled run back until then, whether a slot waits yet or
    /// not: the next fire is the later of this and the next slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_held: Option<Wait>,
    /// The last scan saw a `failed/` folder in the inbox (without one there is nothing to count).
    #[serde(skip)]
    pub has_failed: bool,
}

/// Why a role's waiting work has not started, and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wait {
    pub until: DateTime<Utc>,
    pub why: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RoleStatus {
    pub role: String,
    pub name: String,
    /// `enabled`, `disabled`, `error`, `error (running last good version)`, `other host (…)`.
    pub state: String,
    pub last_run: Option<LastRunView>,
    /// When its next scheduled run starts: the later of its next slot and what `min_interval`
    /// allows (the running daemon knows that), with why when min_interval holds it back.
    pub next_fire: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fire_why: Option<String>,
    pub pending_notes: usize,
    /// Of `pending_notes`, those held by `status: draft` (issue 39, item 8).
    #[serde(default)]
    pub draft_notes: usize,
    pub failed_notes: usize,
    /// Inbox entries tabd cannot read, each with why.
    pub unreadable_notes: Vec<String>,
    pub tokens_today: u64,
    pub daily_token_budget: u64,
    pub cost_today_usd: f64,
    pub daily_cost_budget_usd: Option<f64>,
    pub runs_today: u32,
    /// Calls waiting for the person's approval (DESIGN §15): their note paths.
    pub pending_approvals: Vec<String>,
    /// Runs of this role waiting for the person's decision to go on (DESIGN §22): id and since.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_runs: Vec<(String, DateTime<Utc>)>,
    pub errors: Vec<String>,
    /// Only from the running daemon.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<InboxView>,
    /// The pause that holds it (`tabd pause`, DESIGN §28); `null` when none does.
    #[serde(default)]
    pub paused: Option<super::status_pause::PauseView>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusReport {
    pub vault: String,
    pub daemon_pid: Option<u32>,
    pub provider: String,
    pub provider_paused: Option<String>,
    pub watching: String,
    pub tokens_today: u64,
    pub global_daily_token_budget: u64,
    pub cost_today_usd: f64,
    pub global_daily_cost_budget_usd: Option<f64>,
    /// Why scheduled runs cannot be recorded (and so wait), if they cannot.
    pub ledger_error: Option<String>,
    /// Keep-alive MCP servers (only from the running daemon).
    pub mcp_servers: Vec<McpServerStatus>,
    pub roles: Vec<RoleStatus>,
    /// Inbox folders no role owns (a role renamed or deleted) that hold notes: they would wait
    /// forever. One line each: the folder and how many notes.
    #[serde(default)]
    pub stranded: Vec<String>,
    /// Children (MCP servers, agent CLIs) start without a sandbox here: why (DESIGN §20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsandboxed: Option<String>,
    /// The config file's error: the daemon keeps running with the config it had before (or a
    /// read-only command shows what it can without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_error: Option<String>,
    /// `[notify]` channels that fail: the person is not being reached.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notify_problems: Vec<String>,
    /// Writes that failed (a full disk): lines of the daily note or the state may be missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_problem: Option<String>,
    pub updated_at: DateTime<Utc>,
    /// Grows by one with every write by the daemon (0 from `tabd status`).
    pub generation: u64,
    /// With `[cluster]` (DESIGN §23): this device, its quorum, the devices seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterView>,
    /// The person's pauses that hold now (`tabd pause`, DESIGN §28): the kill switch.
    #[serde(default)]
    pub pauses: Vec<super::status_pause::PauseView>,
}

/// The cluster as this device sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterView {
    pub device: String,
    /// Whether this device's last heartbeat was written (`None`: none tried yet).
    pub quorum: Option<bool>,
    pub lease_s: u64,
    pub when_alone: String,
    /// Every device of the vault by its last heartbeat (this one included), by name.
    pub devices: Vec<DeviceView>,
    /// Each role's last run across the devices: which device ran it, by role.
    #[serde(default)]
    pub last_runs: Vec<RoleRunView>,
}

/// The newest run of a role on any device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleRunView {
    pub role: String,
    pub device: String,
    pub at: DateTime<Utc>,
    pub outcome: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceView {
    pub device: String,
    pub last_heartbeat: DateTime<Utc>,
}

impl ClusterView {
    /// One line: `device laptop · quorum yes · devices: desktop (09:00:03), laptop (09:00:01)`.
    fn line(&self, tz: Tz) -> String {
        let quorum = match self.quorum {
            Some(true) => "yes".to_string(),
            Some(false) => format!("no (when_alone: {})", self.when_alone),
            None => "not known yet".to_string(),
        };
        let seen: Vec<String> = self
            .devices
            .iter()
            .map(|d| {
                format!(
                    "{} ({})",
                    d.device,
                    d.last_heartbeat.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S")
                )
            })
            .collect();
        format!(
            "device {} · quorum {quorum} · lease {} s · devices seen: {}",
            self.device,
            self.lease_s,
            if seen.is_empty() {
                "none yet".to_string()
            } else {
                seen.join(", ")
            }
        )
    }
}

/// Extra facts only the running daemon knows.
#[derive(Debug, Clone, Default)]
pub struct Live {
    pub pid: Option<u32>,
    pub paused: Option<String>,
    pub watching: Option<String>,
    /// Roles running their last good version while their file has errors.
    pub kept_last_good: Vec<String>,
    pub host: String,
    pub ledger_error: Option<String>,
    pub generation: u64,
    pub roles: BTreeMap<String, InboxView>,
    /// Per role, the inbox entries the last scan could not read (name and why).
    pub unreadable: BTreeMap<String, Vec<String>>,
    /// The daemon's keep-alive MCP servers.
    pub mcp_servers: Vec<McpServerStatus>,
    /// Why the children tabd starts run without a sandbox, if they do (DESIGN §20).
    pub unsandboxed: Option<String>,
    /// The config file's error, when the daemon lives with the previous config.
    pub config_error: Option<String>,
    /// `[notify]` channels whose last delivery failed, each with why.
    pub notify_problems: Vec<String>,
    /// Side writes (log lines, state) that failed since start-up, and the last one.
    pub write_problem: Option<String>,
    /// With `[cluster]`: the cluster as this device sees it.
    pub cluster: Option<ClusterView>,
    /// The person's pauses that hold now (the daemon's, or read from the book).
    pub pauses: crate::records::state::pause::Paused,
}

/// A keep-alive MCP server as the daemon's supervisor sees it (DESIGN §14).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct McpServerStatus {
    pub name: String,
    pub up: bool,
    /// Why it is down (with its last output), if it is.
    pub error: Option<String>,
}

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

/// `, 1 draft — held` when notes wait as drafts: they are pending, but never run until the
/// person takes `status: draft` out.
fn drafts_held(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => " (1 draft — held until you remove its `status: draft`)".into(),
        n => format!(" ({n} drafts — held until you remove their `status: draft`)"),
    }
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
        pauses: super::status_pause::views(&live.pauses),
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
    /// Runs waiting for the person's decision (DESIGN §22).
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
        paused: super::status_pause::of(&src.live.pauses, name),
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

/// The report as JSON, with `secrets` written back as `${VAR}` in every text (DESIGN §24).
pub fn to_json(report: &StatusReport, secrets: &Redactor) -> serde_json::Value {
    let mut json = serde_json::to_value(report).unwrap_or_default();
    secrets.apply_json(&mut json);
    json
}

/// Writes `agent/status.md` and `.tabd/status.json` (both atomically, through the vault), with
/// `secrets` written back as `${VAR}`: a provider's error, a channel's, a config error may quote
/// a value expanded from `${VAR}`.
pub fn write(vault: &Vault, report: &StatusReport, tz: Tz, secrets: &Redactor) {
    let note = secrets.apply(&render_note(report, tz));
    if let Ok(p) = VaultPath::parse(&vault.layout().status_note(), false) {
        if let Err(e) = vault.write_atomic_with(&p, note.as_bytes(), Durability::None) {
            tracing::warn!("cannot write {p}: {e}");
        }
    }
    if let (Ok(p), Ok(json)) = (
        VaultPath::parse(layout::STATUS_JSON, false),
        serde_json::to_vec_pretty(&to_json(report, secrets)),
    ) {
        if let Err(e) = vault.write_atomic_with(&p, &json, Durability::None) {
            tracing::warn!("cannot write .tabd/status.json: {e}");
        }
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

/// `when`, with seconds: a time min_interval holds something back to is to the second.
fn when_to_the_second(t: DateTime<Utc>, tz: Tz, now: DateTime<Utc>) -> String {
    let local = t.with_timezone(&tz);
    if local.date_naive() == now.with_timezone(&tz).date_naive() {
        local.format("%H:%M:%S").to_string()
    } else {
        local.format("%a %m-%d %H:%M:%S").to_string()
    }
}

fn spend(tokens: u64, budget: u64, cost: f64, cost_budget: Option<f64>) -> String {
    let mut s = format!("{} / {}", thousands(tokens), thousands(budget));
    match cost_budget {
        Some(b) => s.push_str(&format!(" · {} / {}", dollars(cost), dollars(b))),
        None if cost > 0.0 => s.push_str(&format!(" · {}", dollars(cost))),
        None => {}
    }
    s
}

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
        s.push_str(&format!("**Cluster:** {}\n\n", c.line(tz)));
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
    s.push_str(&super::status_pause::callout(&r.pauses, tz));
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

/// The role's state, with a pause that holds it and a run going on: `enabled · PAUSED until
/// `tabd resume` · running since 14:02:11 (inbox)`.
fn state_line(role: &RoleStatus, tz: Tz) -> String {
    let paused = super::status_pause::state_suffix(role.paused.as_ref(), tz);
    let state = format!("{}{paused}", role.state);
    match role.live.as_ref().and_then(|l| l.running_since.map(|t| (t, l))) {
        Some((since, l)) => format!(
            "{state} · running since {} ({})",
            since.with_timezone(&tz).format("%H:%M:%S"),
            l.running_trigger.as_deref().unwrap_or("run")
        ),
        None => state,
    }
}

/// Notes still being written: `1 note settling — waits 42 s more for you to finish typing`.
fn settling_line(view: &InboxView, now: DateTime<Utc>, tz: Tz) -> Option<String> {
    if view.settling == 0 {
        return None;
    }
    let count = format!(
        "{} note{} settling",
        view.settling,
        if view.settling == 1 { "" } else { "s" }
    );
    let wait = match view.settle_until {
        None => "empty, waits for its first words".to_string(),
        Some(t) => {
            let left = (t - now).num_seconds().max(0);
            let until = t.with_timezone(&tz).format("%H:%M:%S");
            if view.typing {
                format!(
                    "waits {left} s more (until {until}) for you to finish typing; `status: draft` holds it longer"
                )
            } else {
                format!("waits {left} s more (until {until}) to be sure it is complete")
            }
        }
    };
    Some(format!("{count} — {wait}"))
}

/// One role's row of the table.
fn note_row(role: &RoleStatus, now: DateTime<Utc>, tz: Tz) -> String {
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
    s.push_str(&super::status_pause::text_lines(&r.pauses, tz));
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
        s.push_str(&format!("cluster: {}\n", c.line(tz)));
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
    let now = Utc::now().max(r.updated_at);
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
fn runs_text(role: &RoleStatus, tz: Tz, now: DateTime<Utc>) -> String {
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::base::environment::Env;
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
        let text = runs_text(&status, chrono_tz::UTC, now);
        assert!(
            text.contains("  waits:     until 10:02:30: min_interval 2m")
                && text.contains(&format!("  next fire: 2026-11-25 10:02:30 UTC — {why}")),
            "{text}"
        );
        let row = note_row(&status, now, chrono_tz::UTC);
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
