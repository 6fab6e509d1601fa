//! What a decision still owes the note and the daily log (docs/spec.md §15). Every change of an
//! approval's phase is written into the ledger together with its follow-up — the note's new
//! status and line, the daily line — durably, and only then into the log and, last, the note;
//! the follow-up is cleared after. The note's status is what a person (and a script) waits on,
//! so it is written last: once it says `done`, the daily line it goes with is there. A crash
//! between leaves the follow-up in the ledger, and the next daemon pass (or the next
//! `tabd approve`/`tabd reject`) finishes it. Until then nothing else acts on that request: a
//! note a crash left saying `approved` over a request that became `unknown` is never taken for a
//! new approval.
//!
//! Finishing is done under one lock (`.tabd/approvals.lock`), so the daemon and a command never
//! write the same line twice; a note that already holds the line is not written again.

use crate::base::faults::Faults;
use crate::base::vault::{Durability, FileLock, Vault, VaultError, VaultPath};
use crate::records::runlog::RunLog;
use crate::records::state::approval_ledger::{Approval, Followup};
use crate::records::state::StateStore;

use super::note;

/// Longest note read for an update (an approval note is a few KiB; a larger one still gets its
/// status and the reason).
const MAX_NOTE_BYTES: u64 = 64 * 1024 * 1024;

/// The approvals lock, held: only its holder finishes follow-ups.
#[derive(Debug)]
pub struct Held {
    _lock: FileLock,
}

/// Takes the approvals lock (waits for a holder to finish: a few file writes).
pub fn hold(vault: &Vault) -> Result<Held, VaultError> {
    let path = VaultPath::parse(crate::base::vault::layout::APPROVALS_LOCK, false)?;
    match vault.lock(&path, true)? {
        Some(lock) => Ok(Held { _lock: lock }),
        None => Err(VaultError::Io(format!(
            "{path}: the lock was not taken although waiting was asked for"
        ))),
    }
}

/// What finishing did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Finished {
    /// Requests whose note and daily line are now written.
    pub done: Vec<String>,
    /// Requests whose note could not be written yet (tried again at the next pass).
    pub left: Vec<String>,
    /// Requests whose daily line could not be written, and why: not tried again (the note,
    /// written after it, clears the follow-up), so the caller says so where a person sees it.
    pub unlogged: Vec<(String, VaultError)>,
}

impl Held {
    /// Writes every follow-up still in the ledger into its note and the daily log, then clears
    /// it (the ledger keeps it if the note could not be written).
    pub fn finish(&self, store: &StateStore, log: &RunLog, faults: &Faults) -> Result<Finished, VaultError> {
        let owed: Vec<(String, Approval, Followup)> = store
            .try_load()?
            .approvals
            .into_iter()
            .filter_map(|(id, a)| a.followup.clone().map(|f| (id, a, f)))
            .collect();
        let mut out = Finished::default();
        for (id, a, f) in &owed {
            // The daily line before the note (see the module's doc); both are written once.
            if let Err(e) = write_daily(log, f) {
                out.unlogged.push((id.clone(), e));
            }
            faults.abort_at("approval-daily-written");
            if write_note(store.vault(), (id, a), f).is_err() {
                out.left.push(id.clone());
                continue;
            }
            out.done.push(id.clone());
        }
        if !out.done.is_empty() {
            // Cleared only if unchanged meanwhile; losing this write repeats idempotent work.
            store.update_with(Durability::File, |s| {
                for (id, _, f) in owed.iter().filter(|(id, ..)| out.done.contains(id)) {
                    if let Some(a) = s.approvals.get_mut(id).filter(|a| a.followup.as_ref() == Some(f)) {
                        a.followup = None;
                    }
                }
            })?;
        }
        Ok(out)
    }
}

