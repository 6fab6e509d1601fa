//! A run that waits for the person (DESIGN §22): when one of its calls needs approval, the turn
//! is suspended — its conversation, what it has spent, its deadline and chain depth saved under
//! `.tabd/suspended/` — and the run goes on, as a second part with the same id, once every call
//! it waits for is decided: the model gets each call's real result (or "rejected", "expired")
//! where it would have got "queued". A second part starts at most once, even across a crash.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::RunEnv;
use crate::base::vault::{Durability, Vault, VaultError, VaultPath};
use crate::capabilities::provider::{Block, Message};
use crate::gate::approvals::Phase;
use crate::records::state::State;
use crate::running::turn::Suspension;

const DIR: &str = crate::base::vault::layout::SUSPENDED;

/// One suspended run, as saved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Suspended {
    pub run_id: String,
    pub role: String,
    pub started_at: DateTime<Utc>,
    pub suspended_at: DateTime<Utc>,
    pub turn: Suspension,
    /// What the run had spent and used when it stopped: the second part gets what is left.
    pub spent_tokens: u64,
    pub spent_usd: f64,
    pub tool_calls: u32,
    /// How much of its run deadline was left.
    pub deadline_left_ms: u64,
    pub hops: u32,
    /// The role file's digest when it asked (a changed role is said in the second part).
    pub role_hash: String,
    /// Set (durably) just before the second part starts: it never starts twice.
    #[serde(default)]
    pub resuming: bool,
}

fn path_of(run_id: &str) -> Result<VaultPath, VaultError> {
    VaultPath::parse(&format!("{DIR}/{run_id}.json"), false)
}

/// The digest of a role's file as it is now (empty when it cannot be read).
pub fn role_hash(vault: &Vault, role_path: &std::path::Path) -> String {
    VaultPath::parse(&role_path.to_string_lossy(), false)
        .ok()
        .and_then(|p| vault.read_bytes(&p, 16 * 1024 * 1024).ok())
        .map(|(b, _)| crate::records::journal::digest(&b))
        .unwrap_or_default()
}

/// Saves `s` atomically (and durably: a run's second part must not be lost to a power cut).
pub fn save(vault: &Vault, s: &Suspended) -> Result<(), VaultError> {
    let path = path_of(&s.run_id)?;
    vault.create_dir_all(&path.parent())?;
    let json = serde_json::to_vec(s).map_err(|e| VaultError::Io(e.to_string()))?;
    vault.write_atomic_with(&path, &json, Durability::File)
}

/// What `tabd status` shows of a suspended run: read without its conversation.
#[derive(Debug, Clone, Deserialize)]
pub struct Waiting {
    pub run_id: String,
    pub role: String,
    pub suspended_at: DateTime<Utc>,
    #[serde(default)]
    pub resuming: bool,
}

/// Every suspended run, oldest first. A record that cannot be read is named in the log and left.
pub fn all(vault: &Vault) -> Vec<Suspended> {
    let mut out: Vec<Suspended> = read_all(vault);
    out.sort_by_key(|s| s.suspended_at);
    out
}

/// Every suspended run as the status shows it (the conversations are skipped, not kept).
pub fn waiting(vault: &Vault) -> Vec<Waiting> {
    let mut out: Vec<Waiting> = read_all(vault);
    out.sort_by_key(|s| s.suspended_at);
    out
}

/// The suspended run `run_id`, if it is there and readable.
pub fn load(vault: &Vault, run_id: &str) -> Option<Suspended> {
    let text = vault.read_text(&path_of(run_id).ok()?, MAX_RECORD).ok()?;
    parsed(&text, run_id)
}

/// The largest record read (a long conversation).
const MAX_RECORD: u64 = 64 * 1024 * 1024;

fn read_all<T: serde::de::DeserializeOwned>(vault: &Vault) -> Vec<T> {
    let Ok(dir) = VaultPath::parse(DIR, false) else {
        return Vec::new();
    };
    vault
        .list(&dir)
        .map(|l| l.entries)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.path.file_name().ends_with(".json"))
        .filter_map(|e| {
            let text = vault.read_text(&e.path, MAX_RECORD).ok()?;
            parsed(&text, e.path.as_str())
        })
        .collect()
}

fn parsed<T: serde::de::DeserializeOwned>(text: &str, name: &str) -> Option<T> {
    serde_json::from_str(text)
        .inspect_err(|err| tracing::warn!("cannot read the suspended run {name}: {err}; it stays as it is"))
        .ok()
}

pub fn remove(vault: &Vault, run_id: &str) {
    if let Ok(p) = path_of(run_id) {
        if let Err(e) = vault.remove_file(&p) {
            tracing::warn!("cannot remove the finished suspended run {run_id}: {e}");
        }
    }
}

/// What the person decided about each waiting call, once all are decided: the model's call id
/// and the result it gets. `None` while one still waits (or runs).
pub fn decisions(state: &State, s: &Suspended) -> Option<Vec<(String, String, bool)>> {
    s.turn
        .waiting
        .iter()
        .map(|(call_id, note)| {
            let (_, a) = approval_of(state, note)?;
            let outcome = a.outcome.clone().unwrap_or_default();
            let (text, is_error) = match a.phase {
                Phase::Pending | Phase::Approved | Phase::Executing => return None,
                Phase::Done => (format!("The person approved this call and it ran: {outcome}"), false),
                Phase::Rejected => ("The person rejected this call: it did not run. Do not try it again.".into(), true),
                Phase::Expired => ("Nobody decided about this call in time: it did not run.".into(), true),
                Phase::Failed | Phase::Invalid | Phase::Blocked => {
                    (format!("The person approved this call, but it did not succeed: {outcome}"), true)
                }
                Phase::Unknown => (
                    format!("The person approved this call; it may or may not have happened (tabd stopped during it): {outcome}"),
                    true,
                ),
            };
            Some((call_id.clone(), text, is_error))
        })
        .collect()
}

/// The approval (id and record) an approval note stands for.
pub fn approval_of<'a>(
    state: &'a State,
    note: &str,
) -> Option<(&'a String, &'a crate::gate::approvals::Approval)> {
    state.approvals.iter().find(|(_, a)| a.note == note)
}

/// The conversation the second part sends: the saved one, with each call's result — the waiting
/// ones' replaced by what was decided.
pub fn continued(
    s: &Suspended,
    decided: &[(String, String, bool)],
) -> crate::capabilities::provider::Request {
    let results: Vec<Block> = s
        .turn
        .results
        .iter()
        .map(|b| match b {
            Block::ToolResult { tool_use_id, .. } => match decided.iter().find(|d| &d.0 == tool_use_id) {
                Some((id, text, is_error)) => Block::ToolResult {
                    tool_use_id: id.clone(),
                    content: text.clone(),
                    is_error: *is_error,
                },
                None => b.clone(),
            },
            other => other.clone(),
        })
        .collect();
    let mut req = s.turn.request.clone();
    req.messages.push(Message::user(results));
    req
}

/// Marks `s` as resuming, durably, before its second part starts.
pub fn mark_resuming(env: &RunEnv, s: &mut Suspended) -> Result<(), VaultError> {
    s.resuming = true;
    save(&env.vault, s)
}

/// "2 h 14 min", "3 min", "40 s".
pub fn waited(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let secs = (to - from).num_seconds().max(0);
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}
