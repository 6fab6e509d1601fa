//! A run that waits for the person (docs/spec.md §22): when one of its calls needs approval, the turn
//! is suspended — its conversation, what it has spent, its deadline and chain depth saved under
//! `.tabd/suspended/` — and the run goes on, as a second part with the same id, once every call
//! it waits for is decided: the model gets each call's real result (or "rejected", "expired")
//! where it would have got "queued". A second part starts at most once, even across a crash.
//!
//! The record decides an action, so it is signed (issue 36, finding 8; docs/spec.md §24): saved with
//! tabd's key's MAC over the run id and the whole record (role, the approvals it waits for, what
//! it spent), and read back only if the MAC holds — counters and all come from the signed record.
//! The approvals it waits for must be its own (the ledger names its run), and "the second part
//! of this wait started" is a mark outside the vault beside the key (`base::signing`), made
//! before the second part sends anything: an old copy of the record that comes back (a backup, a
//! sync tool) — with `.tabd/state.json` restored too — finds the mark and is set aside. A record
//! that fails any of this is set aside under `.tabd/suspended/refused/`, said in the log and the
//! daily note, and never resumed.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::base::run_id::{BadRunId, RunId};
use crate::base::signing::Key;
use crate::base::vault::{Durability, Vault, VaultError, VaultPath};
use crate::capabilities::provider::{Block, Message};
use crate::gate::approvals::NoteStatus;
use crate::records::state::State;
use crate::running::turn::{Suspension, CHECKPOINT_CALL};

const DIR: &str = crate::base::vault::layout::SUSPENDED;

/// What a record's MAC is for (see `base::signing`).
const PURPOSE: &str = "tabd suspended run";

/// The marks (outside the vault) of second parts that started: `<run id>.<wait>`.
const RESUMED: &str = "resumed";

/// A record older than this is not resumed (and marks older than this are forgotten): every
/// approval has expired long before, and a copy this old coming back is no run to go on.
pub const MAX_AGE: std::time::Duration = std::time::Duration::from_secs(400 * 24 * 3600);

/// One suspended run, as saved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Suspended {
    pub run_id: RunId,
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
    /// Which wait of the run this is (1 the first; a second part that waits again saves the
    /// next): with the run id, names the mark of its second part.
    #[serde(default = "first_wait")]
    pub wait: u32,
}

fn first_wait() -> u32 {
    1
}