/// Sets the note's status and appends the line, unless it already holds them. A note the person
/// deleted stays deleted (that counts as written: nothing could act on it); one whose frontmatter
/// cannot be read gets new frontmatter from the record, its text kept (`note::update_or_restore`).
/// Only a failed read or write is an error.
fn write_note(vault: &Vault, (id, a): (&str, &Approval), f: &Followup) -> Result<(), VaultError> {
    let Ok(path) = VaultPath::parse(&a.note, false) else {
        return Ok(());
    };
    let text = match vault.read_text(&path, MAX_NOTE_BYTES) {
        Ok(t) => t,
        Err(VaultError::NotFound(_)) => return Ok(()),
        Err(e) => {
            tracing::error!("approvals: cannot read {path} to set it {}: {e}", f.status);
            return Err(e);
        }
    };
    let status = note::read(&text).ok().and_then(|r| r.status);
    let line = f.line.trim_end();
    if status == Some(f.status) && text.contains(line) {
        return Ok(());
    }
    let updated = note::update_or_restore(&text, f.status, &f.line, (id, a));
    vault.write_atomic(&path, updated.as_bytes()).inspect_err(|e| {
        tracing::error!("approvals: cannot update {path}: {e}");
    })
}

/// The daily line, once (a line already in that day's note is not written again).
fn write_daily(log: &RunLog, f: &Followup) -> Result<(), VaultError> {
    if f.daily.is_empty() {
        return Ok(());
    }
    let path = log.daily_path(f.at);
    if log.daily_has(&path, &log.render_line(f.at, &f.who, &f.daily)) {
        return Ok(());
    }
    log.write_line(f.at, &f.who, &f.daily)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn setup() -> (tempfile::TempDir, StateStore, RunLog) {
        let dir = tempfile::tempdir().unwrap();
        let vault = Arc::new(Vault::open(dir.path()).unwrap());
        let guard = crate::base::vault::SpliceGuard::for_tests();
        let log = RunLog::writer(vault.clone(), chrono_tz::UTC, guard);
        (dir, StateStore::new(vault), log)
    }

    fn owed(line: &str) -> Followup {
        Followup {
            status: crate::records::state::approval_ledger::NoteStatus::Rejected,
            line: line.into(),
            daily: "approval `abc123` (test/post) rejected — nothing ran".into(),
            who: "Ops".into(),
            at: "2026-11-22T09:00:00Z".parse().unwrap(),
        }
    }

    #[test]
    fn a_followup_is_written_once_and_cleared_and_a_deleted_note_stays_deleted() {
        let (dir, store, log) = setup();
        let note = "agent/approvals/n.md";
        std::fs::create_dir_all(dir.path().join("agent/approvals")).unwrap();
        std::fs::write(
            dir.path().join(note),
            "---\nstatus: pending\nid: abc123\n---\n# T\n",
        )
        .unwrap();
        let mut a: crate::records::state::approval_ledger::Approval =
            serde_json::from_value(serde_json::json!({
                "role": "ops", "tool": "test/post", "exposed": "test__post", "risk": "network",
                "note": note, "args_hash": "", "run_id": "r",
                "created": "2026-11-22T09:00:00Z", "expires": "2026-11-24T09:00:00Z", "phase": "rejected"
            }))
            .unwrap();
        a.followup = Some(owed("**Rejected**: nothing was run."));
        let mut gone = a.clone();
        gone.note = "agent/approvals/deleted.md".into();
        store
            .update(|s| {
                s.approvals.insert("abc123".into(), a.clone());
                s.approvals.insert("def456".into(), gone.clone());
            })
            .unwrap();
        let held = hold(store.vault()).unwrap();
        let done = held.finish(&store, &log, &Faults::default()).unwrap();
        assert_eq!(done.done, ["abc123", "def456"]);
        let text = std::fs::read_to_string(dir.path().join(note)).unwrap();
        assert!(
            text.contains("status: rejected") && text.contains("**Rejected**"),
            "{text}"
        );
        assert!(!dir.path().join("agent/approvals/deleted.md").exists());
        assert!(store.load().approvals.values().all(|a| a.followup.is_none()));
        // Finished again (a crash before the clear): nothing is written twice.
        store
            .update(|s| {
                s.approvals.get_mut("abc123").unwrap().followup = Some(owed("**Rejected**: nothing was run."))
            })
            .unwrap();
        held.finish(&store, &log, &Faults::default()).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join(note)).unwrap(), text);
        let daily = std::fs::read_to_string(dir.path().join("daily/2026-11-22.md")).unwrap();
        assert_eq!(daily.matches("rejected — nothing ran").count(), 1, "{daily}");
    }
}
