//! What deciding an approval writes: the ledger (durably, first), the note, the daily log.

use crate::base::vault::VaultPath;
use crate::records::state::approval_ledger::Approval;
use crate::running::run::RunEnv;

use super::note;

/// Longest note read for an update; an approval note is a few KiB (a larger one is refused to
/// run, but still gets its status and the reason).
const MAX_REWRITE_BYTES: u64 = 64 * 1024 * 1024;

/// A ledger change, durable (fsync) before it returns; off the async runtime's hands.
pub(super) fn update<T>(
    env: &RunEnv,
    change: impl FnOnce(&mut crate::records::state::State) -> T,
) -> Result<T, crate::base::vault::VaultError> {
    crate::base::blocking::run(|| env.store.update(change))
}

/// Sets the note's status and appends `line`; a note the person deleted stays deleted.
pub(super) fn rewrite(env: &RunEnv, note_path: &str, status: &str, line: &str) {
    crate::base::blocking::run(|| rewrite_now(env, note_path, status, line));
}

fn rewrite_now(env: &RunEnv, note_path: &str, status: &str, line: &str) {
    let Ok(path) = VaultPath::parse(note_path, false) else {
        return;
    };
    let Ok(text) = env.vault.read_text(&path, MAX_REWRITE_BYTES) else {
        return;
    };
    match note::update(&text, status, line) {
        Ok(t) => {
            if let Err(e) = env.vault.write_atomic(&path, t.as_bytes()) {
                tracing::error!("approvals: cannot update {path}: {e}");
            }
        }
        Err(e) => {
            tracing::warn!("approvals: {path}: its frontmatter cannot be read ({e}); status not updated")
        }
    }
}

pub(super) fn daily(env: &RunEnv, a: &Approval, text: &str) {
    let who = env
        .roles
        .roles
        .get(&a.role)
        .map_or(a.role.as_str(), |r| r.display_name.as_str());
    if let Err(e) = crate::base::blocking::run(|| env.log.write_line(env.clock.now(), who, text)) {
        tracing::warn!("approvals: cannot write the daily log: {e}");
    }
}
