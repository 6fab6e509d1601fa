//! What deciding an approval writes: the ledger (durably, first, with what it owes the note and
//! the daily log), then the note and the daily log (`followup`).

use chrono::{DateTime, Utc};

use crate::base::vault::{Vault, VaultPath};
use crate::gate::approvals::followup::{self, Finished};
use crate::records::state::approval_ledger::{Approval, Followup, NoteStatus};
use crate::records::state::StateStore;
use crate::running::run::RunEnv;
use crate::setup::role::RoleSet;

use super::note;

/// Longest note read for an update; an approval note is a few KiB (a larger one is refused to
/// run, but still gets its status and the reason).
const MAX_REWRITE_BYTES: u64 = 64 * 1024 * 1024;

/// A ledger change, durable (fsync) before it returns; off the async runtime's hands.
pub(super) fn update<T>(
    store: &StateStore,
    change: impl FnOnce(&mut crate::records::state::State) -> T,
) -> Result<T, crate::base::vault::VaultError> {
    crate::base::blocking::run(|| store.update(change))
}

/// What a change of `a`'s phase owes its note (`status`, `line`) and the daily log (`daily`).
pub(super) fn owed(
    roles: &RoleSet,
    a: &Approval,
    at: DateTime<Utc>,
    (status, line): (NoteStatus, String),
    daily: String,
) -> Followup {
    Followup {
        status,
        line,
        daily,
        who: who(roles, a).to_string(),
        at,
    }
}

/// Writes every follow-up the ledger holds into its note and the daily log (see `followup`).
pub(super) fn finish(env: &RunEnv) -> Finished {
    let done =
        crate::base::blocking::run(|| followup::hold(&env.vault)?.finish(&env.store, &env.log, &env.faults));
    let done = done.unwrap_or_else(|e| {
        tracing::error!("approvals: cannot finish writing decided notes: {e}");
        Finished::default()
    });
    for (_, e) in &done.unlogged {
        env.side.failed("the daily note (an approval's outcome)", e);
    }
    done
}

/// Sets the note's status and appends `line`; a note the person deleted stays deleted.
pub(super) fn rewrite(vault: &Vault, note_path: &str, status: NoteStatus, line: &str) {
    crate::base::blocking::run(|| rewrite_now(vault, note_path, status, line));
}

fn rewrite_now(vault: &Vault, note_path: &str, status: NoteStatus, line: &str) {
    let Ok(path) = VaultPath::parse(note_path, false) else {
        return;
    };
    let Ok(text) = vault.read_text(&path, MAX_REWRITE_BYTES) else {
        return;
    };
    match note::update(&text, status, line) {
        Ok(t) => {
            if let Err(e) = vault.write_atomic(&path, t.as_bytes()) {
                tracing::error!("approvals: cannot update {path}: {e}");
            }
        }
        Err(e) => {
            tracing::warn!("approvals: {path}: its frontmatter cannot be read ({e}); status not updated")
        }
    }
}

/// The role's display name (its name if it no longer exists).
fn who<'a>(roles: &'a RoleSet, a: &'a Approval) -> &'a str {
    roles
        .roles
        .get(&a.role)
        .map_or(a.role.as_str(), |r| r.display_name.as_str())
}
