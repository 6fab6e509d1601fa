//! What `tabd status` prints and `agent/status.md` shows: per role state, last run, next fire,
//! pending notes, tokens and dollars today; errors; the daemon and provider state. The daemon
//! also writes the same report as `.tabd/status.json`, with what only it knows (running runs,
//! notes still settling) and a `generation` that grows with every write.
//!
//! The model is here; `collect` makes it, `note` and `text` render it (sharing `words`), `pause`
//! shows the person's pauses.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::base::environment::Redactor;
use crate::base::vault::{layout, Durability, Vault, VaultPath};

mod collect;
mod note;
pub mod pause;
mod text;
mod words;

#[cfg(test)]
mod tests;

pub use collect::{collect, refresh_records, stranded_inboxes};
pub use note::render_note;
pub use text::render_text;

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
    /// Calls waiting for the person's approval (docs/spec.md §15): their note paths.
    pub pending_approvals: Vec<String>,
    /// Runs of this role waiting for the person's decision to go on (docs/spec.md §22): id and since.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_runs: Vec<(String, DateTime<Utc>)>,
    pub errors: Vec<String>,
    /// Only from the running daemon.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<InboxView>,
    /// The pause that holds it (`tabd pause`, docs/spec.md §28); `null` when none does.
    #[serde(default)]
    pub paused: Option<pause::PauseView>,
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
    /// Children (MCP servers, agent CLIs) start without a sandbox here: why (docs/spec.md §20).
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
    /// With `[cluster]` (docs/spec.md §23): this device, its quorum, the devices seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterView>,
    /// The person's pauses that hold now (`tabd pause`, docs/spec.md §28): the kill switch.
    #[serde(default)]
    pub pauses: Vec<pause::PauseView>,
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
    /// Why the children tabd starts run without a sandbox, if they do (docs/spec.md §20).
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

/// A keep-alive MCP server as the daemon's supervisor sees it (docs/spec.md §14).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct McpServerStatus {
    pub name: String,
    pub up: bool,
    /// Why it is down (with its last output), if it is.
    pub error: Option<String>,
}

/// The report as JSON, with `secrets` written back as `${VAR}` in every text (docs/spec.md §24).
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