/// Where the record of run `run_id` is (a checked id: one file in the folder).
pub fn path_of(run_id: &RunId) -> Result<VaultPath, VaultError> {
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

/// Saves `s` atomically and signed (and durably: a run's second part must not be lost to a
/// power cut).
pub fn save(vault: &Vault, key: &Key, s: &Suspended) -> Result<(), VaultError> {
    let path = path_of(&s.run_id)?;
    vault.create_dir_all(&path.parent())?;
    let json = serde_json::to_vec(s).map_err(|e| VaultError::Io(e.to_string()))?;
    let sealed = key.seal(PURPOSE, &[s.run_id.as_bytes()], &json);
    vault.write_atomic_with(&path, &sealed, Durability::File)
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

/// A record found under `.tabd/suspended/`.
#[derive(Debug)]
pub enum Found {
    /// Signed by this machine's key for its run.
    Signed(Box<Suspended>),
    /// Not to be resumed: where it is, and why.
    Refused { path: VaultPath, why: String },
}

/// Every suspended record, the signed ones oldest first.
pub fn all(vault: &Vault, key: &Key) -> Vec<Found> {
    let mut out: Vec<Found> = files(vault)
        .into_iter()
        .filter_map(|path| match vault.read_bytes(&path, MAX_RECORD) {
            Ok((bytes, _)) => Some(match check(key, &path, &bytes) {
                Ok(s) => Found::Signed(Box::new(s)),
                Err(why) => Found::Refused {
                    path,
                    why: why.to_string(),
                },
            }),
            // A record no run of tabd's could have left: set aside like a forged one.
            Err(e @ (VaultError::TooLarge { .. } | VaultError::NotRegular { .. })) => Some(Found::Refused {
                path,
                why: format!("it cannot be read: {e}"),
            }),
            // Not its content's fault (the disk): left where it is, said.
            Err(e) => {
                tracing::warn!("cannot read the suspended run {path}: {e}; it stays as it is");
                None
            }
        })
        .collect();
    out.sort_by_key(|f| match f {
        Found::Signed(s) => Some(s.suspended_at),
        Found::Refused { .. } => None,
    });
    out
}

/// Every suspended run as the status shows it (its conversation skipped, its signature not
/// checked: the daemon sets aside what it does not trust).
pub fn waiting(vault: &Vault) -> Vec<Waiting> {
    let mut out: Vec<Waiting> = files(vault)
        .into_iter()
        .filter_map(|path| {
            let (bytes, _) = vault.read_bytes(&path, MAX_RECORD).ok()?;
            let body = bytes.splitn(2, |b| *b == b'\n').last()?;
            serde_json::from_slice(body).ok()
        })
        .collect();
    out.sort_by_key(|s| s.suspended_at);
    out
}

/// Why a suspended record is not taken (the sentence goes into the log and the daily note).
#[derive(Debug, thiserror::Error)]
pub enum NotResumable {
    #[error("its name is no run id: {0}")]
    Name(#[from] BadRunId),
    #[error("it cannot be read: {0}")]
    Unreadable(#[from] VaultError),
    #[error("it is not signed by this machine's key for run {run_id}: {why}")]
    Unsigned {
        run_id: RunId,
        why: crate::base::signing::Unsealed,
    },
    #[error("it cannot be read: {0}")]
    Malformed(#[from] serde_json::Error),
    #[error("it names another run ({0})")]
    AnotherRun(RunId),
    #[error("cannot record that it goes on: {0}")]
    Unrecorded(VaultError),
    #[error("its second part started already (this record is an old copy)")]
    StartedAlready,
    #[error(
        "cannot record outside the vault that it goes on ({0}), so it could not be kept from going on twice"
    )]
    Unmarked(std::io::Error),
}

/// The suspended run `run_id`, if it is there and signed by this machine's key for that run.
pub fn load(vault: &Vault, key: &Key, run_id: &RunId) -> Result<Suspended, NotResumable> {
    let path = path_of(run_id)?;
    let (bytes, _) = vault.read_bytes(&path, MAX_RECORD)?;
    check(key, &path, &bytes)
}

/// The largest record read (a long conversation).
const MAX_RECORD: u64 = 64 * 1024 * 1024;

/// The records' paths (`<run id>.json`; not temp files, not those set aside).
fn files(vault: &Vault) -> Vec<VaultPath> {
    let Ok(dir) = VaultPath::parse(DIR, false) else {
        return Vec::new();
    };
    vault
        .list(&dir)
        .map(|l| l.entries)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.is_file && e.path.file_name().ends_with(".json") && !e.path.file_name().starts_with('.')
        })
        .map(|e| e.path)
        .collect()
}

/// The record `bytes` read from `path`, if this machine's key signed it for the run its name
/// says; else why not.
fn check(key: &Key, path: &VaultPath, bytes: &[u8]) -> Result<Suspended, NotResumable> {
    let run_id = RunId::parse(path.file_name().trim_end_matches(".json"))?;
    let body = key
        .open(PURPOSE, &[run_id.as_bytes()], bytes)
        .map_err(|e| NotResumable::Unsigned {
            run_id: run_id.clone(),
            why: e,
        })?;
    let s: Suspended = serde_json::from_slice(body)?;
    if s.run_id != run_id {
        return Err(NotResumable::AnotherRun(s.run_id));
    }
    Ok(s)
}

/// Puts a record that is not to be resumed aside, under `.tabd/suspended/refused/` (kept for
/// the person to look at; never read as a suspended run again).
pub fn set_aside(vault: &Vault, path: &VaultPath) {
    let moved = VaultPath::parse(&format!("{DIR}/refused/{}", path.file_name()), false).and_then(|to| {
        vault.create_dir_all(&to.parent())?;
        vault.rename_replace(path, &to)
    });
    if let Err(e) = moved {
        tracing::warn!("cannot set aside {path}: {e}; removing it");
        #[allow(
            clippy::let_underscore_must_use,
            reason = "a record that can be neither set aside nor removed is refused again at the next read, with its warning"
        )]
        let _ = vault.remove_file(path);
    }
}

