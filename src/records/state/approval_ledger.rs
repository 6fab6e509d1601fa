//! tabd's record of each approval request, kept in state.json and written durably (fsync of the
//! file and its folder) before anything is run. The note is what the person edits; the ledger is
//! what tabd trusts: a call runs only when its record moves from a runnable phase to `executing`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::base::calls::Risk;

/// Where a request is in its life. Matches the note's `status` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Waiting for the person.
    Pending,
    /// Recorded just before the call; replaced by the result after it.
    Executing,
    Done,
    Failed,
    Rejected,
    Expired,
    /// The approved arguments were refused (bad JSON, schema); the person may fix and re-approve.
    Invalid,
    /// tabd stopped during the call: it may or may not have happened.
    Unknown,
    /// The server's sandbox refused what the call needed (DESIGN §20): it did not do its work;
    /// the person may grant it and approve the note again.
    Blocked,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Executing => "executing",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Rejected => "rejected",
            Self::Expired => "expired",
            Self::Invalid => "invalid",
            Self::Unknown => "unknown",
            Self::Blocked => "blocked",
        }
    }

    /// An `approved` note in this phase may run: it never ran, or the person re-approved after
    /// being told the outcome is unknown, the arguments were invalid or the sandbox stopped it.
    pub fn may_run(self) -> bool {
        matches!(
            self,
            Self::Pending | Self::Invalid | Self::Unknown | Self::Blocked
        )
    }

    /// A phase whose outcome the role has not been told yet, once decided.
    pub fn is_decided(self) -> bool {
        !matches!(self, Self::Pending | Self::Executing)
    }
}

/// One approval request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    pub role: String,
    /// A vault tool's name or `server/tool`.
    pub tool: String,
    /// The name the model called it by.
    pub exposed: String,
    pub risk: Risk,
    /// The note's vault path.
    pub note: String,
    /// Of the arguments as the model gave them: identical pending requests share a note.
    pub args_hash: String,
    pub run_id: String,
    pub created: DateTime<Utc>,
    pub expires: DateTime<Utc>,
    pub phase: Phase,
    /// When the person's decision (or expiry) was acted on.
    #[serde(default)]
    pub decided: Option<DateTime<Utc>>,
    /// A line about the outcome, for the role's next prompt and `tabd approvals`.
    #[serde(default)]
    pub outcome: Option<String>,
    /// The role's prompt has carried the outcome.
    #[serde(default)]
    pub reported: bool,
    /// Times the call was started (at most one per approval; a re-approval after `unknown` adds one).
    #[serde(default)]
    pub executions: u32,
    /// Chain depth of the run that asked: an approved `trigger_role` continues that chain
    /// rather than starting a new one at 0.
    #[serde(default)]
    pub hops: u32,
    /// The person was told it waits (`[notify]`): once, across restarts.
    #[serde(default)]
    pub notified: bool,
}

/// Hash of a call's arguments (canonical: serde_json sorts object keys).
pub fn args_hash(tool: &str, args: &serde_json::Value) -> String {
    let mut h = Sha256::new();
    h.update(tool.as_bytes());
    h.update([0]);
    h.update(args.to_string().as_bytes());
    h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// Decided records are kept this long for `tabd approvals` and the next prompt, then dropped.
pub const KEEP_DECIDED_DAYS: i64 = 30;

/// Drops decided records older than `KEEP_DECIDED_DAYS` that the role has been told about.
pub fn prune(approvals: &mut std::collections::BTreeMap<String, Approval>, now: DateTime<Utc>) {
    approvals.retain(|_, a| {
        !(a.phase.is_decided()
            && a.reported
            && a.decided
                .is_some_and(|d| (now - d).num_days() > KEEP_DECIDED_DAYS))
    });
}
