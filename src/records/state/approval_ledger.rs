//! tabd's record of each approval request, kept in state.json and written durably (fsync of the
//! file and its folder) before anything is run. The note is what the person edits; the ledger is
//! what tabd trusts: a call runs only when its record moves from a runnable phase to `executing`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::base::calls::Risk;

/// Where a request is in its life, in one word: the ledger's `phase` and the note's `status`
/// are the same words (a person reads and sets the note's; tabd trusts the ledger's). Written as
/// the lowercase word, in state.json and in the note alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoteStatus {
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
    /// The server's sandbox refused what the call needed (docs/spec.md §20): it did not do its work;
    /// the person may grant it and approve the note again.
    Blocked,
}

impl NoteStatus {
    /// Every status, in the order of the enum.
    pub const ALL: [NoteStatus; 10] = [
        Self::Pending,
        Self::Approved,
        Self::Executing,
        Self::Done,
        Self::Failed,
        Self::Rejected,
        Self::Expired,
        Self::Invalid,
        Self::Unknown,
        Self::Blocked,
    ];

    /// The word as the note and the ledger write it.
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

    /// The status a note's `status` value names, in any case and with spaces around it; `None`
    /// for a word tabd does not use (a note saying it is left alone).
    pub fn parse(word: &str) -> Option<NoteStatus> {
        let word = word.trim();
        Self::ALL
            .into_iter()
            .find(|s| s.as_str().eq_ignore_ascii_case(word))
    }
}

impl std::fmt::Display for NoteStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
    pub phase: NoteStatus,
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
    /// Whether the person was told its outcome in the push's place (`Some(false)`: not yet, owed
    /// once it is decided, across restarts). `None`: pushed by a tabd that did not keep this, or
    /// never pushed — nothing is owed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_told: Option<bool>,
    /// What the note and the daily log must still say about the last change of `phase`: written
    /// into the ledger with the change (durably, first), then into the note and the log, then
    /// cleared. A crash between is finished from here; until then nothing else acts on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub followup: Option<Followup>,
    /// Other runs that asked for the same call while it was pending and share this approval
    /// (each may go on with its result: a suspended run resumes only with its own approvals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_for: Vec<String>,
    /// What the call is about, in words (`gate::approvals::gist`), for the note's title and the
    /// push; none in a record an older tabd wrote. Model text: bounded again where it is shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gist: Option<Gist>,
    /// The person's own notes the call changes, each as it was when the call was asked for
    /// (docs/spec.md §26): the change the note shows is against these; a note changed since is not
    /// written over (`approval_pass` checks before the call runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bases: Vec<Base>,
    /// Where the person's decision came from (none: not decided yet, or an older tabd's record):
    /// a later decision elsewhere is told "already decided (approved in its note at …)".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
    /// What is asked: a call (the default, and every record an older tabd wrote) or a run's
    /// checkpoint (docs/spec.md §28), which runs nothing.
    #[serde(default, skip_serializing_if = "Kind::is_call")]
    pub kind: Kind,
    /// The person's instruction at a checkpoint they let go on: their words for the model, kept
    /// apart from `outcome` (which says what happened).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
}

/// What a request asks the person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// To run a call.
    #[default]
    Call,
    /// To let a run go on at its checkpoint after `calls` tool calls (`checkpoint_every: every`).
    Checkpoint { calls: u32, every: u32 },
}

impl Kind {
    pub fn is_call(&self) -> bool {
        *self == Self::Call
    }
}

impl Approval {
    /// A run's checkpoint, not a call.
    pub fn is_checkpoint(&self) -> bool {
        !self.kind.is_call()
    }

    /// What is asked, in a few words for a list: the call's tool (as the model named it), or
    /// `checkpoint after 3 calls`.
    pub fn what(&self) -> String {
        match self.kind {
            Kind::Call => self.exposed.clone(),
            Kind::Checkpoint { calls, .. } => format!("checkpoint after {calls} calls"),
        }
    }

    /// The word a list shows in the risk column: the call's risk, or `checkpoint`.
    pub fn risk_word(&self) -> &'static str {
        match self.kind {
            Kind::Call => self.risk.as_str(),
            Kind::Checkpoint { .. } => "checkpoint",
        }
    }
}