pub fn remove(vault: &Vault, run_id: &RunId) {
    if let Ok(p) = path_of(run_id) {
        if let Err(e) = vault.remove_file(&p) {
            tracing::warn!("cannot remove the finished suspended run {run_id}: {e}");
        }
    }
}

/// The name of the mark of `s`'s second part.
fn mark_name(s: &Suspended) -> String {
    format!("{}.{}", s.run_id, s.wait)
}

/// Whether the second part of this wait of the run has started already (its mark is there,
/// outside the vault): a record saying otherwise is an old copy.
pub fn second_part_started(key: &Key, s: &Suspended) -> bool {
    key.is_marked(RESUMED, &mark_name(s))
}

/// Whether the record of `s`, read back now, is no longer the one read: gone (its second part
/// ended), marked `resuming`, or at a later wait. Then a mark of `s`'s second part is that part's
/// own, made after `s` was read — `mark_resuming` saves `resuming` before it marks, so a record
/// still as read while the mark is there is an old copy. One that cannot be read now counts as
/// moved on: the next look judges it again.
pub fn moved_on_since(vault: &Vault, key: &Key, s: &Suspended) -> bool {
    match load(vault, key, &s.run_id) {
        Ok(now) => now.resuming || now.wait != s.wait,
        Err(_) => true,
    }
}

/// Why `s` is not to be resumed even though it is signed: too old, or waiting for an approval
/// that is not its own (the ledger names another run or role). `None`: it may go on.
pub fn refusal(state: &State, s: &Suspended, now: DateTime<Utc>) -> Option<String> {
    let age = (now - s.suspended_at).to_std().unwrap_or_default();
    if age > MAX_AGE {
        return Some(format!(
            "it waited since {}, longer than any approval lasts",
            s.suspended_at.format("%Y-%m-%d")
        ));
    }
    s.turn.waiting.iter().find_map(|(_, note)| {
        let (id, a) = approval_of(state, note)?;
        let ours = a.role == s.role && (a.run_id == s.run_id || a.also_for.iter().any(|r| *r == s.run_id));
        (!ours).then(|| {
            format!(
                "it waits for approval {id}, which run {} asked for, not this run",
                a.run_id
            )
        })
    })
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
            if a.is_checkpoint() && call_id == CHECKPOINT_CALL {
                return checkpoint_decision(a.phase, a.instruction.as_deref().unwrap_or_default());
            }
            let (text, is_error) = match a.phase {
                NoteStatus::Pending | NoteStatus::Approved | NoteStatus::Executing => return None,
                NoteStatus::Done => (format!("The person approved this call and it ran: {outcome}"), false),
                NoteStatus::Rejected => ("The person rejected this call: it did not run. Do not try it again.".into(), true),
                NoteStatus::Expired => ("Nobody decided about this call in time: it did not run.".into(), true),
                NoteStatus::Failed | NoteStatus::Invalid | NoteStatus::Blocked => {
                    (format!("The person approved this call, but it did not succeed: {outcome}"), true)
                }
                NoteStatus::Unknown => (
                    format!("The person approved this call; it may or may not have happened (tabd stopped during it): {outcome}"),
                    true,
                ),
            };
            Some((call_id.clone(), text, is_error))
        })
        .collect()
}

/// What the person decided at a checkpoint: go on (with their instruction, maybe empty), or
/// stop (`is_error`, and why); `None` while it waits.
fn checkpoint_decision(phase: NoteStatus, instruction: &str) -> Option<(String, String, bool)> {
    let (text, stop) = match phase {
        NoteStatus::Pending | NoteStatus::Approved | NoteStatus::Executing => return None,
        NoteStatus::Done => (instruction.to_string(), false),
        NoteStatus::Expired => ("nobody decided at the checkpoint in time".to_string(), true),
        _ => ("at the checkpoint".to_string(), true),
    };
    Some((CHECKPOINT_CALL.to_string(), text, stop))
}

