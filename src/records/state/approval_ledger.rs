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
    /// Approved with `tabd approve`: decided, and the daemon runs it (the note's status after
    /// that changes nothing; a decision printed on a terminal is final).
    Approved,
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
            Self::Approved => "approved",
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

    /// Open to the person's decision: it never ran, or they were told the outcome is unknown,
    /// the arguments were invalid or the sandbox stopped it, and may approve (or reject) again.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            Self::Pending | Self::Invalid | Self::Unknown | Self::Blocked
        )
    }

    /// The call may start: the note is approved and the request open, or it was approved
    /// from the terminal and has not run yet.
    pub fn may_run(self) -> bool {
        self.is_open() || self == Self::Approved
    }

    /// A phase whose outcome the role has not been told yet, once decided.
    pub fn is_decided(self) -> bool {
        !matches!(self, Self::Pending | Self::Approved | Self::Executing)
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
    /// What the note and the daily log must still say about the last change of `phase`: written
    /// into the ledger with the change (durably, first), then into the note and the log, then
    /// cleared. A crash between is finished from here; until then nothing else acts on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub followup: Option<Followup>,
    /// Other runs that asked for the same call while it was pending and share this approval
    /// (each may go on with its result: a suspended run resumes only with its own approvals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_for: Vec<String>,
}

/// What a decision still owes the note and the daily log (see `Approval::followup`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Followup {
    /// The note's `status` from now on.
    pub status: String,
    /// Appended to the note (a line, or a `## Result` section); empty: none. A note that already
    /// holds it is not written again.
    pub line: String,
    /// The daily log's line (empty: none), by whom (a role's display name) and when.
    pub daily: String,
    pub who: String,
    pub at: DateTime<Utc>,
}

/// Why an id names no single request (`tabd approve ID`, `tabd reject ID`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FindError {
    #[error("no approval {0}; `tabd approvals` lists the pending ones")]
    None(String),
    #[error("{0} matches {1} approvals; give more of it")]
    Several(String, usize),
}

/// The one lookup of a request by what a person types: its id (any case), a unique start of it,
/// or its note (path or file name, with or without `.md`, or as a `[[wikilink]]`).
pub fn find_key(
    all: &std::collections::BTreeMap<String, Approval>,
    given: &str,
) -> Result<String, FindError> {
    let wanted = given
        .trim()
        .trim_start_matches("[[")
        .trim_end_matches("]]")
        .trim_end_matches(".md");
    let lower = wanted.to_ascii_lowercase();
    if all.contains_key(&lower) {
        return Ok(lower);
    }
    let by_note: Vec<&String> = all
        .iter()
        .filter(|(_, a)| {
            let note = a.note.trim_end_matches(".md");
            !wanted.is_empty() && (note == wanted || note.rsplit('/').next() == Some(wanted))
        })
        .map(|(k, _)| k)
        .collect();
    let matches: Vec<&String> = if by_note.is_empty() && !lower.is_empty() {
        all.keys().filter(|k| k.starts_with(&lower)).collect()
    } else {
        by_note
    };
    match matches.as_slice() {
        [k] => Ok((*k).clone()),
        [] => Err(FindError::None(given.to_string())),
        many => Err(FindError::Several(given.to_string(), many.len())),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(note: &str) -> Approval {
        serde_json::from_value(serde_json::json!({
            "role": "ops", "tool": "test/post", "exposed": "test__post", "risk": "network",
            "note": note, "args_hash": "", "run_id": "r",
            "created": "2026-11-22T09:00:00Z", "expires": "2026-11-24T09:00:00Z", "phase": "pending"
        }))
        .unwrap()
    }

    #[test]
    fn one_lookup_by_id_any_case_a_unique_start_or_the_note() {
        let all: std::collections::BTreeMap<String, Approval> = [
            (
                "7c41e0".to_string(),
                at("agent/approvals/2026-11-22-ops-test-post-7c41e0.md"),
            ),
            (
                "7c9999".to_string(),
                at("agent/approvals/2026-11-22-ops-test-post-7c9999.md"),
            ),
        ]
        .into();
        for given in [
            "7c41e0",
            "7C41E0",
            "7c4",
            "2026-11-22-ops-test-post-7c41e0",
            "2026-11-22-ops-test-post-7c41e0.md",
            "agent/approvals/2026-11-22-ops-test-post-7c41e0.md",
            "[[agent/approvals/2026-11-22-ops-test-post-7c41e0]]",
        ] {
            assert_eq!(find_key(&all, given), Ok("7c41e0".to_string()), "{given}");
        }
        assert_eq!(find_key(&all, "7c"), Err(FindError::Several("7c".into(), 2)));
        assert_eq!(find_key(&all, "abc"), Err(FindError::None("abc".into())));
        assert_eq!(find_key(&all, ""), Err(FindError::None("".into())));
    }

    #[test]
    fn approved_from_the_terminal_may_run_but_is_no_longer_open() {
        assert!(Phase::Approved.may_run() && !Phase::Approved.is_open());
        assert!(!Phase::Approved.is_decided(), "no outcome yet");
        for p in [Phase::Pending, Phase::Invalid, Phase::Unknown, Phase::Blocked] {
            assert!(p.is_open() && p.may_run(), "{p:?}");
        }
        for p in [
            Phase::Executing,
            Phase::Done,
            Phase::Failed,
            Phase::Rejected,
            Phase::Expired,
        ] {
            assert!(!p.may_run(), "{p:?}");
        }
    }
}