/// Where a person decided an approval (docs/spec.md §27: one decision, from any of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecidedBy {
    /// Its note's `status`, set in Obsidian (or on another device, synced).
    Note,
    /// `tabd approve` or `tabd reject`.
    Terminal,
    /// A button of the push on the person's phone (ntfy), its decision token checked.
    Phone,
}

impl DecidedBy {
    /// How a line says where: `in its note`, `with tabd approve`, `from your phone`.
    pub fn words(self, approved: bool) -> &'static str {
        match (self, approved) {
            (Self::Note, _) => "in its note",
            (Self::Terminal, true) => "with `tabd approve`",
            (Self::Terminal, false) => "with `tabd reject`",
            (Self::Phone, _) => "from your phone",
        }
    }
}

/// A note of the person's as a change to it was asked for: its path and its content's digest
/// (`None`: it did not exist).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Base {
    pub path: String,
    pub digest: Option<String>,
}

/// A call's target and the first lines of its change, each on one line.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Gist {
    /// `write reviews/week.md`, `run slack/post (channel: C1)`.
    pub action: String,
    /// The change's first lines (empty: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub change: String,
}

/// What a decision still owes the note and the daily log (see `Approval::followup`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Followup {
    /// The note's `status` from now on.
    pub status: NoteStatus,
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

/// The kind of tabd's marks (outside the vault, `signing::Key::mark`) that say an approved call
/// was started: made (durably, and only if it is not there) before the ledger says `executing`,
/// so a copy of the ledger restored from before the call ran finds it and never runs it again.
pub const STARTED: &str = "approvals";