/// Why the run stops at a checkpoint, if the person stopped it there (or let it expire).
pub fn stopped_at_checkpoint(decided: &[(String, String, bool)]) -> Option<String> {
    decided
        .iter()
        .find(|d| d.0 == CHECKPOINT_CALL && d.2)
        .map(|d| d.1.clone())
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
            // A checkpoint answers no call of the model's, whatever id it gave one.
            Block::ToolResult { tool_use_id, .. } => match decided
                .iter()
                .find(|d| &d.0 == tool_use_id && d.0 != CHECKPOINT_CALL)
            {
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
    let mut results = results;
    // The person's instruction at a checkpoint: their words, in a text of its own after the
    // calls' results — never one of them.
    if let Some((_, said, _)) = decided
        .iter()
        .find(|d| d.0 == CHECKPOINT_CALL && !d.2 && !d.1.trim().is_empty())
    {
        results.push(Block::Text {
            text: format!(
                "The person looked at this run at its checkpoint and lets it go on. The person's \
                 instruction, in their own words:\n\n{said}"
            ),
            cache: false,
        });
    }
    let mut req = s.turn.request.clone();
    req.messages.push(Message::user(results));
    req
}

/// Marks `s` as resuming, durably, before its second part starts: in the record (a crash from
/// here on is said at the next start) and outside the vault (an old copy of the record never
/// starts it again). `Err`: it must not start (it started already, or the mark cannot be made).
pub fn mark_resuming(vault: &Vault, key: &Key, s: &mut Suspended) -> Result<(), NotResumable> {
    s.resuming = true;
    save(vault, key, s).map_err(NotResumable::Unrecorded)?;
    claim_second_part(key, s)
}

/// Marks outside the vault that the second part of `s`'s wait starts (durably); `Err` when it
/// started already or the mark cannot be made.
pub fn claim_second_part(key: &Key, s: &Suspended) -> Result<(), NotResumable> {
    match key.mark(RESUMED, &mark_name(s), true) {
        Ok(true) => Ok(()),
        Ok(false) => Err(NotResumable::StartedAlready),
        Err(e) => Err(NotResumable::Unmarked(e)),
    }
}

/// Forgets the marks of second parts older than `MAX_AGE` (records that old are refused).
pub fn forget_old_marks(key: &Key) -> usize {
    key.forget_marks_older_than(RESUMED, MAX_AGE)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record(run_id: &str, role: &str, note: &str) -> Suspended {
        serde_json::from_value(serde_json::json!({
            "run_id": run_id,
            "role": role,
            "started_at": "2026-11-20T09:00:00Z",
            "suspended_at": "2026-11-20T09:00:05Z",
            "turn": {
                "request": {"model": "m", "system": "", "messages": [], "tools": [], "max_tokens": 100,
                            "temperature": null, "thinking_budget": 0, "tool_choice_none": false, "cache_ttl": null},
                "results": [],
                "waiting": [["call-1", note]]
            },
            "spent_tokens": 1200, "spent_usd": 0.5, "tool_calls": 7, "deadline_left_ms": 60000,
            "hops": 0, "role_hash": ""
        }))
        .unwrap()
    }

    fn approval(run_id: &str, role: &str, note: &str) -> crate::gate::approvals::Approval {
        serde_json::from_value(serde_json::json!({
            "role": role, "tool": "write_file", "exposed": "write_file", "risk": "write",
            "note": note, "args_hash": "", "run_id": run_id,
            "created": "2026-11-20T09:00:05Z", "expires": "2026-11-22T09:00:05Z", "phase": "done"
        }))
        .unwrap()
    }

    /// Issue 36, finding 8: a record edited in the vault (its counters zeroed) or copied under
    /// another run's name does not open; the one tabd saved does, counters and all.
    #[test]
    fn a_record_opens_only_as_this_machine_saved_it_for_its_run() {
        let dir = tempfile::tempdir().unwrap();
        let vault = Vault::open(dir.path()).unwrap();
        let key = Key::from_bytes(&[5; 32]);
        let s = record("20261120T090000Z-ops-00000001", "ops", "agent/approvals/a.md");
        save(&vault, &key, &s).unwrap();
        let back = load(&vault, &key, &s.run_id).unwrap();
        assert_eq!((back.tool_calls, back.spent_tokens, back.wait), (7, 1200, 1));

        let path = path_of(&s.run_id).unwrap();
        let text = vault.read_text(&path, 1 << 20).unwrap();
        vault
            .write_atomic(
                &path,
                text.replace("\"tool_calls\":7", "\"tool_calls\":0").as_bytes(),
            )
            .unwrap();
        let why = load(&vault, &key, &s.run_id).unwrap_err().to_string();
        assert!(why.contains("not signed by this machine's key"), "{why}");

        let other_id = RunId::parse("20261120T090000Z-ops-00000002").unwrap();
        let other = path_of(&other_id).unwrap();
        vault.write_atomic(&other, text.as_bytes()).unwrap();
        assert!(load(&vault, &key, &other_id).is_err(), "bound to its run");
        let plain = serde_json::to_vec(&s).unwrap();
        vault.write_atomic(&path, &plain).unwrap();
        let why = load(&vault, &key, &s.run_id).unwrap_err().to_string();
        assert!(why.contains("no signature"), "an older tabd's record: {why}");
    }

    /// A record read just before its second part marked it has moved on when read again (marked
    /// `resuming`, waiting again, or ended); an old copy put back as it was read has not.
    #[test]
    fn a_record_read_before_its_second_part_started_has_moved_on_an_old_copy_has_not() {
        let dir = tempfile::tempdir().unwrap();
        let vault = Vault::open(dir.path()).unwrap();
        let key = Key::from_bytes(&[5; 32]);
        let read = record("20261120T090000Z-ops-00000001", "ops", "agent/approvals/a.md");
        save(&vault, &key, &read).unwrap();
        assert!(!moved_on_since(&vault, &key, &read), "still as read");

        let mut now = read.clone();
        now.resuming = true;
        save(&vault, &key, &now).unwrap();
        assert!(moved_on_since(&vault, &key, &read), "its second part started");

        now.resuming = false;
        now.wait += 1;
        save(&vault, &key, &now).unwrap();
        assert!(moved_on_since(&vault, &key, &read), "it waits again");

        remove(&vault, &read.run_id);
        assert!(moved_on_since(&vault, &key, &read), "its second part ended");

        save(&vault, &key, &read).unwrap();
        assert!(
            !moved_on_since(&vault, &key, &read),
            "an old copy put back as it was read"
        );
    }

    /// A record is read only under a name that is a run id: a name that is none (here, a copy
    /// named so that the id would be a path) is refused with the reason, before its signature.
    #[test]
    fn a_record_under_a_name_that_is_no_run_id_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let vault = Vault::open(dir.path()).unwrap();
        let key = Key::from_bytes(&[5; 32]);
        let s = record("20261120T090000Z-ops-00000001", "ops", "agent/approvals/a.md");
        save(&vault, &key, &s).unwrap();
        let text = vault.read_text(&path_of(&s.run_id).unwrap(), 1 << 20).unwrap();
        let odd = VaultPath::parse(&format!("{DIR}/ops..x.json"), false).unwrap();
        vault.write_atomic(&odd, text.as_bytes()).unwrap();
        let refused: Vec<String> = all(&vault, &key)
            .into_iter()
            .filter_map(|f| match f {
                Found::Refused { path, why } => Some(format!("{path}: {why}")),
                Found::Signed(_) => None,
            })
            .collect();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].contains("its name is no run id"), "{refused:?}");
    }

    /// Issue 36, finding 8: a record resumes only with its own approvals — one the ledger says
    /// another run (or role) asked for gets nothing; a run that shared a pending request (same
    /// call, reused note) does; a record older than any approval does not.
    #[test]
    fn a_record_waiting_for_another_runs_approval_is_refused() {
        let note = "agent/approvals/a.md";
        let now: DateTime<Utc> = "2026-11-20T10:00:00Z".parse().unwrap();
        let mut state = State::default();
        state.approvals.insert(
            "abc123".into(),
            approval("20261120T080000Z-ops-0000000a", "ops", note),
        );
        let s = record("20261120T090000Z-ops-00000001", "ops", note);
        let why = refusal(&state, &s, now).expect("another run's approval");
        assert!(
            why.contains("abc123") && why.contains("20261120T080000Z-ops-0000000a"),
            "{why}"
        );

        if let Some(a) = state.approvals.get_mut("abc123") {
            a.also_for.push(s.run_id.to_string());
        }
        assert_eq!(refusal(&state, &s, now), None, "it shared the request");
        let other_role = record("20261120T090000Z-ops-00000001", "comms", note);
        assert!(refusal(&state, &other_role, now).is_some());
        let later = now + chrono::Duration::days(401);
        assert!(refusal(&state, &s, later).is_some_and(|w| w.contains("longer than any approval")));
    }
}