/// The name of the mark of the `execution`th start of request `id`: a digest of the id and of the
/// run that asked and when (an id given again, after the first request is long forgotten, finds
/// no old mark), so nothing of the vault's text reaches a file name.
pub fn started_mark(id: &str, a: &Approval, execution: u32) -> String {
    let mut h = Sha256::new();
    let created = a.created.to_rfc3339();
    let parts: [&[u8]; 4] = [
        id.as_bytes(),
        a.run_id.as_bytes(),
        created.as_bytes(),
        &execution.to_le_bytes(),
    ];
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// How long the marks of started calls are kept, and so how long after it was asked for a
/// request may still run (a mark forgotten must belong to a request that can no longer run):
/// the journal's `keep_days` (like tabd's other marks), never less than `KEEP_DECIDED_DAYS` nor
/// than a request waits for its decision (`expire_after`).
pub fn runs_within(keep_days: u32, expire_after: std::time::Duration) -> std::time::Duration {
    let days = u64::from(keep_days.max(KEEP_DECIDED_DAYS as u32));
    std::time::Duration::from_secs(days * 24 * 3600).max(expire_after)
}

/// Whether request `a` was asked for too long ago to run (its mark may be forgotten).
pub fn too_old(a: &Approval, now: DateTime<Utc>, within: std::time::Duration) -> bool {
    (now - a.created).to_std().is_ok_and(|age| age > within)
}

/// Forgets the marks of calls started longer ago than `within` (`runs_within`): their requests
/// can no longer run.
pub fn forget_old_marks(key: &crate::base::signing::Key, within: std::time::Duration) -> usize {
    key.forget_marks_older_than(STARTED, within)
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

    /// The mark of a call's start names that start of that request only, in a plain file name
    /// that holds nothing of the vault's text.
    #[test]
    fn a_started_mark_names_one_start_of_one_request() {
        let a = at("agent/approvals/2026-11-22-ops-test-post-7c41e0.md");
        let first = started_mark("7c41e0", &a, 1);
        assert_eq!(first, started_mark("7c41e0", &a.clone(), 1), "the same start");
        assert_eq!(first.len(), 32);
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
        let mut again = a.clone();
        again.created += chrono::Duration::days(90);
        let mut other_run = a.clone();
        other_run.run_id = "r2".into();
        for other in [
            started_mark("7c41e0", &a, 2),
            started_mark("7c41e1", &a, 1),
            started_mark("7c41e0", &again, 1),
            started_mark("7c41e0", &other_run, 1),
        ] {
            assert_ne!(first, other);
        }
    }

    /// A request runs only as long as the mark of its start is kept, and that is never shorter
    /// than the ledger keeps a decided request or a request waits for its decision.
    #[test]
    fn a_request_older_than_its_marks_are_kept_no_longer_runs() {
        let day = std::time::Duration::from_secs(86_400);
        assert_eq!(runs_within(30, 2 * day), 30 * day);
        assert_eq!(runs_within(90, 2 * day), 90 * day);
        assert_eq!(runs_within(0, 2 * day), 30 * day, "at least KEEP_DECIDED_DAYS");
        assert_eq!(runs_within(30, 45 * day), 45 * day, "at least expire_after");
        let a = at("n.md");
        let created = a.created;
        assert!(!too_old(&a, created + chrono::Duration::days(30), 30 * day));
        assert!(too_old(&a, created + chrono::Duration::days(31), 30 * day));
        assert!(
            !too_old(&a, created - chrono::Duration::days(1), 30 * day),
            "a clock behind"
        );
    }

    /// The note's `status` and the ledger's `phase` are the same words, written as before: a
    /// ledger an older tabd wrote (a follow-up's status was a string then) reads the same, and is
    /// written back byte for byte.
    #[test]
    fn a_status_is_one_word_in_the_note_and_the_ledger_and_old_ledgers_read_the_same() {
        for status in NoteStatus::ALL {
            let word = status.as_str();
            assert_eq!(serde_json::to_string(&status).unwrap(), format!("\"{word}\""));
            assert_eq!(NoteStatus::parse(word), Some(status));
            assert_eq!(
                NoteStatus::parse(&format!(" {} ", word.to_uppercase())),
                Some(status)
            );
            assert_eq!(status.to_string(), word);
        }
        assert_eq!(NoteStatus::parse("approve"), None, "a word tabd does not use");
        assert_eq!(NoteStatus::parse(""), None);
        let old = r#"{"role":"ops","tool":"test/post","exposed":"test__post","risk":"network","note":"n.md","args_hash":"","run_id":"r","created":"2026-11-22T09:00:00Z","expires":"2026-11-24T09:00:00Z","phase":"rejected","decided":null,"outcome":null,"reported":false,"executions":0,"hops":0,"notified":false,"followup":{"status":"rejected","line":"**Rejected**","daily":"","who":"Ops","at":"2026-11-22T09:00:00Z"}}"#;
        let a: Approval = serde_json::from_str(old).unwrap();
        assert_eq!(a.phase, NoteStatus::Rejected);
        assert_eq!(a.followup.as_ref().map(|f| f.status), Some(NoteStatus::Rejected));
        assert_eq!(serde_json::to_string(&a).unwrap(), old);
    }

    #[test]
    fn approved_from_the_terminal_may_run_but_is_no_longer_open() {
        assert!(NoteStatus::Approved.may_run() && !NoteStatus::Approved.is_open());
        assert!(!NoteStatus::Approved.is_decided(), "no outcome yet");
        for p in [
            NoteStatus::Pending,
            NoteStatus::Invalid,
            NoteStatus::Unknown,
            NoteStatus::Blocked,
        ] {
            assert!(p.is_open() && p.may_run(), "{p:?}");
        }
        for p in [
            NoteStatus::Executing,
            NoteStatus::Done,
            NoteStatus::Failed,
            NoteStatus::Rejected,
            NoteStatus::Expired,
        ] {
            assert!(!p.may_run(), "{p:?}");
        }
    }

    /// A checkpoint is recorded as one (`kind`), the person's instruction apart from its
    /// outcome; a record without `kind` (every one an older tabd wrote) is a call's, and is
    /// written back without it.
    #[test]
    fn a_checkpoint_is_recorded_as_one_and_older_records_are_calls() {
        let old = at("n.md");
        assert_eq!(old.kind, Kind::Call);
        assert!(!old.is_checkpoint() && old.instruction.is_none());
        assert_eq!((old.what().as_str(), old.risk_word()), ("test__post", "network"));
        let json = serde_json::to_value(&old).unwrap();
        assert!(
            json.get("kind").is_none() && json.get("instruction").is_none(),
            "{json}"
        );
        let mut c = at("c.md");
        c.kind = Kind::Checkpoint { calls: 6, every: 3 };
        c.outcome = Some("continued with your instruction".into());
        c.instruction = Some("use the archive".into());
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(
            json["kind"],
            serde_json::json!({"checkpoint": {"calls": 6, "every": 3}})
        );
        assert_eq!(json["instruction"], "use the archive");
        let back: Approval = serde_json::from_value(json).unwrap();
        assert_eq!(back, c);
        assert!(back.is_checkpoint());
        assert_eq!(
            (back.what().as_str(), back.risk_word()),
            ("checkpoint after 6 calls", "checkpoint")
        );
    }
}
